/* cmd_index: `pipectl index build|info`: builds a FAISS index over a corpus .npy for the search
 * stage's `index:`, or describes one. Needs a build with FAISS (docs/pipeline-yaml.md). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pl_blas.h"
#include "pl_cli.h"
#include "pl_npy.h"
#include "pl_search.h"

enum {
    PL__O_CORPUS = 256,
    PL__O_FACTORY,
    PL__O_OUTPUT,
    PL__O_METRIC,
    PL__O_TRAIN,
    PL__O_THREADS,
};

/* The options of `index build` (`index info` takes none). */
const pl_cli_opt pl_cli_index_opts[] = {
    {"corpus", 0, "FILE.npy", NULL,
     "build: the corpus, f32 [n, d] (row i is document i; leading dimensions count as rows: a "
     "sink's [batches, n, d] works)",
     PL__O_CORPUS},
    {"factory", 0, "STRING", NULL,
     "build: FAISS index_factory string: \"IVF4096,Flat\", \"HNSW32\", \"IVF1024,PQ32\", "
     "\"Flat\" (exact)...",
     PL__O_FACTORY},
    {"output", 'o', "FILE", NULL, "build: the index file to write", PL__O_OUTPUT},
    {"metric", 0, "M", "ip|l2|cosine",
     "build: ip (default), l2 or cosine (rows normalised, inner product); the search stage's "
     "metric must match",
     PL__O_METRIC},
    {"train", 0, "N", NULL, "build: train on the first N rows only (default: all)", PL__O_TRAIN},
    {"threads", 0, "N", NULL, "build: FAISS (OpenMP) threads while building (default: all cores)",
     PL__O_THREADS},
    {0},
};

static int pl__no_faiss(void)
{
    pl_error err;
    pl_error_set(&err, PL_EINPUT,
                 "error: 'pipectl index' needs FAISS, and this pipectl was built without it; "
                 "install libfaiss-dev and rebuild (cmake finds it; -DPL_WITH_FAISS=ON insists)");
    return pl_cli_fail(&err);
}

/* Reads an f32 [..., n, d] .npy into *out (malloc'ed, the caller frees). */
static pl_status pl__load_corpus(const char *path, float **out, int64_t *n, int64_t *d,
                                 pl_error *err)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return pl_error_set(err, PL_EINPUT, "error: cannot open corpus '%s': %s", path,
                            strerror(errno));
    pl_npy_info info;
    pl_status st = pl_npy_read_header(f, path, &info, err);
    if (st == PL_OK &&
        (!pl_npy_descr_matches(info.descr, PL_F32) || info.rank < 2 || info.fortran_order))
        st = pl_error_set(err, PL_EINPUT,
                          "error: corpus '%s' holds '%s' of rank %d%s; the index needs f32 "
                          "[n, d] in C order (numpy: np.save(path, x.astype(np.float32)))",
                          path, info.descr, info.rank,
                          info.fortran_order ? " in Fortran order" : "");
    if (st == PL_OK) {
        *out = malloc(info.data_bytes ? info.data_bytes : 1);
        if (!*out) st = pl_error_set(err, PL_ENOMEM, "error: out of memory reading '%s'", path);
    }
    if (st == PL_OK && (fseek(f, (long)info.data_offset, SEEK_SET) != 0 ||
                        fread(*out, 1, info.data_bytes, f) != info.data_bytes))
        st = pl_error_set(err, PL_EINPUT, "error: corpus '%s' is shorter than its header says",
                          path);
    fclose(f);
    if (st != PL_OK) {
        free(*out);
        *out = NULL;
        return st;
    }
    /* Leading dimensions are rows too: a sink's [batches, rows, d] file is a corpus. */
    *d = info.shape[info.rank - 1];
    *n = 1;
    for (int i = 0; i < info.rank - 1; i++)
        *n *= info.shape[i];
    return PL_OK;
}

static int pl__index_build(const char *corpus, const char *factory, const char *out,
                           pl_metric metric, const char *metric_s, int64_t train, int64_t threads)
{
    pl_error err;
    if (!pl_faiss_available()) return pl__no_faiss();
    /* FAISS trains through BLAS (runtime/base/pl_blas.h): loaded first, so that a process with
     * no room for its work buffer fails here with out of memory. */
    if (pl_blas_load(&err) != PL_OK) return pl_cli_fail(&err);
    float *x = NULL;
    int64_t n = 0, d = 0;
    if (pl__load_corpus(corpus, &x, &n, &d, &err) != PL_OK) return pl_cli_fail(&err);
    pl_status st = pl_faiss_build(x, n, d, factory, metric, train, (int)threads, out, &err);
    free(x);
    if (st != PL_OK) return pl_cli_fail(&err);
    printf("wrote %s: %s over %lld x %lld vectors (%s)\n", out, factory, (long long)n, (long long)d,
           metric_s);
    return 0;
}

static int pl__index_info(const char *file)
{
    if (!pl_faiss_available()) return pl__no_faiss();
    pl_error err;
    pl_faiss *ix = NULL;
    if (pl_faiss_load(file, 0, 0, &ix, &err) != PL_OK) return pl_cli_fail(&err);
    int m = pl_faiss_metric(ix);
    printf("%s: %s, %lld vectors of dimension %lld, metric %s\n", file, pl_faiss_describe(ix),
           (long long)pl_faiss_ntotal(ix), (long long)pl_faiss_dim(ix),
           m == PL_METRIC_IP   ? "inner product (search metric ip or cosine)"
           : m == PL_METRIC_L2 ? "l2"
                               : "other (not usable by the search stage)");
    pl_faiss_free(ix);
    return 0;
}

int pl_cmd_index(int argc, char **argv)
{
    const pl_cmd *cmd = pl_cmd_find("index", NULL);
    const char *corpus = NULL, *factory = NULL, *out = NULL;
    const pl_cli_opt *given = NULL;
    int64_t train = 0, threads = 0;
    int metric_k = 0;
    static const pl_metric metrics[] = {PL_METRIC_IP, PL_METRIC_L2, PL_METRIC_COSINE};
    static const char *const metric_names[] = {"ip", "l2", "cosine"};
    pl_cli_args a;
    pl_cli_args_init(&a, cmd, argc, argv);
    const char *v;
    int id;
    while ((id = pl_cli_next(&a, &v)) > 0) {
        for (const pl_cli_opt *o = pl_cli_index_opts; !given && o->name; o++)
            if (o->id == id) given = o;
        switch (id) {
        case PL__O_CORPUS:
            corpus = v;
            break;
        case PL__O_FACTORY:
            factory = v;
            break;
        case PL__O_OUTPUT:
            out = v;
            break;
        case PL__O_METRIC:
            if ((metric_k = pl_cli_choice(cmd, id, v)) < 0) return 2;
            break;
        case PL__O_TRAIN:
            if (pl_cli_int(cmd, id, v, 0, INT64_MAX, &train)) return 2;
            break;
        case PL__O_THREADS:
            if (pl_cli_int(cmd, id, v, 0, 4096, &threads)) return 2;
            break;
        }
    }
    if (id < 0) return a.rc;
    const char *sub = a.n_operands > 0 ? a.operands[0] : "";
    if (strcmp(sub, "build") == 0) {
        if (a.n_operands > 1)
            return pl_cli_usage_error(cmd,
                                      "'pipectl index build' takes no file operand; '%s' is "
                                      "one (the index file is -o FILE)",
                                      a.operands[1]);
        if (!corpus || !factory || !out)
            return pl_cli_usage_error(cmd, "'pipectl index build' needs --corpus FILE.npy, "
                                           "--factory STRING and -o FILE");
        return pl__index_build(corpus, factory, out, metrics[metric_k], metric_names[metric_k],
                               train, threads);
    }
    if (strcmp(sub, "info") == 0) {
        if (given)
            return pl_cli_usage_error(cmd,
                                      "'pipectl index info' takes no options (--%s is one "
                                      "of 'index build')",
                                      given->name);
        if (a.n_operands != 2)
            return pl_cli_usage_error(cmd, "'pipectl index info' needs one index file");
        return pl__index_info(a.operands[1]);
    }
    if (sub[0])
        return pl_cli_usage_error(cmd, "'pipectl index' needs 'build' or 'info', got '%s'", sub);
    return pl_cli_usage_error(cmd, "'pipectl index' needs 'build' or 'info'");
}
