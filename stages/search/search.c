/* search: top-k nearest corpus vectors of each query, then gathers the hits' payload rows: the
 * retrieval step of RAG. Exact (the default): BLAS over corpus tiles on the run's thread pool
 * (stages/search/search_exact.c), ties to the smaller index, results independent of the thread
 * count. With `index:`, a prebuilt FAISS index (IVF, HNSW, PQ...) answers instead
 * (search_faiss.cpp). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pl_blas.h"
#include "pl_buffers.h"
#include "pl_kind_util.h"
#include "pl_search.h"

static const pl_key pl__search_keys[] = {
    {"queries", PL_KEY_NAME, NULL, NULL, "host f32 buffer [q, d] (required)"},
    {"corpus", PL_KEY_NAME, NULL, NULL,
     "host f32, f16 or bf16 buffer [n, d], usually persistent (required without index)"},
    {"k", PL_KEY_INT, NULL, NULL, "hits per query, 1..n (required)"},
    {"metric", PL_KEY_ENUM, "ip|l2|cosine", "ip",
     "inner product (larger is nearer), squared L2 or cosine similarity"},
    {"ids", PL_KEY_NAME, NULL, NULL,
     "host i32 buffer [q, k]: hit indices, nearest first, -1 where an index found fewer "
     "(required)"},
    {"scores", PL_KEY_NAME, NULL, NULL,
     "host f32 buffer [q, k]: each hit's metric value (ip, squared distance, cosine)"},
    {"payload", PL_KEY_NAME, NULL, NULL, "host buffer [n, p] of per-document data (token ids)"},
    {"hits", PL_KEY_NAME, NULL, NULL, "host buffer [q, k, p], payload's dtype: gathered rows"},
    {"threads", PL_KEY_INT, NULL, "0 (the run's host workers, at most the cores)",
     "threads to search with, from the run's thread pool (at most 64)"},
    {"index", PL_KEY_PATH, NULL, NULL,
     "a FAISS index file (pipectl index build) to search instead of the exact scan"},
    {"nprobe", PL_KEY_INT, NULL, "0 (the index's own)", "index: IVF lists visited per query"},
    {"ef_search", PL_KEY_INT, NULL, "0 (the index's own)", "index: HNSW search breadth"},
    PL_KIND_PARALLEL_KEY,
    {NULL, 0, NULL, NULL, NULL},
};

typedef struct pl__search_opts {
    int queries, corpus, payload; /* indices in reads (corpus, payload -1: none) */
    int ids, scores, hits;        /* indices in writes (scores, hits -1: none) */
    int64_t k;
    int metric; /* pl_metric */
    int64_t threads, nprobe, ef_search;
    const char *index; /* as written, or NULL */
} pl__search_opts;

static pl_status pl__search_bind(pl_spec *spec, pl_stage *st, pl_error *err)
{
    PL_CHECK(pl_kind_bind_parallel(st, err));
    pl__search_opts *o = pl_spec_alloc(spec, sizeof *o);
    if (!o) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    const pl_opt *index = pl_stage_opt(st, "index");
    o->index = index ? index->str : NULL;
    if (index && !pl_faiss_available())
        return pl_error_at(err, PL_EINPUT, index->val_pos,
                           "search stage '%s': 'index:' needs FAISS, and this pipectl was built "
                           "without it; install libfaiss-dev and rebuild (cmake finds it; "
                           "-DPL_WITH_FAISS=ON insists), or drop 'index:' for the exact search",
                           st->name);
    PL_CHECK(pl_kind_bind_ref(spec, st, "queries", false, true, "the f32 query vectors [q, d]",
                              &o->queries, err));
    PL_CHECK(pl_kind_bind_ref(spec, st, "corpus", false, !index,
                              "the corpus vectors [n, d]; or 'index:', a FAISS index file",
                              &o->corpus, err));
    PL_CHECK(pl_kind_bind_ref(spec, st, "payload", false, false, "", &o->payload, err));
    PL_CHECK(pl_kind_bind_ref(spec, st, "ids", true, true, "an i32 buffer [q, k] for hit indices",
                              &o->ids, err));
    PL_CHECK(pl_kind_bind_ref(spec, st, "scores", true, false, "", &o->scores, err));
    PL_CHECK(pl_kind_bind_ref(spec, st, "hits", true, false, "", &o->hits, err));
    if ((o->payload < 0) != (o->hits < 0)) {
        const pl_opt *given = pl_stage_opt(st, o->payload >= 0 ? "payload" : "hits");
        return pl_error_at(err, PL_EINPUT, given->pos,
                           "search stage '%s': 'payload' and 'hits' go together (hits receives "
                           "the payload rows of the hits); give both or neither",
                           st->name);
    }
    if (!pl_stage_opt(st, "k"))
        return pl_error_at(err, PL_EINPUT, st->pos, "search stage '%s' needs 'k:' (hits per query)",
                           st->name);
    PL_CHECK(pl_opt_get_int(st, "k", 1, 1, INT32_MAX, &o->k, err));
    PL_CHECK(pl_opt_get_enum(st, "metric", 0, &o->metric, err));
    PL_CHECK(pl_opt_get_int(st, "threads", 0, 0, 1024, &o->threads, err));
    PL_CHECK(pl_opt_get_int(st, "nprobe", 0, 0, INT32_MAX, &o->nprobe, err));
    PL_CHECK(pl_opt_get_int(st, "ef_search", 0, 0, INT32_MAX, &o->ef_search, err));
    const char *only_index = !index && pl_stage_opt(st, "nprobe")      ? "nprobe"
                             : !index && pl_stage_opt(st, "ef_search") ? "ef_search"
                                                                       : NULL;
    if (only_index)
        return pl_error_at(err, PL_EINPUT, pl_stage_opt(st, only_index)->pos,
                           "search stage '%s': '%s' tunes a FAISS index; it needs 'index:'",
                           st->name, only_index);
    st->priv = o;
    return PL_OK;
}

static pl_status pl__search_validate(const pl_spec *spec, const pl_stage *st, pl_error *err)
{
    const pl__search_opts *o = st->priv;
    const pl_buffer *q = pl_kind_rbuf(spec, st, o->queries);
    const pl_buffer *c = o->corpus >= 0 ? pl_kind_rbuf(spec, st, o->corpus) : NULL;
    const pl_buffer *ids = pl_kind_wbuf(spec, st, o->ids);
    char s1[96], s2[96];
    if (q->dtype != PL_F32 || q->rank != 2)
        return pl_error_at(err, PL_EINPUT, st->reads[o->queries].pos,
                           "search stage '%s': queries '%s' must be f32 [q, d], not %s %s",
                           st->name, q->name, pl_dtype_name(q->dtype),
                           pl_kind_shape(q, s1, sizeof s1));
    if (c && ((c->dtype != PL_F32 && c->dtype != PL_F16 && c->dtype != PL_BF16) || c->rank != 2 ||
              c->shape[1] != q->shape[1]))
        return pl_error_at(err, PL_EINPUT, st->reads[o->corpus].pos,
                           "search stage '%s': corpus '%s' must be f32, f16 or bf16 [n, %lld] (the "
                           "queries' dimension), not %s %s",
                           st->name, c->name, (long long)q->shape[1], pl_dtype_name(c->dtype),
                           pl_kind_shape(c, s1, sizeof s1));
    if (c && o->index && c->dtype != PL_F32)
        return pl_error_at(err, PL_EINPUT, st->reads[o->corpus].pos,
                           "search stage '%s': with 'index:', corpus '%s' must be f32, not %s",
                           st->name, c->name, pl_dtype_name(c->dtype));
    if (c && o->k > c->shape[0]) {
        const pl_opt *ko = pl_stage_opt(st, "k");
        return pl_error_at(err, PL_EINPUT, ko->val_pos,
                           "search stage '%s': k is %lld but corpus '%s' has only %lld rows; use "
                           "k <= %lld",
                           st->name, (long long)o->k, c->name, (long long)c->shape[0],
                           (long long)c->shape[0]);
    }
    if (ids->dtype != PL_I32 || ids->rank != 2 || ids->shape[0] != q->shape[0] ||
        ids->shape[1] != o->k)
        return pl_error_at(err, PL_EINPUT, st->writes[o->ids].pos,
                           "search stage '%s': ids '%s' must be i32 [%lld, %lld] (queries x k), "
                           "not %s %s",
                           st->name, ids->name, (long long)q->shape[0], (long long)o->k,
                           pl_dtype_name(ids->dtype), pl_kind_shape(ids, s1, sizeof s1));
    if (o->scores >= 0) {
        const pl_buffer *sc = pl_kind_wbuf(spec, st, o->scores);
        if (sc->dtype != PL_F32 || sc->rank != 2 || sc->shape[0] != q->shape[0] ||
            sc->shape[1] != o->k)
            return pl_error_at(err, PL_EINPUT, st->writes[o->scores].pos,
                               "search stage '%s': scores '%s' must be f32 [%lld, %lld] (queries "
                               "x k), not %s %s",
                               st->name, sc->name, (long long)q->shape[0], (long long)o->k,
                               pl_dtype_name(sc->dtype), pl_kind_shape(sc, s1, sizeof s1));
    }
    if (o->payload >= 0) {
        const pl_buffer *p = pl_kind_rbuf(spec, st, o->payload),
                        *h = pl_kind_wbuf(spec, st, o->hits);
        if (c && p->shape[0] != c->shape[0])
            return pl_error_at(err, PL_EINPUT, st->reads[o->payload].pos,
                               "search stage '%s': payload '%s' %s needs one row per corpus row "
                               "(%lld)",
                               st->name, p->name, pl_kind_shape(p, s1, sizeof s1),
                               (long long)c->shape[0]);
        bool ok = h->dtype == p->dtype && h->rank == p->rank + 1 && h->shape[0] == q->shape[0] &&
                  h->shape[1] == o->k;
        for (int i = 1; ok && i < p->rank; i++)
            ok = h->shape[i + 1] == p->shape[i];
        if (!ok) {
            pl_buffer want = *p;
            want.rank = p->rank + 1;
            want.shape[0] = q->shape[0];
            want.shape[1] = o->k;
            for (int i = 1; i < p->rank; i++)
                want.shape[i + 1] = p->shape[i];
            char s3[96];
            return pl_error_at(err, PL_EINPUT, st->writes[o->hits].pos,
                               "search stage '%s': hits '%s' must be %s %s (queries x k x a "
                               "payload row), not %s %s",
                               st->name, h->name, pl_dtype_name(p->dtype),
                               pl_kind_shape(&want, s3, sizeof s3), pl_dtype_name(h->dtype),
                               pl_kind_shape(h, s2, sizeof s2));
        }
    }
    return PL_OK;
}

/* Per run: the parallelism, the corpus norms when they can be computed once (a persistent corpus
 * no stage writes), and the FAISS index. */
typedef struct pl__search_state {
    int parallel;
    bool cache_norms;
    pthread_mutex_t mu; /* guards the one-time norms */
    bool norms_ready;
    int64_t bad_row; /* -1, or the first non-finite row found when the norms were computed */
    float *norms;
    pl_faiss *index;
} pl__search_state;

static pl_status pl__search_close(const pl_run_env *env, const pl_stage *st, void *state,
                                  int64_t completed, bool failed, pl_error *err)
{
    pl__search_state *s = state;
    if (!s) return PL_OK;
    pthread_mutex_destroy(&s->mu);
    free(s->norms);
    pl_faiss_free(s->index);
    free(s);
    return PL_OK;
}

/* Checks the loaded index against the stage: dimension, metric, size. */
static pl_status pl__search_check_index(const pl_spec *spec, const pl_stage *st, const pl_faiss *ix,
                                        const char *path, pl_error *err)
{
    const pl__search_opts *o = st->priv;
    const pl_buffer *q = pl_kind_rbuf(spec, st, o->queries);
    pl_pos pos = pl_stage_opt(st, "index")->val_pos;
    int64_t n = pl_faiss_ntotal(ix);
    if (pl_faiss_dim(ix) != q->shape[1])
        return pl_error_at(err, PL_EINPUT, pos,
                           "search stage '%s': index '%s' holds %lld-dimensional vectors but "
                           "queries '%s' are %lld-dimensional",
                           st->name, path, (long long)pl_faiss_dim(ix), q->name,
                           (long long)q->shape[1]);
    int want = o->metric == PL_METRIC_L2 ? PL_METRIC_L2 : PL_METRIC_IP;
    if (pl_faiss_metric(ix) != want)
        return pl_error_at(err, PL_EINPUT, pos,
                           "search stage '%s': index '%s' ranks by %s but the stage's metric is "
                           "%s; build it with 'pipectl index build --metric %s'",
                           st->name, path,
                           pl_faiss_metric(ix) == PL_METRIC_L2   ? "l2"
                           : pl_faiss_metric(ix) == PL_METRIC_IP ? "inner product"
                                                                 : "another metric",
                           o->metric == PL_METRIC_L2   ? "l2"
                           : o->metric == PL_METRIC_IP ? "ip"
                                                       : "cosine",
                           o->metric == PL_METRIC_L2   ? "l2"
                           : o->metric == PL_METRIC_IP ? "ip"
                                                       : "cosine");
    if (o->k > n)
        return pl_error_at(err, PL_EINPUT, pl_stage_opt(st, "k")->val_pos,
                           "search stage '%s': k is %lld but index '%s' holds only %lld vectors",
                           st->name, (long long)o->k, path, (long long)n);
    const pl_buffer *rows = o->payload >= 0  ? pl_kind_rbuf(spec, st, o->payload)
                            : o->corpus >= 0 ? pl_kind_rbuf(spec, st, o->corpus)
                                             : NULL;
    if (rows && rows->shape[0] != n)
        return pl_error_at(err, PL_EINPUT, pos,
                           "search stage '%s': index '%s' holds %lld vectors but '%s' has %lld "
                           "rows; they must describe the same documents",
                           st->name, path, (long long)n, rows->name, (long long)rows->shape[0]);
    return PL_OK;
}

/* The norms of a corpus that cannot change, once per run (at open when its contents are there,
 * else on the first batch); *bad gets the first non-finite row or -1. false: out of memory. */
static bool pl__norms_once(pl__search_state *s, pl_pool *pool, const void *data, pl_dtype dtype,
                           int64_t n, int64_t d, int metric, int64_t *bad)
{
    pthread_mutex_lock(&s->mu);
    if (!s->norms_ready) {
        s->norms = malloc((size_t)n * sizeof *s->norms);
        if (s->norms) {
            s->bad_row = pl_search_norms_par(pool, s->parallel, data, dtype, n, d,
                                             (pl_metric)metric, s->norms);
            s->norms_ready = true;
        }
    }
    *bad = s->bad_row;
    pthread_mutex_unlock(&s->mu);
    return s->norms != NULL;
}

static pl_status pl__search_open(const pl_run_env *env, const pl_stage *st, void **state,
                                 pl_error *err)
{
    const pl__search_opts *o = st->priv;
    const pl_spec *spec = env->spec;
    pl__search_state *s = calloc(1, sizeof *s);
    if (!s) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    pthread_mutex_init(&s->mu, NULL);
    s->bad_row = -1;
    *state = s;
    /* Default: the run's workers, but no more threads than cores (workers may exceed the cores
     * when the plan has many streams; an oversubscribed sgemm only loses). */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    s->parallel = o->threads > 0 ? (int)o->threads : env->workers;
    if (o->threads == 0 && cpus > 0 && s->parallel > cpus) s->parallel = (int)cpus;
    /* OpenBLAS keeps work buffers for a bounded number of concurrent callers (MAX_THREADS). */
    if (s->parallel > 64) s->parallel = 64;
    pl_status ps = PL_OK;
    if (env->pool && s->parallel - 1 > pl_pool_threads(env->pool))
        ps = pl_pool_reserve(env->pool, s->parallel - 1, err);
    if (o->corpus >= 0) {
        const pl_buffer *c = pl_kind_rbuf(spec, st, o->corpus);
        s->cache_norms = c->persistent;
        for (int i = 0; i < spec->n_stages && s->cache_norms; i++)
            for (int w = 0; w < spec->stages[i].n_writes; w++)
                if (spec->stages[i].writes[w].index == c->index) s->cache_norms = false;
    }
    /* FAISS's BLAS calls and the exact search's go to the OpenBLAS that this loads. */
    if (ps == PL_OK) ps = pl_blas_load(err);
    if (ps == PL_OK && o->index) {
        char path[4096];
        pl_spec_path(spec, o->index, path, sizeof path);
        pl_error e;
        pl_error_clear(&e);
        if (pl_faiss_load(path, o->nprobe, o->ef_search, &s->index, &e) != PL_OK) {
            const char *m = strncmp(e.msg, "error: ", 7) == 0 ? e.msg + 7 : e.msg;
            ps = pl_error_at(err, e.status, pl_stage_opt(st, "index")->val_pos,
                             "search stage '%s': %s", st->name, m);
        } else {
            ps = pl__search_check_index(spec, st, s->index, path, err);
        }
    }
    /* Before the first batch, what it would otherwise do first: the norms of a corpus no stage
     * writes (their finiteness check still fails the first batch, with the same message), and
     * OpenBLAS's per-thread set-up (pl_search_warm). Measured together on the H200 host
     * (rag_gpt2, 16 threads): the first batch's search takes 1.1-2.1 ms with them and 7.1 ms
     * without, the others 0.5-1 ms. */
    if (ps == PL_OK && !o->index && o->corpus >= 0) {
        const pl_buffer *cb = pl_kind_rbuf(spec, st, o->corpus);
        const void *data = env->open_bufs ? env->open_bufs[cb->index] : NULL;
        int64_t bad;
        if (s->cache_norms && data)
            pl__norms_once(s, env->pool, data, cb->dtype, cb->shape[0], cb->shape[1], o->metric,
                           &bad);
        pl_search_warm(env->pool, s->parallel, pl_kind_rbuf(spec, st, o->queries)->shape[0],
                       cb->shape[0], cb->shape[1]);
    }
    if (ps != PL_OK) { /* close() is owed only after a successful open() */
        pl__search_close(env, st, s, 0, true, NULL);
        *state = NULL;
    }
    return ps;
}

/* The index answers (pl_faiss_search spreads the batch over the pool). */
static pl_status pl__search_index(pl_stage_ctx *ctx, const pl__search_state *s, const float *q,
                                  int64_t nq, int64_t d, int32_t *ids, float *scores, pl_error *err)
{
    const pl__search_opts *o = ctx->stage->priv;
    int64_t k = o->k;
    int64_t *labels = malloc((size_t)(nq * k) * sizeof *labels);
    float *dist = malloc((size_t)(nq * k) * sizeof *dist);
    pl_status ps = PL_OK;
    pl_error e;
    pl_error_clear(&e);
    if (!labels || !dist) {
        ps = pl_error_set(err, PL_ENOMEM, "error: out of memory");
        goto done;
    }
    if (pl_faiss_search(s->index, ctx->env->pool, s->parallel, nq, q, k, labels, dist, &e) !=
        PL_OK) {
        ps = pl_error_set(err, e.status, "error: %s", e.msg);
        goto done;
    }
    int64_t n = pl_faiss_ntotal(s->index);
    for (int64_t i = 0; i < nq * k; i++) {
        int64_t l = labels[i];
        if (l < -1 || l >= n || l > INT32_MAX) {
            ps = pl_error_set(err, PL_ERUNTIME,
                              "error: the index returned id %lld, outside 0..%lld (an index with "
                              "its own ids cannot address the payload rows)",
                              (long long)l, (long long)n - 1);
            goto done;
        }
        ids[i] = (int32_t)l;
    }
    if (scores)
        for (int64_t qi = 0; qi < nq; qi++) {
            double qq = 0;
            for (int64_t t = 0; t < d; t++)
                qq += (double)q[qi * d + t] * q[qi * d + t];
            for (int64_t t = 0; t < k; t++) {
                float v = dist[qi * k + t];
                if (o->metric == PL_METRIC_COSINE) v = qq > 0 ? (float)(v / sqrt(qq)) : 0.0f;
                scores[qi * k + t] = labels[qi * k + t] < 0 ? NAN : v;
            }
        }
done:
    free(labels);
    free(dist);
    return ps;
}

static pl_status pl__search_run(pl_stage_ctx *ctx, pl_error *err)
{
    const pl_spec *spec = ctx->spec;
    const pl_stage *st = ctx->stage;
    const pl__search_opts *o = st->priv;
    pl__search_state *s = ctx->state;
    const pl_buffer *qb = pl_kind_rbuf(spec, st, o->queries);
    const pl_buffer *ib = pl_kind_wbuf(spec, st, o->ids);
    const float *q = ctx->bufs[qb->index];
    int32_t *ids = ctx->bufs[ib->index];
    float *scores = o->scores >= 0 ? ctx->bufs[pl_kind_wbuf(spec, st, o->scores)->index] : NULL;
    int64_t nq = qb->shape[0], d = qb->shape[1];
    pl_status ps = PL_OK;
    float *own_norms = NULL;
    if (s->index) {
        PL_CHECK(pl__search_index(ctx, s, q, nq, d, ids, scores, err));
    } else {
        const pl_buffer *cb = pl_kind_rbuf(spec, st, o->corpus);
        pl_search_corpus c = {
            .data = ctx->bufs[cb->index], .dtype = cb->dtype, .n = cb->shape[0], .d = d};
        /* The norms double as the finiteness check, so every metric computes them: once per run
         * for a corpus that cannot change, else per batch (n x d, against the search's q x n x d).
         */
        int64_t bad = -1;
        if (s->cache_norms) {
            if (pl__norms_once(s, ctx->env->pool, c.data, c.dtype, c.n, d, o->metric, &bad))
                c.norms = s->norms;
        } else {
            c.norms = own_norms = malloc((size_t)c.n * sizeof *own_norms);
            if (own_norms)
                bad = pl_search_norms_par(ctx->env->pool, s->parallel, c.data, c.dtype, c.n, d,
                                          o->metric, own_norms);
        }
        if (!c.norms)
            return pl_error_set(err, PL_ENOMEM, "error: out of memory for the corpus norms");
        if (bad >= 0) {
            ps = pl_error_set(err, PL_EINPUT,
                              "error: corpus '%s' row %lld holds a NaN or an infinity; search "
                              "needs finite vectors (fix or drop that row)",
                              cb->name, (long long)bad);
            goto done;
        }
        char who[160]; /* names the batch in an error */
        snprintf(who, sizeof who, "stage '%s', batch %lld", st->name, (long long)ctx->batch);
        PL_CHECK_GOTO(pl_search_exact(ctx->env->pool, s->parallel, q, nq, &c, (pl_metric)o->metric,
                                      o->k, ids, scores, who, err),
                      ps, done);
    }
    if (o->payload >= 0) {
        const pl_buffer *pb = pl_kind_rbuf(spec, st, o->payload),
                        *hb = pl_kind_wbuf(spec, st, o->hits);
        size_t row = (size_t)(pb->bytes / (uint64_t)pb->shape[0]);
        const char *src = ctx->bufs[pb->index];
        char *dst = ctx->bufs[hb->index];
        for (int64_t i = 0; i < nq * o->k; i++) {
            if (ids[i] < 0)
                memset(dst + (size_t)i * row, 0, row); /* the index found fewer than k */
            else
                memcpy(dst + (size_t)i * row, src + (size_t)ids[i] * row, row);
        }
    }
done:
    free(own_norms);
    return ps;
}

static void pl__search_describe(const pl_spec *spec, const pl_stage *st, char *buf, size_t cap)
{
    const pl__search_opts *o = st->priv;
    static const char *const metrics[] = {"ip", "l2", "cosine"};
    if (o->index)
        snprintf(buf, cap, "top-%lld %s, FAISS index %s", (long long)o->k, metrics[o->metric],
                 o->index);
    else
        snprintf(buf, cap, "top-%lld %s, exact (BLAS)", (long long)o->k, metrics[o->metric]);
}

const pl_kind pl_kind_search = {
    .name = "search",
    .engine = PL_ENGINE_HOST,
    .keys = pl__search_keys,
    .doc = "top-k vector search over a corpus (exact through BLAS, or a FAISS index), then "
           "gathers the hits' payload",
    .bind = pl__search_bind,
    .validate = pl__search_validate,
    .open = pl__search_open,
    .close = pl__search_close,
    .run_host = pl__search_run,
    .describe = pl__search_describe,
};
