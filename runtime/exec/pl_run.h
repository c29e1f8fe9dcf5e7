/* pl_run: what a run is asked (pl_run_cfg) and what it did (pl_run_result): the types both
 * executors take and fill, beneath the dispatcher (pl_exec.h) that picks one of them. */
#ifndef PL_RUN_H
#define PL_RUN_H

#include <signal.h>

#include "pl_depth.h"
#include "pl_plan.h"
#include "pl_timing.h"

typedef enum pl_exec_kind { PL_EXEC_AUTO, PL_EXEC_HOST, PL_EXEC_GPU } pl_exec_kind;

/* pl_run_cfg.graph_mode */
enum { PL_GRAPHS_SEGMENT, PL_GRAPHS_STAGE, PL_GRAPHS_AUTO };

/* Copies of at least this many bytes make PL_GRAPHS_AUTO choose stage graphs. */
#define PL_GRAPHS_STAGE_MIN_COPY (UINT64_C(1) << 20)

typedef struct pl_run_cfg {
    pl_exec_kind executor;
    bool use_graphs; /* gpu: CUDA Graphs (default) or plain stream launches (--no-graph) */
    /* gpu, with use_graphs: which graphs (`--graphs`). PL_GRAPHS_SEGMENT: one graph per slot and
     * segment, copies included. PL_GRAPHS_STAGE: one graph per slot and compute stage; copies and
     * the events between stages are plain calls on one stream per engine, so uploads and
     * downloads each keep their own copy engine, in order. PL_GRAPHS_AUTO (default):
     * pl_graph_mode_auto (docs/architecture.md, "The GPU executor"). */
    int graph_mode;
    int workers; /* host workers for host-engine stages; 0 = default */
    /* Set (to nonzero) by a signal handler: stop issuing batches, finish or abandon those in
     * flight, close stages so completed outputs are kept. Whoever sets it calls pl_intr_wake()
     * after (async-signal-safe): the host executor sleeps until woken, never on a timer. The
     * process's interrupt (pl_intr_raise) stops a run as well, and also the long stages in
     * progress. Borrowed; may be NULL. */
    volatile sig_atomic_t *stop;
    /* Called after each batch completes, in batch order (progress bar). May be NULL. */
    void (*on_batch)(void *user, int64_t done, int64_t total);
    void *user;
    /* Testing: make stage `fail_stage` fail on batch `fail_batch` (-1: never). Batches here and
     * in the result are counted as the executors run them: with a shard (spec->run.shard) the
     * i-th batch this process runs, which the stage runtime maps to the pipeline's index. */
    int fail_stage;
    int64_t fail_batch;
    /* gpu, CUDA Graphs: device stages are timed (spans) on one batch in timing_period, in the
     * middle of each period (b % N == N / 2; a shorter run: its middle batch); 0 = every batch, -1
     * = never (spans of untimed device stages stay {0, 0}). Default 16: timing events inside a
     * graph slow it down (docs/perf.md). Stage graphs sample the same way (their events are plain
     * records around the graph launches); plain launches (--no-graph) time every batch unless -1.
     * The host executor ignores it. */
    int timing_period;
    /* gpu, CUDA Graphs: when set, each lean graph of ring entry r < depth (one per slot and
     * segment) is written before instantiation as "graph_slot<r>_seg<k>.dot"
     * (cudaGraphDebugDotPrint) and "graph_slot<r>_seg<k>.topo" (its node types and edges, the
     * text a bundle digests) into this existing folder (runtime/exec/gpu/pl_gpu_dot.c). Borrowed;
     * NULL: none. The host executor ignores it. */
    const char *dot_dir;
    /* Spans of the first `trace_batches` batches are kept as they were (pl_timing.h: the log),
     * for the timeline (`--trace`, bundles' trace.json) and tests; 0 (default): none. Every
     * other figure comes from fixed-size statistics, so memory does not grow with the run. */
    int64_t trace_batches;
    /* depth: auto: called once, on the run's calling thread, when the calibration batches are
     * done and the depth is chosen (before the other batches run), so a caller can say it then.
     * May be NULL. */
    void (*on_depth)(void *user, const pl_depth_choice *choice);
    void *depth_user;
    /* Host buffers bound to the caller's memory (pl_stage.h: pl_run_io), each one's stage
     * resolved; the kinds read them through pl_run_env.io. Borrowed; NULL and 0: none. */
    const pl_run_io *io;
    int n_io;
} pl_run_cfg;

/* What `--trace` keeps: at most this many spans (batches x stages), 4 MiB; the trace of a longer
 * run shows its first batches and says so. 2^18 slices are a JSON file of about 140 MB, about
 * what Perfetto and chrome://tracing still open comfortably (2^20 made 560 MB). */
#define PL_TRACE_MAX_SPANS (INT64_C(1) << 18)

void pl_run_cfg_init(pl_run_cfg *cfg);

/* What PL_GRAPHS_AUTO runs for this plan: PL_GRAPHS_STAGE when some copy stage moves at least
 * PL_GRAPHS_STAGE_MIN_COPY bytes per batch (there an upload queued behind another slot's long
 * download costs a whole copy time; 1 MiB takes about 20 us at 55 GB/s), else PL_GRAPHS_SEGMENT
 * (small copies: one launch per segment instead of one call per stage, measured 19 against 58 us
 * per batch for 64 KiB through 10 kernels on the H200). */
int pl_graph_mode_auto(const pl_plan *plan);

/* When batches completed (every stage done), on the run's clock: the batch that starts the
 * steady state and the latest one, so the report can give a per-batch figure without the
 * pipeline's fill (docs/json.md, steady_per_batch_s). Written by the scheduler under its mutex. */
typedef struct pl_batch_clock {
    /* The batch whose completion the steady state is measured from: the depth (the batches
     * before it hold the pipeline's fill); with depth: auto, once the depth is chosen, the
     * calibration batches plus the chosen depth. */
    int64_t mark_b;
    int64_t mark_ns; /* when it completed; -1: not (yet) */
    int64_t last_b;  /* the latest batch completed; -1: none */
    int64_t last_ns; /* when */
} pl_batch_clock;

typedef struct pl_run_result {
    const char *executor; /* "host" or "gpu" (static string) */
    bool graphs;
    const char *graph_mode; /* "segment", "stage" or "none" (static string; "none" on the host) */
    int64_t batches_issued;
    int64_t batches_done; /* completed in order, outputs written */
    int64_t wall_ns;
    int n_stages;
    pl_timing *timing; /* stage statistics of completed batches, and the span log; owned */
    char device_name[128];
    int64_t batches_planned; /* batches the run was asked for */
    int workers;             /* host workers used */
    pl_output *outputs;      /* one per sink stage, in stage order; owned */
    int n_outputs;
    /* What `--executor auto` picked and why ("executor: host (no GPU found)"); "" when the caller
     * chose. The library prints nothing: the CLI prints this line to stderr. */
    char note[96];
    /* The depth the run's batches ran at: plan->depth, or with depth: auto the chosen one (the
     * calibration batches ran at plan->depth); depth_auto says how it was chosen (.on false for
     * a fixed depth). */
    int depth;
    pl_depth_choice depth_auto;
    pl_batch_clock batch_clock;
    /* The signal that interrupted the run (PL_EINTR), set by the caller that handled it (the
     * executors leave it 0): the JSON's exit_code is then 128 + it, as the process's. */
    int signal;
} pl_run_result;

void pl_run_result_fini(pl_run_result *res); /* frees timing and outputs; safe on a zeroed result */

#endif
