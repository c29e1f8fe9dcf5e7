/* pl_exec: running a plan. One entry point, pl_run, over two executors (host: pl_exec_host.c;
 * gpu: runtime/exec/gpu/pl_exec_gpu.c), whose configuration and result record (read by the
 * report, the trace and bundles) are pl_run.h's. */
/* Layer runtime/exec: owns running a plan: the run's configuration and result (pl_run.h), the
 * host scheduler both executors share, the per-run stage runtime, timing statistics, engine busy
 * times, the `depth: auto` driver and the host executor; the GPU executor is runtime/exec/gpu.
 * May include runtime/base, lua, runtime/device, runtime/core, stages and parser. */
#ifndef PL_EXEC_H
#define PL_EXEC_H

#include "pl_run.h"

/* Runs the plan's batches. On error or stop, completed batches' outputs are kept (stages are
 * closed with the count), res describes what completed, and the status says why it ended
 * (PL_EINTR when cfg->stop was raised). */
pl_status pl_run(const pl_plan *plan, const pl_run_cfg *cfg, pl_run_result *res, pl_error *err);
/* What pl_run runs for `asked`: itself unless PL_EXEC_AUTO, which picks gpu when a device is
 * usable, else host. For auto, writes why into note (cap bytes; "executor: host (no GPU found)"),
 * else "". Lets a caller say the choice before a long run; note may be NULL. */
pl_exec_kind pl_exec_pick(const pl_plan *plan, pl_exec_kind asked, char *note, size_t cap);

/* Returns PL_ENODEV with a clear message when built without CUDA or no device is present. */
pl_status pl_exec_gpu_run(const pl_plan *plan, const pl_run_cfg *cfg, pl_run_result *res,
                          pl_error *err);
/* True when a CUDA device is usable (cheap; caches the answer). */
bool pl_gpu_available(void);

#endif
