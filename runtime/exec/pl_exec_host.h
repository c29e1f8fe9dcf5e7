/* pl_exec_host: the host executor: the same plan on a pool of CPU workers (pl_sched.c), memcpy
 * for copies and each kernel op's C reference. CI's executor, and the reference the GPU
 * executor's results are compared with. */
#ifndef PL_EXEC_HOST_H
#define PL_EXEC_HOST_H

#include "pl_run.h"

pl_status pl_exec_host_run(const pl_plan *plan, const pl_run_cfg *cfg, pl_run_result *res,
                           pl_error *err);

#endif
