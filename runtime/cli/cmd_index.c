/* cmd_index: `pipectl index build|info`: builds a FAISS index over a corpus .npy for the search
 * stage's `index:`, or describes one. Needs a build with FAISS (docs/pipeline-yaml.md). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pl_cli.h"
#include "pl_npy.h"
#include "pl_search.h"

static int pl__index_usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "error: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "; see 'pipectl index --help'\n");
    return 2;
}

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

static int pl__index_build(int argc, char **argv)
{
    const char *corpus = NULL, *factory = NULL, *out = NULL, *metric_s = "ip";
    long long train = 0, threads = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_value = i + 1 < argc;
        if (strcmp(a, "--corpus") == 0 && has_value)
            corpus = argv[++i];
        else if (strcmp(a, "--factory") == 0 && has_value)
            factory = argv[++i];
        else if ((strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) && has_value)
            out = argv[++i];
        else if (strcmp(a, "--metric") == 0 && has_value)
            metric_s = argv[++i];
        else if ((strcmp(a, "--train") == 0 || strcmp(a, "--threads") == 0) && has_value) {
            char *end;
            errno = 0;
            long long v = strtoll(argv[i + 1], &end, 10);
            if (errno || !*argv[i + 1] || *end || v < 0)
                return pl__index_usage("%s needs a whole number >= 0", a);
            *(strcmp(a, "--train") == 0 ? &train : &threads) = v;
            i++;
        } else
            return pl__index_usage("unknown or incomplete option '%s' for 'pipectl index build'",
                                   a);
    }
    if (!corpus || !factory || !out)
        return pl__index_usage("%s", "'pipectl index build' needs --corpus FILE.npy, --factory "
                                     "STRING and -o FILE");
    pl_metric metric;
    if (strcmp(metric_s, "ip") == 0)
        metric = PL_METRIC_IP;
    else if (strcmp(metric_s, "l2") == 0)
        metric = PL_METRIC_L2;
    else if (strcmp(metric_s, "cosine") == 0)
        metric = PL_METRIC_COSINE;
    else
        return pl__index_usage("--metric is ip, l2 or cosine, not '%s'", metric_s);
    pl_error err;
    if (!pl_faiss_available()) return pl__no_faiss();
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

static int pl__index_info(int argc, char **argv)
{
    if (argc != 2) return pl__index_usage("%s", "'pipectl index info' needs one index file");
    if (!pl_faiss_available()) return pl__no_faiss();
    pl_error err;
    pl_faiss *ix = NULL;
    if (pl_faiss_load(argv[1], 0, 0, &ix, &err) != PL_OK) return pl_cli_fail(&err);
    int m = pl_faiss_metric(ix);
    printf("%s: %s, %lld vectors of dimension %lld, metric %s\n", argv[1], pl_faiss_describe(ix),
           (long long)pl_faiss_ntotal(ix), (long long)pl_faiss_dim(ix),
           m == PL_METRIC_IP   ? "inner product (search metric ip or cosine)"
           : m == PL_METRIC_L2 ? "l2"
                               : "other (not usable by the search stage)");
    pl_faiss_free(ix);
    return 0;
}

int pl_cmd_index(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "build") == 0) return pl__index_build(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "info") == 0) return pl__index_info(argc - 1, argv + 1);
    return pl__index_usage("%s", "'pipectl index' needs 'build' or 'info'");
}
