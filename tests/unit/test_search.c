/* test_search: the exact search engine (stages/search/search_exact.c) against a brute-force
 * reference in double: random corpora over several tiles in f32/f16/bf16 for ip, l2 and cosine;
 * adversarial data (integer vectors whose scores are exact, so ties must go to the smaller index;
 * duplicate rows; NaN in a query); the same ids and scores, bit for bit, at every thread count; and
 * through the stage: a NaN in the corpus is an error naming the row. */
#include <math.h>
#include <stdlib.h>

#include "pl_exec.h"
#include "pl_exec_host.h"
#include "pl_half.h"
#include "pl_parse.h"
#include "pl_plan.h"
#include "pl_search.h"
#include "pl_test.h"

static uint64_t rng_state = 12345;
static double urand(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) * 0x1p-53;
}

/* Corpus value i as the engine sees it. */
static double cval(const void *c, pl_dtype t, int64_t i)
{
    if (t == PL_F16) return pl_f16_to_f32(((const uint16_t *)c)[i]);
    if (t == PL_BF16) return pl_bf16_to_f32(((const uint16_t *)c)[i]);
    return ((const float *)c)[i];
}

/* The metric's ranking value in double: larger is nearer. */
static double ref_score(const float *q, const void *c, pl_dtype t, int64_t row, int64_t d,
                        pl_metric m)
{
    double dot = 0, cc = 0, qq = 0;
    for (int64_t j = 0; j < d; j++) {
        double a = q[j], b = cval(c, t, row * d + j);
        dot += a * b;
        cc += b * b;
        qq += a * a;
    }
    if (m == PL_METRIC_L2) return -(qq - 2 * dot + cc);
    if (m == PL_METRIC_COSINE) return cc > 0 && qq > 0 ? dot / sqrt(cc * qq) : 0;
    return dot;
}

/* Reference top-k by selection: larger score first, then the smaller index. */
static void ref_topk(const float *q, const void *c, pl_dtype t, int64_t n, int64_t d, pl_metric m,
                     int64_t k, int32_t *ids)
{
    double *s = malloc((size_t)n * sizeof *s);
    char *used = calloc((size_t)n, 1);
    for (int64_t i = 0; i < n; i++)
        s[i] = ref_score(q, c, t, i, d, m);
    for (int64_t a = 0; a < k; a++) {
        int64_t best = -1;
        for (int64_t i = 0; i < n; i++)
            if (!used[i] && (best < 0 || s[i] > s[best])) best = i;
        used[best] = 1;
        ids[a] = (int32_t)best;
    }
    free(s);
    free(used);
}

static pl_pool *pool;

static int run_exact(const float *q, int64_t nq, const void *c, pl_dtype t, int64_t n, int64_t d,
                     pl_metric m, int64_t k, int parallel, int32_t *ids, float *scores)
{
    float *norms = malloc((size_t)n * sizeof *norms);
    int64_t bad = pl_search_norms(c, t, n, d, m, norms);
    CHECK_EQ_INT(bad, -1);
    pl_search_corpus pc = {.data = c, .dtype = t, .n = n, .d = d, .norms = norms};
    pl_error err;
    pl_status st = pl_search_exact(pool, parallel, q, nq, &pc, m, k, ids, scores, "test", &err);
    free(norms);
    return st;
}

static void test_random(void)
{
    const int64_t d = 48, nq = 37, k = 7;
    /* Several tiles (those of a large corpus cut finer for this small one), the last partial. */
    const int64_t n = 2 * pl_search_tile_rows(INT64_C(1) << 30, d) + 123;
    float *q = malloc((size_t)(nq * d) * sizeof *q);
    float *cf = malloc((size_t)(n * d) * sizeof *cf);
    uint16_t *ch = malloc((size_t)(n * d) * sizeof *ch);
    for (int64_t i = 0; i < nq * d; i++)
        q[i] = (float)(urand() * 2 - 1);
    for (int64_t i = 0; i < n * d; i++)
        cf[i] = (float)(urand() * 2 - 1);
    int32_t *ids = malloc((size_t)(nq * k) * sizeof *ids), ref[16];
    float *scores = malloc((size_t)(nq * k) * sizeof *scores);
    int64_t exact = 0, total = 0;
    for (int ti = 0; ti < 3; ti++) {
        pl_dtype t = ti == 0 ? PL_F32 : ti == 1 ? PL_F16 : PL_BF16;
        const void *c = cf;
        if (t != PL_F32) {
            for (int64_t i = 0; i < n * d; i++)
                ch[i] = t == PL_F16 ? pl_f32_to_f16(cf[i]) : pl_f32_to_bf16(cf[i]);
            c = ch;
        }
        for (int m = 0; m < 3; m++) {
            CHECK_EQ_INT(run_exact(q, nq, c, t, n, d, (pl_metric)m, k, 4, ids, scores), PL_OK);
            for (int64_t i = 0; i < nq; i++) {
                ref_topk(q + i * d, c, t, n, d, (pl_metric)m, k, ref);
                for (int64_t a = 0; a < k; a++) {
                    int32_t got = ids[i * k + a];
                    CHECK(got >= 0 && got < n);
                    if (got < 0 || got >= n) continue;
                    /* A different id is acceptable only where the reference scores are within
                     * f32 rounding of each other (BLAS sums in another order). */
                    double gs = ref_score(q + i * d, c, t, got, d, (pl_metric)m);
                    double rs = ref_score(q + i * d, c, t, ref[a], d, (pl_metric)m);
                    if (fabs(gs - rs) > 1e-4) {
                        fprintf(stderr,
                                "dtype %d metric %d query %lld rank %lld: id %d (%.9g) vs %d "
                                "(%.9g)\n",
                                ti, m, (long long)i, (long long)a, got, gs, ref[a], rs);
                        CHECK(fabs(gs - rs) <= 1e-4);
                    }
                    exact += got == ref[a];
                    total++;
                    /* scores: the metric's value (l2: the distance itself). */
                    double want = m == PL_METRIC_L2 ? -rs : rs;
                    CHECK(fabs(scores[i * k + a] - want) <= 1e-3 * (1 + fabs(want)));
                }
            }
        }
    }
    CHECK(exact >= total * 99 / 100);
    printf("random: %lld of %lld ranks identical to the double reference\n", (long long)exact,
           (long long)total);

    /* Thread counts: the same bits. */
    int32_t *ids1 = malloc((size_t)(nq * k) * sizeof *ids1);
    float *s1 = malloc((size_t)(nq * k) * sizeof *s1);
    for (int m = 0; m < 3; m++) {
        CHECK_EQ_INT(run_exact(q, nq, cf, PL_F32, n, d, (pl_metric)m, k, 1, ids1, s1), PL_OK);
        for (int par = 2; par <= 5; par++) {
            CHECK_EQ_INT(run_exact(q, nq, cf, PL_F32, n, d, (pl_metric)m, k, par, ids, scores),
                         PL_OK);
            CHECK(memcmp(ids, ids1, (size_t)(nq * k) * sizeof *ids) == 0);
            CHECK(memcmp(scores, s1, (size_t)(nq * k) * sizeof *s1) == 0);
        }
    }
    free(ids1);
    free(s1);
    free(q);
    free(cf);
    free(ch);
    free(ids);
    free(scores);
}

/* Small integers: every dot product and norm is exact in f32 whatever the summation order, so
 * the result must equal the reference exactly, ties to the smaller index included. */
static void test_ties(void)
{
    const int64_t d = 16, nq = 9, k = 12;
    const int64_t n = pl_search_tile_rows(INT64_C(1) << 30, d) + 77;
    float *q = malloc((size_t)(nq * d) * sizeof *q);
    float *c = malloc((size_t)(n * d) * sizeof *c);
    for (int64_t i = 0; i < nq * d; i++)
        q[i] = (float)((int)(urand() * 5) - 2);
    for (int64_t i = 0; i < n * d; i++)
        c[i] = (float)((int)(urand() * 3) - 1);
    /* Duplicates far apart (tiles 0 and 1) of rows near the queries. */
    for (int64_t i = 0; i < nq; i++)
        memcpy(c + (n - 1 - i) * d, q + i * d, (size_t)d * sizeof *c),
            memcpy(c + (3 * i) * d, q + i * d, (size_t)d * sizeof *c);
    int32_t ids[9 * 12], ref[12];
    for (int m = 0; m < 2; m++)
        for (int par = 1; par <= 4; par += 3) {
            CHECK_EQ_INT(run_exact(q, nq, c, PL_F32, n, d, (pl_metric)m, k, par, ids, NULL), PL_OK);
            for (int64_t i = 0; i < nq; i++) {
                ref_topk(q + i * d, c, PL_F32, n, d, (pl_metric)m, k, ref);
                for (int64_t a = 0; a < k; a++)
                    CHECK_EQ_INT(ids[i * k + a], ref[a]);
            }
        }
    /* Every row the same: all scores tie, so the k smallest indices, in order. */
    for (int64_t i = 0; i < n * d; i++)
        c[i] = (float)(i % d);
    for (int m = 0; m < 3; m++) {
        CHECK_EQ_INT(run_exact(q, nq, c, PL_F32, n, d, (pl_metric)m, k, 4, ids, NULL), PL_OK);
        for (int64_t i = 0; i < nq * k; i++)
            CHECK_EQ_INT(ids[i], i % k);
    }
    /* A NaN in a query: its scores are NaN, never near, so they tie at -inf: 0..k-1. Other
     * queries are unaffected. */
    for (int64_t i = 0; i < n * d; i++)
        c[i] = (float)((int)(urand() * 3) - 1);
    q[2 * d + 5] = NAN;
    CHECK_EQ_INT(run_exact(q, nq, c, PL_F32, n, d, PL_METRIC_IP, k, 4, ids, NULL), PL_OK);
    for (int64_t a = 0; a < k; a++)
        CHECK_EQ_INT(ids[2 * k + a], a);
    ref_topk(q + 3 * d, c, PL_F32, n, d, PL_METRIC_IP, k, ref);
    for (int64_t a = 0; a < k; a++)
        CHECK_EQ_INT(ids[3 * k + a], ref[a]);
    /* k = n: every row, in order. */
    int32_t *all = malloc((size_t)(nq * n) * sizeof *all);
    q[2 * d + 5] = 1;
    CHECK_EQ_INT(run_exact(q, 1, c, PL_F32, n, d, PL_METRIC_IP, n, 3, all, NULL), PL_OK);
    char *seen = calloc((size_t)n, 1);
    for (int64_t i = 0; i < n; i++)
        seen[all[i]]++;
    for (int64_t i = 0; i < n; i++)
        CHECK_EQ_INT(seen[i], 1);
    free(seen);
    free(all);
    free(q);
    free(c);
}

static void test_norms(void)
{
    float c[6] = {3, 4, 0, 0, 1, NAN};
    float out[3];
    CHECK_EQ_INT(pl_search_norms(c, PL_F32, 3, 2, PL_METRIC_L2, out), 2);
    CHECK(out[0] == 25 && out[1] == 0);
    CHECK_EQ_INT(pl_search_norms(c, PL_F32, 2, 2, PL_METRIC_COSINE, out), -1);
    CHECK(fabsf(out[0] - 0.2f) < 1e-7f && out[1] == 0);
    c[5] = INFINITY;
    CHECK_EQ_INT(pl_search_norms(c, PL_F32, 3, 2, PL_METRIC_IP, out), 2);
    c[5] = 1e30f; /* finite: its square overflows f32, not the double sum */
    CHECK_EQ_INT(pl_search_norms(c, PL_F32, 3, 2, PL_METRIC_IP, out), -1);

    /* Over the pool: the same bits, and the first bad row when several chunks hold one. */
    const int64_t n = 20000, d = 100; /* 199 rows a task: about 100 tasks */
    float *big = malloc((size_t)(n * d) * sizeof *big);
    uint16_t *half = malloc((size_t)(n * d) * sizeof *half);
    float *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
    for (int64_t i = 0; i < n * d; i++) {
        big[i] = (float)(urand() * 2 - 1);
        half[i] = pl_f32_to_bf16(big[i]);
    }
    for (int m = 0; m < 3; m++) {
        CHECK_EQ_INT(pl_search_norms(big, PL_F32, n, d, (pl_metric)m, a), -1);
        CHECK_EQ_INT(pl_search_norms_par(pool, 5, big, PL_F32, n, d, (pl_metric)m, b), -1);
        CHECK(memcmp(a, b, (size_t)n * sizeof *a) == 0);
        CHECK_EQ_INT(pl_search_norms(half, PL_BF16, n, d, (pl_metric)m, a), -1);
        CHECK_EQ_INT(pl_search_norms_par(pool, 3, half, PL_BF16, n, d, (pl_metric)m, b), -1);
        CHECK(memcmp(a, b, (size_t)n * sizeof *a) == 0);
    }
    big[(n - 3) * d + 7] = NAN;
    big[12345 * d] = INFINITY;
    CHECK_EQ_INT(pl_search_norms_par(pool, 5, big, PL_F32, n, d, PL_METRIC_L2, b), 12345);
    CHECK_EQ_INT(pl_search_norms_par(NULL, 5, big, PL_F32, n, d, PL_METRIC_L2, b), 12345);
    free(big);
    free(half);
    free(a);
    free(b);
}

/* Tiles: about 256 KiB of rows, cut finer (to 64 rows at least) until a corpus has 64. */
static void test_tiles(void)
{
    CHECK_EQ_INT(pl_search_tile_rows(100000, 384), 256); /* 391 tiles */
    CHECK_EQ_INT(pl_search_tile_rows(1000000, 768), 256);
    CHECK_EQ_INT(pl_search_tile_rows(100000, 128), 512); /* 196 tiles */
    CHECK_EQ_INT(pl_search_tile_rows(10000, 384), 128);  /* 79 tiles, not 40 */
    CHECK_EQ_INT(pl_search_tile_rows(1000, 384), 64);    /* 16: no finer than 64 rows */
    CHECK_EQ_INT(pl_search_tile_rows(INT64_C(1) << 30, 16), 4096);
}

/* Through the stage: a NaN in a persistent corpus fails the batch, naming the row (bad input). */
static void test_stage_nan(void)
{
    char dir[] = "/tmp/pl_search_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[300];
    snprintf(path, sizeof path, "%s/c.bin", dir);
    float c[8] = {1, 0, 0, 1, 2, NAN, 1, 1};
    FILE *f = fopen(path, "wb");
    fwrite(c, 1, sizeof c, f);
    fclose(f);
    char text[1024];
    snprintf(text, sizeof text,
             "run: {batches: 2}\n"
             "buffers:\n"
             "  q: {dtype: f32, shape: [2, 2]}\n"
             "  c: {dtype: f32, shape: [4, 2], persistent: true, init: file, file: %s}\n"
             "  ids: {dtype: i32, shape: [2, 1]}\n"
             "stages:\n"
             "  - {name: src, kind: source, to: q, generator: random}\n"
             "  - {name: s, kind: search, queries: q, corpus: c, k: 1, ids: ids}\n"
             "  - {name: o, kind: sink, from: ids, to: %s/ids.bin}\n",
             path, dir);
    pl_spec *s = NULL;
    pl_error err;
    CHECK(pl_yaml_load_string("t.yaml", text, strlen(text), &s, &err) == PL_OK);
    CHECK(s && pl_spec_check(s, &err) == PL_OK);
    pl_plan *plan = NULL;
    CHECK(s && pl_plan_compile(s, &plan, &err) == PL_OK);
    pl_run_cfg cfg;
    pl_run_cfg_init(&cfg);
    cfg.workers = 3;
    pl_run_result res;
    if (plan) {
        CHECK_EQ_INT(pl_exec_host_run(plan, &cfg, &res, &err), PL_EINPUT);
        CHECK(strstr(err.msg, "error: stage 's', batch ") != NULL);
        CHECK(strstr(err.msg, ": corpus 'c' row 2 holds a NaN or an infinity; search needs finite "
                              "vectors (fix or drop that row)") != NULL);
        pl_run_result_fini(&res);
    }
    pl_plan_free(plan);
    pl_spec_free(s);
    snprintf(text, sizeof text, "rm -rf %s", dir);
    CHECK(system(text) == 0);
}

int main(void)
{
    pl_error err;
    CHECK(pl_pool_new(4, &pool, &err) == PL_OK);
    test_norms();
    test_tiles();
    test_random();
    test_ties();
    test_stage_nan();
    pl_pool_free(pool);
    if (pl_test_failures) fprintf(stderr, "%d check(s) failed\n", pl_test_failures);
    return pl_test_failures ? 1 : 0;
}
