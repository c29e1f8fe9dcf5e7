/* search_exact: exact top-k through BLAS (pl_search.h). Each pool task multiplies a block of
 * queries by one corpus tile (sgemm, single-threaded), turns the dot products into the metric's
 * ranking score (l2: 2 q.c - |c|^2, cosine: q.c / |c|; the query's own term does not change its
 * ranking) and offers them to that slot's bounded heaps, one per query. The heaps of all slots
 * are merged at the end. The order (score, then smaller index) is total, so the k kept are the
 * same whichever slot saw which tile, and tiles depend on the corpus shape only: results do not
 * depend on the thread count. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_blas.h"
#include "pl_half.h"
#include "pl_search.h"

typedef struct pl__hit {
    float s; /* ranking score, larger is nearer */
    int32_t i;
} pl__hit;

/* a is nearer than b. */
static inline bool pl__better(pl__hit a, pl__hit b)
{
    return a.s > b.s || (a.s == b.s && a.i < b.i);
}

static int pl__cmp_hit(const void *pa, const void *pb)
{
    pl__hit a = *(const pl__hit *)pa, b = *(const pl__hit *)pb;
    return pl__better(a, b) ? -1 : pl__better(b, a) ? 1 : 0;
}

/* Offers h to the min-heap (root: the worst kept) of capacity k holding *size hits. */
static inline void pl__offer(pl__hit *heap, int64_t *size, int64_t k, pl__hit h)
{
    int64_t n = *size;
    if (n < k) {
        int64_t i = n;
        heap[i] = h;
        while (i > 0 && pl__better(heap[(i - 1) / 2], heap[i])) {
            pl__hit t = heap[i];
            heap[i] = heap[(i - 1) / 2];
            heap[(i - 1) / 2] = t;
            i = (i - 1) / 2;
        }
        *size = n + 1;
        return;
    }
    if (!pl__better(h, heap[0])) return;
    int64_t i = 0;
    for (;;) {
        int64_t l = 2 * i + 1, r = l + 1, w = i;
        pl__hit wv = h;
        if (l < n && pl__better(wv, heap[l])) w = l, wv = heap[l];
        if (r < n && pl__better(wv, heap[r])) w = r;
        if (w == i) break;
        heap[i] = heap[w];
        i = w;
    }
    heap[i] = h;
}

int64_t pl_search_tile_rows(int64_t d)
{
    /* About 256 KiB of f32 rows: with the score block it stays in L2 on current server cores,
     * and a tile is still milliseconds of sgemm, large against the pool's cost per task. */
    int64_t t = (256 * 1024) / (4 * (d > 0 ? d : 1));
    const char *env = getenv("PIPECTL_SEARCH_TILE"); /* for benchmarks (docs/perf.md) */
    if (env && atoll(env) > 0) return atoll(env);
    if (t < 256) t = 256;
    if (t > 4096) t = 4096;
    return t & ~(int64_t)63;
}

int64_t pl_search_norms(const void *data, pl_dtype dtype, int64_t n, int64_t d, pl_metric metric,
                        float *out)
{
    for (int64_t r = 0; r < n; r++) {
        double s = 0;
        for (int64_t t = 0; t < d; t++) {
            int64_t i = r * d + t;
            double v = dtype == PL_F16    ? pl_f16_to_f32(((const uint16_t *)data)[i])
                       : dtype == PL_BF16 ? pl_bf16_to_f32(((const uint16_t *)data)[i])
                                          : ((const float *)data)[i];
            s += v * v;
        }
        if (!isfinite(s)) return r;
        out[r] = metric == PL_METRIC_COSINE ? (s > 0 ? (float)(1.0 / sqrt(s)) : 0.0f) : (float)s;
    }
    return -1;
}

#define PL__QBLOCK 256 /* queries per sgemm: bounds the score block for large query batches */

typedef struct pl__exact {
    const float *q;
    int64_t nq, d, k;
    const pl_search_corpus *c;
    pl_metric metric;
    int64_t tile, n_tiles, n_qblocks;
    /* Per slot: heaps [nq * k], sizes [nq], scores [PL__QBLOCK * tile], f32 tile [tile * d]
     * (f16/bf16 corpus only). */
    pl__hit *heaps;
    int64_t *sizes;
    float *sbuf, *conv;
    size_t sbuf_n, conv_n;
} pl__exact;

static void pl__exact_task(void *arg, int64_t task, int slot)
{
    pl__exact *x = arg;
    const pl_search_corpus *c = x->c;
    int64_t ti = task / x->n_qblocks, qbi = task % x->n_qblocks;
    int64_t r0 = ti * x->tile, rows = c->n - r0 < x->tile ? c->n - r0 : x->tile;
    int64_t q0 = qbi * PL__QBLOCK, qn = x->nq - q0 < PL__QBLOCK ? x->nq - q0 : PL__QBLOCK;
    int64_t d = x->d;
    const float *b;
    if (c->dtype == PL_F32) {
        b = (const float *)c->data + r0 * d;
    } else {
        /* f16/bf16 stay compact in memory (half the traffic); a tile is widened into cache. */
        float *cv = x->conv + (size_t)slot * x->conv_n;
        const uint16_t *src = (const uint16_t *)c->data + r0 * d;
        int64_t m = rows * d;
        if (c->dtype == PL_F16)
            for (int64_t i = 0; i < m; i++)
                cv[i] = pl_f16_to_f32(src[i]);
        else
            for (int64_t i = 0; i < m; i++)
                cv[i] = pl_bf16_to_f32(src[i]);
        b = cv;
    }
    float *s = x->sbuf + (size_t)slot * x->sbuf_n;
    pl_blas_sgemm(true, qn, rows, d, 1.0f, x->q + q0 * d, d, b, d, 0.0f, s, rows);
    const float *norm = c->norms ? c->norms + r0 : NULL;
    pl__hit *heaps = x->heaps + (size_t)slot * (size_t)(x->nq * x->k);
    int64_t *sizes = x->sizes + (size_t)slot * (size_t)x->nq;
    for (int64_t i = 0; i < qn; i++) {
        int64_t qi = q0 + i;
        pl__hit *heap = heaps + qi * x->k;
        int64_t *size = &sizes[qi];
        float *row = s + i * rows;
        if (x->metric == PL_METRIC_L2)
            for (int64_t j = 0; j < rows; j++)
                row[j] = 2.0f * row[j] - norm[j];
        else if (x->metric == PL_METRIC_COSINE)
            for (int64_t j = 0; j < rows; j++)
                row[j] *= norm[j];
        /* Most candidates lose to the worst kept: a full block of 16 all below it is skipped (a
         * fixed-length count of compares, which the compiler vectorises); NaN and ties count as
         * "in" and take the careful path. */
        float thr = *size == x->k ? heap[0].s : -INFINITY;
        for (int64_t j0 = 0; j0 < rows; j0 += 16) {
            int64_t jn = rows - j0 < 16 ? rows - j0 : 16;
            if (jn == 16) {
                const float *blk = row + j0;
                int n_in = 0;
                for (int j = 0; j < 16; j++)
                    n_in += !(blk[j] < thr);
                if (n_in == 0) continue;
            }
            for (int64_t j = j0; j < j0 + jn; j++) {
                float v = row[j];
                if (v < thr) continue;
                if (v != v) v = -INFINITY; /* NaN is never near */
                pl__hit h = {v, (int32_t)(r0 + j)};
                if (*size == x->k && !pl__better(h, heap[0])) continue;
                pl__offer(heap, size, x->k, h);
                if (*size == x->k) thr = heap[0].s;
            }
        }
    }
}

pl_status pl_search_exact(pl_pool *pool, int parallel, const float *queries, int64_t nq,
                          const pl_search_corpus *corpus, pl_metric metric, int64_t k, int32_t *ids,
                          float *scores, const char *who, pl_error *err)
{
    if (nq <= 0) return PL_OK;
    pl__exact x = {.q = queries, .nq = nq, .d = corpus->d, .k = k, .c = corpus, .metric = metric};
    x.tile = pl_search_tile_rows(corpus->d);
    x.n_tiles = (corpus->n + x.tile - 1) / x.tile;
    x.n_qblocks = (nq + PL__QBLOCK - 1) / PL__QBLOCK;
    int64_t n_tasks = x.n_tiles * x.n_qblocks;
    int slots = parallel < 1 ? 1 : parallel;
    if (slots > pl_pool_threads(pool) + 1) slots = pl_pool_threads(pool) + 1;
    if (slots > n_tasks) slots = (int)n_tasks;
    x.sbuf_n = (size_t)(nq < PL__QBLOCK ? nq : PL__QBLOCK) * (size_t)x.tile;
    x.conv_n = corpus->dtype == PL_F32 ? 0 : (size_t)x.tile * (size_t)x.d;
    x.heaps = malloc((size_t)slots * (size_t)(nq * k) * sizeof *x.heaps);
    x.sizes = calloc((size_t)slots * (size_t)nq, sizeof *x.sizes);
    x.sbuf = malloc((size_t)slots * x.sbuf_n * sizeof *x.sbuf);
    x.conv = x.conv_n ? malloc((size_t)slots * x.conv_n * sizeof *x.conv) : NULL;
    pl__hit *all = malloc((size_t)slots * (size_t)k * sizeof *all);
    pl_status st = PL_OK;
    if (!x.heaps || !x.sizes || !x.sbuf || (x.conv_n && !x.conv) || !all) {
        st = pl_error_set(err, PL_ENOMEM,
                          "error: %s%sout of memory for search scratch (%d threads x %lld queries "
                          "x k %lld)",
                          who ? who : "", who ? ": " : "", slots, (long long)nq, (long long)k);
        goto done;
    }
    pl_pool_run(pool, n_tasks, slots, pl__exact_task, &x);
    for (int64_t qi = 0; qi < nq; qi++) {
        int64_t m = 0;
        for (int sl = 0; sl < slots; sl++) {
            int64_t sz = x.sizes[(size_t)sl * (size_t)nq + (size_t)qi];
            memcpy(all + m, x.heaps + (size_t)sl * (size_t)(nq * k) + (size_t)(qi * k),
                   (size_t)sz * sizeof *all);
            m += sz;
        }
        qsort(all, (size_t)m, sizeof *all, pl__cmp_hit);
        for (int64_t t = 0; t < k; t++)
            ids[qi * k + t] = all[t].i;
        if (!scores) continue;
        const float *qv = queries + qi * x.d;
        double qq = 0;
        for (int64_t t = 0; t < x.d; t++)
            qq += (double)qv[t] * qv[t];
        for (int64_t t = 0; t < k; t++) {
            double v = all[t].s;
            if (metric == PL_METRIC_L2)
                v = qq - v > 0 ? qq - v : 0; /* rounding may take it just below zero */
            else if (metric == PL_METRIC_COSINE)
                v = qq > 0 ? v / sqrt(qq) : 0;
            scores[qi * k + t] = (float)v;
        }
    }
done:
    free(x.heaps);
    free(x.sizes);
    free(x.sbuf);
    free(x.conv);
    free(all);
    return st;
}
