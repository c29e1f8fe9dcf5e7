/* cmd_check: `pipectl check`. STUB: being written. */
#include "pl_cli.h"

int pl_cmd_check(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "error: 'pipectl check' is not built yet\n");
    return 1;
}
