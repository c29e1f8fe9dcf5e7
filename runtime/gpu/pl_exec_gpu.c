/* pl_exec_gpu: the GPU executor. Two CUDA graphs per slot (lean, and timed: see below),
 * captured across one stream per device stream of the plan, instantiated and uploaded once,
 * replayed batch after batch; host stages before and after the device region run on worker
 * threads; the issuing thread learns from events recorded inside the graphs when a batch's
 * upload consumed its input and when its output is ready. `--no-graph` issues the same plan with
 * plain stream launches.
 *
 * Sampled device timing: event-record nodes inside a graph are not free (docs/perf.md: with a
 * start and an end event per device stage in every batch's graph the balanced pipeline reached
 * 84-86% of the bound, without them 99-101%). So each slot has a lean graph, with only the end
 * events the host waits for, and a timed graph, with a start and an end event (timing enabled)
 * around every device stage; the timed one is launched on sampled batches only
 * (pl_run_cfg.timing_period: one batch in N, mid-period; 0 = every batch, -1 = never). Device
 * spans of unsampled batches stay {0, 0}; the report skips them. Plain launches (--no-graph) time
 * every batch unless timing is off: recorded on a stream, events cost nothing visible.
 *
 * Run-ahead: each slot has two lean/timed pairs, each with its own event set (ring entries
 * b % (2 x depth)), so batch b + depth is launched behind batch b on the slot's stream before
 * the host has read batch b back (pl__setup, pl__slot_free). */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pl_buffers.h"
#include "pl_exec.h"
#include "pl_exec_gpu_int.h"
#include "pl_gpu.h"
#include "pl_nvtx.h"
#include "pl_stage_rt.h"

/* Where a stage runs relative to the device region of a batch. */
enum { PL__DEV, PL__PRE, PL__POST, PL__FREE };

typedef CUresult (*pl__write_value_fn)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

typedef struct pl__xd {
    int from, distance;
} pl__xd;

typedef struct pl__gx {
    const pl_plan *plan;
    const pl_spec *spec;
    const pl_run_cfg *cfg;
    int depth, ring, nst, nbuf;
    int64_t batches;
    bool graphs;
    int device;

    int *cls; /* [stage]: PL__DEV/PRE/POST/FREE */
    int *dev; /* device stages in plan order */
    int n_dev;
    int *launch_deps; /* host stages that batch b's device work needs done (done >= b + 1) */
    int n_launch_deps;
    pl__xd **xin; /* [stage]: cross-batch deps whose `to` is this stage */
    int *n_xin;
    int *host_streams; /* plan streams run by host worker threads */
    int n_host_streams;

    pl_buffers *hbufs; /* host buffers (pinned); device entries NULL */
    pl_buffers *dbufs; /* device buffers (cudaMalloc); host entries NULL */
    pl_stage_rt rt;
    bool rt_open;
    pl_gpu_ctx *gctx;

    cudaStream_t *streams;       /* [plan stream]: capture streams (graphs) or issue streams */
    cudaStream_t *launch;        /* [slot]: each slot's graph launches on its own stream */
    cudaGraphExec_t *exec;       /* [slot]: lean graphs (NULL when every batch is timed) */
    cudaGraphExec_t *exec_timed; /* [slot]: timed graphs (NULL when timing is off) */
    cudaEvent_t *ev_start;       /* [ring * nst + stage]: timing, recorded before the stage */
    cudaEvent_t *ev_end;         /* [ring * nst + stage]: timing and completion, after it (timed
                                  * graphs, plain launches) */
    cudaEvent_t *ev_sync;        /* [ring * nst + stage]: completion only, in lean graphs */
    cudaEvent_t *ev_cap;         /* [stage]: cross-stream edges inside a capture */
    cudaEvent_t *ev_join;        /* [plan stream] */
    cudaEvent_t ev_fork, ev_t0;
    bool created_t0, created_fork;
    uint32_t *marks; /* host-mapped [ring * nst]: 1 once the stage finished its batch */
    CUdeviceptr marks_dev;
    pl__write_value_fn write_value; /* cuStreamWriteValue32, NULL when unavailable */
    uint32_t *trigger;              /* host-mapped fault-injection word */
    void *trigger_dev;
    int fail_dev_stage; /* device stage with injected fault, -1 if none */
    int timing;         /* timing period: 0 every batch, -1 never, N: b % N == 0 and the
                         * last batch (graphs; plain launches time every batch unless -1) */
    bool *need_end;     /* [stage]: lean graphs record its end event */
    bool *need_sync;    /* [stage]: the host reads its end back on its own (see below) */

    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool sync_init;
    int64_t *done;     /* [stage]: batches < done finished, in order */
    int64_t launched;  /* batches whose device work is issued */
    int64_t mon_b;     /* the batch being read back (issuing thread only) */
    int mon_i;         /* its next device stage to read back, index into dev */
    int mon_conf;      /* stages before this index are confirmed finished (read back, or
                        * skipped before one that was) */
    int64_t monitored; /* batches whose device completion and timings are read */
    int64_t limit;     /* batches that will be issued (lowered on stop / launch error) */
    int64_t reported;  /* batches passed to cfg->on_batch */
    int running;       /* worker + monitor threads still running */
    bool abort;        /* stop everything now (host-stage error, thread failure) */
    bool failed;       /* an error is recorded (first wins); nothing more is issued */
    pl_status status;
    pl_error err; /* first error */
    bool has_late_err;
    pl_status late_status;
    pl_error late_err; /* an issue-side error, used when the monitor finds nothing better */

    pl_span *spans;                      /* [batch * nst + stage] */
    int64_t t_start;                     /* CLOCK_MONOTONIC at run start */
    int64_t t_first_launch, t_last_done; /* CLOCK_MONOTONIC: first issue, last read-back (bench) */
    int64_t t0_ns;                       /* run-clock time of ev_t0 */
} pl__gx;

static int64_t pl__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static const char *pl__sname(const pl__gx *gx, int st)
{
    return gx->spec->stages[st].name;
}

/* Is batch b launched with start and end events around every device stage? The sampled batches
 * sit in the middle of each period (b % N == N / 2), not at the run's first or last batch: those
 * are not overlapped with neighbours, so a timed graph there adds its whole cost to the run
 * (measured at 4 MiB: 64-100 us per timed first/last batch against about 20 us in the middle). A
 * run shorter than that times its middle batch. */
static bool pl__batch_timed(const pl__gx *gx, int64_t b)
{
    if (gx->timing < 0) return false;
    if (gx->timing == 0 || !gx->graphs) return true;
    int64_t half = gx->timing / 2;
    if (gx->batches <= half) return b == gx->batches / 2;
    return b % gx->timing == half;
}

/* The event that says stage st of batch b finished: the lean graphs record their own set
 * (without timing), so a wait or a read-back names the set that batch b's launch recorded. */
static cudaEvent_t pl__end_event(const pl__gx *gx, int64_t b, int st)
{
    size_t k = (size_t)(b % gx->ring) * (size_t)gx->nst + (size_t)st;
    return gx->graphs && !pl__batch_timed(gx, b) ? gx->ev_sync[k] : gx->ev_end[k];
}

bool pl_gpu_available(void)
{
    static int cached = -1; /* benign race: every thread computes the same answer */
    if (cached < 0) {
        int n = 0;
        cached = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
    }
    return cached == 1;
}

/* --- the device region and who waits for what ------------------------------------------------ */

static bool pl__is_dev_engine(pl_engine e)
{
    return e == PL_ENGINE_H2D || e == PL_ENGINE_COMPUTE || e == PL_ENGINE_D2H;
}

/* Classifies stages. The order edges are the plan's preds plus host stream order (a host thread
 * runs its stream's stages in order, so a host stage after another on its stream waits for it). A
 * host stage with a device stage before it and another after it in one batch would need the
 * graph split around it: not supported yet. */
static pl_status pl__classify(pl__gx *gx, pl_error *err)
{
    const pl_plan *p = gx->plan;
    int n = gx->nst;
    pl_status st = PL_OK;
    bool *anc = calloc((size_t)n, 1), *desc = calloc((size_t)n, 1);
    int *prev = malloc(sizeof(int) * (size_t)n);
    int *anc_dev = malloc(sizeof(int) * (size_t)n), *desc_dev = malloc(sizeof(int) * (size_t)n);
    gx->cls = calloc((size_t)n, sizeof(int));
    gx->dev = calloc((size_t)n, sizeof(int));
    gx->launch_deps = calloc((size_t)n, sizeof(int));
    if (!anc || !desc || !prev || !anc_dev || !desc_dev || !gx->cls || !gx->dev ||
        !gx->launch_deps) {
        st = pl_error_set(err, PL_ENOMEM, "error: out of memory planning the gpu run");
        goto done;
    }
    for (int i = 0; i < n; i++)
        prev[i] = anc_dev[i] = desc_dev[i] = -1;
    for (int k = 0; k < p->n_streams; k++)
        if (p->streams[k].engine == PL_ENGINE_HOST)
            for (int j = 1; j < p->streams[k].n_stages; j++)
                prev[p->streams[k].stages[j]] = p->streams[k].stages[j - 1];
    /* Forward: does a device stage precede s (anc), and which one (for the message)? */
    for (int oi = 0; oi < n; oi++) {
        int s = p->order[oi];
        const pl_plan_stage *ps = &p->stages[s];
        for (int j = 0; j <= ps->n_preds; j++) {
            int q = j < ps->n_preds ? ps->preds[j] : prev[s];
            if (q < 0) continue;
            if (pl__is_dev_engine(p->stages[q].engine)) {
                anc[s] = true;
                anc_dev[s] = q;
            } else if (anc[q]) {
                anc[s] = true;
                anc_dev[s] = anc_dev[q];
            }
        }
    }
    /* Backward: does a device stage follow s? */
    for (int oi = n - 1; oi >= 0; oi--) {
        int s = p->order[oi];
        const pl_plan_stage *ps = &p->stages[s];
        bool s_dev = pl__is_dev_engine(ps->engine);
        for (int j = 0; j <= ps->n_preds; j++) {
            int q = j < ps->n_preds ? ps->preds[j] : prev[s];
            if (q < 0) continue;
            if (s_dev) {
                desc[q] = true;
                desc_dev[q] = s;
            } else if (desc[s]) {
                desc[q] = true;
                desc_dev[q] = desc_dev[s];
            }
        }
    }
    for (int oi = 0; oi < n; oi++) {
        int s = p->order[oi];
        if (pl__is_dev_engine(p->stages[s].engine)) {
            gx->cls[s] = PL__DEV;
            gx->dev[gx->n_dev++] = s;
        } else if (anc[s] && desc[s]) {
            st = pl_error_at(err, PL_EINPUT, gx->spec->stages[s].pos,
                             "stage '%s' runs on the host between device stages '%s' and '%s' of "
                             "one batch; the gpu executor does not support a host stage inside "
                             "the device region yet; run it with --executor host, or move the "
                             "stage before the first or after the last device stage",
                             pl__sname(gx, s), pl__sname(gx, anc_dev[s]),
                             pl__sname(gx, desc_dev[s]));
            goto done;
        } else if (desc[s]) {
            gx->cls[s] = PL__PRE;
        } else if (anc[s]) {
            gx->cls[s] = PL__POST;
        } else {
            gx->cls[s] = PL__FREE;
        }
    }
    /* Host predecessors of device stages: batch b's device work waits for them. */
    for (int i = 0; i < gx->n_dev; i++) {
        const pl_plan_stage *ps = &p->stages[gx->dev[i]];
        for (int j = 0; j < ps->n_preds; j++) {
            int q = ps->preds[j];
            if (gx->cls[q] == PL__DEV) continue;
            bool seen = false;
            for (int k = 0; k < gx->n_launch_deps; k++)
                seen |= gx->launch_deps[k] == q;
            if (!seen) gx->launch_deps[gx->n_launch_deps++] = q;
        }
    }
done:
    free(anc);
    free(desc);
    free(prev);
    free(anc_dev);
    free(desc_dev);
    return st;
}

static pl_status pl__index_xdeps(pl__gx *gx, pl_error *err)
{
    const pl_plan *p = gx->plan;
    gx->xin = calloc((size_t)gx->nst, sizeof *gx->xin);
    gx->n_xin = calloc((size_t)gx->nst, sizeof *gx->n_xin);
    if (!gx->xin || !gx->n_xin) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    for (int i = 0; i < p->n_xdeps; i++) {
        int to = p->xdeps[i].to;
        pl__xd *grown = realloc(gx->xin[to], sizeof(pl__xd) * (size_t)(gx->n_xin[to] + 1));
        if (!grown) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
        gx->xin[to] = grown;
        grown[gx->n_xin[to]++] = (pl__xd){p->xdeps[i].from, p->xdeps[i].distance};
    }
    return PL_OK;
}

/* Which device stages' end events the lean graphs must record: only those the host or a later
 * launch waits for (host successors, cross-batch deps) and the leaves of the device region (their
 * completion implies the whole batch's); timed graphs and plain launches record all of them.
 * Which ones the host reads back one by one (need_sync), in every mode: only those a host stage
 * waits for (a host successor, or a cross-batch dep into a host stage) and the leaves; the
 * others are known done when the leaves are (every device stage has a path to a leaf, and its
 * end is recorded before its successors start). Each read-back is a driver call on the issuing
 * thread, on the path of the next launch: measured, small batches ran at 2.4x the bare replay
 * loop's time per batch while every stage was read back (docs/perf.md). */
static pl_status pl__mark_needed_ends(pl__gx *gx, pl_error *err)
{
    const pl_plan *p = gx->plan;
    bool *has_dev_succ = calloc((size_t)gx->nst, 1);
    gx->need_end = calloc((size_t)gx->nst, 1);
    gx->need_sync = calloc((size_t)gx->nst, 1);
    if (!has_dev_succ || !gx->need_end || !gx->need_sync) {
        free(has_dev_succ);
        return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    }
    for (int s = 0; s < gx->nst; s++) {
        const pl_plan_stage *ps = &p->stages[s];
        for (int j = 0; j < ps->n_preds; j++) {
            int q = ps->preds[j];
            if (gx->cls[s] == PL__DEV)
                has_dev_succ[q] = true;
            else
                gx->need_end[q] = gx->need_sync[q] = true;
        }
    }
    for (int i = 0; i < p->n_xdeps; i++) {
        gx->need_end[p->xdeps[i].from] = true;
        if (gx->cls[p->xdeps[i].to] != PL__DEV) gx->need_sync[p->xdeps[i].from] = true;
    }
    for (int s = 0; s < gx->nst; s++)
        if (gx->cls[s] == PL__DEV && !has_dev_succ[s]) gx->need_end[s] = gx->need_sync[s] = true;
    free(has_dev_succ);
    return PL_OK;
}

/* --- memory ------------------------------------------------------------------------------------
 */

static void *pl__pinned_alloc(void *user, const pl_buffer *b, uint64_t bytes, pl_error *err)
{
    (void)user;
    if (b->where != PL_HOST) return (void *)1; /* placeholder, replaced by NULL below */
    void *p = NULL;
    if (PL_CUDA(cudaHostAlloc(&p, bytes, cudaHostAllocDefault), NULL, -1, err) != PL_OK) {
        pl_error_prefix(err, "buffer '%s' (%llu bytes of pinned host memory)", b->name,
                        (unsigned long long)bytes);
        return NULL;
    }
    return p;
}

static void pl__pinned_free(void *user, const pl_buffer *b, void *p)
{
    (void)user;
    if (b->where == PL_HOST && p) cudaFreeHost(p);
}

static void *pl__device_alloc(void *user, const pl_buffer *b, uint64_t bytes, pl_error *err)
{
    (void)user;
    if (b->where != PL_DEVICE) return (void *)1;
    void *p = NULL;
    if (PL_CUDA(cudaMalloc(&p, bytes), NULL, -1, err) != PL_OK) {
        pl_error_prefix(err, "buffer '%s' (%llu bytes of device memory)", b->name,
                        (unsigned long long)bytes);
        return NULL;
    }
    return p;
}

static void pl__device_free(void *user, const pl_buffer *b, void *p)
{
    (void)user;
    if (b->where == PL_DEVICE && p) cudaFree(p);
}

/* Allocates every buffer once for the whole run (captured copy nodes bake addresses in, so
 * buffers never move) and writes their initial contents; pageable memory is used only here, for
 * the staging copy of device buffers' initial contents. */
static pl_status pl__alloc_buffers(pl__gx *gx, pl_error *err)
{
    const pl_spec *spec = gx->spec;
    pl_allocator ha = {pl__pinned_alloc, pl__pinned_free, NULL};
    pl_allocator da = {pl__device_alloc, pl__device_free, NULL};
    pl_status st = pl_buffers_new(spec, gx->depth, &ha, false, 0, &gx->hbufs, err);
    if (st != PL_OK) return st;
    st = pl_buffers_new(spec, gx->depth, &da, false, 0, &gx->dbufs, err);
    if (st != PL_OK) return st;
    /* The allocators return a placeholder for buffers of the other side: make those NULL, so
     * stages see NULL for device buffers (pl_stage_ctx contract) and frees skip them. */
    for (int s = 0; s < gx->depth; s++)
        for (int i = 0; i < gx->nbuf; i++) {
            size_t k = (size_t)s * (size_t)gx->nbuf + (size_t)i;
            if (spec->buffers[i].where == PL_HOST)
                gx->dbufs->ptr[k] = NULL;
            else
                gx->hbufs->ptr[k] = NULL;
        }
    void *staging = NULL;
    uint64_t staging_bytes = 0;
    for (int i = 0; i < gx->nbuf && st == PL_OK; i++) {
        const pl_buffer *b = &spec->buffers[i];
        int slots = b->persistent ? 1 : gx->depth;
        if (b->where == PL_HOST) {
            for (int s = 0; s < slots && st == PL_OK; s++)
                st = pl_buffer_init_contents(spec, b, spec->run.seed,
                                             gx->hbufs->ptr[(size_t)s * gx->nbuf + i], err);
            continue;
        }
        if (b->init == PL_INIT_NONE || b->init == PL_INIT_ZEROS) {
            for (int s = 0; s < slots && st == PL_OK; s++)
                st = PL_CUDA(cudaMemset(gx->dbufs->ptr[(size_t)s * gx->nbuf + i], 0, b->bytes),
                             NULL, -1, err);
            continue;
        }
        if (b->bytes > staging_bytes) {
            free(staging);
            staging = malloc(b->bytes);
            staging_bytes = staging ? b->bytes : 0;
            if (!staging) {
                st = pl_error_set(err, PL_ENOMEM, "error: out of memory initialising buffer '%s'",
                                  b->name);
                break;
            }
        }
        st = pl_buffer_init_contents(spec, b, spec->run.seed, staging, err);
        for (int s = 0; s < slots && st == PL_OK; s++)
            st = PL_CUDA(cudaMemcpy(gx->dbufs->ptr[(size_t)s * gx->nbuf + i], staging, b->bytes,
                                    cudaMemcpyHostToDevice),
                         NULL, -1, err);
    }
    free(staging);
    if (st == PL_OK) st = PL_CUDA(cudaDeviceSynchronize(), NULL, -1, err); /* setup only */
    return st;
}

/* --- CUDA objects --------------------------------------------------------------------------------
 */

static pl_status pl__create_objects(pl__gx *gx, pl_error *err)
{
    const pl_plan *p = gx->plan;
    size_t nev = (size_t)gx->ring * (size_t)gx->nst;
    gx->streams = calloc((size_t)p->n_streams, sizeof *gx->streams);
    gx->launch = calloc((size_t)gx->depth, sizeof *gx->launch);
    gx->exec = calloc((size_t)gx->ring, sizeof *gx->exec);
    gx->exec_timed = calloc((size_t)gx->ring, sizeof *gx->exec_timed);
    gx->ev_start = calloc(nev, sizeof *gx->ev_start);
    gx->ev_end = calloc(nev, sizeof *gx->ev_end);
    gx->ev_sync = calloc(nev, sizeof *gx->ev_sync);
    gx->ev_cap = calloc((size_t)gx->nst, sizeof *gx->ev_cap);
    gx->ev_join = calloc((size_t)p->n_streams, sizeof *gx->ev_join);
    if (!gx->streams || !gx->launch || !gx->exec || !gx->exec_timed || !gx->ev_start ||
        !gx->ev_end || !gx->ev_sync || !gx->ev_cap || !gx->ev_join)
        return pl_error_set(err, PL_ENOMEM, "error: out of memory creating CUDA objects");
    for (int k = 0; k < p->n_streams; k++) {
        if (!pl__is_dev_engine(p->streams[k].engine)) continue;
        PL_CHECK(PL_CUDA(cudaStreamCreateWithFlags(&gx->streams[k], cudaStreamNonBlocking), NULL,
                         -1, err));
        PL_CHECK(PL_CUDA(cudaEventCreateWithFlags(&gx->ev_join[k], cudaEventDisableTiming), NULL,
                         -1, err));
    }
    for (int s = 0; s < gx->depth; s++)
        PL_CHECK(PL_CUDA(cudaStreamCreateWithFlags(&gx->launch[s], cudaStreamNonBlocking), NULL, -1,
                         err));
    for (int i = 0; i < gx->n_dev; i++) {
        int st = gx->dev[i];
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
    PL_CHECK(PL_CUDA(cudaEventCreate(&gx->ev_t0), NULL, -1, err));
    gx->created_t0 = true;

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
    return PL_OK;
}

/* Per-stage completion marks, written by the stream front end (cuStreamWriteValue32) after each
 * device stage. After a kernel fault every CUDA call returns the sticky error, so events cannot
 * say which stage of which batch was running; the marks can. Off unless PIPECTL_FAULT_MARKS=1:
 * measured on the H200 (docs/perf.md), memory-operation nodes in the per-slot graphs stopped
 * the slots' copies from overlapping (47% of the bound instead of 83% at depth 3 and 4, 64 MiB
 * batches) and cost ~2 us per stage on small batches. Without them the fault is pinned on the
 * first kernel not seen to finish (pl__locate_fault). */
static void pl__probe_marks(pl__gx *gx)
{
    const char *env = getenv("PIPECTL_FAULT_MARKS");
    if (!env || strcmp(env, "1") != 0) return;
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuStreamWriteValue32", &fn, 12000, cudaEnableDefault,
                                         &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess || !fn)
        return;
    pl__write_value_fn wv = (pl__write_value_fn)fn;
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

/* Records device stage st of one batch on stream s: the work, and its events. `timed`: a start
 * and an end event with timestamps around it (timed graphs, plain launches unless timing is
 * off); otherwise the end event only where the host or a later launch waits for it (lean graphs;
 * plain launches always record it, their waits use it). */
static pl_status pl__record_stage(pl__gx *gx, int st, int slot, int r, int64_t batch,
                                  cudaStream_t s, bool capturing, bool timed, pl_error *err)
{
    const pl_spec *spec = gx->spec;
    const pl_stage *stg = &spec->stages[st];
    const char *name = stg->name;
    size_t k = (size_t)r * gx->nst + st;
    /* Inside a capture, External makes these real event-record nodes that the host can wait on
     * (and that keep their timestamps); outside, it is a plain record. */
    unsigned fl = capturing ? cudaEventRecordExternal : cudaEventRecordDefault;
    if (timed)
        PL_CHECK(PL_CUDA(cudaEventRecordWithFlags(gx->ev_start[k], s, fl), name, batch, err));
    void *const *hb = pl_buffers_slot(gx->hbufs, slot);
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
    if (!stg->kind->record)
        return pl_error_set(err, PL_ERUNTIME,
                            "stage '%s': kind %s has no GPU recording (internal error)", name,
                            stg->kind->name);
    PL_CHECK(stg->kind->record(&dc, err));
    if (st == gx->fail_dev_stage &&
        (capturing ? r == (int)(gx->cfg->fail_batch % gx->ring) : batch == gx->cfg->fail_batch))
        PL_CHECK(PL_CUDA(pl_exec_launch_fault(gx->trigger_dev, (void *)s), name, batch, err));
    if (timed || !capturing || gx->need_end[st]) {
        cudaEvent_t end = capturing && !timed ? gx->ev_sync[k] : gx->ev_end[k];
        PL_CHECK(PL_CUDA(cudaEventRecordWithFlags(end, s, fl), name, batch, err));
    }
    if (gx->write_value) {
        CUresult cr = gx->write_value((CUstream)s, gx->marks_dev + sizeof(uint32_t) * k, 1, 0);
        if (cr != CUDA_SUCCESS)
            return pl_error_set(err, PL_ECUDA,
                                "stage '%s': cuStreamWriteValue32 failed (CUresult %d); set "
                                "PIPECTL_FAULT_MARKS=0 to run without fault marks",
                                name, (int)cr);
    }
    return PL_OK;
}

/* Stream of stage st, and the device stages its stream must wait for inside the batch. */
static pl_status pl__record_waits(pl__gx *gx, int st, cudaStream_t s, int r, bool capturing,
                                  int64_t batch, pl_error *err)
{
    const pl_plan_stage *ps = &gx->plan->stages[st];
    for (int j = 0; j < ps->n_waits; j++) {
        int src = gx->plan->events[ps->waits[j]].src;
        if (gx->cls[src] != PL__DEV) continue; /* host stages finished before the launch */
        cudaEvent_t e = capturing ? gx->ev_cap[src] : gx->ev_end[(size_t)r * gx->nst + src];
        PL_CHECK(PL_CUDA(cudaStreamWaitEvent(s, e, 0), pl__sname(gx, st), batch, err));
    }
    return PL_OK;
}

static bool pl__stage_has_event(const pl__gx *gx, int st)
{
    return gx->plan->stages[st].event >= 0;
}

/* Captures the graph of ring entry r (batches b with b % ring == r: buffers of slot r % depth,
 * event set r, launched on the slot's stream). ThreadLocal capture mode: while this thread
 * captures, other threads of the process (a bench harness, an embedding application, CUDA
 * libraries' helper threads) may make CUDA calls that are illegal during a Global capture
 * (cudaMalloc, synchronous copies, event queries); ThreadLocal only forbids them on the
 * capturing thread, which makes none. Relaxed would also allow them here, but would hide our own
 * mistakes. */
static pl_status pl__capture_slot(pl__gx *gx, int r, bool timed, cudaGraphExec_t *exec,
                                  pl_error *err)
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
    for (int i = 0; i < gx->n_dev; i++) {
        cur = gx->dev[i];
        cudaStream_t s = gx->streams[p->stages[cur].stream];
        PL_CHECK_GOTO(pl__record_waits(gx, cur, s, r, true, -1, err), st, fail);
        PL_CHECK_GOTO(pl__record_stage(gx, cur, slot, r, -1, s, true, timed, err), st, fail);
        if (pl__stage_has_event(gx, cur))
            PL_CHECK_GOTO(PL_CUDA(cudaEventRecord(gx->ev_cap[cur], s), pl__sname(gx, cur), -1, err),
                          st, fail);
        enum cudaStreamCaptureStatus cs;
        PL_CHECK_GOTO(PL_CUDA(cudaStreamIsCapturing(origin, &cs), pl__sname(gx, cur), -1, err), st,
                      fail);
        if (cs != cudaStreamCaptureStatusActive) {
            st = pl_error_set(err, PL_ECUDA,
                              "stage '%s': recording it broke the CUDA graph capture of slot %d "
                              "(capture status %d); run with --no-graph to see the failing call",
                              pl__sname(gx, cur), slot, (int)cs);
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
    if (st != PL_OK) return pl_error_prefix(err, "capturing the graph of slot %d", slot);
    st = PL_CUDA(cudaGraphInstantiate(exec, graph, 0), NULL, -1, err);
    cudaGraphDestroy(graph);
    if (st != PL_OK) return pl_error_prefix(err, "instantiating the graph of slot %d", slot);
    return PL_CUDA(cudaGraphUpload(*exec, origin), NULL, -1, err);
fail:
    if (cur >= 0 && err && strstr(err->msg, "stage '") != err->msg)
        pl_error_prefix(err, "stage '%s' (capturing slot %d)", pl__sname(gx, cur), slot);
    cudaStreamEndCapture(origin, &graph);
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    return st;
}

/* --no-graph: batch b issued on the shared streams, plain launches. */
static pl_status pl__issue_plain(pl__gx *gx, int64_t b, pl_error *err)
{
    const pl_plan *p = gx->plan;
    int slot = (int)(b % gx->depth), r = (int)(b % gx->ring);
    for (int i = 0; i < gx->n_dev; i++) {
        int st = gx->dev[i];
        cudaStream_t s = gx->streams[p->stages[st].stream];
        /* Cross-batch deps between device stages: the streams are shared by all batches, so
         * every distance needs its wait (the event ring is longer than any distance). */
        for (int j = 0; j < gx->n_xin[st]; j++) {
            const pl__xd *x = &gx->xin[st][j];
            if (gx->cls[x->from] != PL__DEV || b - x->distance < 0) continue;
            size_t k = (size_t)((b - x->distance) % gx->ring) * gx->nst + x->from;
            PL_CHECK(PL_CUDA(cudaStreamWaitEvent(s, gx->ev_end[k], 0), pl__sname(gx, st), b, err));
        }
        PL_CHECK(pl__record_waits(gx, st, s, r, false, b, err));
        PL_CHECK(pl__record_stage(gx, st, slot, r, b, s, false, gx->timing >= 0, err));
    }
    return PL_OK;
}

static pl_status pl__launch_graph(pl__gx *gx, int64_t b, pl_error *err)
{
    int slot = (int)(b % gx->depth);
    cudaStream_t ls = gx->launch[slot];
    /* Cross-batch deps between device stages closer than a slot cycle (persistent buffers): the
     * whole graph waits for that stage of the earlier batch (its event's latest record is that
     * batch's: later batches of that slot are not launched yet). Distance == depth is the same
     * slot, ordered by its launch stream. */
    for (int i = 0; i < gx->n_dev; i++) {
        int st = gx->dev[i];
        for (int j = 0; j < gx->n_xin[st]; j++) {
            const pl__xd *x = &gx->xin[st][j];
            if (gx->cls[x->from] != PL__DEV || b - x->distance < 0 || x->distance % gx->depth == 0)
                continue;
            cudaEvent_t e = pl__end_event(gx, b - x->distance, x->from);
            PL_CHECK(PL_CUDA(cudaStreamWaitEvent(ls, e, 0), pl__sname(gx, st), b, err));
        }
    }
    int r = (int)(b % gx->ring);
    cudaGraphExec_t exec = pl__batch_timed(gx, b) ? gx->exec_timed[r] : gx->exec[r];
    pl_nvtx_push("launch", b);
    pl_status st = PL_CUDA(cudaGraphLaunch(exec, ls), NULL, b, err);
    pl_nvtx_pop();
    return st;
}

/* --- threads ---------------------------------------------------------------------------------- */

static void pl__fail(pl__gx *gx, pl_status st, const pl_error *e)
{
    /* Caller holds mu. First error wins. */
    if (!gx->failed) {
        gx->status = st;
        gx->err = *e;
    }
    gx->failed = true;
    gx->abort = true;
    pthread_cond_broadcast(&gx->cv);
}

/* A device error at batch `upto`: record it, but let host stages finish the batches before
 * `upto` (their device work is done), so their outputs are written. Caller holds mu. */
static void pl__fail_from(pl__gx *gx, int64_t upto, pl_status st, const pl_error *e)
{
    if (!gx->failed) {
        gx->status = st;
        gx->err = *e;
    }
    gx->failed = true;
    if (upto < gx->limit) gx->limit = upto;
    pthread_cond_broadcast(&gx->cv);
}

static bool pl__xdeps_ready(const pl__gx *gx, int st, int64_t b)
{
    for (int j = 0; j < gx->n_xin[st]; j++) {
        const pl__xd *x = &gx->xin[st][j];
        if (b - x->distance >= 0 && gx->done[x->from] < b - x->distance + 1) return false;
    }
    return true;
}

static bool pl__host_ready(const pl__gx *gx, int st, int64_t b)
{
    const pl_plan_stage *ps = &gx->plan->stages[st];
    for (int j = 0; j < ps->n_preds; j++)
        if (gx->done[ps->preds[j]] < b + 1) return false;
    return pl__xdeps_ready(gx, st, b);
}

typedef struct pl__worker {
    pl__gx *gx;
    int stream; /* plan stream */
    int worker; /* 0..workers-1 */
    pthread_t th;
    bool started;
} pl__worker;

static void *pl__host_thread(void *arg)
{
    pl__worker *w = arg;
    pl__gx *gx = w->gx;
    const pl_stream *ps = &gx->plan->streams[w->stream];
    pthread_mutex_lock(&gx->mu);
    for (int64_t b = 0;; b++) {
        for (int j = 0; j < ps->n_stages; j++) {
            int st = ps->stages[j];
            while (!gx->abort && b < gx->limit && !pl__host_ready(gx, st, b))
                pthread_cond_wait(&gx->cv, &gx->mu);
            if (gx->abort || b >= gx->limit) goto out;
            pthread_mutex_unlock(&gx->mu);
            pl_error e;
            int64_t t0 = pl__now_ns() - gx->t_start;
            pl_status s =
                pl_stage_rt_run_host(&gx->rt, gx->cfg, st, b, w->worker,
                                     pl_buffers_slot(gx->hbufs, (int)(b % gx->depth)), &e);
            int64_t t1 = pl__now_ns() - gx->t_start;
            pthread_mutex_lock(&gx->mu);
            if (s != PL_OK) {
                pl__fail(gx, s, &e);
                goto out;
            }
            gx->spans[b * gx->nst + st] = (pl_span){t0, t1};
            gx->done[st] = b + 1;
            pthread_cond_broadcast(&gx->cv);
        }
    }
out:
    gx->running--;
    pthread_cond_broadcast(&gx->cv);
    pthread_mutex_unlock(&gx->mu);
    return NULL;
}

/* After a fault: which stage of which batch was running? With fault marks, a stage is a
 * candidate when its mark is still 0 while every device predecessor in its batch has its mark.
 * Without them (the default: see pl__probe_marks), the candidates are the device stages not yet
 * seen to finish: from stage index `mi` (in plan order) of batch b on. Compute stages first
 * (copies between valid allocations do not fault), then the earliest batch. */
static void pl__locate_fault(pl__gx *gx, int64_t b, int mi, int64_t launched, cudaError_t ce,
                             pl_error *e)
{
    const volatile uint32_t *marks = gx->marks;
    int best_st = -1, other_st = -1;
    int64_t best_b = -1, other_b = -1;
    for (int64_t bb = b; bb < launched && bb < b + gx->ring; bb++) {
        size_t base = (size_t)(bb % gx->ring) * gx->nst;
        for (int i = bb == b ? mi : 0; i < gx->n_dev; i++) {
            int st = gx->dev[i];
            const pl_plan_stage *ps = &gx->plan->stages[st];
            if (gx->write_value) {
                if (marks[base + st]) continue;
                bool ready = true;
                for (int j = 0; j < ps->n_preds; j++)
                    if (gx->cls[ps->preds[j]] == PL__DEV && !marks[base + ps->preds[j]])
                        ready = false;
                if (!ready) continue;
            }
            bool compute = ps->engine == PL_ENGINE_COMPUTE;
            if (best_st < 0 || (compute && gx->plan->stages[best_st].engine != PL_ENGINE_COMPUTE)) {
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
    char also[PL_MAX_NAME + 96] = "";
    if (other_st >= 0)
        snprintf(also, sizeof also, " ('%s' of batch %lld was also running)",
                 pl__sname(gx, other_st), (long long)other_b);
    const char *how = gx->write_value ? ""
                                      : " (the first kernel not seen to finish; "
                                        "PIPECTL_FAULT_MARKS=1 makes every stage report its "
                                        "completion, to name the stage for certain)";
    if (best_st >= 0)
        pl_error_set(e, PL_ECUDA,
                     "stage '%s', batch %lld: the device faulted: %s (%s)%s%s; batches before "
                     "%lld completed and their outputs are kept; run the pipeline under "
                     "compute-sanitizer, or with --executor host, to find the bad access",
                     pl__sname(gx, best_st), (long long)best_b, cudaGetErrorString(ce),
                     cudaGetErrorName(ce), how, also, (long long)b);
    else
        pl_error_set(e, PL_ECUDA,
                     "batch %lld: the device faulted: %s (%s); batches before %lld completed and "
                     "their outputs are kept",
                     (long long)b, cudaGetErrorString(ce), cudaGetErrorName(ce), (long long)b);
}

/* Reading back batch b failed at stage dev[mi]. After a fault the context is lost and every call
 * returns the error, also for work that had finished; the marks (host memory), when on, still
 * say which batches completed: those are handed to the host stages (sinks write them). The rest
 * is abandoned, and the error names the faulting stage and batch. Caller does not hold mu. */
static void pl__device_failed(pl__gx *gx, int64_t b, int mi, int conf, cudaError_t ce)
{
    pl_error e;
    pthread_mutex_lock(&gx->mu);
    int64_t launched = gx->launched, ok = b;
    pthread_mutex_unlock(&gx->mu);
    bool fault = ce == cudaErrorIllegalAddress || ce == cudaErrorLaunchFailure ||
                 ce == cudaErrorIllegalInstruction || ce == cudaErrorMisalignedAddress ||
                 ce == cudaErrorHardwareStackError || ce == cudaErrorAssert;
    if (!fault) {
        pl_cuda_check((int)ce, "cudaEventQuery", pl__sname(gx, gx->dev[mi]), b, &e);
        pthread_mutex_lock(&gx->mu);
        pl__fail_from(gx, b, PL_ECUDA, &e);
        pthread_mutex_unlock(&gx->mu);
        return;
    }
    const volatile uint32_t *marks = gx->marks;
    for (; gx->write_value && ok < launched; ok++) {
        size_t base = (size_t)(ok % gx->ring) * gx->nst;
        bool all = true;
        for (int i = 0; i < gx->n_dev; i++)
            all = all && marks[base + gx->dev[i]];
        if (!all) break;
        pthread_mutex_lock(&gx->mu);
        for (int i = 0; i < gx->n_dev; i++)
            gx->done[gx->dev[i]] = ok + 1;
        pthread_cond_broadcast(&gx->cv);
        pthread_mutex_unlock(&gx->mu);
    }
    pl__locate_fault(gx, ok, ok == b ? conf : 0, launched, ce, &e);
    pthread_mutex_lock(&gx->mu);
    pl__fail_from(gx, ok, PL_ECUDA, &e);
    pthread_mutex_unlock(&gx->mu);
}

/* Reads back batch gx->mon_b: its stages' end events in plan order from gx->mon_i, each finished
 * stage released to the host stages at once. `block`: wait for the events (cudaEventSynchronize)
 * instead of polling them (cudaEventQuery). Returns true when something advanced. Caller does not
 * hold mu. Runs on the issuing thread: no hand-off between threads on the launch path. */
static bool pl__monitor_step(pl__gx *gx, bool block)
{
    int64_t b = gx->mon_b;
    size_t base = (size_t)(b % gx->ring) * gx->nst;
    bool advanced = false;
    while (gx->mon_i < gx->n_dev) {
        int st = gx->dev[gx->mon_i];
        if (!gx->need_sync[st]) { /* implied by a later stage's end */
            gx->mon_i++;
            continue;
        }
        cudaEvent_t ev = pl__end_event(gx, b, st);
        cudaError_t ce = block ? cudaEventSynchronize(ev) : cudaEventQuery(ev);
        if (ce == cudaErrorNotReady) return advanced;
        if (ce != cudaSuccess) {
            pl__device_failed(gx, b, gx->mon_i, gx->mon_conf, ce);
            return true;
        }
        pthread_mutex_lock(&gx->mu);
        gx->done[st] = b + 1;
        pthread_cond_broadcast(&gx->cv);
        pthread_mutex_unlock(&gx->mu);
        gx->mon_i++;
        gx->mon_conf = gx->mon_i;
        advanced = true;
    }
    gx->t_last_done = pl__now_ns();
    /* Spans on the run clock: elapsed time from ev_t0, whose run-clock time is known. Unsampled
     * batches keep {0, 0}. */
    for (int i = 0; pl__batch_timed(gx, b) && i < gx->n_dev; i++) {
        int st = gx->dev[i];
        float a = 0, z = 0;
        if (cudaEventElapsedTime(&a, gx->ev_t0, gx->ev_start[base + st]) != cudaSuccess ||
            cudaEventElapsedTime(&z, gx->ev_t0, gx->ev_end[base + st]) != cudaSuccess) {
            /* No timestamps (should not happen: the events are created with timing): fall back
             * to when the host saw the stage complete. */
            cudaGetLastError();
            a = z = (float)((double)(pl__now_ns() - gx->t_start - gx->t0_ns) / 1e6);
        }
        gx->spans[b * gx->nst + st] =
            (pl_span){gx->t0_ns + (int64_t)(a * 1e6), gx->t0_ns + (int64_t)(z * 1e6)};
    }
    pthread_mutex_lock(&gx->mu);
    for (int i = 0; i < gx->n_dev; i++)
        gx->done[gx->dev[i]] = b + 1;
    gx->monitored = b + 1;
    pthread_cond_broadcast(&gx->cv);
    pthread_mutex_unlock(&gx->mu);
    gx->mon_b = b + 1;
    gx->mon_i = gx->mon_conf = 0;
    return true;
}

/* Host-side conditions for launching batch b: the host stages before the device region done,
 * host stages of earlier batches that device stages wait for (cross-batch deps) done. */
static bool pl__launch_host_ready(const pl__gx *gx, int64_t b)
{
    for (int i = 0; i < gx->n_launch_deps; i++)
        if (gx->done[gx->launch_deps[i]] < b + 1) return false;
    for (int i = 0; i < gx->n_dev; i++) {
        int st = gx->dev[i];
        for (int j = 0; j < gx->n_xin[st]; j++) {
            const pl__xd *x = &gx->xin[st][j];
            if (gx->cls[x->from] == PL__DEV) continue; /* ordered on the device */
            if (b - x->distance >= 0 && gx->done[x->from] < b - x->distance + 1) return false;
        }
    }
    return true;
}

/* The ring entry's events and marks are reused: its previous batch must be read back (with
 * graphs that is batch b - 2 x depth: batch b - depth, same slot, may still run; the slot's
 * stream orders b after it, and the host-side conditions on the slot's host buffers are
 * pl__launch_host_ready's cross-batch deps, not this). */
static bool pl__slot_free(const pl__gx *gx, int64_t b)
{
    return gx->monitored >= b - gx->ring + 1;
}

static int64_t pl__batches_done(const pl__gx *gx)
{
    int64_t m = gx->batches;
    for (int s = 0; s < gx->nst; s++)
        if (gx->done[s] < m) m = gx->done[s];
    return m;
}

static void pl__report_progress(pl__gx *gx)
{
    /* Caller holds mu; the callback runs without it. */
    int64_t d = pl__batches_done(gx);
    if (!gx->cfg->on_batch || d <= gx->reported) return;
    int64_t from = gx->reported;
    gx->reported = d;
    pthread_mutex_unlock(&gx->mu);
    for (int64_t k = from + 1; k <= d; k++)
        gx->cfg->on_batch(gx->cfg->user, k, gx->batches);
    pthread_mutex_lock(&gx->mu);
}

static bool pl__stopped(const pl__gx *gx)
{
    return gx->cfg->stop && *gx->cfg->stop;
}

static void pl__timed_wait_us(pl__gx *gx, long us)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += us * 1000L;
    while (ts.tv_nsec >= 1000000000L) {
        ts.tv_nsec -= 1000000000L;
        ts.tv_sec++;
    }
    pthread_cond_timedwait(&gx->cv, &gx->mu, &ts);
}

static pl_status pl__issue(pl__gx *gx, int64_t b, pl_error *e)
{
    size_t base = (size_t)(b % gx->ring) * gx->nst;
    /* The previous batch of this ring entry is read back (slot_free): reset its marks. */
    for (int i = 0; i < gx->n_dev; i++)
        gx->marks[base + gx->dev[i]] = 0;
    /* Fault injection (tests): the trigger is read by the fault node of the failing ring entry's
     * graphs; rewrite it only when that entry is relaunched (its previous batch is read back).
     * With plain launches the fault kernel is issued for the failing batch only: the trigger
     * stays 1. */
    if (gx->fail_dev_stage >= 0 && (!gx->graphs || b % gx->ring == gx->cfg->fail_batch % gx->ring))
        *(volatile uint32_t *)gx->trigger = !gx->graphs || b == gx->cfg->fail_batch;
    return gx->graphs ? pl__launch_graph(gx, b, e) : pl__issue_plain(gx, b, e);
}

/* The issuing loop, on the calling thread: launches batches as soon as their host inputs are
 * ready and their slot is free, and reads back finished batches itself (events polled, or
 * waited for when nothing else can happen), so a finished batch frees its slot for the next
 * launch without a hand-off between threads. Host stages run on their worker threads and learn
 * of device completions through done[] and the condition variable. */
static void pl__issue_loop(pl__gx *gx)
{
    int64_t b = 0;
    pthread_mutex_lock(&gx->mu);
    for (;;) {
        if (pl__stopped(gx) && gx->limit > gx->launched) {
            gx->limit = gx->launched; /* launched batches still finish: outputs kept */
            pthread_cond_broadcast(&gx->cv);
        }
        bool can_issue = !gx->failed && b < gx->limit;
        bool host_ok = can_issue && pl__launch_host_ready(gx, b);
        if (host_ok && pl__slot_free(gx, b)) {
            pthread_mutex_unlock(&gx->mu);
            pl_error e;
            if (b == 0) gx->t_first_launch = pl__now_ns();
            pl_status s = pl__issue(gx, b, &e);
            pthread_mutex_lock(&gx->mu);
            if (s != PL_OK) {
                /* A sticky device error shows here too; reading back the batches already
                 * launched can say which stage faulted: prefer that message. */
                gx->has_late_err = true;
                gx->late_status = s;
                gx->late_err = e;
                gx->limit = gx->launched;
            } else {
                gx->launched = ++b;
            }
            pthread_cond_broadcast(&gx->cv);
            continue;
        }
        bool in_flight = !gx->failed && !gx->abort && gx->mon_b < gx->launched;
        if (in_flight) {
            /* Block on the device only when no host stage can change what we may launch. */
            bool block = !can_issue || host_ok;
            pthread_mutex_unlock(&gx->mu);
            bool adv = pl__monitor_step(gx, block);
            pthread_mutex_lock(&gx->mu);
            pl__report_progress(gx);
            if (!adv) pl__timed_wait_us(gx, 20);
            continue;
        }
        if (!can_issue && gx->running == 0) break;
        pl__timed_wait_us(gx, can_issue ? 20000 : 5000); /* host stages; polls cfg->stop */
        pl__report_progress(gx);
    }
    pl__report_progress(gx);
    pthread_mutex_unlock(&gx->mu);
}

/* --- setup and teardown ------------------------------------------------------------------------
 */

static pl_status pl__setup(pl__gx *gx, const pl_plan *plan, const pl_run_cfg *cfg, bool graphs,
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
    gx->graphs = graphs;
    /* Plain launches use a ring of event sets one longer than any cross-batch distance, so a
     * wait always names the exact batch. Graphs bake their events: two graphs per slot, each
     * with its own event set (ring = 2 x depth), let batch b + depth be launched behind batch b
     * on the slot's stream before the host has read b back (pl__slot_free), so the device
     * starts it without waiting for a host wake-up and a launch; buffers stay per slot
     * (b % depth). PIPECTL_GPU_RUNAHEAD=0: one graph per slot (ring = depth), the earlier
     * behaviour, for comparison. */
    const char *ahead_env = getenv("PIPECTL_GPU_RUNAHEAD");
    int per_slot = ahead_env && strcmp(ahead_env, "0") == 0 ? 1 : 2;
    gx->ring = graphs ? gx->depth * per_slot : gx->depth + 1;
    gx->device = plan->spec->run.device;
    gx->limit = gx->batches;
    gx->fail_dev_stage = -1;
    gx->t_start = pl__now_ns();
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
    PL_CHECK(pl__classify(gx, err));
    PL_CHECK(pl__index_xdeps(gx, err));
    /* PIPECTL_GPU_SPANS=0 (the earlier switch) still means: no device timing. */
    const char *spans_env = getenv("PIPECTL_GPU_SPANS");
    gx->timing = cfg ? cfg->timing_period : 16;
    if (gx->timing < -1) gx->timing = -1;
    if (spans_env && strcmp(spans_env, "0") == 0) gx->timing = -1;
    PL_CHECK(pl__mark_needed_ends(gx, err));
    if (cfg && cfg->fail_stage >= 0 && cfg->fail_stage < gx->nst && cfg->fail_batch >= 0 &&
        gx->cls[cfg->fail_stage] == PL__DEV)
        gx->fail_dev_stage = cfg->fail_stage;
    gx->done = calloc((size_t)gx->nst, sizeof *gx->done);
    gx->host_streams = calloc((size_t)plan->n_streams + 1, sizeof(int));
    if (!gx->done || !gx->host_streams) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    for (int k = 0; k < plan->n_streams; k++)
        if (plan->streams[k].engine == PL_ENGINE_HOST) gx->host_streams[gx->n_host_streams++] = k;
    PL_CHECK(pl__alloc_buffers(gx, err));
    PL_CHECK(pl_gpu_ctx_new(gx->device, &gx->gctx, err));
    gx->rt.env.spec = plan->spec; /* what record hooks see when stages are not opened (bench) */
    gx->rt.env.gpu = gx->gctx;
    gx->rt.env.on_gpu = true;
    PL_CHECK(pl__create_objects(gx, err));
    pl__probe_marks(gx);
    if (open_stages) {
        int workers = cfg->workers > 0 ? cfg->workers : pl_default_workers(plan);
        if (workers < gx->n_host_streams) workers = gx->n_host_streams;
        PL_CHECK(pl_stage_rt_open(&gx->rt, plan, workers, gx->gctx, err));
        gx->rt_open = true;
    }
    /* Lean graphs unless every batch is timed; timed graphs unless timing is off. */
    for (int r = 0; graphs && r < gx->ring; r++) {
        if (gx->timing != 0) PL_CHECK(pl__capture_slot(gx, r, false, &gx->exec[r], err));
        if (gx->timing >= 0) PL_CHECK(pl__capture_slot(gx, r, true, &gx->exec_timed[r], err));
    }
    return PL_CUDA(cudaDeviceSynchronize(), NULL, -1, err); /* uploads done before the clock */
}

static void pl__teardown(pl__gx *gx)
{
    /* Errors are ignored here: after a device fault every call fails, and nothing is left to do
     * about it. The object that created a resource frees it, in reverse order. */
    const pl_plan *p = gx->plan;
    if (gx->streams || gx->launch) cudaDeviceSynchronize();
    for (int s = 0; gx->exec && s < gx->ring; s++)
        if (gx->exec[s]) cudaGraphExecDestroy(gx->exec[s]);
    for (int s = 0; gx->exec_timed && s < gx->ring; s++)
        if (gx->exec_timed[s]) cudaGraphExecDestroy(gx->exec_timed[s]);
    if (gx->marks) cudaFreeHost(gx->marks);
    if (gx->created_t0) cudaEventDestroy(gx->ev_t0);
    if (gx->created_fork) cudaEventDestroy(gx->ev_fork);
    size_t nev = (size_t)gx->ring * (size_t)gx->nst;
    for (size_t k = 0; k < nev; k++) {
        if (gx->ev_start && gx->ev_start[k]) cudaEventDestroy(gx->ev_start[k]);
        if (gx->ev_end && gx->ev_end[k]) cudaEventDestroy(gx->ev_end[k]);
        if (gx->ev_sync && gx->ev_sync[k]) cudaEventDestroy(gx->ev_sync[k]);
    }
    for (int s = 0; gx->ev_cap && s < gx->nst; s++)
        if (gx->ev_cap[s]) cudaEventDestroy(gx->ev_cap[s]);
    for (int k = 0; p && k < p->n_streams; k++) {
        if (gx->ev_join && gx->ev_join[k]) cudaEventDestroy(gx->ev_join[k]);
        if (gx->streams && gx->streams[k]) cudaStreamDestroy(gx->streams[k]);
    }
    for (int s = 0; gx->launch && s < gx->depth; s++)
        if (gx->launch[s]) cudaStreamDestroy(gx->launch[s]);
    pl_gpu_ctx_free(gx->gctx);
    pl_buffers_free(gx->dbufs);
    pl_buffers_free(gx->hbufs);
    cudaGetLastError();
    free(gx->streams);
    free(gx->launch);
    free(gx->exec);
    free(gx->exec_timed);
    free(gx->ev_start);
    free(gx->ev_end);
    free(gx->ev_sync);
    free(gx->ev_cap);
    free(gx->ev_join);
    free(gx->cls);
    free(gx->dev);
    free(gx->launch_deps);
    free(gx->need_end);
    free(gx->need_sync);
    for (int s = 0; gx->xin && s < gx->nst; s++)
        free(gx->xin[s]);
    free(gx->xin);
    free(gx->n_xin);
    free(gx->host_streams);
    free(gx->done);
    if (gx->sync_init) {
        pthread_mutex_destroy(&gx->mu);
        pthread_cond_destroy(&gx->cv);
    }
}

static pl_status pl__sync_init(pl__gx *gx, pl_error *err)
{
    pthread_condattr_t ca;
    if (pthread_mutex_init(&gx->mu, NULL) != 0 || pthread_condattr_init(&ca) != 0)
        return pl_error_set(err, PL_ERUNTIME, "error: cannot create a mutex");
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&gx->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (rc != 0) {
        pthread_mutex_destroy(&gx->mu);
        return pl_error_set(err, PL_ERUNTIME, "error: cannot create a condition variable");
    }
    gx->sync_init = true;
    return PL_OK;
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
    pl__gx gxs, *gx = &gxs;
    pl__worker *workers = NULL;
    pl_status st = pl__setup(gx, plan, cfg, cfg->use_graphs, true, err);
    memset(res, 0, sizeof *res);
    res->executor = "gpu";
    res->graphs = cfg->use_graphs;
    res->n_stages = plan->n_stages;
    res->batches_planned = plan->batches;
    res->workers = gx->rt_open ? gx->rt.env.workers : 0;
    {
        struct cudaDeviceProp prop;
        if (cudaGetDeviceProperties(&prop, gx->device) == cudaSuccess)
            snprintf(res->device_name, sizeof res->device_name, "%.127s", prop.name);
    }
    if (st != PL_OK) goto close;
    gx->spans = calloc((size_t)gx->batches * (size_t)gx->nst, sizeof *gx->spans);
    workers = calloc((size_t)gx->n_host_streams + 1, sizeof *workers);
    if (!gx->spans || !workers) {
        st = pl_error_set(err, PL_ENOMEM, "error: out of memory for %lld batches' timings",
                          (long long)gx->batches);
        goto close;
    }
    PL_CHECK_GOTO(pl__sync_init(gx, err), st, close);
    /* The run clock: ev_t0 completes at (about) t0_ns; device spans are measured from it. */
    PL_CHECK_GOTO(PL_CUDA(cudaEventRecord(gx->ev_t0, gx->launch[0]), NULL, -1, err), st, close);
    PL_CHECK_GOTO(PL_CUDA(cudaEventSynchronize(gx->ev_t0), NULL, -1, err), st, close);
    gx->t_start = pl__now_ns();
    gx->t0_ns = 0;

    pthread_mutex_lock(&gx->mu);
    gx->running = 0;
    for (int i = 0; i < gx->n_host_streams; i++) {
        workers[i] = (pl__worker){.gx = gx, .stream = gx->host_streams[i], .worker = i};
        if (pthread_create(&workers[i].th, NULL, pl__host_thread, &workers[i]) != 0) {
            pl_error e;
            pl_error_set(&e, PL_ERUNTIME, "error: cannot start a host worker thread");
            pl__fail(gx, PL_ERUNTIME, &e);
            break;
        }
        workers[i].started = true;
        gx->running++;
    }
    pthread_mutex_unlock(&gx->mu);

    pl__issue_loop(gx);

    for (int i = 0; i < gx->n_host_streams; i++)
        if (workers[i].started) pthread_join(workers[i].th, NULL);

    if (gx->failed) {
        st = gx->status;
        if (err) *err = gx->err;
    } else if (gx->has_late_err) {
        st = gx->late_status;
        if (err) *err = gx->late_err;
    } else if (pl__stopped(gx) && pl__batches_done(gx) < gx->batches) {
        st = pl_error_set(err, PL_EINTR, "interrupted after %lld of %lld batches",
                          (long long)pl__batches_done(gx), (long long)gx->batches);
    }
    res->batches_issued = gx->launched;
    res->batches_done = pl__batches_done(gx);
    res->wall_ns = pl__now_ns() - gx->t_start;
    if (active_ns)
        *active_ns = gx->t_first_launch > 0 && gx->t_last_done > gx->t_first_launch
                         ? gx->t_last_done - gx->t_first_launch
                         : res->wall_ns;
    res->spans = gx->spans;
    gx->spans = NULL;
close:
    if (gx->rt_open) {
        pl_error ce;
        pl_status cs = pl_stage_rt_close(&gx->rt, gx->done, st != PL_OK, res, &ce);
        if (st == PL_OK && cs != PL_OK) {
            st = cs;
            if (err) *err = ce;
        }
    }
    free(gx->spans);
    free(workers);
    pl__teardown(gx);
    return st;
}

pl_status pl_exec_gpu_run(const pl_plan *plan, const pl_run_cfg *cfg, pl_run_result *res,
                          pl_error *err)
{
    return pl__run(plan, cfg, res, NULL, err);
}

/* --- bench helpers -------------------------------------------------------------------------------
 */

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
    pl__gx gxs, *gx = &gxs;
    pl_status st = pl__setup(gx, plan, &cfg, true, false, err);
    int64_t t0 = 0;
    for (int64_t i = 0; st == PL_OK && i < warmup + launches; i++) {
        if (i == warmup) {
            st = PL_CUDA(cudaDeviceSynchronize(), NULL, -1, err);
            t0 = pl__now_ns();
        }
        int s = (int)(i % gx->depth), r = (int)(i % gx->ring);
        /* The graphs the executor would launch for batch i: timed on sampled batches. */
        cudaGraphExec_t exec = pl__batch_timed(gx, i) ? gx->exec_timed[r] : gx->exec[r];
        if (st == PL_OK) st = PL_CUDA(cudaGraphLaunch(exec, gx->launch[s]), NULL, i, err);
    }
    if (st == PL_OK) st = PL_CUDA(cudaDeviceSynchronize(), NULL, -1, err);
    if (st == PL_OK) *ns_per_launch = (double)(pl__now_ns() - t0) / (double)launches;
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
    pl__gx gxs, *gx = &gxs;
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
        for (int i = 0; i < gx->n_dev; i++)
            PL_CHECK_GOTO(PL_CUDA(cudaEventCreateWithFlags(&xev[(size_t)r * gx->nst + gx->dev[i]],
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
        for (int i = 0; i < gx->n_dev; i++) {
            cur = gx->dev[i];
            cudaStream_t s = gx->streams[plan->stages[cur].stream];
            for (int j = 0; j < gx->n_xin[cur]; j++) {
                const pl__xd *x = &gx->xin[cur][j];
                if (gx->cls[x->from] != PL__DEV || b - x->distance < 0) continue;
                size_t k = (size_t)((b - x->distance) % xring) * gx->nst + x->from;
                PL_CHECK_GOTO(
                    PL_CUDA(cudaStreamWaitEvent(s, xev[k], 0), pl__sname(gx, cur), b, err), st,
                    done);
            }
            PL_CHECK_GOTO(pl__record_waits(gx, cur, s, slot, true, b, err), st, done);
            PL_CHECK_GOTO(pl__record_stage(gx, cur, slot, slot, b, s, true, false, err), st, done);
            if (pl__stage_has_event(gx, cur))
                PL_CHECK_GOTO(
                    PL_CUDA(cudaEventRecord(gx->ev_cap[cur], s), pl__sname(gx, cur), b, err), st,
                    done);
            PL_CHECK_GOTO(PL_CUDA(cudaEventRecord(xev[(size_t)(b % xring) * gx->nst + cur], s),
                                  pl__sname(gx, cur), b, err),
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
    PL_CHECK_GOTO(PL_CUDA(cudaGraphInstantiate(&exec, graph, 0), NULL, -1, err), st, done);
    PL_CHECK_GOTO(PL_CUDA(cudaGraphUpload(exec, origin), NULL, -1, err), st, done);
    for (int64_t i = 0; i < warmup + launches; i++) {
        if (i == warmup) {
            PL_CHECK_GOTO(PL_CUDA(cudaDeviceSynchronize(), NULL, -1, err), st, done);
            t0 = pl__now_ns();
        }
        PL_CHECK_GOTO(PL_CUDA(cudaGraphLaunch(exec, origin), NULL, i, err), st, done);
    }
    PL_CHECK_GOTO(PL_CUDA(cudaDeviceSynchronize(), NULL, -1, err), st, done);
    *ns_per_batch = (double)(pl__now_ns() - t0) / ((double)launches * (double)batches_per_graph);
done:
    if (st != PL_OK && cur >= 0 && err && strstr(err->msg, "stage '") != err->msg)
        pl_error_prefix(err, "stage '%s' (capturing one graph of %d batches)", pl__sname(gx, cur),
                        batches_per_graph);
    if (capturing) {
        cudaStreamEndCapture(origin, &graph);
        cudaGetLastError();
    }
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    for (int r = 0; xev && r < xring; r++)
        for (int i = 0; i < gx->n_dev; i++)
            if (xev[(size_t)r * gx->nst + gx->dev[i]])
                cudaEventDestroy(xev[(size_t)r * gx->nst + gx->dev[i]]);
    free(xev);
    pl__teardown(gx);
    return st;
}
