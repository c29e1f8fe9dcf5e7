/* pl_gpu_launch: the issuing loop, on the run's calling thread. It launches segment k of batch b
 * as soon as the host stages it needs are done and its slot and ring entry are free, and reads
 * back finished segments itself (pl_gpu_complete.c), so a finished batch frees its slot for the
 * next launch without a hand-off between threads. Host stages run on the shared scheduler's
 * workers and learn of device completions through its counters. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pl_exec_gpu_int.h"
#include "pl_gx.h"
#include "pl_intr.h"
#include "pl_nvtx.h"

/* Can segment k of batch b be issued now? *host_blocked: only host-side work (a host stage of
 * this batch, or of an earlier one through a cross-batch dep) stands in the way, so the loop
 * must not block on the device. Caller holds mu. */
static bool pl__can_launch(const pl_gx *gx, int64_t b, int k, bool *host_blocked)
{
    const pl_plan *p = gx->plan;
    const pl_sched *s = &gx->sched;
    *host_blocked = false;
    if (b >= s->limit || b >= gx->batches || s->abort) return false;
    if (k > 0 && gx->launched[k - 1] < b + 1) return false; /* segments of a batch in order */
    if (k == 0) {
        /* The ring entry's events are reused: its previous batch must be read back. */
        if (gx->monitored < b - gx->ring + 1) return false;
        /* The slot's launch stream orders its batches: the previous batch of the slot must have
         * every segment launched first (slot reuse deps of distance depth rely on it). */
        if (b - gx->depth >= 0 && gx->launched[gx->nseg - 1] < b - gx->depth + 1) return false;
    }
    const pl_segment *sg = &p->segments[k];
    for (int i = 0; i < sg->n_host_deps; i++)
        if (s->done[sg->host_deps[i]] < b + 1) {
            *host_blocked = true;
            return false;
        }
    for (int i = 0; i < sg->n_stages; i++) {
        const pl_plan_stage *ps = &p->stages[sg->stages[i]];
        for (int j = 0; j < ps->n_xin; j++) {
            const pl_xdep *x = &p->xdeps[ps->xin[j]];
            int64_t need = b - x->distance;
            if (need < 0) continue;
            int fs = p->stages[x->from].segment;
            if (fs < 0) {
                if (s->done[x->from] < need + 1) {
                    *host_blocked = true;
                    return false;
                }
            } else if (gx->launched[fs] < need + 1) {
                return false; /* its end event must be recorded before we wait on it */
            }
        }
    }
    return true;
}

static pl_status pl__launch_graph(pl_gx *gx, int64_t b, int k, pl_error *err)
{
    const pl_plan *p = gx->plan;
    int slot = (int)(b % gx->depth);
    cudaStream_t ls = gx->launch[slot];
    const pl_segment *sg = &p->segments[k];
    /* Cross-batch deps between device stages closer than a slot cycle (persistent buffers): the
     * graph waits for that stage of the earlier batch (its event's latest record is that batch's:
     * later batches of that ring entry are not launched yet). Distance == depth is the same slot,
     * ordered by its launch stream. */
    for (int i = 0; i < sg->n_stages; i++) {
        const pl_plan_stage *ps = &p->stages[sg->stages[i]];
        for (int j = 0; j < ps->n_xin; j++) {
            const pl_xdep *x = &p->xdeps[ps->xin[j]];
            if (p->stages[x->from].segment < 0 || b - x->distance < 0 ||
                x->distance % gx->depth == 0)
                continue;
            cudaEvent_t e = pl_gx_end_event(gx, b - x->distance, x->from);
            PL_CHECK(
                PL_CUDA(cudaStreamWaitEvent(ls, e, 0), pl_gx_sname(gx, sg->stages[i]), b, err));
        }
    }
    size_t r = (size_t)(b % gx->ring) * (size_t)gx->nseg + (size_t)k;
    cudaGraphExec_t exec = pl_gx_batch_timed(gx, b) ? gx->exec_timed[r] : gx->exec[r];
    pl_nvtx_push("launch", b);
    pl_status st = PL_CUDA(cudaGraphLaunch(exec, ls), NULL, b, err);
    pl_nvtx_pop();
    return st;
}

static pl_status pl__launch(pl_gx *gx, int64_t b, int k, pl_error *e)
{
    const pl_segment *sg = &gx->plan->segments[k];
    size_t base = (size_t)(b % gx->ring) * gx->nst;
    /* The previous batch of this ring entry is read back: reset its marks. */
    for (int i = 0; i < sg->n_stages; i++)
        gx->marks[base + sg->stages[i]] = 0;
    /* Fault injection (tests): the trigger is read by the fault node of the failing ring entry's
     * graphs; rewrite it only when that entry is relaunched. With plain launches the fault
     * kernel is issued for the failing batch only: the trigger stays 1. */
    if (gx->fail_dev_stage >= 0 && gx->plan->stages[gx->fail_dev_stage].segment == k &&
        (!gx->graphs || b % gx->ring == gx->cfg->fail_batch % gx->ring))
        *(volatile uint32_t *)gx->trigger = !gx->graphs || b == gx->cfg->fail_batch;
    return gx->graphs ? pl__launch_graph(gx, b, k, e) : pl_gx_issue_plain(gx, b, k, e);
}

/* --- device wake-ups ------------------------------------------------------------------------
 * While a host stage gates the next launch, the loop must notice both host progress (the
 * scheduler broadcasts it) and the device's completions (the read-backs free slots and feed the
 * sinks). By default it polls the device every 20 us, which keeps a core busy beside the host
 * workers. With `run: {gpu_wait: sleep}` (pl_gx_wake_init says why it is opt-in), before it sleeps
 * it arms the end event it would read back next in each segment: a side stream of that segment
 * waits for the event and then runs a host function that bumps the scheduler's progress generation
 * and broadcasts it. The loop sleeps on that one condition. The main streams get no extra work (the
 * side streams only wait), so nothing on the device waits for a host function. The host function
 * runs on a driver thread and makes no CUDA call; every thread that holds the scheduler's mutex
 * lets go of it before any CUDA call, so it cannot wait on the device while the host function waits
 * for that mutex. */
typedef struct pl_gx_waker {
    pthread_mutex_t mu; /* guards sched and the counts; taken before the scheduler's mutex */
    pl_sched *sched;    /* whose progress to signal; NULL: none (between schedulers, teardown) */
    int64_t armed, ran; /* host functions enqueued, and run */
} pl_gx_waker;

static void CUDART_CB pl__device_woke(void *p)
{
    pl_gx_waker *w = p;
    pthread_mutex_lock(&w->mu);
    w->ran++;
    if (w->sched) {
        pthread_mutex_lock(&w->sched->mu);
        pl_sched_notify_progress(w->sched);
        pthread_mutex_unlock(&w->sched->mu);
    }
    pthread_mutex_unlock(&w->mu);
}

pl_status pl_gx_wake_init(pl_gx *gx, pl_error *err)
{
    /* Opt-in (run.gpu_wait: sleep; docs/architecture.md): on the H200 it measured the same as
     * polling on rag_gpt2, and in one of two ctest runs a device fault was pinned a batch early
     * (test_drain_gpu, depth 4: batch 4's completion not yet read back when batch 5 faulted),
     * losing that batch's outputs. Polling reads completions back within 20 us. */
    if (gx->spec->run.gpu_wait != PL_GPU_WAIT_SLEEP) return PL_OK;
    size_t n = (size_t)(gx->nseg > 0 ? gx->nseg : 1);
    gx->wake_streams = calloc(n, sizeof *gx->wake_streams);
    gx->armed_b = calloc(n, sizeof *gx->armed_b);
    gx->armed_i = calloc(n, sizeof *gx->armed_i);
    pl_gx_waker *w = calloc(1, sizeof *w);
    if (!gx->wake_streams || !gx->armed_b || !gx->armed_i || !w) {
        free(w);
        return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    }
    pthread_mutex_init(&w->mu, NULL);
    gx->waker = w;
    for (int k = 0; k < gx->nseg; k++) {
        gx->armed_b[k] = -1;
        PL_CHECK(PL_CUDA(cudaStreamCreateWithFlags(&gx->wake_streams[k], cudaStreamNonBlocking),
                         NULL, -1, err));
    }
    return PL_OK;
}

void pl_gx_wake_attach(pl_gx *gx, pl_sched *s)
{
    if (!gx->waker) return;
    pthread_mutex_lock(&gx->waker->mu);
    gx->waker->sched = s;
    pthread_mutex_unlock(&gx->waker->mu);
    for (int k = 0; k < gx->nseg; k++)
        gx->armed_b[k] = -1;
}

void pl_gx_wake_fini(pl_gx *gx)
{
    pl_gx_wake_attach(gx, NULL);
    for (int k = 0; gx->wake_streams && k < gx->nseg; k++)
        if (gx->wake_streams[k]) cudaStreamDestroy(gx->wake_streams[k]);
    free(gx->wake_streams);
    free(gx->armed_b);
    free(gx->armed_i);
    gx->wake_streams = NULL;
    gx->armed_b = NULL;
    gx->armed_i = NULL;
    pl_gx_waker *w = gx->waker;
    gx->waker = NULL;
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    bool all_ran = w->ran == w->armed;
    pthread_mutex_unlock(&w->mu);
    /* A host function still owed (the device faulted: they are dropped, or one is late) may
     * yet touch w; a few bytes left allocated are the safe side. */
    if (!all_ran) return;
    pthread_mutex_destroy(&w->mu);
    free(w);
}

/* Arms a wake-up for the next end event each segment with pending read-backs (below lim) waits
 * for, unless armed already. Caller does not hold mu. false: some segment is not armed (no waker,
 * or a CUDA error): the caller polls. */
static bool pl__arm_wakes(pl_gx *gx, int64_t lim)
{
    if (!gx->waker) return false;
    for (int k = 0; k < gx->nseg; k++) {
        int64_t b = gx->mon_b[k];
        if (b >= gx->launched[k] || b >= lim) continue;
        const pl_segment *sg = &gx->plan->segments[k];
        int i = gx->mon_i[k];
        while (i < sg->n_stages && !gx->plan->stages[sg->stages[i]].observe)
            i++;
        if (i >= sg->n_stages) return false; /* nothing to wait for: the next step finishes it */
        if (gx->armed_b[k] == b && gx->armed_i[k] == i) continue;
        pthread_mutex_lock(&gx->waker->mu);
        gx->waker->armed++; /* before the enqueue: `ran` never passes it */
        pthread_mutex_unlock(&gx->waker->mu);
        cudaEvent_t ev = pl_gx_end_event(gx, b, sg->stages[i]);
        if (cudaStreamWaitEvent(gx->wake_streams[k], ev, 0) != cudaSuccess ||
            cudaLaunchHostFunc(gx->wake_streams[k], pl__device_woke, gx->waker) != cudaSuccess) {
            /* Not enqueued (a wait enqueued alone is harmless). The read-back reports the
             * device's error, if it is one. */
            cudaGetLastError();
            pthread_mutex_lock(&gx->waker->mu);
            gx->waker->armed--;
            pthread_mutex_unlock(&gx->waker->mu);
            return false;
        }
        gx->armed_b[k] = b;
        gx->armed_i[k] = i;
    }
    return true;
}

static void pl__report_progress(pl_gx *gx)
{
    /* Caller holds mu; the callback runs without it. */
    pl_sched *s = &gx->sched;
    int64_t d = pl_sched_batches_done(s);
    if (!gx->cfg->on_batch || d <= gx->reported) return;
    int64_t from = gx->reported;
    gx->reported = d;
    pthread_mutex_unlock(&s->mu);
    for (int64_t i = from + 1; i <= d; i++)
        gx->cfg->on_batch(gx->cfg->user, i, gx->batches);
    pthread_mutex_lock(&s->mu);
}

void pl_gx_issue_loop(pl_gx *gx)
{
    pl_sched *s = &gx->sched;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        int intr = pl_intr_level();
        if (((gx->cfg->stop && *gx->cfg->stop) || intr != PL_INTR_NONE) && !gx->stopped) {
            /* Launched batches and those whose host stages started still finish: outputs kept. */
            gx->stopped = true;
            int64_t lim = gx->nseg ? gx->launched[0] : 0;
            pl_sched_set_limit(s, lim > s->started ? lim : s->started);
        }
        if (intr == PL_INTR_ABORT && !gx->aborted) {
            /* The second signal: the batches in flight are dropped too, as on the host executor.
             * The sinks keep the batches every other stage finished (the commit point); the
             * device work already launched completes and is waited for at teardown, unread, as
             * after a launch error; its loops end at their next test. */
            gx->aborted = true;
            pl_sched_set_limit(s, s->commit);
            pl_error e;
            if (pl_gx_loop_abort(gx, &e) != PL_OK && !gx->has_late_err) {
                gx->has_late_err = true;
                gx->late_status = PL_ECUDA;
                gx->late_err = e;
            }
        }
        bool launched_any = false, host_blocked = false, can_issue = false;
        for (int k = 0; k < gx->nseg && !s->abort; k++) {
            int64_t b = gx->launched[k];
            if (b >= s->limit || b >= gx->batches) continue;
            can_issue = true;
            bool hb;
            if (!pl__can_launch(gx, b, k, &hb)) {
                host_blocked |= hb;
                continue;
            }
            pthread_mutex_unlock(&s->mu);
            pl_error e;
            if (b == 0 && k == 0) gx->t_first_launch = pl_now_ns();
            pl_status st = pl__launch(gx, b, k, &e);
            pthread_mutex_lock(&s->mu);
            if (st != PL_OK) {
                /* A sticky device error shows here too; reading back the batches already
                 * launched can say which stage faulted: prefer that message. */
                if (!gx->has_late_err) {
                    gx->has_late_err = true;
                    gx->late_status = st;
                    gx->late_err = e;
                }
                pl_sched_set_limit(s, b);
            } else {
                gx->launched[k] = b + 1;
                launched_any = true;
            }
        }
        if (launched_any) continue;
        /* Read back: the pending segment of the lowest batch first. */
        int kmin = -1;
        for (int k = 0; k < gx->nseg; k++)
            if (gx->mon_b[k] < gx->launched[k] && gx->mon_b[k] < s->limit &&
                (kmin < 0 || gx->mon_b[k] < gx->mon_b[kmin]))
                kmin = k;
        if (kmin >= 0 && !s->abort) {
            /* Block on the device only when no host stage can change what we may launch, and
             * no WHILE node can hold the wait past a second signal (the abort word is set from
             * this loop). Otherwise sleep until the host or the device makes progress: `gen` is
             * read before mu is let go, so progress signalled while the loop queries and arms
             * is not lost. */
            bool block = !host_blocked && !gx->graph_loops;
            int64_t lim = s->limit;
            uint64_t gen = pl_sched_progress_gen(s);
            pthread_mutex_unlock(&s->mu);
            bool adv = false;
            for (int k = 0; k < gx->nseg; k++)
                if (gx->mon_b[k] < gx->launched[k] && gx->mon_b[k] < lim)
                    adv |= pl_gx_monitor_step(gx, k, false);
            if (!adv && block) adv = pl_gx_monitor_step(gx, kmin, true);
            bool armed = !adv && pl__arm_wakes(gx, lim);
            pthread_mutex_lock(&s->mu);
            pl__report_progress(gx);
            /* Armed: the device's completion wakes us; 5 ms only polls cfg->stop. Not armed (the
             * default, or a segment that could not be armed): the device is polled every 20 us. */
            if (!adv) pl_sched_wait_progress_since(s, gen, armed ? 5000 : 20);
            continue;
        }
        /* Nothing left to launch or read back: the host stages of the last batches. The loop
         * runs them itself rather than wait for a sleeping worker to wake (it is free now), and
         * the run's work is over when the last of them is, before the workers leave. */
        if (!can_issue && pl_sched_help(s, gx->help_worker)) continue;
        if (!can_issue && (pl_sched_idle(s) || pl_sched_finished(s))) break;
        if (s->abort && pl_sched_idle(s)) break;
        /* Host stages; polls cfg->stop. At the start (the first batch's host stages gate the
         * first launch) and at the tail the wait is short and on the critical path: spin first. */
        bool spin = !can_issue || (gx->nseg > 0 && gx->launched[0] == 0);
        pl_sched_spin_progress_since(s, pl_sched_progress_gen(s), spin ? 200 : 0,
                                     can_issue ? 20000 : 5000);
        pl__report_progress(gx);
    }
    pl__report_progress(gx);
    pthread_mutex_unlock(&s->mu);
}
