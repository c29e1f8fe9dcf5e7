// search_faiss: the FAISS side of the search stage (pl_search.h) behind extern "C". Debian's
// libfaiss-dev ships the C++ library only (its C API headers without the objects), so this is
// the one C++ file of pipectl; no exception leaves it.
#include <cxxabi.h>
#include <faiss/AutoTune.h>
#include <faiss/IndexHNSW.h>
#include <faiss/IndexFlat.h>
#include <faiss/IndexIVF.h>
#include <faiss/IndexIVFFlat.h>
#include <faiss/Index.h>
#include <faiss/impl/AuxIndexStructures.h>
#include <faiss/impl/FaissException.h>
#include <faiss/index_factory.h>
#include <faiss/index_io.h>
#include <faiss/utils/distances.h>
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <atomic>
#include <exception>
#include <mutex>
#include <string>
#include <typeinfo>
#include <vector>

extern "C" {
#include "pl_blas.h"
#include "pl_search.h"
}

struct pl_faiss {
    faiss::Index *index;
    std::string what; // class name, for reports
    // An IndexIVFFlat whose quantizer is a flat index: pipectl scans it itself with BLAS (see
    // pl__ivf_search). Borrowed from `index`; NULL otherwise.
    const faiss::IndexIVFFlat *ivf = nullptr;
    const faiss::IndexFlat *coarse = nullptr;
    std::vector<std::vector<float>> norms; // L2: |x|^2 of each list's vectors
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

// FAISS's long loops (the flat scan's BLAS blocks, IVF's lists, HNSW's query chunks) call
// InterruptCallback::check(), which throws when the process-wide callback wants it: this one asks
// pipectl's interrupt, so Ctrl-C stops a FAISS search within a block. Installed once, at the first
// load, unless the program embedding pipectl has installed its own.
namespace
{
struct pl__faiss_interrupt : faiss::InterruptCallback {
    bool want_interrupt() override
    {
        return pl_search_interrupted();
    }
};
std::once_flag pl__faiss_interrupt_once;
} // namespace

static void pl__faiss_install_interrupt()
{
    std::call_once(pl__faiss_interrupt_once, [] {
        std::lock_guard<std::mutex> g(faiss::InterruptCallback::lock);
        if (!faiss::InterruptCallback::instance)
            faiss::InterruptCallback::instance.reset(new pl__faiss_interrupt());
    });
}

extern "C" pl_status pl_faiss_load(const char *path, int64_t nprobe, int64_t ef_search,
                                   pl_faiss **out, pl_error *err)
{
    *out = nullptr;
    try {
        pl__faiss_install_interrupt();
    } catch (const std::exception &) {
        // No callback: a search then runs its block to the end before the stop is seen.
    }
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
            pl_error_set(err, PL_EINPUT,
                         "error: FAISS index '%s' has no '%s' to set (%s is not %s)", path,
                         i == 0 ? "nprobe" : "ef_search", f->what.c_str(),
                         i == 0 ? "an IVF index" : "an HNSW index");
            pl_faiss_free(f);
            return PL_EINPUT;
        }
    }
    f->what = pl__faiss_what(f->index); /* with the parameters as set */
    auto ivf = dynamic_cast<const faiss::IndexIVFFlat *>(f->index);
    auto coarse = ivf ? dynamic_cast<const faiss::IndexFlat *>(ivf->quantizer) : nullptr;
    if (ivf && coarse &&
        (ivf->metric_type == faiss::METRIC_INNER_PRODUCT || ivf->metric_type == faiss::METRIC_L2) &&
        (coarse->metric_type == faiss::METRIC_INNER_PRODUCT ||
         coarse->metric_type == faiss::METRIC_L2) &&
        ivf->nlist <= (size_t)INT32_MAX) {
        try {
            if (ivf->metric_type == faiss::METRIC_L2) {
                f->norms.resize(ivf->nlist);
                int64_t d = ivf->d;
                for (size_t l = 0; l < ivf->nlist; l++) {
                    size_t n = ivf->invlists->list_size(l);
                    faiss::InvertedLists::ScopedCodes codes(ivf->invlists, l);
                    const float *x = reinterpret_cast<const float *>(codes.get());
                    f->norms[l].resize(n);
                    for (size_t i = 0; i < n; i++) {
                        double sum = 0;
                        for (int64_t t = 0; t < d; t++)
                            sum += (double)x[i * d + t] * x[i * d + t];
                        f->norms[l][i] = (float)sum;
                    }
                }
            }
            f->ivf = ivf;
            f->coarse = coarse;
            f->what += ", scanned by pipectl with BLAS";
        } catch (const std::exception &) {
            f->norms.clear(); // no memory for the norms: FAISS's own search
        }
    }
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

namespace
{

struct hit {
    float s; // larger is nearer
    int64_t id;
};

inline bool better(const hit &a, const hit &b)
{
    return a.s > b.s || (a.s == b.s && a.id < b.id);
}

// Min-heap of capacity k by nearness (root: the worst kept), as in search_exact.c.
inline void offer(hit *heap, int64_t &size, int64_t k, hit h)
{
    if (size < k) {
        int64_t i = size++;
        heap[i] = h;
        while (i > 0 && better(heap[(i - 1) / 2], heap[i])) {
            std::swap(heap[i], heap[(i - 1) / 2]);
            i = (i - 1) / 2;
        }
        return;
    }
    if (!better(h, heap[0])) return;
    int64_t i = 0;
    for (;;) {
        int64_t l = 2 * i + 1, r = l + 1, w = i;
        hit wv = h;
        if (l < size && better(wv, heap[l])) w = l, wv = heap[l];
        if (r < size && better(wv, heap[r])) w = r;
        if (w == i) break;
        heap[i] = heap[w];
        i = w;
    }
    heap[i] = h;
}

// FAISS's own search on query blocks, one FAISS thread each.
struct native_job {
    const faiss::Index *index;
    const float *q;
    int64_t nq, d, k, block;
    int64_t *labels;
    float *dist;
    std::vector<std::string> errs; // per task, empty when fine
};

void native_task(void *arg, int64_t t, int /* slot */)
{
    auto *j = static_cast<native_job *>(arg);
    int64_t q0 = t * j->block, n = std::min(j->block, j->nq - q0);
    if (pl_search_interrupted()) {
        j->errs[(size_t)t] = "interrupted";
        return;
    }
    try {
        omp_set_num_threads(1); // the calling thread's own setting
        j->index->search(n, j->q + q0 * j->d, j->k, j->dist + q0 * j->k,
                         reinterpret_cast<faiss::Index::idx_t *>(j->labels + q0 * j->k));
    } catch (const std::exception &e) {
        j->errs[(size_t)t] = pl__faiss_msg(e);
    }
}

// IVF-Flat scanned by lists: every probed list is one pool task that multiplies the queries
// probing it by the list's vectors (sgemm, a chunk at a time), as the exact search multiplies
// queries by corpus tiles, instead of one dot product per (query, vector) pair. Each list is read
// once per batch, whatever the number of queries probing it.
struct ivf_job {
    const pl_faiss *f;
    const float *q;
    int64_t nq, d, k;
    bool l2;
    std::vector<int64_t> lists; // probed lists, one per task
    std::vector<int64_t> start; // [nlist + 1]: CSR offsets into qidx
    std::vector<int32_t> qidx;  // queries probing each list
    std::vector<hit> heaps;     // [slot][nq][k]
    std::vector<int64_t> sizes; // [slot][nq]
    std::vector<float> qs, sc;  // [slot]: gathered queries, scores
    int64_t chunk;
    std::atomic<bool> stopped{false}; // an interrupt was seen: the other tasks skip their lists
};

void ivf_task(void *arg, int64_t t, int slot)
{
    auto *j = static_cast<ivf_job *>(arg);
    if (j->stopped.load(std::memory_order_relaxed)) return;
    const faiss::IndexIVFFlat *ivf = j->f->ivf;
    int64_t l = j->lists[(size_t)t], d = j->d;
    int64_t m = j->start[(size_t)l + 1] - j->start[(size_t)l];
    const int32_t *qi = j->qidx.data() + j->start[(size_t)l];
    float *qs = j->qs.data() + (size_t)slot * (size_t)(j->nq * d);
    float *sc = j->sc.data() + (size_t)slot * (size_t)(j->nq * j->chunk);
    hit *heaps = j->heaps.data() + (size_t)slot * (size_t)(j->nq * j->k);
    int64_t *sizes = j->sizes.data() + (size_t)slot * (size_t)j->nq;
    for (int64_t i = 0; i < m; i++)
        std::memcpy(qs + i * d, j->q + (int64_t)qi[i] * d, (size_t)d * sizeof(float));
    size_t n = ivf->invlists->list_size((size_t)l);
    faiss::InvertedLists::ScopedCodes codes(ivf->invlists, (size_t)l);
    faiss::InvertedLists::ScopedIds ids(ivf->invlists, (size_t)l);
    const float *x = reinterpret_cast<const float *>(codes.get());
    for (int64_t c0 = 0; c0 < (int64_t)n; c0 += j->chunk) {
        if (pl_search_interrupted()) {
            j->stopped.store(true, std::memory_order_relaxed);
            return;
        }
        int64_t cn = std::min<int64_t>(j->chunk, (int64_t)n - c0);
        pl_blas_sgemm(true, m, cn, d, 1.0f, qs, d, x + c0 * d, d, 0.0f, sc, cn);
        for (int64_t i = 0; i < m; i++) {
            float *row = sc + i * cn;
            if (j->l2) {
                const float *nr = j->f->norms[(size_t)l].data() + c0;
                for (int64_t v = 0; v < cn; v++)
                    row[v] = 2.0f * row[v] - nr[v];
            }
            hit *heap = heaps + (int64_t)qi[i] * j->k;
            int64_t &size = sizes[qi[i]];
            for (int64_t v = 0; v < cn; v++) {
                float s = row[v];
                if (s != s) s = -INFINITY;
                hit h{s, ids[(size_t)(c0 + v)]};
                if (size == j->k && !better(h, heap[0])) continue;
                offer(heap, size, j->k, h);
            }
        }
    }
}

} // namespace

// PL_EINTR, the message without "error: " as the others here (the caller adds it).
static pl_status pl__faiss_interrupted(pl_error *err)
{
    return pl_error_set(err, PL_EINTR, "interrupted while in the FAISS search");
}

static pl_status pl__ivf_search(const pl_faiss *f, pl_pool *pool, int parallel, int64_t nq,
                                const float *q, int64_t k, int64_t *labels, float *dist,
                                pl_error *err)
{
    const faiss::IndexIVFFlat *ivf = f->ivf;
    int64_t d = ivf->d, nlist = (int64_t)ivf->nlist;
    int64_t nprobe = std::min<int64_t>(std::max<int64_t>((int64_t)ivf->nprobe, 1), nlist);
    // The coarse step is itself an exact search over the centroids: pipectl's, on the pool.
    std::vector<int32_t> probe((size_t)(nq * nprobe));
    std::vector<float> cnorm((size_t)nlist);
    pl_metric cm = f->coarse->metric_type == faiss::METRIC_L2 ? PL_METRIC_L2 : PL_METRIC_IP;
    const float *cx = f->coarse->get_xb();
    if (pl_search_norms(cx, PL_F32, nlist, d, cm, cnorm.data()) >= 0)
        return pl_error_set(err, PL_ERUNTIME, "the index's centroids are not finite");
    pl_search_corpus cc = {cx, PL_F32, nlist, d, cnorm.data()};
    pl_status cs = pl_search_exact(pool, parallel, q, nq, &cc, cm, nprobe, probe.data(), nullptr,
                                   "FAISS coarse search", err);
    if (cs == PL_EINTR) return pl__faiss_interrupted(err);
    if (cs != PL_OK) return cs;
    ivf_job j;
    j.f = f;
    j.q = q;
    j.nq = nq;
    j.d = d;
    j.k = k;
    j.l2 = ivf->metric_type == faiss::METRIC_L2;
    j.chunk = 1024;
    j.start.assign((size_t)nlist + 1, 0);
    for (int32_t l : probe)
        j.start[(size_t)l + 1]++;
    for (int64_t l = 0; l < nlist; l++) {
        if (j.start[(size_t)l + 1] > 0) j.lists.push_back(l);
        j.start[(size_t)l + 1] += j.start[(size_t)l];
    }
    j.qidx.resize(probe.size());
    std::vector<int64_t> fill(j.start.begin(), j.start.end() - 1);
    for (int64_t i = 0; i < nq; i++)
        for (int64_t p = 0; p < nprobe; p++)
            j.qidx[(size_t)fill[(size_t)probe[(size_t)(i * nprobe + p)]]++] = (int32_t)i;
    // Large lists first, so the pool does not end on one long task.
    std::sort(j.lists.begin(), j.lists.end(), [ivf](int64_t a, int64_t b) {
        size_t na = ivf->invlists->list_size((size_t)a), nb = ivf->invlists->list_size((size_t)b);
        return na != nb ? na > nb : a < b;
    });
    int slots = std::max(1, std::min(parallel, pl_pool_threads(pool) + 1));
    j.heaps.resize((size_t)slots * (size_t)(nq * k));
    j.sizes.assign((size_t)slots * (size_t)nq, 0);
    j.qs.resize((size_t)slots * (size_t)(nq * d));
    j.sc.resize((size_t)slots * (size_t)(nq * j.chunk));
    pl_pool_run(pool, (int64_t)j.lists.size(), slots, ivf_task, &j);
    if (j.stopped.load()) return pl__faiss_interrupted(err);
    std::vector<hit> all;
    for (int64_t i = 0; i < nq; i++) {
        all.clear();
        for (int s = 0; s < slots; s++) {
            const hit *h = j.heaps.data() + (size_t)s * (size_t)(nq * k) + (size_t)(i * k);
            all.insert(all.end(), h, h + j.sizes[(size_t)s * (size_t)nq + (size_t)i]);
        }
        std::sort(all.begin(), all.end(), better);
        double qq = 0;
        if (j.l2)
            for (int64_t t = 0; t < d; t++)
                qq += (double)q[i * d + t] * q[i * d + t];
        for (int64_t t = 0; t < k; t++) {
            bool have = t < (int64_t)all.size();
            labels[i * k + t] = have ? all[(size_t)t].id : -1;
            double v = have ? all[(size_t)t].s : (j.l2 ? INFINITY : -INFINITY);
            if (j.l2 && have) v = std::max(0.0, qq - v);
            if (dist) dist[i * k + t] = (float)v;
        }
    }
    return PL_OK;
}

extern "C" pl_status pl_faiss_search(const pl_faiss *f, pl_pool *pool, int parallel, int64_t nq,
                                     const float *queries, int64_t k, int64_t *labels, float *dist,
                                     pl_error *err)
{
    if (nq <= 0) return PL_OK;
    if (parallel < 1) parallel = 1;
    try {
        if (f->ivf) return pl__ivf_search(f, pool, parallel, nq, queries, k, labels, dist, err);
        native_job j;
        j.index = f->index;
        j.q = queries;
        j.nq = nq;
        j.d = f->index->d;
        j.k = k;
        j.block = (nq + parallel - 1) / parallel;
        j.labels = labels;
        std::vector<float> own;
        if (!dist) {
            own.resize((size_t)(nq * k));
            dist = own.data();
        }
        j.dist = dist;
        int64_t tasks = (nq + j.block - 1) / j.block;
        j.errs.resize((size_t)tasks);
        pl_pool_run(pool, tasks, parallel, native_task, &j);
        // FAISS's InterruptCallback throws "computation interrupted" from inside its loops.
        if (pl_search_interrupted())
            for (const std::string &e : j.errs)
                if (!e.empty()) return pl__faiss_interrupted(err);
        for (const std::string &e : j.errs)
            if (!e.empty())
                return pl_error_set(err, PL_ERUNTIME, "FAISS search failed: %s", e.c_str());
    } catch (const std::bad_alloc &) {
        return pl_error_set(err, PL_ENOMEM, "out of memory in the FAISS search");
    } catch (const std::exception &e) {
        return pl_error_set(err, PL_ERUNTIME, "FAISS search failed: %s", pl__faiss_msg(e));
    }
    return PL_OK;
}

extern "C" pl_status pl_faiss_build(const float *corpus, int64_t n, int64_t d, const char *factory,
                                    pl_metric metric, int64_t train, int threads, const char *path,
                                    pl_error *err)
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
        faiss::MetricType mt =
            metric == PL_METRIC_L2 ? faiss::METRIC_L2 : faiss::METRIC_INNER_PRODUCT;
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
