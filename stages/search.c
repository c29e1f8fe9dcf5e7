/* search: exact top-k nearest corpus vectors of each query (inner product: larger is nearer;
 * l2: smaller squared distance is nearer; ties go to the smaller index), parallel over queries on
 * `threads` threads, then gathers the hits' payload rows: the retrieval step of RAG. Each query's
 * scores are computed in one fixed order, so results never depend on the thread count. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "pl_kind_util.h"

static const pl_key pl__search_keys[] = {
    {"queries", PL_KEY_NAME, NULL, NULL, "host f32 buffer [q, d] (required)"},
    {"corpus", PL_KEY_NAME, NULL, NULL, "host f32 buffer [n, d], usually persistent (required)"},
    {"k", PL_KEY_INT, NULL, NULL, "hits per query, 1..n (required)"},
    {"metric", PL_KEY_ENUM, "ip|l2", "ip", "inner product (larger is nearer) or squared L2"},
    {"ids", PL_KEY_NAME, NULL, NULL,
     "host i32 buffer [q, k]: hit indices, nearest first (required)"},
    {"payload", PL_KEY_NAME, NULL, NULL, "host buffer [n, p] of per-document data (token ids)"},
    {"hits", PL_KEY_NAME, NULL, NULL, "host buffer [q, k, p], payload's dtype: gathered rows"},
    {"threads", PL_KEY_INT, NULL, "0 (the run's host workers)", "threads to search with"},
    {NULL, 0, NULL, NULL, NULL},
};

typedef struct pl__search_opts {
    int queries, corpus, payload; /* indices in reads (payload -1: none) */
    int ids, hits;                /* indices in writes (hits -1: none) */
    int64_t k;
    int metric; /* 0 ip, 1 l2 */
    int64_t threads;
} pl__search_opts;

static pl_status pl__search_bind(pl_spec *spec, pl_stage *st, pl_error *err)
{
    pl__search_opts *o = pl_spec_alloc(spec, sizeof *o);
    if (!o) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    PL_CHECK(pl_kind_bind_ref(spec, st, "queries", false, true, "the f32 query vectors [q, d]",
                              &o->queries, err));
    PL_CHECK(pl_kind_bind_ref(spec, st, "corpus", false, true, "the f32 corpus vectors [n, d]",
                              &o->corpus, err));
    PL_CHECK(pl_kind_bind_ref(spec, st, "payload", false, false, "", &o->payload, err));
    PL_CHECK(pl_kind_bind_ref(spec, st, "ids", true, true, "an i32 buffer [q, k] for hit indices",
                              &o->ids, err));
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
    st->priv = o;
    return PL_OK;
}

static pl_status pl__search_validate(const pl_spec *spec, const pl_stage *st, pl_error *err)
{
    const pl__search_opts *o = st->priv;
    const pl_buffer *q = pl_kind_rbuf(spec, st, o->queries), *c = pl_kind_rbuf(spec, st, o->corpus);
    const pl_buffer *ids = pl_kind_wbuf(spec, st, o->ids);
    char s1[96], s2[96];
    if (q->dtype != PL_F32 || q->rank != 2)
        return pl_error_at(err, PL_EINPUT, st->reads[o->queries].pos,
                           "search stage '%s': queries '%s' must be f32 [q, d], not %s %s",
                           st->name, q->name, pl_dtype_name(q->dtype),
                           pl_kind_shape(q, s1, sizeof s1));
    if (c->dtype != PL_F32 || c->rank != 2 || c->shape[1] != q->shape[1])
        return pl_error_at(err, PL_EINPUT, st->reads[o->corpus].pos,
                           "search stage '%s': corpus '%s' must be f32 [n, %lld] (the queries' "
                           "dimension), not %s %s",
                           st->name, c->name, (long long)q->shape[1], pl_dtype_name(c->dtype),
                           pl_kind_shape(c, s1, sizeof s1));
    if (o->k > c->shape[0]) {
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
    if (o->payload >= 0) {
        const pl_buffer *p = pl_kind_rbuf(spec, st, o->payload),
                        *h = pl_kind_wbuf(spec, st, o->hits);
        if (p->shape[0] != c->shape[0])
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

typedef struct pl__hit {
    float score; /* larger is nearer (l2 stores the negated distance) */
    int32_t idx;
} pl__hit;

/* a is nearer than b. */
static inline bool pl__better(pl__hit a, pl__hit b)
{
    return a.score > b.score || (a.score == b.score && a.idx < b.idx);
}

/* Min-heap by "nearness": the root is the worst of the k kept. */
static void pl__sift_down(pl__hit *h, int64_t n, int64_t i)
{
    for (;;) {
        int64_t l = 2 * i + 1, r = l + 1, w = i;
        if (l < n && pl__better(h[w], h[l])) w = l;
        if (r < n && pl__better(h[w], h[r])) w = r;
        if (w == i) return;
        pl__hit t = h[i];
        h[i] = h[w];
        h[w] = t;
        i = w;
    }
}

static int pl__cmp_hit(const void *pa, const void *pb)
{
    pl__hit a = *(const pl__hit *)pa, b = *(const pl__hit *)pb;
    return pl__better(a, b) ? -1 : pl__better(b, a) ? 1 : 0;
}

typedef struct pl__search_job {
    const float *q, *c;
    int64_t n, d, k;
    int metric;
    int32_t *ids;
    int64_t q0, q1;
    pl__hit *heap;
    bool started;
} pl__search_job;

static void *pl__search_range(void *p)
{
    pl__search_job *j = p;
    for (int64_t qi = j->q0; qi < j->q1; qi++) {
        const float *qv = j->q + qi * j->d;
        int64_t size = 0;
        for (int64_t ci = 0; ci < j->n; ci++) {
            const float *cv = j->c + ci * j->d;
            float s = 0;
            if (j->metric == 0)
                for (int64_t t = 0; t < j->d; t++)
                    s += qv[t] * cv[t];
            else {
                for (int64_t t = 0; t < j->d; t++) {
                    float e = qv[t] - cv[t];
                    s += e * e;
                }
                s = -s;
            }
            if (isnan(s)) s = -INFINITY; /* NaN is never near */
            pl__hit hit = {s, (int32_t)ci};
            if (size < j->k) {
                /* Insert and sift up. */
                int64_t i = size++;
                j->heap[i] = hit;
                while (i > 0 && pl__better(j->heap[(i - 1) / 2], j->heap[i])) {
                    pl__hit t = j->heap[i];
                    j->heap[i] = j->heap[(i - 1) / 2];
                    j->heap[(i - 1) / 2] = t;
                    i = (i - 1) / 2;
                }
            } else if (pl__better(hit, j->heap[0])) {
                j->heap[0] = hit;
                pl__sift_down(j->heap, size, 0);
            }
        }
        qsort(j->heap, (size_t)size, sizeof *j->heap, pl__cmp_hit);
        for (int64_t t = 0; t < j->k; t++)
            j->ids[qi * j->k + t] = j->heap[t].idx;
    }
    return NULL;
}

static pl_status pl__search_run(pl_stage_ctx *ctx, pl_error *err)
{
    const pl_spec *spec = ctx->spec;
    const pl_stage *st = ctx->stage;
    const pl__search_opts *o = st->priv;
    const pl_buffer *qb = pl_kind_rbuf(spec, st, o->queries),
                    *cb = pl_kind_rbuf(spec, st, o->corpus);
    const pl_buffer *ib = pl_kind_wbuf(spec, st, o->ids);
    int64_t nq = qb->shape[0];
    int64_t nt = o->threads > 0 ? o->threads : ctx->env->workers;
    if (nt > nq) nt = nq;
    if (nt < 1) nt = 1;
    pl__search_job *jobs = calloc((size_t)nt, sizeof *jobs);
    pthread_t *th = calloc((size_t)nt, sizeof *th);
    pl__hit *heaps = malloc((size_t)nt * (size_t)o->k * sizeof *heaps);
    pl_status ps = PL_OK;
    if (!jobs || !th || !heaps) {
        ps = pl_error_set(err, PL_ENOMEM, "error: out of memory");
        goto done;
    }
    for (int64_t t = 0; t < nt; t++) {
        jobs[t] = (pl__search_job){
            .q = ctx->bufs[qb->index],
            .c = ctx->bufs[cb->index],
            .n = cb->shape[0],
            .d = qb->shape[1],
            .k = o->k,
            .metric = o->metric,
            .ids = ctx->bufs[ib->index],
            .q0 = nq * t / nt,
            .q1 = nq * (t + 1) / nt,
            .heap = heaps + t * o->k,
        };
        /* The calling thread takes the last share itself, and any share whose thread did not
         * start. */
        jobs[t].started =
            t < nt - 1 && pthread_create(&th[t], NULL, pl__search_range, &jobs[t]) == 0;
        if (!jobs[t].started) pl__search_range(&jobs[t]);
    }
    for (int64_t t = 0; t < nt; t++)
        if (jobs[t].started) pthread_join(th[t], NULL);
    if (o->payload >= 0) {
        const pl_buffer *pb = pl_kind_rbuf(spec, st, o->payload),
                        *hb = pl_kind_wbuf(spec, st, o->hits);
        size_t row = (size_t)(pb->bytes / (uint64_t)pb->shape[0]);
        const char *src = ctx->bufs[pb->index];
        char *dst = ctx->bufs[hb->index];
        const int32_t *ids = ctx->bufs[ib->index];
        for (int64_t i = 0; i < nq * o->k; i++)
            memcpy(dst + (size_t)i * row, src + (size_t)ids[i] * row, row);
    }
done:
    free(jobs);
    free(th);
    free(heaps);
    return ps;
}

const pl_kind pl_kind_search = {
    .name = "search",
    .engine = PL_ENGINE_HOST,
    .keys = pl__search_keys,
    .doc = "top-k vector search over a corpus, then gathers the hits' payload",
    .bind = pl__search_bind,
    .validate = pl__search_validate,
    .run_host = pl__search_run,
};
