/* cmd_replay: `pipectl replay DIR`: checks a bundle's inputs, runs its pipeline again, compares
 * every batch's checksum with the recorded one, then the stage times and the environment.
 * Exit 0: every output matches; 1: one differs (named); 2: a bad bundle or a changed input.
 * A world's bundle (capture --mpi): every rank's shard one after another, `--rank K` one, or
 * under mpirun `--mpi` all at once, one rank each. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pl_bundle.h"
#include "pl_cli.h"
#include "pl_intr.h"
#include "pl_mpi.h"
#include "pl_str.h"

static volatile sig_atomic_t pl__stop;

static void pl__on_sigint(int sig)
{
    (void)sig;
    pl__stop = 1;
    pl_intr_wake(); /* async-signal-safe: the host executor sleeps until told */
}

static const char *pl__t(double s, char *buf, size_t cap)
{
    if (s >= 1)
        snprintf(buf, cap, "%.3f s", s);
    else if (s >= 1e-3)
        snprintf(buf, cap, "%.2f ms", s * 1e3);
    else
        snprintf(buf, cap, "%.1f us", s * 1e6);
    return buf;
}

/* The per-stage table shared with `pipectl diff` (labels say which side is which). */
void pl_cli_print_stages(FILE *out, const pl_compare *c, const char *la, const char *lb)
{
    if (c->n_stages == 0) return;
    int w = 5;
    for (int i = 0; i < c->n_stages; i++)
        if ((int)strlen(c->stages[i].name) > w) w = (int)strlen(c->stages[i].name);
    fprintf(out,
            "\nstage times, %s vs %s (ratio = %s p50 / %s p50: the median batch, which one "
            "stalled batch hardly moves):\n",
            la, lb, lb, la);
    char h[6][24];
    static const char *const col[] = {"mean", "mean", "p50", "p50", "p99", "p99"};
    for (int k = 0; k < 6; k++)
        snprintf(h[k], sizeof h[k], "%s %s", col[k], k % 2 ? lb : la);
    fprintf(out, "  %-*s  %-7s %10s %10s %10s %10s %10s %10s %7s  %s\n", w, "stage", "engine", h[0],
            h[1], h[2], h[3], h[4], h[5], "ratio", "vs noise");
    for (int i = 0; i < c->n_stages; i++) {
        const pl_stage_cmp *s = &c->stages[i];
        char b[6][32], ratio[16] = "-", verdict[64];
        if (!s->in_a || !s->in_b) {
            fprintf(out, "  %-*s  %-7s only in %s\n", w, s->name, s->engine, s->in_a ? la : lb);
            continue;
        }
        if (s->count_a == 0 || s->count_b == 0) {
            fprintf(out, "  %-*s  %-7s not timed in %s\n", w, s->name, s->engine,
                    s->count_a == 0 ? la : lb);
            continue;
        }
        double r = s->p50_a > 0 ? s->p50_b / s->p50_a : 0;
        if (s->p50_a > 0) snprintf(ratio, sizeof ratio, "%.2f", r);
        if (s->band < 0)
            snprintf(verdict, sizeof verdict, "no noise recorded");
        else
            snprintf(verdict, sizeof verdict, "%s (band +-%.0f%%)",
                     s->beyond ? (r > 1 ? "SLOWER" : "FASTER") : "within noise", 100 * s->band);
        fprintf(out, "  %-*s  %-7s %10s %10s %10s %10s %10s %10s %7s  %s\n", w, s->name, s->engine,
                pl__t(s->mean_a, b[0], 32), pl__t(s->mean_b, b[1], 32), pl__t(s->p50_a, b[2], 32),
                pl__t(s->p50_b, b[3], 32), pl__t(s->p99_a, b[4], 32), pl__t(s->p99_b, b[5], 32),
                ratio, verdict);
    }
}

void pl_cli_print_env(FILE *out, const pl_compare *c, const char *la, const char *lb)
{
    if (c->n_env == 0) {
        fprintf(out, "\nenvironment: unchanged (pipectl, build, host, libraries, GPU, plan)\n");
        return;
    }
    fprintf(out, "\nwhat changed (%s -> %s):\n", la, lb);
    for (int i = 0; i < c->n_env; i++)
        fprintf(out, "  %-28s %s -> %s\n", c->env[i].key, c->env[i].a, c->env[i].b);
}

static const char *const pl__verdicts[] = {"match",      "differs", "within_tolerance",
                                           "unverified", "absent",  "unchecked"};

/* --json: the same as the tables, for programs (CI). */
static void pl__json(const char *dir, const pl_replay_result *r, pl_status st, const pl_error *err)
{
    const pl_compare *c = &r->cmp;
    json_t *o = json_object(), *sinks = json_array(), *stages = json_array(), *env = json_array(),
           *changed = json_array();
    if (!o || !sinks || !stages || !env || !changed) {
        json_decref(o);
        json_decref(sinks);
        json_decref(stages);
        json_decref(env);
        json_decref(changed);
        return;
    }
    bool ok = st == PL_OK && c->first_sink < 0;
    json_object_set_new(o, "schema_version", json_integer(PL_JSON_SCHEMA_VERSION));
    json_object_set_new(o, "bundle", pl_json_str(dir));
    json_object_set_new(o, "verdict",
                        json_string(st != PL_OK ? "error"
                                    : ok        ? "match"
                                                : "differs"));
    json_object_set_new(o, "exit_code",
                        json_integer(st != PL_OK ? pl_status_exit_code(st)
                                     : ok        ? 0
                                                 : 1));
    json_object_set_new(o, "error", st != PL_OK ? pl_json_str(err->msg) : json_null());
    json_object_set_new(o, "executor_recorded", pl_json_str(r->executor_rec));
    json_object_set_new(o, "executor", pl_json_str(r->executor));
    json_object_set_new(o, "batches_done", json_integer(r->batches_done));
    json_object_set_new(o, "batches_differ", json_integer(c->n_differ));
    if (c->first_sink >= 0) {
        const pl_sink_cmp *f = &c->sinks[c->first_sink];
        json_object_set_new(o, "first_difference",
                            json_pack("{s:s, s:I, s:o, s:o}", "sink", f->stage, "batch",
                                      (json_int_t)f->first_batch, "recorded",
                                      pl_json_hex64(f->first_a), "now", pl_json_hex64(f->first_b)));
    } else {
        json_object_set_new(o, "first_difference", json_null());
    }
    for (int i = 0; i < r->n_changed; i++)
        json_array_append_new(changed, json_pack("{s:o, s:o, s:b, s:o, s:o}", "path",
                                                 pl_json_str(r->changed[i].path), "what",
                                                 pl_json_str(r->changed[i].what), "missing",
                                                 r->changed[i].missing, "sha256_recorded",
                                                 pl_json_str(r->changed[i].want), "sha256_now",
                                                 pl_json_str(r->changed[i].got)));
    for (int i = 0; i < c->n_sinks; i++) {
        const pl_sink_cmp *s = &c->sinks[i];
        json_t *e =
            json_pack("{s:s, s:s, s:I, s:I, s:I, s:b, s:f}", "stage", s->stage, "verdict",
                      pl__verdicts[s->verdict], "batches_recorded", (json_int_t)s->batches_a,
                      "batches_now", (json_int_t)s->batches_b, "batches_differ",
                      (json_int_t)s->n_differ, "exact", s->exact, "tolerance", s->tol);
        if (e && s->rel_err >= 0)
            json_object_set_new(e, "relative_difference", json_real(s->rel_err));
        json_array_append_new(sinks, e);
    }
    for (int i = 0; i < c->n_stages; i++) {
        const pl_stage_cmp *s = &c->stages[i];
        json_array_append_new(
            stages,
            json_pack("{s:s, s:s, s:f, s:f, s:f, s:f, s:f, s:f, s:o, s:o, s:b}", "name", s->name,
                      "engine", s->engine, "mean_s_recorded", s->mean_a, "mean_s_now", s->mean_b,
                      "p50_s_recorded", s->p50_a, "p50_s_now", s->p50_b, "p99_s_recorded", s->p99_a,
                      "p99_s_now", s->p99_b, "noise",
                      s->noise >= 0 ? json_real(s->noise) : json_null(), "band",
                      s->band >= 0 ? json_real(s->band) : json_null(), "beyond_noise", s->beyond));
    }
    for (int i = 0; i < c->n_env; i++)
        json_array_append_new(env, json_pack("{s:o, s:o, s:o}", "key", pl_json_str(c->env[i].key),
                                             "recorded", pl_json_str(c->env[i].a), "now",
                                             pl_json_str(c->env[i].b)));
    json_object_set_new(o, "changed_files", changed);
    json_object_set_new(o, "sinks", sinks);
    json_object_set_new(o, "stages", stages);
    json_object_set_new(o, "environment_changes", env);
    json_dumpf(o, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    fputc('\n', stdout);
    json_decref(o);
}

enum {
    PL__O_EXECUTOR = 256,
    PL__O_ALLOW_CHANGED,
    PL__O_REPS,
    PL__O_WORKERS,
    PL__O_NO_GRAPH,
    PL__O_GRAPHS,
    PL__O_OUT,
    PL__O_QUIET,
    PL__O_JSON,
    PL__O_RANK,
    PL__O_MPI,
};

const pl_cli_opt pl_cli_replay_opts[] = {
    {"executor", 'e', "E", "recorded|host|gpu", "recorded (default) | host | gpu", PL__O_EXECUTOR},
    {"allow-changed-inputs", 0, NULL, NULL, "run even when an input's SHA-256 changed (named)",
     PL__O_ALLOW_CHANGED},
    {"reps", 0, "N", NULL, "runs; the median of their stage p50s is compared (default 1)",
     PL__O_REPS},
    {"workers", 'w', "N", NULL, "host workers (default: as recorded)", PL__O_WORKERS},
    {"graphs", 0, "MODE", "auto|stage|segment|none",
     "gpu: which CUDA Graphs (default: as recorded): auto, stage, segment or none (as "
     "'pipectl run')",
     PL__O_GRAPHS},
    {"no-graph", 0, NULL, NULL, "gpu: plain stream launches (--graphs none)", PL__O_NO_GRAPH},
    {"out", 0, "DIR", NULL, "keep the replay's outputs in DIR (default: a temporary folder)",
     PL__O_OUT},
    {"quiet", 'q', NULL, NULL, "only the verdict and the sinks that differ", PL__O_QUIET},
    {"json", 'j', NULL, NULL,
     "print the verdict, sinks, stage times and changes as one JSON object on stdout "
     "(docs/bundles.md)",
     PL__O_JSON},
    {"rank", 0, "K", NULL,
     "a world's bundle (capture --mpi): replay rank K's shard only (default: every rank's, one "
     "after another)",
     PL__O_RANK},
    {"mpi", 0, NULL, NULL,
     "under mpirun -n N, a world's bundle of N ranks: rank K replays rank K's shard, all at once; "
     "rank 0 prints each rank's report and the world's verdict, and every rank exits with the "
     "world's code (another N is refused, exit 2, naming the N to use)",
     PL__O_MPI},
    {0},
};

/* What the command line asks for. */
typedef struct pl__replay_args {
    pl_replay_cfg cfg;
    const char *dir;
    bool quiet, json;
    int rank;         /* --rank K, -1 when not given */
    bool mpi;         /* --mpi */
    FILE *out, *eout; /* where the report goes: stdout and stderr, or a rank's to rank 0 */
} pl__replay_args;

/* Parses the command line into o; returns -1 to go on, else the exit code (0 after --help). */
static int pl__parse_args(int argc, char **argv, pl__replay_args *o)
{
    const pl_cmd *cmd = pl_cmd_find("replay", NULL);
    pl_replay_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    pl_run_cfg_init(&cfg.run);
    cfg.reps = 1;
    bool quiet = false, json = false;
    o->rank = -1;
    static const pl_exec_kind execs[] = {PL_EXEC_AUTO, PL_EXEC_HOST, PL_EXEC_GPU};
    pl_cli_args a;
    pl_cli_args_init(&a, cmd, argc, argv);
    const char *v;
    int id, k;
    int64_t n;
    while ((id = pl_cli_next(&a, &v)) > 0) {
        switch (id) {
        case PL__O_JSON:
            json = true;
            break;
        case PL__O_EXECUTOR:
            if ((k = pl_cli_choice(cmd, id, v)) < 0) return 2;
            cfg.run.executor = execs[k]; /* recorded: auto, which replay reads as the bundle's */
            break;
        case PL__O_REPS:
            if (pl_cli_int(cmd, id, v, 1, 64, &n)) return 2;
            cfg.reps = (int)n;
            break;
        case PL__O_WORKERS:
            if (pl_cli_int(cmd, id, v, 1, 64, &n)) return 2;
            cfg.run.workers = (int)n, cfg.workers_given = true;
            break;
        case PL__O_OUT:
            cfg.out_dir = v;
            break;
        case PL__O_NO_GRAPH:
            cfg.run.use_graphs = false;
            break;
        case PL__O_GRAPHS:
            if (pl_cli_graphs(cmd, id, v, &cfg.run)) return 2;
            cfg.graph_mode_given = true;
            break;
        case PL__O_ALLOW_CHANGED:
            cfg.allow_changed_inputs = true;
            break;
        case PL__O_QUIET:
            quiet = true;
            break;
        case PL__O_RANK:
            if (pl_cli_int(cmd, id, v, 0, 1 << 20, &n)) return 2;
            o->rank = (int)n;
            break;
        case PL__O_MPI:
            o->mpi = true;
            break;
        }
    }
    if (id < 0) return a.rc;
    if (a.n_operands == 0) return pl_cli_usage_error(cmd, "'pipectl replay' needs a bundle folder");
    if (a.n_operands > 1)
        return pl_cli_usage_error(
            cmd, "'pipectl replay' takes one bundle folder; '%s' is a second one", a.operands[1]);
    if (o->mpi && o->rank >= 0)
        return pl_cli_usage_error(cmd, "--rank does not go with --mpi: with --mpi rank K of "
                                       "mpirun replays rank K's bundle");
    if (o->mpi && json)
        return pl_cli_usage_error(cmd, "--json does not go with --mpi: rank 0 prints each rank's "
                                       "report; --json replays one rank (--rank K)");
    o->cfg = cfg;
    o->dir = a.operands[0];
    o->quiet = quiet;
    o->json = json;
    return -1;
}

/* pl_bundle_replay with Ctrl-C asking the run to stop (the replay then fails, and says so); under
 * mpirun SIGTERM too, which is how mpirun passes a Ctrl-C on. */
static pl_status pl__replay_stoppable(const pl_bundle *b, pl_replay_cfg *cfg, bool term,
                                      pl_replay_result *r, pl_error *err)
{
    cfg->run.stop = &pl__stop;
    struct sigaction sa, old, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = pl__on_sigint;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old);
    if (term) sigaction(SIGTERM, &sa, &old_term);
    pl_status st = pl_bundle_replay(b, cfg, r, err);
    sigaction(SIGINT, &old, NULL);
    if (term) sigaction(SIGTERM, &old_term, NULL);
    return st;
}

static void pl__print_changed(FILE *eout, const pl_replay_result *r)
{
    char name[PL_NAME_CAP];
    for (int i = 0; i < r->n_changed; i++) {
        const pl_file_check *x = &r->changed[i];
        pl_name_str(x->path, 0, name, sizeof name);
        if (x->missing)
            fprintf(eout, "changed: %s: %s is missing (recorded sha256 %.16s...)\n", x->what, name,
                    x->want);
        else
            fprintf(eout, "changed: %s: %s (sha256 recorded %.16s..., now %.16s...)\n", x->what,
                    name, x->want, x->got);
    }
}

/* The verdict line: on stdout when every sink matches (returns 0), on stderr naming the first
 * difference (returns 1). */
static int pl__print_verdict(FILE *out, FILE *eout, const char *dir, const pl_replay_result *r)
{
    const pl_compare *c = &r->cmp;
    int n_tol = 0;
    for (int i = 0; i < c->n_sinks; i++)
        if (c->sinks[i].verdict == PL_SINK_WITHIN_TOL) n_tol++;
    if (c->first_sink < 0) {
        char name[PL_NAME_CAP];
        fprintf(out, "replay of %s on %s: %d sink%s, %lld batches: every checksum matches%s\n",
                pl_name_str(dir, 0, name, sizeof name), r->executor, c->n_sinks,
                c->n_sinks == 1 ? "" : "s", (long long)r->batches_done,
                n_tol ? " or is within its tolerance" : " (bit for bit)");
        return 0;
    }
    const pl_sink_cmp *s = &c->sinks[c->first_sink];
    fprintf(eout,
            "replay of %s on %s: MISMATCH: sink '%s', batch %lld: recorded 0x%016" PRIx64
            ", now 0x%016" PRIx64 "; %lld batch%s differ%s in all\n",
            dir, r->executor, s->stage, (long long)s->first_batch, s->first_a, s->first_b,
            (long long)c->n_differ, c->n_differ == 1 ? "" : "es", c->n_differ == 1 ? "s" : "");
    return 1;
}

/* One line a sink: its batches and its verdict. */
static void pl__print_sink(FILE *out, const pl_sink_cmp *s)
{
    fprintf(out, "  %-20s %6lld batches  ", s->stage, (long long)s->batches_a);
    switch (s->verdict) {
    case PL_SINK_MATCH:
        fprintf(out, "match (bit for bit)\n");
        break;
    case PL_SINK_WITHIN_TOL:
        fprintf(out,
                "not bit-identical (allowed: %s), within tolerance: relative difference "
                "%.3g <= %.3g\n",
                "its ops are reproducible on one GPU only", s->rel_err, s->tol);
        break;
    case PL_SINK_UNVERIFIED:
        fprintf(out,
                "DIFFERS in %lld batches where bits may differ (tolerance %.3g), but the "
                "bundle has no copy of the output to compare (capture with "
                "--copy-outputs)\n",
                (long long)s->n_differ, s->tol);
        break;
    case PL_SINK_ABSENT:
        fprintf(out, "ABSENT in one of the two runs\n");
        break;
    case PL_SINK_UNCHECKED:
        fprintf(out, "not checksummed (checksum: false): not compared\n");
        break;
    case PL_SINK_DIFFER:
        fprintf(out, "DIFFERS in %lld batch%s (first: %lld)%s", (long long)s->n_differ,
                s->n_differ == 1 ? "" : "es", (long long)s->first_batch,
                s->exact ? ", bit-identical by design" : "");
        if (s->rel_err >= 0)
            fprintf(out, ", relative difference %.3g > tolerance %.3g", s->rel_err, s->tol);
        if (s->batches_a != s->batches_b)
            fprintf(out, " (recorded %lld batches, now %lld)", (long long)s->batches_a,
                    (long long)s->batches_b);
        fprintf(out, "\n");
        break;
    }
}

/* The report of a replay that ran: the verdict, the sinks (all of them unless --quiet and every
 * one matches), the stage times and the environment (unless --quiet). Returns the exit code. */
static int pl__print_report(const pl__replay_args *o, const pl_replay_result *r)
{
    if (r->note[0]) fprintf(o->out, "note: %s\n", r->note);
    const pl_compare *c = &r->cmp;
    int rc = pl__print_verdict(o->out, o->eout, o->dir, r);
    if (!o->quiet || rc)
        for (int i = 0; i < c->n_sinks; i++)
            pl__print_sink(o->out, &c->sinks[i]);
    if (!o->quiet) {
        pl_cli_print_stages(o->out, c, "rec", "now");
        pl_cli_print_env(o->out, c, "recorded", "now");
    }
    return rc;
}

/* err's message on eout; its exit code (pl_cli_fail, to the replay's streams). */
static int pl__fail(FILE *eout, const pl_error *err)
{
    fprintf(eout, "%s\n", err->msg);
    return pl_status_exit_code(err->status);
}

/* Replays the bundle at o->dir; returns the exit code. */
static int pl__replay_one(const pl__replay_args *o_in)
{
    pl__replay_args o = *o_in;
    int rc;
    pl_error err;
    pl_error_clear(&err);
    pl_bundle *b = NULL;
    pl_replay_result r;
    memset(&r, 0, sizeof r);
    r.cmp.first_sink = -1;
    if (pl_bundle_open(o.dir, &b, &err) != PL_OK) {
        if (o.json) pl__json(o.dir, &r, err.status, &err);
        return pl__fail(o.eout, &err);
    }
    pl_status st = pl__replay_stoppable(b, &o.cfg, o.mpi, &r, &err);
    for (int i = 0; i < r.n_warnings; i++)
        fprintf(o.eout, "%s\n", r.warnings[i]);
    if (o.json) {
        pl__json(o.dir, &r, st, &err);
        rc = st != PL_OK ? pl_status_exit_code(st) : r.cmp.first_sink >= 0 ? 1 : 0;
        if (st != PL_OK) fprintf(stderr, "%s\n", err.msg);
    } else {
        pl__print_changed(o.eout, &r);
        rc = st != PL_OK ? pl__fail(o.eout, &err) : pl__print_report(&o, &r);
    }
    pl_replay_result_fini(&r);
    pl_bundle_free(b);
    return rc;
}

/* A world's bundle (`capture --mpi`: world.json and a bundle per rank, rank-K/): its size (the
 * world.json's ranks agree with it), else 0 with the reason on eout. */
static int pl__world_size(const pl__replay_args *o, json_t *world, FILE *eout)
{
    json_t *ranks = json_object_get(world, "ranks");
    int size = (int)json_integer_value(json_object_get(world, "size"));
    char name[PL_NAME_CAP];
    pl_name_str(o->dir, 0, name, sizeof name);
    if (!json_is_array(ranks) || size < 1 || (int)json_array_size(ranks) != size) {
        fprintf(eout,
                "error: %s/world.json lists no ranks, or not 'size' of them; it was edited or "
                "is corrupt (capture again with mpirun ... pipectl capture --mpi)\n",
                name);
        return 0;
    }
    return size;
}

/* Rank k's line "rank K of N (host H, the CPU)" into head. */
static void pl__world_head(json_t *world, int k, char *head, size_t cap)
{
    json_t *e = json_array_get(json_object_get(world, "ranks"), (size_t)k);
    int size = (int)json_integer_value(json_object_get(world, "size"));
    json_t *dev = json_object_get(e, "device");
    char d[32] = "the CPU";
    if (json_is_integer(dev)) snprintf(d, sizeof d, "GPU %lld", (long long)json_integer_value(dev));
    snprintf(head, cap, "rank %d of %d (host %s, %s):", k, size, pl_json_str_or(e, "host", "?"), d);
}

/* Rank k's bundle folder of the world into dir, and its line "rank K of N (host H, the CPU)"
 * into head; 0, else 2 with the reason on eout. */
static int pl__world_rank(const pl__replay_args *o, json_t *world, int k, char *dir, size_t cap,
                          char *head, size_t head_cap, FILE *eout)
{
    json_t *e = json_array_get(json_object_get(world, "ranks"), (size_t)k);
    const char *bundle = pl_json_str_or(e, "bundle", "");
    char name[PL_NAME_CAP], want[32];
    pl_name_str(o->dir, 0, name, sizeof name);
    snprintf(want, sizeof want, "rank-%d", k);
    /* Only the folder capture names: world.json never sends replay out of the world. */
    if (strcmp(bundle, want) != 0) {
        fprintf(eout,
                "error: %s/world.json: rank %d's bundle is '%s', not '%s'; it was edited or is "
                "corrupt\n",
                name, k, bundle, want);
        return 2;
    }
    snprintf(dir, cap, "%s/%s", o->dir, bundle);
    struct stat sb;
    if (lstat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        fprintf(eout,
                "error: bundle %s: %s/ (rank %d's bundle) is %s: a world's bundle holds a folder "
                "per rank\n",
                name, bundle, k,
                errno == ENOENT       ? "missing"
                : S_ISLNK(sb.st_mode) ? "a symlink"
                                      : "not a folder");
        return 2;
    }
    pl__world_head(world, k, head, head_cap);
    return 0;
}

/* The worse of two exit codes: 2 (a bad bundle) before any other failure before 0. */
static int pl__worse(int worst, int rc)
{
    return rc == 2 || (rc != 0 && worst != 2) ? rc : worst;
}

/* A world's bundle: replays rank o->rank's, or every rank's one after another, each its own
 * shard; returns the worst exit code. */
static int pl__replay_world(const pl__replay_args *o, json_t *world)
{
    const pl_cmd *cmd = pl_cmd_find("replay", NULL);
    int size = pl__world_size(o, world, stderr);
    if (size < 1) return 2;
    char name[PL_NAME_CAP];
    pl_name_str(o->dir, 0, name, sizeof name);
    if (o->rank >= size)
        return pl_cli_usage_error(cmd, "--rank %d: the world of %s has ranks 0 to %d", o->rank,
                                  name, size - 1);
    if (o->json && o->rank < 0)
        return pl_cli_usage_error(cmd,
                                  "--json replays one rank of a world: add --rank K (0 to "
                                  "%d)",
                                  size - 1);
    int worst = 0;
    for (int k = 0; k < size; k++) {
        if (o->rank >= 0 && k != o->rank) continue;
        char dir[4096], head[256];
        if (pl__world_rank(o, world, k, dir, sizeof dir, head, sizeof head, stderr)) return 2;
        if (!o->json) printf("%s%s\n", k > 0 && o->rank < 0 ? "\n" : "", head);
        pl__replay_args one = *o;
        one.dir = dir;
        worst = pl__worse(worst, pl__replay_one(&one));
        if (pl__stop) break;
    }
    return worst;
}

/* ---- replay --mpi: every rank's bundle at once, rank K under rank K ------------------------ */

/* What a rank sends rank 0: its exit code, then its report's stdout and stderr text, each
 * NUL-terminated. */
static char *pl__pack(int rc, const char *out, size_t no, const char *eo, size_t ne, int *n)
{
    size_t len = sizeof(int32_t) + no + 1 + ne + 1;
    /* A report past 1 MiB is cut: the verdict comes first. */
    if (len > (1u << 20)) {
        no = no > (1u << 19) ? (1u << 19) : no;
        ne = ne > (1u << 19) - 64 ? (1u << 19) - 64 : ne;
        len = sizeof(int32_t) + no + 1 + ne + 1;
    }
    char *p = malloc(len);
    if (!p) return NULL;
    int32_t r = rc;
    memcpy(p, &r, sizeof r);
    memcpy(p + sizeof r, out ? out : "", no);
    p[sizeof r + no] = '\0';
    memcpy(p + sizeof r + no + 1, eo ? eo : "", ne);
    p[len - 1] = '\0';
    *n = (int)len;
    return p;
}

/* Every rank's packed record to rank 0, which prints each rank's report under its line; returns
 * the world's exit code on every rank. heads: rank 0's lines per rank (NULL: none). */
static int pl__mpi_report(const pl_mpi_world *w, int rc, char *text_out, size_t no, char *text_err,
                          size_t ne, char (*heads)[256], const char *dir)
{
    int n = 0, *counts = w->rank == 0 ? calloc((size_t)w->size, sizeof *counts) : NULL;
    char *mine = pl__pack(rc, text_out, no, text_err, ne, &n), *all = NULL;
    pl_error err;
    int dummy = 0;
    pl_status st = pl_mpi_gather_bytes(mine ? mine : "", mine ? n : 0, w->rank == 0 ? &all : NULL,
                                       counts ? counts : &dummy, &err);
    free(mine);
    int worst = rc;
    if (w->rank == 0) {
        worst = st == PL_OK && counts ? 0 : 1;
        int matched = 0, at = 0;
        const char *last = NULL;
        char name[PL_NAME_CAP];
        pl_name_str(dir, 0, name, sizeof name);
        for (int k = 0; st == PL_OK && counts && k < w->size; k++) {
            const char *p = all + at;
            int32_t r = 1;
            if (counts[k] >= (int)sizeof r + 2) {
                memcpy(&r, p, sizeof r);
                const char *o = p + sizeof r, *e = o + strlen(o) + 1;
                if (heads && heads[k][0]) printf("%s%s\n", k ? "\n" : "", heads[k]);
                fputs(o, stdout);
                fflush(stdout);
                /* A refusal every rank makes alike is said once. */
                if (heads || !last || strcmp(last, e) != 0) fputs(e, stderr);
                last = e;
            } else {
                fprintf(stderr, "rank %d sent no report (out of memory)\n", k);
            }
            matched += r == 0;
            worst = pl__worse(worst, r);
            at += counts[k];
        }
        if (st != PL_OK) fprintf(stderr, "%s\n", err.msg);
        if (!heads)
            ; /* not replayed: the refusal said why */
        else if (worst == 0)
            printf("\nworld %s: %d ranks replayed at once: every rank's checksums match\n", name,
                   w->size);
        else
            fprintf(stderr, "world %s: %d of %d ranks replayed at once match; exit %d\n", name,
                    matched, w->size, worst);
        fflush(stdout);
    }
    free(all);
    free(counts);
    /* One exit code for the world: mpirun exits with a failing rank's. */
    return pl_mpi_bcast_int(worst);
}

/* `mpirun -n N pipectl replay --mpi DIR`: rank K replays DIR/rank-K; N must be the world's size. */
static int pl__replay_mpi(pl__replay_args *o)
{
    pl_mpi_world w;
    pl_error err;
    pl_error_clear(&err);
    if (pl_mpi_init(&w, &err) != PL_OK) return pl_cli_fail(&err);
    /* This rank's report, kept for rank 0. */
    char *text_out = NULL, *text_err = NULL;
    size_t no = 0, ne = 0;
    FILE *out = open_memstream(&text_out, &no), *eout = open_memstream(&text_err, &ne);
    int rc = out && eout ? 0 : 1;
    if (!out || !eout) fprintf(stderr, "error: rank %d: out of memory\n", w.rank);
    char p[4096], name[PL_NAME_CAP];
    snprintf(p, sizeof p, "%s/world.json", o->dir);
    pl_name_str(o->dir, 0, name, sizeof name);
    json_error_t je;
    struct stat sb;
    json_t *world = NULL;
    if (rc == 0 && (lstat(p, &sb) != 0 || !S_ISREG(sb.st_mode))) {
        fprintf(eout,
                "error: %s has no world.json: replay --mpi replays a world's bundle (mpirun -n N "
                "pipectl capture --mpi); replay a single bundle without --mpi\n",
                name);
        rc = 2;
    } else if (rc == 0 && !(world = json_load_file(p, 0, &je))) {
        fprintf(eout, "error: %s:%d:%d: %s\n", p, je.line, je.column, je.text);
        rc = 2;
    }
    int size = world ? pl__world_size(o, world, eout) : 0;
    if (world && size < 1) rc = 2;
    if (rc == 0 && size != w.size) {
        fprintf(eout,
                "error: %s is a world of %d rank%s, and this mpirun started %d: replay it with "
                "'mpirun -n %d pipectl replay --mpi %s' (or one rank: 'pipectl replay --rank K "
                "%s')\n",
                name, size, size == 1 ? "" : "s", w.size, size, name, name);
        rc = 2;
    }
    char dir[4096];
    char(*heads)[256] = calloc((size_t)w.size, sizeof *heads);
    if (rc == 0 && !heads) rc = 1;
    /* Each rank checks its own bundle; rank 0 has every rank's line. */
    if (rc == 0)
        rc = pl__world_rank(o, world, w.rank, dir, sizeof dir, heads[w.rank], sizeof heads[w.rank],
                            eout);
    for (int k = 0; rc == 0 && w.rank == 0 && k < w.size; k++)
        pl__world_head(world, k, heads[k], sizeof heads[k]);
    /* Every rank replays, or none: a world that cannot be replayed as a whole (another size, a
     * rank's bundle missing) is refused on every rank (exit 2) before any run. */
    int all = pl_mpi_max_int(rc);
    if (all == 0) {
        pl__replay_args one = *o;
        one.dir = dir;
        one.out = out;
        one.eout = eout;
        rc = pl__replay_one(&one);
    } else if (rc == 0) {
        rc = all;
        fprintf(eout, "rank %d: not replayed: another rank cannot replay its bundle\n", w.rank);
    }
    if (out) fclose(out);
    if (eout) fclose(eout);
    int world_rc =
        pl__mpi_report(&w, rc, text_out, no, text_err, ne, all == 0 ? heads : NULL, o->dir);
    free(text_out);
    free(text_err);
    free(heads);
    json_decref(world);
    pl_mpi_finalize();
    return world_rc;
}

int pl_cmd_replay(int argc, char **argv)
{
    pl__replay_args o;
    memset(&o, 0, sizeof o);
    int rc = pl__parse_args(argc, argv, &o);
    if (rc >= 0) return rc;
    o.out = stdout;
    o.eout = stderr;
    if (o.mpi) return pl__replay_mpi(&o);
    char p[4096];
    snprintf(p, sizeof p, "%s/world.json", o.dir);
    json_error_t je;
    struct stat sb;
    bool has_world = lstat(p, &sb) == 0;
    if (has_world && !S_ISREG(sb.st_mode)) {
        fprintf(stderr, "error: bundle %s: world.json is %s: a bundle holds regular files only\n",
                o.dir, S_ISLNK(sb.st_mode) ? "a symlink" : "not a regular file");
        return 2;
    }
    json_t *world = has_world ? json_load_file(p, 0, &je) : NULL;
    if (has_world && !world) {
        fprintf(stderr, "error: %s:%d:%d: %s\n", p, je.line, je.column, je.text);
        return 2;
    }
    if (world) {
        rc = pl__replay_world(&o, world);
        json_decref(world);
        return rc;
    }
    if (o.rank >= 0)
        return pl_cli_usage_error(pl_cmd_find("replay", NULL),
                                  "--rank K replays a rank of a world's bundle (capture --mpi); "
                                  "%s has no world.json",
                                  o.dir);
    return pl__replay_one(&o);
}
