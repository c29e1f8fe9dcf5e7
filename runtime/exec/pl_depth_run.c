/* pl_depth_run: the phases of a run over an executor's backend: the calibration batches at the
 * calibration depth, the choice, the growth, the rest at the chosen depth (pl_depth_run.h). */
#include "pl_depth_run.h"

static bool pl__stop_set(const pl_run_cfg *cfg)
{
    return cfg->stop && *cfg->stop;
}

/* One phase, from batch `first` to below `limit`; a run stopped before it runs none of it. */
static pl_status pl__phase(const pl_run_cfg *cfg, const pl_depth_backend *be, int64_t first,
                           int64_t limit, int64_t *done, bool *stopped, pl_error *err)
{
    if (pl__stop_set(cfg)) {
        *stopped = true;
        limit = first;
    }
    bool seen = false;
    pl_status st = be->run_phase(be->user, limit, done, &seen, err);
    *stopped |= seen;
    return st;
}

/* The ring at depth `nd`, then a fresh scheduler going on from batch `first`. */
static pl_status pl__grow(const pl_plan *plan, const pl_depth_backend *be, int nd, int64_t first,
                          pl_plan **grown, pl_error *err)
{
    const pl_plan *np = plan;
    if (nd != plan->depth) {
        /* The same DAG at the chosen depth: its slot-reuse deps have that distance, and batch b
         * uses slot b % nd from here on. Batches < first are done, so no slot holds anything a
         * later batch needs but the persistent buffers, which stay. */
        PL_CHECK(pl_plan_compile_with(plan->spec, plan->batches, nd, grown, err));
        np = *grown;
    }
    PL_CHECK(be->grow(be->user, np, err));
    return be->restart(be->user, np, first, err);
}

/* The rules, the same on both executors:
 * - A fixed depth is one phase of every batch at plan->depth; res->depth_auto stays off.
 * - depth: auto runs the calibration batches (pl_depth_calib_batches) at plan->depth first. It
 *   chooses (pl_depth_choose) only when that phase completed all of them with no failure and no
 *   stop, and batches are left to run; otherwise pl_depth_no_choice records the calibration depth
 *   as the run's, and the run ends there. Either way cfg->on_depth hears the record once, before
 *   anything grows.
 * - A stop is looked for before each phase (then the phase starts nothing) and between the
 *   calibration and the choice: a stop seen by then ends the run without growing the ring, since
 *   no batch would run at the new depth. During a phase the backend drains: the batches already
 *   started finish, nothing new starts.
 * - A failure drains the same way and ends the run with its status; so does a failure to grow
 *   (recompiling, growing the ring, the fresh scheduler), after the calibration batches, which are
 *   kept and counted in res->batches_done. res->depth is the chosen depth only once the ring has
 *   grown to it and a scheduler is there to run the rest.
 * - The steady state starts anew at the chosen depth: res->batch_clock marks the completion of
 *   batch calibration + depth (the batches before hold the calibration and the new fill).
 * - A stop before the last batch, with no failure, is PL_EINTR. */
pl_status pl_depth_run(const pl_plan *plan, const pl_run_cfg *cfg, const pl_timing *log,
                       const pl_depth_backend *be, pl_run_result *res, pl_plan **grown,
                       pl_error *err)
{
    *grown = NULL;
    res->depth = plan->depth;
    int64_t calib = pl_depth_calib_batches(plan), done = 0;
    bool stopped = false;
    pl_status st = pl__phase(cfg, be, 0, calib > 0 ? calib : plan->batches, &done, &stopped, err);
    if (calib > 0) {
        stopped |= pl__stop_set(cfg);
        bool choose = st == PL_OK && !stopped && done >= calib && done < plan->batches;
        if (choose)
            pl_depth_choose(plan, log, done, &res->depth_auto);
        else
            pl_depth_no_choice(plan, done, &res->depth_auto);
        if (cfg->on_depth) cfg->on_depth(cfg->depth_user, &res->depth_auto);
        if (choose) st = pl__grow(plan, be, res->depth_auto.depth, done, grown, err);
        if (choose && st == PL_OK) {
            res->depth = res->depth_auto.depth;
            res->batch_clock.mark_b = done + res->depth;
            res->batch_clock.mark_ns = -1;
            st = pl__phase(cfg, be, done, plan->batches, &done, &stopped, err);
        }
    }
    res->batches_done = done;
    if (st == PL_OK && stopped && done < plan->batches)
        st = pl_error_set(err, PL_EINTR, "error: interrupted after %lld of %lld batches",
                          (long long)done, (long long)plan->batches);
    return st;
}
