/* pl_plan_segments: the part of the plan that says how device work is cut and observed: device
 * segments (device stages of one batch between host stages), what each segment's launch waits
 * for, which device ends are recorded and which the host reads back, and the cross-batch deps
 * indexed by the stage that waits. Both executors read these; neither derives them. */
#include <stdlib.h>
#include <string.h>

#include "pl_plan.h"

static bool pl__is_dev(pl_engine e)
{
    return e == PL_ENGINE_H2D || e == PL_ENGINE_COMPUTE || e == PL_ENGINE_D2H;
}

/* Appends v to a[*n] unless present (the lists are short). */
static void pl__add_unique(int *a, int *n, int v)
{
    for (int i = 0; i < *n; i++)
        if (a[i] == v) return;
    a[(*n)++] = v;
}

void pl_plan_segments_free(pl_plan *plan)
{
    if (!plan) return;
    for (int i = 0; plan->segments && i < plan->n_segments; i++) {
        free(plan->segments[i].stages);
        free(plan->segments[i].host_deps);
    }
    free(plan->segments);
    plan->segments = NULL;
    plan->n_segments = 0;
    for (int s = 0; plan->stages && s < plan->n_stages; s++) {
        free(plan->stages[s].xin);
        free(plan->stages[s].seg_waits);
        plan->stages[s].xin = plan->stages[s].seg_waits = NULL;
    }
}

pl_status pl_plan_segments(pl_plan *plan)
{
    int n = plan->n_stages;
    pl_plan_stage *ps = plan->stages;
    int *n_xin = calloc((size_t)n + 1, sizeof *n_xin);
    bool *dev_succ = calloc((size_t)n + 1, sizeof *dev_succ); /* a device successor, same segment */
    if (!n_xin || !dev_succ) goto oom;

    /* Segment numbers in plan order (preds come first). Along any path the numbers never fall,
     * so the reduced preds give the same maxima as the full graph. */
    int n_seg = 0;
    for (int k = 0; k < n; k++) {
        int v = plan->order[k];
        if (ps[v].body) { /* inside its loop: no segment of its own */
            ps[v].segment = ps[v].after = -1;
            continue;
        }
        bool dev = pl__is_dev(ps[v].engine);
        int val = dev ? 0 : -1;
        for (int i = 0; i < ps[v].n_preds; i++) {
            int u = ps[v].preds[i];
            int c = pl__is_dev(ps[u].engine) ? ps[u].segment : ps[u].after + (dev ? 1 : 0);
            if (c > val) val = c;
        }
        ps[v].segment = dev ? val : -1;
        ps[v].after = dev ? -1 : val;
        if (dev && val + 1 > n_seg) n_seg = val + 1;
    }

    plan->segments = calloc((size_t)n_seg + 1, sizeof *plan->segments);
    if (!plan->segments) goto oom;
    plan->n_segments = n_seg;
    for (int j = 0; j < n_seg; j++) {
        plan->segments[j].stages = malloc(((size_t)n + 1) * sizeof(int));
        plan->segments[j].host_deps = malloc(((size_t)n + 1) * sizeof(int));
        if (!plan->segments[j].stages || !plan->segments[j].host_deps) goto oom;
    }
    for (int k = 0; k < n; k++) {
        int v = plan->order[k];
        if (ps[v].segment < 0) continue;
        pl_segment *sg = &plan->segments[ps[v].segment];
        sg->stages[sg->n_stages++] = v;
        for (int i = 0; i < ps[v].n_preds; i++) {
            int u = ps[v].preds[i];
            if (!pl__is_dev(ps[u].engine)) pl__add_unique(sg->host_deps, &sg->n_host_deps, u);
        }
    }

    /* Waits inside a segment's graph. With one segment the plan's events are exact: every path
     * they were reduced against lies inside the graph. With several, a path may run through a
     * stage of another segment (a host hand-off, or the shared copy streams' order), which the
     * segment's graph does not hold: wait for every cross-stream device pred of the segment. */
    for (int v = 0; v < n; v++) {
        if (ps[v].segment < 0) continue;
        ps[v].seg_waits = malloc(((size_t)ps[v].n_preds + (size_t)ps[v].n_waits + 1) * sizeof(int));
        if (!ps[v].seg_waits) goto oom;
        if (n_seg == 1) {
            for (int i = 0; i < ps[v].n_waits; i++) {
                int u = plan->events[ps[v].waits[i]].src;
                if (ps[u].segment == ps[v].segment) ps[v].seg_waits[ps[v].n_seg_waits++] = u;
            }
        } else {
            for (int i = 0; i < ps[v].n_preds; i++) {
                int u = ps[v].preds[i];
                if (ps[u].segment == ps[v].segment && ps[u].stream != ps[v].stream)
                    ps[v].seg_waits[ps[v].n_seg_waits++] = u;
            }
        }
    }

    /* Who must see a device stage end. */
    for (int v = 0; v < n; v++)
        for (int i = 0; i < ps[v].n_preds; i++) {
            int u = ps[v].preds[i];
            if (ps[u].segment < 0) continue;
            if (ps[v].segment == ps[u].segment)
                dev_succ[u] = true;
            else if (ps[v].segment < 0)
                ps[u].observe = ps[u].record_end = true; /* a host stage waits for it */
        }
    for (int i = 0; i < plan->n_xdeps; i++) {
        const pl_xdep *x = &plan->xdeps[i];
        n_xin[x->to]++;
        if (ps[x->from].segment < 0) continue;
        ps[x->from].record_end = true; /* a later launch or host stage waits for it */
        if (ps[x->to].segment < 0) ps[x->from].observe = true;
    }
    for (int v = 0; v < n; v++)
        if (ps[v].segment >= 0 && !dev_succ[v]) ps[v].observe = ps[v].record_end = true;

    for (int v = 0; v < n; v++) {
        ps[v].xin = malloc(((size_t)n_xin[v] + 1) * sizeof(int));
        if (!ps[v].xin) goto oom;
    }
    for (int i = 0; i < plan->n_xdeps; i++) {
        int to = plan->xdeps[i].to;
        ps[to].xin[ps[to].n_xin++] = i;
    }
    free(n_xin);
    free(dev_succ);
    return PL_OK;
oom:
    free(n_xin);
    free(dev_succ);
    pl_plan_segments_free(plan);
    return PL_ENOMEM;
}
