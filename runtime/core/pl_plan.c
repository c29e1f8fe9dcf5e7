/* pl_plan: the plan compiler (order, streams, events, cross-batch deps, memory). Rules in
 * pl_plan.h; the graph comes from pl_graph.c, the same one the checks used. The listings
 * (`pipectl plan`, `--dot`) are runtime/record/pl_plan_dump.c. */
#include "pl_plan.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "pl_graph.h"
#include "pl_loop.h"

/* Do two checked stages' blocks cut their batches at the same places? Each side counts rows of its
 * own buffer (a forward's ids [B, T] and its logits [B, T, V] share B; with chunk_dims: 2 on both,
 * B x T), and one side may count finer rows than the other (chunk_dims 2 against 1), so the blocks'
 * ends are compared as fractions of each side's whole: end_c / total_c == end_p / total_p. */
static bool pl__blocks_alike(const pl_stage *sc, const pl_stage *sp)
{
    int64_t tc = 0, tp = 0;
    for (int j = 0; j < sc->chunks; j++)
        tc += sc->chunk_rows[j], tp += sp->chunk_rows[j];
    int64_t ec = 0, ep = 0;
    for (int j = 0; j < sc->chunks; j++) {
        ec += sc->chunk_rows[j], ep += sp->chunk_rows[j];
        int64_t a, b;
        if (__builtin_mul_overflow(ec, tp, &a) || __builtin_mul_overflow(ep, tc, &b) || a != b)
            return false; /* overflow: beyond any buffer, so never alike in practice */
    }
    return true;
}

bool pl_plan_chunk_linked(const pl_plan *plan, int c, int p)
{
    const pl_stage *sc = &plan->spec->stages[c], *sp = &plan->spec->stages[p];
    /* Alike: the same row blocks, however written (checked specs hold both forms as a list:
     * chunks: 4 and [2, 2, 2, 2] over 8 rows are alike). */
    if (sc->chunks <= 1 || sc->chunks != sp->chunks) return false;
    if (!sc->chunk_rows || !sp->chunk_rows || !pl__blocks_alike(sc, sp)) return false;
    const pl_plan_stage *pc = &plan->stages[c], *pp = &plan->stages[p];
    if (pc->segment < 0 || pc->segment != pp->segment) return false;
    bool pred = false;
    for (int i = 0; i < pc->n_preds && !pred; i++)
        pred = pc->preds[i] == p;
    if (!pred) return false;
    /* Data, not `after:` alone: an `after:` orders whole stages. */
    for (int i = 0; i < sc->n_reads; i++)
        for (int j = 0; j < sp->n_writes; j++)
            if (sc->reads[i].index == sp->writes[j].index) return true;
    return false;
}

void pl_plan_free(pl_plan *plan)
{
    if (!plan) return;
    pl_plan_segments_free(plan);
    if (plan->stages)
        for (int i = 0; i < plan->n_stages; i++) {
            free(plan->stages[i].preds);
            free(plan->stages[i].waits);
        }
    for (int i = 0; i < plan->n_streams; i++)
        free(plan->streams[i].stages);
    for (int i = 0; i < plan->n_events; i++)
        free(plan->events[i].dsts);
    free(plan->stages);
    free(plan->streams);
    free(plan->events);
    free(plan->order);
    free(plan->xdeps);
    for (int i = 0; plan->loops && i < plan->n_loops; i++)
        free(plan->loops[i].body);
    free(plan->loops);
    free(plan);
}

/* Sorts an int array by plan order (insertion sort: the lists are short). */
static void pl__sort_by_order(int *a, int n, const pl_plan_stage *ps)
{
    for (int i = 1; i < n; i++) {
        int v = a[i], j = i - 1;
        while (j >= 0 && ps[a[j]].order > ps[v].order) {
            a[j + 1] = a[j];
            j--;
        }
        a[j + 1] = v;
    }
}

static int pl__int_cmp(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Scratch for pl__implied: a max-heap of stages by plan position and per-stage stamps. */
typedef struct pl__imp {
    int n;
    unsigned cur;
    unsigned *seen; /* == cur: pushed by the current search */
    int *heap;
    int *cands; /* candidates sorted by position */
} pl__imp;

static pl_status pl__imp_init(pl__imp *m, int n)
{
    memset(m, 0, sizeof *m);
    m->n = n;
    m->seen = calloc((size_t)n + 1, sizeof *m->seen);
    m->heap = malloc(((size_t)n + 1) * sizeof *m->heap);
    m->cands = malloc(((size_t)n + 1) * sizeof *m->cands);
    return m->seen && m->heap && m->cands ? PL_OK : PL_ENOMEM;
}

static void pl__imp_fini(pl__imp *m)
{
    free(m->seen);
    free(m->heap);
    free(m->cands);
    memset(m, 0, sizeof *m);
}

static void pl__hpush(int *h, int *n, int v, const int *pos)
{
    int i = (*n)++;
    while (i > 0 && pos[h[(i - 1) / 2]] < pos[v]) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = v;
}

static int pl__hpop(int *h, int *n, const int *pos)
{
    int top = h[0], last = h[--(*n)], i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && pos[h[c + 1]] > pos[h[c]]) c++;
        if (pos[h[c]] <= pos[last]) break;
        h[i] = h[c];
        i = c;
    }
    if (*n > 0) h[i] = last;
    return top;
}

/* Transitive reduction of one stage's incoming edges: sets implied[i] when cand[i] reaches
 * another candidate (a path of length >= 1 in the DAG whose predecessors of x are
 * padj[poff[x] .. poff[x+1])). One backward search from all candidates at once, highest plan
 * position first, that stops as soon as no unmarked candidate can still be reached (every node
 * left is placed before all of them): it visits the stages between the candidates, not the whole
 * graph. `cand` holds distinct stages. */
static void pl__implied(pl__imp *m, const int *poff, const int *padj, const int *pos,
                        const int *cand, int nc, char *implied)
{
    if (++m->cur == 0) {
        memset(m->seen, 0, (size_t)m->n * sizeof *m->seen);
        m->cur = 1;
    }
    unsigned s = m->cur;
    for (int i = 0; i < nc; i++) {
        implied[i] = 0;
        m->cands[i] = cand[i];
    }
    if (nc < 2) return;
    for (int i = 1; i < nc; i++) { /* by position (insertion sort: in-degrees are small) */
        int v = m->cands[i], j = i - 1;
        while (j >= 0 && pos[m->cands[j]] > pos[v]) {
            m->cands[j + 1] = m->cands[j];
            j--;
        }
        m->cands[j + 1] = v;
    }
    int hn = 0, low = 0; /* m->cands[low]: the lowest candidate not known to be implied */
    for (int i = 0; i < nc; i++)
        for (int e = poff[cand[i]]; e < poff[cand[i] + 1]; e++) {
            int y = padj[e];
            if (m->seen[y] == s) continue;
            m->seen[y] = s;
            pl__hpush(m->heap, &hn, y, pos);
        }
    /* A candidate pushed (seen) was reached from another one. */
    while (hn > 0) {
        while (low < nc && m->seen[m->cands[low]] == s)
            low++;
        if (low == nc || pos[m->heap[0]] < pos[m->cands[low]]) break;
        int x = pl__hpop(m->heap, &hn, pos);
        for (int e = poff[x]; e < poff[x + 1]; e++) {
            int y = padj[e];
            if (m->seen[y] == s) continue;
            m->seen[y] = s;
            pl__hpush(m->heap, &hn, y, pos);
        }
    }
    for (int i = 0; i < nc; i++)
        implied[i] = m->seen[cand[i]] == s;
}

/* Intra-batch predecessors after transitive reduction: u is dropped when it reaches another
 * predecessor of the same stage. */
static pl_status pl__reduce_preds(pl_plan *plan, const pl_graph *g)
{
    pl__imp m;
    char *implied = malloc((size_t)g->n + 1);
    if (pl__imp_init(&m, g->n) != PL_OK || !implied) {
        pl__imp_fini(&m);
        free(implied);
        return PL_ENOMEM;
    }
    for (int v = 0; v < g->n; v++) {
        int lo = g->pred_off[v], hi = g->pred_off[v + 1];
        pl_plan_stage *ps = &plan->stages[v];
        ps->preds = malloc(((size_t)(hi - lo) + 1) * sizeof *ps->preds);
        if (!ps->preds) {
            pl__imp_fini(&m);
            free(implied);
            return PL_ENOMEM;
        }
        pl__implied(&m, g->pred_off, g->pred, g->pos, g->pred + lo, hi - lo, implied);
        for (int i = lo; i < hi; i++)
            if (!implied[i - lo]) ps->preds[ps->n_preds++] = g->pred[i];
        pl__sort_by_order(ps->preds, ps->n_preds, plan->stages);
    }
    pl__imp_fini(&m);
    free(implied);
    return PL_OK;
}

static int pl__stream_new(pl_plan *plan, pl_engine e, const char *name)
{
    pl_stream *s = &plan->streams[plan->n_streams];
    snprintf(s->name, sizeof s->name, "%s", name);
    s->engine = e;
    s->parallel = 1;
    return plan->n_streams++;
}

/* A host stage that runs several batches at once (`parallel`): alone on its stream. */
static bool pl__parallel(const pl_plan *plan, int v)
{
    return plan->stages[v].engine == PL_ENGINE_HOST && plan->spec->stages[v].parallel > 1;
}

/* Appends a stage; capacities are powers of two (a stream is filled once, in plan order). */
static int pl__stream_push(pl_stream *s, int v)
{
    if ((s->n_stages & (s->n_stages - 1)) == 0) {
        int *a = realloc(s->stages, (size_t)(s->n_stages ? s->n_stages * 2 : 4) * sizeof *a);
        if (!a) return -1;
        s->stages = a;
    }
    s->stages[s->n_stages++] = v;
    return 0;
}

/* One h2d and one d2h stream; a compute or host stage continues the stream of a same-engine
 * predecessor that is still that stream's last stage (the first such in plan order), else it
 * opens a new stream: one per independent branch. */
static pl_status pl__assign_streams(pl_plan *plan)
{
    int n = plan->n_stages;
    int h2d = -1, d2h = -1, n_compute = 0, n_host = 0;
    plan->streams = calloc((size_t)n + 1, sizeof *plan->streams);
    if (!plan->streams) return PL_ENOMEM;
    for (int k = 0; k < n; k++) {
        int v = plan->order[k];
        pl_plan_stage *ps = &plan->stages[v];
        int sid = -1;
        char name[32];
        if (ps->body) { /* inside its loop, which comes first in plan order */
            ps->stream = plan->stages[plan->loops[ps->loop].stage].stream;
            continue;
        }
        if (ps->engine == PL_ENGINE_H2D) {
            if (h2d < 0) h2d = pl__stream_new(plan, PL_ENGINE_H2D, "h2d");
            sid = h2d;
        } else if (ps->engine == PL_ENGINE_D2H) {
            if (d2h < 0) d2h = pl__stream_new(plan, PL_ENGINE_D2H, "d2h");
            sid = d2h;
        } else {
            /* An output stage (a sink) opens its own stream: it runs a batch only once the whole
             * batch is done (the commit point, runtime/exec/pl_sched.h), and on its producer's
             * stream it would hold that producer's next batch back behind the device work. */
            /* A parallel stage opens one too, and none continues its stream. */
            bool out = (plan->spec->stages[v].kind->role & PL_ROLE_OUTPUT) != 0;
            bool alone = out || pl__parallel(plan, v);
            for (int i = 0; i < ps->n_preds && sid < 0 && !alone; i++) {
                const pl_plan_stage *pp = &plan->stages[ps->preds[i]];
                const pl_stream *s = &plan->streams[pp->stream];
                if (pp->engine == ps->engine && s->stages[s->n_stages - 1] == pp->stage &&
                    !pl__parallel(plan, pp->stage))
                    sid = pp->stream;
            }
            if (sid < 0) {
                bool comp = ps->engine == PL_ENGINE_COMPUTE;
                snprintf(name, sizeof name, "%s%d", comp ? "compute" : "host",
                         comp ? n_compute++ : n_host++);
                sid = pl__stream_new(plan, ps->engine, name);
                if (pl__parallel(plan, v))
                    plan->streams[sid].parallel = plan->spec->stages[v].parallel;
            }
        }
        if (pl__stream_push(&plan->streams[sid], v)) return PL_ENOMEM;
        ps->stream = sid;
    }
    return PL_OK;
}

/* Events: a cross-stream edge u -> v is kept unless another path u -> ... -> v exists in the
 * graph of reduced intra-batch edges plus stream order (v's stream already waits for u). */
static pl_status pl__place_events(pl_plan *plan)
{
    pl_status st = PL_OK;
    int n = plan->n_stages;
    int *sprev = NULL, *tmp = NULL, *pos = NULL;
    int *poff = NULL, *padj = NULL, *kept_src = NULL, *kept_dst = NULL;
    char *implied = NULL;
    pl__imp imp = {0};
    /* Edges of the combined graph: reduced preds, and each stream's previous stage. */
    int m = 0;
    for (int v = 0; v < n; v++)
        m += plan->stages[v].n_preds + 1;
    padj = malloc(((size_t)m + 1) * sizeof *padj);
    poff = calloc((size_t)n + 1, sizeof *poff);
    sprev = malloc(((size_t)n + 1) * sizeof *sprev); /* stream predecessor, -1 for the first */
    tmp = malloc(((size_t)n + 1) * sizeof *tmp);
    pos = malloc(((size_t)n + 1) * sizeof *pos);
    implied = malloc((size_t)n + 1);
    kept_src = malloc(((size_t)m + 1) * sizeof *kept_src);
    kept_dst = malloc(((size_t)m + 1) * sizeof *kept_dst);
    if (!padj || !poff || !sprev || !tmp || !pos || !implied || !kept_src || !kept_dst ||
        pl__imp_init(&imp, n) != PL_OK)
        goto oom;
    for (int v = 0; v < n; v++) {
        sprev[v] = -1;
        pos[v] = plan->stages[v].order; /* streams follow plan order: it orders this graph too */
    }
    for (int s = 0; s < plan->n_streams; s++)
        for (int i = 1; i < plan->streams[s].n_stages; i++)
            sprev[plan->streams[s].stages[i]] = plan->streams[s].stages[i - 1];
    /* Predecessor lists in the combined graph (CSR). */
    for (int v = 0; v < n; v++) {
        poff[v + 1] = poff[v];
        const pl_plan_stage *ps = &plan->stages[v];
        for (int i = 0; i < ps->n_preds; i++)
            padj[poff[v + 1]++] = ps->preds[i];
        bool dup = false;
        for (int i = 0; i < ps->n_preds; i++)
            dup |= ps->preds[i] == sprev[v];
        if (sprev[v] >= 0 && !dup) padj[poff[v + 1]++] = sprev[v];
    }

    /* Kept cross-stream edges, in plan order of the waiting stage. */
    int nk = 0;
    for (int k = 0; k < n; k++) {
        int v = plan->order[k];
        const pl_plan_stage *ps = &plan->stages[v];
        bool cross = false;
        for (int i = 0; i < ps->n_preds; i++)
            cross |= plan->stages[ps->preds[i]].stream != ps->stream;
        if (!cross) continue;
        int lo = poff[v], np = poff[v + 1] - lo;
        pl__implied(&imp, poff, padj, pos, padj + lo, np, implied);
        for (int i = 0; i < ps->n_preds; i++) {
            int u = ps->preds[i];
            if (plan->stages[u].stream == ps->stream) continue;
            if (implied[i]) continue; /* preds come first in v's combined list, in this order */
            kept_src[nk] = u;
            kept_dst[nk] = v;
            nk++;
        }
    }
    /* One event per source stage, numbered in plan order of the sources. */
    plan->events = calloc((size_t)n + 1, sizeof *plan->events);
    if (!plan->events) goto oom;
    int *nout = tmp; /* kept out-edges per stage */
    for (int v = 0; v < n; v++)
        nout[v] = 0;
    for (int i = 0; i < nk; i++)
        nout[kept_src[i]]++;
    for (int k = 0; k < n; k++) {
        int u = plan->order[k];
        if (!nout[u]) continue;
        pl_event *ev = &plan->events[plan->n_events];
        ev->src = u;
        ev->dsts = malloc((size_t)nout[u] * sizeof *ev->dsts);
        if (!ev->dsts) goto oom;
        plan->stages[u].event = plan->n_events++;
    }
    for (int i = 0; i < nk; i++) { /* kept edges are in plan order of dst: dsts come out sorted */
        pl_event *ev = &plan->events[plan->stages[kept_src[i]].event];
        ev->dsts[ev->n_dsts++] = kept_dst[i];
    }
    for (int v = 0; v < n; v++) {
        pl_plan_stage *ps = &plan->stages[v];
        ps->waits = malloc(((size_t)ps->n_preds + 1) * sizeof *ps->waits);
        if (!ps->waits) goto oom;
    }
    for (int i = 0; i < nk; i++) {
        pl_plan_stage *ps = &plan->stages[kept_dst[i]];
        ps->waits[ps->n_waits++] = plan->stages[kept_src[i]].event;
        plan->n_waits++;
    }
    for (int v = 0; v < n; v++)
        qsort(plan->stages[v].waits, (size_t)plan->stages[v].n_waits, sizeof(int), pl__int_cmp);
    goto done;
oom:
    st = PL_ENOMEM;
done:
    pl__imp_fini(&imp);
    free(pos);
    free(implied);
    free(poff);
    free(padj);
    free(sprev);
    free(tmp);
    free(kept_src);
    free(kept_dst);
    return st;
}

typedef struct pl__xvec {
    pl_xdep *a;
    int n, cap;
} pl__xvec;

static int pl__xadd(pl__xvec *v, int from, int to, int distance, int buffer, pl_xdep_why why)
{
    if (v->n == v->cap) {
        int cap = v->cap ? v->cap * 2 : 32;
        pl_xdep *a = realloc(v->a, (size_t)cap * sizeof *a);
        if (!a) return -1;
        v->a = a;
        v->cap = cap;
    }
    v->a[v->n++] = (pl_xdep){from, to, distance, buffer, why};
    return 0;
}

/* A cross-batch dep with its stages' plan order beside it: qsort has no context argument in C11,
 * and a file-scope pointer to the plan would make two plans compiled at once race. */
typedef struct pl__xkey {
    int to_order, from_order;
    pl_xdep x;
} pl__xkey;

static int pl__xkey_cmp(const void *a, const void *b)
{
    const pl__xkey *p = a, *q = b;
    const pl_xdep *x = &p->x, *y = &q->x;
    if (p->to_order != q->to_order) return p->to_order < q->to_order ? -1 : 1;
    if (p->from_order != q->from_order) return p->from_order < q->from_order ? -1 : 1;
    if (x->distance != y->distance) return x->distance < y->distance ? -1 : 1;
    if (x->why != y->why) return x->why < y->why ? -1 : 1;
    return (x->buffer > y->buffer) - (x->buffer < y->buffer);
}

/* Sorting helpers for pl__prune_xdeps: deps of one stage by a position, then index. */
typedef struct pl__pk {
    int key, idx;
} pl__pk;

static int pl__pk_cmp(const void *a, const void *b)
{
    const pl__pk *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

/* One side of pl__prune_xdeps' search: F (deps grouped by `from`, each group by position of
 * `to`, ascending; searched along successors) or T (deps grouped by `to`, each group by position
 * of `from`, descending; searched along predecessors). `sign` turns T's "at or above, highest
 * first" into F's "at or below, lowest first", so one function serves both sides. */
typedef struct pl__xside {
    bool is_from;             /* F */
    int sign;                 /* +1: F, -1: T */
    const int *adj_off, *adj; /* the graph's successors (F) or predecessors (T) */
    int *off, *idx;           /* the deps at stage u: idx[off[u] .. off[u + 1]) */
    int *bound;               /* [distance class][stage]: min_to (F), max_from (T) */
    unsigned *mark;           /* the stages of the side's set: mark[u] == stamp */
    int *list, n_list;        /* those stages */
} pl__xside;

static int pl__xnear(const pl__xside *s, const pl_xdep *x)
{
    return s->is_from ? x->from : x->to;
}

static int pl__xfar(const pl__xside *s, const pl_xdep *x)
{
    return s->is_from ? x->to : x->from;
}

/* Owns the side's arrays (pl__xside_free), whether or not it returns true. */
static bool pl__xside_alloc(pl__xside *s, bool is_from, const pl_graph *g, int nd, int m)
{
    size_t n = (size_t)g->n;
    s->is_from = is_from;
    s->sign = is_from ? 1 : -1;
    s->adj_off = is_from ? g->succ_off : g->pred_off;
    s->adj = is_from ? g->succ : g->pred;
    s->bound = malloc(((size_t)nd * n + 1) * sizeof *s->bound);
    s->off = calloc(n + 2, sizeof *s->off);
    s->idx = malloc(((size_t)m + 1) * sizeof *s->idx);
    s->mark = calloc(n + 1, sizeof *s->mark);
    s->list = malloc((n + 1) * sizeof *s->list);
    s->n_list = 0;
    return s->bound && s->off && s->idx && s->mark && s->list;
}

static void pl__xside_free(pl__xside *s)
{
    free(s->bound);
    free(s->off);
    free(s->idx);
    free(s->mark);
    free(s->list);
}

/* Groups the deps by the side's end, each group by the far end's position (times sign), so that
 * scans stop at the first dep out of range. tmp: m entries. */
static void pl__xside_index(pl__xside *s, const pl_graph *g, const pl_xdep *a, int m, pl__pk *tmp)
{
    int n = g->n;
    for (int i = 0; i < m; i++)
        s->off[pl__xnear(s, &a[i]) + 1]++;
    for (int u = 0; u < n; u++)
        s->off[u + 1] += s->off[u];
    for (int i = 0; i < m; i++)
        tmp[i] = (pl__pk){pl__xnear(s, &a[i]), i};
    qsort(tmp, (size_t)m, sizeof *tmp, pl__pk_cmp);
    for (int i = 0; i < m; i++)
        s->idx[i] = tmp[i].idx;
    for (int u = 0; u < n; u++) {
        int lo = s->off[u], c = s->off[u + 1] - lo;
        for (int e = 0; e < c; e++) {
            int j = s->idx[lo + e];
            tmp[e] = (pl__pk){s->sign * g->pos[pl__xfar(s, &a[j])], j};
        }
        qsort(tmp, (size_t)c, sizeof *tmp, pl__pk_cmp);
        for (int e = 0; e < c; e++)
            s->idx[lo + e] = tmp[e].idx;
    }
}

/* bound[u] over the deps of distance <= dist: the lowest position of a `to` leaving u or below
 * it (F), the highest of a `from` arriving at u or above it (T); n (F) or -1 (T) when none. */
static void pl__xside_bounds(pl__xside *s, const pl_graph *g, const pl_xdep *a, int dist,
                             int *bound)
{
    int n = g->n;
    for (int q = 0; q < n; q++) {
        int u = g->order[s->is_from ? n - 1 - q : q], best = s->is_from ? n : -1;
        for (int e = s->off[u]; e < s->off[u + 1]; e++) {
            const pl_xdep *y = &a[s->idx[e]];
            int p = g->pos[pl__xfar(s, y)];
            if (y->distance <= dist && s->sign * p < s->sign * best) best = p;
        }
        for (int e = s->adj_off[u]; e < s->adj_off[u + 1]; e++)
            if (s->sign * bound[s->adj[e]] < s->sign * best) best = bound[s->adj[e]];
        bound[u] = best;
    }
}

/* The side's set for x: the stages reached from x's end, entering only those whose bound is
 * within the position of x's far end. */
static void pl__xside_reach(pl__xside *s, const pl_graph *g, const pl_xdep *x, const int *bound,
                            unsigned stamp, int *stack)
{
    int lim = s->sign * g->pos[pl__xfar(s, x)], top = 0;
    s->n_list = 0;
    stack[top++] = pl__xnear(s, x);
    s->mark[stack[0]] = stamp;
    while (top > 0) {
        int u = stack[--top];
        s->list[s->n_list++] = u;
        for (int e = s->adj_off[u]; e < s->adj_off[u + 1]; e++) {
            int c = s->adj[e];
            if (s->mark[c] == stamp || s->sign * bound[c] > lim) continue;
            s->mark[c] = stamp;
            stack[top++] = c;
        }
    }
}

/* How many deps at the side's set have their far end within x's (by binary search in each
 * sorted group): the cost of scanning from this side. */
static int64_t pl__xside_cost(const pl__xside *s, const pl_graph *g, const pl_xdep *a,
                              const pl_xdep *x)
{
    int lim = s->sign * g->pos[pl__xfar(s, x)];
    int64_t cost = 0;
    for (int q = 0; q < s->n_list; q++) {
        int lo = s->off[s->list[q]], hi = s->off[s->list[q] + 1];
        while (lo < hi) {
            int mid = lo + (hi - lo) / 2;
            if (s->sign * g->pos[pl__xfar(s, &a[s->idx[mid]])] <= lim)
                lo = mid + 1;
            else
                hi = mid;
        }
        cost += lo - s->off[s->list[q]];
    }
    return cost;
}

/* Whether a dep other than a[i], of distance <= a[i]'s, joins the side's set, within a[i]'s far
 * end, to a stage of the other side's set. */
static bool pl__xside_scan(const pl__xside *s, const pl__xside *other, const pl_graph *g,
                           const pl_xdep *a, int i, unsigned stamp)
{
    int lim = s->sign * g->pos[pl__xfar(s, &a[i])];
    for (int q = 0; q < s->n_list; q++)
        for (int e = s->off[s->list[q]]; e < s->off[s->list[q] + 1]; e++) {
            const pl_xdep *y = &a[s->idx[e]];
            int far = pl__xfar(s, y);
            if (s->sign * g->pos[far] > lim) break;
            if (s->idx[e] != i && y->distance <= a[i].distance && other->mark[far] == stamp)
                return true;
        }
    return false;
}

/* Whether some pair of F x T has a dep other than a[i] of distance <= a[i]'s: each pair looked
 * up by binary search in the group of its `from`. */
static bool pl__xpairs_linked(const pl__xside *f, const pl__xside *t, const pl_graph *g,
                              const pl_xdep *a, int i)
{
    const int *pos = g->pos;
    for (int q = 0; q < f->n_list; q++)
        for (int r = 0; r < t->n_list; r++) {
            int lo = f->off[f->list[q]], end = f->off[f->list[q] + 1], hi = end;
            int want = pos[t->list[r]];
            while (lo < hi) {
                int mid = lo + (hi - lo) / 2;
                if (pos[a[f->idx[mid]].to] < want)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            /* One dep per (from, to): the one found, if any, is the pair's. */
            if (lo < end && pos[a[f->idx[lo]].to] == want && f->idx[lo] != i &&
                a[f->idx[lo]].distance <= a[i].distance)
                return true;
        }
    return false;
}

/* Whether a[i] is implied by another dep, the sets F and T built with distance class k and
 * searched by the cheapest of the three scans. */
static bool pl__xdep_implied(const pl_graph *g, const pl_xdep *a, int i, int k, pl__xside *f,
                             pl__xside *t, unsigned stamp, int *stack)
{
    size_t at = (size_t)k * (size_t)g->n;
    pl__xside_reach(f, g, &a[i], f->bound + at, stamp, stack);
    pl__xside_reach(t, g, &a[i], t->bound + at, stamp, stack);
    int64_t cost_f = pl__xside_cost(f, g, a, &a[i]), cost_t = pl__xside_cost(t, g, a, &a[i]);
    int64_t cost_p = (int64_t)f->n_list * t->n_list; /* every (F, T) pair, each by binary search */
    if (cost_p < cost_f && cost_p < cost_t) return pl__xpairs_linked(f, t, g, a, i);
    if (cost_f <= cost_t) return pl__xside_scan(f, t, g, a, i, stamp);
    return pl__xside_scan(t, f, g, a, i, stamp);
}

/* keep[i] = 0 when x = a[i] = (f -> t, d) is implied by another y = (f' -> t', d' <= d) with f'
 * at or below f and t' at or above t (within a batch). No reachability table:
 * - F: the stages at or below f through which such a y can still be found: a forward search
 *   that enters c only when min_to[c] (the lowest position of a `to` over deps of distance <= d
 *   leaving c or below it) is <= pos[t];
 * - T: the stages at or above t, a backward search entering p only when max_from[p] (the highest
 *   position of a `from` over deps of distance <= d arriving at p or above it) is >= pos[f];
 * - then the deps leaving F towards positions <= pos[t] are scanned for a `to` in T, or the deps
 *   arriving in T from positions >= pos[f] for a `from` in F, or every pair of F x T is looked
 *   up: whichever is cheapest. A chain keeps F and T tiny; a fan-out (one stage with thousands
 *   of deps) is scanned from the side where its deps are few, and a fan-out joined again (a
 *   join with a dep to every branch) by pairs. Memory: O(stages + deps) per distance class (there
 * are two: 1 and depth). */
static pl_status pl__prune_xdeps(const pl_graph *g, const pl_xdep *a, int m, char *keep)
{
    pl_status st = PL_ENOMEM;
    int n = g->n;
    int nd = 0, dists[2 * 64 + 2];
    pl__xside f, t;
    int *stack = NULL;
    pl__pk *tmp = NULL;
    for (int i = 0; i < m; i++)
        keep[i] = 1;
    if (m == 0) return PL_OK;
    for (int i = 0; i < m; i++) {
        int k = 0;
        while (k < nd && dists[k] != a[i].distance)
            k++;
        if (k == nd) {
            if (nd == (int)(sizeof dists / sizeof *dists)) return PL_ERUNTIME;
            dists[nd++] = a[i].distance;
        }
    }
    bool ok_f = pl__xside_alloc(&f, true, g, nd, m), ok_t = pl__xside_alloc(&t, false, g, nd, m);
    stack = malloc(((size_t)n + 1) * sizeof *stack);
    tmp = malloc(((size_t)m + 1) * sizeof *tmp);
    if (!ok_f || !ok_t || !stack || !tmp) goto done;
    pl__xside_index(&f, g, a, m, tmp);
    pl__xside_index(&t, g, a, m, tmp);
    for (int k = 0; k < nd; k++) {
        pl__xside_bounds(&f, g, a, dists[k], f.bound + (size_t)k * (size_t)n);
        pl__xside_bounds(&t, g, a, dists[k], t.bound + (size_t)k * (size_t)n);
    }
    unsigned stamp = 0;
    for (int i = 0; i < m; i++) {
        int k = 0;
        while (dists[k] != a[i].distance)
            k++;
        if (++stamp == 0) {
            memset(f.mark, 0, (size_t)n * sizeof *f.mark);
            memset(t.mark, 0, (size_t)n * sizeof *t.mark);
            stamp = 1;
        }
        if (pl__xdep_implied(g, a, i, k, &f, &t, stamp, stack)) keep[i] = 0;
    }
    st = PL_OK;
done:
    pl__xside_free(&f);
    pl__xside_free(&t);
    free(stack);
    free(tmp);
    return st;
}

/* Cross-batch deps. Per-batch buffers: each writer of batch i+depth waits for the last accessors
 * of batch i (those with no successor among the buffer's accessors), because they share a slot.
 * Written persistent buffers: the first accessors of batch i+1 wait for the last accessors of
 * batch i, so every access of batch i precedes every access of batch i+1 (this also covers
 * readers ordered before the writer by after:, which must see the previous batch's write).
 * Ordered kinds: stage(i+1) waits for stage(i). A stage never waits for itself otherwise (its
 * batches run in order on its stream). Then implied ones are dropped: (a -> b, d) is
 * implied by (a' -> b', d') when d' <= d, a precedes-or-is a' and b' precedes-or-is b.
 *
 * No reachability table: every question is a search bounded by plan positions (pl_walk), and the
 * implied-dep test is pl__prune_xdeps. */
static pl_status pl__cross_batch(pl_plan *plan, const pl_spec *spec, const pl_graph *g)
{
    pl_status st = PL_OK;
    pl__xvec v = {0};
    char *keep = NULL;
    int n = g->n;
    const int *pos = g->pos;
    pl_walk w = {0};
    int *lasts = malloc(((size_t)n + 1) * sizeof *lasts);
    if (!lasts || pl_walk_init(&w, n) != PL_OK) goto oom;
    for (int b = 0; b < g->n_buffers; b++) {
        const pl_buffer *buf = &spec->buffers[b];
        int lo = g->acc_off[b], hi = g->acc_off[b + 1];
        bool written = false;
        for (int i = lo; i < hi; i++)
            written |= (g->acc_mode[i] & PL_ACC_WRITE) != 0;
        if (!written) continue;
        /* The accessors are the targets; none lies outside [pmin, pmax]. */
        int pmin = n, pmax = -1;
        pl_walk_targets(&w);
        for (int i = lo; i < hi; i++) {
            int a = g->acc[i];
            pl_walk_target(&w, a);
            if (pos[a] < pmin) pmin = pos[a];
            if (pos[a] > pmax) pmax = pos[a];
        }
        int nl = 0;
        for (int i = lo; i < hi; i++)
            if (!pl_walk_any(&w, g->succ_off, g->succ, pos, g->acc[i], true, pmax))
                lasts[nl++] = g->acc[i];
        for (int j = lo; j < hi; j++) {
            int t = g->acc[j];
            bool target = buf->persistent
                              ? !pl_walk_any(&w, g->pred_off, g->pred, pos, t, false, pmin)
                              : (g->acc_mode[j] & PL_ACC_WRITE) != 0;
            if (!target) continue;
            for (int i = 0; i < nl; i++)
                if (pl__xadd(&v, lasts[i], t, buf->persistent ? 1 : plan->depth, b,
                             buf->persistent ? PL_XDEP_PERSISTENT : PL_XDEP_SLOT_REUSE))
                    goto oom;
        }
    }
    for (int s = 0; s < spec->n_stages; s++) {
        if (spec->stages[s].parent < 0 && pl_stage_ordered(spec, &spec->stages[s]) &&
            pl__xadd(&v, s, s, 1, -1, PL_XDEP_ORDERED))
            goto oom;
    }
    /* A stage waiting for itself (the last accessor of a buffer it writes) is implied on the host:
     * a stage's batches run in order on its stream (but a parallel one's do not: it keeps them).
     * Not on the GPU for a persistent buffer: batch b and b + 1 are in different slots, whose
     * graphs run on different launch streams, so a device stage accumulating into a persistent
     * buffer (gemm with beta != 0) keeps its distance-1 wait. Ordered kinds keep theirs: it is
     * their contract. */
    {
        int m0 = 0;
        for (int i = 0; i < v.n; i++) {
            const pl_xdep *x = &v.a[i];
            pl_engine e = spec->stages[x->from].kind->engine;
            bool device = e == PL_ENGINE_H2D || e == PL_ENGINE_COMPUTE || e == PL_ENGINE_D2H;
            if (x->from != x->to || x->why == PL_XDEP_ORDERED ||
                (device && x->why == PL_XDEP_PERSISTENT) || pl__parallel(plan, x->from))
                v.a[m0++] = *x;
        }
        v.n = m0;
    }
    if (v.n) {
        pl__xkey *keys = malloc((size_t)v.n * sizeof *keys);
        if (!keys) goto oom;
        for (int i = 0; i < v.n; i++)
            keys[i] =
                (pl__xkey){plan->stages[v.a[i].to].order, plan->stages[v.a[i].from].order, v.a[i]};
        qsort(keys, (size_t)v.n, sizeof *keys, pl__xkey_cmp);
        for (int i = 0; i < v.n; i++)
            v.a[i] = keys[i].x;
        free(keys);
    }
    /* One per (from, to): the smallest distance sorts first. */
    int m = 0;
    for (int i = 0; i < v.n; i++)
        if (m == 0 || v.a[m - 1].from != v.a[i].from || v.a[m - 1].to != v.a[i].to)
            v.a[m++] = v.a[i];

    keep = malloc((size_t)m + 1);
    if (!keep || pl__prune_xdeps(g, v.a, m, keep) != PL_OK) goto oom;
    plan->xdeps = malloc(((size_t)m + 1) * sizeof *plan->xdeps);
    if (!plan->xdeps) goto oom;
    for (int i = 0; i < m; i++)
        if (keep[i]) plan->xdeps[plan->n_xdeps++] = v.a[i];
    goto done;
oom:
    st = PL_ENOMEM;
done:
    free(keep);
    free(v.a);
    free(lasts);
    pl_walk_fini(&w);
    return st;
}

/* plan->order: the top level's order, each loop's body right after its loop, in the order of the
 * body's own graph; and plan->loops. */
static pl_status pl__order_loops(pl_plan *plan, const pl_spec *spec, const pl_graph *g,
                                 pl_error *err)
{
    int n = spec->n_stages, k = 0;
    for (int s = 0; s < n; s++)
        plan->n_loops += spec->stages[s].loop != NULL;
    if (plan->n_loops == 0) {
        memcpy(plan->order, g->order, (size_t)n * sizeof *plan->order);
        return PL_OK;
    }
    plan->loops = calloc((size_t)plan->n_loops, sizeof *plan->loops);
    if (!plan->loops) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    int nl = 0;
    for (int i = 0; i < g->n_members; i++) {
        int v = g->order[i];
        plan->order[k++] = v;
        const pl_stage *L = &spec->stages[v];
        if (!L->loop) continue;
        pl_plan_loop *pl = &plan->loops[nl];
        pl->stage = v;
        pl->device = pl_loop_on_device(spec, L);
        pl->graph = pl->device && L->kind->engine == PL_ENGINE_COMPUTE;
        pl->body = malloc(((size_t)L->loop->n_body + 1) * sizeof *pl->body);
        if (!pl->body) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
        pl_graph bg;
        PL_CHECK(pl_graph_build_part(spec, v, &bg, err));
        for (int j = 0; j < bg.n_members && j < L->loop->n_body; j++) {
            int b = bg.order[j];
            pl->body[pl->n_body++] = b;
            plan->order[k++] = b;
            plan->stages[b].loop = nl;
            plan->stages[b].body = true;
        }
        pl_graph_fini(&bg);
        plan->stages[v].loop = nl++;
    }
    if (k != n)
        return pl_error_set(err, PL_ERUNTIME,
                            "error: the plan ordered %d of %d stages (a loop's body is not its "
                            "parent's); pl_spec_check reports it",
                            k, n);
    return PL_OK;
}

pl_status pl_plan_compile(const pl_spec *spec, pl_plan **out, pl_error *err)
{
    return pl_plan_compile_with(spec, 0, 0, out, err);
}

/* The buffers' sizes, and on the device side what the stages allocate themselves. */
static void pl__mem_sizes(const pl_spec *spec, pl_mem_sizes *m)
{
    pl_spec_mem_sizes(spec, m);
    for (int i = 0; i < spec->n_stages; i++) {
        const pl_stage *st = &spec->stages[i];
        if (!st->kind || !st->kind->device_memory) continue;
        uint64_t per = 0, pers = 0;
        st->kind->device_memory(spec, st, &per, &pers);
        m->stage_per_slot += per;
        m->stage_persistent += pers;
    }
    m->device_per_slot += m->stage_per_slot;
    m->device_persistent += m->stage_persistent;
}

pl_status pl_plan_compile_with(const pl_spec *spec, int64_t batches, int depth, pl_plan **out,
                               pl_error *err)
{
    pl_status st = PL_OK;
    pl_graph g = {0};
    *out = NULL;
    if (!spec->checked)
        return pl_error_set(err, PL_ERUNTIME,
                            "error: pl_plan_compile needs a checked spec; call pl_spec_check "
                            "first");
    if (batches < 0 || batches > PL_MAX_BATCHES)
        return pl_error_set(err, PL_EINPUT,
                            "error: batches is %lld; it must be 0 (the pipeline's run.batches) or "
                            "between 1 and %lld",
                            (long long)batches, (long long)PL_MAX_BATCHES);
    if (depth < PL_DEPTH_AUTO || depth > PL_MAX_DEPTH)
        return pl_error_set(err, PL_EINPUT,
                            "error: depth is %d; it must be 0 (the pipeline's run.depth), -1 "
                            "(auto) or between 1 and %d",
                            depth, PL_MAX_DEPTH);
    bool autod = depth == PL_DEPTH_AUTO || (depth == 0 && spec->run.depth_auto);
    int d = autod ? PL_DEPTH_CALIB : depth > 0 ? depth : spec->run.depth;
    pl_mem_sizes mem;
    pl__mem_sizes(spec, &mem);
    PL_CHECK(pl_budget_check(spec, &mem, d, err));
    pl_plan *plan = calloc(1, sizeof *plan);
    if (!plan) return pl_error_set(err, PL_ENOMEM, "error: out of memory compiling the plan");
    int n = spec->n_stages;
    plan->spec = spec;
    plan->depth = d;
    plan->batches = batches > 0 ? batches : spec->run.batches;
    plan->depth_auto = autod;
    plan->depth_cap = d;
    if (autod) {
        const char *side;
        plan->depth_cap = pl_budget_max_depth(spec, &mem, &side);
        plan->cap_why = side ? (strcmp(side, "device") == 0 ? "memory_budget.device"
                                                            : "memory_budget.host_pinned")
                             : "PL_MAX_DEPTH";
        if (!spec->run.budget.set) {
            plan->depth_cap = PL_DEPTH_AUTO_MAX;
            plan->cap_why = "no memory_budget";
        }
        if (plan->depth_cap > plan->batches) {
            plan->depth_cap = (int)plan->batches;
            plan->cap_why = "the batches";
        }
        if (plan->depth_cap < PL_DEPTH_CALIB) plan->depth_cap = PL_DEPTH_CALIB;
    }
    plan->n_stages = n;
    if (plan->batches < 1) {
        st = pl_error_set(err, PL_EINPUT,
                          "error: 'batches: all' is counted from the source files before "
                          "planning (pl_spec_resolve_batches); give a number of batches");
        goto fail;
    }
    PL_CHECK_GOTO(pl_graph_build(spec, &g, err), st, fail);
    if (g.n_order != n) {
        st = pl_error_set(err, PL_ERUNTIME,
                          "error: the pipeline's stages form a cycle; pl_spec_check reports it");
        goto fail;
    }
    plan->order = malloc(((size_t)n + 1) * sizeof *plan->order);
    plan->stages = calloc((size_t)n + 1, sizeof *plan->stages);
    if (!plan->order || !plan->stages) goto oom;
    for (int s = 0; s < n; s++)
        plan->stages[s].loop = -1;
    PL_CHECK_GOTO(pl__order_loops(plan, spec, &g, err), st, fail);
    for (int k = 0; k < n; k++) {
        int s = plan->order[k];
        pl_plan_stage *ps = &plan->stages[s];
        ps->stage = s;
        ps->order = k;
        ps->event = -1;
        ps->engine = spec->stages[s].kind->engine;
    }
    if (pl__reduce_preds(plan, &g) || pl__assign_streams(plan) || pl__place_events(plan) ||
        pl__cross_batch(plan, spec, &g) || pl_plan_segments(plan))
        goto oom;
    plan->host_per_slot = mem.host_per_slot;
    plan->device_per_slot = mem.device_per_slot;
    plan->host_persistent = mem.host_persistent;
    plan->device_persistent = mem.device_persistent;
    plan->stage_per_slot = mem.stage_per_slot;
    plan->stage_persistent = mem.stage_persistent;
    pl_graph_fini(&g);
    *out = plan;
    return PL_OK;
oom:
    st = pl_error_set(err, PL_ENOMEM, "error: out of memory compiling the plan");
fail:
    pl_graph_fini(&g);
    pl_plan_free(plan);
    return st;
}
