/* pl_depth: `depth: auto`: choosing the depth from the first batches' stage times and the plan's
 * memory per slot. The driver both executors run through (pl_depth_run.h) runs the plan's
 * calibration batches (pl_depth_calib_batches) at plan->depth (PL_DEPTH_CALIB), calls
 * pl_depth_choose on their spans, has the executor grow its ring of slots to the chosen depth
 * between batches, and runs the rest there (docs/perf.md, "Automatic depth").
 *
 * The rule: from the calibration batches' spans, each stage's time (the median over the measured
 * batches), one batch's latency L (the critical path of those times through the batch's DAG: its
 * edges and stream order), and each engine's busy time per batch (the union of its stages'
 * spans in the batch, as the report computes the bound: pl_engines_measure; the median over the
 * measured batches); the busiest engine's, P, is the bound. Keeping that engine busy needs L / P
 * batches in flight; the depth is max(1, ceil(L / P - 0.25)) + 1,   at most plan->depth_cap, the +1
 * a spare slot for the hand-off that one batch's latency does not include (the host noticing a
 * finished batch, refilling its slot, launching the next) and that jitters; a latency up to a
 * quarter period past a whole number of periods is left to that spare slot rather than given one
 * more. Batch 0 is warm-up (first touches, lazy loading) and is not measured when another
 * calibration batch is. */
#ifndef PL_DEPTH_H
#define PL_DEPTH_H

#include <stddef.h>

#include "pl_plan.h"

#define PL_DEPTH_CALIB_BATCHES 4 /* calibration batches (fewer when the run is shorter) */

struct pl_span;

typedef struct pl_depth_choice {
    bool on;               /* the run chose its depth (depth: auto) */
    bool chosen;           /* the calibration finished and a depth was chosen */
    int depth;             /* the depth of the batches after the calibration */
    int64_t calib_batches; /* batches run at calib_depth */
    int calib_depth;
    int64_t measured;    /* calibration batches measured (all but the warm-up one) */
    double latency_s;    /* one batch's latency: the critical path of the stages' median times */
    double hold_s;       /* the longest a per-batch buffer is in use in one batch (H) */
    double period_s;     /* the bound: the busiest engine's busy time per batch */
    char engine[32];     /* that engine ("compute", "d2h", a host stream's name); "" when unknown */
    int needed;          /* the rule's depth before the cap; 0 when not measured */
    int cap;             /* plan->depth_cap */
    const char *cap_why; /* plan->cap_why (static) */
    bool capped;         /* needed > cap: the cap chose */
    char why[320];       /* the line `pipectl run` prints: "depth auto: 3 (bound engine ...)" */
} pl_depth_choice;

/* Batches the calibration runs: PL_DEPTH_CALIB_BATCHES, or all of a shorter run. 0 when the plan
 * is not depth: auto. */
int64_t pl_depth_calib_batches(const pl_plan *plan);

/* Fills *out for `plan` (depth: auto) from the spans of batches [0, n) in t's log (run clock;
 * {0, 0} = not timed; the executors size the log to hold the calibration), which ran at
 * plan->depth. n = the calibration batches that completed. Sets out->depth (>= 1, <= cap) and
 * out->why. Pure: tests call it with made-up spans recorded into a pl_timing. */
struct pl_timing;
void pl_depth_choose(const pl_plan *plan, const struct pl_timing *t, int64_t n,
                     pl_depth_choice *out);

/* The record of a run whose calibration took the whole run (or ended early): depth stays the
 * calibration depth, `why` says so. */
void pl_depth_no_choice(const pl_plan *plan, int64_t done, pl_depth_choice *out);

#endif
