/* main: the pipectl command line; dispatches to the command table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <malloc.h>
#include <sys/resource.h>

#include "pl_cli.h"

/* glibc's malloc gives each thread that allocates an arena of its own (up to 8 a core), and each
 * arena reserves 64 MiB of address space: under an address-space limit (`ulimit -v`) a search's
 * threads alone would take the room that thread stacks and OpenBLAS's work buffers need
 * (runtime/base/pl_blas.h). So under a limit, one arena per 256 MiB of it. */
static void pl__fit_address_limit(void)
{
#ifdef M_ARENA_MAX
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return;
    rlim_t n = rl.rlim_cur / ((rlim_t)256 << 20);
    mallopt(M_ARENA_MAX, n < 1 ? 1 : n > 64 ? 64 : (int)n);
#endif
}

int main(int argc, char **argv)
{
    pl__fit_address_limit();
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
