/* cmd_doctor: `pipectl doctor`: describe the GPU and measure copy bandwidth and launch cost. */
#include "pl_cli.h"

#ifdef PL_WITH_CUDA
#include "pl_doctor.h"
#endif

int pl_cmd_doctor(int argc, char **argv)
{
    if (pl_cmd_wants_help(pl_cmd_find("doctor", NULL), argc, argv)) return 0;
    if (argc > 1) {
        fprintf(stderr,
                "error: 'pipectl doctor' takes no arguments (got '%s'); see 'pipectl doctor "
                "--help'\n",
                argv[1]);
        return 2;
    }
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
