/* pl_depth_run: the one driver of a run's batches that both executors call. With `depth: auto` it
 * runs the calibration batches at the calibration depth, chooses the depth (pl_depth.h), has the
 * executor grow its ring of slots to it and make a fresh scheduler, resets the batch clock and
 * runs the rest; with a fixed depth it runs every batch in one phase. The executor gives it a
 * small backend: what is its own (its scheduler and issue loop, its memory, its graphs). The
 * rules the driver keeps (when it chooses, when it stops, what the result says) are at
 * pl_depth_run in pl_depth_run.c. */
#ifndef PL_DEPTH_RUN_H
#define PL_DEPTH_RUN_H

#include "pl_run.h"

typedef struct pl_depth_backend {
    void *user; /* passed to every function below */
    /* Runs the current scheduler's batches below `limit` (from the batch its phase begins at)
     * and returns once they are done or the run drained: a stop seen while it ran (*stopped set)
     * or a failure (its status returned, the error in *err). *done: the batches completed in
     * order, counted from batch 0. A limit at the phase's first batch starts nothing (the run was
     * stopped before the phase): the scheduler still starts and ends. The run's clock is already
     * running: the executor set up the first phase's scheduler before it started. */
    pl_status (*run_phase)(void *user, int64_t limit, int64_t *done, bool *stopped, pl_error *err);
    /* depth: auto, between the phases (no scheduler running; every batch before the next phase
     * is done): the ring of slots grows to plan->depth, the plan the rest runs with. `plan` is
     * the calibration's own plan when the chosen depth is the calibration depth: a backend may
     * still have something to redo (the GPU captures its graphs again, timed as the run asked
     * rather than on every batch). */
    pl_status (*grow)(void *user, const pl_plan *plan, pl_error *err);
    /* Then a fresh scheduler for `plan` that goes on from batch `first` (pl_sched_begin_at). */
    pl_status (*restart)(void *user, const pl_plan *plan, int64_t first, pl_error *err);
} pl_depth_backend;

/* Runs `plan`'s batches through `be` and fills res->batches_done, res->depth, res->depth_auto and
 * res->batch_clock.mark_b / mark_ns (the rest of *res is the executor's; res->batch_clock is
 * initialised and given to the scheduler by it). `log`: the span log the calibration batches'
 * spans are kept in (sized to hold them: pl_depth_calib_batches). *grown (set to NULL first): the
 * plan at the chosen depth when it is not plan->depth, owned by the caller, who frees it after
 * the teardown (the stages' runtime and the scheduler borrow it). Returns the run's status: a
 * failure's, else the growth's, else PL_EINTR for a stop before the last batch. */
pl_status pl_depth_run(const pl_plan *plan, const pl_run_cfg *cfg, const pl_timing *log,
                       const pl_depth_backend *be, pl_run_result *res, pl_plan **grown,
                       pl_error *err);

#endif
