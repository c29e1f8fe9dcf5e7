/* pl_exec_gpu_int: what the GPU executor (pl_exec_gpu.c) exposes to `pipectl bench` and the GPU
 * tests, and its one test-only kernel (pl_exec_kernels.cu). Built only with PL_WITH_CUDA. */
#ifndef PL_EXEC_GPU_INT_H
#define PL_EXEC_GPU_INT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Enqueues the fault-injection kernel on `stream` (cudaStream_t): when the 32-bit word at
 * trigger_dev (host-mapped) is nonzero it stores to an address nothing is allocated at, so the
 * launch faults with cudaErrorIllegalAddress. Returns cudaError_t as int. */
int pl_exec_launch_fault(const void *trigger_dev, void *stream);

/* Enqueues a loop's test on `stream` (pl_gpu_loop.c): iterations done = 0 when `first`, else
 * *counter + 1, stored into *counter and *index (index may be NULL); another iteration runs when
 * they are below `limit`, *cond (NULL: none) is nonzero and the device word *stop is zero: that
 * goes into the conditional handle `handle` when `set` (CUDA 12.4+ builds), into the device word
 * *decided, and into the host-mapped *go (may be NULL). Capturable. Returns cudaError_t as int. */
int pl_exec_launch_loop_test(unsigned long long handle, int set, int *counter, int first,
                             const int *cond, int *index, int limit, const int *stop, int *decided,
                             int *go, void *stream);

/* A loop's stream on the device (pl_gpu_stream.c, docs/architecture.md "Streams"): what the
 * stream kernel of one slot's loop reads and writes. Device memory: the loop's counter and the
 * test's decision (`decided`: another iteration runs), `from` [rows, cols] of col_bytes each,
 * `finished` [rows] (NULL: none), and `state` (int[3]: the batches this slot has streamed, the
 * deliveries of the one streaming, the columns delivered). Host-mapped (the device addresses of
 * pinned host memory): `mirror`, laid out as `from`; `fin` [ring][rows] and `recs` [ring][4] (step,
 * columns written, end, unused) per delivery; `head` = (batches streamed << 32) | deliveries of the
 * batch, written after them; `ack`, the host's: the same count of what it has taken. */
typedef struct pl_stream_dev {
    const int *counter, *decided;
    int every, start, ring;
    const char *from;
    const int *finished;
    long long rows, cols, col_bytes;
    int *state;
    char *mirror;
    int *fin, *recs;
    unsigned long long *head;
    const unsigned long long *ack;
} pl_stream_dev;

/* Enqueues the stream kernel on `stream` (cudaStream_t), right after a loop's test: when a
 * delivery is due (pl_stream_due: the loop ended, or the iterations done are a multiple of
 * every), it waits until the host has taken all but ring - 1 of the deliveries before it (and
 * every earlier batch of the slot), copies the columns written since the last delivery of every
 * row into the mirror, the finished flags and the delivery's record into its ring entry, then,
 * after a system-wide fence, the new head. One block. Capturable. Returns cudaError_t as int. */
int pl_exec_launch_loop_stream(const pl_stream_dev *a, void *stream);

#ifndef __cplusplus
#include "pl_run.h"

/* The plain replay loop `pipectl bench` compares the executor with: sets up the plan exactly as
 * pl_exec_gpu_run does with timing period `timing_period` (buffers, lean and timed graphs per
 * slot, same streams), then launches the slot graphs round-robin `launches` times (after
 * `warmup` launches), launch i using the graph the executor would use for batch i (timed on
 * sampled batches), with nothing else on the host: no host stages, no waits, no monitoring.
 * *ns_per_launch = host time from the first timed launch to the final synchronize, divided by
 * `launches`. Host stages of the plan are not run. */
pl_status pl_gpu_replay_loop(const pl_plan *plan, int timing_period, int64_t warmup,
                             int64_t launches, double *ns_per_launch, pl_error *err);

/* The alternative to one graph per slot, for `pipectl bench`: sets up the plan like
 * pl_gpu_replay_loop with timing off (no host stages), captures ONE graph holding
 * `batches_per_graph` consecutive batches of the device stages (batch i in slot i % depth, the
 * same intra-batch and cross-batch waits as --no-graph, the lean graphs' end events per batch),
 * instantiates and uploads it, then launches it `warmup` + `launches` times on one stream.
 * *ns_per_batch = host time from the first timed launch to the final synchronize, divided by
 * launches * batches_per_graph. */
pl_status pl_gpu_replay_onegraph(const pl_plan *plan, int batches_per_graph, int64_t warmup,
                                 int64_t launches, double *ns_per_batch, pl_error *err);

/* pl_exec_gpu_run, also giving the time from the first launch to the last batch read back (host
 * clock, nanoseconds): what `pipectl bench` times runs with, whatever the timing mode. */
pl_status pl_gpu_run_active(const pl_plan *plan, const pl_run_cfg *cfg, pl_run_result *res,
                            int64_t *active_ns, pl_error *err);

/* Raw copy and kernel times on `device` for `bytes` (pinned host <-> device), best of `reps`,
 * nanoseconds: one upload, one download, one upload and one download at once (both finished). */
typedef struct pl_gpu_copy_times {
    double h2d_ns, d2h_ns, both_ns;
} pl_gpu_copy_times;
pl_status pl_gpu_measure_copies(int device, uint64_t bytes, int reps, pl_gpu_copy_times *out,
                                pl_error *err);
/* Time of one busy kernel asked to spin `us` microseconds (best of reps), nanoseconds. */
pl_status pl_gpu_measure_busy(int device, double us, int reps, double *ns, pl_error *err);
#endif

#ifdef __cplusplus
}
#endif

#endif
