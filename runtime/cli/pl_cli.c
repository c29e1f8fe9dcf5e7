/* pl_cli: the command table, prefix lookup and the shared usage/help/failure helpers. */
#include "pl_cli.h"

#include <string.h>

const pl_cmd pl_cmds[] = {
    {"run", "pipectl run [options] FILE", "run a pipeline batch after batch",
     "  --batches N          batches to run (overrides run.batches)\n"
     "  --depth N            slots in flight (overrides run.depth)\n"
     "  --executor E         auto (default) | host | gpu\n"
     "  --no-graph           gpu: plain stream launches instead of CUDA Graphs\n"
     "  --json               print the summary as one JSON object on stdout\n"
     "  --quiet              no progress bar, no summary table\n",
     pl_cmd_run},
    {"check", "pipectl check FILE...", "check pipelines for errors without running them", "",
     pl_cmd_check},
    {"plan", "pipectl plan [--dot] [--depth N] FILE", "print the compiled stream/event plan",
     "  --dot                print Graphviz DOT instead of the listing\n"
     "  --depth N            slots in flight (overrides run.depth)\n",
     pl_cmd_plan},
    {"doctor", "pipectl doctor", "describe the GPU and measure copy bandwidth and launch cost", "",
     pl_cmd_doctor},
    {"bench", "pipectl bench [options]", "measure pipelines against the physical bound", "",
     pl_cmd_bench},
    {"version", "pipectl version", "print the version", "", pl_cmd_version},
    {"help", "pipectl help [COMMAND]", "list commands, or describe one", "", pl_cmd_help},
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

int pl_cmd_help(int argc, char **argv)
{
    if (argc > 1) {
        pl_error err;
        const pl_cmd *c = pl_cmd_find(argv[1], &err);
        if (!c) return pl_cli_fail(&err);
        pl_cmd_usage(c, stdout);
        return 0;
    }
    printf("pipectl: declarative GPU pipelines that keep the copy engines and the SMs busy.\n\n"
           "usage: pipectl COMMAND [options] [FILE]\n\ncommands:\n");
    for (const pl_cmd *c = pl_cmds; c->name; c++) printf("  %-10s %s\n", c->name, c->summary);
    printf("\n'pipectl help COMMAND' or 'pipectl COMMAND --help' describes one.\n"
           "Exit codes: 0 success, 1 runtime failure, 2 bad input, 130 interrupted.\n");
    return 0;
}
