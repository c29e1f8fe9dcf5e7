/* main: the pipectl command line; dispatches to the command table. */
#include <stdio.h>
#include <string.h>

#include "pl_cli.h"

int main(int argc, char **argv)
{
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
