/* cmd_capture: `pipectl capture FILE -o DIR` (and `pipectl run --capture DIR`): runs a pipeline
 * and writes a bundle (runtime/pl_bundle.h, docs/bundles.md) that `pipectl replay` checks. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "pl_bundle.h"
#include "pl_cli.h"

static volatile sig_atomic_t pl__stop;

static void pl__on_sigint(int sig)
{
    (void)sig;
    pl__stop = 1;
}

static bool pl__int(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    if (!s || !*s) return false;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (*end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

static int pl__usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "error: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "; see 'pipectl capture --help'\n");
    return 2;
}

int pl_cmd_capture(int argc, char **argv)
{
    const pl_cmd *cmd = pl_cmd_find("capture", NULL);
    if (pl_cmd_wants_help(cmd, argc, argv)) return 0;
    pl_capture_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    pl_run_cfg_init(&cfg.run);
    cfg.reps = 3;
    bool quiet = false;
    int64_t v;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *n = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) {
            if (!n) return pl__usage("-o needs the bundle folder%s", "");
            cfg.dir = n, i++;
        } else if (strcmp(a, "--batches") == 0) {
            if (!pl__int(n, 1, PL_MAX_BATCHES, &v))
                return pl__usage("--batches needs a whole number from 1 to 2^40, got '%s'",
                                 n ? n : "");
            cfg.batches = v, i++;
        } else if (strcmp(a, "--depth") == 0) {
            if (!pl__int(n, 1, PL_MAX_DEPTH, &v))
                return pl__usage("--depth needs a whole number from 1 to 64, got '%s'", n ? n : "");
            cfg.depth = (int)v, i++;
        } else if (strcmp(a, "--reps") == 0) {
            if (!pl__int(n, 1, 100, &v))
                return pl__usage("--reps needs a whole number from 1 to 100, got '%s'", n ? n : "");
            cfg.reps = (int)v, i++;
        } else if (strcmp(a, "--workers") == 0) {
            if (!pl__int(n, 1, 64, &v))
                return pl__usage("--workers needs a whole number from 1 to 64, got '%s'",
                                 n ? n : "");
            cfg.run.workers = (int)v, i++;
        } else if (strcmp(a, "--executor") == 0) {
            if (n && strcmp(n, "auto") == 0)
                cfg.run.executor = PL_EXEC_AUTO;
            else if (n && strcmp(n, "host") == 0)
                cfg.run.executor = PL_EXEC_HOST;
            else if (n && strcmp(n, "gpu") == 0)
                cfg.run.executor = PL_EXEC_GPU;
            else
                return pl__usage("--executor must be auto, host or gpu, got '%s'", n ? n : "");
            i++;
        } else if (strcmp(a, "--timing") == 0) {
            if (n && strcmp(n, "all") == 0)
                cfg.run.timing_period = 0;
            else if (n && strcmp(n, "sample") == 0)
                cfg.run.timing_period = 16;
            else if (n && strcmp(n, "off") == 0)
                cfg.run.timing_period = -1;
            else
                return pl__usage("--timing must be all, sample or off, got '%s'", n ? n : "");
            i++;
        } else if (strcmp(a, "--no-graph") == 0) {
            cfg.run.use_graphs = false;
        } else if (strcmp(a, "--copy-inputs") == 0) {
            cfg.copy_inputs = true;
        } else if (strcmp(a, "--copy-outputs") == 0) {
            cfg.copy_outputs = true;
        } else if (strcmp(a, "--quiet") == 0 || strcmp(a, "-q") == 0) {
            quiet = true;
        } else if (a[0] == '-' && a[1]) {
            return pl__usage("unknown option '%s' for 'pipectl capture'", a);
        } else if (cfg.file) {
            return pl__usage("'pipectl capture' takes one pipeline file; '%s' is a second one", a);
        } else {
            cfg.file = a;
        }
    }
    if (!cfg.file) return pl__usage("'pipectl capture' needs a pipeline file%s", "");
    if (!cfg.dir) return pl__usage("'pipectl capture' needs the bundle folder: -o DIR%s", "");

    /* The command line as given, for the manifest. */
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
    cfg.command = line;
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
        int rc = pl_cli_fail(&err);
        if (st != PL_EINPUT)
            fprintf(stderr, "no bundle written: %s has no manifest.json\n", cfg.dir);
        return rc;
    }
    if (!quiet) {
        printf("bundle %s: pipeline %s, %lld batches on %s, %d run%s\n", cfg.dir, cfg.file,
               (long long)info.batches_done, info.executor, info.reps, info.reps == 1 ? "" : "s");
        printf("  plan digest %.16s, %d input%s%s, %d sink%s%s", info.plan_digest, info.n_inputs,
               info.n_inputs == 1 ? "" : "s", cfg.copy_inputs ? " (copied)" : "", info.n_outputs,
               info.n_outputs == 1 ? "" : "s", cfg.copy_outputs ? " (outputs copied)" : "");
        if (info.n_graphs)
            printf(", %d graph%s as DOT", info.n_graphs, info.n_graphs == 1 ? "" : "s");
        printf("\n");
        if (info.reps > 1 && info.reps_identical)
            printf("  checksums identical in all %d runs\n", info.reps);
        printf("  replay it with: pipectl replay %s\n", cfg.dir);
    }
    if (info.reps > 1 && !info.reps_identical)
        fprintf(stderr,
                "warning: the runs of the capture disagree: sink '%s', batch %lld has another "
                "checksum in a later run (the pipeline is not reproducible run to run; replay "
                "will report it)\n",
                info.reps_sink, (long long)info.reps_batch);
    return 0;
}
