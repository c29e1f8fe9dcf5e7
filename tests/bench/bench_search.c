/* bench_search: times pipectl's search engines on one corpus and query batch, for
 * tests/bench/run_search_bench.sh (which runs torch and numpy beside it on the same .npy files):
 * exact search (pl_search_exact on a pl_pool, as the search stage runs it), the same BLAS's gemm
 * alone on the same shapes (the rate exact search is measured against), and a FAISS index.
 * Prints one line per measurement: "name=value" pairs, parsed by the driver.
 *   bench_search [--corpus C.npy | --n N --d D] [--queries Q.npy | --nq Q] [--k 10]
 *                [--metric ip|l2|cosine] [--threads T] [--reps R] [--dtype f32|f16|bf16]
 *                [--ids-out IDS.npy] [--index F.faiss --nprobe P --ef-search E]
 *                [--ref-ids IDS.npy] [--gemm] */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pl_half.h"
#include "pl_npy.h"
#include "pl_pool.h"
#include "pl_search.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void die(const char *m)
{
    fprintf(stderr, "bench_search: %s\n", m);
    exit(2);
}

/* Reads a 2-d array of descr `want` ("<f4", "<i4", "<i8") into malloc'ed memory. */
static void *load_npy(const char *path, const char *want, int64_t *rows, int64_t *cols)
{
    FILE *f = fopen(path, "rb");
    if (!f) die("cannot open an input file");
    pl_npy_info info;
    pl_error err;
    if (pl_npy_read_header(f, path, &info, &err) != PL_OK) die(err.msg);
    if (strcmp(info.descr, want) != 0 || info.rank != 2 || info.fortran_order)
        die("an .npy input has the wrong dtype or rank (want C-order 2-d)");
    void *p = malloc(info.data_bytes);
    if (!p) die("out of memory");
    fseek(f, (long)info.data_offset, SEEK_SET);
    if (fread(p, 1, info.data_bytes, f) != info.data_bytes) die("short .npy file");
    fclose(f);
    *rows = info.shape[0];
    *cols = info.shape[1];
    return p;
}

static void save_ids(const char *path, const int32_t *ids, int64_t nq, int64_t k)
{
    char h[256];
    int64_t rest[1] = {k};
    size_t n = pl_npy_format_header(h, sizeof h, PL_I32, nq, 1, rest);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(h, 1, n, f) != n ||
        fwrite(ids, sizeof *ids, (size_t)(nq * k), f) != (size_t)(nq * k))
        die("cannot write --ids-out");
    fclose(f);
}

static float *random_f32(int64_t n, uint64_t seed)
{
    float *p = malloc((size_t)n * sizeof *p);
    if (!p) die("out of memory");
    uint64_t s = seed;
    for (int64_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = (float)((double)(s >> 11) * 0x1p-53 * 2.0 - 1.0);
    }
    return p;
}

typedef struct gemm_job {
    const float *q, *c;
    int64_t nq, n, d, tile;
    float *out; /* per slot: nq * tile */
} gemm_job;

/* The same tiles as the exact search, sgemm only: what BLAS alone reaches on these shapes. */
static void gemm_task(void *arg, int64_t t, int slot)
{
    gemm_job *g = arg;
    int64_t r0 = t * g->tile, rows = g->n - r0 < g->tile ? g->n - r0 : g->tile;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)g->nq, (blasint)rows,
                (blasint)g->d, 1.0f, g->q, (blasint)g->d, g->c + r0 * g->d, (blasint)g->d, 0.0f,
                g->out + (size_t)slot * (size_t)(g->nq * g->tile), (blasint)rows);
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    const char *corpus_path = NULL, *q_path = NULL, *ids_out = NULL, *index_path = NULL,
               *ref_path = NULL, *metric_s = "ip", *dtype_s = "f32";
    int64_t n = 100000, d = 384, nq = 64, k = 10, reps = 5, nprobe = 0, ef = 0;
    int threads = 1;
    bool gemm = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--gemm") == 0) {
            gemm = true;
            continue;
        }
        if (!v) die("an option needs a value");
        i++;
        if (strcmp(a, "--corpus") == 0)
            corpus_path = v;
        else if (strcmp(a, "--queries") == 0)
            q_path = v;
        else if (strcmp(a, "--ids-out") == 0)
            ids_out = v;
        else if (strcmp(a, "--index") == 0)
            index_path = v;
        else if (strcmp(a, "--ref-ids") == 0)
            ref_path = v;
        else if (strcmp(a, "--metric") == 0)
            metric_s = v;
        else if (strcmp(a, "--dtype") == 0)
            dtype_s = v;
        else if (strcmp(a, "--n") == 0)
            n = atoll(v);
        else if (strcmp(a, "--d") == 0)
            d = atoll(v);
        else if (strcmp(a, "--nq") == 0)
            nq = atoll(v);
        else if (strcmp(a, "--k") == 0)
            k = atoll(v);
        else if (strcmp(a, "--reps") == 0)
            reps = atoll(v);
        else if (strcmp(a, "--threads") == 0)
            threads = atoi(v);
        else if (strcmp(a, "--nprobe") == 0)
            nprobe = atoll(v);
        else if (strcmp(a, "--ef-search") == 0)
            ef = atoll(v);
        else
            die("unknown option");
    }
    pl_metric metric = strcmp(metric_s, "l2") == 0       ? PL_METRIC_L2
                       : strcmp(metric_s, "cosine") == 0 ? PL_METRIC_COSINE
                                                         : PL_METRIC_IP;
    float *c, *q;
    int64_t dq;
    if (corpus_path)
        c = load_npy(corpus_path, "<f4", &n, &d);
    else
        c = random_f32(n * d, 1);
    if (q_path) {
        q = load_npy(q_path, "<f4", &nq, &dq);
        if (dq != d) die("queries and corpus differ in dimension");
    } else {
        q = random_f32(nq * d, 2);
    }
    pl_error err;
    pl_pool *pool = NULL;
    if (pl_pool_new(threads - 1, &pool, &err) != PL_OK) die(err.msg);
    int32_t *ids = malloc((size_t)(nq * k) * sizeof *ids);
    double *t = malloc((size_t)reps * sizeof *t);
    double flop = 2.0 * (double)nq * (double)n * (double)d;
    const char *blas = openblas_get_corename();
    if (gemm) {
        gemm_job g = {q, c, nq, n, d, pl_search_tile_rows(d), NULL};
        g.out = malloc((size_t)threads * (size_t)(nq * g.tile) * sizeof(float));
        int64_t tiles = (n + g.tile - 1) / g.tile;
        openblas_set_num_threads(1);
        for (int64_t r = 0; r < reps; r++) {
            double t0 = now_s();
            pl_pool_run(pool, tiles, threads, gemm_task, &g);
            t[r] = now_s() - t0;
        }
        qsort(t, (size_t)reps, sizeof *t, cmp_d);
        printf("what=gemm_tiles threads=%d n=%lld d=%lld nq=%lld ms=%.3f gflops=%.1f blas=%s\n",
               threads, (long long)n, (long long)d, (long long)nq, t[reps / 2] * 1e3,
               flop / t[reps / 2] / 1e9, blas);
        /* One sgemm over the whole corpus, OpenBLAS's own threads. */
        float *out = malloc((size_t)nq * (size_t)n * sizeof(float));
        openblas_set_num_threads(threads);
        for (int64_t r = 0; r < reps && out; r++) {
            double t0 = now_s();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)nq, (blasint)n,
                        (blasint)d, 1.0f, q, (blasint)d, c, (blasint)d, 0.0f, out, (blasint)n);
            t[r] = now_s() - t0;
        }
        openblas_set_num_threads(1);
        qsort(t, (size_t)reps, sizeof *t, cmp_d);
        printf("what=gemm_one threads=%d n=%lld d=%lld nq=%lld ms=%.3f gflops=%.1f blas=%s\n",
               threads, (long long)n, (long long)d, (long long)nq, t[reps / 2] * 1e3,
               flop / t[reps / 2] / 1e9, blas);
        free(out);
        free(g.out);
    }
    if (index_path) {
        pl_faiss *ix = NULL;
        if (pl_faiss_load(index_path, nprobe, ef, &ix, &err) != PL_OK) die(err.msg);
        int64_t *labels = malloc((size_t)(nq * k) * sizeof *labels);
        for (int64_t r = 0; r < reps; r++) {
            double t0 = now_s();
            if (pl_faiss_search(ix, pool, threads, nq, q, k, labels, NULL, &err) != PL_OK)
                die(err.msg);
            t[r] = now_s() - t0;
        }
        qsort(t, (size_t)reps, sizeof *t, cmp_d);
        printf("what=faiss threads=%d index=%s nprobe=%lld ms=%.3f best_ms=%.3f\n", threads,
               pl_faiss_describe(ix), (long long)nprobe, t[reps / 2] * 1e3, t[0] * 1e3);
        for (int64_t i = 0; i < nq * k; i++)
            ids[i] = (int32_t)labels[i];
        free(labels);
        pl_faiss_free(ix);
    } else {
        pl_search_corpus pc = {.data = c, .dtype = PL_F32, .n = n, .d = d};
        uint16_t *half = NULL;
        if (strcmp(dtype_s, "f32") != 0) {
            half = malloc((size_t)(n * d) * sizeof *half);
            bool bf = strcmp(dtype_s, "bf16") == 0;
            for (int64_t i = 0; i < n * d; i++)
                half[i] = bf ? pl_f32_to_bf16(c[i]) : pl_f32_to_f16(c[i]);
            pc.data = half;
            pc.dtype = bf ? PL_BF16 : PL_F16;
        }
        float *norms = malloc((size_t)n * sizeof *norms);
        if (pl_search_norms(pc.data, pc.dtype, n, d, metric, norms) >= 0) die("corpus not finite");
        pc.norms = norms;
        for (int64_t r = 0; r < reps; r++) {
            double t0 = now_s();
            if (pl_search_exact(pool, threads, q, nq, &pc, metric, k, ids, NULL, "bench", &err) !=
                PL_OK)
                die(err.msg);
            t[r] = now_s() - t0;
        }
        qsort(t, (size_t)reps, sizeof *t, cmp_d);
        printf("what=exact threads=%d n=%lld d=%lld nq=%lld k=%lld metric=%s dtype=%s ms=%.3f "
               "best_ms=%.3f gflops=%.1f blas=%s\n",
               threads, (long long)n, (long long)d, (long long)nq, (long long)k, metric_s, dtype_s,
               t[reps / 2] * 1e3, t[0] * 1e3, flop / t[reps / 2] / 1e9, blas);
        free(norms);
        free(half);
    }
    if (ids_out) save_ids(ids_out, ids, nq, k);
    if (ref_path) {
        int64_t rn, rk;
        int32_t *ref = load_npy(ref_path, "<i4", &rn, &rk);
        int64_t same = 0, hit = 0;
        for (int64_t i = 0; i < nq && i < rn; i++)
            for (int64_t a = 0; a < k && a < rk; a++) {
                same += ids[i * k + a] == ref[i * rk + a];
                for (int64_t b = 0; b < k; b++)
                    if (ids[i * k + b] == ref[i * rk + a]) {
                        hit++;
                        break;
                    }
            }
        printf("what=compare same_position=%lld recall=%.4f\n", (long long)same,
               (double)hit / (double)(nq * k));
        free(ref);
    }
    free(ids);
    free(t);
    free(c);
    free(q);
    pl_pool_free(pool);
    return 0;
}
