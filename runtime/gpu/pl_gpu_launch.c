/* pl_gpu_launch: the issuing loop, on the run's calling thread. It launches segment k of batch b
 * as soon as the host stages it needs are done and its slot and ring entry are free, and reads
 * back finished segments itself (pl_gpu_complete.c), so a finished batch frees its slot for the
 * next launch without a hand-off between threads. Host stages run on the shared scheduler's
 * workers and learn of device completions through its counters. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "pl_exec_gpu_int.h"
#include "pl_gx.h"
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
        if (gx->cfg->stop && *gx->cfg->stop && !gx->stopped) {
            /* Launched batches and those whose host stages started still finish: outputs kept. */
            gx->stopped = true;
            int64_t lim = gx->nseg ? gx->launched[0] : 0;
            pl_sched_set_limit(s, lim > s->started ? lim : s->started);
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
            /* Block on the device only when no host stage can change what we may launch. */
            bool block = !host_blocked;
            int64_t lim = s->limit;
            pthread_mutex_unlock(&s->mu);
            bool adv = false;
            for (int k = 0; k < gx->nseg; k++)
                if (gx->mon_b[k] < gx->launched[k] && gx->mon_b[k] < lim)
                    adv |= pl_gx_monitor_step(gx, k, false);
            if (!adv && block) adv = pl_gx_monitor_step(gx, kmin, true);
            pthread_mutex_lock(&s->mu);
            pl__report_progress(gx);
            if (!adv) pl_sched_wait_progress(&gx->sched, 20);
            continue;
        }
        if (!can_issue && pl_sched_idle(s)) break;
        if (s->abort && pl_sched_idle(s)) break;
        pl_sched_wait_progress(&gx->sched,
                               can_issue ? 20000 : 5000); /* host stages; polls cfg->stop */
        pl__report_progress(gx);
    }
    pl__report_progress(gx);
    pthread_mutex_unlock(&s->mu);
}
