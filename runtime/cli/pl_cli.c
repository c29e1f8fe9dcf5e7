/* pl_cli: the command table, prefix lookup and the shared usage/help/failure helpers. */
#include "pl_cli.h"

#include <string.h>

const pl_cmd pl_cmds[] = {
    {"run", "pipectl run [options] FILE", "run a pipeline batch after batch",
     "  --batches N          batches to run (overrides run.batches)\n"
     "  --depth N            slots in flight (overrides run.depth)\n"
     "  --executor E         auto (default) | host | gpu\n"
     "  --no-graph           gpu: plain stream launches instead of CUDA Graphs\n"
     "  --timing T           gpu: device stage times: sample (default: one batch in 16, mid-\n"
     "                       period), all (every batch; slower with CUDA Graphs) or off;\n"
     "                       PIPECTL_GPU_SPANS=0 in the environment also means off\n"
     "  --trace FILE         write the timeline as Chrome trace JSON (Perfetto, chrome://tracing)\n"
     "  --json               print the summary as one JSON object on stdout\n"
     "  --quiet              no progress bar, no summary table\n"
     "  --workers N          host worker threads (default: max(CPUs, streams))\n"
     "  --fail-at STAGE:B    testing: make STAGE fail on batch B (exit 1, outputs kept)\n"
     "environment:\n"
     "  PIPECTL_GPU_SPANS=0      no device timing (as --timing off)\n"
     "  PIPECTL_GPU_RUNAHEAD=0   gpu: one graph per slot, relaunched only after the host read\n"
     "                           back its previous batch (slower; see docs/perf.md)\n"
     "  PIPECTL_FAULT_MARKS=1    gpu: per-stage completion marks in the graphs, to name a\n"
     "                           faulting stage for certain (slower)\n"
     "  PIPECTL_NVTX=0           no NVTX ranges\n"
     "  PIPECTL_LUA_INSTRUCTIONS, PIPECTL_LUA_MEMORY   limits of a pipeline.lua script\n",
     pl_cmd_run},
    {"check", "pipectl check FILE...", "check pipelines for errors without running them", "",
     pl_cmd_check},
    {"plan", "pipectl plan [--dot] [--depth N] FILE", "print the compiled stream/event plan",
     "  --dot                print Graphviz DOT instead of the listing\n"
     "  --depth N            slots in flight (overrides run.depth)\n",
     pl_cmd_plan},
    {"doctor", "pipectl doctor", "describe the GPU and measure copy bandwidth and launch cost", "",
     pl_cmd_doctor},
    {"bench", "pipectl bench [options]", "measure pipelines against the physical bound",
     "  --batches N          batches per balanced-pipeline run (default 64)\n"
     "  --small-batches N    batches per small-batch run (default 2000)\n"
     "  --small-depth N      depth of the small-batch runs (default 3)\n"
     "  --small-only         only the stage and small-batch parts\n"
     "  --quick              one size, fewer configurations, one run each, 500 small batches\n"
     "  --reps N             runs per configuration, the best kept (default 3)\n"
     "  --device N           CUDA device (default 0)\n"
     "  --baseline PATH      the bench_baseline program (default: next to pipectl)\n"
     "environment: as for 'pipectl run'\n",
     pl_cmd_bench},
    {"version", "pipectl version", "print the version", "", pl_cmd_version},
    {"schema", "pipectl schema", "print the JSON Schema of pipeline.yaml (for editors)",
     "  (no options) e.g. pipectl schema > pipeline.schema.json, then start a pipeline file\n"
     "  with '# yaml-language-server: $schema=pipeline.schema.json'\n",
     pl_cmd_schema},
    {"help", "pipectl help [COMMAND | kinds | KIND]",
     "list commands, or describe one; list stage kinds, or one kind's keys", "", pl_cmd_help},
    {NULL, NULL, NULL, NULL, NULL},
};

const pl_cmd *pl_cmd_find(const char *name, pl_error *err)
{
    const pl_cmd *found = NULL;
    size_t n = strlen(name);
    int matches = 0;
    for (const pl_cmd *c = pl_cmds; c->name; c++) {
        if (strcmp(c->name, name) == 0) return c;
        if (n > 0 && strncmp(c->name, name, n) == 0) {
            found = c;
            matches++;
        }
    }
    if (matches == 1) return found;
    if (matches > 1)
        pl_error_set(err, PL_EINPUT, "error: ambiguous command '%s'; see 'pipectl help'", name);
    else
        pl_error_set(err, PL_EINPUT, "error: unknown command '%s'; see 'pipectl help'", name);
    return NULL;
}

void pl_cmd_usage(const pl_cmd *cmd, FILE *out)
{
    fprintf(out, "usage: %s\n\n%s.\n", cmd->usage, cmd->summary);
    if (cmd->help && *cmd->help) fprintf(out, "\noptions:\n%s", cmd->help);
}

int pl_cmd_wants_help(const pl_cmd *cmd, int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            pl_cmd_usage(cmd, stdout);
            return 1;
        }
    return 0;
}

int pl_cli_fail(const pl_error *err)
{
    fprintf(stderr, "%s\n", err->msg);
    return pl_status_exit_code(err->status);
}
