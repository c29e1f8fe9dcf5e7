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
#include "pl_depth_run.h"
#include "pl_exec_host.h"
#include "pl_intr.h"
#include "pl_sched.h"
#include "pl_stage_rt.h"

/* One run: what its phases (pl_depth_run) share. depth: auto's phases run with the same stages,
 * stage states and persistent buffers, one scheduler each. */
typedef struct pl__host {
    const pl_plan *plan; /* the current phase's: depth: auto's grown plan after the calibration */
    const pl_run_cfg *cfg;
    pl_run_result *res;
    pl_stage_rt rt;
    pl_sched sched;
    pl_buffers *bufs;
    pl_timing *timing;
    int n_workers;
    bool rt_open, sched_init;
    int64_t t0, t_end;
    int64_t first;    /* the batch the current scheduler began at */
    int64_t reported; /* batches given to cfg->on_batch */
} pl__host;

/* A scheduler for `plan` (setup: no thread yet). */
static pl_status pl__host_sched(pl__host *h, const pl_plan *plan, pl_error *err)
{
    PL_CHECK(pl_sched_init(&h->sched, plan, h->cfg, &h->rt, h->bufs, NULL, h->n_workers, h->timing,
                           err));
    h->sched_init = true;
    pl_sched_set_clock(&h->sched, &h->res->batch_clock);
    pl_sched_set_batch_progress(&h->sched); /* this thread only reports batches and polls stops */
    return PL_OK;
}

static pl_status pl__host_setup(pl__host *h, pl_error *err)
{
    const pl_plan *plan = h->plan;
    int64_t calib = pl_depth_calib_batches(plan);
    int64_t keep = h->cfg->trace_batches > calib ? h->cfg->trace_batches : calib;
    /* Rows for the batches in flight: slots bound them to about depth (depth: auto: what the ring
     * may grow to), twice that for margin. The calibration batches' spans stay in the log, for
     * pl_depth_choose. */
    int window =
        2 * (plan->depth_auto && plan->depth_cap > plan->depth ? plan->depth_cap : plan->depth) + 2;
    PL_CHECK(pl_timing_new(plan, window, keep, &h->timing, err));
    PL_CHECK(
        pl_buffers_new(plan->spec, plan->depth, NULL, true, plan->spec->run.seed, &h->bufs, err));
    PL_CHECK(pl_stage_rt_open(&h->rt, plan, h->cfg, h->n_workers, pl_buffers_slot(h->bufs, 0), NULL,
                              err));
    h->rt_open = true;
    /* The first phase's scheduler and its worker threads are setup too. */
    PL_CHECK(pl__host_sched(h, plan, err));
    pl_sched_spawn(&h->sched);
    return PL_OK;
}

/* An interrupt (pl_intr), on its relay thread: the phase's thread looks at the stop flags. */
static void pl__host_intr(void *arg)
{
    pl_sched *s = arg;
    pthread_mutex_lock(&s->mu);
    pl_sched_notify_progress(s);
    pthread_mutex_unlock(&s->mu);
}

/* A stop (cfg->stop, or the process's interrupt): the batches already started finish, nothing new
 * starts; an abort (PL_INTR_ABORT): not even those, but the batches every other stage finished,
 * which the sinks still write (the commit point). Long stages see the interrupt themselves and
 * stop their batch (PL_EINTR). With mu held. */
static void pl__host_stop(pl_sched *s, const pl_run_cfg *cfg, bool *stopped, bool *aborted)
{
    int level = pl_intr_level();
    if (((cfg->stop && *cfg->stop) || level != PL_INTR_NONE) && !*stopped) {
        *stopped = true;
        pl_sched_set_limit(s, s->started);
    }
    if (level == PL_INTR_ABORT && !*aborted) {
        *aborted = true;
        pl_sched_set_limit(s, s->commit);
    }
}

/* pl_depth_backend.run_phase. The calling thread reports progress in batch order and turns a stop
 * into a drain (pl__host_stop). It sleeps until a batch completes or an interrupt wakes it
 * (pl_intr relays a signal; a caller that sets cfg->stop calls pl_intr_wake), not per stage and
 * never on a timer: on a machine the search fills, each wake-up takes a core from it. The
 * generation keeps a batch completed during the callback. */
static pl_status pl__host_phase(void *user, int64_t limit, int64_t *done, bool *stopped,
                                pl_error *err)
{
    pl__host *h = user;
    pl_sched *s = &h->sched;
    const pl_run_cfg *cfg = h->cfg;
    int64_t total = h->plan->batches;
    bool aborted = false;
    pthread_mutex_lock(&s->mu);
    pl_sched_set_limit(s, limit);
    pthread_mutex_unlock(&s->mu);
    /* Without the relay (no room for its thread) a stop is looked for every 50 ms instead. */
    pl_intr_watch w = {pl__host_intr, s, NULL};
    bool told = pl_intr_watch_add(&w, NULL) == PL_OK;
    pl_sched_start(s, h->t0);
    pthread_mutex_lock(&s->mu);
    /* Until the work is over (the workers' leaving is teardown, after the clock). */
    while (!pl_sched_idle(s) && !pl_sched_finished(s)) {
        uint64_t gen = pl_sched_progress_gen(s);
        int64_t dn = pl_sched_batches_done(s);
        while (h->reported < dn) {
            h->reported++;
            if (cfg->on_batch) {
                pthread_mutex_unlock(&s->mu);
                cfg->on_batch(cfg->user, h->reported, total);
                pthread_mutex_lock(&s->mu);
            }
        }
        pl__host_stop(s, cfg, stopped, &aborted);
        if (!pl_sched_idle(s) && !pl_sched_finished(s))
            pl_sched_wait_progress_since(s, gen, told ? -1 : 50000);
    }
    *done = pl_sched_batches_done(s);
    h->t_end = pl_now_ns();
    pthread_mutex_unlock(&s->mu);
    if (told) pl_intr_watch_remove(&w);
    while (h->reported < *done && cfg->on_batch)
        cfg->on_batch(cfg->user, ++h->reported, total);
    pl_sched_join(s);
    h->res->batches_issued = s->started;
    if (!s->failed) return PL_OK;
    if (err) *err = s->err;
    return s->status;
}

/* pl_depth_backend.grow: the ring of slots at plan->depth; the persistent buffers stay. */
static pl_status pl__host_grow(void *user, const pl_plan *plan, pl_error *err)
{
    pl__host *h = user;
    if (plan->depth != h->plan->depth)
        PL_CHECK(pl_buffers_grow(h->bufs, plan->depth, true, plan->spec->run.seed, err));
    h->plan = plan;
    h->rt.plan = plan;
    return PL_OK;
}

/* pl_depth_backend.restart: the finished phase's counters are kept in `first`. */
static pl_status pl__host_restart(void *user, const pl_plan *plan, int64_t first, pl_error *err)
{
    pl__host *h = user;
    pl_sched_fini(&h->sched);
    h->sched_init = false;
    h->first = first;
    PL_CHECK(pl__host_sched(h, plan, err));
    pl_sched_begin_at(&h->sched, first);
    return PL_OK;
}

/* Closes the stages (a close's error replaces no earlier one). */
static void pl__host_close(pl__host *h, pl_status *st, pl_error *err)
{
    if (!h->rt_open) return;
    pl_error cerr;
    pl_error_clear(&cerr);
    /* Between the phases of depth: auto no scheduler holds the counts: batches < first are what
     * every stage completed. */
    size_t ns = (size_t)(h->plan->n_stages ? h->plan->n_stages : 1);
    int64_t *before = NULL;
    if (!h->sched_init && h->first > 0 && (before = malloc(ns * sizeof *before)) != NULL)
        for (size_t i = 0; i < ns; i++)
            before[i] = h->first;
    pl_status cs = pl_stage_rt_close(&h->rt, h->sched_init ? h->sched.done : before, *st != PL_OK,
                                     h->res, &cerr);
    free(before);
    if (cs != PL_OK && *st == PL_OK) {
        *st = cs;
        if (err) *err = cerr;
    }
}

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

    pl__host h;
    memset(&h, 0, sizeof h);
    h.plan = plan;
    h.cfg = cfg;
    h.res = res;
    h.n_workers = cfg->workers > 0 ? cfg->workers : pl_default_workers(plan);
    res->workers = h.n_workers;
    pl_plan *grown = NULL; /* depth: auto: the plan at the chosen depth */
    h.t0 = pl_now_ns();
    pl_status st = pl__host_setup(&h, err);
    if (st == PL_OK) {
        /* The run's clock starts after setup (buffers, initial contents, stages' open: Lua states,
         * files; the workers), as on the GPU executor, so per-batch figures describe the steady
         * state. */
        h.t0 = pl_now_ns();
        pl_depth_backend be = {&h, pl__host_phase, pl__host_grow, pl__host_restart};
        st = pl_depth_run(plan, cfg, h.timing, &be, res, &grown, err);
    }
    pl__host_close(&h, &st, err);
    res->wall_ns = (h.t_end > h.t0 ? h.t_end : pl_now_ns()) - h.t0;
    if (st == PL_OK || h.rt_open) {
        res->timing = h.timing;
        h.timing = NULL;
    }
    pl_sched_fini(&h.sched);
    pl_buffers_free(h.bufs);
    pl_timing_free(h.timing);
    pl_plan_free(grown);
    return st;
}
