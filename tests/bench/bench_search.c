/* bench_search: times pipectl's search engines on one corpus and query batch, for
 * tests/bench/run_search_bench.sh (which runs torch and numpy beside it on the same .npy files):
 * exact search (pl_search_exact on a pl_pool, as the search stage runs it), the same BLAS's gemm
 * alone on the same shapes (the rate exact search is measured against), and a FAISS index.
 * Prints one line per measurement: "name=value" pairs, parsed by the driver.
 *   bench_search [--corpus C.npy | --n N --d D] [--queries Q.npy | --nq Q] [--k 10]
 *                [--metric ip|l2|cosine] [--threads T] [--reps R] [--dtype f32|f16|bf16]
 *                [--ids-out IDS.npy] [--index F.faiss --nprobe P --ef-search E]
 *                [--ref-ids IDS.npy] [--gemm] [--sweep "1 2 4 8 16"] [--rep-budget S]
 *                [--after-blas]
 * --sweep runs every thread count on the same data and pool (one helper fewer than the most
 * threads) and ends with a table: per thread count the exact search's median batch with its
 * profile (pl_search_prof: sgemm, selection, merge and idle time), the same tiles through sgemm
 * alone and, with --gemm, one sgemm on OpenBLAS's own threads. Those are measured last, after
 * every pool run: OpenBLAS's threads spin (sched_yield) for about 2^28 cycles after each call
 * and would take cores from whatever runs next. --rep-budget S: at a thread count whose warm-up
 * batch took w seconds, min(reps, max(1, S / w)) reps (the budget keeps a sweep at 1M rows short).
 * --after-blas: at the end, the exact search at the most threads measured again right after one
 * sgemm on as many OpenBLAS threads (what=exact_after_blas against what=exact shows what
 * OpenBLAS's spinning threads cost). */
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

typedef struct result {
    int threads;
    double ms, best_ms;
    pl_search_prof prof; /* of the median rep */
    double tiles_ms, one_ms;
    bool same_ids; /* as the first thread count's */
} result;

static int cmp_prof(const void *a, const void *b)
{
    double x = ((const pl_search_prof *)a)->wall_s, y = ((const pl_search_prof *)b)->wall_s;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    const char *corpus_path = NULL, *q_path = NULL, *ids_out = NULL, *index_path = NULL,
               *ref_path = NULL, *metric_s = "ip", *dtype_s = "f32", *sweep = NULL;
    int64_t n = 100000, d = 384, nq = 64, k = 10, reps = 5, nprobe = 0, ef = 0;
    double budget = 0;
    int threads = 1;
    bool gemm = false, after_blas = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--gemm") == 0 || strcmp(a, "--after-blas") == 0) {
            *(a[2] == 'g' ? &gemm : &after_blas) = true;
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
        else if (strcmp(a, "--sweep") == 0)
            sweep = v;
        else if (strcmp(a, "--rep-budget") == 0)
            budget = atof(v);
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
    if (reps < 1) reps = 1;
    int counts[32], n_counts = 0;
    if (sweep) {
        for (char *e, *p = (char *)sweep; *p && n_counts < 32; p = e) {
            long t = strtol(p, &e, 10);
            if (e == p) break;
            if (t < 1) die("--sweep wants thread counts >= 1");
            counts[n_counts++] = (int)t;
        }
        if (n_counts == 0) die("--sweep wants a list of thread counts");
    } else {
        counts[n_counts++] = threads;
    }
    int most = 1;
    for (int i = 0; i < n_counts; i++)
        most = counts[i] > most ? counts[i] : most;
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
    if (pl_pool_new(most - 1, &pool, &err) != PL_OK) die(err.msg);
    int32_t *ids = malloc((size_t)(nq * k) * sizeof *ids);
    int32_t *ids0 = malloc((size_t)(nq * k) * sizeof *ids0);
    double *t = malloc((size_t)reps * sizeof *t);
    pl_search_prof *pr = malloc((size_t)reps * sizeof *pr);
    result *res = calloc((size_t)n_counts, sizeof *res);
    double flop = 2.0 * (double)nq * (double)n * (double)d;
    const char *blas = openblas_get_corename();
    openblas_set_num_threads(1);
    pl_search_corpus pc = {.data = c, .dtype = PL_F32, .n = n, .d = d};
    uint16_t *half = NULL;
    float *norms = NULL;
    if (!index_path) {
        if (strcmp(dtype_s, "f32") != 0) {
            half = malloc((size_t)(n * d) * sizeof *half);
            bool bf = strcmp(dtype_s, "bf16") == 0;
            for (int64_t i = 0; i < n * d; i++)
                half[i] = bf ? pl_f32_to_bf16(c[i]) : pl_f32_to_f16(c[i]);
            pc.data = half;
            pc.dtype = bf ? PL_BF16 : PL_F16;
        }
        norms = malloc((size_t)n * sizeof *norms);
        if (pl_search_norms(pc.data, pc.dtype, n, d, metric, norms) >= 0) die("corpus not finite");
        pc.norms = norms;
    }
    gemm_job g = {q, c, nq, n, d, pl_search_tile_rows(n, d), NULL};
    g.out = malloc((size_t)most * (size_t)(nq * g.tile) * sizeof(float));
    int64_t tiles = (n + g.tile - 1) / g.tile;
    for (int ci = 0; ci < n_counts; ci++) {
        int th = counts[ci];
        result *rs = &res[ci];
        rs->threads = th;
        int64_t reps_t = reps;
        if (index_path) {
            pl_faiss *ix = NULL;
            if (pl_faiss_load(index_path, nprobe, ef, &ix, &err) != PL_OK) die(err.msg);
            int64_t *labels = malloc((size_t)(nq * k) * sizeof *labels);
            for (int64_t r = 0; r < reps; r++) {
                double t0 = now_s();
                if (pl_faiss_search(ix, pool, th, nq, q, k, labels, NULL, &err) != PL_OK)
                    die(err.msg);
                t[r] = now_s() - t0;
            }
            qsort(t, (size_t)reps, sizeof *t, cmp_d);
            printf("what=faiss threads=%d index=%s nprobe=%lld ms=%.3f best_ms=%.3f\n", th,
                   pl_faiss_describe(ix), (long long)nprobe, t[reps / 2] * 1e3, t[0] * 1e3);
            for (int64_t i = 0; i < nq * k; i++)
                ids[i] = (int32_t)labels[i];
            free(labels);
            pl_faiss_free(ix);
        } else {
            /* One unmeasured batch first: page faults of the scratch, cold caches. */
            double w0 = now_s();
            if (pl_search_exact_prof(pool, th, q, nq, &pc, metric, k, ids, NULL, "bench", NULL,
                                     &err) != PL_OK)
                die(err.msg);
            double w = now_s() - w0;
            if (budget > 0 && w > 0) {
                double fit = budget / w;
                reps_t = fit < 1 ? 1 : fit < (double)reps ? (int64_t)fit : reps;
            }
            for (int64_t r = 0; r < reps_t; r++)
                if (pl_search_exact_prof(pool, th, q, nq, &pc, metric, k, ids, NULL, "bench",
                                         &pr[r], &err) != PL_OK)
                    die(err.msg);
            qsort(pr, (size_t)reps_t, sizeof *pr, cmp_prof);
            rs->prof = pr[reps_t / 2];
            rs->ms = rs->prof.wall_s * 1e3;
            rs->best_ms = pr[0].wall_s * 1e3;
            const pl_search_prof *p = &rs->prof;
            printf("what=exact threads=%d n=%lld d=%lld nq=%lld k=%lld metric=%s dtype=%s ms=%.3f "
                   "best_ms=%.3f gflops=%.1f blas=%s tile=%lld tasks=%lld gemm_ms=%.3f "
                   "select_ms=%.3f convert_ms=%.3f merge_ms=%.3f idle_ms=%.3f pool_ms=%.3f "
                   "setup_ms=%.3f busy_max_ms=%.3f busy_min_ms=%.3f reps=%lld\n",
                   th, (long long)n, (long long)d, (long long)nq, (long long)k, metric_s, dtype_s,
                   rs->ms, rs->best_ms, flop / (rs->ms * 1e-3) / 1e9, blas, (long long)p->tile,
                   (long long)p->tasks, p->gemm_s * 1e3 / p->slots, p->select_s * 1e3 / p->slots,
                   p->convert_s * 1e3 / p->slots, p->merge_s * 1e3,
                   (p->pool_s * p->slots - p->gemm_s - p->select_s - p->convert_s) * 1e3 / p->slots,
                   p->pool_s * 1e3, p->setup_s * 1e3, p->busy_max_s * 1e3, p->busy_min_s * 1e3,
                   (long long)reps_t);
            fflush(stdout);
        }
        if (ci == 0) memcpy(ids0, ids, (size_t)(nq * k) * sizeof *ids);
        rs->same_ids = memcmp(ids0, ids, (size_t)(nq * k) * sizeof *ids) == 0;
        if (gemm || sweep) {
            /* The same tiles as the exact search, sgemm only, on the same pool. */
            pl_pool_run(pool, tiles, th, gemm_task, &g);
            for (int64_t r = 0; r < reps_t; r++) {
                double t0 = now_s();
                pl_pool_run(pool, tiles, th, gemm_task, &g);
                t[r] = now_s() - t0;
            }
            qsort(t, (size_t)reps_t, sizeof *t, cmp_d);
            rs->tiles_ms = t[reps_t / 2] * 1e3;
            printf("what=gemm_tiles threads=%d n=%lld d=%lld nq=%lld ms=%.3f gflops=%.1f "
                   "blas=%s\n",
                   th, (long long)n, (long long)d, (long long)nq, rs->tiles_ms,
                   flop / (rs->tiles_ms * 1e-3) / 1e9, blas);
            fflush(stdout);
        }
    }
    if (gemm) {
        /* One sgemm over the whole corpus on OpenBLAS's own threads, last of all (see the top),
         * fewest threads first so that no thread left spinning by a call is one the next does
         * not use. */
        float *out = malloc((size_t)nq * (size_t)n * sizeof(float));
        for (int ci = 0; ci < n_counts && out; ci++) {
            int th = res[ci].threads;
            openblas_set_num_threads(th);
            for (int64_t r = 0; r <= reps; r++) {
                double t0 = now_s();
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)nq, (blasint)n,
                            (blasint)d, 1.0f, q, (blasint)d, c, (blasint)d, 0.0f, out, (blasint)n);
                if (r > 0) t[r - 1] = now_s() - t0; /* the first call is the warm-up */
            }
            openblas_set_num_threads(1);
            qsort(t, (size_t)reps, sizeof *t, cmp_d);
            res[ci].one_ms = t[reps / 2] * 1e3;
            printf("what=gemm_one threads=%d n=%lld d=%lld nq=%lld ms=%.3f gflops=%.1f blas=%s\n",
                   th, (long long)n, (long long)d, (long long)nq, res[ci].one_ms,
                   flop / (res[ci].one_ms * 1e-3) / 1e9, blas);
        }
        free(out);
    }
    if (after_blas && !index_path) {
        float *out = malloc((size_t)nq * (size_t)n * sizeof(float));
        if (!out) die("out of memory");
        openblas_set_num_threads(most);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)nq, (blasint)n, (blasint)d,
                    1.0f, q, (blasint)d, c, (blasint)d, 0.0f, out, (blasint)n);
        openblas_set_num_threads(1);
        for (int64_t r = 0; r < reps; r++) {
            double t0 = now_s();
            if (pl_search_exact_prof(pool, most, q, nq, &pc, metric, k, ids, NULL, "bench", NULL,
                                     &err) != PL_OK)
                die(err.msg);
            t[r] = now_s() - t0;
        }
        qsort(t, (size_t)reps, sizeof *t, cmp_d);
        printf("what=exact_after_blas threads=%d ms=%.3f best_ms=%.3f gflops=%.1f (right after "
               "one sgemm on %d OpenBLAS threads)\n",
               most, t[reps / 2] * 1e3, t[0] * 1e3, flop / t[reps / 2] / 1e9, most);
        free(out);
    }
    if (sweep && !index_path) {
        printf("\nexact search %lld x %lld, %lld queries, k %lld, %s, %s kernels (ms per batch, "
               "median of %lld; per-slot times are sums over the slots / slots)\n",
               (long long)n, (long long)d, (long long)nq, (long long)k, metric_s, blas,
               (long long)reps);
        printf("%7s %9s %7s | %8s %8s %8s %8s %8s | %9s %7s | %9s %7s | %s\n", "threads", "exact",
               "GF/s", "gemm", "select", "merge", "idle", "busiest", "tiles", "GF/s", "one sgemm",
               "GF/s", "same ids");
        for (int ci = 0; ci < n_counts; ci++) {
            const result *rs = &res[ci];
            const pl_search_prof *p = &rs->prof;
            double idle =
                (p->pool_s * p->slots - p->gemm_s - p->select_s - p->convert_s) * 1e3 / p->slots;
            printf("%7d %9.3f %7.1f | %8.3f %8.3f %8.3f %8.3f %8.3f | %9.3f %7.1f | %9.3f %7.1f "
                   "| %s\n",
                   rs->threads, rs->ms, flop / (rs->ms * 1e-3) / 1e9,
                   (p->gemm_s + p->convert_s) * 1e3 / p->slots, p->select_s * 1e3 / p->slots,
                   p->merge_s * 1e3, idle, p->busy_max_s * 1e3, rs->tiles_ms,
                   rs->tiles_ms > 0 ? flop / (rs->tiles_ms * 1e-3) / 1e9 : 0, rs->one_ms,
                   rs->one_ms > 0 ? flop / (rs->one_ms * 1e-3) / 1e9 : 0,
                   rs->same_ids ? "yes" : "NO");
        }
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
    free(g.out);
    free(norms);
    free(half);
    free(res);
    free(pr);
    free(ids0);
    free(ids);
    free(t);
    free(c);
    free(q);
    pl_pool_free(pool);
    return 0;
}
