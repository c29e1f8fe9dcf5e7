/* cmd_version: `pipectl version`. */
#include "pl_cli.h"

#include <stdio.h>
#include <stdlib.h>

#include "pl_blas.h"
#include "pl_mpi.h"

int pl_cmd_version(int argc, char **argv)
{
    pl_cli_args a;
    pl_cli_args_init(&a, pl_cmd_find("version", NULL), argc, argv);
    const char *v;
    int id;
    while ((id = pl_cli_next(&a, &v)) > 0)
        ;
    if (id < 0) return a.rc;
    if (a.n_operands > 0)
        return pl_cli_usage_error(a.cmd, "'pipectl version' takes no arguments (got '%s')",
                                  a.operands[0]);
    printf("pipectl %s\n", PL_VERSION);
    const char *blas = pl_blas_describe(); /* loads OpenBLAS, which may set OPENBLAS_CORETYPE */
    const char *ct = getenv("OPENBLAS_CORETYPE");
    printf("blas: %s%s%s\n", blas, ct ? ", OPENBLAS_CORETYPE=" : "", ct ? ct : "");
    char mpi[128];
    pl_mpi_describe(mpi, sizeof mpi);
    printf("mpi: %s\n", mpi);
    return 0;
}
