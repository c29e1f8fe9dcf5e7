/* cmd_doctor: `pipectl doctor`: describe the GPU and measure copy bandwidth and launch cost. */
#include "pl_cli.h"

#ifdef PL_WITH_CUDA
#include "pl_doctor.h"
#endif

int pl_cmd_doctor(int argc, char **argv)
{
    const pl_cmd *cmd = pl_cmd_find("doctor", NULL);
    pl_cli_args a;
    pl_cli_args_init(&a, cmd, argc, argv);
    const char *v;
    int id;
    while ((id = pl_cli_next(&a, &v)) > 0)
        ;
    if (id < 0) return a.rc;
    if (a.n_operands > 0)
        return pl_cli_usage_error(cmd, "'pipectl doctor' takes no arguments (got '%s')",
                                  a.operands[0]);
#ifdef PL_WITH_CUDA
    pl_error err = {0};
    pl_status st = pl_doctor_run(0, stdout, &err);
    if (st != PL_OK) {
        fflush(stdout);
        fprintf(stderr, "error: %s\n", err.msg);
        return pl_status_exit_code(st);
    }
    return 0;
#else
    fprintf(stderr,
            "pipectl was built without CUDA: rebuild with -DPL_WITH_CUDA=ON (needs the CUDA "
            "toolkit) to use 'pipectl doctor'\n");
    return 1;
#endif
}
