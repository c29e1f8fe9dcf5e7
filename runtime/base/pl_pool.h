/* pl_pool: the run's persistent host thread pool. Created once per run by the stage runtime
 * (runtime/exec/pl_stage_rt.c) and handed to kinds through pl_run_env.pool, so host ops that run in
 * parallel (search, the host gemm) never create threads per batch. Work is a "job": n tasks
 * numbered 0..n-1 that any thread may take, in any order. The thread that submits a job works on
 * it too, so a job always finishes, however busy the pool is; several host workers may submit
 * jobs at once, and the helpers share themselves among them. */
#ifndef PL_POOL_H
#define PL_POOL_H

#include <stdint.h>

#include "pl_status.h"

typedef struct pl_pool pl_pool;

/* Runs task `task` of a job. `slot` is 0..parallel-1 and unique among the threads working on
 * this job at one time (the submitting thread is slot 0), so a task may use per-slot scratch. */
typedef void (*pl_pool_fn)(void *arg, int64_t task, int slot);

/* Starts a pool of `threads` helper threads (0 is allowed: every job then runs on the thread
 * that submits it). *out is owned by the caller (pl_pool_free). PL_ERUNTIME when a thread
 * cannot start. */
pl_status pl_pool_new(int threads, pl_pool **out, pl_error *err);

/* Stops and joins the helpers; NULL is allowed. No job may be running. */
void pl_pool_free(pl_pool *pool);

/* Helper threads in the pool. */
int pl_pool_threads(const pl_pool *pool);

/* Grows the pool to at least `threads` helpers (never shrinks). For a stage whose `threads:` asks
 * for more than the run's workers; call it before batches run (a kind's open hook). */
pl_status pl_pool_reserve(pl_pool *pool, int threads, pl_error *err);

/* Runs fn(arg, t, slot) for every t in 0..n_tasks-1 on at most `parallel` threads (the caller
 * and up to parallel-1 helpers) and returns when all have finished. pool NULL or parallel <= 1:
 * all tasks run on the caller, in order. Thread-safe: any number of threads may call it at
 * once. */
void pl_pool_run(pl_pool *pool, int64_t n_tasks, int parallel, pl_pool_fn fn, void *arg);

#endif
