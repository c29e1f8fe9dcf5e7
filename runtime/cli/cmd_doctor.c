/* cmd_doctor: `pipectl doctor`. STUB: being written. */
#include "pl_cli.h"

int pl_cmd_doctor(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "error: 'pipectl doctor' is not built yet\n");
    return 1;
}
