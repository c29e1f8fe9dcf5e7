/* pl_plan: the plan compiler (order, streams, events, cross-batch deps, memory) and its listings
 * (`pipectl plan`, `--dot`). Rules in pl_plan.h; the graph comes from pl_graph.c, the same one
 * the checks used. */
#include "pl_plan.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "pl_graph.h"

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

/* Intra-batch predecessors after transitive reduction: u is dropped when it reaches another
 * predecessor of the same stage. */
static pl_status pl__reduce_preds(pl_plan *plan, const pl_graph *g)
{
    for (int v = 0; v < g->n; v++) {
        int lo = g->pred_off[v], hi = g->pred_off[v + 1];
        pl_plan_stage *ps = &plan->stages[v];
        ps->preds = malloc(((size_t)(hi - lo) + 1) * sizeof *ps->preds);
        if (!ps->preds) return PL_ENOMEM;
        for (int i = lo; i < hi; i++) {
            int u = g->pred[i];
            bool implied = false;
            for (int j = lo; j < hi && !implied; j++)
                if (j != i && pl_reach_has(&g->reach, u, g->pred[j])) implied = true;
            if (!implied) ps->preds[ps->n_preds++] = u;
        }
        pl__sort_by_order(ps->preds, ps->n_preds, plan->stages);
    }
    return PL_OK;
}

static int pl__stream_new(pl_plan *plan, pl_engine e, const char *name)
{
    pl_stream *s = &plan->streams[plan->n_streams];
    snprintf(s->name, sizeof s->name, "%s", name);
    s->engine = e;
    return plan->n_streams++;
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
        if (ps->engine == PL_ENGINE_H2D) {
            if (h2d < 0) h2d = pl__stream_new(plan, PL_ENGINE_H2D, "h2d");
            sid = h2d;
        } else if (ps->engine == PL_ENGINE_D2H) {
            if (d2h < 0) d2h = pl__stream_new(plan, PL_ENGINE_D2H, "d2h");
            sid = d2h;
        } else {
            for (int i = 0; i < ps->n_preds && sid < 0; i++) {
                const pl_plan_stage *pp = &plan->stages[ps->preds[i]];
                const pl_stream *s = &plan->streams[pp->stream];
                if (pp->engine == ps->engine && s->stages[s->n_stages - 1] == pp->stage)
                    sid = pp->stream;
            }
            if (sid < 0) {
                bool comp = ps->engine == PL_ENGINE_COMPUTE;
                snprintf(name, sizeof name, "%s%d", comp ? "compute" : "host",
                         comp ? n_compute++ : n_host++);
                sid = pl__stream_new(plan, ps->engine, name);
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
    int *off = calloc((size_t)n + 1, sizeof *off), *adj = NULL, *sprev = NULL, *tmp = NULL;
    int *poff = NULL, *padj = NULL, *kept_src = NULL, *kept_dst = NULL;
    pl_reach r = {0};
    if (!off) return PL_ENOMEM;
    /* Edges of the combined graph: reduced preds, and each stream's previous stage. */
    int m = 0;
    for (int v = 0; v < n; v++)
        m += plan->stages[v].n_preds + 1;
    adj = malloc(((size_t)m + 1) * sizeof *adj);
    padj = malloc(((size_t)m + 1) * sizeof *padj);
    poff = calloc((size_t)n + 1, sizeof *poff);
    sprev = malloc(((size_t)n + 1) * sizeof *sprev); /* stream predecessor, -1 for the first */
    tmp = malloc(((size_t)n + 1) * sizeof *tmp);
    kept_src = malloc(((size_t)m + 1) * sizeof *kept_src);
    kept_dst = malloc(((size_t)m + 1) * sizeof *kept_dst);
    if (!adj || !padj || !poff || !sprev || !tmp || !kept_src || !kept_dst) goto oom;
    for (int v = 0; v < n; v++)
        sprev[v] = -1;
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
    /* Successor lists from the predecessor lists. */
    for (int v = 0; v < n; v++)
        for (int i = poff[v]; i < poff[v + 1]; i++)
            off[padj[i] + 1]++;
    for (int v = 0; v < n; v++)
        off[v + 1] += off[v];
    int *cur = tmp; /* next free slot per node */
    for (int v = 0; v < n; v++)
        cur[v] = off[v];
    for (int v = 0; v < n; v++)
        for (int i = poff[v]; i < poff[v + 1]; i++)
            adj[cur[padj[i]]++] = v;
    PL_CHECK_GOTO(pl_reach_compute(&r, n, plan->order, off, adj, NULL), st, done);

    /* Kept cross-stream edges, in plan order of the waiting stage. */
    int nk = 0;
    for (int k = 0; k < n; k++) {
        int v = plan->order[k];
        const pl_plan_stage *ps = &plan->stages[v];
        for (int i = 0; i < ps->n_preds; i++) {
            int u = ps->preds[i];
            if (plan->stages[u].stream == ps->stream) continue;
            bool implied = false;
            for (int j = poff[v]; j < poff[v + 1] && !implied; j++)
                if (padj[j] != u && pl_reach_has(&r, u, padj[j])) implied = true;
            if (implied) continue;
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
    pl_reach_fini(&r);
    free(off);
    free(adj);
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

/* u precedes-or-is v within a batch. */
static bool pl__le(const pl_graph *g, int u, int v)
{
    return u == v || pl_reach_has(&g->reach, u, v);
}

/* Cross-batch deps. Per-batch buffers: each writer of batch i+depth waits for the last accessors
 * of batch i (those with no successor among the buffer's accessors), because they share a slot.
 * Written persistent buffers: the first accessors of batch i+1 wait for the last accessors of
 * batch i, so every access of batch i precedes every access of batch i+1 (this also covers
 * readers ordered before the writer by after:, which must see the previous batch's write).
 * Ordered kinds: stage(i+1) waits for stage(i). A stage never waits for itself otherwise (its
 * batches run in order on its stream). Then implied ones are dropped: (a -> b, d) is
 * implied by (a' -> b', d') when d' <= d, a precedes-or-is a' and b' precedes-or-is b. */
static pl_status pl__cross_batch(pl_plan *plan, const pl_spec *spec, const pl_graph *g)
{
    pl__xvec v = {0};
    char *keep = NULL;
    int words = g->reach.words;
    /* acc: the buffer's accessors as a bitset; below: the stages some accessor reaches. Then
     * l is last when its row misses acc, and t is first when `below` misses t. */
    uint64_t *acc = calloc((size_t)words + 1, sizeof *acc);
    uint64_t *below = calloc((size_t)words + 1, sizeof *below);
    int *lasts = malloc(((size_t)g->n + 1) * sizeof *lasts);
    if (!acc || !below || !lasts) goto oom;
    for (int b = 0; b < g->n_buffers; b++) {
        const pl_buffer *buf = &spec->buffers[b];
        int lo = g->acc_off[b], hi = g->acc_off[b + 1];
        bool written = false;
        for (int i = lo; i < hi; i++)
            written |= (g->acc_mode[i] & PL_ACC_WRITE) != 0;
        if (!written) continue;
        memset(acc, 0, (size_t)words * sizeof *acc);
        memset(below, 0, (size_t)words * sizeof *below);
        for (int i = lo; i < hi; i++) {
            int a = g->acc[i];
            acc[a >> 6] |= UINT64_C(1) << (a & 63);
            const uint64_t *row = g->reach.bits + (size_t)a * (size_t)words;
            for (int w = 0; w < words; w++)
                below[w] |= row[w];
        }
        int nl = 0;
        for (int i = lo; i < hi; i++) {
            const uint64_t *row = g->reach.bits + (size_t)g->acc[i] * (size_t)words;
            bool last = true;
            for (int w = 0; w < words && last; w++)
                last = (row[w] & acc[w]) == 0;
            if (last) lasts[nl++] = g->acc[i];
        }
        for (int j = lo; j < hi; j++) {
            int t = g->acc[j];
            bool target = buf->persistent ? !((below[t >> 6] >> (t & 63)) & 1u)
                                          : (g->acc_mode[j] & PL_ACC_WRITE) != 0;
            if (!target) continue;
            for (int i = 0; i < nl; i++)
                if (pl__xadd(&v, lasts[i], t, buf->persistent ? 1 : plan->depth, b,
                             buf->persistent ? PL_XDEP_PERSISTENT : PL_XDEP_SLOT_REUSE))
                    goto oom;
        }
    }
    for (int s = 0; s < spec->n_stages; s++) {
        const pl_kind *kind = spec->stages[s].kind;
        if (kind && kind->ordered && pl__xadd(&v, s, s, 1, -1, PL_XDEP_ORDERED)) goto oom;
    }
    /* A stage waiting for itself (the last accessor of a buffer it writes) is implied: a stage's
     * batches run in order on its stream. Ordered kinds keep theirs: it is their contract. */
    {
        int m0 = 0;
        for (int i = 0; i < v.n; i++)
            if (v.a[i].from != v.a[i].to || v.a[i].why == PL_XDEP_ORDERED) v.a[m0++] = v.a[i];
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
    if (!keep) goto oom;
    for (int i = 0; i < m; i++) {
        const pl_xdep *x = &v.a[i];
        keep[i] = 1;
        for (int j = 0; j < m && keep[i]; j++) {
            const pl_xdep *y = &v.a[j];
            if (j == i || y->distance > x->distance) continue;
            if (pl__le(g, x->from, y->from) && pl__le(g, y->to, x->to)) keep[i] = 0;
        }
    }
    plan->xdeps = malloc(((size_t)m + 1) * sizeof *plan->xdeps);
    if (!plan->xdeps) goto oom;
    for (int i = 0; i < m; i++)
        if (keep[i]) plan->xdeps[plan->n_xdeps++] = v.a[i];
    free(keep);
    free(v.a);
    free(acc);
    free(below);
    free(lasts);
    return PL_OK;
oom:
    free(keep);
    free(v.a);
    free(acc);
    free(below);
    free(lasts);
    return PL_ENOMEM;
}

pl_status pl_plan_compile(const pl_spec *spec, pl_plan **out, pl_error *err)
{
    return pl_plan_compile_with(spec, 0, 0, out, err);
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
    if (depth < 0 || depth > PL_MAX_DEPTH)
        return pl_error_set(err, PL_EINPUT,
                            "error: depth is %d; it must be 0 (the pipeline's run.depth) or "
                            "between 1 and %d",
                            depth, PL_MAX_DEPTH);
    pl_plan *plan = calloc(1, sizeof *plan);
    if (!plan) return pl_error_set(err, PL_ENOMEM, "error: out of memory compiling the plan");
    int n = spec->n_stages;
    plan->spec = spec;
    plan->depth = depth > 0 ? depth : spec->run.depth;
    plan->batches = batches > 0 ? batches : spec->run.batches;
    plan->n_stages = n;
    PL_CHECK_GOTO(pl_graph_build(spec, &g, err), st, fail);
    if (g.n_order != n) {
        st = pl_error_set(err, PL_ERUNTIME,
                          "error: the pipeline's stages form a cycle; pl_spec_check reports it");
        goto fail;
    }
    plan->order = malloc(((size_t)n + 1) * sizeof *plan->order);
    plan->stages = calloc((size_t)n + 1, sizeof *plan->stages);
    if (!plan->order || !plan->stages) goto oom;
    memcpy(plan->order, g.order, (size_t)n * sizeof *plan->order);
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
    for (int b = 0; b < spec->n_buffers; b++) {
        const pl_buffer *buf = &spec->buffers[b];
        uint64_t *slot =
            buf->where == PL_HOST
                ? (buf->persistent ? &plan->host_persistent : &plan->host_per_slot)
                : (buf->persistent ? &plan->device_persistent : &plan->device_per_slot);
        *slot += buf->bytes;
    }
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

/* ---- listings ------------------------------------------------------------------------------ */

/* "12.0 MiB" */
static const char *pl__human(uint64_t bytes, char *buf, size_t n)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
    if (bytes < 1024) {
        snprintf(buf, n, "%" PRIu64 " B", bytes);
        return buf;
    }
    double v = (double)bytes / 1024.0;
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        u++;
    }
    snprintf(buf, n, "%.1f %s", v, units[u]);
    return buf;
}

static const char *pl__kind_name(const pl_spec *spec, int s)
{
    const pl_kind *k = spec->stages[s].kind;
    return k ? k->name : "?";
}

void pl_plan_dump(const pl_plan *plan, FILE *out)
{
    const pl_spec *spec = plan->spec;
    char h1[32], h2[32];
    int w = 4;
    for (int s = 0; s < plan->n_stages; s++) {
        int len = (int)strlen(spec->stages[s].name);
        if (len > w) w = len;
    }
    fprintf(out, "plan for pipeline '%s': %d stages, %d streams, %d events, %d cross-batch deps\n",
            spec->name, plan->n_stages, plan->n_streams, plan->n_events, plan->n_xdeps);
    fprintf(out, "depth %d (slots in flight), %" PRId64 " batches\n", plan->depth, plan->batches);

    fprintf(out, "\nstreams (stages run in this order on each stream, batch after batch):\n");
    for (int i = 0; i < plan->n_streams; i++) {
        const pl_stream *s = &plan->streams[i];
        fprintf(out, "  %s (%s engine): %d stage%s\n", s->name, pl_engine_name(s->engine),
                s->n_stages, s->n_stages == 1 ? "" : "s");
        for (int j = 0; j < s->n_stages; j++) {
            const pl_plan_stage *ps = &plan->stages[s->stages[j]];
            if (ps->n_waits == 0) {
                fprintf(out, "    %-*s  %-6s  %s\n", w, spec->stages[ps->stage].name,
                        pl__kind_name(spec, ps->stage), pl_engine_name(ps->engine));
                continue;
            }
            fprintf(out, "    %-*s  %-6s  %-7s", w, spec->stages[ps->stage].name,
                    pl__kind_name(spec, ps->stage), pl_engine_name(ps->engine));
            for (int k = 0; k < ps->n_waits; k++) {
                const pl_event *ev = &plan->events[ps->waits[k]];
                fprintf(out, "%s e%d(%s)", k ? "," : "  waits on", ps->waits[k],
                        spec->stages[ev->src].name);
            }
            fputc('\n', out);
        }
    }

    fprintf(out, "\nevents (recorded after a stage, waited on by stages of other streams):\n");
    if (!plan->n_events) fprintf(out, "  none\n");
    for (int i = 0; i < plan->n_events; i++) {
        const pl_event *ev = &plan->events[i];
        fprintf(out, "  e%d after %s (%s):", i, spec->stages[ev->src].name,
                plan->streams[plan->stages[ev->src].stream].name);
        for (int k = 0; k < ev->n_dsts; k++)
            fprintf(out, "%s %s (%s)", k ? "," : " waited on by", spec->stages[ev->dsts[k]].name,
                    plan->streams[plan->stages[ev->dsts[k]].stream].name);
        fputc('\n', out);
    }

    fprintf(out, "\ncross-batch deps (stage of batch i+d waits for stage of batch i):\n");
    if (!plan->n_xdeps) fprintf(out, "  none\n");
    for (int i = 0; i < plan->n_xdeps; i++) {
        const pl_xdep *x = &plan->xdeps[i];
        fprintf(out, "  %s waits for %s, d=%d: ", spec->stages[x->to].name,
                spec->stages[x->from].name, x->distance);
        switch (x->why) {
        case PL_XDEP_SLOT_REUSE:
            fprintf(out, "slot reuse of '%s'\n", spec->buffers[x->buffer].name);
            break;
        case PL_XDEP_PERSISTENT:
            fprintf(out, "persistent '%s' is written every batch\n", spec->buffers[x->buffer].name);
            break;
        case PL_XDEP_ORDERED:
            fprintf(out, "runs in batch order\n");
            break;
        }
    }

    fprintf(out,
            "\nsegments (device stages between host stages; one graph per segment and slot):\n");
    if (!plan->n_segments) fprintf(out, "  none (host stages only)\n");
    for (int k = -1; k < plan->n_segments; k++) {
        if (k >= 0) {
            const pl_segment *sg = &plan->segments[k];
            fprintf(out, "  s%d:", k);
            for (int i = 0; i < sg->n_stages; i++)
                fprintf(out, "%s %s", i ? "," : "", spec->stages[sg->stages[i]].name);
            for (int i = 0; i < sg->n_host_deps; i++)
                fprintf(out, "%s %s", i ? "," : "; launched after",
                        spec->stages[sg->host_deps[i]].name);
            int nobs = 0;
            for (int i = 0; i < sg->n_stages; i++)
                if (plan->stages[sg->stages[i]].observe)
                    fprintf(out, "%s %s", nobs++ ? "," : "; host sees",
                            spec->stages[sg->stages[i]].name);
            fputc('\n', out);
        }
        int nh = 0;
        for (int i = 0; i < plan->n_stages; i++) {
            int v = plan->order[i];
            if (plan->stages[v].segment >= 0 || plan->stages[v].after != k) continue;
            if (!nh++) fprintf(out, "  host, %s:", k < 0 ? "before any device work" : "then");
            fprintf(out, "%s %s", nh > 1 ? "," : "", spec->stages[v].name);
        }
        if (nh) fputc('\n', out);
    }

    uint64_t d = (uint64_t)plan->depth;
    fprintf(out, "\nmemory:\n");
    fprintf(out, "  per slot:    host %s (%" PRIu64 " bytes), device %s (%" PRIu64 " bytes)\n",
            pl__human(plan->host_per_slot, h1, sizeof h1), plan->host_per_slot,
            pl__human(plan->device_per_slot, h2, sizeof h2), plan->device_per_slot);
    fprintf(out, "  persistent:  host %s (%" PRIu64 " bytes), device %s (%" PRIu64 " bytes)\n",
            pl__human(plan->host_persistent, h1, sizeof h1), plan->host_persistent,
            pl__human(plan->device_persistent, h2, sizeof h2), plan->device_persistent);
    uint64_t th = plan->host_per_slot * d + plan->host_persistent;
    uint64_t td = plan->device_per_slot * d + plan->device_persistent;
    fprintf(out,
            "  total:       pinned host %s (%" PRIu64 " bytes), device %s (%" PRIu64
            " bytes) for %d slots\n",
            pl__human(th, h1, sizeof h1), th, pl__human(td, h2, sizeof h2), td, plan->depth);
}

void pl_plan_dump_dot(const pl_plan *plan, FILE *out)
{
    const pl_spec *spec = plan->spec;
    /* Stage names are identifiers (checked); the pipeline's name is free text: escape it. */
    fputs("digraph \"", out);
    for (const char *c = spec->name; c && *c; c++) {
        if (*c == '"' || *c == '\\') fputc('\\', out);
        fputc(*c == '\n' ? ' ' : *c, out);
    }
    fputs("\" {\n", out);
    fprintf(out, "  rankdir=LR;\n  node [shape=box, fontname=\"Helvetica\"];\n");
    for (int i = 0; i < plan->n_streams; i++) {
        const pl_stream *s = &plan->streams[i];
        fprintf(out, "  subgraph \"cluster_%s\" {\n    label=\"%s (%s)\";\n", s->name, s->name,
                pl_engine_name(s->engine));
        for (int j = 0; j < s->n_stages; j++) {
            int v = s->stages[j];
            fprintf(out, "    \"%s\" [label=\"%s\\n%s\"];\n", spec->stages[v].name,
                    spec->stages[v].name, pl__kind_name(spec, v));
        }
        for (int j = 1; j < s->n_stages; j++)
            fprintf(out, "    \"%s\" -> \"%s\";\n", spec->stages[s->stages[j - 1]].name,
                    spec->stages[s->stages[j]].name);
        fprintf(out, "  }\n");
    }
    for (int i = 0; i < plan->n_events; i++) {
        const pl_event *ev = &plan->events[i];
        for (int k = 0; k < ev->n_dsts; k++)
            fprintf(out, "  \"%s\" -> \"%s\" [style=dashed, label=\"e%d\"];\n",
                    spec->stages[ev->src].name, spec->stages[ev->dsts[k]].name, i);
    }
    fprintf(out, "}\n");
}
