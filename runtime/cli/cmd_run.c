/* cmd_run: `pipectl run`: load and check a pipeline, compile the plan, run it on the chosen
 * executor with a progress line, print the summary (or JSON). SIGINT (Ctrl-C), SIGTERM and SIGHUP
 * stop cleanly: completed batches are kept, long host stages (Lua calls, the GPT-2 reference,
 * search, gemm, tokenizing) stop at their next check, and the exit code is 128 + the signal, in
 * the JSON too; a second signal aborts (pl__on_signal), a third kills. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pl_api_int.h"
#include "pl_cli.h"
#include "pl_exec.h"
#include "pl_host_cost.h"
#include "pl_intr.h"
#include "pl_json.h"
#include "pl_parse.h"
#include "pl_plan.h"
#include "pl_progress.h"
#include "pl_report.h"
#include "pl_scale.h"
#include "pl_trace.h"

/* The signal that stopped the run (0: none). timeout(1), systemd, docker and Slurm send SIGTERM;
 * closing the terminal sends SIGHUP: all of them mean "stop and keep what is done". */
static volatile sig_atomic_t pl__stop;
static volatile sig_atomic_t pl__bar_tty; /* a progress line is drawn on a terminal */

static const int pl__stop_signals[] = {SIGINT, SIGTERM, SIGHUP};
#define PL__N_STOP_SIGNALS 3

/* Writes a literal to stderr from the handler (write(2) is async-signal-safe; stdio is not),
 * first clearing the progress line when one is drawn. */
#define PL__SAY(lit)                                                                               \
    do {                                                                                           \
        if (pl__bar_tty && write(2, "\r\033[K", 4) < 0) break;                                     \
        if (write(2, lit, sizeof lit - 1) < 0) break;                                              \
    } while (0)

/* The first signal stops (pl_intr: no new batch, long host stages stop at their next check, the
 * batches in flight finish); the second aborts (the batches in flight are dropped too, the outputs
 * are finalized with the batches every stage finished); a third kills (the handlers are reset on
 * the second). */
static void pl__on_signal(int sig)
{
    if (pl__stop == 0) {
        pl__stop = sig;
        pl_intr_raise(PL_INTR_STOP); /* also stops Lua calls (pl_lua_interrupt) */
        if (sig == SIGINT)
            PL__SAY("pipectl: Ctrl-C: stopping after the batches in flight; again to abort\n");
        else if (sig == SIGTERM)
            PL__SAY("pipectl: SIGTERM: stopping after the batches in flight; again to abort\n");
        else
            PL__SAY("pipectl: SIGHUP: stopping after the batches in flight; again to abort\n");
        return;
    }
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    for (int i = 0; i < PL__N_STOP_SIGNALS; i++)
        sigaction(pl__stop_signals[i], &dfl, NULL);
    pl_intr_raise(PL_INTR_ABORT);
    PL__SAY("pipectl: aborting: the batches in flight are dropped, the outputs keep the finished "
            "ones; again to kill\n");
}

enum {
    PL__O_BATCHES = 256,
    PL__O_DEPTH,
    PL__O_EXECUTOR,
    PL__O_NO_GRAPH,
    PL__O_GRAPHS,
    PL__O_TIMING,
    PL__O_TRACE,
    PL__O_JSON,
    PL__O_QUIET,
    PL__O_PROGRESS,
    PL__O_WORKERS,
    PL__O_FAIL_AT,
    PL__O_VERBOSE,
    PL__O_ARCH,
    PL__O_CAPTURE,
    PL__O_FAULT_MARKS,
    PL__O_SHARD,
    PL__O_MPI,
    PL__O_MPI_WRITE,
};

const pl_cli_opt pl_cli_run_opts[] = {
    {"batches", 'b', "N", NULL,
     "batches to run, or all: until the first source file ends (overrides run.batches)",
     PL__O_BATCHES},
    {"depth", 'd', "N", NULL,
     "slots in flight (overrides run.depth); auto: measured on the first batches, the smallest "
     "that reaches the bound within run.memory_budget",
     PL__O_DEPTH},
    {"executor", 'e', "E", "auto|host|gpu", "auto (default) | host | gpu", PL__O_EXECUTOR},
    {"graphs", 0, "MODE", "auto|stage|segment|none", PL_CLI_GRAPHS_HELP, PL__O_GRAPHS},
    {"no-graph", 0, NULL, NULL, "gpu: plain stream launches instead of CUDA Graphs (--graphs none)",
     PL__O_NO_GRAPH},
    {"timing", 0, "T", "sample|all|off",
     "gpu: device stage times: sample (default: one batch in 16, mid-period), all (every "
     "batch; slower with CUDA Graphs) or off",
     PL__O_TIMING},
    {"trace", 0, "FILE", NULL,
     "write the timeline as Chrome trace JSON (Perfetto, chrome://tracing); a long run's "
     "shows its first batches, 2^18 stage spans at most",
     PL__O_TRACE},
    {"json", 'j', NULL, NULL,
     "print the summary as one JSON object on stdout; a run that fails before it starts prints an "
     "error object (docs/json.md)",
     PL__O_JSON},
    {"quiet", 'q', NULL, NULL, "no progress bar, no summary table", PL__O_QUIET},
    {"progress", 0, "WHEN", "auto|always|never",
     "the progress line on stderr (bar, rate, ETA): auto (default: when stderr is a terminal, "
     "and not with --quiet or --json), always (on a pipe: a line a second) or never",
     PL__O_PROGRESS},
    {"workers", 'w', "N", NULL, "host worker threads (default: max(CPUs, streams))", PL__O_WORKERS},
    {"fail-at", 0, "STAGE:B", NULL, "testing: make STAGE fail on batch B (exit 1, outputs kept)",
     PL__O_FAIL_AT},
    {"verbose", 'v', NULL, NULL, "say what user kernels compiled, and what came from the cache",
     PL__O_VERBOSE},
    {"arch", 0, "SM", NULL,
     "check user kernels for SM (sm_90); on a GPU they are built for the device's own arch",
     PL__O_ARCH},
    {"fault-marks", 0, NULL, NULL,
     "gpu: per-stage completion marks in the graphs, so a device fault names its stage for "
     "certain (slower; as run.fault_marks: true)",
     PL__O_FAULT_MARKS},
    {"capture", 0, "DIR", NULL,
     "write a bundle of the run ('pipectl capture --reps 1 -o DIR'; with the options capture "
     "takes: --batches, --depth, --executor, --graphs, --no-graph, --timing, --workers, --quiet, "
     "--set, --out-dir, --confine)",
     PL__O_CAPTURE},
    {"set", 0, "KEY=VALUE", NULL, PL_CLI_SET_HELP, PL_CLI_O_SET},
    {"out-dir", 0, "DIR", NULL,
     "sinks' relative paths resolve in DIR instead of the pipeline's folder (sources' still "
     "resolve against the pipeline's folder); DIR is made with its parents (mkdir -p) when the "
     "run starts",
     PL_CLI_O_OUT_DIR},
    {"confine", 0, NULL, NULL,
     "refuse, before anything runs, any path the pipeline names (sources, sinks, init files, "
     "scripts, kernel sources) that leads outside its folder and --out-dir, `..` and symlinks "
     "followed (as run.confine: true)",
     PL_CLI_O_CONFINE},
    {"shard", 0, "K/N", NULL,
     "run shard K of N: the batches b with b mod N == K (run.shard_mode: range, one block each); "
     "each sink writes its part, OUT.part-K-of-N.EXT with a manifest, which 'pipectl merge' "
     "joins (docs/scale.md)",
     PL__O_SHARD},
    {"mpi", 0, NULL, NULL,
     "under mpirun: rank K of N runs shard K/N on the GPU of its local rank; rank 0 merges the "
     "parts into the outputs one process writes and prints each rank's throughput "
     "(docs/scale.md)",
     PL__O_MPI},
    {"mpi-write", 0, "HOW", "parts|gather",
     "with --mpi, how the outputs are written: parts (default: each rank writes its parts, rank 0 "
     "merges them after the run) or gather (the ranks send rank 0 their batches, which it writes "
     "into the final files while the run goes on; raw and .npy sinks only); docs/scale.md says "
     "which is faster when",
     PL__O_MPI_WRITE},
    {0},
};

static bool pl__parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    if (!s || !*s) return false;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (*end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

/* depth: auto says what it chose as it chooses, on stderr, above the progress line. */
typedef struct pl__depth_say {
    pl_progress *prog;
    bool quiet;
} pl__depth_say;

static void pl__on_depth(void *user, const pl_depth_choice *c)
{
    const pl__depth_say *say = user;
    if (say->quiet) return;
    pl_progress_clear(say->prog);
    fprintf(stderr, "%s\n", c->why);
}

/* What the options of `pipectl run` asked for. */
typedef struct pl__run_args {
    const char *file, *fail_at, *trace, *capture;
    int64_t batches, depth, workers; /* batches -1, depth 0, workers 0: as the pipeline says */
    int timing;                      /* pl_run_cfg.timing_period */
    bool json, quiet, verbose, fault_marks;
    pl_run_cfg gcfg;  /* --graphs / --no-graph */
    pl_cli_load load; /* --set, --out-dir, --confine */
    pl_progress_mode progress;
    pl_exec_kind exec;
    /* --capture DIR: the run is a one-run capture; the options capture takes are passed on as
     * given (cav), the others cannot go with it. */
    char *cav[64];
    int ncav;
    bool cav_full; /* more options than cav holds: an error only with --capture */
    const char *not_capture;
    pl_scale scale; /* --shard, --mpi, --mpi-write */
    bool mpi_write; /* --mpi-write was given */
} pl__run_args;

/* Parses the options and the file into *r. Returns -1 to go on, else the exit code (0 after
 * --help, 2 after a usage error). */
static int pl__run_parse(const pl_cmd *cmd, int argc, char **argv, pl__run_args *r)
{
    memset(r, 0, sizeof *r);
    r->batches = -1;
    r->timing = 16; /* --timing sample */
    pl_run_cfg_init(&r->gcfg);
    r->progress = PL_PROGRESS_AUTO;
    r->exec = PL_EXEC_AUTO;
    pl_scale_init(&r->scale);
    static const int timings[] = {16, 0, -1}; /* sample, all, off */
    r->cav[r->ncav++] = "capture";
    r->cav[r->ncav++] = "--reps";
    r->cav[r->ncav++] = "1";
    pl_cli_args a;
    pl_cli_args_init(&a, cmd, argc, argv);
    const char *v;
    int id, k;
    while ((id = pl_cli_next(&a, &v)) > 0) {
        const pl_cli_opt *o = NULL;
        for (const pl_cli_opt *p = pl_cli_run_opts; p->name; p++)
            if (p->id == id) o = p;
        if (id == PL__O_TRACE || id == PL__O_JSON || id == PL__O_PROGRESS || id == PL__O_FAIL_AT ||
            id == PL__O_VERBOSE || id == PL__O_ARCH || id == PL__O_FAULT_MARKS ||
            id == PL__O_SHARD || id == PL__O_MPI || id == PL__O_MPI_WRITE) {
            if (!r->not_capture) r->not_capture = o->name;
        } else if (id != PL__O_CAPTURE && (r->cav_full || r->ncav + 2 > 56)) {
            /* 56 leaves room for "-o DIR -- FILE" and the NULL. A run without --capture takes
             * more (up to PL_CLI_MAX_SETS --set options), so only pl__run_capture refuses this. */
            r->cav_full = true;
        } else if (id != PL__O_CAPTURE) {
            /* "--name" of each option, once (the argv strings stay for its value) */
            static char names[PL_CLI_MAX_OPTS][32];
            int k2 = (int)(o - pl_cli_run_opts);
            snprintf(names[k2], sizeof names[k2], "--%s", o->name);
            r->cav[r->ncav++] = names[k2];
            if (v) r->cav[r->ncav++] = (char *)v;
        }
        int lr = pl_cli_load_arg(cmd, id, v, &r->load);
        if (lr > 0) return lr;
        switch (id) {
        case PL__O_BATCHES:
            if (strcmp(v, "all") == 0)
                r->batches = 0; /* until the first source file ends */
            else if (pl_cli_int(cmd, id, v, 1, PL_MAX_BATCHES, &r->batches))
                return 2;
            break;
        case PL__O_DEPTH:
            if (pl_cli_depth(cmd, id, v, &r->depth)) return 2;
            break;
        case PL__O_WORKERS:
            if (pl_cli_int(cmd, id, v, 1, 64, &r->workers)) return 2;
            break;
        case PL__O_EXECUTOR:
            if ((k = pl_cli_choice(cmd, id, v)) < 0) return 2;
            r->exec = k == 0 ? PL_EXEC_AUTO : k == 1 ? PL_EXEC_HOST : PL_EXEC_GPU;
            break;
        case PL__O_TIMING:
            if ((k = pl_cli_choice(cmd, id, v)) < 0) return 2;
            r->timing = timings[k];
            break;
        case PL__O_PROGRESS:
            if ((k = pl_cli_choice(cmd, id, v)) < 0) return 2;
            r->progress = (pl_progress_mode)k;
            break;
        case PL__O_FAIL_AT:
            r->fail_at = v;
            break;
        case PL__O_TRACE:
            r->trace = v;
            break;
        case PL__O_NO_GRAPH:
            r->gcfg.use_graphs = false;
            break;
        case PL__O_GRAPHS:
            if (pl_cli_graphs(cmd, id, v, &r->gcfg)) return 2;
            break;
        case PL__O_JSON:
            r->json = true;
            break;
        case PL__O_QUIET:
            r->quiet = true;
            break;
        case PL__O_VERBOSE:
            r->verbose = true;
            break;
        case PL__O_ARCH:
            if (!pl_cli_set_arch(v))
                return pl_cli_usage_error(cmd, "--arch needs an SM version like sm_90, got '%s'",
                                          v);
            break;
        case PL__O_CAPTURE:
            r->capture = v;
            break;
        case PL__O_FAULT_MARKS:
            r->fault_marks = true;
            break;
        case PL__O_SHARD:
            if (pl_scale_parse_shard(cmd, id, v, &r->scale)) return 2;
            break;
        case PL__O_MPI:
            r->scale.mpi = true;
            break;
        case PL__O_MPI_WRITE:
            if ((k = pl_cli_choice(cmd, id, v)) < 0) return 2;
            r->scale.write = (pl_scale_write)k;
            r->mpi_write = true;
            break;
        }
    }
    if (id < 0) return a.rc;
    if (a.n_operands == 0) return pl_cli_usage_error(cmd, "'pipectl run' needs a pipeline file");
    if (a.n_operands > 1)
        return pl_cli_usage_error(
            cmd, "'pipectl run' takes one pipeline file; '%s' is a second one", a.operands[1]);
    r->file = a.operands[0];
    if (r->mpi_write && !r->scale.mpi)
        return pl_cli_usage_error(cmd, "--mpi-write goes with --mpi: it says how the ranks' "
                                       "outputs are written");
    if (r->scale.mpi && r->json)
        return pl_cli_usage_error(cmd, "--json does not go with --mpi: rank 0 prints a table of "
                                       "the ranks");
    r->scale.quiet = r->quiet;
    if (r->scale.mpi) r->quiet = true; /* each rank's own table: rank 0 prints the ranks' one */
    return -1;
}

/* `run --capture DIR FILE`: `capture --reps 1` with the options it takes, as given. */
static int pl__run_capture(const pl_cmd *cmd, pl__run_args *r)
{
    if (r->not_capture)
        return pl_cli_usage_error(cmd,
                                  "--%s does not go with --capture (a capture takes the "
                                  "options of 'pipectl capture')",
                                  r->not_capture);
    if (r->cav_full) return pl_cli_usage_error(cmd, "too many options to pass on with --capture");
    r->cav[r->ncav++] = "-o";
    r->cav[r->ncav++] = (char *)r->capture;
    r->cav[r->ncav++] = "--";
    r->cav[r->ncav++] = (char *)r->file;
    r->cav[r->ncav] = NULL;
    return pl_cmd_capture(r->ncav, r->cav);
}

/* Loads and checks the pipeline (its compiler notes to stderr), applies the options that override
 * its run: keys, checks the files the run will touch and compiles the plan. */
static pl_status pl__run_load(pl__run_args *r, pl_spec **spec_out, pl_plan **plan, pl_error *err)
{
    PL_CHECK(pl_load_checked_opts(r->file, &r->load.opts, spec_out, err));
    pl_spec *spec = *spec_out;
    pl_cli_print_notes(spec, r->verbose);
    if (r->batches >= 0) spec->run.batches_all = r->batches == 0;
    if (r->batches > 0) spec->run.batches = r->batches;
    if (r->depth > 0) {
        spec->run.depth = (int)r->depth;
        spec->run.depth_auto = false;
    } else if (r->depth == PL_DEPTH_AUTO) {
        spec->run.depth_auto = true;
    }
    if (r->fault_marks) spec->run.fault_marks = true;
    /* `batches: all`: counted from the source files now; then the files, for the batches this
     * run will issue, before anything opens (exit 2). */
    PL_CHECK(pl_spec_resolve_batches(spec, err));
    /* A shard: its parts are the files the run touches, its batches what the plan runs. */
    PL_CHECK(pl_scale_apply(&r->scale, spec, err));
    PL_CHECK(pl_spec_check_files(spec, spec->run.batches, NULL, err));
    PL_CHECK(pl_plan_compile_with(spec, pl_scale_batches(&r->scale, spec), 0, plan, err));
    return spec->out_dir ? pl_cli_make_dir(spec->out_dir, err) : PL_OK;
}

/* The run's configuration: the options, the progress line (prog) and what depth: auto says (say)
 * wired in, --fail-at resolved to a stage. Returns -1 to go on, else the exit code of a usage
 * error (printed; with --json the error object too, and err holds it). */
static int pl__run_config(const pl_cmd *cmd, pl__run_args *r, const pl_spec *spec,
                          const pl_plan *plan, pl_run_cfg *cfg, pl_progress *prog,
                          pl__depth_say *say, pl_error *err)
{
    pl_run_cfg_init(cfg);
    cfg->executor = r->exec;
    cfg->use_graphs = r->gcfg.use_graphs;
    cfg->graph_mode = r->gcfg.graph_mode;
    cfg->workers = (int)r->workers;
    cfg->timing_period = r->timing;
    cfg->trace_batches = r->trace ? pl_trace_batches_for(plan) : 0;
    cfg->stop = &pl__stop;
    uint64_t bytes_in, bytes_out;
    pl_report_flow(spec, &bytes_in, &bytes_out);
    /* bytes/s of what the sources bring in, else of what the sinks take out */
    pl_progress_init(prog, r->progress, r->quiet || r->json, bytes_in ? bytes_in : bytes_out,
                     stderr);
    cfg->on_batch = pl_progress_update;
    cfg->user = prog;
    *say = (pl__depth_say){prog, r->quiet};
    cfg->on_depth = pl__on_depth;
    cfg->depth_user = say;
    if (!r->fail_at) {
        pl_scale_config(&r->scale, spec, cfg);
        return -1;
    }
    const char *fail_at = r->fail_at;
    const char *colon = strrchr(fail_at, ':');
    char name[PL_MAX_NAME + 1];
    int64_t fb;
    size_t n = colon ? (size_t)(colon - fail_at) : 0;
    if (!colon || n == 0 || n > PL_MAX_NAME || !pl__parse_i64(colon + 1, 0, INT64_MAX, &fb)) {
        int rc = pl_cli_usage_error(cmd, "--fail-at needs STAGE:BATCH, got '%s'", fail_at);
        pl_error_set(err, PL_EINPUT, "error: --fail-at needs STAGE:BATCH, got '%s'", fail_at);
        if (r->json) pl_json_print_error(stdout, "run", err);
        return rc;
    }
    memcpy(name, fail_at, n);
    name[n] = '\0';
    cfg->fail_stage = pl_spec_find_stage(spec, name);
    cfg->fail_batch = fb;
    if (cfg->fail_stage < 0) {
        int rc = pl_cli_usage_error(cmd, "--fail-at: no stage named '%s'", name);
        pl_error_set(err, PL_EINPUT, "error: --fail-at: no stage named '%s'", name);
        if (r->json) pl_json_print_error(stdout, "run", err);
        return rc;
    }
    pl_scale_config(&r->scale, spec, cfg); /* --fail-at B counts the pipeline's batches */
    return -1;
}

/* GPU-sized work on the host executor (pl_host_cost.h: above PL_HOST_GPU_SIZED_S): refused
 * under --executor auto (exit 2; with --json the error object too), and with --executor host
 * said and followed with a progress line whose ETA starts from the estimate. Returns -1 to go
 * on, else the exit code. */
static int pl__run_host_cost(const pl__run_args *r, const pl_plan *plan, const pl_run_cfg *cfg,
                             pl_progress *prog, pl_error *err)
{
    if (cfg->executor != PL_EXEC_HOST) return -1;
    pl_host_cost c;
    pl_host_cost_estimate(plan, cfg->workers, &c);
    if (c.seconds <= PL_HOST_GPU_SIZED_S) return -1;
    const pl_spec *spec = plan->spec;
    char dur[32], why[320];
    pl_host_cost_duration(c.seconds, dur, sizeof dur);
    bool tera = c.stage_flops >= 1e12;
    snprintf(why, sizeof why,
             "stage '%s': %.3g %s a batch x %lld batches at %.3g GFLOP/s, this host's rate for %s",
             spec->stages[c.stage].name, c.stage_flops * (tera ? 1e-12 : 1e-9),
             tera ? "TFLOP" : "GFLOP", (long long)plan->batches, c.stage_rate * 1e-9,
             c.stage_blas ? "BLAS on its cores" : "the f32 C reference");
    if (r->exec == PL_EXEC_AUTO) {
        pl_error_set(err, PL_EINPUT,
                     "error: pipeline '%s' is sized for a GPU, and none is available here: the "
                     "host executor would take about %s (%s); run it on a machine with a GPU, or "
                     "give --executor host to run it here anyway",
                     spec->name, dur, why);
        if (r->json) pl_json_print_error(stdout, "run", err);
        return pl_cli_fail(err);
    }
    if (!r->quiet && !r->json)
        fprintf(stderr,
                "executor: host, for work sized for a GPU: about %s (%s); the ETA is measured "
                "from the first batch on\n",
                dur, why);
    pl_progress_estimate(prog, c.seconds, plan->batches);
    return -1;
}

/* pl_run with SIGINT, SIGTERM and SIGHUP stopping it cleanly and SIGPIPE ignored, the previous
 * handlers restored after; a stop by a signal says which one. */
static pl_status pl__run_with_signals(const pl_plan *plan, const pl_run_cfg *cfg,
                                      pl_run_result *res, pl_error *err)
{
    struct sigaction sa, old[PL__N_STOP_SIGNALS], ign, old_pipe;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = pl__on_signal;
    sa.sa_flags = 0;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < PL__N_STOP_SIGNALS; i++)
        sigaddset(&sa.sa_mask, pl__stop_signals[i]);
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    pl__stop = 0;
    pl_intr_clear();
    for (int i = 0; i < PL__N_STOP_SIGNALS; i++)
        sigaction(pl__stop_signals[i], &sa, &old[i]);
    /* A sink writing to a pipe whose reader went away fails with EPIPE (an error naming it)
     * instead of the process dying with nothing finalized. */
    sigaction(SIGPIPE, &ign, &old_pipe);
    /* The API's run driver: `pipectl run` and pipectl_run_with run a plan the same way. */
    pl_status st = pl_api_run(plan, cfg, NULL, 0, res, err);
    for (int i = 0; i < PL__N_STOP_SIGNALS; i++)
        sigaction(pl__stop_signals[i], &old[i], NULL);
    sigaction(SIGPIPE, &old_pipe, NULL);
    int stop_sig = pl__stop;
    /* Whoever noticed the stop first (the executor, a Lua call) reported it; say which signal. */
    if (st == PL_EINTR && stop_sig > 0) { /* < 0: another rank's (pl_scale.h) */
        pl_error_set(err, PL_EINTR, "error: interrupted (%s)",
                     stop_sig == SIGINT    ? "Ctrl-C"
                     : stop_sig == SIGTERM ? "SIGTERM"
                                           : "SIGHUP");
        res->signal = stop_sig; /* the JSON's exit_code: 128 + it, as the process's */
    }
    return st;
}

/* After the run (st: how it ended): the timeline of what completed (also after an error or
 * Ctrl-C), then the summary table or the JSON object (*reported: one was printed), and what
 * stopped it. Returns st, or the trace's error when the run succeeded and the trace failed. */
static pl_status pl__run_report(const pl__run_args *r, const pl_plan *plan, pl_run_result *res,
                                pl_status st, pl_error *err, bool *reported)
{
    if (r->trace && res->executor) {
        pl_error te;
        char tbuf[PATH_MAX];
        const char *trace = pl_scale_trace(&r->scale, r->trace, tbuf, sizeof tbuf);
        if (pl_trace_write(trace, plan, res, &te) != PL_OK) {
            fprintf(stderr, "%s\n", te.msg);
            if (st == PL_OK) {
                st = te.status;
                *err = te;
            }
        } else if (!r->quiet && !r->json) {
            fprintf(stderr,
                    "timeline written to %s (open it in ui.perfetto.dev or "
                    "chrome://tracing)\n",
                    trace);
            if (pl_trace_batches(res) < res->batches_done)
                fprintf(stderr,
                        "  it shows the first %lld of %lld batches: a trace keeps at most %lld "
                        "stage spans; the summary covers every batch\n",
                        (long long)pl_trace_batches(res), (long long)res->batches_done,
                        (long long)PL_TRACE_MAX_SPANS);
        }
    }
    /* res->executor stays NULL when no executor started (e.g. no GPU): nothing ran to report.
     * A sink writing to stdout (`to: -`) owns it: the summary goes to stderr then. */
    FILE *rep = stdout;
    for (int i = 0; i < res->n_outputs; i++)
        if (res->outputs[i].path && strcmp(res->outputs[i].path, "-") == 0) rep = stderr;
    if (r->json) {
        pl_report_json(rep, plan, res, st, err);
        *reported = true;
    } else if (!r->quiet && res->executor)
        pl_report_print(rep, plan, res, st);
    fflush(stdout);
    if (st != PL_OK && res->executor) pl_report_stopped(stderr, res);
    return st;
}

int pl_cmd_run(int argc, char **argv)
{
    const pl_cmd *cmd = pl_cmd_find("run", NULL);
    pl__run_args r;
    int rc = pl__run_parse(cmd, argc, argv, &r);
    if (rc >= 0) return rc;
    if (r.capture && (r.scale.on || r.scale.mpi))
        return pl_cli_usage_error(cmd, "--capture does not go with --shard or --mpi: 'pipectl "
                                       "capture --shard K/N' and 'capture --mpi' capture shards");
    if (r.capture) return pl__run_capture(cmd, &r);

    pl_error err;
    pl_error_clear(&err);
    pl_spec *spec = NULL;
    pl_plan *plan = NULL;
    pl_run_result res;
    memset(&res, 0, sizeof res);
    pl_run_cfg cfg;
    pl_progress prog;
    pl__depth_say say;
    char note[sizeof res.note];
    /* With --json every outcome prints one object on stdout: the summary once the run started,
     * else an error object (docs/json.md); `reported` says one was printed. */
    bool reported = false;
    rc = 0;
    pl_status st = pl_scale_begin(&r.scale, &err);
    if (st != PL_OK) {
        if (r.json) pl_json_print_error(stdout, "run", &err);
        return pl_cli_fail(&err);
    }
    st = pl__run_load(&r, &spec, &plan, &err);
    if (st != PL_OK) goto fail;
    rc = pl__run_config(cmd, &r, spec, plan, &cfg, &prog, &say, &err);
    if (rc >= 0) goto out;
    rc = 0;
    cfg.executor = pl_exec_pick(plan, r.exec, note, sizeof note);
    rc = pl__run_host_cost(&r, plan, &cfg, &prog, &err);
    if (rc >= 0) goto out;
    rc = 0;
    if (note[0]) fprintf(stderr, "%s\n", note); /* said before a long run, as it starts */
    pl__bar_tty = prog.on && prog.tty;
    st = pl_scale_start(&r.scale, plan, &cfg, &err);
    if (st != PL_OK) goto fail;
    st = pl__run_with_signals(plan, &cfg, &res, &err);
    pl_progress_clear(&prog);
    st = pl__run_report(&r, plan, &res, st, &err, &reported);
fail:
    /* Parts' manifests; with --mpi the ranks' outcome, whatever this rank's was. */
    st = pl_scale_end(&r.scale, spec, &res, st, &err);
    if (st == PL_OK) goto out;
    if (r.json && !reported) pl_json_print_error(stdout, "run", &err);
    rc = pl_cli_fail(&err);
    if (st == PL_EINTR && pl__stop > 0) rc = 128 + pl__stop;
out:
    rc = pl_scale_finish(&r.scale, rc, &err);
    pl_run_result_fini(&res);
    pl_plan_free(plan);
    pl_spec_free(spec);
    return rc;
}
