/* cmd_check: `pipectl check FILE...`: parses and checks pipelines without running them. */
#include "pl_cli.h"
#include "pl_parse.h"

int pl_cmd_check(int argc, char **argv)
{
    const pl_cmd *cmd = pl_cmd_find("check", NULL);
    pl_cli_args a;
    pl_cli_args_init(&a, cmd, argc, argv);
    const char *v;
    int id, rc = 0;
    while ((id = pl_cli_next(&a, &v)) > 0)
        ; /* no options but --help */
    if (id < 0) return a.rc;
    if (a.n_operands == 0)
        return pl_cli_usage_error(cmd, "'pipectl check' needs at least one pipeline file");
    /* Every file is checked, even after a failure, so one run reports them all; the exit code is
     * the first failure's. */
    for (int i = 0; i < a.n_operands; i++) {
        const char *file = a.operands[i];
        pl_error err;
        pl_spec *spec = NULL;
        pl_error_clear(&err);
        if (pl_load_checked(file, &spec, &err) != PL_OK) {
            int code = pl_cli_fail(&err);
            if (!rc) rc = code;
            continue;
        }
        printf("%s: ok (%d stage%s, %d buffer%s)\n", file, spec->n_stages,
               spec->n_stages == 1 ? "" : "s", spec->n_buffers, spec->n_buffers == 1 ? "" : "s");
        pl_spec_free(spec);
    }
    return rc;
}
