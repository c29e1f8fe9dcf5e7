/* pl_stage_rt: the per-run side of stage kinds, shared by both executors: open every stage's
 * state before the first batch, run one (stage, batch) on the host with its NVTX range and the
 * test failure injection, and close every opened stage with its completed count, also after an
 * error or Ctrl-C, collecting what the sinks wrote. */
#ifndef PL_STAGE_RT_H
#define PL_STAGE_RT_H

#include "pl_run.h"

struct pl_stage_rt;

/* Runs loop stage `stage` of batch `batch` (the executor's count) as pl_stage_rt_run_host would
 * run a stage; `user` is pl_stage_rt.loop_user. */
typedef pl_status (*pl_loop_run_fn)(void *user, const struct pl_stage_rt *rt, const pl_run_cfg *cfg,
                                    int stage, int64_t batch, int worker, void *const *bufs,
                                    pl_error *err);

typedef struct pl_stage_rt {
    const pl_plan *plan; /* borrowed */
    pl_run_env env;      /* what every hook sees (env.spec borrowed from the plan) */
    void **state;        /* [stage index]: from the kind's open(), or NULL */
    bool *opened;        /* [stage index]: open() succeeded, so close() is owed */
    int n_stages;
    /* How a loop stage runs on a host worker: NULL is pl_stage_rt_run_loop; the GPU executor
     * sets its own after pl_stage_rt_open (a device body launched once per iteration). */
    pl_loop_run_fn run_loop;
    void *loop_user;
    /* The run's in-memory bindings, copied from its configuration (env.io points here), so the
     * executors can mark inputs in place; owned. */
    pl_run_io *io;
    /* Host executor, inputs in place: [worker * n_buffers] buffer tables, the slot's with each
     * such input's entry pointing at the caller's batch; NULL when none. */
    void **tables;
    int n_host_in_place;
} pl_stage_rt;

/* Default number of host workers for a plan: max(online CPUs, streams), at most 64. */
int pl_default_workers(const pl_plan *plan);

/* Fills rt->env (batches and depth from the plan (with depth: auto, env.depth = plan->depth_cap:
 * the most slots the run may grow to; the executor points rt->plan at the plan of the chosen depth
 * before the batches after the calibration run), seed from the spec, `workers` host workers,
 * `open_bufs`: slot 0's buffers, for the kinds' open() only (pl_run_env.open_bufs), `gpu`: the
 * GPU executor's device state, NULL on the host executor), the in-memory bindings of `cfg` (may
 * be NULL: none), starts the run's thread
 * pool (env.pool: workers - 1 helpers; freed by pl_stage_rt_close after every stage closed) and
 * opens every stage in plan order. On failure the stages already opened are closed (completed 0,
 * failed) and everything is freed; the error record names the stage (err->stage; the message is
 * the kind's own). */
pl_status pl_stage_rt_open(pl_stage_rt *rt, const pl_plan *plan, const pl_run_cfg *cfg, int workers,
                           void *const *open_bufs, struct pl_gpu_ctx *gpu, pl_error *err);

/* In-memory inputs in place (pl_run_io.in_place): on the host executor (gpu NULL), an input
 * whose buffer no stage writes but the source it replaces is read where it is: pl_stage_rt_open
 * marks it, and pl_stage_rt_run_host gives every stage a buffer table whose entry for it points
 * at the caller's batch (the source copies nothing). The GPU executor marks its own (its uploads
 * read them: runtime/exec/gpu/pl_gpu_mem.c). */

/* Runs stage `stage` of batch `batch` with run_host (a loop stage with rt->run_loop): ctx.worker =
 * worker (0..env.workers-1; the caller guarantees no two threads run hooks with the same worker at
 * once), bufs = that slot's buffer table. `batch` is the executor's count (the i-th batch this
 * process runs); the kind gets the pipeline's index of it, ctx.batch (the same without a shard:
 * spec->run.shard). Wraps it in an NVTX range "<stage> #<ctx.batch>". A failure is attached to the
 * stage and ctx.batch with pl_error_stage (so hooks need not name them). When
 * cfg->fail_stage/fail_batch match (fail_batch counts as `batch` does), fails instead with "stage
 * 'x', batch N: injected failure" (PL_ERUNTIME). */
pl_status pl_stage_rt_run_host(const pl_stage_rt *rt, const pl_run_cfg *cfg, int stage,
                               int64_t batch, int worker, void *const *bufs, pl_error *err);

/* A loop stage's batch on the host: before each iteration, `index` (when given) gets the
 * iterations done; the body runs again while they are below count (when given) and max and the
 * `while` buffer (when given) is nonzero, its stages with pl_stage_rt_run_host one after another
 * in the plan's order (pl_plan_loop.body). bufs: the slot's buffers, as for run_host (every
 * buffer the body touches must be there: host memory on the host executor, a host body on the
 * GPU executor). The first failing body stage's error ends it. */
pl_status pl_stage_rt_run_loop(const pl_stage_rt *rt, const pl_run_cfg *cfg, int stage,
                               int64_t batch, int worker, void *const *bufs, pl_error *err);

/* Closes every opened stage: completed[stage] = batches that stage finished (NULL: 0 each),
 * `failed` = the run ended with an error or a stop. Before closing a sink, records its output in
 * res->outputs (when res is not NULL). Always frees rt's memory. Returns the first close error
 * (in err, which may be NULL); the caller keeps an earlier run error in preference. */
pl_status pl_stage_rt_close(pl_stage_rt *rt, const int64_t *completed, bool failed,
                            pl_run_result *res, pl_error *err);

#endif
