/* cmd_run: `pipectl run`: load and check a pipeline, compile the plan, run it on the chosen
 * executor with a progress bar, print the summary (or JSON). SIGINT (Ctrl-C), SIGTERM and SIGHUP
 * stop cleanly: completed batches are kept, a running Lua call is interrupted, and the exit code
 * is 128 + the signal; a second signal of the same kind kills. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pl_cli.h"
#include "pl_exec.h"
#include "pl_lua.h"
#include "pl_parse.h"
#include "pl_plan.h"
#include "pl_report.h"
#include "pl_trace.h"

/* The signal that stopped the run (0: none). timeout(1), systemd, docker and Slurm send SIGTERM;
 * closing the terminal sends SIGHUP: all of them mean "stop and keep what is done". */
static volatile sig_atomic_t pl__stop;

static void pl__on_signal(int sig)
{
    pl__stop = sig; /* SA_RESETHAND: the next one of this kind gets the default action and kills */
    pl_lua_interrupt(); /* async-signal-safe: a flag the Lua watchdog and hook read */
}

static const int pl__stop_signals[] = {SIGINT, SIGTERM, SIGHUP};
#define PL__N_STOP_SIGNALS 3

typedef struct pl__progress {
    bool on;
    int width;
} pl__progress;

static void pl__progress_cb(void *user, int64_t done, int64_t total)
{
    pl__progress *p = user;
    if (!p->on || total <= 0) return;
    int fill = (int)(done * p->width / total);
    char bar[64];
    for (int i = 0; i < p->width; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[p->width] = '\0';
    fprintf(stderr, "\r[%s] %lld/%lld batches", bar, (long long)done, (long long)total);
    fflush(stderr);
}

static bool pl__parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    if (!s || !*s) return false;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (*end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

static int pl__usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "error: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "; see 'pipectl run --help'\n");
    return 2;
}

int pl_cmd_run(int argc, char **argv)
{
    const pl_cmd *cmd = pl_cmd_find("run", NULL);
    if (pl_cmd_wants_help(cmd, argc, argv)) return 0;
    /* --capture DIR: the run is a one-run capture (cmd_capture.c takes the other options). */
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--capture") == 0) {
            char **av = malloc((size_t)(argc + 3) * sizeof *av);
            if (!av) return pl_cli_fail(&(pl_error){.status = PL_ENOMEM, .msg = "out of memory"});
            int n = 0;
            av[n++] = "capture";
            av[n++] = "--reps";
            av[n++] = "1";
            for (int j = 1; j < argc; j++)
                av[n++] = j == i ? "-o" : argv[j];
            int rc = pl_cmd_capture(n, av);
            free(av);
            return rc;
        }
    const char *file = NULL, *fail_at = NULL, *trace = NULL;
    int64_t batches = -1, depth = -1, workers = 0;
    int timing = 16; /* pl_run_cfg.timing_period: --timing sample */
    bool json = false, quiet = false, graphs = true, verbose = false;
    pl_exec_kind exec = PL_EXEC_AUTO;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--batches") == 0) {
            if (!pl__parse_i64(v, 1, PL_MAX_BATCHES, &batches))
                return pl__usage_error("--batches needs a whole number from 1 to 2^40, got '%s'",
                                       v ? v : "");
            i++;
        } else if (strcmp(a, "--depth") == 0) {
            if (!pl__parse_i64(v, 1, PL_MAX_DEPTH, &depth))
                return pl__usage_error("--depth needs a whole number from 1 to 64, got '%s'",
                                       v ? v : "");
            i++;
        } else if (strcmp(a, "--workers") == 0) {
            if (!pl__parse_i64(v, 1, 64, &workers))
                return pl__usage_error("--workers needs a whole number from 1 to 64, got '%s'",
                                       v ? v : "");
            i++;
        } else if (strcmp(a, "--executor") == 0) {
            if (v && strcmp(v, "auto") == 0)
                exec = PL_EXEC_AUTO;
            else if (v && strcmp(v, "host") == 0)
                exec = PL_EXEC_HOST;
            else if (v && strcmp(v, "gpu") == 0)
                exec = PL_EXEC_GPU;
            else
                return pl__usage_error("--executor must be auto, host or gpu, got '%s'",
                                       v ? v : "");
            i++;
        } else if (strcmp(a, "--fail-at") == 0) {
            if (!v) return pl__usage_error("--fail-at needs STAGE:BATCH%s", "");
            fail_at = v;
            i++;
        } else if (strcmp(a, "--timing") == 0) {
            if (v && strcmp(v, "all") == 0)
                timing = 0;
            else if (v && strcmp(v, "sample") == 0)
                timing = 16;
            else if (v && strcmp(v, "off") == 0)
                timing = -1;
            else
                return pl__usage_error("--timing must be all, sample or off, got '%s'", v ? v : "");
            i++;
        } else if (strcmp(a, "--trace") == 0) {
            if (!v) return pl__usage_error("--trace needs a file name (Chrome trace JSON)%s", "");
            trace = v;
            i++;
        } else if (strcmp(a, "--no-graph") == 0) {
            graphs = false;
        } else if (strcmp(a, "--json") == 0) {
            json = true;
        } else if (strcmp(a, "--quiet") == 0 || strcmp(a, "-q") == 0) {
            quiet = true;
        } else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
            verbose = true;
        } else if (strcmp(a, "--arch") == 0) {
            if (!pl_cli_set_arch(v))
                return pl__usage_error("--arch needs an SM version like sm_90, got '%s'",
                                       v ? v : "");
            i++;
        } else if (a[0] == '-' && a[1]) {
            return pl__usage_error("unknown option '%s' for 'pipectl run'", a);
        } else if (file) {
            return pl__usage_error("'pipectl run' takes one pipeline file; '%s' is a second one",
                                   a);
        } else {
            file = a;
        }
    }
    if (!file) return pl__usage_error("'pipectl run' needs a pipeline file%s", "");

    pl_error err;
    pl_error_clear(&err);
    pl_spec *spec = NULL;
    pl_plan *plan = NULL;
    pl_run_result res;
    memset(&res, 0, sizeof res);
    pl_status st = pl_load_checked(file, &spec, &err);
    if (st != PL_OK) return pl_cli_fail(&err);
    pl_cli_print_notes(spec, verbose);
    if (batches > 0) spec->run.batches = batches;
    if (depth > 0) spec->run.depth = (int)depth;
    int rc = 0;
    /* The files, for the batches this run will issue, before anything opens (exit 2). */
    PL_CHECK_GOTO(pl_spec_check_files(spec, spec->run.batches, NULL, &err), st, fail);
    PL_CHECK_GOTO(pl_plan_compile(spec, &plan, &err), st, fail);

    pl_run_cfg cfg;
    pl_run_cfg_init(&cfg);
    cfg.executor = exec;
    cfg.use_graphs = graphs;
    cfg.workers = (int)workers;
    cfg.timing_period = timing;
    cfg.stop = &pl__stop;
    pl__progress prog = {.on = !quiet && !json && isatty(2), .width = 30};
    cfg.on_batch = pl__progress_cb;
    cfg.user = &prog;
    if (fail_at) {
        const char *colon = strrchr(fail_at, ':');
        char name[PL_MAX_NAME + 1];
        int64_t fb;
        size_t n = colon ? (size_t)(colon - fail_at) : 0;
        if (!colon || n == 0 || n > PL_MAX_NAME || !pl__parse_i64(colon + 1, 0, INT64_MAX, &fb)) {
            rc = pl__usage_error("--fail-at needs STAGE:BATCH, got '%s'", fail_at);
            goto out;
        }
        memcpy(name, fail_at, n);
        name[n] = '\0';
        cfg.fail_stage = pl_spec_find_stage(spec, name);
        cfg.fail_batch = fb;
        if (cfg.fail_stage < 0) {
            rc = pl__usage_error("--fail-at: no stage named '%s'", name);
            goto out;
        }
    }

    char note[sizeof res.note];
    cfg.executor = pl_exec_pick(plan, exec, note, sizeof note);
    if (note[0]) fprintf(stderr, "%s\n", note); /* said before a long run, as it starts */

    struct sigaction sa, old[PL__N_STOP_SIGNALS], ign, old_pipe;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = pl__on_signal;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < PL__N_STOP_SIGNALS; i++)
        sigaddset(&sa.sa_mask, pl__stop_signals[i]);
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    pl__stop = 0;
    pl_lua_interrupt_clear();
    for (int i = 0; i < PL__N_STOP_SIGNALS; i++)
        sigaction(pl__stop_signals[i], &sa, &old[i]);
    /* A sink writing to a pipe whose reader went away fails with EPIPE (an error naming it)
     * instead of the process dying with nothing finalized. */
    sigaction(SIGPIPE, &ign, &old_pipe);
    st = pl_run(plan, &cfg, &res, &err);
    for (int i = 0; i < PL__N_STOP_SIGNALS; i++)
        sigaction(pl__stop_signals[i], &old[i], NULL);
    sigaction(SIGPIPE, &old_pipe, NULL);
    if (prog.on) fprintf(stderr, "\r%*s\r", prog.width + 32, "");
    int stop_sig = pl__stop;
    /* Whoever noticed the stop first (the executor, a Lua call) reported it; say which signal. */
    if (st == PL_EINTR && stop_sig)
        pl_error_set(&err, PL_EINTR, "error: interrupted (%s)",
                     stop_sig == SIGINT    ? "Ctrl-C"
                     : stop_sig == SIGTERM ? "SIGTERM"
                                           : "SIGHUP");

    /* The timeline of what completed is written also after an error or Ctrl-C. */
    if (trace && res.executor) {
        pl_error te;
        if (pl_trace_write(trace, plan, &res, &te) != PL_OK) {
            fprintf(stderr, "%s\n", te.msg);
            if (st == PL_OK) {
                st = te.status;
                err = te;
            }
        } else if (!quiet && !json) {
            fprintf(stderr,
                    "timeline written to %s (open it in ui.perfetto.dev or "
                    "chrome://tracing)\n",
                    trace);
        }
    }
    /* res.executor stays NULL when no executor started (e.g. no GPU): nothing ran to report.
     * A sink writing to stdout (`to: -`) owns it: the summary goes to stderr then. */
    FILE *rep = stdout;
    for (int i = 0; i < res.n_outputs; i++)
        if (res.outputs[i].path && strcmp(res.outputs[i].path, "-") == 0) rep = stderr;
    if (json)
        pl_report_json(rep, plan, &res, st, &err);
    else if (!quiet && res.executor)
        pl_report_print(rep, plan, &res, st);
    fflush(stdout);
    if (st != PL_OK) {
        if (res.executor) pl_report_stopped(stderr, &res);
        goto fail;
    }
    goto out;
fail:
    rc = pl_cli_fail(&err);
    if (st == PL_EINTR && pl__stop) rc = 128 + pl__stop;
out:
    pl_run_result_fini(&res);
    pl_plan_free(plan);
    pl_spec_free(spec);
    return rc;
}
