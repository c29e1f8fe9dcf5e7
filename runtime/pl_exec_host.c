/* pl_exec_host: the host executor. It runs the plan as a GPU would, with CPU threads: the shared
 * host scheduler (pl_sched.c) runs every plan stream as a cursor, stage after stage and batch
 * after batch (like a CUDA stream), on a bounded pool of workers; cross-stream events and
 * cross-batch dependencies become waits on per-stage completion counters. Device buffers are host
 * memory, copies are memcpy and kernel ops their C reference implementations (each kind's
 * run_host). It is how CI runs every pipeline, and the reference the GPU executor is compared
 * against. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pl_buffers.h"
#include "pl_exec.h"
#include "pl_sched.h"
#include "pl_stage_rt.h"

pl_status pl_exec_host_run(const pl_plan *plan, const pl_run_cfg *cfg, pl_run_result *res,
                           pl_error *err)
{
    pl_run_cfg def;
    if (!cfg) {
        pl_run_cfg_init(&def);
        cfg = &def;
    }
    memset(res, 0, sizeof *res);
    res->executor = "host";
    res->graphs = false;
    res->n_stages = plan->n_stages;
    res->batches_planned = plan->batches;
    snprintf(res->device_name, sizeof res->device_name, "CPU");

    int n_workers = cfg->workers > 0 ? cfg->workers : pl_default_workers(plan);
    res->workers = n_workers;
    pl_status st = PL_OK;
    bool rt_open = false, sched_init = false;
    pl_stage_rt rt;
    pl_sched sched;
    pl_buffers *bufs = NULL;
    memset(&sched, 0, sizeof sched);
    int64_t t0 = pl_now_ns();
    /* Rows for the batches in flight: slots bound them to about depth, twice that for margin. */
    pl_timing *timing = NULL;
    PL_CHECK_GOTO(pl_timing_new(plan, 2 * plan->depth + 2, cfg->trace_batches, &timing, err), st,
                  done);
    PL_CHECK_GOTO(
        pl_buffers_new(plan->spec, plan->depth, NULL, true, plan->spec->run.seed, &bufs, err), st,
        done);
    PL_CHECK_GOTO(pl_stage_rt_open(&rt, plan, n_workers, NULL, err), st, done);
    rt_open = true;
    PL_CHECK_GOTO(pl_sched_init(&sched, plan, cfg, &rt, bufs, NULL, n_workers, timing, err), st,
                  done);
    sched_init = true;
    /* The run's clock starts after setup (buffers, initial contents, stages' open: Lua states,
     * files), as on the GPU executor, so per-batch figures describe the steady state. */
    t0 = pl_now_ns();
    bool stopped = false;
    if (cfg->stop && *cfg->stop) { /* stopped before it started: nothing runs */
        stopped = true;
        pthread_mutex_lock(&sched.mu);
        pl_sched_set_limit(&sched, 0);
        pthread_mutex_unlock(&sched.mu);
    }
    pl_sched_start(&sched, t0);

    /* The calling thread reports progress in batch order and turns a stop into a drain: the
     * batches already started finish, nothing new starts. */
    pthread_mutex_lock(&sched.mu);
    int64_t reported = 0;
    while (!pl_sched_idle(&sched)) {
        int64_t d = pl_sched_batches_done(&sched);
        while (reported < d) {
            reported++;
            if (cfg->on_batch) {
                pthread_mutex_unlock(&sched.mu);
                cfg->on_batch(cfg->user, reported, plan->batches);
                pthread_mutex_lock(&sched.mu);
            }
        }
        if (cfg->stop && *cfg->stop && !stopped) {
            stopped = true;
            pl_sched_set_limit(&sched, sched.started);
        }
        if (!pl_sched_idle(&sched)) pl_sched_wait_progress(&sched, 20000);
    }
    int64_t d = pl_sched_batches_done(&sched);
    pthread_mutex_unlock(&sched.mu);
    while (reported < d && cfg->on_batch)
        cfg->on_batch(cfg->user, ++reported, plan->batches);
    pl_sched_join(&sched);

    res->batches_done = d;
    res->batches_issued = sched.started;
    if (sched.failed) {
        st = sched.status;
        if (err) *err = sched.err;
    } else if (stopped && d < plan->batches) {
        st = pl_error_set(err, PL_EINTR, "error: interrupted after %lld of %lld batches",
                          (long long)d, (long long)plan->batches);
    }

done:
    if (rt_open) {
        pl_error cerr;
        pl_error_clear(&cerr);
        pl_status cs =
            pl_stage_rt_close(&rt, sched_init ? sched.done : NULL, st != PL_OK, res, &cerr);
        if (cs != PL_OK && st == PL_OK) {
            st = cs;
            if (err) *err = cerr;
        }
    }
    res->wall_ns = pl_now_ns() - t0;
    if (st == PL_OK || rt_open) {
        res->timing = timing;
        timing = NULL;
    }
    pl_sched_fini(&sched);
    pl_buffers_free(bufs);
    pl_timing_free(timing);
    return st;
}
