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

enum { PL__O_VERBOSE = 256, PL__O_ARCH };

const pl_cli_opt pl_cli_check_opts[] = {
    {"verbose", 'v', NULL, NULL, "say what user kernels compiled, and what came from the cache",
     PL__O_VERBOSE},
    {"arch", 0, "SM", NULL,
     "compile user kernels for SM (sm_90 or 90; default: PIPECTL_ARCH, else sm_90); NVRTC needs "
     "no GPU, so CI checks kernels",
     PL__O_ARCH},
    {0},
};

int pl_cmd_check(int argc, char **argv)
{
    const pl_cmd *cmd = pl_cmd_find("check", NULL);
    pl_cli_args a;
    pl_cli_args_init(&a, cmd, argc, argv);
    const char *v;
    int id, rc = 0;
    bool verbose = false;
    while ((id = pl_cli_next(&a, &v)) > 0) {
        if (id == PL__O_VERBOSE) verbose = true;
        if (id == PL__O_ARCH && !pl_cli_set_arch(v))
            return pl_cli_usage_error(cmd, "--arch needs an SM version like sm_90 or 90, got '%s'",
                                      v);
    }
    if (id < 0) return a.rc;
    if (a.n_operands == 0)
        return pl_cli_usage_error(cmd, "'pipectl check' needs at least one pipeline file");
    /* Every file is checked, even after a failure, so one run reports them all; the exit code is
     * the first failure's. */
    for (int i = 0; i < a.n_operands; i++) {
        int code = pl__check_one(a.operands[i], verbose);
        if (!rc) rc = code;
    }
    return rc;
}
