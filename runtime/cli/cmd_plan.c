/* cmd_plan: `pipectl plan`. STUB: being written. */
#include "pl_cli.h"

int pl_cmd_plan(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "error: 'pipectl plan' is not built yet\n");
    return 1;
}
