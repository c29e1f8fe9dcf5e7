/* cmd_bench: `pipectl bench`. STUB: being written. */
#include "pl_cli.h"

int pl_cmd_bench(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "error: 'pipectl bench' is not built yet\n");
    return 1;
}
