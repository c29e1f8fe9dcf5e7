/* pl_gpu_complete: how the host learns that device work finished. Per segment, batch after batch,
 * the issuing thread reads back the end events the plan marks `observe` (polled, or waited for
 * when nothing else can happen), releases each finished stage to the host scheduler at once, and
 * reads the timed batches' device timestamps. After a fault it works out which stage of which
 * batch faulted and which batches are complete. */
#include <stdio.h>
#include <string.h>

#include "pl_gx.h"

/* After a fault: which stage of which batch was running? With fault marks, a stage is a
 * candidate when its mark is still 0 while every device predecessor of its segment has its mark.
 * Without them (the default: see pl_gx_probe_marks), the candidates are the device stages not
 * yet seen to finish: those after the last stage confirmed finished in each segment's batch being
 * read back, and every later launched batch and segment. Compute stages first (copies between valid
 * allocations do not fault), then the earliest batch. */
static void pl__locate_fault(pl_gx *gx, int64_t b, cudaError_t ce, pl_error *e)
{
    const pl_plan *p = gx->plan;
    const volatile uint32_t *marks = gx->marks;
    int best_st = -1, other_st = -1;
    int64_t best_b = -1, other_b = -1;
    for (int64_t bb = b; bb < b + gx->ring; bb++) {
        size_t base = (size_t)(bb % gx->ring) * gx->nst;
        for (int j = 0; j < gx->nseg; j++) {
            if (bb >= gx->launched[j] || bb < gx->mon_b[j]) continue;
            const pl_segment *sg = &p->segments[j];
            int from = bb == gx->mon_b[j] ? gx->mon_conf[j] : 0;
            for (int i = from; i < sg->n_stages; i++) {
                int st = sg->stages[i];
                const pl_plan_stage *ps = &p->stages[st];
                if (gx->write_value) {
                    if (marks[base + st]) continue;
                    bool ready = true;
                    for (int q = 0; q < ps->n_preds; q++)
                        if (p->stages[ps->preds[q]].segment == j && !marks[base + ps->preds[q]])
                            ready = false;
                    if (!ready) continue;
                }
                bool compute = ps->engine == PL_ENGINE_COMPUTE;
                bool better =
                    best_st < 0 || (compute && p->stages[best_st].engine != PL_ENGINE_COMPUTE) ||
                    (compute == (p->stages[best_st].engine == PL_ENGINE_COMPUTE) && bb < best_b);
                if (better) {
                    if (best_st >= 0 && other_st < 0 && gx->write_value)
                        other_st = best_st, other_b = best_b;
                    best_st = st;
                    best_b = bb;
                } else if (other_st < 0 && compute && gx->write_value) {
                    other_st = st;
                    other_b = bb;
                }
            }
        }
    }
    char also[PL_MAX_NAME + 96] = "";
    if (other_st >= 0)
        snprintf(also, sizeof also, " ('%s' of batch %lld was also running)",
                 pl_gx_sname(gx, other_st), (long long)other_b);
    const char *how = gx->write_value ? ""
                                      : " (the first kernel not seen to finish; "
                                        "run.fault_marks: true, or pipectl run --fault-marks, "
                                        "makes every stage report its completion, to name the "
                                        "stage for certain)";
    if (best_st >= 0) {
        pl_error_set(e, PL_ECUDA,
                     "stage '%s', batch %lld: the device faulted: %s (%s)%s%s; batches before "
                     "%lld completed and their outputs are kept; run the pipeline under "
                     "compute-sanitizer, or with --executor host, to find the bad access",
                     pl_gx_sname(gx, best_st), (long long)best_b, cudaGetErrorString(ce),
                     cudaGetErrorName(ce), how, also, (long long)b);
        pl_error_tag(e, pl_gx_sname(gx, best_st), best_b);
    } else
        pl_error_set(e, PL_ECUDA,
                     "batch %lld: the device faulted: %s (%s); batches before %lld completed and "
                     "their outputs are kept",
                     (long long)b, cudaGetErrorString(ce), cudaGetErrorName(ce), (long long)b);
}

/* Reading back segment k of batch b failed at stage index mi. After a fault the context is lost
 * and every call returns the error, also for work that had finished; the marks (host memory),
 * when on, still say which batches completed: those are handed to the host stages (sinks write
 * them). The rest is abandoned, and the error names the faulting stage and batch. */
static void pl__device_failed(pl_gx *gx, int64_t b, int k, int mi, cudaError_t ce)
{
    pl_error e;
    pl_sched *s = &gx->sched;
    bool fault = ce == cudaErrorIllegalAddress || ce == cudaErrorLaunchFailure ||
                 ce == cudaErrorIllegalInstruction || ce == cudaErrorMisalignedAddress ||
                 ce == cudaErrorHardwareStackError || ce == cudaErrorAssert;
    if (!fault) {
        pl_cuda_check((int)ce, "cudaEventQuery", pl_gx_sname(gx, gx->plan->segments[k].stages[mi]),
                      b, &e);
        pthread_mutex_lock(&s->mu);
        pl_sched_fail(s, b, PL_ECUDA, &e);
        pthread_mutex_unlock(&s->mu);
        return;
    }
    /* The first batch some segment has not finished reading back bounds what is complete. */
    int64_t ok = gx->mon_b[0];
    for (int j = 1; j < gx->nseg; j++)
        if (gx->mon_b[j] < ok) ok = gx->mon_b[j];
    const volatile uint32_t *marks = gx->marks;
    for (; gx->write_value && ok < gx->launched[gx->nseg - 1]; ok++) {
        size_t base = (size_t)(ok % gx->ring) * gx->nst;
        bool all = true;
        for (int st = 0; st < gx->nst && all; st++)
            all = gx->plan->stages[st].segment < 0 || marks[base + st];
        if (!all) break;
        /* Complete but never read back: its device stages ran, untimed (ok is above every
         * segment whose read-back passed it already reported). */
        for (int st = 0; st < gx->nst; st++)
            if (gx->plan->stages[st].segment >= 0 && gx->mon_b[gx->plan->stages[st].segment] <= ok)
                pl_timing_record(gx->stats, st, ok, (pl_span){0, 0});
        pthread_mutex_lock(&s->mu);
        for (int st = 0; st < gx->nst; st++)
            if (gx->plan->stages[st].segment >= 0) pl_sched_set_done(s, st, ok + 1);
        pthread_mutex_unlock(&s->mu);
    }
    /* The fault is in the first batch some segment has not read back, or later: start there, not
     * at the batch whose read-back saw the sticky error (another segment's may be earlier). */
    b = ok;
    pl__locate_fault(gx, b, ce, &e);
    pthread_mutex_lock(&s->mu);
    pl_sched_fail(s, ok < b ? ok : b, PL_ECUDA, &e);
    pthread_mutex_unlock(&s->mu);
}

bool pl_gx_monitor_step(pl_gx *gx, int k, bool block)
{
    const pl_segment *sg = &gx->plan->segments[k];
    pl_sched *s = &gx->sched;
    int64_t b = gx->mon_b[k];
    size_t base = (size_t)(b % gx->ring) * gx->nst;
    bool advanced = false;
    while (gx->mon_i[k] < sg->n_stages) {
        int st = sg->stages[gx->mon_i[k]];
        if (!gx->plan->stages[st].observe) { /* implied by a later stage's end */
            gx->mon_i[k]++;
            continue;
        }
        cudaEvent_t ev = pl_gx_end_event(gx, b, st);
        cudaError_t ce = block ? cudaEventSynchronize(ev) : cudaEventQuery(ev);
        if (ce == cudaErrorNotReady) return advanced;
        if (ce != cudaSuccess) {
            pl__device_failed(gx, b, k, gx->mon_i[k], ce);
            return true;
        }
        pthread_mutex_lock(&s->mu);
        pl_sched_set_done(s, st, b + 1);
        pthread_mutex_unlock(&s->mu);
        gx->mon_i[k]++;
        gx->mon_conf[k] = gx->mon_i[k];
        advanced = true;
    }
    gx->t_last_done = pl_now_ns();
    /* Spans on the run clock: elapsed time from ev_t0, which completed at the run's start.
     * Unsampled batches report {0, 0} (ran, not timed). Recorded before the stages are marked
     * done, so the batch's row is complete when the batch is. */
    bool timed = pl_gx_batch_timed(gx, b);
    for (int i = 0; i < sg->n_stages; i++) {
        int st = sg->stages[i];
        if (!timed) {
            pl_timing_record(gx->stats, st, b, (pl_span){0, 0});
            continue;
        }
        float a = 0, z = 0;
        if (cudaEventElapsedTime(&a, gx->ev_t0, gx->ev_start[base + st]) != cudaSuccess ||
            cudaEventElapsedTime(&z, gx->ev_t0, gx->ev_end[base + st]) != cudaSuccess) {
            /* No timestamps (should not happen: the events are created with timing): fall back
             * to when the host saw the stage complete. */
            cudaGetLastError();
            a = z = (float)((double)(pl_now_ns() - gx->t_start) / 1e6);
        }
        pl_timing_record(gx->stats, st, b, (pl_span){(int64_t)(a * 1e6), (int64_t)(z * 1e6)});
    }
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < sg->n_stages; i++)
        pl_sched_set_done(s, sg->stages[i], b + 1);
    gx->mon_b[k] = b + 1;
    gx->mon_i[k] = gx->mon_conf[k] = 0;
    int64_t m = gx->mon_b[0];
    for (int j = 1; j < gx->nseg; j++)
        if (gx->mon_b[j] < m) m = gx->mon_b[j];
    gx->monitored = m;
    pthread_cond_broadcast(&s->progress);
    pthread_mutex_unlock(&s->mu);
    return true;
}
