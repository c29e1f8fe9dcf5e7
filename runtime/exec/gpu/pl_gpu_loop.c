/* pl_gpu_loop: loops on the GPU executor (docs/architecture.md, "Loops").
 * - A loop of device stages (run.loop: device) is a conditional WHILE node in the graph that
 *   holds its stage: a segment's graph, or under stage graphs and --no-graph the loop's own graph
 *   per slot. A test kernel before the node and another as the last node of its body write the
 *   iteration counter and `index` and set the node's condition (pl_exec_launch_loop_test), so an
 *   iteration costs no host round trip. The body is captured into the node's body graph once the
 *   capture that made the node has ended (cudaStreamBeginCaptureToGraph), as CUDA's own example
 *   does, so no two captures are open on this thread at once.
 * - run.loop: host makes the loop a host stage (the plan's): a worker launches the body's graph
 *   per slot, its test at its end, once per iteration, and reads the test back from host-mapped
 *   memory after each (with --no-graph, the body's stages and the test as plain launches); a
 *   stream's deliveries are copied back between launches.
 * - A loop's stream inside a WHILE node: the stream kernel after each test (pl_gpu_stream.c).
 * - A loop of host stages runs on a worker as on the host executor (pl_stage_rt_run_loop). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_exec_gpu_int.h"
#include "pl_gx.h"
#include "pl_intr.h"
#include "pl_stream.h"

/* Conditional nodes and cudaStreamBeginCaptureToGraph: CUDA 12.4 (12.3 had them without memory
 * copies in bodies). */
#if CUDART_VERSION >= 12040
#define PL__COND 1
#else
#define PL__COND 0
#endif

typedef struct pl_gx_pending {
#if PL__COND
    cudaGraphConditionalHandle handle;
#endif
    cudaGraph_t body; /* the WHILE node's body graph, owned by the graph that holds the node */
    int stage, slot;
} pl_gx_pending;

static size_t pl__at(const pl_gx *gx, int slot, int l)
{
    return (size_t)slot * (size_t)gx->n_loops + (size_t)l;
}

/* loop_ctr holds n = depth x n_loops counters, then n decisions, then the abort word. */
static size_t pl__n(const pl_gx *gx)
{
    return (size_t)gx->depth * (size_t)gx->n_loops;
}

static int *pl__abort_word(const pl_gx *gx)
{
    return gx->loop_ctr + 2 * pl__n(gx);
}

/* The test's operands for loop l in `slot`. */
typedef struct pl__test {
    int *ctr;
    const int *cond;
    int *index;
    int limit;
    const int *stop; /* the run's abort word (pl_gx_loop_abort) */
    int *decided;    /* where the test puts whether another iteration runs */
} pl__test;

static void pl__test_args(const pl_gx *gx, int l, int slot, pl__test *t)
{
    const pl_loop *lo = gx->spec->stages[gx->plan->loops[l].stage].loop;
    void *const *db = pl_buffers_slot(gx->dbufs, slot);
    t->ctr = gx->loop_ctr + pl__at(gx, slot, l);
    t->cond = lo->cond.name ? db[lo->cond.index] : NULL;
    t->index = lo->index.name ? db[lo->index.index] : NULL;
    t->limit = (int)(lo->count ? lo->count : lo->max);
    t->decided = gx->loop_ctr + pl__n(gx) + pl__at(gx, slot, l);
    t->stop = pl__abort_word(gx);
}

/* Host-launched loops of device stages (run.loop: host). */
static bool pl__host_launched(const pl_plan_loop *lp)
{
    return lp->device && !lp->graph;
}

pl_status pl_gx_loop_create(pl_gx *gx, pl_error *err)
{
    const pl_plan *p = gx->plan;
    gx->n_loops = p->n_loops;
    if (!gx->n_loops) return PL_OK;
    size_t n = pl__n(gx);
    /* The counters, the tests' decisions, then the abort word every test reads. */
    PL_CHECK(PL_CUDA(cudaMalloc((void **)&gx->loop_ctr, (2 * n + 1) * sizeof *gx->loop_ctr), NULL,
                     -1, err));
    PL_CHECK(
        PL_CUDA(cudaMemset(gx->loop_ctr, 0, (2 * n + 1) * sizeof *gx->loop_ctr), NULL, -1, err));
    PL_CHECK(PL_CUDA(cudaStreamCreateWithFlags(&gx->loop_abort_stream, cudaStreamNonBlocking), NULL,
                     -1, err));
    PL_CHECK(
        PL_CUDA(cudaHostAlloc((void **)&gx->loop_go, n * sizeof *gx->loop_go, cudaHostAllocMapped),
                NULL, -1, err));
    memset(gx->loop_go, 0, n * sizeof *gx->loop_go);
    PL_CHECK(PL_CUDA(cudaHostGetDevicePointer((void **)&gx->loop_go_dev, gx->loop_go, 0), NULL, -1,
                     err));
    gx->loop_streams = calloc(n, sizeof *gx->loop_streams);
    gx->loop_body = calloc(n, sizeof *gx->loop_body);
    if (!gx->loop_streams || !gx->loop_body)
        return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    bool any_graph = false;
    for (int l = 0; l < gx->n_loops; l++) {
        any_graph |= p->loops[l].graph;
        for (int slot = 0; slot < gx->depth && pl__host_launched(&p->loops[l]); slot++)
            PL_CHECK(PL_CUDA(cudaStreamCreateWithFlags(&gx->loop_streams[pl__at(gx, slot, l)],
                                                       cudaStreamNonBlocking),
                             pl_gx_sname(gx, p->loops[l].stage), -1, err));
    }
    gx->graph_loops = any_graph;
    if (any_graph)
        PL_CHECK(PL_CUDA(cudaStreamCreateWithFlags(&gx->body_stream, cudaStreamNonBlocking), NULL,
                         -1, err));
    return pl_gx_stream_create(gx, err);
}

void pl_gx_loop_destroy(pl_gx *gx)
{
    pl_gx_stream_destroy(gx); /* first: its kernels wait for its poller */
    size_t n = pl__n(gx);
    for (size_t i = 0; gx->loop_body && i < n; i++)
        if (gx->loop_body[i]) cudaGraphExecDestroy(gx->loop_body[i]);
    for (size_t i = 0; gx->loop_streams && i < n; i++)
        if (gx->loop_streams[i]) cudaStreamDestroy(gx->loop_streams[i]);
    if (gx->body_stream) cudaStreamDestroy(gx->body_stream);
    if (gx->loop_abort_stream) cudaStreamDestroy(gx->loop_abort_stream);
    if (gx->loop_go) cudaFreeHost(gx->loop_go);
    if (gx->loop_ctr) cudaFree(gx->loop_ctr);
    free(gx->loop_body);
    free(gx->loop_streams);
    free(gx->pending);
    gx->loop_body = NULL;
    gx->loop_streams = NULL;
    gx->body_stream = gx->loop_abort_stream = NULL;
    gx->loop_go = gx->loop_go_dev = NULL;
    gx->loop_ctr = NULL;
    gx->pending = NULL;
    gx->n_pending = gx->cap_pending = 0;
    gx->n_loops = 0;
    gx->graph_loops = false;
}

pl_status pl_gx_loop_abort(pl_gx *gx, pl_error *err)
{
    if (!gx->n_loops || !gx->loop_ctr) return PL_OK;
    /* A side stream: the slots' streams are busy with the graphs whose loops this ends. Any
     * nonzero value stops them; the word is never cleared, the run is ending. */
    return PL_CUDA(cudaMemsetAsync(pl__abort_word(gx), 1, sizeof(int), gx->loop_abort_stream), NULL,
                   -1, err);
}

pl_status pl_gx_loop_supported(const pl_gx *gx, pl_error *err)
{
#if !PL__COND
    for (int l = 0; l < gx->plan->n_loops; l++) {
        const pl_stage *L = &gx->spec->stages[gx->plan->loops[l].stage];
        if (!gx->plan->loops[l].graph) continue;
        return pl_error_at(err, PL_EINPUT, L->loop->pos,
                           "loop '%s' runs as a conditional WHILE node in the slot's graph "
                           "(run.loop: device), which needs CUDA 12.4 or newer; this pipectl is "
                           "built with CUDA %d.%d: set run.loop: host (pipectl run --set "
                           "run.loop=host) to launch its body from the host once per iteration",
                           L->name, CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10);
    }
#endif
    (void)gx;
    (void)err;
    return PL_OK;
}

#if PL__COND
/* The graph a stream is capturing into, and the nodes its next node will depend on. */
static cudaError_t pl__capture_info(cudaStream_t s, cudaGraph_t *g, const cudaGraphNode_t **deps,
                                    size_t *n)
{
    enum cudaStreamCaptureStatus cs;
#if CUDART_VERSION >= 13000
    return cudaStreamGetCaptureInfo(s, &cs, NULL, g, deps, NULL, n);
#else
    return cudaStreamGetCaptureInfo(s, &cs, NULL, g, deps, n);
#endif
}

static cudaError_t pl__add_node(cudaGraphNode_t *node, cudaGraph_t g, const cudaGraphNode_t *deps,
                                size_t n, struct cudaGraphNodeParams *p)
{
#if CUDART_VERSION >= 13000
    return cudaGraphAddNode(node, g, deps, NULL, n, p);
#else
    return cudaGraphAddNode(node, g, deps, n, p);
#endif
}

static cudaError_t pl__capture_after(cudaStream_t s, cudaGraphNode_t *node)
{
#if CUDART_VERSION >= 13000
    return cudaStreamUpdateCaptureDependencies(s, node, NULL, 1, cudaStreamSetCaptureDependencies);
#else
    return cudaStreamUpdateCaptureDependencies(s, node, 1, cudaStreamSetCaptureDependencies);
#endif
}

/* A failure of a conditional-node call: the call, and what to do where the driver lacks them. */
static pl_status pl__cond_failed(cudaError_t ce, const char *call, const char *loop, pl_error *err)
{
    if (ce == cudaSuccess) return PL_OK;
    cudaGetLastError();
    pl_error_set(err, PL_ECUDA,
                 "stage '%s': %s failed: %s (%s); a loop on the device is a conditional WHILE "
                 "node, which needs CUDA 12.4 or newer in the driver too: set run.loop: host to "
                 "launch its body from the host once per iteration",
                 loop, call, cudaGetErrorString(ce), cudaGetErrorName(ce));
    return pl_error_tag(err, loop, -1);
}
#endif

pl_status pl_gx_loop_node(pl_gx *gx, int st, int slot, cudaStream_t s, pl_error *err)
{
    const char *name = pl_gx_sname(gx, st);
#if PL__COND
    int l = gx->plan->stages[st].loop;
    pl__test t;
    pl__test_args(gx, l, slot, &t);
    cudaGraph_t g = NULL;
    const cudaGraphNode_t *deps = NULL;
    size_t nd = 0;
    PL_CHECK(pl__cond_failed(pl__capture_info(s, &g, &deps, &nd), "cudaStreamGetCaptureInfo", name,
                             err));
    cudaGraphConditionalHandle h;
    /* No default: the test before the node sets it at every launch. */
    PL_CHECK(pl__cond_failed(cudaGraphConditionalHandleCreate(&h, g, 0, 0),
                             "cudaGraphConditionalHandleCreate", name, err));
    PL_CHECK(PL_CUDA(pl_exec_launch_loop_test((unsigned long long)h, 1, t.ctr, 1, t.cond, t.index,
                                              t.limit, t.stop, t.decided, NULL, s),
                     name, -1, err));
    PL_CHECK(pl_gx_stream_record(gx, l, slot, s, t.ctr, t.decided, err));
    PL_CHECK(pl__cond_failed(pl__capture_info(s, &g, &deps, &nd), "cudaStreamGetCaptureInfo", name,
                             err));
    struct cudaGraphNodeParams p;
    memset(&p, 0, sizeof p);
    p.type = cudaGraphNodeTypeConditional;
    p.conditional.handle = h;
    p.conditional.type = cudaGraphCondTypeWhile;
    p.conditional.size = 1;
    cudaGraphNode_t node;
    PL_CHECK(pl__cond_failed(pl__add_node(&node, g, deps, nd, &p), "cudaGraphAddNode (WHILE)", name,
                             err));
    PL_CHECK(pl__cond_failed(pl__capture_after(s, &node), "cudaStreamUpdateCaptureDependencies",
                             name, err));
    if (gx->n_pending == gx->cap_pending) {
        int cap = gx->cap_pending ? 2 * gx->cap_pending : 4;
        pl_gx_pending *a = realloc(gx->pending, (size_t)cap * sizeof *a);
        if (!a) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
        gx->pending = a;
        gx->cap_pending = cap;
    }
    gx->pending[gx->n_pending++] = (pl_gx_pending){h, p.conditional.phGraph_out[0], st, slot};
    return PL_OK;
#else
    (void)slot, (void)s;
    return pl_error_set(err, PL_ERUNTIME,
                        "stage '%s': a WHILE node in a build without conditional nodes "
                        "(internal error: pl_gx_loop_supported refuses it)",
                        name);
#endif
}

void pl_gx_loop_drop(pl_gx *gx)
{
    gx->n_pending = 0;
}

/* The body of one WHILE node: its stages one after another, then the test. */
static pl_status pl__fill_one(pl_gx *gx, const pl_gx_pending *pd, pl_error *err)
{
#if PL__COND
    const pl_plan_loop *lp = &gx->plan->loops[gx->plan->stages[pd->stage].loop];
    const char *name = pl_gx_sname(gx, pd->stage);
    cudaStream_t s = gx->body_stream;
    pl__test t;
    pl__test_args(gx, gx->plan->stages[pd->stage].loop, pd->slot, &t);
    PL_CHECK(pl__cond_failed(
        cudaStreamBeginCaptureToGraph(s, pd->body, NULL, NULL, 0, cudaStreamCaptureModeThreadLocal),
        "cudaStreamBeginCaptureToGraph", name, err));
    pl_status st = PL_OK;
    int cur = -1;
    for (int i = 0; i < lp->n_body && st == PL_OK; i++) {
        cur = lp->body[i];
        st = pl_gx_record_work(gx, cur, pd->slot, -1, s, err);
    }
    if (st == PL_OK) {
        cur = -1;
        st = PL_CUDA(pl_exec_launch_loop_test((unsigned long long)pd->handle, 1, t.ctr, 0, t.cond,
                                              t.index, t.limit, t.stop, t.decided, NULL, s),
                     name, -1, err);
    }
    if (st == PL_OK)
        st = pl_gx_stream_record(gx, gx->plan->stages[pd->stage].loop, pd->slot, s, t.ctr,
                                 t.decided, err);
    cudaGraph_t out = NULL;
    cudaError_t ce = cudaStreamEndCapture(s, &out);
    if (st == PL_OK && ce != cudaSuccess)
        st = pl_error_set(err, PL_ECUDA,
                          "stage '%s': capturing its body into the WHILE node failed (%s); a "
                          "conditional node's body holds kernels and memory copies only: run with "
                          "run.loop: host, or --no-graph with it, to see the failing call",
                          name, cudaGetErrorString(ce));
    if (st != PL_OK) {
        cudaGetLastError();
        if (cur >= 0 && err && !err->stage[0]) {
            pl_error_prefix(err, "stage '%s' (the body of loop '%s', slot %d)",
                            pl_gx_sname(gx, cur), name, pd->slot);
            pl_error_tag(err, pl_gx_sname(gx, cur), -1);
        }
    }
    return st;
#else
    (void)gx, (void)pd;
    return pl_error_set(err, PL_ERUNTIME, "error: no conditional nodes in this build");
#endif
}

pl_status pl_gx_loop_fill(pl_gx *gx, pl_error *err)
{
    pl_status st = PL_OK;
    for (int i = 0; i < gx->n_pending && st == PL_OK; i++)
        st = pl__fill_one(gx, &gx->pending[i], err);
    gx->n_pending = 0;
    return st;
}

/* The body's stages, then the test writing the host-mapped word, on s. */
static pl_status pl__record_iteration(pl_gx *gx, int l, int slot, int64_t batch, cudaStream_t s,
                                      pl_error *err)
{
    const pl_plan_loop *lp = &gx->plan->loops[l];
    pl__test t;
    pl__test_args(gx, l, slot, &t);
    for (int i = 0; i < lp->n_body; i++)
        PL_CHECK(pl_gx_record_work(gx, lp->body[i], slot, batch, s, err));
    return PL_CUDA(pl_exec_launch_loop_test(0, 0, t.ctr, 0, t.cond, t.index, t.limit, t.stop,
                                            t.decided, gx->loop_go_dev + pl__at(gx, slot, l), s),
                   pl_gx_sname(gx, lp->stage), batch, err);
}

pl_status pl_gx_loop_capture_bodies(pl_gx *gx, pl_error *err)
{
    if (!gx->graphs && !gx->sgraphs) return PL_OK; /* --no-graph: plain launches */
    for (int l = 0; l < gx->n_loops; l++) {
        const pl_plan_loop *lp = &gx->plan->loops[l];
        if (!pl__host_launched(lp)) continue;
        const char *name = pl_gx_sname(gx, lp->stage);
        for (int slot = 0; slot < gx->depth; slot++) {
            size_t k = pl__at(gx, slot, l);
            cudaStream_t s = gx->loop_streams[k];
            cudaGraph_t g = NULL;
            PL_CHECK(PL_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), name, -1,
                             err));
            pl_status st = pl__record_iteration(gx, l, slot, -1, s, err);
            cudaError_t ce = cudaStreamEndCapture(s, &g);
            if (st == PL_OK && ce != cudaSuccess)
                st = pl_error_set(err, PL_ECUDA,
                                  "stage '%s': capturing its body's graph for slot %d failed (%s); "
                                  "run with --no-graph to see the failing call",
                                  name, slot, cudaGetErrorString(ce));
            if (st == PL_OK)
                st = PL_CUDA(cudaGraphInstantiate(&gx->loop_body[k], g, 0), name, -1, err);
            if (g) cudaGraphDestroy(g);
            if (st == PL_OK) st = PL_CUDA(cudaGraphUpload(gx->loop_body[k], s), name, -1, err);
            if (st != PL_OK) {
                cudaGetLastError();
                return st;
            }
        }
    }
    return PL_OK;
}

/* A host-launched loop's delivery (its stream, pl_stream.h): the columns due of the slot's
 * `from`, and its finished flags, copied into host staging (made on the first delivery, freed by
 * the caller) between launches, then handed to the writer. */
static pl_status pl__deliver(pl_gx *gx, int stage, int slot, cudaStream_t s, int64_t batch,
                             int64_t gb, int64_t it, bool done, int64_t *lo, char **staging,
                             pl_error *err)
{
    const pl_spec *spec = gx->spec;
    const char *name = pl_gx_sname(gx, stage);
    pl_stream_shape sh;
    pl_stream_shape_of(spec, &spec->stages[stage], &sh);
    size_t pitch = (size_t)sh.cols * (size_t)sh.col_bytes, rows = (size_t)sh.rows;
    if (!*staging && !(*staging = malloc(rows * pitch + rows * sizeof(int32_t))))
        return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    int64_t hi = pl_stream_cols(&sh, it);
    void *const *db = pl_buffers_slot(gx->dbufs, slot);
    int32_t *fin = (int32_t *)(*staging + rows * pitch);
    size_t off = (size_t)*lo * (size_t)sh.col_bytes, w = (size_t)(hi - *lo) * (size_t)sh.col_bytes;
    if (w)
        PL_CHECK(PL_CUDA(cudaMemcpy2DAsync(*staging + off, pitch, (const char *)db[sh.from] + off,
                                           pitch, w, rows, cudaMemcpyDeviceToHost, s),
                         name, gb, err));
    if (sh.finished >= 0)
        PL_CHECK(PL_CUDA(cudaMemcpyAsync(fin, db[sh.finished], rows * sizeof(int32_t),
                                         cudaMemcpyDeviceToHost, s),
                         name, gb, err));
    PL_CHECK(PL_CUDA(cudaStreamSynchronize(s), name, gb, err));
    pl_status st = pl_stream_put(gx->rt.state[stage], batch, gb, it, *lo, hi, *staging,
                                 sh.finished >= 0 ? fin : NULL, done, err);
    *lo = hi;
    return st;
}

pl_status pl_gx_run_loop(void *user, const pl_stage_rt *rt, const pl_run_cfg *cfg, int stage,
                         int64_t batch, int worker, void *const *bufs, pl_error *err)
{
    pl_gx *gx = user;
    const pl_plan *p = gx->plan;
    const pl_plan_loop *lp = pl_plan_loop_of(p, stage);
    if (!lp->device) return pl_stage_rt_run_loop(rt, cfg, stage, batch, worker, bufs, err);
    const char *name = pl_gx_sname(gx, stage);
    int64_t gb = pl_shard_global(&gx->spec->run.shard, gx->spec->run.batches, batch); /* named */
    int l = p->stages[stage].loop, slot = (int)(batch % gx->depth);
    size_t k = pl__at(gx, slot, l);
    cudaStream_t s = gx->loop_streams[k];
    const volatile int *go = &gx->loop_go[k];
    pl__test t;
    pl__test_args(gx, l, slot, &t);
    pl_stream_shape sh;
    bool streams =
        pl_stream_shape_of(gx->spec, &gx->spec->stages[stage], &sh) && rt->state[stage] != NULL;
    char *staging = NULL;
    int64_t lo = 0;
    pl_status st = PL_OK;
    /* The runtime's current device is per thread, and this is a worker's. */
    PL_CHECK_GOTO(PL_CUDA(cudaSetDevice(gx->device), name, gb, err), st, done);
    PL_CHECK_GOTO(PL_CUDA(pl_exec_launch_loop_test(0, 0, t.ctr, 1, t.cond, t.index, t.limit, t.stop,
                                                   t.decided, gx->loop_go_dev + k, s),
                          name, gb, err),
                  st, done);
    PL_CHECK_GOTO(PL_CUDA(cudaStreamSynchronize(s), name, gb, err), st, done);
    for (int64_t it = 0;; it++) {
        bool end = !*go;
        if (streams && pl_stream_due(&sh, it, end))
            PL_CHECK_GOTO(pl__deliver(gx, stage, slot, s, batch, gb, it, end, &lo, &staging, err),
                          st, done);
        if (end) break;
        /* The second signal drops the batches in flight: this one stops between iterations. */
        if (pl_intr_level() == PL_INTR_ABORT) {
            pl_intr_error(err, "repeating a loop");
            st = pl_error_stage(err, name, gb);
            goto done;
        }
        /* --fail-at a body stage fails where the host executor's does: at its first run. */
        for (int i = 0; cfg && i < lp->n_body; i++)
            if (cfg->fail_stage == lp->body[i] && cfg->fail_batch == batch) {
                pl_error_set(err, PL_ERUNTIME,
                             "error: injected failure (test hook fail_stage/fail_batch)");
                st = pl_error_stage(err, pl_gx_sname(gx, lp->body[i]), gb);
                goto done;
            }
        if (gx->loop_body[k])
            PL_CHECK_GOTO(PL_CUDA(cudaGraphLaunch(gx->loop_body[k], s), name, gb, err), st, done);
        else
            PL_CHECK_GOTO(pl__record_iteration(gx, l, slot, batch, s, err), st, done);
        PL_CHECK_GOTO(PL_CUDA(cudaStreamSynchronize(s), name, gb, err), st, done);
    }
done:
    free(staging);
    return st;
}
