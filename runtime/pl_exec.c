/* pl_exec: picks the executor. STUB: being written. */
#include "pl_exec.h"

#include <stdlib.h>
#include <string.h>

void pl_run_cfg_init(pl_run_cfg *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->executor = PL_EXEC_AUTO;
    cfg->use_graphs = true;
    cfg->fail_stage = -1;
    cfg->fail_batch = -1;
}

void pl_run_result_fini(pl_run_result *res)
{
    if (!res) return;
    free(res->spans);
    res->spans = NULL;
}

pl_status pl_run(const pl_plan *plan, const pl_run_cfg *cfg, pl_run_result *res, pl_error *err)
{
    (void)plan;
    (void)cfg;
    (void)res;
    return pl_error_set(err, PL_ERUNTIME, "error: executors not built yet");
}
