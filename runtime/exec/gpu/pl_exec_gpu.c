/* pl_exec_gpu: the GPU executor's entry points: setup (memory, CUDA objects, stages, graphs per
 * ring entry and segment), the run (host scheduler for host stages, the issuing loop on this
 * thread), teardown, and the bench helpers that replay the same graphs without the executor's
 * host side. The jobs live in their own files (pl_gx.h lists them). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_depth_run.h"
#include "pl_exec.h"
#include "pl_exec_gpu_int.h"
#include "pl_gx.h"

bool pl_gpu_available(void)
{
    static int cached = -1; /* benign race: every thread computes the same answer */
    if (cached < 0) {
        int n = 0;
        cached = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
    }
    return cached == 1;
}

static pl_status pl__capture_ring(pl_gx *gx, pl_error *err);

static pl_status pl__setup(pl_gx *gx, const pl_plan *plan, const pl_run_cfg *cfg, bool graphs,
                           bool open_stages, pl_error *err)
{
    memset(gx, 0, sizeof *gx);
    gx->plan = plan;
    gx->spec = plan->spec;
    gx->cfg = cfg;
    gx->depth = plan->depth;
    gx->batches = plan->batches;
    gx->nst = plan->n_stages;
    gx->nbuf = plan->spec->n_buffers;
    gx->nseg = plan->n_segments;
    int mode = cfg ? cfg->graph_mode : PL_GRAPHS_SEGMENT;
    if (mode == PL_GRAPHS_AUTO) mode = pl_graph_mode_auto(plan);
    gx->sgraphs = graphs && mode == PL_GRAPHS_STAGE;
    gx->graphs = graphs && !gx->sgraphs;
    /* Plain launches use a ring of event sets one longer than any cross-batch distance, so a
     * wait always names the exact batch. Graphs bake their events: two graphs per slot and
     * segment, each with its own event set (ring = 2 x depth), let batch b + depth be launched
     * behind batch b on the slot's stream before the host has read b back, so the device starts
     * it without waiting for a host wake-up and a launch; buffers stay per slot (b % depth). */
    gx->ring = graphs ? 2 * gx->depth : gx->depth + 1;
    gx->device = plan->spec->run.device;
    gx->fail_dev_stage = -1;
    gx->t_start = pl_now_ns();
    int ndev = 0;
    cudaError_t ce = cudaGetDeviceCount(&ndev);
    if (ce != cudaSuccess || ndev == 0)
        return pl_error_set(err, PL_ENODEV, "error: no CUDA device (%s); run with --executor host",
                            ce != cudaSuccess ? cudaGetErrorString(ce) : "none found");
    if (gx->device >= ndev)
        return pl_error_at(err, PL_EINPUT, plan->spec->run.device_pos,
                           "run.device is %d but this machine has %d CUDA device(s); use 0..%d",
                           gx->device, ndev, ndev - 1);
    PL_CHECK(PL_CUDA(cudaSetDevice(gx->device), NULL, -1, err));
    gx->timing = cfg ? cfg->timing_period : 16;
    if (gx->timing < -1) gx->timing = -1;
    /* depth: auto times every calibration batch (the choice needs the stage times), then the
     * batches after it as asked. */
    gx->user_timing = gx->timing;
    if (open_stages && pl_depth_calib_batches(plan) > 0) gx->timing = 0;
    if (cfg && cfg->fail_stage >= 0 && cfg->fail_stage < gx->nst && cfg->fail_batch >= 0 &&
        plan->stages[cfg->fail_stage].segment >= 0)
        gx->fail_dev_stage = cfg->fail_stage;
    /* A stage of a WHILE node's body: the fault follows its loop (the body is one node). */
    if (cfg && cfg->fail_stage >= 0 && cfg->fail_stage < gx->nst && cfg->fail_batch >= 0 &&
        plan->stages[cfg->fail_stage].body && plan->loops[plan->stages[cfg->fail_stage].loop].graph)
        gx->fail_dev_stage = plan->loops[plan->stages[cfg->fail_stage].loop].stage;
    PL_CHECK(pl_gx_loop_supported(gx, err));
    gx->streams_on = open_stages; /* loop streams need the writers the stages open */
    size_t nseg = (size_t)(gx->nseg > 0 ? gx->nseg : 1);
    gx->launched = calloc(nseg, sizeof *gx->launched);
    gx->mon_b = calloc(nseg, sizeof *gx->mon_b);
    gx->mon_i = calloc(nseg, sizeof *gx->mon_i);
    gx->mon_conf = calloc(nseg, sizeof *gx->mon_conf);
    if (!gx->launched || !gx->mon_b || !gx->mon_i || !gx->mon_conf)
        return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    PL_CHECK(pl_gx_alloc_buffers(gx, err));
    PL_CHECK(pl_gpu_ctx_new(gx->device, &gx->gctx, err));
    gx->rt.env.spec = plan->spec; /* what record hooks see when stages are not opened (bench) */
    gx->rt.env.gpu = gx->gctx;
    gx->rt.env.on_gpu = true;
    PL_CHECK(pl_gx_create_objects(gx, err));
    pl_gx_probe_marks(gx);
    if (open_stages) {
        int workers = cfg->workers > 0 ? cfg->workers : pl_default_workers(plan);
        PL_CHECK(pl_stage_rt_open(&gx->rt, plan, cfg, workers, pl_buffers_slot(gx->hbufs, 0),
                                  gx->gctx, err));
        gx->rt_open = true;
        gx->rt.run_loop = pl_gx_run_loop; /* loops that are host stages (pl_gpu_loop.c) */
        gx->rt.loop_user = gx;
        PL_CHECK(pl_gx_in_place(gx, err));
        PL_CHECK(pl_gx_wake_init(gx, err)); /* only the run's issue loop sleeps on the device */
    }
    PL_CHECK(pl__capture_ring(gx, err));
    return PL_CUDA(cudaDeviceSynchronize(), NULL, -1, err); /* uploads done before the clock */
}

static void pl__teardown(pl_gx *gx)
{
    /* Errors are ignored here: after a device fault every call fails, and nothing is left to do
     * about it. The object that created a resource frees it, in reverse order. */
    if (gx->streams || gx->launch) cudaDeviceSynchronize();
    pl_gx_wake_fini(gx);     /* before the scheduler it signals is freed */
    pl_gx_in_place_fini(gx); /* the device is idle: no upload reads the caller's memory */
    pl_gx_destroy_objects(gx);
    if (gx->created_t0) cudaEventDestroy(gx->ev_t0);
    pl_gpu_ctx_free(gx->gctx);
    pl_buffers_free(gx->dbufs);
    pl_buffers_free(gx->hbufs);
    cudaGetLastError();
    free(gx->launched);
    free(gx->mon_b);
    free(gx->mon_i);
    free(gx->mon_conf);
    if (gx->sched_init) pl_sched_fini(&gx->sched);
}

/* Captures the lean and timed graphs of every ring entry and segment (as the timing asks), or
 * the stage graphs of every slot; plain launches get their kernels loaded. */
static pl_status pl__capture_ring(pl_gx *gx, pl_error *err)
{
    PL_CHECK(pl_gx_loop_capture_bodies(gx, err)); /* loops the host launches */
    if (gx->sgraphs) {
        for (int slot = 0; slot < gx->depth; slot++)
            for (int st = 0; st < gx->nst; st++)
                if (pl_gx_compute_stage(gx, st))
                    PL_CHECK(pl_gx_capture_stage(gx, slot, st,
                                                 &gx->sexec[(size_t)slot * gx->nst + st], err));
        return PL_OK;
    }
    if (!gx->graphs) {
        pl_gx_warm_modules(gx);
        /* A WHILE-node loop is a graph even so: its own per slot (pl_gx_record_stage launches
         * it). */
        for (int slot = 0; slot < gx->depth; slot++)
            for (int st = 0; st < gx->nst; st++)
                if (pl_gx_compute_stage(gx, st) && gx->spec->stages[st].loop)
                    PL_CHECK(pl_gx_capture_stage(gx, slot, st,
                                                 &gx->sexec[(size_t)slot * gx->nst + st], err));
    }
    /* Lean graphs unless every batch is timed; timed graphs unless timing is off. */
    for (int r = 0; gx->graphs && r < gx->ring; r++)
        for (int k = 0; k < gx->nseg; k++) {
            size_t i = (size_t)r * (size_t)gx->nseg + (size_t)k;
            if (gx->timing != 0) PL_CHECK(pl_gx_capture(gx, r, k, false, &gx->exec[i], err));
            if (gx->timing >= 0) PL_CHECK(pl_gx_capture(gx, r, k, true, &gx->exec_timed[i], err));
        }
    return PL_OK;
}

/* depth: auto, after the calibration (every launched batch read back, the device idle): the ring
 * grows to `plan`'s depth. New slots are allocated (the old ones and the persistent buffers stay
 * where they are), then every per-ring object is made again for the new ring (streams, events,
 * fault marks; ev_t0, the run's clock, is kept) and every (ring entry, segment) captured again,
 * since ring entry r now means slot r % depth of the new depth. */
static pl_status pl__grow_ring(pl_gx *gx, const pl_plan *plan, pl_error *err)
{
    PL_CHECK(PL_CUDA(cudaDeviceSynchronize(), NULL, -1, err));
    PL_CHECK(pl_gx_grow_buffers(gx, plan->depth, err));
    pl_gx_destroy_objects(gx);
    gx->plan = plan;
    gx->rt.plan = plan;
    gx->depth = plan->depth;
    gx->ring = gx->graphs ? 2 * gx->depth : gx->depth + 1;
    gx->timing = gx->user_timing;
    PL_CHECK(pl_gx_create_objects(gx, err));
    pl_gx_probe_marks(gx);
    PL_CHECK(pl__capture_ring(gx, err));
    return PL_CUDA(cudaDeviceSynchronize(), NULL, -1, err);
}

/* One run: what its phases (pl_depth_run) share besides the executor's state. */
typedef struct pl__gpu_run {
    pl_gx *gx;
    const pl_run_cfg *cfg;
    pl_run_result *res;
    bool *owned;   /* [stream]: the host scheduler runs it (the host streams) */
    int64_t first; /* depth: auto: the batch the current scheduler began at */
} pl__gpu_run;

/* The host scheduler for `plan`'s host streams (no thread yet). */
static pl_status pl__sched(pl__gpu_run *r, const pl_plan *plan, pl_error *err)
{
    pl_gx *gx = r->gx;
    PL_CHECK(pl_sched_init(&gx->sched, plan, r->cfg, &gx->rt, gx->hbufs, r->owned,
                           gx->rt.env.workers, gx->stats, err));
    gx->sched_init = true;
    gx->help_worker = pl_sched_help_worker(&gx->sched, gx->rt.env.workers);
    pl_sched_set_clock(&gx->sched, &r->res->batch_clock);
    pl_gx_wake_attach(gx, &gx->sched);
    return PL_OK;
}

/* What the run needs past pl__setup: the span log, the first phase's scheduler and its workers,
 * then the run's clock (ev_t0 completes at about t_start; device spans are measured from it). */
static pl_status pl__run_setup(pl__gpu_run *r, pl_error *err)
{
    pl_gx *gx = r->gx;
    const pl_plan *plan = gx->plan;
    /* Rows for the batches in flight: the ring bounds them (graphs run ahead by depth; depth:
     * auto sizes for the ring it may grow to, at most 2 x cap entries). The calibration batches'
     * spans stay in the log, for pl_depth_choose. */
    int64_t calib = pl_depth_calib_batches(plan);
    int64_t keep = r->cfg->trace_batches > calib ? r->cfg->trace_batches : calib;
    int wd = plan->depth_auto && plan->depth_cap > gx->depth ? plan->depth_cap : gx->depth;
    int ring = gx->ring > 2 * wd + 1 ? gx->ring : 2 * wd + 1;
    PL_CHECK(pl_timing_new(plan, 2 * ring + 2, keep, &gx->stats, err));
    r->owned = calloc((size_t)plan->n_streams + 1, sizeof *r->owned);
    if (!r->owned) return pl_error_set(err, PL_ENOMEM, "error: out of memory setting up the run");
    for (int k = 0; k < plan->n_streams; k++)
        r->owned[k] = plan->streams[k].engine == PL_ENGINE_HOST;
    PL_CHECK(pl__sched(r, plan, err));
    PL_CHECK(pl_gx_stream_start(gx, err));
    pl_sched_spawn(&gx->sched); /* the workers are setup: before the clock */
    PL_CHECK(PL_CUDA(cudaEventRecord(gx->ev_t0, gx->launch[0]), NULL, -1, err));
    PL_CHECK(PL_CUDA(cudaEventSynchronize(gx->ev_t0), NULL, -1, err));
    gx->t_start = pl_now_ns();
    return PL_OK;
}

/* pl_depth_backend.run_phase: the issue loop on this thread, the host stages on the workers. */
static pl_status pl__phase(void *user, int64_t limit, int64_t *done, bool *stopped, pl_error *err)
{
    pl_gx *gx = ((pl__gpu_run *)user)->gx;
    pthread_mutex_lock(&gx->sched.mu);
    pl_sched_set_limit(&gx->sched, limit);
    pthread_mutex_unlock(&gx->sched.mu);
    pl_sched_start(&gx->sched, gx->t_start);
    pl_gx_issue_loop(gx);
    gx->t_end = pl_now_ns(); /* the work is done; the workers' leaving is teardown */
    pthread_mutex_lock(&gx->sched.mu);
    pl_sched_abort(&gx->sched); /* the loop ends with the work: this sends the workers off */
    pthread_mutex_unlock(&gx->sched.mu);
    pl_sched_join(&gx->sched);
    *done = pl_sched_batches_done(&gx->sched);
    *stopped = gx->stopped;
    /* A stage's failure first; an issue-side error when the read-back found nothing better. */
    if (gx->sched.failed) {
        if (err) *err = gx->sched.err;
        return gx->sched.status;
    }
    if (gx->has_late_err) {
        if (err) *err = gx->late_err;
        return gx->late_status;
    }
    return PL_OK;
}

/* pl_depth_backend.grow: also at the same depth when the timing asked for is not the
 * calibration's (every batch timed): the lean graphs are captured then. */
static pl_status pl__grow(void *user, const pl_plan *plan, pl_error *err)
{
    pl_gx *gx = ((pl__gpu_run *)user)->gx;
    if (plan->depth == gx->depth && gx->user_timing == gx->timing) return PL_OK;
    return pl__grow_ring(gx, plan, err);
}

/* pl_depth_backend.restart: a fresh scheduler from batch `first`; the issue loop goes on there. */
static pl_status pl__restart(void *user, const pl_plan *plan, int64_t first, pl_error *err)
{
    pl__gpu_run *r = user;
    pl_gx *gx = r->gx;
    r->first = first;
    __atomic_store_n(&gx->stream_first, first, __ATOMIC_RELEASE); /* before its launches */
    pl_gx_wake_attach(gx, NULL); /* a late wake-up must not find it half-made */
    pl_sched_fini(&gx->sched);
    gx->sched_init = false;
    PL_CHECK(pl__sched(r, plan, err));
    PL_CHECK(pl_gx_stream_start(gx, err)); /* a grown ring has its streams made again */
    pl_sched_begin_at(&gx->sched, first);
    for (int k = 0; k < gx->nseg; k++) {
        gx->launched[k] = gx->mon_b[k] = first;
        gx->mon_i[k] = gx->mon_conf[k] = 0;
    }
    gx->monitored = first;
    return PL_OK;
}

/* Closes the stages (a close's error replaces no earlier one). */
static void pl__close(pl__gpu_run *r, pl_status *st, pl_error *err)
{
    pl_gx *gx = r->gx;
    if (!gx->rt_open) return;
    pl_gx_stream_stop(gx); /* every delivery handed to the writers before they close */
    pl_error ce;
    /* Between the phases of depth: auto no scheduler holds the counts: batches < first are what
     * every stage completed. */
    int64_t *before = NULL;
    if (!gx->sched_init && r->first > 0 &&
        (before = malloc((size_t)(gx->nst > 0 ? gx->nst : 1) * sizeof *before)) != NULL)
        for (int i = 0; i < gx->nst; i++)
            before[i] = r->first;
    pl_status cs = pl_stage_rt_close(&gx->rt, gx->sched_init ? gx->sched.done : before,
                                     *st != PL_OK, r->res, &ce);
    free(before);
    if (*st == PL_OK && cs != PL_OK) {
        *st = cs;
        if (err) *err = ce;
    }
}

/* The run; *active_ns (may be NULL) gets the time from the first launch to the last batch read
 * back (host clock), for bench. */
static pl_status pl__run(const pl_plan *plan, const pl_run_cfg *cfg, pl_run_result *res,
                         int64_t *active_ns, pl_error *err)
{
    pl_run_cfg def;
    if (!cfg) {
        pl_run_cfg_init(&def);
        cfg = &def;
    }
    pl_gx gxs, *gx = &gxs;
    pl__gpu_run r = {gx, cfg, res, NULL, 0};
    pl_plan *grown = NULL; /* depth: auto: the plan at the chosen depth */
    pl_status st = pl__setup(gx, plan, cfg, cfg->use_graphs, true, err);
    memset(res, 0, sizeof *res);
    res->executor = "gpu";
    res->graphs = cfg->use_graphs;
    res->graph_mode = gx->sgraphs ? "stage" : gx->graphs ? "segment" : "none";
    res->n_stages = plan->n_stages;
    res->batches_planned = plan->batches;
    res->workers = gx->rt_open ? gx->rt.env.workers : 0;
    res->batch_clock = (pl_batch_clock){plan->depth, -1, -1, 0};
    {
        struct cudaDeviceProp prop;
        if (cudaGetDeviceProperties(&prop, gx->device) == cudaSuccess)
            snprintf(res->device_name, sizeof res->device_name, "%.127s", prop.name);
    }
    if (st != PL_OK) goto close;
    PL_CHECK_GOTO(pl__run_setup(&r, err), st, close);
    pl_depth_backend be = {&r, pl__phase, pl__grow, pl__restart};
    st = pl_depth_run(plan, cfg, gx->stats, &be, res, &grown, err);
    res->batches_issued = gx->nseg ? gx->launched[0] : gx->sched_init ? gx->sched.started : r.first;
    res->wall_ns = (gx->t_end > gx->t_start ? gx->t_end : pl_now_ns()) - gx->t_start;
    if (active_ns)
        *active_ns = gx->t_first_launch > 0 && gx->t_last_done > gx->t_first_launch
                         ? gx->t_last_done - gx->t_first_launch
                         : res->wall_ns;
    res->timing = gx->stats;
    gx->stats = NULL;
close:
    pl__close(&r, &st, err);
    pl_timing_free(gx->stats);
    gx->stats = NULL;
    free(r.owned);
    pl__teardown(gx);
    pl_plan_free(grown);
    return st;
}

pl_status pl_exec_gpu_run(const pl_plan *plan, const pl_run_cfg *cfg, pl_run_result *res,
                          pl_error *err)
{
    return pl__run(plan, cfg, res, NULL, err);
}

/* --- bench helpers ------------------------------------------------------------------------- */

pl_status pl_gpu_run_active(const pl_plan *plan, const pl_run_cfg *cfg, pl_run_result *res,
                            int64_t *active_ns, pl_error *err)
{
    return pl__run(plan, cfg, res, active_ns, err);
}

pl_status pl_gpu_replay_loop(const pl_plan *plan, int timing_period, int64_t warmup,
                             int64_t launches, double *ns_per_launch, pl_error *err)
{
    pl_run_cfg cfg;
    pl_run_cfg_init(&cfg);
    cfg.timing_period = timing_period;
    cfg.graph_mode = PL_GRAPHS_SEGMENT; /* the bench replays launch the segment graphs */
    pl_gx gxs, *gx = &gxs;
    pl_status st = pl__setup(gx, plan, &cfg, true, false, err);
    int64_t t0 = 0;
    for (int64_t i = 0; st == PL_OK && i < warmup + launches; i++) {
        if (i == warmup) {
            st = PL_CUDA(cudaDeviceSynchronize(), NULL, -1, err);
            t0 = pl_now_ns();
        }
        int s = (int)(i % gx->depth), r = (int)(i % gx->ring);
        /* The graphs the executor would launch for batch i: timed on sampled batches. */
        for (int k = 0; st == PL_OK && k < gx->nseg; k++) {
            size_t e = (size_t)r * (size_t)gx->nseg + (size_t)k;
            cudaGraphExec_t exec = pl_gx_batch_timed(gx, i) ? gx->exec_timed[e] : gx->exec[e];
            st = PL_CUDA(cudaGraphLaunch(exec, gx->launch[s]), NULL, i, err);
        }
    }
    if (st == PL_OK) st = PL_CUDA(cudaDeviceSynchronize(), NULL, -1, err);
    if (st == PL_OK) *ns_per_launch = (double)(pl_now_ns() - t0) / (double)launches;
    pl__teardown(gx);
    return st;
}

/* One executable graph holding `batches_per_graph` consecutive batches, launched again and again
 * on one stream: the alternative to one graph per slot that the design names (docs/perf.md,
 * "N per-slot graphs or one graph holding N slots"). The capture is the --no-graph issue order
 * recorded on the plan's streams: batch i uses slot i % depth, waits inside a batch use the
 * capture events (as the per-slot captures do), cross-batch deps between device stages (slot
 * reuse, persistent buffers) wait on a ring of capture events longer than any distance, so a wait
 * names exactly batch i - distance of this graph. Across launches no wait is needed: consecutive
 * launches of one executable graph are ordered. Each batch records the lean graphs' end events
 * (what the host would read back), nothing else. */
pl_status pl_gpu_replay_onegraph(const pl_plan *plan, int batches_per_graph, int64_t warmup,
                                 int64_t launches, double *ns_per_batch, pl_error *err)
{
    pl_run_cfg cfg;
    pl_run_cfg_init(&cfg);
    cfg.timing_period = -1; /* lean: only the end events the host or a later launch waits for */
    cfg.graph_mode = PL_GRAPHS_SEGMENT; /* the segment graphs' objects (events, streams) */
    pl_gx gxs, *gx = &gxs;
    cudaEvent_t *xev = NULL;
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    cudaStream_t origin = NULL;
    bool capturing = false;
    int xring = 1, cur = -1;
    int64_t t0 = 0;
    pl_status st = pl__setup(gx, plan, &cfg, true, false, err);
    if (st != PL_OK) goto done;
    if (batches_per_graph < 1 || launches < 1) {
        st = pl_error_set(err, PL_EINPUT, "error: one graph needs >= 1 batch and >= 1 launch");
        goto done;
    }
    for (int i = 0; i < plan->n_xdeps; i++)
        if (plan->xdeps[i].distance >= xring) xring = plan->xdeps[i].distance + 1;
    xev = calloc((size_t)xring * (size_t)gx->nst, sizeof *xev);
    if (!xev) {
        st = pl_error_set(err, PL_ENOMEM, "error: out of memory");
        goto done;
    }
    for (int r = 0; r < xring; r++)
        for (int s = 0; s < gx->nst; s++)
            if (plan->stages[s].segment >= 0)
                PL_CHECK_GOTO(PL_CUDA(cudaEventCreateWithFlags(&xev[(size_t)r * gx->nst + s],
                                                               cudaEventDisableTiming),
                                      NULL, -1, err),
                              st, done);
    origin = gx->launch[0];
    PL_CHECK_GOTO(
        PL_CUDA(cudaStreamBeginCapture(origin, cudaStreamCaptureModeThreadLocal), NULL, -1, err),
        st, done);
    capturing = true;
    PL_CHECK_GOTO(PL_CUDA(cudaEventRecord(gx->ev_fork, origin), NULL, -1, err), st, done);
    for (int k = 0; k < plan->n_streams; k++)
        if (gx->streams[k])
            PL_CHECK_GOTO(
                PL_CUDA(cudaStreamWaitEvent(gx->streams[k], gx->ev_fork, 0), NULL, -1, err), st,
                done);
    for (int64_t b = 0; b < batches_per_graph; b++) {
        int slot = (int)(b % gx->depth);
        for (int i = 0; i < plan->n_stages; i++) {
            cur = plan->order[i];
            const pl_plan_stage *ps = &plan->stages[cur];
            if (ps->segment < 0) continue;
            cudaStream_t s = gx->streams[ps->stream];
            for (int j = 0; j < ps->n_xin; j++) {
                const pl_xdep *x = &plan->xdeps[ps->xin[j]];
                if (plan->stages[x->from].segment < 0 || b - x->distance < 0) continue;
                size_t k = (size_t)((b - x->distance) % xring) * gx->nst + x->from;
                PL_CHECK_GOTO(
                    PL_CUDA(cudaStreamWaitEvent(s, xev[k], 0), pl_gx_sname(gx, cur), b, err), st,
                    done);
            }
            PL_CHECK_GOTO(pl_gx_record_cap_waits(gx, cur, s, err), st, done);
            PL_CHECK_GOTO(pl_gx_record_stage(gx, cur, slot, slot, b, s, true, false, err), st,
                          done);
            if (gx->cap_src[cur])
                PL_CHECK_GOTO(
                    PL_CUDA(cudaEventRecord(gx->ev_cap[cur], s), pl_gx_sname(gx, cur), b, err), st,
                    done);
            PL_CHECK_GOTO(PL_CUDA(cudaEventRecord(xev[(size_t)(b % xring) * gx->nst + cur], s),
                                  pl_gx_sname(gx, cur), b, err),
                          st, done);
        }
    }
    cur = -1;
    for (int k = 0; k < plan->n_streams; k++)
        if (gx->streams[k]) {
            PL_CHECK_GOTO(PL_CUDA(cudaEventRecord(gx->ev_join[k], gx->streams[k]), NULL, -1, err),
                          st, done);
            PL_CHECK_GOTO(PL_CUDA(cudaStreamWaitEvent(origin, gx->ev_join[k], 0), NULL, -1, err),
                          st, done);
        }
    capturing = false;
    PL_CHECK_GOTO(PL_CUDA(cudaStreamEndCapture(origin, &graph), NULL, -1, err), st, done);
    PL_CHECK_GOTO(pl_gx_loop_fill(gx, err), st, done); /* the WHILE nodes' bodies */
    PL_CHECK_GOTO(PL_CUDA(cudaGraphInstantiate(&exec, graph, 0), NULL, -1, err), st, done);
    PL_CHECK_GOTO(PL_CUDA(cudaGraphUpload(exec, origin), NULL, -1, err), st, done);
    for (int64_t i = 0; i < warmup + launches; i++) {
        if (i == warmup) {
            PL_CHECK_GOTO(PL_CUDA(cudaDeviceSynchronize(), NULL, -1, err), st, done);
            t0 = pl_now_ns();
        }
        PL_CHECK_GOTO(PL_CUDA(cudaGraphLaunch(exec, origin), NULL, i, err), st, done);
    }
    PL_CHECK_GOTO(PL_CUDA(cudaDeviceSynchronize(), NULL, -1, err), st, done);
    *ns_per_batch = (double)(pl_now_ns() - t0) / ((double)launches * (double)batches_per_graph);
done:
    if (st != PL_OK && cur >= 0 && err && !err->stage[0]) {
        pl_error_prefix(err, "stage '%s' (capturing one graph of %d batches)", pl_gx_sname(gx, cur),
                        batches_per_graph);
        pl_error_tag(err, pl_gx_sname(gx, cur), -1);
    }
    if (capturing) {
        cudaStreamEndCapture(origin, &graph);
        cudaGetLastError();
    }
    pl_gx_loop_drop(gx);
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    for (int r = 0; xev && r < xring; r++)
        for (int s = 0; s < gx->nst; s++)
            if (xev[(size_t)r * gx->nst + s]) cudaEventDestroy(xev[(size_t)r * gx->nst + s]);
    free(xev);
    pl__teardown(gx);
    return st;
}
