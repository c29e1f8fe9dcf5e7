/* cmd_plan: `pipectl plan [--dot] [--depth N] FILE`: prints the compiled stream/event plan. */
#include "pl_cli.h"
#include "pl_parse.h"
#include "pl_plan.h"

enum { PL__O_DOT = 256, PL__O_DEPTH };

const pl_cli_opt pl_cli_plan_opts[] = {
    {"dot", 0, NULL, NULL, "print Graphviz DOT instead of the listing", PL__O_DOT},
    {"depth", 'd', "N", NULL, "slots in flight (overrides run.depth)", PL__O_DEPTH},
    {0},
};

int pl_cmd_plan(int argc, char **argv)
{
    const pl_cmd *cmd = pl_cmd_find("plan", NULL);
    bool dot = false;
    int64_t depth = 0;
    pl_cli_args a;
    pl_cli_args_init(&a, cmd, argc, argv);
    const char *v;
    int id;
    while ((id = pl_cli_next(&a, &v)) > 0) {
        if (id == PL__O_DOT)
            dot = true;
        else if (pl_cli_int(cmd, id, v, 1, PL_MAX_DEPTH, &depth))
            return 2;
    }
    if (id < 0) return a.rc;
    if (a.n_operands != 1)
        return pl_cli_usage_error(cmd, "'pipectl plan' needs exactly one pipeline file, got %d",
                                  a.n_operands);
    const char *file = a.operands[0];
    pl_error err;
    pl_error_clear(&err);
    pl_spec *spec = NULL;
    pl_plan *plan = NULL;
    if (pl_load_checked(file, &spec, &err) != PL_OK) return pl_cli_fail(&err);
    pl_cli_print_notes(spec, false);
    if (depth) spec->run.depth = (int)depth;
    if (pl_plan_compile(spec, &plan, &err) != PL_OK) {
        pl_spec_free(spec);
        return pl_cli_fail(&err);
    }
    if (dot)
        pl_plan_dump_dot(plan, stdout);
    else
        pl_plan_dump(plan, stdout);
    pl_plan_free(plan);
    pl_spec_free(spec);
    return 0;
}
