/* cmd_check: `pipectl check [-v] [--arch SM] FILE...`: parses and checks pipelines without
 * running them: the spec (every error of a phase, up to PL__MAX_SHOWN per file), user kernels
 * (compiled with NVRTC, which needs no GPU), then the files a run would touch. */
#include <stdlib.h>
#include <string.h>

#include "pl_cli.h"
#include "pl_diag.h"
#include "pl_parse.h"
#include "pl_stage.h"

#define PL__MAX_SHOWN 20

/* Checks one file; prints its errors (or its notes and "ok"); returns the exit code. */
static int pl__check_one(const char *file, bool verbose)
{
    pl_error err;
    pl_spec *spec = NULL;
    pl_error_clear(&err);
    if (pl_load_file(file, &spec, &err) != PL_OK) return pl_cli_fail(&err);
    pl_diags d;
    pl_diags_init(&d, PL__MAX_SHOWN);
    pl_status st = pl_spec_check_all(spec, &d, &err);
    if (st == PL_OK) st = pl_spec_check_files(spec, spec->run.batches, &d, &err);
    int rc = 0;
    if (st != PL_OK) {
        /* The first error is err (the one every other command reports); the list adds the rest. */
        rc = pl_status_exit_code(st);
        for (int i = 0; i < d.n; i++)
            fprintf(stderr, "%s\n", d.items[i].err.msg);
        if (d.n == 0) fprintf(stderr, "%s\n", err.msg);
        if (d.dropped)
            fprintf(stderr, "%s: %d more error%s not shown (the first %d are above)\n", file,
                    d.dropped, d.dropped == 1 ? "" : "s", d.n);
    } else {
        pl_cli_print_notes(spec, verbose);
        printf("%s: ok (%d stage%s, %d buffer%s)\n", file, spec->n_stages,
               spec->n_stages == 1 ? "" : "s", spec->n_buffers, spec->n_buffers == 1 ? "" : "s");
    }
    pl_diags_fini(&d);
    pl_spec_free(spec);
    return rc;
}

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
        int code = pl__check_one(argv[i], verbose);
        if (!rc) rc = code;
    }
    return rc;
}
