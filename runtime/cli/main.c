/* main: the pipectl command line; dispatches to the command table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pl_blas.h"
#include "pl_cli.h"

int main(int argc, char **argv)
{
    /* OpenBLAS chose its kernels when it loaded. Where it fell back far below this CPU (its
     * Prescott kernels on an AVX-512 host: exact search 3-4x slower, docs/perf.md), run again
     * with a better OPENBLAS_CORETYPE: exec keeps the process (pid, signals, open files), and
     * nothing has run yet. If exec fails, go on with OpenBLAS's pick. */
    const char *core = pl_blas_better_core();
    if (core && setenv("OPENBLAS_CORETYPE", core, 1) == 0) {
        execv("/proc/self/exe", argv);
        unsetenv("OPENBLAS_CORETYPE");
    }
    if (argc < 2) {
        pl_cmd_help(1, argv);
        return 2;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) return pl_cmd_help(1, argv);
    if (strcmp(argv[1], "-V") == 0 || strcmp(argv[1], "--version") == 0)
        return pl_cmd_version(1, argv + 1);
    pl_error err;
    const pl_cmd *cmd = argv[1][0] == '-' ? NULL : pl_cmd_find(argv[1], &err);
    if (argv[1][0] == '-') {
        fprintf(stderr,
                "error: unknown option '%s'; options follow the command: 'pipectl "
                "COMMAND [options]' (see 'pipectl help')\n",
                argv[1]);
        return 2;
    }
    if (!cmd) return pl_cli_fail(&err);
    return cmd->fn(argc - 1, argv + 1);
}
