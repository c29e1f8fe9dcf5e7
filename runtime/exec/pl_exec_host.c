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
#include "pl_exec_host.h"
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
    res->graph_mode = "none";
    res->n_stages = plan->n_stages;
    res->batches_planned = plan->batches;
    snprintf(res->device_name, sizeof res->device_name, "CPU");

    res->batch_clock = (pl_batch_clock){plan->depth, -1, -1, 0};
    int n_workers = cfg->workers > 0 ? cfg->workers : pl_default_workers(plan);
    res->workers = n_workers;
    pl_status st = PL_OK;
    bool rt_open = false, sched_init = false;
    pl_stage_rt rt;
    pl_sched sched;
    pl_buffers *bufs = NULL;
    pl_plan *grown = NULL; /* depth: auto: the plan at the chosen depth */
    memset(&sched, 0, sizeof sched);
    int64_t t0 = pl_now_ns(), t_end = 0, first = 0;
    size_t ns = (size_t)(plan->n_stages ? plan->n_stages : 1);
    int64_t calib = pl_depth_calib_batches(plan);
    /* Rows for the batches in flight: slots bound them to about depth (depth: auto: what the ring
     * may grow to), twice that for margin. The calibration batches' spans stay in the log, for
     * pl_depth_choose. */
    pl_timing *timing = NULL;
    int window =
        2 * (plan->depth_auto && plan->depth_cap > plan->depth ? plan->depth_cap : plan->depth) + 2;
    PL_CHECK_GOTO(pl_timing_new(plan, window,
                                cfg->trace_batches > calib ? cfg->trace_batches : calib, &timing,
                                err),
                  st, done);
    PL_CHECK_GOTO(
        pl_buffers_new(plan->spec, plan->depth, NULL, true, plan->spec->run.seed, &bufs, err), st,
        done);
    PL_CHECK_GOTO(pl_stage_rt_open(&rt, plan, n_workers, pl_buffers_slot(bufs, 0), NULL, err), st,
                  done);
    rt_open = true;
    /* The first phase's scheduler and its worker threads are setup too. */
    PL_CHECK_GOTO(pl_sched_init(&sched, plan, cfg, &rt, bufs, NULL, n_workers, timing, err), st,
                  done);
    sched_init = true;
    pl_sched_set_clock(&sched, &res->batch_clock);
    pl_sched_set_batch_progress(&sched); /* this thread only reports batches and polls stops */
    pl_sched_spawn(&sched);
    /* The run's clock starts after setup (buffers, initial contents, stages' open: Lua states,
     * files; the workers), as on the GPU executor, so per-batch figures describe the steady
     * state. */
    t0 = pl_now_ns();
    bool stopped = false;
    int64_t reported = 0, d = 0;
    /* depth: auto: phase 0 runs the calibration batches at plan->depth, then the ring grows to the
     * chosen depth and phase 1 runs the rest with the plan of that depth: the same stages, stage
     * states and persistent buffers, one scheduler per phase. */
    const pl_plan *cur = plan;
    res->depth = plan->depth;
    for (int phase = 0;; phase++) {
        if (phase > 0) {
            PL_CHECK_GOTO(pl_sched_init(&sched, cur, cfg, &rt, bufs, NULL, n_workers, timing, err),
                          st, done);
            sched_init = true;
            pl_sched_set_clock(&sched, &res->batch_clock);
            pl_sched_set_batch_progress(&sched);
            pl_sched_begin_at(&sched, first);
        }
        if (cfg->stop && *cfg->stop) { /* stopped before it started: nothing runs */
            stopped = true;
            pthread_mutex_lock(&sched.mu);
            pl_sched_set_limit(&sched, first);
            pthread_mutex_unlock(&sched.mu);
        } else if (phase == 0 && calib > 0) {
            pthread_mutex_lock(&sched.mu);
            pl_sched_set_limit(&sched, calib);
            pthread_mutex_unlock(&sched.mu);
        }
        pl_sched_start(&sched, t0);

        /* The calling thread reports progress in batch order and turns a stop into a drain: the
         * batches already started finish, nothing new starts. It wakes per completed batch (and
         * every 20 ms, for a stop), not per stage: on a machine the search fills, each wake-up
         * takes a core from it. The generation keeps a batch completed during the callback. */
        pthread_mutex_lock(&sched.mu);
        /* Until the work is over (the workers' leaving is teardown, after the clock). */
        while (!pl_sched_idle(&sched) && !pl_sched_finished(&sched)) {
            uint64_t gen = pl_sched_progress_gen(&sched);
            int64_t dn = pl_sched_batches_done(&sched);
            while (reported < dn) {
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
            if (!pl_sched_idle(&sched) && !pl_sched_finished(&sched))
                pl_sched_wait_progress_since(&sched, gen, 20000);
        }
        d = pl_sched_batches_done(&sched);
        t_end = pl_now_ns();
        pthread_mutex_unlock(&sched.mu);
        while (reported < d && cfg->on_batch)
            cfg->on_batch(cfg->user, ++reported, plan->batches);
        pl_sched_join(&sched);
        res->batches_issued = sched.started;
        if (phase > 0 || calib == 0) break;
        /* The calibration is over: choose, grow the ring, go on from batch d. */
        if (sched.failed || stopped || d < calib || d >= plan->batches) {
            pl_depth_no_choice(plan, d, &res->depth_auto);
            if (cfg->on_depth) cfg->on_depth(cfg->depth_user, &res->depth_auto);
            break;
        }
        pl_depth_choose(plan, timing, d, &res->depth_auto);
        if (cfg->on_depth) cfg->on_depth(cfg->depth_user, &res->depth_auto);
        int nd = res->depth_auto.depth;
        if (nd != plan->depth) {
            /* Phase 1's plan is the same DAG at the chosen depth: its slot-reuse deps have that
             * distance, and batch b uses slot b % nd from here on. Batches < d are done, so no
             * slot holds anything a later batch needs but the persistent buffers, which stay. */
            PL_CHECK_GOTO(pl_plan_compile_with(plan->spec, plan->batches, nd, &grown, err), st,
                          done);
            PL_CHECK_GOTO(pl_buffers_grow(bufs, nd, true, plan->spec->run.seed, err), st, done);
            cur = grown;
            rt.plan = grown;
        }
        res->depth = nd;
        /* The steady state starts anew at the chosen depth. */
        res->batch_clock.mark_b = d + nd;
        res->batch_clock.mark_ns = -1;
        /* The finished phase's counters are kept in `first`: a fresh scheduler goes on. */
        pl_sched_fini(&sched);
        sched_init = false;
        first = d;
    }

    res->batches_done = d;
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
        /* Between the phases of depth: auto no scheduler holds the counts: batches < first are
         * what every stage completed. */
        int64_t *before = NULL;
        if (!sched_init && first > 0 && (before = malloc(ns * sizeof *before)) != NULL)
            for (size_t i = 0; i < ns; i++)
                before[i] = first;
        pl_status cs =
            pl_stage_rt_close(&rt, sched_init ? sched.done : before, st != PL_OK, res, &cerr);
        free(before);
        if (cs != PL_OK && st == PL_OK) {
            st = cs;
            if (err) *err = cerr;
        }
    }
    res->wall_ns = (t_end > t0 ? t_end : pl_now_ns()) - t0;
    if (st == PL_OK || rt_open) {
        res->timing = timing;
        timing = NULL;
    }
    pl_sched_fini(&sched);
    pl_buffers_free(bufs);
    pl_timing_free(timing);
    pl_plan_free(grown);
    return st;
}
