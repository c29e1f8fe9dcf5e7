/* pl_gx: the GPU executor's run state, shared by its files, one job each:
 *   pl_gpu_mem.c       device and pinned host memory, initial contents
 *   pl_gpu_capture.c   CUDA objects, recording a stage, capturing segment graphs per slot
 *   pl_gpu_launch.c    the issuing loop: launch conditions, run-ahead, plain launches
 *   pl_gpu_complete.c  read-back of device completions, timings, fault location
 *   pl_gpu_loop.c      loops: WHILE nodes in captures, host-launched loops, their state
 *   pl_gpu_stream.c    loop streams of WHILE nodes: mapped memory, the kernel, the poller
 *   pl_exec_gpu.c      setup, teardown, the run, the bench entry points
 * Everything it needs to know about the pipeline comes from the plan (segments, launch deps,
 * observed and recorded ends, cross-batch deps); host stages run on the shared host scheduler
 * (runtime/exec/pl_sched.c), whose mutex also guards the fields marked "mu" below.
 *
 * Graphs: one per (ring entry, segment), lean (only the end events the host or a later launch
 * waits for) and timed (start and end events around every device stage, launched on sampled
 * batches). Ring entries b % ring: with graphs ring = 2 x depth (run-ahead: batch b + depth is
 * queued behind batch b on the slot's launch stream before b is read back), buffers per slot
 * b % depth; plain launches use ring = depth + 1 so a wait always names the exact batch.
 *
 * Stage graphs (--graphs stage): the plain launch path, with each compute stage's work replaced
 * by the launch of its graph for the slot (one per slot and compute stage: its kernels and
 * library calls, no events). Copies stay plain calls on their engine's one stream, so every
 * upload sits in the H2D engine's queue and every download in the D2H engine's, in batch order:
 * a small upload never waits behind another slot's large download, which per-segment graphs
 * cannot promise (the driver places each graph's copy nodes itself). */
/* Layer runtime/exec/gpu: owns the GPU executor (the files above), its graph files for bundles
 * (pl_gpu_dot.c) and `pipectl bench`'s raw measurements (pl_gpu_bench.c); built only with
 * PL_WITH_CUDA. May include every layer up to runtime/exec and the CUDA headers; runtime/exec
 * reaches it only through the entry points pl_exec.h declares. */
#ifndef PL_GX_H
#define PL_GX_H

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "pl_buffers.h"
#include "pl_run.h"
#include "kernel_gpu.h"
#include "pl_sched.h"
#include "pl_stage_rt.h"

typedef CUresult (*pl_gx_write_value_fn)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

typedef struct pl_gx {
    const pl_plan *plan;
    const pl_spec *spec;
    const pl_run_cfg *cfg;
    int depth, ring, nst, nbuf, nseg;
    int64_t batches;
    bool graphs;
    int device;

    pl_buffers *hbufs; /* host buffers (pinned); device entries NULL */
    pl_buffers *dbufs; /* device buffers (cudaMalloc); host entries NULL */
    pl_stage_rt rt;    /* rt.env is valid (spec, gpu) even when stages are not opened */
    bool rt_open;
    pl_gpu_ctx *gctx;
    pl_sched sched; /* host stages, completion counters, the mutex */
    bool sched_init;

    cudaStream_t *streams;       /* [plan stream]: capture streams (graphs) or issue streams */
    cudaStream_t *launch;        /* [slot]: each slot's graphs launch on its own stream */
    cudaStream_t *cstreams;      /* plain launches and stage graphs: [slot * n_streams + plan
                                  * stream], compute streams only: each slot's kernels on their
                                  * own streams, so kernels of different batches may run at once
                                  * (as with segment graphs); copies share one stream per plan
                                  * stream. Every cross-batch dep is an explicit wait there. */
    cudaGraphExec_t *exec;       /* [r * nseg + k]: lean graphs (NULL when every batch is timed) */
    cudaGraphExec_t *exec_timed; /* [r * nseg + k]: timed graphs (NULL when timing is off) */
    bool sgraphs;                /* stage graphs (graphs is false: the plain launch path) */
    cudaGraphExec_t *sexec;      /* [slot * nst + stage]: stage graphs; NULL entry: recorded */
    cudaEvent_t *ev_start;       /* [r * nst + stage]: timing, recorded before the stage */
    cudaEvent_t *ev_end;         /* [r * nst + stage]: timing and completion (timed, plain) */
    cudaEvent_t *ev_sync;        /* [r * nst + stage]: completion only, in lean graphs */
    cudaEvent_t *ev_cap;         /* [stage]: cross-stream edges inside a capture */
    bool *cap_src;               /* [stage]: some stage of its segment waits on it in a capture */
    cudaEvent_t *ev_join;        /* [plan stream] */
    /* Chunked stages (pl_stage.chunks, pl_gx_chunk_linked): chunk_off[st] >= 0 for a device
     * stage some consumer waits on block by block. ev_chunk[chunk_off[st] + slot * chunks + j]:
     * block j of the slot's batch done (plain launches; stage graphs record it as an External
     * node); ev_capch[chunk_coff[st] + j]: the same inside a segment capture, where it becomes an
     * edge. Per slot, not per ring entry: a chunked pair sits in one segment, whose stages a batch
     * issues together, so a wait always follows its own batch's record. */
    int *chunk_off, *chunk_coff;
    cudaEvent_t *ev_chunk, *ev_capch;
    int n_ev_chunk, n_ev_capch;
    cudaEvent_t ev_fork, ev_t0;
    bool created_t0, created_fork;
    uint32_t *marks; /* host-mapped [ring * nst]: 1 once the stage finished its batch */
    CUdeviceptr marks_dev;
    pl_gx_write_value_fn write_value; /* cuStreamWriteValue32, NULL unless fault marks are on */
    uint32_t *trigger;                /* host-mapped fault-injection word */
    void *trigger_dev;
    int fail_dev_stage; /* device stage with injected fault, -1 if none */
    int timing;         /* timing period: 0 every batch, -1 never, N: one batch in N */
    int user_timing;    /* depth: auto: the timing asked for, used after the calibration (which
                         * times every batch: it needs the stage times) */

    /* Launch and read-back state: written by the issuing thread; read by others under mu. */
    int64_t *launched; /* [segment]: batches whose segment is issued (in batch order); mu */
    int64_t *mon_b;    /* [segment]: the batch being read back */
    int *mon_i;        /* [segment]: its next stage to read back, index into the segment */
    int *mon_conf;     /* [segment]: stages before this index are known finished */
    int64_t monitored; /* batches read back in every segment; mu */
    int64_t reported;  /* batches passed to cfg->on_batch */
    bool stopped;      /* cfg->stop or the process's interrupt seen */
    bool aborted;      /* the interrupt's second level (PL_INTR_ABORT) seen */
    bool has_late_err; /* an issue-side error, used when the read-back finds nothing better */
    pl_status late_status;
    pl_error late_err;

    /* Device wake-ups (pl_gpu_launch.c): while host stages gate the next launch, the loop sleeps
     * on the scheduler's progress condition and the device's next completions signal it, from a
     * host function on a side stream per segment, instead of the loop polling every 20 us. */
    struct pl_gx_waker *waker;  /* owned; NULL: none (bench replays), the loop polls */
    cudaStream_t *wake_streams; /* [segment] */
    int64_t *armed_b;           /* [segment]: the batch and stage index whose end is armed */
    int *armed_i;

    pl_timing *stats;                    /* device stages' spans are recorded here */
    int64_t t_start;                     /* CLOCK_MONOTONIC at run start */
    int64_t t_first_launch, t_last_done; /* CLOCK_MONOTONIC: first issue, last read-back (bench) */
    /* CLOCK_MONOTONIC: the issue loop saw the run's work finished (the wall's end). */
    int64_t t_end;
    /* The worker index the issue loop runs host stages as (pl_sched_help), or -1. */
    int help_worker;

    /* Loops (pl_gpu_loop.c), [slot * n_loops + plan loop], made with the ring's objects. */
    int n_loops;
    /* A loop runs as a WHILE node: a batch may take unbounded time, so the issue loop never
     * blocks on an event (it polls), and a second signal reaches pl_gx_loop_abort. */
    bool graph_loops;
    /* device: each loop's iteration counter, then each one's last decision, then the abort word */
    int *loop_ctr;
    cudaStream_t loop_abort_stream; /* where pl_gx_loop_abort sets the abort word */
    int *loop_go, *loop_go_dev;     /* host-mapped: a host-launched loop's last test */
    cudaStream_t *loop_streams;     /* host-launched loops: what their worker issues on */
    cudaGraphExec_t *loop_body;     /* host-launched loops with graphs: the body and its test */
    /* WHILE nodes made by the capture in progress whose bodies are captured once it ends
     * (pl_gx_loop_fill), on body_stream. */
    struct pl_gx_pending *pending;
    int n_pending, cap_pending;
    cudaStream_t body_stream;
    /* Loop streams (pl_gpu_stream.c) of WHILE-node loops, made with the loops' state when the
     * run opens its stages (streams_on; bench replays have none); stream_first: the batch the
     * current phase began at (atomic: the poller reads it). */
    struct pl_gx_streams *loop_out;
    bool streams_on;
    int64_t stream_first;
    /* In-memory inputs the uploads read in place (pl_gx_in_place): the caller's memory
     * registered as pinned (to unregister), and the issuing thread's buffer table for a batch. */
    void **registered;
    int n_registered;
    void **in_place_table; /* [nbuf] */
} pl_gx;

static inline const char *pl_gx_sname(const pl_gx *gx, int st)
{
    return gx->spec->stages[st].name;
}

/* A device stage on the compute engine: what stage graphs capture (and --no-graph preloads). */
static inline bool pl_gx_compute_stage(const pl_gx *gx, int st)
{
    return gx->plan->stages[st].segment >= 0 && gx->plan->stages[st].engine == PL_ENGINE_COMPUTE;
}

/* pl_plan_chunk_linked on the run's plan, once the chunk events exist (false before). */
bool pl_gx_chunk_linked(const pl_gx *gx, int c, int p);

/* Is batch b launched with start and end events around every device stage? The sampled batches
 * sit in the middle of each period (b % N == N / 2), not at the run's first or last batch: those
 * are not overlapped with neighbours, so a timed graph there adds its whole cost to the run
 * (measured at 4 MiB: 64-100 us per timed first/last batch against about 20 us in the middle). A
 * run shorter than that times its middle batch. */
static inline bool pl_gx_batch_timed(const pl_gx *gx, int64_t b)
{
    if (gx->timing < 0) return false;
    if (gx->timing == 0 || (!gx->graphs && !gx->sgraphs)) return true; /* --no-graph: all */
    int64_t half = gx->timing / 2;
    if (gx->batches <= half) return b == gx->batches / 2;
    return b % gx->timing == half;
}

/* The event that says device stage st of batch b finished (the set batch b's launch records). */
static inline cudaEvent_t pl_gx_end_event(const pl_gx *gx, int64_t b, int st)
{
    size_t k = (size_t)(b % gx->ring) * (size_t)gx->nst + (size_t)st;
    return gx->graphs && !pl_gx_batch_timed(gx, b) ? gx->ev_sync[k] : gx->ev_end[k];
}

/* pl_gpu_mem.c */
pl_status pl_gx_alloc_buffers(pl_gx *gx, pl_error *err);
/* depth: auto: adds slots gx->depth..depth-1 to both buffer tables (existing slots and persistent
 * buffers do not move: graphs captured on them stay valid) with their initial contents. Call with
 * the device idle. gx->depth is not changed here. */
pl_status pl_gx_grow_buffers(pl_gx *gx, int depth, pl_error *err);

/* In-memory inputs (pl_run_io) the uploads read where they are. With stage graphs or plain
 * launches each copy is a call per batch, which can take that batch's address (a segment graph
 * bakes its slot buffer's in): a per-batch input of at least PL_GRAPHS_STAGE_MIN_COPY bytes a
 * batch (where pinned memory pays for its registration) whose buffer only uploads read is
 * registered as pinned memory (cudaHostRegister) and marked in place, so its source copies
 * nothing and pl_gx_host_table gives the uploads the caller's batch. Memory that cannot be
 * registered stays copied. Call after the stages open, before the first batch. */
pl_status pl_gx_in_place(pl_gx *gx, pl_error *err);
void pl_gx_in_place_fini(pl_gx *gx); /* unregisters; the device idle */
/* Slot `slot`'s host buffer table for plain calls of batch `batch` (the executor's count; -1 while
 * capturing: the slot's own): with the inputs in place at the caller's batch. Issuing thread. */
void *const *pl_gx_host_table(pl_gx *gx, int slot, int64_t batch);

/* pl_gpu_capture.c */
/* Creates the streams, per-slot launch streams, per-ring events, graph tables and fault marks for
 * gx->depth and gx->ring (and ev_t0, the run clock, unless it exists: growing the ring keeps it).
 */
pl_status pl_gx_create_objects(pl_gx *gx, pl_error *err);
/* Destroys what pl_gx_create_objects made but ev_t0, and the graphs; NULLs the tables (the device
 * must be idle). */
void pl_gx_destroy_objects(pl_gx *gx);
void pl_gx_probe_marks(pl_gx *gx);
/* Records device stage st of one batch (slot, ring entry r) on s; batch -1 while capturing. */
pl_status pl_gx_record_stage(pl_gx *gx, int st, int slot, int r, int64_t batch, cudaStream_t s,
                             bool capturing, bool timed, pl_error *err);
/* The in-capture waits of stage st (its segment's device preds on other streams). */
pl_status pl_gx_record_cap_waits(pl_gx *gx, int st, cudaStream_t s, pl_error *err);
/* Captures, instantiates and uploads the graph of ring entry r, segment k. */
pl_status pl_gx_capture(pl_gx *gx, int r, int k, bool timed, cudaGraphExec_t *exec, pl_error *err);
/* Stage graphs: captures the graph of compute stage st for slot (its work only), instantiated
 * and uploaded. */
pl_status pl_gx_capture_stage(pl_gx *gx, int slot, int st, cudaGraphExec_t *exec, pl_error *err);
/* --no-graph: loads every compute stage's kernels before the clock starts, by capturing each once
 * and instantiating it (then discarded). Under lazy module loading (CUDA's default) a kernel's
 * first launch loads its module, and that waits for the work in flight: the first checksum after
 * a 412 MB download stalled the compute stream for the whole download. Best effort: a stage that
 * cannot be captured is left to load at its first launch. */
void pl_gx_warm_modules(pl_gx *gx);
/* --no-graph and stage graphs: segment k of batch b on the shared streams. */
pl_status pl_gx_issue_plain(pl_gx *gx, int64_t b, int k, pl_error *err);

/* The work of device stage st for one batch of `slot` on s (its kind's record hook), with no
 * events: what a loop's body holds. */
pl_status pl_gx_record_work(pl_gx *gx, int st, int slot, int64_t batch, cudaStream_t s,
                            pl_error *err);

/* pl_gpu_loop.c */
/* The loops' per-slot state for gx->depth (with pl_gx_create_objects, freed by
 * pl_gx_destroy_objects through pl_gx_loop_destroy). */
pl_status pl_gx_loop_create(pl_gx *gx, pl_error *err);
void pl_gx_loop_destroy(pl_gx *gx);
/* PL_EINPUT, before anything runs, when the plan has a WHILE-node loop (run.loop: device) and
 * this build's CUDA has no conditional nodes (before 12.4): it names the loop and run.loop: host.
 */
pl_status pl_gx_loop_supported(const pl_gx *gx, pl_error *err);
/* The second signal: every loop's next test ends it, on the device (the WHILE nodes launched
 * already) and for host-launched loops; the batches are dropped (PL_INTR_ABORT). */
pl_status pl_gx_loop_abort(pl_gx *gx, pl_error *err);
/* Inside a capture, on its stream s: loop stage st's first test and its WHILE node; the node's
 * body is captured by pl_gx_loop_fill once this capture has ended. */
pl_status pl_gx_loop_node(pl_gx *gx, int st, int slot, cudaStream_t s, pl_error *err);
/* Captures the bodies of the WHILE nodes pl_gx_loop_node made (their stages, then the test),
 * into the graph that holds them; pl_gx_loop_drop forgets them after a failed capture. */
pl_status pl_gx_loop_fill(pl_gx *gx, pl_error *err);
void pl_gx_loop_drop(pl_gx *gx);
/* Host-launched loops of device stages, with graphs: each slot's body graph. */
pl_status pl_gx_loop_capture_bodies(pl_gx *gx, pl_error *err);
/* pl_stage_rt.run_loop: a loop stage on a host worker: a host body as on the host executor; a
 * device body (run.loop: host) launched once per iteration, the test read back in between. */
pl_status pl_gx_run_loop(void *user, const pl_stage_rt *rt, const pl_run_cfg *cfg, int stage,
                         int64_t batch, int worker, void *const *bufs, pl_error *err);

/* pl_gpu_stream.c */
typedef struct pl_gx_streams pl_gx_streams;
/* The mapped memory and device state of every (slot, streaming WHILE-node loop), for gx->depth
 * (called by pl_gx_loop_create; nothing when !gx->streams_on or no such loop). */
pl_status pl_gx_stream_create(pl_gx *gx, pl_error *err);
/* Starts the poller (each phase, before its launches; nothing when it runs or there is none). */
pl_status pl_gx_stream_start(pl_gx *gx, pl_error *err);
/* Waits for the device to be idle, lets the poller take what is left, and joins it: before the
 * stages close (the writers are theirs) and before the ring is made again. */
void pl_gx_stream_stop(pl_gx *gx);
/* Stops it and frees everything (pl_gx_loop_destroy). */
void pl_gx_stream_destroy(pl_gx *gx);
/* Inside a capture, on s, right after loop l's test for `slot` (its counter and the word its
 * decision went to): the stream kernel, when the loop streams. */
pl_status pl_gx_stream_record(pl_gx *gx, int l, int slot, cudaStream_t s, const int *counter,
                              const int *decided, pl_error *err);

/* pl_gpu_launch.c */
void pl_gx_issue_loop(pl_gx *gx);
/* Creates the waker and its side streams (before the clock). */
pl_status pl_gx_wake_init(pl_gx *gx, pl_error *err);
/* Points the waker at the scheduler whose progress it signals (NULL: none, before that
 * scheduler is freed), and forgets what was armed. Not with the scheduler's mutex held. */
void pl_gx_wake_attach(pl_gx *gx, pl_sched *s);
/* After the device is synchronized: destroys the side streams and frees the waker, or leaves it
 * allocated when some host function never ran (after a device fault they are not run). */
void pl_gx_wake_fini(pl_gx *gx);

/* pl_gpu_complete.c */
/* Reads back what it can of segment k's pending batch; `block` waits for the next end event.
 * Returns true when something advanced. Caller does not hold mu. */
bool pl_gx_monitor_step(pl_gx *gx, int k, bool block);

#endif
