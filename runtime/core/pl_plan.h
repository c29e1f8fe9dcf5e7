/* pl_plan: the compiled DAG both executors run. Plain data; `pipectl plan` prints it and tests
 * read it.
 *
 * Semantics (docs/architecture.md):
 * - Intra-batch edges come from buffer access: every writer of a buffer precedes every reader of
 *   it, unless the reader is ordered before that writer by `after:` (then the writer waits, WAR).
 *   `after:` adds edges data does not show.
 * - Streams: one H2D stream, one D2H stream; compute and host stages get one stream per
 *   independent branch (a stage continues the stream of a same-engine predecessor that is that
 *   stream's last stage; otherwise it opens a new one). Stages on one stream run in plan order,
 *   batch after batch, like a CUDA stream. A host stage with `parallel: N` > 1 has a stream of its
 *   own that runs up to N of its batches at once (pl_stream.parallel); its cross-batch waits on
 *   itself are kept, since its batches no longer run in order.
 * - Events: only on edges that cross streams and are not implied by other edges and stream order
 *   (transitive reduction). One event per source stage; waits say who waits on it.
 * - Cross-batch dependencies (`xdeps`): stage `to` of batch i+distance waits for stage `from` of
 *   batch i. They make slot reuse safe (distance = depth: a slot's buffer is rewritten only after
 *   every access of the batch that last used it) and order writes of persistent buffers and
 *   ordered (sink) stages (distance 1). Redundant ones are removed.
 * - Segments (pl_plan_segments.c): the device stages of one batch, split where host stages sit
 *   between them. A device stage's segment is the number of host stages on the longest chain of
 *   host-after-device hand-offs before it; the GPU executor captures one graph per segment and
 *   slot, launches segment k of a batch once the host stages it needs are done, and learns of
 *   device completions from the end events the plan marks `observe`.
 * - Loops (runtime/core/pl_loop.h): a loop stage is one stage of the DAG above, with its body's
 *   reads and writes; its body stages are in `order` right after it (in the order an iteration
 *   runs them) and in `loops`, with no preds, waits, events or segment of their own and the loop
 *   stage's stream (they run inside it, not on a stream's list): the scheduler counts them done
 *   with their loop. */
#ifndef PL_PLAN_H
#define PL_PLAN_H

#include <stdio.h>

#include "pl_spec.h"
#include "pl_stage.h"

typedef struct pl_plan_stage {
    int stage; /* index into spec->stages */
    int order; /* position in plan->order (topological, deterministic) */
    pl_engine engine;
    int stream; /* index into plan->streams */
    int *preds; /* intra-batch predecessors after transitive reduction (stage indices) */
    int n_preds;
    int *waits; /* events this stage's stream waits on before it runs (event indices) */
    int n_waits;
    int event; /* event recorded after this stage, or -1 */
    /* Filled by pl_plan_segments: */
    int segment; /* device stages: their device segment (0..n_segments-1); host stages: -1 */
    int after;   /* host stages: the last segment of the batch they wait for (-1: none) */
    int *xin;    /* indices into plan->xdeps whose `to` is this stage */
    int n_xin;
    int *seg_waits; /* device stages of the same segment this stage's stream waits for inside the
                     * segment's graph (the plan's events, less those that launch order or host
                     * hand-offs already imply) */
    int n_seg_waits;
    bool record_end; /* device: its end is recorded in every batch's graph (the host, a later
                      * launch or a cross-batch dep waits for it, or it ends its segment) */
    bool observe;    /* device: the host reads its completion back, one batch after another (a
                      * host stage waits for it, or it is a leaf of its segment) */
    int loop;        /* a loop stage or a stage of a loop's body: index into plan->loops; -1 */
    bool body;       /* a stage of that loop's body */
} pl_plan_stage;

/* One loop: its stage and its body. */
typedef struct pl_plan_loop {
    int stage; /* the loop stage */
    int *body; /* its body's stages, in the order an iteration runs them */
    int n_body;
    bool device; /* the body is device stages */
    /* The GPU executor captures the loop into the slot's graph as a conditional WHILE node (a
     * device body, run.loop: device; the loop stage is a compute stage). false: the loop is a
     * host stage, run by a host worker: a host body, or a device body whose graph the worker
     * launches once per iteration (run.loop: host). */
    bool graph;
} pl_plan_loop;

/* One device segment: what its per-slot graph holds and what its launch waits for. */
typedef struct pl_segment {
    int *stages; /* device stages, in plan order */
    int n_stages;
    int *host_deps; /* host stages whose batch-b completion segment b's launch needs */
    int n_host_deps;
} pl_segment;

typedef struct pl_stream {
    char name[32]; /* "h2d", "d2h", "compute0", "host0", ... */
    pl_engine engine;
    int *stages; /* stage indices, in run order */
    int n_stages;
    /* Batches the stream may run at once: its one stage's `parallel` (a host stage with
     * parallel > 1 gets a stream of its own), else 1, batch after batch like a CUDA stream. */
    int parallel;
} pl_stream;

typedef struct pl_event {
    int src;   /* stage whose completion it marks */
    int *dsts; /* stages that wait on it */
    int n_dsts;
} pl_event;

typedef enum pl_xdep_why { PL_XDEP_SLOT_REUSE, PL_XDEP_PERSISTENT, PL_XDEP_ORDERED } pl_xdep_why;

typedef struct pl_xdep {
    int from, to; /* stage indices */
    int distance; /* in batches, >= 1 */
    int buffer;   /* the buffer that causes it, -1 for ordered stages */
    pl_xdep_why why;
} pl_xdep;

typedef struct pl_plan {
    const pl_spec *spec; /* borrowed: must outlive the plan */
    int depth;           /* with depth_auto: the calibration depth (PL_DEPTH_CALIB) */
    /* depth: auto (runtime/exec/pl_depth.h): the executors run the first batches at `depth`, then
     * choose the depth for the rest, at most depth_cap (run.memory_budget, or PL_DEPTH_AUTO_MAX
     * without one; never more than the batches). cap_why (static): what sets the cap:
     * "memory_budget.device", "memory_budget.host_pinned", "PL_MAX_DEPTH", "the batches" or "no
     * memory_budget" (PL_DEPTH_AUTO_MAX). */
    bool depth_auto;
    int depth_cap;
    const char *cap_why;
    int64_t batches;
    int n_stages;
    int *order;            /* stage indices, topological */
    pl_plan_stage *stages; /* indexed by stage index */
    pl_stream *streams;
    int n_streams;
    pl_event *events;
    int n_events;
    int n_waits; /* total waits (cross-stream edges kept) */
    pl_xdep *xdeps;
    int n_xdeps;
    pl_segment *segments; /* device segments of one batch, in launch order */
    int n_segments;
    pl_plan_loop *loops; /* in plan order */
    int n_loops;
    /* Memory: bytes for one slot of all per-batch buffers, and for persistent buffers; on the
     * device, with what stage kinds allocate themselves (pl_kind.device_memory), which stage_*
     * repeats. */
    uint64_t host_per_slot, device_per_slot;
    uint64_t host_persistent, device_persistent;
    uint64_t stage_per_slot, stage_persistent;
} pl_plan;

/* Compiles a checked spec (pl_spec_check must have succeeded). depth/batches come from
 * spec->run. Deterministic: the same spec gives the same plan. */
pl_status pl_plan_compile(const pl_spec *spec, pl_plan **out, pl_error *err);
/* The same with spec->run's batches and depth replaced (0 keeps the spec's, PL_DEPTH_AUTO: auto),
 * without touching the spec: the spec is only read, so several threads may compile one spec at
 * once. PL_EINPUT when batches is outside 0..PL_MAX_BATCHES, depth outside
 * PL_DEPTH_AUTO..PL_MAX_DEPTH, or the depth's slots do not fit run.memory_budget (at the
 * budget's position, with the sizes). */
#define PL_DEPTH_AUTO (-1)
#define PL_DEPTH_CALIB 1     /* depth: auto runs its calibration batches one at a time */
#define PL_DEPTH_AUTO_MAX 16 /* depth: auto without a memory_budget: at most this many slots */
pl_status pl_plan_compile_with(const pl_spec *spec, int64_t batches, int depth, pl_plan **out,
                               pl_error *err);
void pl_plan_free(pl_plan *plan);
/* The loop whose stage is `stage`, or NULL (not a loop stage; a body stage is not one). */
static inline const pl_plan_loop *pl_plan_loop_of(const pl_plan *plan, int stage)
{
    const pl_plan_stage *ps = &plan->stages[stage];
    return ps->loop >= 0 && !ps->body ? &plan->loops[ps->loop] : NULL;
}
/* Chunked stages (pl_stage.chunks): does device stage c wait on device stage p block by block?
 * Both are chunked alike (chunks > 1, the same rows in each block: pl_stage.chunk_rows), p is an
 * intra-batch predecessor of c that writes a buffer c reads, and both sit in one segment (whose
 * stages a batch issues together). The GPU executor then replaces c's wait on the whole of p with
 * one wait per block: c's block j starts once p's block j is done. */
bool pl_plan_chunk_linked(const pl_plan *plan, int c, int p);
/* Computes segments, `after`, `xin`, `seg_waits`, `record_end`, `observe` (called by
 * pl_plan_compile; exposed for tests). Returns PL_ENOMEM on allocation failure. */
pl_status pl_plan_segments(pl_plan *plan);
void pl_plan_segments_free(pl_plan *plan);

#endif
