/* pl_engines: each resource's busy time over a run (device engines and host streams), the bound
 * that the report prints and that `depth: auto` chooses from. */
#ifndef PL_ENGINES_H
#define PL_ENGINES_H

#include "pl_run.h"

/* One resource over a run: a device engine (H2D copies, SMs, D2H copies: all its streams share
 * it) or a host stream (a worker's queue). */
typedef struct pl_engine_stats {
    char name[32]; /* "h2d", "compute", "d2h", or the host stream's name ("host0") */
    pl_engine engine;
    int stream;         /* host streams: its index in plan->streams */
    int n_stages;       /* plan stages on it */
    int64_t timed;      /* batches with at least one timed span on it */
    double busy_s;      /* length of the union of those spans: overlapping work counted once */
    double per_batch_s; /* busy_s / timed */
    double occupancy;   /* share of the wall it was busy: per_batch_s * batches_done / wall */
} pl_engine_stats;

/* Room for the plan's resources (calloc; the caller frees it), NULL when out of memory. */
pl_engine_stats *pl_engines_new(const pl_plan *plan);
/* Fills eng[0..*n) from the spans of completed batches: device engines with stages (pl_engine
 * order), then host streams. Returns the index of the busiest (most busy time per batch: it sets
 * the pace), or -1 when nothing completed or a device engine was never timed (timing off). */
int pl_engines_measure(const pl_plan *plan, const pl_run_result *res, pl_engine_stats *eng, int *n);

#endif
