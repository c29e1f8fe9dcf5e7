/* search_exact: exact top-k through BLAS (pl_search.h). Each pool task multiplies a block of
 * queries by one corpus tile (sgemm, single-threaded), turns the dot products into the metric's
 * ranking score (l2: 2 q.c - |c|^2, cosine: q.c / |c|; the query's own term does not change its
 * ranking) and offers them to that slot's bounded heaps, one per query. The heaps of all slots
 * are merged at the end. The order (score, then smaller index) is total, so the k kept are the
 * same whichever slot saw which tile, and tiles depend on the corpus shape only: results do not
 * depend on the thread count. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pl_blas.h"
#include "pl_half.h"
#include "pl_intr.h"
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

#define PL__MIN_TASKS 64 /* tiles wanted at least, where the corpus allows */

int64_t pl_search_tile_rows(int64_t n, int64_t d)
{
    /* About 256 KiB of f32 rows: with the score block it stays in L2 on current server cores,
     * and a tile is still a fraction of a millisecond of sgemm, large against the pool's cost
     * per task. */
    int64_t t = (256 * 1024) / (4 * (d > 0 ? d : 1));
    if (t < 256) t = 256;
    if (t > 4096) t = 4096;
    t &= ~(int64_t)63;
    /* A small corpus is cut finer, down to 64 rows, so that at least PL__MIN_TASKS tiles share
     * out evenly over 16 threads (a thread left with one tile more than the others is the
     * batch's critical path). n, not the thread count, decides: the tiles, and so the bits of
     * every score, stay the same at any thread count. */
    while (t > 64 && (n + t - 1) / t < PL__MIN_TASKS)
        t = (t / 2 + 63) & ~(int64_t)63;
    return t;
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

typedef struct pl__norms_job {
    const void *data;
    pl_dtype dtype;
    int64_t n, d, rows; /* rows per task */
    pl_metric metric;
    float *out;
    int64_t *bad; /* per task: its first non-finite row, or -1 */
} pl__norms_job;

static void pl__norms_task(void *arg, int64_t task, int slot)
{
    (void)slot;
    pl__norms_job *j = arg;
    int64_t r0 = task * j->rows, m = j->n - r0 < j->rows ? j->n - r0 : j->rows;
    size_t es = j->dtype == PL_F32 ? 4 : 2;
    int64_t b = pl_search_norms((const char *)j->data + (size_t)(r0 * j->d) * es, j->dtype, m, j->d,
                                j->metric, j->out + r0);
    j->bad[task] = b < 0 ? -1 : r0 + b;
}

int64_t pl_search_norms_par(pl_pool *pool, int parallel, const void *data, pl_dtype dtype,
                            int64_t n, int64_t d, pl_metric metric, float *out)
{
    /* Rows split over the pool, each row summed as pl_search_norms sums it (same bits). */
    int64_t rows = (1 << 20) / (d > 0 ? d : 1); /* about a million values a task */
    if (rows < 64) rows = 64;
    int64_t tasks = (n + rows - 1) / rows;
    if (parallel <= 1 || tasks <= 1) return pl_search_norms(data, dtype, n, d, metric, out);
    int64_t *bad = malloc((size_t)tasks * sizeof *bad);
    if (!bad) return pl_search_norms(data, dtype, n, d, metric, out);
    pl__norms_job j = {data, dtype, n, d, rows, metric, out, bad};
    pl_pool_run(pool, tasks, parallel, pl__norms_task, &j);
    int64_t first = -1;
    for (int64_t t = 0; t < tasks && first < 0; t++)
        first = bad[t];
    free(bad);
    return first;
}

#define PL__QBLOCK 256 /* queries per sgemm: bounds the score block for large query batches */
#define PL__LINE 64    /* cache line: per-slot state never shares one with another slot's */

static size_t pl__round_line(size_t n)
{
    return (n + PL__LINE - 1) & ~(size_t)(PL__LINE - 1);
}

/* One slot's counters for pl_search_exact_prof (nanoseconds; written by that slot only). */
typedef struct pl__slot_prof {
    int64_t gemm_ns, select_ns, convert_ns, tasks;
} pl__slot_prof;

typedef struct pl__exact {
    const float *q;
    int64_t nq, d, k;
    const pl_search_corpus *c;
    pl_metric metric;
    int64_t tile, n_tiles, n_qblocks;
    bool prof;
    /* Per slot, at base + slot * slot_bytes, each part starting on its own cache line:
     * counters, heaps [nq * k], sizes [nq], scores [min(nq, PL__QBLOCK) * tile], f32 tile
     * [tile * d] (f16/bf16 corpus only). */
    char *base;
    size_t slot_bytes, off_heaps, off_sizes, off_sbuf, off_conv;
} pl__exact;

static int64_t pl__ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

typedef struct pl__warm {
    int parallel;
    int started; /* under mu */
    pthread_mutex_t mu;
    pthread_cond_t all; /* CLOCK_MONOTONIC: every task started */
    int64_t m, n, k;
} pl__warm;

/* Each task holds its thread until all `parallel` have started (so every thread of the pool
 * takes one), for at most 20 ms: asleep on a condition variable, not spinning in sched_yield
 * (16 threads yielding on a busy machine cost system time to no purpose). */
static void pl__warm_task(void *arg, int64_t task, int slot)
{
    (void)task;
    (void)slot;
    pl__warm *w = arg;
    int64_t until = pl__ns() + 20 * 1000000;
    struct timespec ts = {(time_t)(until / 1000000000), (long)(until % 1000000000)};
    pthread_mutex_lock(&w->mu);
    if (++w->started == w->parallel) pthread_cond_broadcast(&w->all);
    while (w->started < w->parallel)
        if (pthread_cond_timedwait(&w->all, &w->mu, &ts) != 0) break;
    pthread_mutex_unlock(&w->mu);
    float *a = calloc((size_t)(w->m + w->n) * (size_t)w->k + (size_t)(w->m * w->n), sizeof *a);
    if (!a) return; /* only a warm-up */
    pl_blas_sgemm(true, w->m, w->n, w->k, 1.0f, a, w->k, a + w->m * w->k, w->k, 0.0f,
                  a + (w->m + w->n) * w->k, w->n);
    free(a);
}

void pl_search_warm(pl_pool *pool, int parallel, int64_t nq, int64_t n, int64_t d)
{
    if (pl_blas_load(NULL) != PL_OK) return; /* only a warm-up: the search reports it */
    pl__warm w = {.parallel = parallel,
                  .m = nq < PL__QBLOCK ? nq : PL__QBLOCK,
                  .n = pl_search_tile_rows(n, d),
                  .k = d};
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) != 0) return;
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&w.all, &ca);
    pthread_condattr_destroy(&ca);
    if (rc != 0) return; /* only a warm-up */
    pthread_mutex_init(&w.mu, NULL);
    pl_pool_run(pool, parallel, parallel, pl__warm_task, &w);
    pthread_cond_destroy(&w.all);
    pthread_mutex_destroy(&w.mu);
}

static void pl__exact_task(void *arg, int64_t task, int slot)
{
    pl__exact *x = arg;
    if (pl_intr_pending()) return; /* a tile of a query block: the caller reports it */
    const pl_search_corpus *c = x->c;
    char *mine = x->base + (size_t)slot * x->slot_bytes;
    pl__slot_prof *prof = (pl__slot_prof *)mine;
    int64_t t0 = x->prof ? pl__ns() : 0, t1 = t0;
    int64_t ti = task / x->n_qblocks, qbi = task % x->n_qblocks;
    int64_t r0 = ti * x->tile, rows = c->n - r0 < x->tile ? c->n - r0 : x->tile;
    int64_t q0 = qbi * PL__QBLOCK, qn = x->nq - q0 < PL__QBLOCK ? x->nq - q0 : PL__QBLOCK;
    int64_t d = x->d;
    const float *b;
    if (c->dtype == PL_F32) {
        b = (const float *)c->data + r0 * d;
    } else {
        /* f16/bf16 stay compact in memory (half the traffic); a tile is widened into cache. */
        float *cv = (float *)(mine + x->off_conv);
        const uint16_t *src = (const uint16_t *)c->data + r0 * d;
        int64_t m = rows * d;
        if (c->dtype == PL_F16)
            for (int64_t i = 0; i < m; i++)
                cv[i] = pl_f16_to_f32(src[i]);
        else
            for (int64_t i = 0; i < m; i++)
                cv[i] = pl_bf16_to_f32(src[i]);
        b = cv;
        if (x->prof) t1 = pl__ns();
    }
    float *s = (float *)(mine + x->off_sbuf);
    pl_blas_sgemm(true, qn, rows, d, 1.0f, x->q + q0 * d, d, b, d, 0.0f, s, rows);
    int64_t t2 = x->prof ? pl__ns() : 0;
    const float *norm = c->norms ? c->norms + r0 : NULL;
    pl__hit *heaps = (pl__hit *)(mine + x->off_heaps);
    int64_t *sizes = (int64_t *)(mine + x->off_sizes);
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
    if (x->prof) {
        int64_t t3 = pl__ns();
        prof->convert_ns += t1 - t0;
        prof->gemm_ns += t2 - t1;
        prof->select_ns += t3 - t2;
        prof->tasks++;
    }
}

/* The calling thread's scratch, kept between calls (a host worker searches every batch of the
 * run: its slots' heaps and score blocks are allocated once, at the first batch or when a
 * batch needs more) and freed when the thread exits. */
typedef struct pl__scratch {
    void *p;
    size_t cap;
} pl__scratch;

static pthread_key_t pl__scratch_key;
static pthread_once_t pl__scratch_once = PTHREAD_ONCE_INIT;

static void pl__scratch_free(void *v)
{
    pl__scratch *sc = v;
    free(sc->p);
    free(sc);
}

static void pl__scratch_init(void)
{
    (void)pthread_key_create(&pl__scratch_key, pl__scratch_free);
}

/* bytes of cache-line-aligned scratch for this thread; NULL when out of memory. */
static void *pl__scratch_get(size_t bytes)
{
    pthread_once(&pl__scratch_once, pl__scratch_init);
    pl__scratch *sc = pthread_getspecific(pl__scratch_key);
    if (!sc) {
        sc = calloc(1, sizeof *sc);
        if (!sc) return NULL;
        if (pthread_setspecific(pl__scratch_key, sc) != 0) {
            free(sc);
            return NULL;
        }
    }
    if (sc->cap < bytes) {
        free(sc->p);
        sc->cap = 0;
        sc->p = aligned_alloc(PL__LINE, pl__round_line(bytes));
        if (!sc->p) return NULL;
        sc->cap = bytes;
    }
    return sc->p;
}

/* Merges the slots' heaps of query qi into slot 0's (the others offered to it: O(slots x k)
 * with most rejected by one compare), then sorts its k, nearest first, into out. */
static void pl__merge(const pl__exact *x, int slots, int64_t qi, pl__hit *out)
{
    int64_t k = x->k;
    pl__hit *heap = (pl__hit *)(x->base + x->off_heaps) + qi * k;
    int64_t *size = (int64_t *)(x->base + x->off_sizes) + qi;
    for (int sl = 1; sl < slots; sl++) {
        const char *o = x->base + (size_t)sl * x->slot_bytes;
        const pl__hit *oh = (const pl__hit *)(o + x->off_heaps) + qi * k;
        int64_t on = ((const int64_t *)(o + x->off_sizes))[qi];
        for (int64_t t = 0; t < on; t++)
            if (*size < k || pl__better(oh[t], heap[0])) pl__offer(heap, size, k, oh[t]);
    }
    memcpy(out, heap, (size_t)*size * sizeof *out);
    qsort(out, (size_t)*size, sizeof *out, pl__cmp_hit);
}

pl_status pl_search_exact(pl_pool *pool, int parallel, const float *queries, int64_t nq,
                          const pl_search_corpus *corpus, pl_metric metric, int64_t k, int32_t *ids,
                          float *scores, const char *who, pl_error *err)
{
    return pl_search_exact_prof(pool, parallel, queries, nq, corpus, metric, k, ids, scores, who,
                                NULL, err);
}

void pl_search_prof_format(const pl_search_prof *p, char *buf, size_t cap)
{
    double busy = p->gemm_s + p->select_s + p->convert_s;
    snprintf(buf, cap,
             "wall %.3f ms = setup %.3f + pool %.3f + merge %.3f; %d slots, %lld tasks; per slot "
             "(sum / slots): gemm %.3f convert %.3f select %.3f idle %.3f ms; busiest slot %.3f, "
             "least busy %.3f ms",
             p->wall_s * 1e3, p->setup_s * 1e3, p->pool_s * 1e3, p->merge_s * 1e3, p->slots,
             (long long)p->tasks, p->gemm_s * 1e3 / p->slots, p->convert_s * 1e3 / p->slots,
             p->select_s * 1e3 / p->slots, (p->pool_s * p->slots - busy) * 1e3 / p->slots,
             p->busy_max_s * 1e3, p->busy_min_s * 1e3);
}

pl_status pl_search_exact_prof(pl_pool *pool, int parallel, const float *queries, int64_t nq,
                               const pl_search_corpus *corpus, pl_metric metric, int64_t k,
                               int32_t *ids, float *scores, const char *who, pl_search_prof *prof,
                               pl_error *err)
{
    if (prof) memset(prof, 0, sizeof *prof);
    if (nq <= 0) return PL_OK;
    PL_CHECK(pl_blas_load(err));
    int64_t t0 = prof ? pl__ns() : 0;
    pl__exact x = {.q = queries,
                   .nq = nq,
                   .d = corpus->d,
                   .k = k,
                   .c = corpus,
                   .metric = metric,
                   .prof = prof != NULL};
    x.tile = pl_search_tile_rows(corpus->n, corpus->d);
    x.n_tiles = (corpus->n + x.tile - 1) / x.tile;
    x.n_qblocks = (nq + PL__QBLOCK - 1) / PL__QBLOCK;
    int64_t n_tasks = x.n_tiles * x.n_qblocks;
    int slots = parallel < 1 ? 1 : parallel;
    if (slots > pl_pool_threads(pool) + 1) slots = pl_pool_threads(pool) + 1;
    if (slots > n_tasks) slots = (int)n_tasks;
    size_t sbuf_n = (size_t)(nq < PL__QBLOCK ? nq : PL__QBLOCK) * (size_t)x.tile;
    size_t conv_n = corpus->dtype == PL_F32 ? 0 : (size_t)x.tile * (size_t)x.d;
    x.off_heaps = pl__round_line(sizeof(pl__slot_prof));
    x.off_sizes = x.off_heaps + pl__round_line((size_t)(nq * k) * sizeof(pl__hit));
    x.off_sbuf = x.off_sizes + pl__round_line((size_t)nq * sizeof(int64_t));
    x.off_conv = x.off_sbuf + pl__round_line(sbuf_n * sizeof(float));
    x.slot_bytes = x.off_conv + pl__round_line(conv_n * sizeof(float));
    /* The merge's output block follows the slots. */
    size_t bytes = (size_t)slots * x.slot_bytes + (size_t)k * sizeof(pl__hit);
    x.base = pl__scratch_get(bytes);
    if (!x.base)
        return pl_error_set(err, PL_ENOMEM,
                            "error: %s%sout of memory for search scratch (%d threads x %lld "
                            "queries x k %lld)",
                            who ? who : "", who ? ": " : "", slots, (long long)nq, (long long)k);
    pl__hit *all = (pl__hit *)(x.base + (size_t)slots * x.slot_bytes);
    for (int sl = 0; sl < slots; sl++) {
        char *mine = x.base + (size_t)sl * x.slot_bytes;
        memset(mine, 0, sizeof(pl__slot_prof));
        memset(mine + x.off_sizes, 0, (size_t)nq * sizeof(int64_t));
    }
    int64_t t1 = prof ? pl__ns() : 0;
    pl_pool_run(pool, n_tasks, slots, pl__exact_task, &x);
    if (pl_intr_pending()) return pl_intr_error(err, "in an exact search");
    int64_t t2 = prof ? pl__ns() : 0;
    for (int64_t qi = 0; qi < nq; qi++) {
        pl__merge(&x, slots, qi, all);
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
    if (prof) {
        int64_t t3 = pl__ns();
        prof->slots = slots;
        prof->tile = x.tile;
        prof->setup_s = (double)(t1 - t0) * 1e-9;
        prof->pool_s = (double)(t2 - t1) * 1e-9;
        prof->merge_s = (double)(t3 - t2) * 1e-9;
        prof->wall_s = (double)(t3 - t0) * 1e-9;
        prof->busy_min_s = INFINITY;
        for (int sl = 0; sl < slots; sl++) {
            const pl__slot_prof *sp = (const pl__slot_prof *)(x.base + (size_t)sl * x.slot_bytes);
            double busy = (double)(sp->gemm_ns + sp->select_ns + sp->convert_ns) * 1e-9;
            prof->gemm_s += (double)sp->gemm_ns * 1e-9;
            prof->select_s += (double)sp->select_ns * 1e-9;
            prof->convert_s += (double)sp->convert_ns * 1e-9;
            prof->tasks += sp->tasks;
            if (busy > prof->busy_max_s) prof->busy_max_s = busy;
            if (busy < prof->busy_min_s) prof->busy_min_s = busy;
        }
    }
    return PL_OK;
}

bool pl_search_interrupted(void)
{
    return pl_intr_pending();
}
