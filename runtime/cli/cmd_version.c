/* cmd_version: `pipectl version`. */
#include "pl_cli.h"

#include <stdio.h>

int pl_cmd_version(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    printf("pipectl %s\n", PL_VERSION);
    return 0;
}
