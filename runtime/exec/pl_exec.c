/* pl_exec: pl_run, picking the executor. Without CUDA it also defines the GPU entry points as
 * "not built" (with CUDA, runtime/exec/gpu/ defines them). */
#include "pl_exec.h"

#include "pl_exec_host.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef PL_WITH_CUDA
bool pl_gpu_available(void)
{
    return false;
}

pl_status pl_exec_gpu_run(const pl_plan *plan, const pl_run_cfg *cfg, pl_run_result *res,
                          pl_error *err)
{
    (void)plan;
    (void)cfg;
    (void)res;
    return pl_error_set(err, PL_ENODEV,
                        "error: the gpu executor is not available: pipectl was built without CUDA "
                        "(PL_WITH_CUDA=OFF); use --executor host, or rebuild with the CUDA "
                        "toolkit");
}
#endif

pl_exec_kind pl_exec_pick(const pl_plan *plan, pl_exec_kind asked, char *note, size_t cap)
{
    if (note && cap) note[0] = '\0';
    if (asked != PL_EXEC_AUTO) return asked;
    if (pl_gpu_available()) {
        if (note) snprintf(note, cap, "executor: gpu (device %d)", plan->spec->run.device);
        return PL_EXEC_GPU;
    }
#ifdef PL_WITH_CUDA
    if (note) snprintf(note, cap, "executor: host (no GPU found)");
#else
    if (note) snprintf(note, cap, "executor: host (built without CUDA)");
#endif
    return PL_EXEC_HOST;
}

pl_status pl_run(const pl_plan *plan, const pl_run_cfg *cfg, pl_run_result *res, pl_error *err)
{
    pl_run_cfg def;
    if (!cfg) {
        pl_run_cfg_init(&def);
        cfg = &def;
    }
    memset(res, 0, sizeof *res);
    res->batches_planned = plan->batches;
    switch (cfg->executor) {
    case PL_EXEC_HOST:
        return pl_exec_host_run(plan, cfg, res, err);
    case PL_EXEC_GPU:
#ifndef PL_WITH_CUDA
        return pl_exec_gpu_run(plan, cfg, res, err); /* says "built without CUDA" */
#else
        if (!pl_gpu_available())
            return pl_error_set(err, PL_ENODEV,
                                "error: --executor gpu: no usable CUDA device found (see 'pipectl "
                                "doctor'); use --executor host or auto to run on the CPU");
        return pl_exec_gpu_run(plan, cfg, res, err);
#endif
    case PL_EXEC_AUTO:
        break;
    }
    /* The library never prints: the choice goes into the result (after the run: the executors
     * reset it), and the CLI says it. */
    char note[sizeof res->note];
    pl_status st = pl_exec_pick(plan, PL_EXEC_AUTO, note, sizeof note) == PL_EXEC_GPU
                       ? pl_exec_gpu_run(plan, cfg, res, err)
                       : pl_exec_host_run(plan, cfg, res, err);
    memcpy(res->note, note, sizeof note);
    return st;
}
