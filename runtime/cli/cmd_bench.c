/* cmd_bench: `pipectl bench`: measures the copy engines and the busy kernel alone, then runs a
 * balanced pipeline (upload, busy kernel as long as the upload, download) sequentially, with
 * --no-graph and with graphs at several depths and timing modes against the physical bound and
 * the hand-written baseline (bench_baseline, found next to pipectl), then small batches (graphs vs
 * plain launches vs a bare cudaGraphLaunch loop) in each timing mode, and bare replays of N
 * per-slot graphs against one graph holding N batches (or the whole run). Every run is timed from
 * its first launch to its last batch read back (host clock), so no figure depends on device spans.
 * One table per part; docs/perf.md explains the columns. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pl_cli.h"
#include "pl_exec.h"
#include "pl_plan.h"

#ifdef PL_WITH_CUDA
#include "pl_exec_gpu_int.h"
#include "pl_parse.h"

typedef struct pl__bench_opts {
    int device;
    int64_t batches;       /* balanced pipeline */
    int64_t small_batches; /* small-batch pipeline */
    int reps;
    const char *baseline; /* path of bench_baseline, NULL: next to pipectl */
    bool quick;           /* one size, fewer configurations (for experiments) */
    bool small_only;      /* only the small-batch part */
    int small_depth;      /* depth of the small-batch runs */
    int graph_mode;       /* the "graphs" rows: PL_GRAPHS_AUTO (default), _STAGE or _SEGMENT */
} pl__bench_opts;

/* Timing modes (pl_run_cfg.timing_period) as `pipectl run --timing` names them. */
enum { PL__T_SAMPLE = 16, PL__T_ALL = 0, PL__T_OFF = -1 };

static pl_status pl__buf(pl_spec *spec, const char *name, pl_where where, int64_t count,
                         pl_init init, pl_error *err)
{
    pl_pos nopos = {0};
    pl_buffer *b = pl_spec_add_buffer(spec, name, nopos);
    if (!b) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    b->where = where;
    b->dtype = PL_F32;
    b->rank = 1;
    b->shape[0] = count;
    b->init = init;
    return PL_OK;
}

static pl_status pl__opt(pl_spec *spec, pl_stage *st, const char *key, const char *val,
                         pl_error *err)
{
    pl_pos nopos = {0};
    pl_opt *o = pl_stage_add_opt(spec, st, key, nopos);
    if (!o || !(o->str = pl_spec_strdup(spec, val)))
        return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    return PL_OK;
}

static pl_status pl__copy_stage(pl_spec *spec, const char *name, const char *kind, const char *from,
                                const char *to, pl_error *err)
{
    pl_pos nopos = {0};
    pl_stage *st = pl_spec_add_stage(spec, name, nopos);
    if (!st) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    st->kind = pl_kind_find(kind);
    PL_CHECK(pl__opt(spec, st, "from", from, err));
    return pl__opt(spec, st, "to", to, err);
}

static pl_status pl__kernel_stage(pl_spec *spec, const char *name, const char *op, const char *key,
                                  const char *val, const char *in, const char *out, pl_error *err)
{
    pl_pos nopos = {0};
    pl_stage *st = pl_spec_add_stage(spec, name, nopos);
    if (!st) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    st->kind = pl_kind_find("kernel");
    PL_CHECK(pl__opt(spec, st, "op", op, err));
    if (key) PL_CHECK(pl__opt(spec, st, key, val, err));
    if (!pl_stage_add_read(spec, st, in, nopos) || !pl_stage_add_write(spec, st, out, nopos))
        return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    return PL_OK;
}

/* The balanced pipeline (n_scale == 0: up -> busy(busy_us) -> down) or the small-batch one
 * (up -> n_scale chained scale kernels -> down), `bytes` per batch, built through the builder API
 * so bench needs no pipeline file. */
static pl_status pl__bench_plan(uint64_t bytes, int n_scale, double busy_us, int64_t batches,
                                int depth, int device, pl_spec **spec_out, pl_plan **plan_out,
                                pl_error *err)
{
    pl_spec *spec = NULL;
    pl_status st;
    int64_t n = (int64_t)(bytes / 4);
    char name[32], prev[32], val[64];
    *spec_out = NULL;
    *plan_out = NULL;
    PL_CHECK(pl_spec_new(NULL, &spec, err));
    spec->name = pl_spec_strdup(spec, n_scale ? "bench-small" : "bench-balanced");
    spec->run.batches = batches;
    spec->run.depth = depth;
    spec->run.device = device;
    spec->run.seed = 1;
    PL_CHECK_GOTO(pl__buf(spec, "x_host", PL_HOST, n, PL_INIT_RANDOM, err), st, fail);
    PL_CHECK_GOTO(pl__buf(spec, "x_dev", PL_DEVICE, n, PL_INIT_NONE, err), st, fail);
    for (int i = 0; i < n_scale - 1; i++) {
        snprintf(name, sizeof name, "t%d", i);
        PL_CHECK_GOTO(pl__buf(spec, name, PL_DEVICE, n, PL_INIT_NONE, err), st, fail);
    }
    PL_CHECK_GOTO(pl__buf(spec, "y_dev", PL_DEVICE, n, PL_INIT_NONE, err), st, fail);
    PL_CHECK_GOTO(pl__buf(spec, "y_host", PL_HOST, n, PL_INIT_NONE, err), st, fail);
    PL_CHECK_GOTO(pl__copy_stage(spec, "up", "h2d", "x_host", "x_dev", err), st, fail);
    if (n_scale == 0) {
        snprintf(val, sizeof val, "%.3f", busy_us);
        PL_CHECK_GOTO(
            pl__kernel_stage(spec, "busy", "busy", "duration_us", val, "x_dev", "y_dev", err), st,
            fail);
    } else {
        snprintf(prev, sizeof prev, "x_dev");
        for (int i = 0; i < n_scale; i++) {
            char stage[32];
            snprintf(stage, sizeof stage, "scale%d", i);
            if (i == n_scale - 1)
                snprintf(name, sizeof name, "y_dev");
            else
                snprintf(name, sizeof name, "t%d", i);
            PL_CHECK_GOTO(
                pl__kernel_stage(spec, stage, "scale", "alpha", "1.0001", prev, name, err), st,
                fail);
            snprintf(prev, sizeof prev, "%s", name);
        }
    }
    PL_CHECK_GOTO(pl__copy_stage(spec, "down", "d2h", "y_dev", "y_host", err), st, fail);
    PL_CHECK_GOTO(pl_spec_check(spec, err), st, fail);
    PL_CHECK_GOTO(pl_plan_compile(spec, plan_out, err), st, fail);
    *spec_out = spec;
    return PL_OK;
fail:
    pl_spec_free(spec);
    return st;
}

/* One run; *ns = first launch to last batch read back (host clock): the same measure in every
 * timing mode, and the same span as the baseline's (first upload to last download), plus the
 * host's launch and wake-up latency, which counts against pipectl. */
static pl_status pl__bench_once(uint64_t bytes, int n_scale, double busy_us, int64_t batches,
                                int depth, bool graphs, int graph_mode, int timing, int device,
                                double *ns, pl_error *err)
{
    pl_spec *spec = NULL;
    pl_plan *plan = NULL;
    PL_CHECK(pl__bench_plan(bytes, n_scale, busy_us, batches, depth, device, &spec, &plan, err));
    pl_run_cfg cfg;
    pl_run_cfg_init(&cfg);
    cfg.executor = PL_EXEC_GPU;
    cfg.use_graphs = graphs;
    cfg.graph_mode = graph_mode;
    cfg.timing_period = timing;
    pl_run_result res;
    int64_t active = 0;
    pl_status st = pl_gpu_run_active(plan, &cfg, &res, &active, err);
    if (st == PL_OK) *ns = (double)active;
    pl_run_result_fini(&res);
    pl_plan_free(plan);
    pl_spec_free(spec);
    return st;
}

static pl_status pl__bench_best(uint64_t bytes, int n_scale, double busy_us, int64_t batches,
                                int depth, bool graphs, int timing, const pl__bench_opts *o,
                                double *best, pl_error *err)
{
    *best = 1e300;
    for (int r = 0; r < o->reps; r++) {
        double ns = 0;
        PL_CHECK(pl__bench_once(bytes, n_scale, busy_us, batches, depth, graphs, o->graph_mode,
                                timing, o->device, &ns, err));
        if (ns < *best) *best = ns;
    }
    return PL_OK;
}

/* A bare replay of the plan's device stages, timing off (lean end events only), nothing on the
 * host: `per_graph` 0 replays the executor's per-slot graphs round-robin (pl_gpu_replay_loop),
 * otherwise one graph holding `per_graph` consecutive batches is launched again and again
 * (pl_gpu_replay_onegraph; per_graph = batches: the whole run in one launch). `warm` batches'
 * worth of launches first. *best = best of o->reps, nanoseconds for `batches` batches. */
static pl_status pl__bench_replay(uint64_t bytes, int n_scale, double busy_us, int64_t batches,
                                  int depth, int per_graph, int64_t warm, const pl__bench_opts *o,
                                  double *best, pl_error *err)
{
    pl_spec *spec = NULL;
    pl_plan *plan = NULL;
    *best = 1e300;
    PL_CHECK(pl__bench_plan(bytes, n_scale, busy_us, batches, depth, o->device, &spec, &plan, err));
    pl_status st = PL_OK;
    for (int r = 0; r < o->reps && st == PL_OK; r++) {
        double ns = 0;
        if (per_graph == 0) {
            st = pl_gpu_replay_loop(plan, PL__T_OFF, warm, batches, &ns, err);
        } else {
            int64_t launches = batches / per_graph > 0 ? batches / per_graph : 1;
            int64_t w = warm / per_graph > 0 ? warm / per_graph : 1;
            st = pl_gpu_replay_onegraph(plan, per_graph, w, launches, &ns, err);
        }
        if (st == PL_OK && ns * (double)batches < *best) *best = ns * (double)batches;
    }
    pl_plan_free(plan);
    pl_spec_free(spec);
    return st;
}

/* Path of a program installed next to pipectl (bench_baseline, bench_host_step). */
static bool pl__sibling(const char *name, char *exe, size_t cap)
{
    ssize_t n = readlink("/proc/self/exe", exe, cap - 64);
    if (n <= 0) return false;
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (!slash) return false;
    snprintf(slash + 1, cap - (size_t)(slash + 1 - exe), "%s", name);
    return access(exe, X_OK) == 0;
}

/* Runs bench_baseline; returns its total_ms in ns, or a negative value when it is not there. */
static double pl__run_baseline(const pl__bench_opts *o, uint64_t bytes, int64_t batches, int bufs,
                               double busy_us)
{
    char exe[PATH_MAX], cmd[PATH_MAX + 128], line[512];
    if (o->baseline)
        snprintf(exe, sizeof exe, "%s", o->baseline);
    else if (!pl__sibling("bench_baseline", exe, sizeof exe))
        return -1;
    if (access(exe, X_OK) != 0) return -1;
    snprintf(cmd, sizeof cmd, "'%s' %llu %lld %d %.3f", exe, (unsigned long long)bytes,
             (long long)batches, bufs, busy_us);
    double best = -1;
    for (int r = 0; r < o->reps; r++) {
        FILE *f = popen(cmd, "r");
        if (!f) return -1;
        double ms = -1;
        while (fgets(line, sizeof line, f)) {
            const char *t = strstr(line, "total_ms=");
            if (t) ms = atof(t + 9);
        }
        if (pclose(f) != 0 || ms < 0) return -1;
        if (best < 0 || ms * 1e6 < best) best = ms * 1e6;
    }
    return best;
}

/* The host-step row: pipelines/host_step.yaml as a benchmark (x filled once, no source or sink,
 * so the Lua step is the only host stage): upload -> y = 2x -> download -> Lua fftshift -> upload
 * -> z = y + s -> download, `bytes` per buffer. pipectl's time per batch is first launch to last
 * read-back over the batches; the bound is the busiest engine per batch measured alone in this
 * call (both uploads, both downloads, the four copies at once) or the Lua step's mean in the same
 * run; beside it the hand-written streams+events program (bench_host_step, host step staged the
 * way the Lua step moves bytes). */
static pl_status pl__bench_host_step(const pl__bench_opts *o, uint64_t bytes, int64_t batches,
                                     int depth, const pl_gpu_copy_times *ct, pl_error *err)
{
    char yaml[4096];
    long long n = (long long)(bytes / 4);
    snprintf(
        yaml, sizeof yaml,
        "pipeline: host_step_bench\n"
        "run: {batches: %lld, depth: %d, seed: 11, device: %d}\n"
        "buffers:\n"
        "  x_host: {where: host, dtype: f32, shape: [%lld], init: random}\n"
        "  x_dev:  {where: device, dtype: f32, shape: [%lld]}\n"
        "  y_dev:  {where: device, dtype: f32, shape: [%lld]}\n"
        "  y_host: {where: host, dtype: f32, shape: [%lld]}\n"
        "  s_host: {where: host, dtype: f32, shape: [%lld]}\n"
        "  s_dev:  {where: device, dtype: f32, shape: [%lld]}\n"
        "  z_dev:  {where: device, dtype: f32, shape: [%lld]}\n"
        "  z_host: {where: host, dtype: f32, shape: [%lld]}\n"
        "stages:\n"
        "  - {name: up, kind: h2d, from: x_host, to: x_dev}\n"
        "  - {name: model, kind: kernel, op: scale, alpha: 2, reads: [x_dev], writes: [y_dev]}\n"
        "  - {name: down, kind: d2h, from: y_dev, to: y_host}\n"
        "  - name: shift\n"
        "    kind: lua\n"
        "    reads: [y_host]\n"
        "    writes: [s_host]\n"
        "    code: |\n"
        "      function run(batch, opts, bufs)\n"
        "        local y, s = bufs.y_host, bufs.s_host\n"
        "        local n = #y\n"
        "        local h = n // 2\n"
        "        s:fromstring(y:tostring(n - h + 1, n), 1)\n"
        "        s:fromstring(y:tostring(1, n - h), h + 1)\n"
        "      end\n"
        "  - {name: up2, kind: h2d, from: s_host, to: s_dev}\n"
        "  - {name: mix, kind: kernel, op: add, reads: [y_dev, s_dev], writes: [z_dev]}\n"
        "  - {name: down2, kind: d2h, from: z_dev, to: z_host}\n",
        (long long)batches, depth, o->device, n, n, n, n, n, n, n, n);
    pl_spec *spec = NULL;
    pl_plan *plan = NULL;
    pl_status st = pl_yaml_load_string("host_step_bench.yaml", yaml, strlen(yaml), &spec, err);
    if (st == PL_OK) st = pl_spec_check(spec, err);
    if (st == PL_OK) st = pl_plan_compile(spec, &plan, err);
    double best = 1e300, lua_ns = 0;
    int shift = plan ? pl_spec_find_stage(spec, "shift") : -1;
    for (int r = 0; st == PL_OK && r < o->reps; r++) {
        pl_run_cfg cfg;
        pl_run_cfg_init(&cfg);
        cfg.executor = PL_EXEC_GPU;
        pl_run_result res;
        int64_t active = 0;
        st = pl_gpu_run_active(plan, &cfg, &res, &active, err);
        if (st == PL_OK && (double)active / (double)batches < best) {
            best = (double)active / (double)batches;
            const pl_hist *h = res.timing ? &res.timing->hist[shift] : NULL;
            lua_ns = h && h->count ? (double)h->sum / (double)h->count : 0;
        }
        pl_run_result_fini(&res);
    }
    pl_plan_free(plan);
    pl_spec_free(spec);
    if (st != PL_OK) return st;
    /* The bound: the busiest engine per batch. Two uploads, two downloads, or the four copies at
     * once (two of `both`), or the host step; the two small kernels are far below these. */
    const char *what = "up x2";
    double bound = 2 * ct->h2d_ns;
    if (2 * ct->d2h_ns > bound) bound = 2 * ct->d2h_ns, what = "down x2";
    if (2 * ct->both_ns > bound) bound = 2 * ct->both_ns, what = "copies";
    if (lua_ns > bound) bound = lua_ns, what = "lua";
    double hand = -1, hand_bound = -1;
    char exe[PATH_MAX], cmd[PATH_MAX + 128], line[1024];
    if (pl__sibling("bench_host_step", exe, sizeof exe)) {
        snprintf(cmd, sizeof cmd, "'%s' %llu %lld %d op 1 staged", exe, (unsigned long long)bytes,
                 (long long)batches, depth);
        for (int r = 0; r < o->reps; r++) {
            FILE *f = popen(cmd, "r");
            if (!f) break;
            while (fgets(line, sizeof line, f)) {
                const char *t = strstr(line, "per_batch_ns="), *u = strstr(line, "bound_ns=");
                if (strncmp(line, "host_step ", 10) != 0 || !t || !u) continue;
                if (!strstr(line, "verify=OK")) continue;
                double v = atof(t + 13);
                if (hand < 0 || v < hand) hand = v, hand_bound = atof(u + 9);
            }
            pclose(f);
        }
    }
    printf("%-10s %12s %10s %10s %-8s %9s %10s %14s %9s\n", "row", "pipectl_us", "lua_us",
           "bound_us", "bound", "of_bound", "hand_us", "hand_bound_us", "vs_hand");
    if (hand > 0)
        printf("%-10s %12.1f %10.1f %10.1f %-8s %8.1f%% %10.1f %14.1f %9.3f\n", "host-step",
               best / 1e3, lua_ns / 1e3, bound / 1e3, what, 100 * bound / best, hand / 1e3,
               hand_bound / 1e3, hand / best);
    else
        printf("%-10s %12.1f %10.1f %10.1f %-8s %8.1f%% %10s %14s %9s\n", "host-step", best / 1e3,
               lua_ns / 1e3, bound / 1e3, what, 100 * bound / best, "n/a", "n/a", "n/a");
    printf("(%llu bytes per buffer, %lld batches, depth %d, best of %d; pipectl: first launch to "
           "last read-back per batch; bound: the busiest engine alone, or the Lua step's mean in "
           "the same run; hand: bench_host_step, streams+events, host step staged like the Lua "
           "step; vs_hand = hand / pipectl, >= 1: pipectl not slower)\n\n",
           (unsigned long long)bytes, (long long)batches, depth, o->reps);
    return PL_OK;
}

/* The copy engines and the busy kernel alone, at each size: the figures every bound below is
 * made of (ct, busy_ns). */
static pl_status pl__bench_stages(const pl__bench_opts *o, const uint64_t sizes[2],
                                  pl_gpu_copy_times ct[2], double busy_ns[2], pl_error *err)
{
    printf("== stages alone (pinned memory, best of %d) ==\n", 10);
    printf("%-10s %10s %10s %10s %10s %12s %12s\n", "size", "h2d_us", "d2h_us", "both_us",
           "busy_us", "h2d_GB/s", "both_GB/s");
    for (int i = 0; i < 2; i++) {
        PL_CHECK(pl_gpu_measure_copies(o->device, sizes[i], 10, &ct[i], err));
        PL_CHECK(pl_gpu_measure_busy(o->device, ct[i].h2d_ns / 1e3, 10, &busy_ns[i], err));
        printf("%-10s %10.1f %10.1f %10.1f %10.1f %12.2f %12.2f\n", i == 0 ? "64 MiB" : "4 MiB",
               ct[i].h2d_ns / 1e3, ct[i].d2h_ns / 1e3, ct[i].both_ns / 1e3, busy_ns[i] / 1e3,
               (double)sizes[i] / ct[i].h2d_ns, 2.0 * (double)sizes[i] / ct[i].both_ns);
    }
    printf("\n");
    return PL_OK;
}

/* The balanced pipeline at one size (`size` names it): sequential, plain launches and graphs at
 * several depths and timing modes against the bound and the hand-written baseline, then bare
 * replays of per-slot graphs and of one graph holding several batches. */
static pl_status pl__bench_balanced(const pl__bench_opts *o, uint64_t bytes, const char *size,
                                    const pl_gpu_copy_times *ct, double busy_ns, pl_error *err)
{
    double U = ct->h2d_ns, D = ct->d2h_ns, UD = ct->both_ns, K = busy_ns;
    double busy_us = U / 1e3;
    double per = U;
    if (K > per) per = K;
    if (D > per) per = D;
    if (UD > per) per = UD;
    double bound = U + K + D + (double)(o->batches - 1) * per;
    double seq_bound = (double)o->batches * (U + K + D);
    printf("== balanced pipeline, %s per batch, %lld batches, busy %.1f us ==\n", size,
           (long long)o->batches, busy_us);
    printf("bound: first batch %.1f us, then %.1f us per batch = %.3f ms\n", (U + K + D) / 1e3,
           per / 1e3, bound / 1e6);
    printf("%-18s %10s %12s %9s %9s %12s %9s\n", "config", "total_ms", "per_batch_us", "of_bound",
           "speedup", "baseline_ms", "vs_base");
    /* Graphs rows without a suffix use the default timing (1 batch in 16 timed); "all"
     * times every batch, "off" none. --no-graph times every batch. */
    struct {
        const char *name;
        int depth;
        bool graphs;
        int timing;
    } cfgs[] = {{"sequential d1", 1, true, PL__T_SAMPLE}, {"no-graph d2", 2, false, PL__T_ALL},
                {"no-graph d3", 3, false, PL__T_ALL},     {"no-graph d4", 4, false, PL__T_ALL},
                {"graphs d2", 2, true, PL__T_SAMPLE},     {"graphs d3", 3, true, PL__T_SAMPLE},
                {"graphs d4", 4, true, PL__T_SAMPLE},     {"graphs d3 all", 3, true, PL__T_ALL},
                {"graphs d4 all", 4, true, PL__T_ALL},    {"graphs d3 off", 3, true, PL__T_OFF},
                {"graphs d4 off", 4, true, PL__T_OFF}};
    double seq = 0, best_pct = 0, base_by_depth[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
    int best_depth = 0;
    for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++) {
        if (o->quick && c != 0 && c != 2 && c < 5) continue;
        double t;
        PL_CHECK(pl__bench_best(bytes, 0, busy_us, o->batches, cfgs[c].depth, cfgs[c].graphs,
                                cfgs[c].timing, o, &t, err));
        if (c == 0) seq = t;
        /* The baseline depends on the buffer count only: run it once per count. */
        int d = cfgs[c].depth;
        if (!o->quick && base_by_depth[d] < 0)
            base_by_depth[d] = pl__run_baseline(o, bytes, o->batches, d, busy_us);
        double base = base_by_depth[d];
        char bs[32] = "n/a", vs[32] = "n/a";
        if (base > 0) {
            snprintf(bs, sizeof bs, "%.3f", base / 1e6);
            snprintf(vs, sizeof vs, "%.3f", base / t);
        }
        double pct = 100.0 * bound / t;
        printf("%-18s %10.3f %12.1f %8.1f%% %8.2fx %12s %9s\n", cfgs[c].name, t / 1e6,
               t / 1e3 / (double)o->batches, pct, seq / t, bs, vs);
        if (cfgs[c].graphs && cfgs[c].timing == PL__T_SAMPLE && cfgs[c].depth > 1 &&
            pct > best_pct) {
            best_pct = pct;
            best_depth = cfgs[c].depth;
        }
    }
    /* N per-slot graphs or one graph holding N slots (timing off, nothing on the host):
     * the per-slot graphs of depth 4 replayed in a loop, one graph of 4 batches launched
     * batches/4 times, one graph of the whole run launched once. */
    const struct {
        const char *name;
        int per_graph;
    } replays[] = {{"loop d4 off", 0}, {"1graph x4 off", 4}, {"1graph x64 off", 0}};
    for (size_t c = 0; c < sizeof replays / sizeof replays[0]; c++) {
        int per_graph = c == 2 ? (int)o->batches : replays[c].per_graph;
        double t;
        if (pl__bench_replay(bytes, 0, busy_us, o->batches, 4, per_graph, 8, o, &t, err) != PL_OK) {
            /* A capture the driver refuses should not cost the rest of the bench. */
            printf("%-18s n/a: %s\n", replays[c].name, err->msg);
            continue;
        }
        if (!o->quick && base_by_depth[4] < 0)
            base_by_depth[4] = pl__run_baseline(o, bytes, o->batches, 4, busy_us);
        double base = base_by_depth[4];
        char bs[32] = "n/a", vs[32] = "n/a";
        if (base > 0) {
            snprintf(bs, sizeof bs, "%.3f", base / 1e6);
            snprintf(vs, sizeof vs, "%.3f", base / t);
        }
        printf("%-18s %10.3f %12.1f %8.1f%% %8.2fx %12s %9s\n", replays[c].name, t / 1e6,
               t / 1e3 / (double)o->batches, 100.0 * bound / t, seq / t, bs, vs);
    }
    printf("sequential bound %.3f ms; best graphs depth (default timing) %d at %.1f%% of the "
           "bound (vs_base = baseline time / pipectl time, >= 1 means pipectl is not "
           "slower)\n\n",
           seq_bound / 1e6, best_depth, best_pct);
    return PL_OK;
}

/* Small batches (64 KiB, a chain of scale kernels): graphs, plain launches and a bare replay
 * loop in each timing mode, then per-slot graphs against one graph holding them. */
static pl_status pl__bench_small(const pl__bench_opts *o, pl_error *err)
{
    const uint64_t bytes = 64 << 10;
    const int kernels = 10, depth = o->small_depth;
    const double n = (double)o->small_batches;
    printf("== small batches: 64 KiB, upload -> %d scale kernels -> download, depth %d, %lld "
           "batches ==\n",
           kernels, depth, (long long)o->small_batches);
    printf("%-16s %11s %13s %14s %16s %12s\n", "timing", "graphs_us", "no-graph_us", "bare_loop_us",
           "graphs/no-graph", "graphs/bare");
    const struct {
        const char *name;
        int timing;
    } modes[3] = {{"sample (1/16)", PL__T_SAMPLE}, {"all", PL__T_ALL}, {"off", PL__T_OFF}};
    for (int m = 0; m < 3; m++) {
        double tg, tn, tr = 0;
        pl_status st = pl__bench_best(bytes, kernels, 0, o->small_batches, depth, true,
                                      modes[m].timing, o, &tg, err);
        if (st == PL_OK)
            st = pl__bench_best(bytes, kernels, 0, o->small_batches, depth, false, modes[m].timing,
                                o, &tn, err);
        if (st == PL_OK) {
            pl_spec *spec = NULL;
            pl_plan *plan = NULL;
            st = pl__bench_plan(bytes, kernels, 0, o->small_batches, depth, o->device, &spec, &plan,
                                err);
            double best = 1e300;
            for (int r = 0; r < o->reps && st == PL_OK; r++) {
                double ns = 0;
                st = pl_gpu_replay_loop(plan, modes[m].timing, 64, o->small_batches, &ns, err);
                if (st == PL_OK && ns < best) best = ns;
            }
            pl_plan_free(plan);
            pl_spec_free(spec);
            tr = best * n;
        }
        if (st != PL_OK) return st;
        printf("%-16s %11.2f %13.2f %14.2f %15.2fx %12.3f\n", modes[m].name, tg / n / 1e3,
               tn / n / 1e3, tr / n / 1e3, tn / tg, tg / tr);
    }
    printf("(no-graph times every batch unless timing is off; bare_loop: cudaGraphLaunch of "
           "the same graphs in a loop, nothing else on the host; graphs/bare <= 1.05 is the "
           "target)\n\n");
    /* N per-slot graphs or one graph holding N slots, timing off: bare replays only. */
    printf("== small batches: %d per-slot graphs or one graph holding them (timing off, bare "
           "replays) ==\n",
           depth);
    printf("%-16s %14s %14s %14s %12s %12s\n", "", "per-slot_us", "1graph_xN_us", "1graph_x64_us",
           "xN/per-slot", "x64/per-slot");
    double tl = 0, t1 = 0, t64 = 0;
    pl_status st = pl__bench_replay(bytes, kernels, 0, o->small_batches, depth, 0, 64, o, &tl, err);
    if (st == PL_OK)
        st = pl__bench_replay(bytes, kernels, 0, o->small_batches, depth, depth, 64, o, &t1, err);
    if (st == PL_OK)
        st = pl__bench_replay(bytes, kernels, 0, o->small_batches, depth, 64, 64, o, &t64, err);
    if (st != PL_OK) {
        printf("n/a: %s\n\n", err->msg);
    } else {
        char nm[16];
        snprintf(nm, sizeof nm, "N = %d", depth);
        printf("%-16s %14.2f %14.2f %14.2f %12.3f %12.3f\n", nm, tl / n / 1e3, t1 / n / 1e3,
               t64 / n / 1e3, t1 / tl, t64 / tl);
        printf("(per-slot: the executor's %d lean graphs launched round-robin, one stream "
               "each; 1graph: one graph of N or 64 consecutive batches launched again and "
               "again on one stream; < 1 means one graph is faster)\n\n",
               depth);
    }
    return PL_OK;
}

static int pl__bench_main(const pl__bench_opts *o)
{
    pl_error err = {0};
    pl_status st;
    const uint64_t sizes[2] = {UINT64_C(64) << 20, UINT64_C(4) << 20};
    printf("pipectl bench: device %d, %lld batches per balanced run, %lld small batches, best of "
           "%d; 'graphs' rows: %s graphs\n\n",
           o->device, (long long)o->batches, (long long)o->small_batches, o->reps,
           o->graph_mode == PL_GRAPHS_AUTO    ? "auto (per pipeline)"
           : o->graph_mode == PL_GRAPHS_STAGE ? "stage"
                                              : "segment");
    pl_gpu_copy_times ct[2];
    double busy_ns[2];
    PL_CHECK_GOTO(pl__bench_stages(o, sizes, ct, busy_ns, &err), st, fail);
    if (!o->small_only) {
        printf("== host step between device steps (pipelines/host_step.yaml as a benchmark: "
               "kernel -> d2h -> lua -> h2d -> kernel), 4 MiB per buffer ==\n");
        st = pl__bench_host_step(o, sizes[1], o->quick ? 64 : 256, 4, &ct[1], &err);
        if (st != PL_OK) printf("n/a: %s\n\n", err.msg);
    }
    for (int i = 0; i < (o->small_only ? 0 : o->quick ? 1 : 2); i++)
        PL_CHECK_GOTO(
            pl__bench_balanced(o, sizes[i], i == 0 ? "64 MiB" : "4 MiB", &ct[i], busy_ns[i], &err),
            st, fail);
    PL_CHECK_GOTO(pl__bench_small(o, &err), st, fail);
    return 0;
fail:
    fflush(stdout);
    fprintf(stderr, "%s\n", err.msg);
    return pl_status_exit_code(st);
}
#endif

enum {
    PL__O_BATCHES = 256,
    PL__O_SMALL_BATCHES,
    PL__O_SMALL_DEPTH,
    PL__O_SMALL_ONLY,
    PL__O_QUICK,
    PL__O_REPS,
    PL__O_DEVICE,
    PL__O_BASELINE,
    PL__O_GRAPHS,
};

const pl_cli_opt pl_cli_bench_opts[] = {
    {"batches", 'b', "N", NULL, "batches per balanced-pipeline run (default 64)", PL__O_BATCHES},
    {"small-batches", 0, "N", NULL, "batches per small-batch run (default 2000)",
     PL__O_SMALL_BATCHES},
    {"small-depth", 0, "N", NULL, "depth of the small-batch runs (default 3)", PL__O_SMALL_DEPTH},
    {"small-only", 0, NULL, NULL, "only the stage and small-batch parts", PL__O_SMALL_ONLY},
    {"quick", 0, NULL, NULL, "one size, fewer configurations, one run each, 500 small batches",
     PL__O_QUICK},
    {"reps", 0, "N", NULL, "runs per configuration, the best kept (default 3)", PL__O_REPS},
    {"device", 0, "N", NULL, "CUDA device (default 0)", PL__O_DEVICE},
    {"baseline", 0, "PATH", NULL, "the bench_baseline program (default: next to pipectl)",
     PL__O_BASELINE},
    {"graphs", 0, "MODE", "auto|stage|segment",
     "the graphs the 'graphs' rows run: auto (default: as 'pipectl run' chooses), stage (one per "
     "slot and compute stage) or segment (one per slot and segment, copies included)",
     PL__O_GRAPHS},
    {0},
};

int pl_cmd_bench(int argc, char **argv)
{
    const pl_cmd *cmd = pl_cmd_find("bench", NULL);
    int64_t batches = 64, small = 2000, reps = 3, device = 0;
    const char *baseline = NULL;
    bool quick = false, small_only = false;
    int64_t small_depth = 3;
    int graph_mode = PL_GRAPHS_AUTO, k;
    pl_cli_args a;
    pl_cli_args_init(&a, cmd, argc, argv);
    const char *v;
    int id, rc = 0;
    while (rc == 0 && (id = pl_cli_next(&a, &v)) > 0) {
        switch (id) {
        case PL__O_QUICK:
            quick = true;
            reps = 1;
            small = 500;
            break;
        case PL__O_SMALL_ONLY:
            small_only = true;
            break;
        case PL__O_BATCHES:
            rc = pl_cli_int(cmd, id, v, 2, INT64_MAX, &batches);
            break;
        case PL__O_SMALL_DEPTH:
            rc = pl_cli_int(cmd, id, v, 1, INT64_MAX, &small_depth);
            break;
        case PL__O_SMALL_BATCHES:
            rc = pl_cli_int(cmd, id, v, 1, INT64_MAX, &small);
            break;
        case PL__O_REPS:
            rc = pl_cli_int(cmd, id, v, 1, INT64_MAX, &reps);
            break;
        case PL__O_DEVICE:
            rc = pl_cli_int(cmd, id, v, 0, INT64_MAX, &device);
            break;
        case PL__O_BASELINE:
            baseline = v;
            break;
        case PL__O_GRAPHS:
            if ((k = pl_cli_choice(cmd, id, v)) < 0) return 2;
            graph_mode = k == 0 ? PL_GRAPHS_AUTO : k == 1 ? PL_GRAPHS_STAGE : PL_GRAPHS_SEGMENT;
            break;
        }
    }
    if (rc) return rc;
    if (id < 0) return a.rc;
    if (a.n_operands > 0)
        return pl_cli_usage_error(cmd, "'pipectl bench' takes no file (got '%s')", a.operands[0]);
#ifdef PL_WITH_CUDA
    pl__bench_opts o = {(int)device, batches,          small,     (int)reps, baseline, quick,
                        small_only,  (int)small_depth, graph_mode};
    return pl__bench_main(&o);
#else
    (void)baseline;
    (void)graph_mode;
    (void)quick;
    (void)small_only;
    fprintf(stderr,
            "pipectl was built without CUDA: rebuild with -DPL_WITH_CUDA=ON (needs the CUDA "
            "toolkit) to use 'pipectl bench'\n");
    return 1;
#endif
}
