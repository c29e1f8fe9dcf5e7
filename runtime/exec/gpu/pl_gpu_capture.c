/* pl_gpu_capture: the GPU executor's CUDA objects (streams, events, fault marks), recording one
 * device stage through its kind's `record` hook, and capturing each (ring entry, segment) as a
 * graph; plain launches (--no-graph) record the same stages on shared streams. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_exec_gpu_int.h"
#include "pl_gpu_dot.h"
#include "pl_gx.h"

static int pl__chunks(const pl_gx *gx, int st)
{
    int n = gx->spec->stages[st].chunks;
    return n > 1 ? n : 1;
}

/* The plan's link, less one case: under stage graphs a compute consumer's waits would be event
 * wait nodes inside its graph, waiting on events recorded by plain calls of other streams. A
 * plain wait binds to the record enqueued before it; whether a wait node binds at the graph's
 * launch or when it runs is not something this code relies on (a later batch's record there
 * could wait on this very graph), so such a consumer waits for the whole producer before its
 * graph is launched. Downloads behind a chunked forward, the case that pays, are plain copies. */
static bool pl__linked(const pl_gx *gx, int c, int p)
{
    if (gx->sgraphs && pl_gx_compute_stage(gx, c)) return false;
    return pl_plan_chunk_linked(gx->plan, c, p);
}

bool pl_gx_chunk_linked(const pl_gx *gx, int c, int p)
{
    /* Before the chunk events exist (pl_gx_create_objects), every wait is a whole-stage one. */
    return gx->chunk_off && pl__linked(gx, c, p);
}

/* The chunk events: offsets for the stages some consumer waits on block by block, then the
 * events. A linked producer is one of its consumer's preds (pl_plan_chunk_linked), so the
 * producers are found through each stage's preds: O(stages + edges). Asking every pair is
 * O(stages^2), seconds of setup at tens of thousands of stages. */
static pl_status pl__create_chunk_events(pl_gx *gx, pl_error *err)
{
    int nst = gx->nst;
    const pl_plan *plan = gx->plan;
    gx->chunk_off = malloc(((size_t)nst + 1) * sizeof *gx->chunk_off);
    gx->chunk_coff = malloc(((size_t)nst + 1) * sizeof *gx->chunk_coff);
    bool *src = calloc((size_t)nst + 1, sizeof *src);
    if (!gx->chunk_off || !gx->chunk_coff || !src) {
        free(src);
        return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    }
    for (int c = 0; c < nst; c++)
        for (int i = 0; i < plan->stages[c].n_preds; i++) {
            int p = plan->stages[c].preds[i];
            if (p != c && pl__linked(gx, c, p)) src[p] = true;
        }
    int n = 0, nc = 0;
    for (int p = 0; p < nst; p++) {
        gx->chunk_off[p] = gx->chunk_coff[p] = -1;
        if (!src[p]) continue;
        gx->chunk_off[p] = n;
        gx->chunk_coff[p] = nc;
        n += gx->depth * pl__chunks(gx, p);
        nc += pl__chunks(gx, p);
    }
    free(src);
    if (n == 0) return PL_OK;
    gx->ev_chunk = calloc((size_t)n, sizeof *gx->ev_chunk);
    gx->ev_capch = calloc((size_t)nc, sizeof *gx->ev_capch);
    if (!gx->ev_chunk || !gx->ev_capch) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    gx->n_ev_chunk = n;
    gx->n_ev_capch = nc;
    for (int i = 0; i < n; i++)
        PL_CHECK(PL_CUDA(cudaEventCreateWithFlags(&gx->ev_chunk[i], cudaEventDisableTiming), NULL,
                         -1, err));
    for (int i = 0; i < nc; i++)
        PL_CHECK(PL_CUDA(cudaEventCreateWithFlags(&gx->ev_capch[i], cudaEventDisableTiming), NULL,
                         -1, err));
    return PL_OK;
}

pl_status pl_gx_create_objects(pl_gx *gx, pl_error *err)
{
    const pl_plan *p = gx->plan;
    size_t nev = (size_t)gx->ring * (size_t)gx->nst;
    gx->streams = calloc((size_t)p->n_streams, sizeof *gx->streams);
    gx->launch = calloc((size_t)gx->depth, sizeof *gx->launch);
    size_t nexec = (size_t)gx->ring * (size_t)(gx->nseg > 0 ? gx->nseg : 1);
    gx->exec = calloc(nexec, sizeof *gx->exec);
    gx->exec_timed = calloc(nexec, sizeof *gx->exec_timed);
    gx->ev_start = calloc(nev, sizeof *gx->ev_start);
    gx->ev_end = calloc(nev, sizeof *gx->ev_end);
    gx->ev_sync = calloc(nev, sizeof *gx->ev_sync);
    gx->ev_cap = calloc((size_t)gx->nst + 1, sizeof *gx->ev_cap);
    gx->cap_src = calloc((size_t)gx->nst + 1, sizeof *gx->cap_src);
    gx->ev_join = calloc((size_t)p->n_streams, sizeof *gx->ev_join);
    /* Stage graphs; with plain launches, the graphs of the loops that are WHILE nodes (a
     * conditional node lives only in a graph). */
    bool loop_graphs = false;
    for (int l = 0; l < p->n_loops; l++)
        loop_graphs |= p->loops[l].graph;
    if (gx->sgraphs || (!gx->graphs && loop_graphs)) {
        gx->sexec = calloc((size_t)gx->depth * (size_t)gx->nst, sizeof *gx->sexec);
        if (!gx->sexec) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    }
    if (!gx->streams || !gx->launch || !gx->exec || !gx->exec_timed || !gx->ev_start ||
        !gx->ev_end || !gx->ev_sync || !gx->ev_cap || !gx->cap_src || !gx->ev_join)
        return pl_error_set(err, PL_ENOMEM, "error: out of memory creating CUDA objects");
    for (int k = 0; k < p->n_streams; k++) {
        if (p->streams[k].engine == PL_ENGINE_HOST) continue;
        PL_CHECK(PL_CUDA(cudaStreamCreateWithFlags(&gx->streams[k], cudaStreamNonBlocking), NULL,
                         -1, err));
        PL_CHECK(PL_CUDA(cudaEventCreateWithFlags(&gx->ev_join[k], cudaEventDisableTiming), NULL,
                         -1, err));
    }
    for (int s = 0; s < gx->depth; s++)
        PL_CHECK(PL_CUDA(cudaStreamCreateWithFlags(&gx->launch[s], cudaStreamNonBlocking), NULL, -1,
                         err));
    if (!gx->graphs) {
        gx->cstreams = calloc((size_t)gx->depth * (size_t)p->n_streams, sizeof *gx->cstreams);
        if (!gx->cstreams) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
        for (int s = 0; s < gx->depth; s++)
            for (int k = 0; k < p->n_streams; k++)
                if (p->streams[k].engine == PL_ENGINE_COMPUTE)
                    PL_CHECK(PL_CUDA(
                        cudaStreamCreateWithFlags(&gx->cstreams[(size_t)s * p->n_streams + k],
                                                  cudaStreamNonBlocking),
                        NULL, -1, err));
    }
    for (int st = 0; st < gx->nst; st++) {
        const pl_plan_stage *ps = &p->stages[st];
        for (int j = 0; j < ps->n_seg_waits; j++)
            if (!pl__linked(gx, st, ps->seg_waits[j])) gx->cap_src[ps->seg_waits[j]] = true;
    }
    PL_CHECK(pl__create_chunk_events(gx, err));
    for (int st = 0; st < gx->nst; st++) {
        if (p->stages[st].segment < 0) continue;
        PL_CHECK(PL_CUDA(cudaEventCreateWithFlags(&gx->ev_cap[st], cudaEventDisableTiming), NULL,
                         -1, err));
        for (int r = 0; r < gx->ring; r++) {
            size_t k = (size_t)r * gx->nst + st;
            /* Timing enabled (unless timing is off): these give the device stages' spans. */
            unsigned fl = gx->timing >= 0 ? cudaEventDefault : cudaEventDisableTiming;
            PL_CHECK(PL_CUDA(cudaEventCreateWithFlags(&gx->ev_start[k], fl), NULL, -1, err));
            PL_CHECK(PL_CUDA(cudaEventCreateWithFlags(&gx->ev_end[k], fl), NULL, -1, err));
            if (gx->graphs)
                PL_CHECK(PL_CUDA(cudaEventCreateWithFlags(&gx->ev_sync[k], cudaEventDisableTiming),
                                 NULL, -1, err));
        }
    }
    PL_CHECK(
        PL_CUDA(cudaEventCreateWithFlags(&gx->ev_fork, cudaEventDisableTiming), NULL, -1, err));
    gx->created_fork = true;
    if (!gx->created_t0) {
        PL_CHECK(PL_CUDA(cudaEventCreate(&gx->ev_t0), NULL, -1, err));
        gx->created_t0 = true;
    }

    /* Fault marks and trigger: pinned, mapped host words the device writes and the host reads
     * after a fault (they stay readable when the context is lost). */
    void *m = NULL;
    PL_CHECK(PL_CUDA(cudaHostAlloc(&m, sizeof(uint32_t) * (nev + 1), cudaHostAllocMapped), NULL, -1,
                     err));
    memset(m, 0, sizeof(uint32_t) * (nev + 1));
    gx->marks = m;
    void *md = NULL;
    PL_CHECK(PL_CUDA(cudaHostGetDevicePointer(&md, m, 0), NULL, -1, err));
    gx->marks_dev = (CUdeviceptr)(uintptr_t)md;
    gx->trigger = gx->marks + nev;
    gx->trigger_dev = (char *)md + sizeof(uint32_t) * nev;
    return pl_gx_loop_create(gx, err);
}

void pl_gx_destroy_objects(pl_gx *gx)
{
    const pl_plan *p = gx->plan;
    pl_gx_loop_destroy(gx);
    size_t nexec = (size_t)gx->ring * (size_t)(gx->nseg > 0 ? gx->nseg : 1);
    for (size_t i = 0; gx->exec && i < nexec; i++)
        if (gx->exec[i]) cudaGraphExecDestroy(gx->exec[i]);
    for (size_t i = 0; gx->exec_timed && i < nexec; i++)
        if (gx->exec_timed[i]) cudaGraphExecDestroy(gx->exec_timed[i]);
    for (size_t i = 0; gx->sexec && i < (size_t)gx->depth * (size_t)gx->nst; i++)
        if (gx->sexec[i]) cudaGraphExecDestroy(gx->sexec[i]);
    free(gx->sexec);
    gx->sexec = NULL;
    if (gx->marks) cudaFreeHost(gx->marks);
    if (gx->created_fork) cudaEventDestroy(gx->ev_fork);
    size_t nev = (size_t)gx->ring * (size_t)gx->nst;
    for (size_t k = 0; k < nev; k++) {
        if (gx->ev_start && gx->ev_start[k]) cudaEventDestroy(gx->ev_start[k]);
        if (gx->ev_end && gx->ev_end[k]) cudaEventDestroy(gx->ev_end[k]);
        if (gx->ev_sync && gx->ev_sync[k]) cudaEventDestroy(gx->ev_sync[k]);
    }
    for (int s = 0; gx->ev_cap && s < gx->nst; s++)
        if (gx->ev_cap[s]) cudaEventDestroy(gx->ev_cap[s]);
    for (int i = 0; i < gx->n_ev_chunk; i++)
        if (gx->ev_chunk[i]) cudaEventDestroy(gx->ev_chunk[i]);
    for (int i = 0; i < gx->n_ev_capch; i++)
        if (gx->ev_capch[i]) cudaEventDestroy(gx->ev_capch[i]);
    free(gx->ev_chunk);
    free(gx->ev_capch);
    free(gx->chunk_off);
    free(gx->chunk_coff);
    gx->ev_chunk = gx->ev_capch = NULL;
    gx->chunk_off = gx->chunk_coff = NULL;
    gx->n_ev_chunk = gx->n_ev_capch = 0;
    for (int k = 0; p && k < p->n_streams; k++) {
        if (gx->ev_join && gx->ev_join[k]) cudaEventDestroy(gx->ev_join[k]);
        if (gx->streams && gx->streams[k]) cudaStreamDestroy(gx->streams[k]);
    }
    for (int s = 0; gx->launch && s < gx->depth; s++)
        if (gx->launch[s]) cudaStreamDestroy(gx->launch[s]);
    for (size_t i = 0; p && gx->cstreams && i < (size_t)gx->depth * (size_t)p->n_streams; i++)
        if (gx->cstreams[i]) cudaStreamDestroy(gx->cstreams[i]);
    free(gx->cstreams);
    gx->cstreams = NULL;
    free(gx->streams);
    free(gx->launch);
    free(gx->exec);
    free(gx->exec_timed);
    free(gx->ev_start);
    free(gx->ev_end);
    free(gx->ev_sync);
    free(gx->ev_cap);
    free(gx->cap_src);
    free(gx->ev_join);
    gx->streams = gx->launch = NULL;
    gx->exec = gx->exec_timed = NULL;
    gx->ev_start = gx->ev_end = gx->ev_sync = gx->ev_cap = gx->ev_join = NULL;
    gx->cap_src = NULL;
    gx->marks = NULL;
    gx->trigger = NULL;
    gx->write_value = NULL;
    gx->created_fork = false;
}

/* Per-stage completion marks, written by the stream front end (cuStreamWriteValue32) after each
 * device stage. After a kernel fault every CUDA call returns the sticky error, so events cannot
 * say which stage of which batch was running; the marks can. Off unless run.fault_marks:
 * measured on the H200 (docs/perf.md), memory-operation nodes in the per-slot graphs stopped
 * the slots' copies from overlapping (47% of the bound instead of 83% at depth 3 and 4, 64 MiB
 * batches) and cost ~2 us per stage on small batches. Without them the fault is pinned on the
 * first kernel not seen to finish (pl__locate_fault). */
void pl_gx_probe_marks(pl_gx *gx)
{
    if (!gx->spec->run.fault_marks) return;
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuStreamWriteValue32", &fn, 12000, cudaEnableDefault,
                                         &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess || !fn)
        return;
    pl_gx_write_value_fn wv = (pl_gx_write_value_fn)fn;
    cudaStream_t s = gx->launch[0];
    /* Can it be captured? Try on a throwaway graph. */
    cudaGraph_t g = NULL;
    if (cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) != cudaSuccess) return;
    CUresult r = wv((CUstream)s, gx->marks_dev, 0, 0);
    cudaError_t e = cudaStreamEndCapture(s, &g);
    if (g) cudaGraphDestroy(g);
    if (r != CUDA_SUCCESS || e != cudaSuccess) {
        cudaGetLastError();
        return;
    }
    gx->write_value = wv;
}

/* --- recording the device stages of one batch ------------------------------------------------- */

/* How a stage's work is being recorded, for its chunk events. */
typedef enum pl__rec_mode {
    PL__REC_PLAIN,   /* issued on a stream */
    PL__REC_STAGE,   /* captured alone (a stage graph): events are External nodes */
    PL__REC_SEGMENT, /* inside a segment's capture: events are edges */
} pl__rec_mode;

typedef struct pl__rec {
    pl_gx *gx;
    pl__rec_mode mode;
    int st, slot;
    /* A timed chunked consumer's start event, recorded after its first block's waits (NULL:
     * recorded before the stage, or not timed), and its record flags. */
    cudaEvent_t start;
    unsigned start_fl;
} pl__rec;

static cudaEvent_t pl__chunk_event(const pl__rec *rc, int p, int j)
{
    const pl_gx *gx = rc->gx;
    if (rc->mode == PL__REC_SEGMENT) return gx->ev_capch[gx->chunk_coff[p] + j];
    return gx->ev_chunk[gx->chunk_off[p] + rc->slot * pl__chunks(gx, p) + j];
}

static pl_status pl__chunk_mark(const pl_dev_ctx *ctx, int j, pl_error *err)
{
    const pl__rec *rc = ctx->exec;
    if (rc->gx->chunk_off[rc->st] < 0) return PL_OK; /* nobody waits for its blocks */
    unsigned fl = rc->mode == PL__REC_STAGE ? cudaEventRecordExternal : cudaEventRecordDefault;
    return PL_CUDA(
        cudaEventRecordWithFlags(pl__chunk_event(rc, rc->st, j), (cudaStream_t)ctx->stream, fl),
        ctx->stage->name, ctx->batch, err);
}

static pl_status pl__chunk_wait(const pl_dev_ctx *ctx, int j, pl_error *err)
{
    const pl__rec *rc = ctx->exec;
    const pl_plan_stage *ps = &rc->gx->plan->stages[rc->st];
    /* Never inside a stage graph's capture: a compute consumer is not linked there (pl__linked),
     * so every wait here is a plain one or, in a segment capture, an edge. */
    for (int i = 0; i < ps->n_preds; i++) {
        int p = ps->preds[i];
        if (!pl_gx_chunk_linked(rc->gx, rc->st, p)) continue;
        PL_CHECK(
            PL_CUDA(cudaStreamWaitEvent((cudaStream_t)ctx->stream, pl__chunk_event(rc, p, j), 0),
                    ctx->stage->name, ctx->batch, err));
    }
    if (j == 0 && rc->start)
        return PL_CUDA(cudaEventRecordWithFlags(rc->start, (cudaStream_t)ctx->stream, rc->start_fl),
                       ctx->stage->name, ctx->batch, err);
    return PL_OK;
}

/* Does stage st wait for some producer block by block? */
static bool pl__chunk_consumer(const pl_gx *gx, int st)
{
    const pl_plan_stage *ps = &gx->plan->stages[st];
    for (int i = 0; i < ps->n_preds; i++)
        if (pl_gx_chunk_linked(gx, st, ps->preds[i])) return true;
    return false;
}

/* The work of device stage st for one batch of `slot` on s (its kind's record hook): kernels and
 * library calls, and a chunked stage's block events (pl_gx_chunk_linked). */
static pl_status pl__record_work(pl_gx *gx, int st, int slot, int64_t batch, cudaStream_t s,
                                 pl__rec_mode mode, cudaEvent_t late_start, unsigned start_fl,
                                 pl_error *err)
{
    const pl_spec *spec = gx->spec;
    const pl_stage *stg = &spec->stages[st];
    const char *name = stg->name;
    void *const *hb = pl_gx_host_table(gx, slot, batch); /* in-memory inputs in place */
    void *const *db = pl_buffers_slot(gx->dbufs, slot);
    pl_dev_ctx dc = {
        .spec = spec,
        .stage = stg,
        .env = &gx->rt.env,
        .batch = batch,
        .slot = slot,
        .host_bufs = hb,
        .dev_bufs = db,
        .stream = (void *)s,
        .state = gx->rt.state ? gx->rt.state[st] : NULL,
    };
    pl__rec rc = {gx, mode, st, slot, late_start, start_fl};
    if (stg->loop) { /* a WHILE node in this capture (plain launches launch its graph) */
        if (mode == PL__REC_PLAIN)
            return pl_error_set(err, PL_ERUNTIME,
                                "stage '%s': a device loop issued as plain calls (internal "
                                "error: its graph is launched instead)",
                                name);
        return pl_gx_loop_node(gx, st, slot, s, err);
    }
    if (pl__chunks(gx, st) > 1 && gx->chunk_off) {
        dc.chunk_mark = pl__chunk_mark;
        dc.chunk_wait = pl__chunk_wait;
        dc.exec = &rc;
    }
    if (!stg->kind->record)
        return pl_error_set(err, PL_ERUNTIME,
                            "stage '%s': kind %s has no GPU recording (internal error)", name,
                            stg->kind->name);
    return stg->kind->record(&dc, err);
}

pl_status pl_gx_record_work(pl_gx *gx, int st, int slot, int64_t batch, cudaStream_t s,
                            pl_error *err)
{
    return pl__record_work(gx, st, slot, batch, s, PL__REC_PLAIN, NULL, 0, err);
}

/* Records device stage st of one batch on stream s: the work (or, with stage graphs, the launch
 * of its graph for the slot), and its events. `timed`: a start and an end event with timestamps
 * around it (timed graphs, timed plain launches: pl_gx_batch_timed); otherwise the end event only
 * where the host or a later launch waits for it (lean graphs; plain launches always record it,
 * their waits use it). */
pl_status pl_gx_record_stage(pl_gx *gx, int st, int slot, int r, int64_t batch, cudaStream_t s,
                             bool capturing, bool timed, pl_error *err)
{
    const char *name = pl_gx_sname(gx, st);
    size_t k = (size_t)r * gx->nst + st;
    /* Inside a capture, External makes these real event-record nodes that the host can wait on
     * (and that keep their timestamps); outside, it is a plain record. */
    unsigned fl = capturing ? cudaEventRecordExternal : cudaEventRecordDefault;
    cudaGraphExec_t sg = !capturing && gx->sexec ? gx->sexec[(size_t)slot * gx->nst + st] : NULL;
    /* A chunked consumer's span starts once its first block may run (after the waits for it), so
     * its engine's busy time does not count the producer's first block. A stage graph holds no
     * timing events: there the span starts before the graph. */
    bool late = timed && !sg && pl__chunk_consumer(gx, st);
    if (timed && !late)
        PL_CHECK(PL_CUDA(cudaEventRecordWithFlags(gx->ev_start[k], s, fl), name, batch, err));
    if (sg)
        PL_CHECK(PL_CUDA(cudaGraphLaunch(sg, s), name, batch, err));
    else
        PL_CHECK(pl__record_work(gx, st, slot, batch, s,
                                 capturing ? PL__REC_SEGMENT : PL__REC_PLAIN,
                                 late ? gx->ev_start[k] : NULL, fl, err));
    if (st == gx->fail_dev_stage &&
        (capturing ? r == (int)(gx->cfg->fail_batch % gx->ring) : batch == gx->cfg->fail_batch))
        PL_CHECK(PL_CUDA(pl_exec_launch_fault(gx->trigger_dev, (void *)s), name, batch, err));
    if (timed || !capturing || gx->plan->stages[st].record_end) {
        cudaEvent_t end = capturing && !timed ? gx->ev_sync[k] : gx->ev_end[k];
        PL_CHECK(PL_CUDA(cudaEventRecordWithFlags(end, s, fl), name, batch, err));
    }
    if (gx->write_value) {
        CUresult cr = gx->write_value((CUstream)s, gx->marks_dev + sizeof(uint32_t) * k, 1, 0);
        if (cr != CUDA_SUCCESS)
            return pl_error_set(err, PL_ECUDA,
                                "stage '%s': cuStreamWriteValue32 failed (CUresult %d); run "
                                "without fault marks (run.fault_marks: false)",
                                name, (int)cr);
    }
    return PL_OK;
}

pl_status pl_gx_record_cap_waits(pl_gx *gx, int st, cudaStream_t s, pl_error *err)
{
    const pl_plan_stage *ps = &gx->plan->stages[st];
    for (int j = 0; j < ps->n_seg_waits; j++)
        if (!pl_gx_chunk_linked(gx, st, ps->seg_waits[j])) /* waited for block by block */
            PL_CHECK(PL_CUDA(cudaStreamWaitEvent(s, gx->ev_cap[ps->seg_waits[j]], 0),
                             pl_gx_sname(gx, st), -1, err));
    return PL_OK;
}

/* Plain launches: the plan's waits on device stages of the same batch (issued before, on their
 * streams; a host stage in between finished before this segment was issued). */
static pl_status pl__record_plain_waits(pl_gx *gx, int st, cudaStream_t s, int r, int64_t batch,
                                        pl_error *err)
{
    const pl_plan_stage *ps = &gx->plan->stages[st];
    for (int j = 0; j < ps->n_waits; j++) {
        int src = gx->plan->events[ps->waits[j]].src;
        if (gx->plan->stages[src].segment < 0 || pl_gx_chunk_linked(gx, st, src)) continue;
        cudaEvent_t e = gx->ev_end[(size_t)r * gx->nst + src];
        PL_CHECK(PL_CUDA(cudaStreamWaitEvent(s, e, 0), pl_gx_sname(gx, st), batch, err));
    }
    return PL_OK;
}

/* Captures the graph of ring entry r (batches b with b % ring == r: buffers of slot r % depth,
 * event set r, launched on the slot's stream). ThreadLocal capture mode: while this thread
 * captures, other threads of the process (a bench harness, an embedding application, CUDA
 * libraries' helper threads) may make CUDA calls that are illegal during a Global capture
 * (cudaMalloc, synchronous copies, event queries); ThreadLocal only forbids them on the
 * capturing thread, which makes none. Relaxed would also allow them here, but would hide our own
 * mistakes. */
pl_status pl_gx_capture(pl_gx *gx, int r, int seg, bool timed, cudaGraphExec_t *exec, pl_error *err)
{
    int slot = r % gx->depth;
    const pl_plan *p = gx->plan;
    cudaStream_t origin = gx->launch[slot];
    cudaGraph_t graph = NULL;
    pl_status st = PL_OK;
    int cur = -1; /* stage being recorded, for the message */
    PL_CHECK(
        PL_CUDA(cudaStreamBeginCapture(origin, cudaStreamCaptureModeThreadLocal), NULL, -1, err));
    PL_CHECK_GOTO(PL_CUDA(cudaEventRecord(gx->ev_fork, origin), NULL, -1, err), st, fail);
    for (int k = 0; k < p->n_streams; k++)
        if (gx->streams[k])
            PL_CHECK_GOTO(
                PL_CUDA(cudaStreamWaitEvent(gx->streams[k], gx->ev_fork, 0), NULL, -1, err), st,
                fail);
    const pl_segment *sg = &p->segments[seg];
    for (int i = 0; i < sg->n_stages; i++) {
        cur = sg->stages[i];
        cudaStream_t s = gx->streams[p->stages[cur].stream];
        PL_CHECK_GOTO(pl_gx_record_cap_waits(gx, cur, s, err), st, fail);
        PL_CHECK_GOTO(pl_gx_record_stage(gx, cur, slot, r, -1, s, true, timed, err), st, fail);
        if (gx->cap_src[cur])
            PL_CHECK_GOTO(
                PL_CUDA(cudaEventRecord(gx->ev_cap[cur], s), pl_gx_sname(gx, cur), -1, err), st,
                fail);
        enum cudaStreamCaptureStatus cs;
        PL_CHECK_GOTO(PL_CUDA(cudaStreamIsCapturing(origin, &cs), pl_gx_sname(gx, cur), -1, err),
                      st, fail);
        if (cs != cudaStreamCaptureStatusActive) {
            st = pl_error_set(err, PL_ECUDA,
                              "stage '%s': recording it broke the CUDA graph capture of slot %d, "
                              "segment %d (capture status %d); run with --no-graph to see the "
                              "failing call",
                              pl_gx_sname(gx, cur), slot, seg, (int)cs);
            goto fail;
        }
    }
    cur = -1;
    for (int k = 0; k < p->n_streams; k++)
        if (gx->streams[k]) {
            PL_CHECK_GOTO(PL_CUDA(cudaEventRecord(gx->ev_join[k], gx->streams[k]), NULL, -1, err),
                          st, fail);
            PL_CHECK_GOTO(PL_CUDA(cudaStreamWaitEvent(origin, gx->ev_join[k], 0), NULL, -1, err),
                          st, fail);
        }
    st = PL_CUDA(cudaStreamEndCapture(origin, &graph), NULL, -1, err);
    if (st != PL_OK) {
        pl_gx_loop_drop(gx);
        return pl_error_prefix(err, "capturing the graph of slot %d, segment %d", slot, seg);
    }
    /* The bodies of its WHILE nodes, now that no capture is open. */
    st = pl_gx_loop_fill(gx, err);
    if (st != PL_OK) {
        cudaGraphDestroy(graph);
        return st;
    }
    /* Bundles: the graphs that run (lean ones, or timed ones when every batch is timed). */
    if (gx->cfg && gx->cfg->dot_dir && r < gx->depth && (!timed || gx->timing == 0)) {
        char stem[64];
        snprintf(stem, sizeof stem, "graph_slot%d_seg%d", r, seg);
        st = pl_gx_dot_write(graph, gx->cfg->dot_dir, stem, err);
        if (st != PL_OK) {
            cudaGraphDestroy(graph);
            return st;
        }
    }
    st = PL_CUDA(cudaGraphInstantiate(exec, graph, 0), NULL, -1, err);
    cudaGraphDestroy(graph);
    if (st != PL_OK)
        return pl_error_prefix(err, "instantiating the graph of slot %d, segment %d", slot, seg);
    return PL_CUDA(cudaGraphUpload(*exec, origin), NULL, -1, err);
fail:
    if (cur >= 0 && err && !err->stage[0]) {
        pl_error_prefix(err, "stage '%s' (capturing slot %d)", pl_gx_sname(gx, cur), slot);
        pl_error_tag(err, pl_gx_sname(gx, cur), -1);
    }
    cudaStreamEndCapture(origin, &graph);
    if (graph) cudaGraphDestroy(graph);
    pl_gx_loop_drop(gx);
    cudaGetLastError();
    return st;
}

/* The stream plain launches issue stage st of a batch of `slot` on (gx->cstreams). */
static cudaStream_t pl__plain_stream(const pl_gx *gx, int st, int slot)
{
    int k = gx->plan->stages[st].stream;
    cudaStream_t c = gx->cstreams ? gx->cstreams[(size_t)slot * gx->plan->n_streams + k] : NULL;
    return c ? c : gx->streams[k];
}

/* One compute stage's work for one slot, captured alone on its plain stream (ThreadLocal, as
 * pl_gx_capture says why): *graph gets it, not instantiated. */
static pl_status pl__capture_work(pl_gx *gx, int slot, int st, cudaGraph_t *graph, pl_error *err)
{
    cudaStream_t s = pl__plain_stream(gx, st, slot);
    *graph = NULL;
    PL_CHECK(PL_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal),
                     pl_gx_sname(gx, st), -1, err));
    pl_status st2 = pl__record_work(gx, st, slot, -1, s, PL__REC_STAGE, NULL, 0, err);
    cudaError_t ce = cudaStreamEndCapture(s, graph);
    if (st2 == PL_OK && ce != cudaSuccess)
        st2 = pl_error_set(err, PL_ECUDA,
                           "stage '%s': recording it broke the CUDA graph capture of slot %d (%s); "
                           "run with --graphs segment or --no-graph to see the failing call",
                           pl_gx_sname(gx, st), slot, cudaGetErrorString(ce));
    if (st2 == PL_OK) st2 = pl_gx_loop_fill(gx, err); /* a loop stage: its WHILE node's body */
    pl_gx_loop_drop(gx);
    if (st2 != PL_OK) {
        if (*graph) cudaGraphDestroy(*graph);
        *graph = NULL;
        cudaGetLastError();
    }
    return st2;
}

pl_status pl_gx_capture_stage(pl_gx *gx, int slot, int st, cudaGraphExec_t *exec, pl_error *err)
{
    cudaGraph_t g;
    PL_CHECK(pl__capture_work(gx, slot, st, &g, err));
    /* Bundles: graph_slot<slot>_stage<index>.dot / .topo (the stage's index in the plan: names
     * may hold any UTF-8). */
    if (gx->cfg && gx->cfg->dot_dir) {
        char stem[64];
        snprintf(stem, sizeof stem, "graph_slot%d_stage%d", slot, st);
        pl_status ds = pl_gx_dot_write(g, gx->cfg->dot_dir, stem, err);
        if (ds != PL_OK) {
            cudaGraphDestroy(g);
            return ds;
        }
    }
    pl_status rc = PL_CUDA(cudaGraphInstantiate(exec, g, 0), pl_gx_sname(gx, st), -1, err);
    cudaGraphDestroy(g);
    if (rc != PL_OK) return pl_error_prefix(err, "instantiating the graph of slot %d", slot);
    return PL_CUDA(cudaGraphUpload(*exec, pl__plain_stream(gx, st, slot)), pl_gx_sname(gx, st), -1,
                   err);
}

void pl_gx_warm_modules(pl_gx *gx)
{
    for (int st = 0; st < gx->nst; st++) {
        if (!pl_gx_compute_stage(gx, st)) continue;
        pl_error e;
        cudaGraph_t g;
        cudaGraphExec_t x = NULL;
        if (pl__capture_work(gx, 0, st, &g, &e) != PL_OK) continue;
        if (cudaGraphInstantiate(&x, g, 0) == cudaSuccess) cudaGraphExecDestroy(x);
        cudaGraphDestroy(g);
        cudaGetLastError();
    }
}

pl_status pl_gx_issue_plain(pl_gx *gx, int64_t b, int k, pl_error *err)
{
    const pl_plan *p = gx->plan;
    int slot = (int)(b % gx->depth), r = (int)(b % gx->ring);
    const pl_segment *sg = &p->segments[k];
    for (int i = 0; i < sg->n_stages; i++) {
        int st = sg->stages[i];
        const pl_plan_stage *ps = &p->stages[st];
        cudaStream_t s = pl__plain_stream(gx, st, slot);
        /* Cross-batch deps between device stages: copy streams are shared by all batches and
         * compute streams by a slot's, so every distance needs its wait (the event ring is longer
         * than any distance). */
        for (int j = 0; j < ps->n_xin; j++) {
            const pl_xdep *x = &p->xdeps[ps->xin[j]];
            if (p->stages[x->from].segment < 0 || b - x->distance < 0) continue;
            size_t e = (size_t)((b - x->distance) % gx->ring) * gx->nst + x->from;
            PL_CHECK(
                PL_CUDA(cudaStreamWaitEvent(s, gx->ev_end[e], 0), pl_gx_sname(gx, st), b, err));
        }
        PL_CHECK(pl__record_plain_waits(gx, st, s, r, b, err));
        PL_CHECK(pl_gx_record_stage(gx, st, slot, r, b, s, false, pl_gx_batch_timed(gx, b), err));
    }
    return PL_OK;
}
