/* cmd_run: `pipectl run`. STUB: being written. */
#include "pl_cli.h"

int pl_cmd_run(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "error: 'pipectl run' is not built yet\n");
    return 1;
}
