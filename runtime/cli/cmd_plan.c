/* cmd_plan: `pipectl plan [--dot | --json] [--depth N] FILE`: prints the compiled stream/event
 * plan. --json prints the object bundles store (pl_plan_json), so the two cannot differ. */
#include "pl_buffers.h"
#include "pl_bundle.h"
#include "pl_cli.h"
#include "pl_diag.h"
#include "pl_depth.h"
#include "pl_json.h"
#include "pl_parse.h"
#include "pl_plan.h"
#include "pl_plan_dump.h"

enum { PL__O_DOT = 256, PL__O_DEPTH, PL__O_JSON };

const pl_cli_opt pl_cli_plan_opts[] = {
    {"dot", 0, NULL, NULL, "print Graphviz DOT instead of the listing", PL__O_DOT},
    {"depth", 'd', "N", NULL, "slots in flight (overrides run.depth), or auto", PL__O_DEPTH},
    {"json", 'j', NULL, NULL,
     "print the plan as one JSON object on stdout (docs/json.md; the plan of a bundle's "
     "manifest); a failure prints an error object",
     PL__O_JSON},
    {"set", 0, "KEY=VALUE", NULL, PL_CLI_SET_HELP, PL_CLI_O_SET},
    {0},
};

int pl_cmd_plan(int argc, char **argv)
{
    const pl_cmd *cmd = pl_cmd_find("plan", NULL);
    bool dot = false, json = false;
    int64_t depth = 0;
    pl_cli_args a;
    pl_cli_args_init(&a, cmd, argc, argv);
    const char *v;
    int id;
    pl_cli_load lo = {0};
    while ((id = pl_cli_next(&a, &v)) > 0) {
        int lr = pl_cli_load_arg(cmd, id, v, &lo);
        if (lr > 0) return lr;
        if (lr == 0) continue;
        if (id == PL__O_DOT)
            dot = true;
        else if (id == PL__O_JSON)
            json = true;
        else if (pl_cli_depth(cmd, id, v, &depth))
            return 2;
    }
    if (id < 0) return a.rc;
    if (dot && json) return pl_cli_usage_error(cmd, "--dot and --json do not go together");
    if (a.n_operands != 1)
        return pl_cli_usage_error(cmd, "'pipectl plan' needs exactly one pipeline file, got %d",
                                  a.n_operands);
    const char *file = a.operands[0];
    pl_error err;
    pl_error_clear(&err);
    pl_spec *spec = NULL;
    pl_plan *plan = NULL;
    if (pl_load_checked_opts(file, &lo.opts, &spec, &err) != PL_OK) {
        if (json) pl_json_print_error(stdout, "plan", &err);
        return pl_cli_fail(&err);
    }
    pl_cli_print_notes(spec, false);
    pl_diags warn; /* what check warns about, on stderr whatever stdout holds */
    pl_diags_init(&warn, 8);
    pl_cli_check_memory(spec, &warn);
    for (int i = 0; i < warn.n; i++)
        fprintf(stderr, "%s\n", warn.items[i].err.msg);
    pl_diags_fini(&warn);
    if (depth > 0) {
        spec->run.depth = (int)depth;
        spec->run.depth_auto = false;
    } else if (depth == PL_DEPTH_AUTO) {
        spec->run.depth_auto = true;
    }
    if (pl_spec_resolve_batches(spec, &err) != PL_OK) { /* batches: all */
        pl_spec_free(spec);
        if (json) pl_json_print_error(stdout, "plan", &err);
        return pl_cli_fail(&err);
    }
    if (pl_plan_compile(spec, &plan, &err) != PL_OK) {
        pl_spec_free(spec);
        if (json) pl_json_print_error(stdout, "plan", &err);
        return pl_cli_fail(&err);
    }
    int rc = 0;
    if (json) {
        json_t *o = json_object();
        json_object_set_new(o, "schema_version", json_integer(PL_JSON_SCHEMA_VERSION));
        json_object_set_new(o, "command", json_string("plan"));
        json_object_set_new(o, "status", json_string("ok"));
        json_object_set_new(o, "exit_code", json_integer(0));
        json_object_set_new(o, "file", pl_json_str(file));
        json_object_set_new(o, "pipeline", pl_json_str(spec->name));
        /* depth: auto: the plan object is the calibration's (depth 1); what the run may grow to */
        json_object_set_new(o, "depth_auto",
                            plan->depth_auto
                                ? json_pack("{s:I, s:i, s:i, s:s}", "calibration_batches",
                                            (json_int_t)pl_depth_calib_batches(plan),
                                            "calibration_depth", plan->depth, "max_depth",
                                            plan->depth_cap, "max_depth_by", plan->cap_why)
                                : json_null());
        json_t *pj = pl_plan_json(plan);
        if (!pj || json_object_set_new(o, "plan", pj) != 0 || pl_json_print(stdout, o) != 0) {
            fprintf(stderr, "error: could not write the plan as JSON\n");
            rc = 1;
        }
        json_decref(o);
    } else if (dot)
        pl_plan_dump_dot(plan, stdout);
    else
        pl_plan_dump(plan, stdout);
    pl_plan_free(plan);
    pl_spec_free(spec);
    return rc;
}
