/* pl_sched: the host scheduler both executors share. A bounded pool of worker threads runs the
 * stages of the plan streams it owns (all of them on the host executor, the host streams on the
 * GPU executor): each stream is a cursor that runs its stages in order, batch after batch, like a
 * CUDA stream; a stream whose next (stage, batch) has its predecessors and cross-batch deps done
 * joins a ready queue, and any free worker takes it. So a pipeline with 70,000 branches needs no
 * more threads than workers, and a worker index (which selects a Lua state) is never used by two
 * stages at once.
 *
 * A parallel stream (a host stage with `parallel: N`, alone on its stream) is taken by up to N
 * workers at once, each with the next batch; its batches finish in any order, and done[] counts
 * only the unbroken prefix (the rest waits in a bitmap), so every other stage still sees them in
 * batch order. It runs at most 64 batches ahead of its oldest unfinished one.
 *
 * Completion is per-stage counters under one mutex: done[s] = n means batches 0..n-1 of stage s
 * finished. The GPU executor marks its device stages done as it reads their ends back.
 *
 * Failures drain: a stage failing at batch k lowers the limit to k, so no stage starts batch k or
 * later, while every earlier batch still finishes. Output stages (kinds with PL_ROLE_OUTPUT:
 * sinks) run batch b only once every other stage has finished batch b (the commit point), so a
 * fast lane's sink never writes a batch a slow lane then fails on: every sink holds exactly
 * batches 0..k-1, on both executors. The error kept is the one of the lowest batch. */
#ifndef PL_SCHED_H
#define PL_SCHED_H

#include <pthread.h>

#include "pl_buffers.h"
#include "pl_run.h"
#include "pl_stage_rt.h"

typedef struct pl_sched {
    const pl_plan *plan;   /* borrowed */
    const pl_run_cfg *cfg; /* borrowed */
    const pl_stage_rt *rt; /* borrowed: opened stages */
    pl_buffers *bufs;      /* borrowed: the memory host stages see, per slot */
    pl_timing *timing;     /* borrowed: host stages' spans are recorded here; may be NULL */
    int64_t t0_ns;         /* CLOCK_MONOTONIC at the run's start: spans are relative to it */
    int n_stages, n_workers;

    pthread_mutex_t mu;
    pthread_cond_t work;     /* workers: the queue grew, or the run is over */
    pthread_cond_t progress; /* the executor's thread: a stage finished, or something failed */
    int64_t *done;           /* [stage]: batches finished, in order */
    int64_t limit;           /* no stage starts a batch >= limit */
    int64_t started;         /* 1 + the highest batch a scheduled stage started */
    bool abort;              /* end now: executor teardown */
    bool failed;             /* an error is recorded */
    pl_status status;        /* the error of the lowest failed batch */
    pl_error err;
    int64_t err_batch;

    /* Streams: cursors, ownership, the ready queue. */
    bool *owned;
    int *cur;               /* [stream]: index of its next stage */
    int64_t *cur_b;         /* [stream]: its batch */
    bool *queued, *running; /* running: a serial stream's stage, or all of a parallel one's */
    /* Parallel streams (pl_stream.parallel > 1: one stage, several batches at once): */
    int *in_flight; /* [stream]: its batches running */
    uint64_t *fin;  /* [stream]: bit i set: batch done[its stage] + i finished (out of order) */
    bool *live;     /* [stream]: owned and its cursor is below the limit */
    int *queue;     /* ring of stream indices */
    int q_head, q_len;
    int n_live;            /* streams that are live */
    bool *is_out;          /* [stage]: an output stage (waits for the commit point) */
    bool *after_out;       /* [stage]: runs after an output stage in the batch (not waited for) */
    int64_t all_done;      /* batches every stage has finished */
    int at_all;            /* stages whose done == all_done */
    pl_batch_clock *clock; /* borrowed, may be NULL: when batches completed */
    bool batch_progress;   /* a host stage wakes the progress waiters only when it completes a
                            * batch (pl_sched_set_batch_progress) */
    int64_t commit;        /* batches every non-output stage has finished */
    int at_commit;         /* non-output stages whose done == commit */
    int *out_streams;      /* streams holding output stages */
    int n_out_streams;
    int **dep_streams; /* [stage]: streams whose next stage may wait on it */
    int *n_dep_streams;

    pthread_t *threads;
    void *worker_args; /* owned: what each thread was started with */
    int n_threads;     /* started */
    int n_running;     /* worker threads still in their loop */
    int n_busy;        /* threads inside a stage (workers, or a helper: pl_sched_help) */
    bool spawned;      /* pl_sched_spawn ran */
    bool go;           /* pl_sched_start ran: workers may take streams */
    bool go_spin;      /* atomic; set after `go`, mu let go: what workers spin on before it */
    uint64_t
        progress_gen; /* bumped with every broadcast of `progress` (pl_sched_wait_progress_since) */
    bool init;
} pl_sched;

/* Before start: batch completions are written to *clock (borrowed; it may outlive several
 * schedulers, e.g. depth: auto's two phases). */
void pl_sched_set_clock(pl_sched *s, pl_batch_clock *clock);
/* Before spawn: the progress waiter wants completed batches only (the host executor's reporting
 * thread), so a host stage that completes no batch wakes nobody; failures, limits, an abort and
 * workers leaving still do. Without it (the GPU executor's issue loop, which launches when a
 * host stage it waits for is done) every host stage's completion wakes the waiters. */
void pl_sched_set_batch_progress(pl_sched *s);
/* Prepares the scheduler (no thread yet). `owned[k]`: the scheduler runs plan stream k; NULL:
 * all of them. `workers` threads will run them (>= 1), but no more than the streams it runs:
 * worker indices 0..min(workers, those streams)-1. `timing` may be NULL (no timing). */
pl_status pl_sched_init(pl_sched *s, const pl_plan *plan, const pl_run_cfg *cfg,
                        const pl_stage_rt *rt, pl_buffers *bufs, const bool *owned, int workers,
                        pl_timing *timing, pl_error *err);
/* Before spawn and start: the run goes on from batch `first` (batches < first are done: an
 * earlier scheduler ran them, e.g. depth: auto's calibration at another depth), so every stage
 * counts them done and every stream starts at `first`. */
void pl_sched_begin_at(pl_sched *s, int64_t first);
/* Creates the worker threads, which wait for pl_sched_start: per-run setup, done before the run's
 * clock starts (creating 16 threads took about 1 ms, measured, and it delayed the first stage by
 * as much when it was part of the start). On failure to start one thread the run fails (recorded)
 * and the threads started go on, draining as after any failure. Optional: start spawns them when
 * this was not called. */
void pl_sched_spawn(pl_sched *s);
/* Lets the workers run the streams; t0_ns is the run's clock origin (stage spans are relative to
 * it). Spawns the workers first unless pl_sched_spawn did. */
void pl_sched_start(pl_sched *s, int64_t t0_ns);
/* Waits for every worker to leave (all owned streams reached the limit, or abort). */
void pl_sched_join(pl_sched *s);
/* Frees the scheduler; workers still there (spawned, and the run never started or joined) are
 * aborted and joined first. Safe on a zeroed or failed-init scheduler. Not with s->mu held. */
void pl_sched_fini(pl_sched *s);

/* The functions below are called with s->mu held. */

/* Stage `stage` (not owned: a device stage) finished batches < count. */
void pl_sched_set_done(pl_sched *s, int stage, int64_t count);
/* Records a failure at batch `batch` (the lowest batch's error wins) and lowers the limit to it. */
void pl_sched_fail(pl_sched *s, int64_t batch, pl_status st, const pl_error *e);
/* Lowers the limit (a stop, or a device failure handled by the caller); never raises it. */
void pl_sched_set_limit(pl_sched *s, int64_t limit);
/* Ends the run now: workers leave after the stage they run. */
void pl_sched_abort(pl_sched *s);
/* Batches finished by every stage (what the outputs hold). */
int64_t pl_sched_batches_done(const pl_sched *s);
/* Can (stage, batch) start: its intra-batch preds and cross-batch deps are done? */
bool pl_sched_ready(const pl_sched *s, int stage, int64_t batch);
/* Waits on s->progress (a stage finished, something failed) for at most `us` microseconds; `us`
 * < 0: until woken (pl_sched_notify_progress is how something outside the scheduler wakes it). */
void pl_sched_wait_progress(pl_sched *s, long us);
/* The progress generation: it changes with every broadcast of s->progress. */
uint64_t pl_sched_progress_gen(const pl_sched *s);
/* Waits like pl_sched_wait_progress, but returns at once when the generation is no longer `gen`:
 * a caller that read `gen` under mu, let go of it to do something (a device query) and took it
 * again misses no progress signalled meanwhile. */
void pl_sched_wait_progress_since(pl_sched *s, uint64_t gen, long us);
/* Wakes the progress waiters for something outside the scheduler (the GPU executor: a device
 * completion), bumping the generation. */
void pl_sched_notify_progress(pl_sched *s);
/* Every worker has left its loop. */
bool pl_sched_idle(const pl_sched *s);
/* The run's host work is over: every owned stream reached the limit and no stage is running
 * (the workers may not have left yet). What the executors stop the run's clock at: the threads'
 * leaving and joining (50-110 us, measured on the H200 host) is teardown. */
bool pl_sched_finished(const pl_sched *s);
/* The calling thread, which is not one of the workers, runs one queued host stage as worker
 * `worker` would (unlocking mu while it runs) and returns true; false when none is queued. The
 * caller guarantees that no other thread runs stages as `worker` (the GPU executor's issue loop:
 * an index past the workers', pl_sched_help_worker). Used at a run's tail, when the issue loop
 * has nothing left to launch: the sink of the last batch then starts without the 30-60 us a
 * sleeping worker takes to wake (measured on the H200 host). */
bool pl_sched_help(pl_sched *s, int worker);
/* The worker index a helper thread may use: one the workers do not (they use 0..n_workers-1),
 * below `of` (the stage runtime's env.workers); -1 when there is none. */
int pl_sched_help_worker(const pl_sched *s, int of);
/* Waits for progress like pl_sched_wait_progress_since, but first spins for up to `spin_us`
 * without mu (the generation is read atomically): a condition variable's wake-up took 6-17 us on
 * the H200 host, the whole wait at the run's start and end. For waits known to be short; spin_us
 * 0: the plain wait. */
void pl_sched_spin_progress_since(pl_sched *s, uint64_t gen, long spin_us, long us);

int64_t pl_now_ns(void); /* CLOCK_MONOTONIC, nanoseconds */

#endif
