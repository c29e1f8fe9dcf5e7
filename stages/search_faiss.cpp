// search_faiss: the FAISS side of the search stage (pl_search.h) behind extern "C". Debian's
// libfaiss-dev ships the C++ library only (its C API headers without the objects), so this is
// the one C++ file of pipectl; no exception leaves it.
#include <cxxabi.h>
#include <faiss/AutoTune.h>
#include <faiss/IndexHNSW.h>
#include <faiss/IndexIVF.h>
#include <faiss/Index.h>
#include <faiss/impl/FaissException.h>
#include <faiss/index_factory.h>
#include <faiss/index_io.h>
#include <faiss/utils/distances.h>
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <typeinfo>
#include <vector>

extern "C" {
#include "pl_search.h"
}

struct pl_faiss {
    faiss::Index *index;
    std::string what; // class name, for reports
};

// FAISS's messages start with the C++ function, file and line, or with the failed assertion:
// keep what a user can act on.
static const char *pl__faiss_msg(const std::exception &e)
{
    const char *m = e.what();
    if (const char *p = std::strstr(m, "failed: ")) return p + 8;
    if (std::strncmp(m, "Error in ", 9) == 0)
        if (const char *at = std::strstr(m, " at "))
            if (const char *p = std::strstr(at, ": ")) return p + 2;
    return m;
}

// "IndexIVFFlat (nlist 4096, nprobe 16)": the class without its namespace, and the IVF/HNSW
// parameters that search uses.
static std::string pl__faiss_what(const faiss::Index *ix)
{
    int status = 0;
    char *dm = abi::__cxa_demangle(typeid(*ix).name(), nullptr, nullptr, &status);
    std::string w = status == 0 && dm ? dm : typeid(*ix).name();
    std::free(dm);
    if (w.rfind("faiss::", 0) == 0) w = w.substr(7);
    char extra[96] = "";
    if (auto ivf = dynamic_cast<const faiss::IndexIVF *>(ix))
        std::snprintf(extra, sizeof extra, " (nlist %zu, nprobe %zu)", ivf->nlist, ivf->nprobe);
    else if (auto h = dynamic_cast<const faiss::IndexHNSW *>(ix))
        std::snprintf(extra, sizeof extra, " (M %d, efSearch %d)", h->hnsw.nb_neighbors(1) / 2,
                      h->hnsw.efSearch);
    return w + extra;
}

extern "C" bool pl_faiss_available(void)
{
    return true;
}

extern "C" pl_status pl_faiss_load(const char *path, int64_t nprobe, int64_t ef_search,
                                   pl_faiss **out, pl_error *err)
{
    *out = nullptr;
    pl_faiss *f = new (std::nothrow) pl_faiss();
    if (!f) return pl_error_set(err, PL_ENOMEM, "error: out of memory loading '%s'", path);
    try {
        f->index = faiss::read_index(path, faiss::IO_FLAG_READ_ONLY);
    } catch (const std::exception &e) {
        delete f;
        return pl_error_set(err, PL_EINPUT,
                            "error: cannot load FAISS index '%s' (missing, unreadable or not an "
                            "index written by FAISS): %s",
                            path, pl__faiss_msg(e));
    }
    f->what = pl__faiss_what(f->index);
    const char *names[2] = {"nprobe", "efSearch"};
    int64_t vals[2] = {nprobe, ef_search};
    for (int i = 0; i < 2; i++) {
        if (vals[i] <= 0) continue;
        try {
            faiss::ParameterSpace().set_index_parameter(f->index, names[i], (double)vals[i]);
        } catch (const std::exception &) {
            pl_error_set(err, PL_EINPUT, "error: FAISS index '%s' has no '%s' to set (%s is not %s)",
                         path, i == 0 ? "nprobe" : "ef_search", f->what.c_str(),
                         i == 0 ? "an IVF index" : "an HNSW index");
            pl_faiss_free(f);
            return PL_EINPUT;
        }
    }
    f->what = pl__faiss_what(f->index); /* with the parameters as set */
    *out = f;
    return PL_OK;
}

extern "C" void pl_faiss_free(pl_faiss *f)
{
    if (!f) return;
    delete f->index;
    delete f;
}

extern "C" int64_t pl_faiss_dim(const pl_faiss *f)
{
    return f->index->d;
}

extern "C" int64_t pl_faiss_ntotal(const pl_faiss *f)
{
    return f->index->ntotal;
}

extern "C" int pl_faiss_metric(const pl_faiss *f)
{
    switch (f->index->metric_type) {
    case faiss::METRIC_INNER_PRODUCT:
        return PL_METRIC_IP;
    case faiss::METRIC_L2:
        return PL_METRIC_L2;
    default:
        return -1;
    }
}

extern "C" const char *pl_faiss_describe(const pl_faiss *f)
{
    return f->what.c_str();
}

extern "C" pl_status pl_faiss_search(const pl_faiss *f, int64_t nq, const float *queries,
                                     int64_t k, int64_t *labels, float *dist, pl_error *err)
{
    try {
        // pipectl's pool parallelises; FAISS's OpenMP stays on this thread (the setting is the
        // calling thread's own).
        omp_set_num_threads(1);
        std::vector<float> d;
        if (!dist) {
            d.resize((size_t)(nq * k));
            dist = d.data();
        }
        static_assert(sizeof(faiss::Index::idx_t) == sizeof(int64_t), "FAISS ids are 64-bit");
        f->index->search(nq, queries, k, dist, reinterpret_cast<faiss::Index::idx_t *>(labels));
    } catch (const std::exception &e) {
        return pl_error_set(err, PL_ERUNTIME, "FAISS search failed: %s", pl__faiss_msg(e));
    }
    return PL_OK;
}

extern "C" pl_status pl_faiss_build(const float *corpus, int64_t n, int64_t d, const char *factory,
                                    pl_metric metric, int64_t train, int threads,
                                    const char *path, pl_error *err)
{
    faiss::Index *ix = nullptr;
    try {
        if (threads > 0) omp_set_num_threads(threads);
        std::vector<float> normed;
        const float *x = corpus;
        if (metric == PL_METRIC_COSINE) {
            normed.assign(corpus, corpus + (size_t)(n * d));
            faiss::fvec_renorm_L2((size_t)d, (size_t)n, normed.data());
            x = normed.data();
        }
        faiss::MetricType mt = metric == PL_METRIC_L2 ? faiss::METRIC_L2
                                                      : faiss::METRIC_INNER_PRODUCT;
        try {
            ix = faiss::index_factory((int)d, factory, mt);
        } catch (const std::exception &e) {
            return pl_error_set(err, PL_EINPUT,
                                "error: FAISS cannot make an index from factory string '%s': %s",
                                factory, pl__faiss_msg(e));
        }
        int64_t nt = train > 0 && train < n ? train : n;
        if (!ix->is_trained) ix->train(nt, x);
        ix->add(n, x);
        try {
            faiss::write_index(ix, path);
        } catch (const std::exception &e) {
            delete ix;
            return pl_error_set(err, PL_EINPUT, "error: cannot write FAISS index '%s': %s", path,
                                pl__faiss_msg(e));
        }
    } catch (const std::exception &e) {
        delete ix;
        return pl_error_set(err, PL_ERUNTIME, "error: building the FAISS index failed: %s",
                            pl__faiss_msg(e));
    }
    delete ix;
    return PL_OK;
}
