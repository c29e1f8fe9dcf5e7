/* cmd_replay: `pipectl replay DIR`: checks a bundle's inputs, runs its pipeline again, compares
 * every batch's checksum with the recorded one, then the stage times and the environment.
 * Exit 0: every output matches; 1: one differs (named); 2: a bad bundle or a changed input. */
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
    {0},
};

/* What the command line asks for. */
typedef struct pl__replay_args {
    pl_replay_cfg cfg;
    const char *dir;
    bool quiet, json;
    int rank; /* --rank K, -1 when not given */
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
        }
    }
    if (id < 0) return a.rc;
    if (a.n_operands == 0) return pl_cli_usage_error(cmd, "'pipectl replay' needs a bundle folder");
    if (a.n_operands > 1)
        return pl_cli_usage_error(
            cmd, "'pipectl replay' takes one bundle folder; '%s' is a second one", a.operands[1]);
    o->cfg = cfg;
    o->dir = a.operands[0];
    o->quiet = quiet;
    o->json = json;
    return -1;
}

/* pl_bundle_replay with Ctrl-C asking the run to stop (the replay then fails, and says so). */
static pl_status pl__replay_stoppable(const pl_bundle *b, pl_replay_cfg *cfg, pl_replay_result *r,
                                      pl_error *err)
{
    cfg->run.stop = &pl__stop;
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = pl__on_sigint;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old);
    pl_status st = pl_bundle_replay(b, cfg, r, err);
    sigaction(SIGINT, &old, NULL);
    return st;
}

static void pl__print_changed(const pl_replay_result *r)
{
    char name[PL_NAME_CAP];
    for (int i = 0; i < r->n_changed; i++) {
        const pl_file_check *x = &r->changed[i];
        pl_name_str(x->path, 0, name, sizeof name);
        if (x->missing)
            fprintf(stderr, "changed: %s: %s is missing (recorded sha256 %.16s...)\n", x->what,
                    name, x->want);
        else
            fprintf(stderr, "changed: %s: %s (sha256 recorded %.16s..., now %.16s...)\n", x->what,
                    name, x->want, x->got);
    }
}

/* The verdict line: on stdout when every sink matches (returns 0), on stderr naming the first
 * difference (returns 1). */
static int pl__print_verdict(const char *dir, const pl_replay_result *r)
{
    const pl_compare *c = &r->cmp;
    int n_tol = 0;
    for (int i = 0; i < c->n_sinks; i++)
        if (c->sinks[i].verdict == PL_SINK_WITHIN_TOL) n_tol++;
    if (c->first_sink < 0) {
        char name[PL_NAME_CAP];
        printf("replay of %s on %s: %d sink%s, %lld batches: every checksum matches%s\n",
               pl_name_str(dir, 0, name, sizeof name), r->executor, c->n_sinks,
               c->n_sinks == 1 ? "" : "s", (long long)r->batches_done,
               n_tol ? " or is within its tolerance" : " (bit for bit)");
        return 0;
    }
    const pl_sink_cmp *s = &c->sinks[c->first_sink];
    fprintf(stderr,
            "replay of %s on %s: MISMATCH: sink '%s', batch %lld: recorded 0x%016" PRIx64
            ", now 0x%016" PRIx64 "; %lld batch%s differ%s in all\n",
            dir, r->executor, s->stage, (long long)s->first_batch, s->first_a, s->first_b,
            (long long)c->n_differ, c->n_differ == 1 ? "" : "es", c->n_differ == 1 ? "s" : "");
    return 1;
}

/* One line a sink: its batches and its verdict. */
static void pl__print_sink(const pl_sink_cmp *s)
{
    printf("  %-20s %6lld batches  ", s->stage, (long long)s->batches_a);
    switch (s->verdict) {
    case PL_SINK_MATCH:
        printf("match (bit for bit)\n");
        break;
    case PL_SINK_WITHIN_TOL:
        printf("not bit-identical (allowed: %s), within tolerance: relative difference "
               "%.3g <= %.3g\n",
               "its ops are reproducible on one GPU only", s->rel_err, s->tol);
        break;
    case PL_SINK_UNVERIFIED:
        printf("DIFFERS in %lld batches where bits may differ (tolerance %.3g), but the "
               "bundle has no copy of the output to compare (capture with "
               "--copy-outputs)\n",
               (long long)s->n_differ, s->tol);
        break;
    case PL_SINK_ABSENT:
        printf("ABSENT in one of the two runs\n");
        break;
    case PL_SINK_UNCHECKED:
        printf("not checksummed (checksum: false): not compared\n");
        break;
    case PL_SINK_DIFFER:
        printf("DIFFERS in %lld batch%s (first: %lld)%s", (long long)s->n_differ,
               s->n_differ == 1 ? "" : "es", (long long)s->first_batch,
               s->exact ? ", bit-identical by design" : "");
        if (s->rel_err >= 0)
            printf(", relative difference %.3g > tolerance %.3g", s->rel_err, s->tol);
        if (s->batches_a != s->batches_b)
            printf(" (recorded %lld batches, now %lld)", (long long)s->batches_a,
                   (long long)s->batches_b);
        printf("\n");
        break;
    }
}

/* The report of a replay that ran: the verdict, the sinks (all of them unless --quiet and every
 * one matches), the stage times and the environment (unless --quiet). Returns the exit code. */
static int pl__print_report(const pl__replay_args *o, const pl_replay_result *r)
{
    if (r->note[0]) printf("note: %s\n", r->note);
    const pl_compare *c = &r->cmp;
    int rc = pl__print_verdict(o->dir, r);
    if (!o->quiet || rc)
        for (int i = 0; i < c->n_sinks; i++)
            pl__print_sink(&c->sinks[i]);
    if (!o->quiet) {
        pl_cli_print_stages(stdout, c, "rec", "now");
        pl_cli_print_env(stdout, c, "recorded", "now");
    }
    return rc;
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
        return pl_cli_fail(&err);
    }
    pl_status st = pl__replay_stoppable(b, &o.cfg, &r, &err);
    for (int i = 0; i < r.n_warnings; i++)
        fprintf(stderr, "%s\n", r.warnings[i]);
    if (o.json) {
        pl__json(o.dir, &r, st, &err);
        rc = st != PL_OK ? pl_status_exit_code(st) : r.cmp.first_sink >= 0 ? 1 : 0;
        if (st != PL_OK) fprintf(stderr, "%s\n", err.msg);
    } else {
        pl__print_changed(&r);
        rc = st != PL_OK ? pl_cli_fail(&err) : pl__print_report(&o, &r);
    }
    pl_replay_result_fini(&r);
    pl_bundle_free(b);
    return rc;
}

/* A world's bundle (`capture --mpi`: world.json and a bundle per rank, rank-K/): replays rank
 * o->rank's, or every rank's one after another, each its own shard; returns the worst exit code
 * (2 before 1 before 0). */
static int pl__replay_world(const pl__replay_args *o, json_t *world)
{
    const pl_cmd *cmd = pl_cmd_find("replay", NULL);
    json_t *ranks = json_object_get(world, "ranks");
    int size = (int)json_integer_value(json_object_get(world, "size"));
    char name[PL_NAME_CAP];
    pl_name_str(o->dir, 0, name, sizeof name);
    if (!json_is_array(ranks) || size < 1 || (int)json_array_size(ranks) != size) {
        fprintf(stderr,
                "error: %s/world.json lists no ranks, or not 'size' of them; it was edited or "
                "is corrupt (capture again with mpirun ... pipectl capture --mpi)\n",
                name);
        return 2;
    }
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
        json_t *e = json_array_get(ranks, (size_t)k);
        const char *bundle = pl_json_str_or(e, "bundle", "");
        char want[32];
        snprintf(want, sizeof want, "rank-%d", k);
        /* Only the folder capture names: world.json never sends replay out of the world. */
        if (strcmp(bundle, want) != 0) {
            fprintf(stderr,
                    "error: %s/world.json: rank %d's bundle is '%s', not '%s'; it was edited or "
                    "is corrupt\n",
                    name, k, bundle, want);
            return 2;
        }
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/%s", o->dir, bundle);
        struct stat sb;
        if (lstat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
            fprintf(stderr,
                    "error: bundle %s: %s/ (rank %d's bundle) is %s: a world's bundle holds a "
                    "folder per rank\n",
                    name, bundle, k,
                    errno == ENOENT       ? "missing"
                    : S_ISLNK(sb.st_mode) ? "a symlink"
                                          : "not a folder");
            return 2;
        }
        json_t *dev = json_object_get(e, "device");
        char d[32] = "the CPU";
        if (json_is_integer(dev))
            snprintf(d, sizeof d, "GPU %lld", (long long)json_integer_value(dev));
        if (!o->json)
            printf("%srank %d of %d (host %s, %s):\n", k > 0 && o->rank < 0 ? "\n" : "", k, size,
                   pl_json_str_or(e, "host", "?"), d);
        pl__replay_args one = *o;
        one.dir = dir;
        int rc = pl__replay_one(&one);
        if (rc == 2 || (rc != 0 && worst != 2)) worst = rc;
        if (pl__stop) break;
    }
    return worst;
}

int pl_cmd_replay(int argc, char **argv)
{
    pl__replay_args o;
    memset(&o, 0, sizeof o);
    int rc = pl__parse_args(argc, argv, &o);
    if (rc >= 0) return rc;
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
