/* pl_run: the run configuration's defaults, the graph mode auto picks, and the result's cleanup. */
#include "pl_run.h"

#include <stdlib.h>
#include <string.h>

void pl_run_cfg_init(pl_run_cfg *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->executor = PL_EXEC_AUTO;
    cfg->use_graphs = true;
    cfg->graph_mode = PL_GRAPHS_AUTO;
    cfg->fail_stage = -1;
    cfg->fail_batch = -1;
    cfg->timing_period = 16;
}

int pl_graph_mode_auto(const pl_plan *plan)
{
    const pl_spec *spec = plan->spec;
    for (int i = 0; i < plan->n_stages; i++) {
        pl_engine e = plan->stages[i].engine;
        if (e != PL_ENGINE_H2D && e != PL_ENGINE_D2H) continue;
        const pl_stage *st = &spec->stages[i];
        for (int r = 0; r < st->n_reads; r++)
            if (spec->buffers[st->reads[r].index].bytes >= PL_GRAPHS_STAGE_MIN_COPY)
                return PL_GRAPHS_STAGE;
    }
    return PL_GRAPHS_SEGMENT;
}

void pl_run_result_fini(pl_run_result *res)
{
    if (!res) return;
    pl_timing_free(res->timing);
    res->timing = NULL;
    for (int i = 0; i < res->n_outputs; i++) {
        free(res->outputs[i].path);
        free(res->outputs[i].batch_checksums);
    }
    free(res->outputs);
    res->outputs = NULL;
    res->n_outputs = 0;
}
