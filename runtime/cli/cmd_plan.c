/* cmd_plan: `pipectl plan [--dot] [--depth N] FILE`: prints the compiled stream/event plan. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pl_cli.h"
#include "pl_parse.h"
#include "pl_plan.h"

static int pl__bad_depth(const char *s)
{
    fprintf(stderr, "error: --depth must be an integer from 1 to %d, got '%s'\n", PL_MAX_DEPTH, s);
    return 2;
}

int pl_cmd_plan(int argc, char **argv)
{
    bool dot = false, opts_done = false;
    int depth = 0;
    const char *file = NULL;
    int n_files = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!opts_done && strcmp(a, "--") == 0) {
            opts_done = true;
        } else if (!opts_done && strcmp(a, "--dot") == 0) {
            dot = true;
        } else if (!opts_done && (strcmp(a, "--depth") == 0 || strncmp(a, "--depth=", 8) == 0)) {
            const char *v = a[7] == '=' ? a + 8 : NULL;
            if (!v) {
                if (i + 1 >= argc) {
                    fprintf(stderr, "error: --depth needs a value (slots in flight, 1 to %d)\n",
                            PL_MAX_DEPTH);
                    return 2;
                }
                v = argv[++i];
            }
            char *end;
            errno = 0;
            long d = strtol(v, &end, 10);
            if (errno || !*v || *end || d < 1 || d > PL_MAX_DEPTH) return pl__bad_depth(v);
            depth = (int)d;
        } else if (!opts_done && a[0] == '-' && a[1]) {
            fprintf(stderr,
                    "error: unknown option '%s' for 'pipectl plan'; see 'pipectl plan --help'\n",
                    a);
            return 2;
        } else {
            file = a;
            n_files++;
        }
    }
    if (n_files != 1) {
        fprintf(stderr,
                "error: 'pipectl plan' needs exactly one pipeline file, got %d; see "
                "'pipectl plan --help'\n",
                n_files);
        return 2;
    }
    pl_error err;
    pl_error_clear(&err);
    pl_spec *spec = NULL;
    pl_plan *plan = NULL;
    if (pl_load_checked(file, &spec, &err) != PL_OK) return pl_cli_fail(&err);
    pl_cli_print_notes(spec, false);
    if (depth) spec->run.depth = depth;
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
