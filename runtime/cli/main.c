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
    if (strcmp(argv[1], "--version") == 0) return pl_cmd_version(1, argv + 1);
    pl_error err;
    const pl_cmd *cmd = pl_cmd_find(argv[1], &err);
    if (!cmd) return pl_cli_fail(&err);
    if (pl_cmd_wants_help(cmd, argc - 1, argv + 1)) return 0;
    return cmd->fn(argc - 1, argv + 1);
}
