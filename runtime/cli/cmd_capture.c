/* cmd_capture: `pipectl capture FILE -o DIR` (and `pipectl run --capture DIR`): runs a pipeline
 * and writes a bundle (runtime/record/pl_bundle.h, docs/bundles.md) that `pipectl replay` checks.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "pl_bundle.h"
#include "pl_cli.h"
#include "pl_intr.h"
#include "pl_str.h"

static volatile sig_atomic_t pl__stop;

static void pl__on_sigint(int sig)
{
    (void)sig;
    pl__stop = 1;
    pl_intr_wake(); /* async-signal-safe: the host executor sleeps until told */
}

enum {
    PL__O_OUTPUT = 256,
    PL__O_REPS,
    PL__O_COPY_INPUTS,
    PL__O_COPY_OUTPUTS,
    PL__O_BATCHES,
    PL__O_DEPTH,
    PL__O_EXECUTOR,
    PL__O_NO_GRAPH,
    PL__O_GRAPHS,
    PL__O_TIMING,
    PL__O_WORKERS,
    PL__O_QUIET,
};

const pl_cli_opt pl_cli_capture_opts[] = {
    {"output", 'o', "DIR", NULL, "the bundle folder (created; must be empty)", PL__O_OUTPUT},
    {"reps", 0, "N", NULL,
     "runs (default 3): their spread of stage times is the recorded noise, and their checksums "
     "must agree",
     PL__O_REPS},
    {"copy-inputs", 0, NULL, NULL, "copy every input file into the bundle (self-contained)",
     PL__O_COPY_INPUTS},
    {"copy-outputs", 0, NULL, NULL,
     "copy the sinks' output files (replay compares them within a tolerance where bits may "
     "differ across executors)",
     PL__O_COPY_OUTPUTS},
    {"batches", 'b', "N", NULL,
     "batches to run, or all: until the first source file ends (overrides run.batches)",
     PL__O_BATCHES},
    {"depth", 'd', "N", NULL,
     "slots in flight (overrides run.depth); auto: chosen on the first batches (the bundle keeps "
     "depth: auto, its summary what the run chose)",
     PL__O_DEPTH},
    {"executor", 'e', "E", "auto|host|gpu", "auto (default) | host | gpu", PL__O_EXECUTOR},
    {"graphs", 0, "MODE", "auto|stage|segment|none", PL_CLI_GRAPHS_HELP, PL__O_GRAPHS},
    {"no-graph", 0, NULL, NULL, "gpu: plain stream launches instead of CUDA Graphs (--graphs none)",
     PL__O_NO_GRAPH},
    {"timing", 0, "T", "sample|all|off", "gpu: device stage times, as for 'pipectl run'",
     PL__O_TIMING},
    {"workers", 'w', "N", NULL, "host worker threads (default: max(CPUs, streams))", PL__O_WORKERS},
    {"quiet", 'q', NULL, NULL, "no summary", PL__O_QUIET},
    {"set", 0, "KEY=VALUE", NULL,
     PL_CLI_SET_HELP "; the manifest lists them and the bundled pipeline.yaml has them applied",
     PL_CLI_O_SET},
    {"out-dir", 0, "DIR", NULL,
     "the runs' sinks write their relative paths in DIR (made with its parents) instead of the "
     "pipeline's folder",
     PL_CLI_O_OUT_DIR},
    {"confine", 0, NULL, NULL,
     "refuse any path the pipeline names that leads outside its folder and --out-dir, as "
     "'pipectl run --confine'",
     PL_CLI_O_CONFINE},
    {0},
};

int pl_cmd_capture(int argc, char **argv)
{
    const pl_cmd *cmd = pl_cmd_find("capture", NULL);
    pl_capture_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    pl_run_cfg_init(&cfg.run);
    cfg.reps = 3;
    bool quiet = false;
    int64_t n;
    static const int timings[] = {16, 0, -1}; /* sample, all, off */
    static const pl_exec_kind execs[] = {PL_EXEC_AUTO, PL_EXEC_HOST, PL_EXEC_GPU};
    /* The command line as given, for the manifest: before getopt_long permutes argv. */
    size_t len = 16;
    for (int i = 0; i < argc; i++)
        len += strlen(argv[i]) + 1;
    char *line = malloc(len);
    if (line) {
        strcpy(line, "pipectl");
        for (int i = 0; i < argc; i++) {
            strcat(line, " ");
            strcat(line, argv[i]);
        }
    }
    pl_cli_args a;
    pl_cli_args_init(&a, cmd, argc, argv);
    const char *v;
    int id, k, rc = 2;
    pl_cli_load lo = {0};
    while ((id = pl_cli_next(&a, &v)) > 0) {
        int lr = pl_cli_load_arg(cmd, id, v, &lo);
        if (lr > 0) goto usage;
        switch (id) {
        case PL__O_OUTPUT:
            cfg.dir = v;
            break;
        case PL__O_BATCHES:
            if (strcmp(v, "all") == 0)
                n = -1; /* until the first source file ends */
            else if (pl_cli_int(cmd, id, v, 1, PL_MAX_BATCHES, &n))
                goto usage;
            cfg.batches = n;
            break;
        case PL__O_DEPTH:
            if (pl_cli_depth(cmd, id, v, &n)) goto usage;
            cfg.depth = (int)n; /* PL_DEPTH_AUTO: depth: auto */
            break;
        case PL__O_REPS:
            if (pl_cli_int(cmd, id, v, 1, 100, &n)) goto usage;
            cfg.reps = (int)n;
            break;
        case PL__O_WORKERS:
            if (pl_cli_int(cmd, id, v, 1, 64, &n)) goto usage;
            cfg.run.workers = (int)n;
            break;
        case PL__O_EXECUTOR:
            if ((k = pl_cli_choice(cmd, id, v)) < 0) goto usage;
            cfg.run.executor = execs[k];
            break;
        case PL__O_TIMING:
            if ((k = pl_cli_choice(cmd, id, v)) < 0) goto usage;
            cfg.run.timing_period = timings[k];
            break;
        case PL__O_NO_GRAPH:
            cfg.run.use_graphs = false;
            break;
        case PL__O_GRAPHS:
            if (pl_cli_graphs(cmd, id, v, &cfg.run)) goto usage;
            break;
        case PL__O_COPY_INPUTS:
            cfg.copy_inputs = true;
            break;
        case PL__O_COPY_OUTPUTS:
            cfg.copy_outputs = true;
            break;
        case PL__O_QUIET:
            quiet = true;
            break;
        }
    }
    if (id < 0) {
        rc = a.rc;
        goto usage;
    }
    if (a.n_operands == 0) {
        pl_cli_usage_error(cmd, "'pipectl capture' needs a pipeline file");
        goto usage;
    }
    if (a.n_operands > 1) {
        pl_cli_usage_error(cmd, "'pipectl capture' takes one pipeline file; '%s' is a second one",
                           a.operands[1]);
        goto usage;
    }
    cfg.file = a.operands[0];
    if (!cfg.dir) {
        pl_cli_usage_error(cmd, "'pipectl capture' needs the bundle folder: -o DIR");
        goto usage;
    }

    cfg.command = line;
    cfg.load = lo.opts;
    cfg.run.stop = &pl__stop;
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = pl__on_sigint;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old);
    pl_capture_info info;
    pl_error err;
    pl_error_clear(&err);
    pl_status st = pl_bundle_capture(&cfg, &info, &err);
    sigaction(SIGINT, &old, NULL);
    free(line);
    if (info.note[0]) fprintf(stderr, "%s\n", info.note);
    if (st != PL_OK) {
        rc = pl_cli_fail(&err);
        char dir[PL_NAME_CAP];
        if (st != PL_EINPUT)
            fprintf(stderr, "no bundle written: %s has no manifest.json\n",
                    pl_name_str(cfg.dir, 0, dir, sizeof dir));
        return rc;
    }
    if (!quiet) {
        char dir[PL_NAME_CAP], file[PL_NAME_CAP];
        pl_name_str(cfg.dir, 0, dir, sizeof dir);
        printf("bundle %s: pipeline %s, %lld batches on %s, %d run%s\n", dir,
               pl_name_str(cfg.file, 0, file, sizeof file), (long long)info.batches_done,
               info.executor, info.reps, info.reps == 1 ? "" : "s");
        printf("  plan digest %.16s, %d input%s%s, %d sink%s%s", info.plan_digest, info.n_inputs,
               info.n_inputs == 1 ? "" : "s", cfg.copy_inputs ? " (copied)" : "", info.n_outputs,
               info.n_outputs == 1 ? "" : "s", cfg.copy_outputs ? " (outputs copied)" : "");
        if (info.n_graphs)
            printf(", %d graph%s as DOT", info.n_graphs, info.n_graphs == 1 ? "" : "s");
        printf("\n");
        if (info.reps > 1 && info.reps_identical)
            printf("  checksums identical in all %d runs\n", info.reps);
        printf("  replay it with: pipectl replay %s\n", dir);
    }
    if (info.reps > 1 && !info.reps_identical)
        fprintf(stderr,
                "warning: the runs of the capture disagree: sink '%s', batch %lld has another "
                "checksum in a later run (the pipeline is not reproducible run to run; replay "
                "will report it)\n",
                info.reps_sink, (long long)info.reps_batch);
    return 0;
usage:
    free(line);
    return rc;
}
