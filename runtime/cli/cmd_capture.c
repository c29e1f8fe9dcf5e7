/* cmd_capture: `pipectl capture FILE -o DIR` (and `pipectl run --capture DIR`): runs a pipeline
 * and writes a bundle (runtime/record/pl_bundle.h, docs/bundles.md) that `pipectl replay` checks.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pl_bundle.h"
#include "pl_cli.h"
#include "pl_intr.h"
#include "pl_mpi.h"
#include "pl_scale.h"
#include "pl_str.h"

static volatile sig_atomic_t pl__stop;

static void pl__on_sigint(int sig)
{
    pl__stop = sig; /* the signal's number: --mpi's exit code is 128 + it */
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
    PL__O_SHARD,
    PL__O_MPI,
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
    {"shard", 0, "K/N", NULL,
     "capture shard K of N, as 'pipectl run --shard K/N': the sinks write their parts, and the "
     "bundle records the shard, which replay runs again",
     PL__O_SHARD},
    {"mpi", 0, NULL, NULL,
     "under mpirun: rank K captures shard K/N into DIR/rank-K, rank 0 merges the parts and "
     "writes DIR/world.json (ranks, hosts, devices); 'pipectl replay DIR' replays every rank, "
     "--rank K one",
     PL__O_MPI},
    {0},
};

/* cfg.adjust: the shard (and with MPI the rank's GPU) on the loaded pipeline, and the run's
 * configuration for a world (a peer's stop notice stops this rank too). */
typedef struct pl__capture_scale {
    pl_scale *sc;
    pl_run_cfg *run;
} pl__capture_scale;

static pl_status pl__capture_adjust(void *user, pl_spec *spec, pl_error *err)
{
    pl__capture_scale *cs = user;
    PL_CHECK(pl_scale_apply(cs->sc, spec, err));
    pl_scale_config(cs->sc, spec, cs->run);
    return PL_OK;
}

/* One rank, as world.json lists it (gathered to rank 0). */
typedef struct pl__rank_rec {
    int32_t rank, local_rank, device, exit_code;
    char host[64];
} pl__rank_rec;

/* Rank 0 writes DIR/world.json once every rank's capture ended (rc: this rank's exit code so far):
 * every rank calls it, since it gathers. */
static int pl__write_world(const pl_scale *sc, const char *dir, const char *file, int device,
                           int rc)
{
    pl__rank_rec mine, *all = calloc((size_t)sc->world.size, sizeof *all);
    memset(&mine, 0, sizeof mine);
    mine.rank = sc->world.rank;
    mine.local_rank = sc->world.local_rank;
    mine.device = device;
    mine.exit_code = rc;
    snprintf(mine.host, sizeof mine.host, "%s", sc->world.host);
    pl_error err;
    pl_error_clear(&err);
    if (!all) return rc ? rc : 1;
    pl_status st = pl_mpi_allgather(&mine, sizeof mine, all, &err);
    if (st != PL_OK || sc->world.rank != 0) {
        free(all);
        if (st != PL_OK) fprintf(stderr, "%s\n", err.msg);
        return st != PL_OK && rc == 0 ? 1 : rc;
    }
    json_t *w = json_object(), *ranks = json_array(), *hosts = json_array();
    int worst = 0;
    for (int k = 0; w && ranks && hosts && k < sc->world.size; k++) {
        char b[32];
        snprintf(b, sizeof b, "rank-%d", k);
        all[k].host[sizeof all[k].host - 1] = '\0';
        json_array_append_new(
            ranks, json_pack("{s:i, s:s, s:i, s:o, s:s, s:i}", "rank", k, "host", all[k].host,
                             "local_rank", all[k].local_rank, "device",
                             all[k].device >= 0 ? json_integer(all[k].device) : json_null(),
                             "bundle", b, "exit_code", all[k].exit_code));
        bool seen = false;
        for (size_t h = 0; h < json_array_size(hosts); h++)
            seen = seen || strcmp(json_string_value(json_array_get(hosts, h)), all[k].host) == 0;
        if (!seen) json_array_append_new(hosts, json_string(all[k].host));
        if (all[k].exit_code) worst = all[k].exit_code;
    }
    free(all);
    char mpi[128];
    pl_mpi_describe(mpi, sizeof mpi);
    if (w && ranks && hosts) {
        json_object_set_new(w, "schema", json_string("pipectl-world"));
        json_object_set_new(w, "schema_version", json_integer(1));
        json_object_set_new(w, "pipeline", pl_json_str(file));
        json_object_set_new(w, "mpi", json_string(mpi));
        json_object_set_new(w, "size", json_integer(sc->world.size));
        json_object_set_new(w, "hosts", json_incref(hosts));
        json_object_set_new(w, "ranks", json_incref(ranks));
        json_object_set_new(w, "complete", json_boolean(worst == 0));
    }
    char p[4096];
    snprintf(p, sizeof p, "%s/world.json", dir);
    st = w && ranks && hosts ? pl_json_write_file(p, w, &err)
                             : pl_error_set(&err, PL_ENOMEM, "error: out of memory");
    json_decref(w);
    json_decref(ranks);
    json_decref(hosts);
    if (st != PL_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return rc ? rc : 1;
    }
    return rc;
}

int pl_cmd_capture(int argc, char **argv)
{
    const pl_cmd *cmd = pl_cmd_find("capture", NULL);
    pl_capture_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    pl_run_cfg_init(&cfg.run);
    cfg.reps = 3;
    pl_scale sc;
    pl_scale_init(&sc);
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
        case PL__O_SHARD:
            if (pl_scale_parse_shard(cmd, id, v, &sc)) goto usage;
            break;
        case PL__O_MPI:
            sc.mpi = true;
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
    pl_error err;
    pl_error_clear(&err);
    sc.quiet = quiet;
    if (pl_scale_begin(&sc, &err) != PL_OK) {
        free(line);
        return pl_cli_fail(&err);
    }
    /* A world: rank K's bundle is DIR/rank-K, beside rank 0's world.json. */
    const char *world_dir = cfg.dir;
    char rank_dir[4096];
    pl_capture_rank rk = {sc.world.rank, sc.world.size, sc.world.local_rank, sc.world.local_size,
                          sc.world.host};
    pl__capture_scale cs = {&sc, &cfg.run};
    if (sc.on || sc.mpi_up) {
        cfg.adjust = pl__capture_adjust;
        cfg.adjust_user = &cs;
    }
    if (sc.mpi_up && sc.world.size > 1) {
        if (mkdir(world_dir, 0777) != 0 && errno != EEXIST) {
            pl_error_set(&err, PL_EIO, "error: cannot make the bundle folder %s: %s", world_dir,
                         strerror(errno));
            free(line);
            return pl_scale_finish(&sc, pl_cli_fail(&err), &err);
        }
        snprintf(rank_dir, sizeof rank_dir, "%s/rank-%d", world_dir, sc.world.rank);
        cfg.dir = rank_dir;
        cfg.rank = &rk;
    }
    struct sigaction sa, old, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = pl__on_sigint;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old);
    if (sc.mpi_up) sigaction(SIGTERM, &sa, &old_term); /* mpirun passes a Ctrl-C on as SIGTERM */
    pl_capture_info info;
    pl_status st = pl_bundle_capture(&cfg, &info, &err);
    sigaction(SIGINT, &old, NULL);
    if (sc.mpi_up) sigaction(SIGTERM, &old_term, NULL);
    free(line);
    if (info.note[0]) fprintf(stderr, "%s\n", info.note);
    /* Parts' manifests; with --mpi the world's outcome and rank 0's merge, whatever this rank's
     * capture did. */
    /* The rank's GPU; -1 on the host executor (world.json says null). */
    int device = info.spec && info.executor && strcmp(info.executor, "gpu") == 0
                     ? info.spec->run.device
                     : -1;
    st = pl_scale_end(&sc, info.spec, info.last.executor ? &info.last : NULL, st, &err);
    pl_capture_info_fini(&info);
    if (st != PL_OK) {
        rc = pl_cli_fail(&err);
        if (st == PL_EINTR && pl__stop > 0) rc = 128 + pl__stop;
        char dir[PL_NAME_CAP];
        if (st != PL_EINPUT)
            fprintf(stderr, "no bundle written: %s has no manifest.json\n",
                    pl_name_str(cfg.dir, 0, dir, sizeof dir));
        if (sc.mpi_up && sc.world.size > 1)
            rc = pl__write_world(&sc, world_dir, cfg.file, device, rc);
        return pl_scale_finish(&sc, rc, &err);
    }
    if (sc.mpi_up && sc.world.size > 1) {
        rc = pl__write_world(&sc, world_dir, cfg.file, device, 0);
        rc = pl_scale_finish(&sc, rc, &err);
        if (rc != 0) return rc;
    } else {
        rc = pl_scale_finish(&sc, 0, &err);
        if (rc != 0) return rc;
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
        if (cfg.rank)
            printf("  rank %d of %d; replay the world with: pipectl replay %s (--rank %d: this "
                   "rank's only)\n",
                   cfg.rank->rank, cfg.rank->size, pl_name_str(world_dir, 0, dir, sizeof dir),
                   cfg.rank->rank);
        else
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
