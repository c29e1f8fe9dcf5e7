/* pl_api_stats: the figures of `pipectl run`'s summary (pl_report.h, pl_engines.h) taken from a
 * run into its result, so the statistics accessors of pipectl.h work after the plan is freed. */
#include "pl_api_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_engines.h"
#include "pl_report.h"

pl_status pl_api_stats_fill(const pl_plan *plan, const pl_run_result *res, pl_api_stats *out,
                            pl_error *err)
{
    memset(out, 0, sizeof *out);
    const pl_spec *spec = plan->spec;
    out->wall_s = (double)res->wall_ns * 1e-9;
    out->per_batch_s = res->batches_done > 0 ? out->wall_s / (double)res->batches_done : -1;
    out->batches_per_s = out->per_batch_s > 0 ? 1.0 / out->per_batch_s : 0;
    const pl_batch_clock *bc = &res->batch_clock;
    out->steady_per_batch_s =
        bc->mark_ns >= 0 && bc->last_b > bc->mark_b
            ? (double)(bc->last_ns - bc->mark_ns) * 1e-9 / (double)(bc->last_b - bc->mark_b)
            : -1;
    pl_report_flow(spec, &out->bytes_in, &out->bytes_out);
    out->depth = res->depth > 0 ? res->depth : plan->depth;
    out->bound_s = -1;
    out->achieved = -1;
    size_t ns = (size_t)(plan->n_stages > 0 ? plan->n_stages : 1);
    pl_stage_stats *st = calloc(ns, sizeof *st);
    pl_engine_stats *eng = pl_engines_new(plan);
    out->stages = calloc(ns, sizeof *out->stages);
    if (!st || !eng || !out->stages) {
        free(st);
        free(eng);
        pl_api_stats_fini(out);
        return pl_error_set(err, PL_ENOMEM, "error: out of memory taking the run's statistics");
    }
    int bs = -1, n_eng = 0;
    double bound = pl_report_stats(plan, res, st, &bs);
    int be = pl_engines_measure(plan, res, eng, &n_eng);
    if (bs >= 0 && be >= 0) {
        out->bound_s = bound;
        out->achieved = out->per_batch_s > 0 ? bound / out->per_batch_s : 0;
        snprintf(out->bound_engine, sizeof out->bound_engine, "%s", eng[be].name);
        snprintf(out->bound_stage, sizeof out->bound_stage, "%s", spec->stages[bs].name);
    }
    for (int i = 0; i < plan->n_stages; i++) {
        int s = plan->order[i];
        pl_api_stage_stats *o = &out->stages[i];
        snprintf(o->name, sizeof o->name, "%s", spec->stages[s].name);
        snprintf(o->stream, sizeof o->stream, "%s", plan->streams[plan->stages[s].stream].name);
        o->kind = spec->stages[s].kind->name;
        o->engine = pl_engine_name(plan->stages[s].engine);
        o->count = st[s].count;
        o->mean_s = st[s].mean_s;
        o->p50_s = st[s].p50_s;
        o->p99_s = st[s].p99_s;
        o->min_s = st[s].min_s;
        o->max_s = st[s].max_s;
        o->total_s = st[s].total_s;
        o->busy = st[s].busy;
    }
    out->n_stages = plan->n_stages;
    out->engines = calloc((size_t)(n_eng > 0 ? n_eng : 1), sizeof *out->engines);
    if (!out->engines) {
        free(st);
        free(eng);
        pl_api_stats_fini(out);
        return pl_error_set(err, PL_ENOMEM, "error: out of memory taking the run's statistics");
    }
    for (int e = 0; e < n_eng; e++) {
        pl_api_engine_stats *o = &out->engines[e];
        snprintf(o->name, sizeof o->name, "%s", eng[e].name);
        o->engine = pl_engine_name(eng[e].engine);
        o->stages = eng[e].n_stages;
        o->timed = eng[e].timed;
        o->busy_s = eng[e].busy_s;
        o->per_batch_s = eng[e].per_batch_s;
        o->occupancy = eng[e].occupancy;
    }
    out->n_engines = n_eng;
    free(st);
    free(eng);
    return PL_OK;
}

void pl_api_stats_fini(pl_api_stats *s)
{
    free(s->stages);
    free(s->engines);
    s->stages = NULL;
    s->engines = NULL;
    s->n_stages = s->n_engines = 0;
}
