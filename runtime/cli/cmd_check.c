/* cmd_check: `pipectl check FILE...`: parses and checks pipelines without running them. */
#include <stdlib.h>
#include <string.h>

#include "pl_cli.h"
#include "pl_parse.h"
#include "pl_stage.h"

int pl_cmd_check(int argc, char **argv)
{
    int n_files = 0, rc = 0;
    bool opts_done = false, verbose = false;
    for (int i = 1; i < argc; i++) {
        if (!opts_done && strcmp(argv[i], "--") == 0) {
            opts_done = true;
            continue;
        }
        if (!opts_done && (strcmp(argv[i], "-v") == 0 || strcmp(argv[i], "--verbose") == 0)) {
            verbose = true;
            continue;
        }
        if (!opts_done && strcmp(argv[i], "--arch") == 0) {
            if (!pl_cli_set_arch(i + 1 < argc ? argv[i + 1] : NULL)) {
                fprintf(stderr, "error: --arch needs an SM version like sm_90 or 90; see "
                                "'pipectl check --help'\n");
                return 2;
            }
            i++;
            continue;
        }
        if (!opts_done && argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr,
                    "error: unknown option '%s' for 'pipectl check'; see 'pipectl check --help'\n",
                    argv[i]);
            return 2;
        }
        n_files++;
    }
    if (n_files == 0) {
        fprintf(stderr, "error: 'pipectl check' needs at least one pipeline file; see "
                        "'pipectl check --help'\n");
        return 2;
    }
    opts_done = false;
    /* Every file is checked, even after a failure, so one run reports them all; the exit code is
     * the first failure's. */
    for (int i = 1; i < argc; i++) {
        if (!opts_done && strcmp(argv[i], "--") == 0) {
            opts_done = true;
            continue;
        }
        if (!opts_done && (strcmp(argv[i], "-v") == 0 || strcmp(argv[i], "--verbose") == 0))
            continue;
        if (!opts_done && strcmp(argv[i], "--arch") == 0) {
            i++;
            continue;
        }
        pl_error err;
        pl_spec *spec = NULL;
        pl_error_clear(&err);
        if (pl_load_checked(argv[i], &spec, &err) != PL_OK) {
            int code = pl_cli_fail(&err);
            if (!rc) rc = code;
            continue;
        }
        pl_cli_print_notes(spec, verbose);
        printf("%s: ok (%d stage%s, %d buffer%s)\n", argv[i], spec->n_stages,
               spec->n_stages == 1 ? "" : "s", spec->n_buffers, spec->n_buffers == 1 ? "" : "s");
        pl_spec_free(spec);
    }
    return rc;
}
