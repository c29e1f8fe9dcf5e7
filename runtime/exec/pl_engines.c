/* pl_engines: how busy each engine and host stream was over a run, from its spans. */
#include "pl_engines.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A resource's busy time is the union of its stages' spans, not their sum: kernels of different
 * batches can run at once (measured on the H200: three 20 ms busy kernels side by side), and a
 * device span can include waiting for the engine behind another batch's work; either way time
 * the resource is busy is counted once, so none is ever busier than the wall. The resources: each
 * device engine (its streams share it: the SMs, a copy direction), and each host stream (a CPU
 * thread's queue: host stages on different streams run on different workers at once). */
pl_engine_stats *pl_engines_new(const pl_plan *plan)
{
    return calloc((size_t)(PL_ENGINE_COUNT + plan->n_streams), sizeof(pl_engine_stats));
}

int pl_engines_measure(const pl_plan *plan, const pl_run_result *res, pl_engine_stats *eng,
                       int *n_eng)
{
    const pl_timing *t = res->timing;
    int64_t nb = t ? res->batches_done : 0;
    double wall = res->wall_ns > 0 ? (double)res->wall_ns * 1e-9 : 0;
    *n_eng = 0;
    if (!t) return -1;
    int best = -1;
    bool untimed_device = false;
    for (int r = 0; r < t->n_res; r++) {
        const pl_timing_res *tr = &t->res[r];
        pl_engine_stats *x = &eng[r];
        memset(x, 0, sizeof *x);
        x->engine = tr->engine;
        x->stream = tr->stream < 0 ? 0 : tr->stream;
        snprintf(x->name, sizeof x->name, "%s",
                 tr->engine == PL_ENGINE_HOST ? plan->streams[tr->stream].name
                                              : pl_engine_name(tr->engine));
        x->n_stages = tr->n_stages;
        x->timed = tr->timed;
        if (x->timed == 0) {
            untimed_device = untimed_device || x->engine != PL_ENGINE_HOST;
            continue;
        }
        x->busy_s = (double)pl_timing_busy_ns(t, r) * 1e-9;
        x->per_batch_s = x->busy_s / (double)x->timed;
        x->occupancy = wall > 0 ? x->per_batch_s * (double)nb / wall : 0;
        if (best < 0 || x->per_batch_s > eng[best].per_batch_s) best = r;
    }
    *n_eng = t->n_res;
    /* A device engine never timed (timing off) could be the busiest: no bound then. */
    return untimed_device ? -1 : best;
}
