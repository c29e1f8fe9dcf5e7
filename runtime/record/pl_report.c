/* pl_report: the run summary (table or JSON) from a plan and a run result. */
#include "pl_report.h"

#include "pl_json.h"
#include "pl_str.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool pl__is_device_stage(const pl_plan *plan, int s)
{
    if (plan->stages[s].body) return false; /* timed with its loop */
    pl_engine e = plan->stages[s].engine;
    return e == PL_ENGINE_H2D || e == PL_ENGINE_COMPUTE || e == PL_ENGINE_D2H;
}

/* Device stages on the GPU executor are timed on sampled batches only (pl_run_cfg.timing_period);
 * the others report {0, 0}, which the timing skips: count says how many batches were timed,
 * mean/p50/p99 are over those (p50/p99 from a histogram: within 0.79%, pl_hist.h; mean, min and
 * max exact), and busy is mean * batches / wall. The bound is the busiest engine's busy time per
 * batch (pl_engines_measure, runtime/exec/pl_engines.h); its stage, the slowest stage on it. */
double pl_report_stats(const pl_plan *plan, const pl_run_result *res, pl_stage_stats *stats,
                       int *bound_stage)
{
    int n = plan->n_stages;
    const pl_timing *t = res->timing;
    int64_t nb = t ? res->batches_done : 0;
    double wall = res->wall_ns > 0 ? (double)res->wall_ns * 1e-9 : 0;
    *bound_stage = -1;
    for (int s = 0; s < n; s++) {
        pl_stage_stats *x = &stats[s];
        memset(x, 0, sizeof *x);
        const pl_hist *h = t ? &t->hist[s] : NULL;
        if (!h || h->count == 0) continue;
        x->count = h->count;
        x->total_s = (double)h->sum * 1e-9;
        x->mean_s = x->total_s / (double)h->count;
        x->min_s = (double)h->min * 1e-9;
        x->max_s = (double)h->max * 1e-9;
        x->p50_s = (double)pl_hist_quantile(h, 0.5) * 1e-9;
        x->p99_s = (double)pl_hist_quantile(h, 0.99) * 1e-9;
        x->busy = wall > 0 ? x->mean_s * (double)nb / wall : 0;
    }
    pl_engine_stats *eng = t ? pl_engines_new(plan) : NULL;
    int n_eng = 0;
    int be = eng ? pl_engines_measure(plan, res, eng, &n_eng) : -1;
    double bound = be >= 0 ? eng[be].per_batch_s : 0;
    for (int s = 0; be >= 0 && s < n; s++) {
        const pl_plan_stage *ps = &plan->stages[s];
        bool on = ps->engine == eng[be].engine &&
                  (ps->engine != PL_ENGINE_HOST || ps->stream == eng[be].stream);
        if (on && (*bound_stage < 0 || stats[s].mean_s > stats[*bound_stage].mean_s))
            *bound_stage = s;
    }
    free(eng);
    return bound;
}

/* Bytes per batch that enter (buffers written by sources) and leave (buffers sinks read). */
void pl_report_flow(const pl_spec *spec, uint64_t *in, uint64_t *out)
{
    *in = *out = 0;
    for (int s = 0; s < spec->n_stages; s++) {
        const pl_stage *st = &spec->stages[s];
        if (st->kind->role & PL_ROLE_INPUT)
            for (int i = 0; i < st->n_writes; i++)
                *in += spec->buffers[st->writes[i].index].bytes;
        if (st->kind->role & PL_ROLE_OUTPUT)
            for (int i = 0; i < st->n_reads; i++)
                *out += spec->buffers[st->reads[i].index].bytes;
    }
}

static const char *pl__bytes(uint64_t b, char *buf, size_t cap)
{
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int i = 0;
    while (v >= 1024 && i < 4)
        v /= 1024, i++;
    if (i == 0)
        snprintf(buf, cap, "%llu B", (unsigned long long)b);
    else
        snprintf(buf, cap, "%.1f %s", v, u[i]);
    return buf;
}

static const char *pl__time(double s, char *buf, size_t cap)
{
    if (s >= 1)
        snprintf(buf, cap, "%.3f s", s);
    else if (s >= 1e-3)
        snprintf(buf, cap, "%.2f ms", s * 1e3);
    else
        snprintf(buf, cap, "%.1f us", s * 1e6);
    return buf;
}

void pl_report_print(FILE *out, const pl_plan *plan, const pl_run_result *res, pl_status status)
{
    const pl_spec *spec = plan->spec;
    char b1[32], b2[32], b3[32], b4[32], b5[32];
    uint64_t in, outb;
    pl_report_flow(spec, &in, &outb);
    double wall = (double)res->wall_ns * 1e-9;
    fprintf(out, "pipeline '%s': %lld of %lld batches, depth %d, executor %s%s", spec->name,
            (long long)res->batches_done, (long long)res->batches_planned,
            res->depth > 0 ? res->depth : plan->depth, res->executor ? res->executor : "?",
            res->executor && strcmp(res->executor, "gpu") == 0
                ? (!res->graphs ? " (stream launches)"
                   : res->graph_mode && strcmp(res->graph_mode, "stage") == 0
                       ? " (CUDA Graphs per stage)"
                       : " (CUDA Graphs)")
                : "");
    if (res->device_name[0]) fprintf(out, " on %s", res->device_name);
    if (res->workers) fprintf(out, ", %d host workers", res->workers);
    fprintf(out, "\n");
    if (res->depth_auto.on) fprintf(out, "  %s\n", res->depth_auto.why);
    fprintf(out,
            "  each batch: %s in (sources), %s out (sinks); memory %s per slot + %s persistent\n",
            pl__bytes(in, b1, sizeof b1), pl__bytes(outb, b2, sizeof b2),
            pl__bytes(plan->host_per_slot + plan->device_per_slot, b3, sizeof b3),
            pl__bytes(plan->host_persistent + plan->device_persistent, b4, sizeof b4));
    if (res->batches_done > 0 && wall > 0) {
        double per = wall / (double)res->batches_done;
        fprintf(out, "  wall %s: %.1f batches/s, %s/s in, %s per batch\n",
                pl__time(wall, b1, sizeof b1), 1.0 / per,
                pl__bytes((uint64_t)((double)in / per), b2, sizeof b2),
                pl__time(per, b3, sizeof b3));
    } else {
        fprintf(out, "  wall %s\n", pl__time(wall, b1, sizeof b1));
    }
    pl_stage_stats *st = calloc((size_t)(plan->n_stages > 0 ? plan->n_stages : 1), sizeof *st);
    if (st && res->batches_done > 0) {
        int bs;
        double bound = pl_report_stats(plan, res, st, &bs);
        int w = 5;
        for (int s = 0; s < spec->n_stages; s++) {
            int l = (int)strlen(spec->stages[s].name);
            if (l > w) w = l;
        }
        fprintf(out, "\n  %-*s  %-7s %-8s %6s %10s %10s %10s %6s\n", w, "stage", "kind", "engine",
                "count", "mean", "p50", "p99", "busy");
        for (int i = 0; i < plan->n_stages; i++) {
            int s = plan->order[i];
            const pl_stage *sg = &spec->stages[s];
            if (plan->stages[s].body) { /* not timed alone: inside its loop's time */
                fprintf(out, "  %-*s  %-7s %-8s %6s   in loop '%s'\n", w, sg->name, sg->kind->name,
                        pl_engine_name(plan->stages[s].engine), "-", spec->stages[sg->parent].name);
                continue;
            }
            fprintf(out, "  %-*s  %-7s %-8s %6lld %10s %10s %10s %5.1f%%\n", w, sg->name,
                    sg->kind->name, pl_engine_name(plan->stages[s].engine), (long long)st[s].count,
                    pl__time(st[s].mean_s, b1, sizeof b1), pl__time(st[s].p50_s, b2, sizeof b2),
                    pl__time(st[s].p99_s, b3, sizeof b3), 100 * st[s].busy);
        }
        /* Device stages timed on fewer batches than completed: say so (pl_run_cfg.timing_period).
         */
        int64_t timed = -1;
        for (int s = 0; s < plan->n_stages; s++)
            if (pl__is_device_stage(plan, s) && (timed < 0 || st[s].count < timed))
                timed = st[s].count;
        if (timed == 0)
            fprintf(out, "\n  device stage times not measured (timing off; 'pipectl run --timing "
                         "sample' or 'all' measures them)\n");
        else if (timed > 0 && timed < res->batches_done)
            fprintf(out,
                    "\n  device stage times sampled on %lld of %lld batches (count column; "
                    "'pipectl run --timing all' times every batch)\n",
                    (long long)timed, (long long)res->batches_done);
        double per = wall / (double)res->batches_done;
        pl_engine_stats *eng = pl_engines_new(plan);
        int n_eng = 0;
        int be = eng ? pl_engines_measure(plan, res, eng, &n_eng) : -1;
        if (n_eng)
            fprintf(out, "\n  %-10s %6s %8s %12s %10s\n", "engine", "stages", "timed", "busy/batch",
                    "occupancy");
        for (int e = 0; e < n_eng; e++) {
            char name[48];
            snprintf(name, sizeof name, "%s", eng[e].name);
            if (!eng[e].timed) {
                fprintf(out, "  %-10s %6d %8s %12s %10s\n", name, eng[e].n_stages, "0", "-", "-");
                continue;
            }
            fprintf(out, "  %-10s %6d %8lld %12s %9.1f%%%s\n", name, eng[e].n_stages,
                    (long long)eng[e].timed, pl__time(eng[e].per_batch_s, b1, sizeof b1),
                    100 * eng[e].occupancy, e == be ? "  <- sets the pace" : "");
        }
        if (bs >= 0 && be >= 0 && per > 0) {
            double ach = bound / per;
            fprintf(out,
                    "\n  per batch %s; the bound is %s, the busiest engine's (%s) busy time per "
                    "batch\n  (the union of its stages' intervals: work that overlaps counts "
                    "once): achieved %.1f%% of the bound.\n  %s sets the pace (slowest stage "
                    "on it: '%s').\n",
                    pl__time(per, b4, sizeof b4), pl__time(bound, b5, sizeof b5), eng[be].name,
                    100 * ach, eng[be].name, spec->stages[bs].name);
            /* Sampled device spans start when the stage may run, so they can include waiting
             * behind untimed batches' work on the engine; timed on every batch, that work is in
             * the union too and the share cannot pass 100% but by clock noise. */
            if (ach > 1.02 && eng[be].timed < res->batches_done)
                fprintf(out,
                        "  (over 100%%: %s was timed on %lld of %lld batches, and a sampled span "
                        "includes waiting behind the untimed batches' work; '--timing all' "
                        "measures it exactly)\n",
                        eng[be].name, (long long)eng[be].timed, (long long)res->batches_done);
            else if (ach > 1.02)
                fprintf(out, "  (over 100%%: measurement noise between the device and host "
                             "clocks)\n");
        } else if (per > 0) {
            fprintf(out, "\n  per batch %s; no bound without device stage times\n",
                    pl__time(per, b4, sizeof b4));
        }
        free(eng);
    }
    free(st);
    if (res->n_outputs) fprintf(out, "\n  outputs:\n");
    /* File names escaped (pl_name_str): one line per output whatever bytes a name holds. */
    char name[PL_NAME_CAP];
    for (int i = 0; i < res->n_outputs; i++) {
        const pl_output *o = &res->outputs[i];
        const char *path = o->path ? pl_name_str(o->path, 0, name, sizeof name) : "";
        if (o->path && o->batches == 0 && status != PL_OK)
            fprintf(out, "    %s: nothing written; %s left as it was\n", o->stage, path);
        else if (o->path && !o->checksummed)
            fprintf(out,
                    "    %s: %lld batches written to %s%s, no checksum taken (checksum: "
                    "false)\n",
                    o->stage, (long long)o->batches, path,
                    o->finalized ? "" : " (NOT finalized: see the error)");
        else if (o->path)
            fprintf(out, "    %s: %lld batches written to %s%s, checksum 0x%016" PRIx64 "\n",
                    o->stage, (long long)o->batches, path,
                    o->finalized ? "" : " (NOT finalized: see the error)", o->checksum);
        else if (!o->checksummed)
            fprintf(out, "    %s: %lld batches consumed (no file, no checksum: checksum: false)\n",
                    o->stage, (long long)o->batches);
        else
            fprintf(out, "    %s: %lld batches checksummed (no file), checksum 0x%016" PRIx64 "\n",
                    o->stage, (long long)o->batches, o->checksum);
    }
}

void pl_report_stopped(FILE *out, const pl_run_result *res)
{
    fprintf(out, "stopped after %lld of %lld batches", (long long)res->batches_done,
            (long long)res->batches_planned);
    const char *sep = "; ";
    char name[PL_NAME_CAP];
    for (int i = 0; i < res->n_outputs; i++) {
        const pl_output *o = &res->outputs[i];
        if (!o->path) continue;
        const char *path = pl_name_str(o->path, 0, name, sizeof name);
        if (o->batches == 0)
            fprintf(out, "%snothing written to %s (left as it was)", sep, path);
        else
            fprintf(out, "%s%lld batch%s written to %s%s", sep, (long long)o->batches,
                    o->batches == 1 ? "" : "es", path, o->finalized ? "" : " (not finalized)");
        sep = ", ";
    }
    fputc('\n', out);
}

/* A measured value rounded to `dec` decimals (what the summary always showed: ns for times, 1e-4
 * for ratios), so the JSON number does not carry float noise past it. */
static json_t *pl__real(double x, int dec)
{
    double f = pow(10.0, dec);
    return json_real(round(x * f) / f);
}

static json_t *pl__str_or_null(const char *s)
{
    return s ? pl_json_str(s) : json_null();
}

/* depth: auto's choice (null for a fixed depth): what was measured and what capped it. */
static json_t *pl__depth_auto(const pl_plan *plan, const pl_depth_choice *c)
{
    if (!c->on) return json_null();
    const pl_budget *b = &plan->spec->run.budget;
    json_t *o = json_object();
    if (!o) return NULL;
    int bad = 0;
    bad |= json_object_set_new(o, "chosen", json_boolean(c->chosen));
    bad |= json_object_set_new(o, "depth", json_integer(c->depth));
    bad |= json_object_set_new(o, "calibration_batches", json_integer(c->calib_batches));
    bad |= json_object_set_new(o, "calibration_depth", json_integer(c->calib_depth));
    bad |= json_object_set_new(o, "measured_batches", json_integer(c->measured));
    bad |=
        json_object_set_new(o, "latency_s", c->measured ? pl__real(c->latency_s, 9) : json_null());
    bad |=
        json_object_set_new(o, "slot_hold_s", c->measured ? pl__real(c->hold_s, 9) : json_null());
    bad |= json_object_set_new(o, "bound_s", c->measured ? pl__real(c->period_s, 9) : json_null());
    bad |=
        json_object_set_new(o, "bound_engine", c->measured ? pl_json_str(c->engine) : json_null());
    bad |= json_object_set_new(o, "needed", c->needed ? json_integer(c->needed) : json_null());
    bad |= json_object_set_new(o, "max_depth", json_integer(c->cap));
    bad |= json_object_set_new(o, "max_depth_by", pl__str_or_null(c->cap_why));
    bad |= json_object_set_new(o, "capped", json_boolean(c->capped));
    bad |= json_object_set_new(o, "device_per_slot_bytes",
                               json_integer((json_int_t)plan->device_per_slot));
    bad |= json_object_set_new(o, "host_per_slot_bytes",
                               json_integer((json_int_t)plan->host_per_slot));
    bad |= json_object_set_new(o, "budget_device_bytes",
                               b->set && b->device ? json_integer((json_int_t)b->device)
                                                   : json_null());
    bad |= json_object_set_new(o, "budget_host_pinned_bytes",
                               b->set && b->host_pinned ? json_integer((json_int_t)b->host_pinned)
                                                        : json_null());
    bad |= json_object_set_new(o, "reason", pl_json_str(c->why));
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* The summary as a tree, built through pl_json (any bytes give valid JSON); NULL on OOM. */
static json_t *pl__summary(const pl_plan *plan, const pl_run_result *res, pl_status status,
                           const pl_error *err)
{
    const pl_spec *spec = plan->spec;
    uint64_t in, outb;
    pl_report_flow(spec, &in, &outb);
    double wall = (double)res->wall_ns * 1e-9;
    double per = res->batches_done > 0 ? wall / (double)res->batches_done : 0;
    json_t *o = json_object(), *engines = json_array(), *stages = json_array(),
           *outputs = json_array(), *diags = json_array();
    pl_stage_stats *st = calloc((size_t)(plan->n_stages > 0 ? plan->n_stages : 1), sizeof *st);
    pl_engine_stats *eng = st ? pl_engines_new(plan) : NULL;
    if (!o || !engines || !stages || !outputs || !diags || !st || !eng) goto oom;
    int bad = 0;
#define PL__SET(k, v) bad |= json_object_set_new(o, k, v)
    PL__SET("schema_version", json_integer(PL_JSON_SCHEMA_VERSION));
    PL__SET("pipeline", pl_json_str(spec->name));
    PL__SET("status", json_string(status == PL_OK ? "ok" : pl_status_name(status)));
    PL__SET("exit_code",
            json_integer(status == PL_EINTR && res->signal > 0 ? 128 + res->signal
                                                               : pl_status_exit_code(status)));
    PL__SET("error", status != PL_OK && err ? pl_json_str(err->msg) : json_null());
    PL__SET("executor", pl_json_str(res->executor ? res->executor : ""));
    PL__SET("graphs", json_boolean(res->graphs));
    PL__SET("graph_mode", pl_json_str(res->graph_mode ? res->graph_mode : "none"));
    PL__SET("device", pl_json_str(res->device_name));
    PL__SET("depth", json_integer(res->depth > 0 ? res->depth : plan->depth));
    PL__SET("depth_auto", pl__depth_auto(plan, &res->depth_auto));
    PL__SET("workers", json_integer(res->workers));
    PL__SET("batches_planned", json_integer(res->batches_planned));
    PL__SET("batches_done", json_integer(res->batches_done));
    PL__SET("batches_issued", json_integer(res->batches_issued));
    PL__SET("bytes_in_per_batch", json_integer((json_int_t)in));
    PL__SET("bytes_out_per_batch", json_integer((json_int_t)outb));
    PL__SET("wall_s", pl__real(wall, 9));
    PL__SET("per_batch_s", pl__real(per, 9));
    PL__SET("batches_per_s", pl__real(per > 0 ? 1.0 / per : 0.0, 3));
    const pl_batch_clock *bc = &res->batch_clock;
    PL__SET("steady_per_batch_s", bc->mark_ns >= 0 && bc->last_b > bc->mark_b
                                      ? pl__real((double)(bc->last_ns - bc->mark_ns) * 1e-9 /
                                                     (double)(bc->last_b - bc->mark_b),
                                                 9)
                                      : json_null());
    int bs = -1;
    double bound = pl_report_stats(plan, res, st, &bs);
    int n_eng = 0;
    int be = pl_engines_measure(plan, res, eng, &n_eng);
    if (bs >= 0 && be >= 0) {
        PL__SET("bound_s", pl__real(bound, 9));
        PL__SET("bound_stage", pl_json_str(spec->stages[bs].name));
        PL__SET("achieved", pl__real(per > 0 ? bound / per : 0.0, 4));
        PL__SET("bound_engine", pl_json_str(eng[be].name));
    } else {
        PL__SET("bound_s", json_null());
        PL__SET("bound_stage", json_null());
        PL__SET("achieved", json_null());
        PL__SET("bound_engine", json_null());
    }
    for (int e = 0; e < n_eng; e++)
        bad |= json_array_append_new(
            engines,
            json_pack("{s:o, s:s, s:i, s:I, s:o, s:o, s:o}", "name", pl_json_str(eng[e].name),
                      "engine", pl_engine_name(eng[e].engine), "stages", eng[e].n_stages,
                      "timed_batches", (json_int_t)eng[e].timed, "busy_s",
                      pl__real(eng[e].busy_s, 9), "busy_per_batch_s",
                      pl__real(eng[e].per_batch_s, 9), "occupancy", pl__real(eng[e].occupancy, 4)));
    for (int i = 0; i < plan->n_stages; i++) {
        int s = plan->order[i];
        const pl_stage *sg = &spec->stages[s];
        bad |= json_array_append_new(
            stages, json_pack("{s:o, s:s, s:s, s:o, s:I, s:o, s:o, s:o, s:o, s:o, s:o}", "name",
                              pl_json_str(sg->name), "kind", sg->kind->name, "engine",
                              pl_engine_name(plan->stages[s].engine), "stream",
                              pl_json_str(plan->streams[plan->stages[s].stream].name), "count",
                              (json_int_t)st[s].count, "mean_s", pl__real(st[s].mean_s, 9), "p50_s",
                              pl__real(st[s].p50_s, 9), "p99_s", pl__real(st[s].p99_s, 9), "busy",
                              pl__real(st[s].busy, 4), "min_s", pl__real(st[s].min_s, 9), "max_s",
                              pl__real(st[s].max_s, 9)));
    }
    for (int i = 0; i < res->n_outputs; i++) {
        const pl_output *op = &res->outputs[i];
        json_t *sums = json_array();
        for (int64_t b = 0; sums && op->batch_checksums && b < op->n_batch_checksums; b++)
            bad |= json_array_append_new(sums, pl_json_hex64(op->batch_checksums[b]));
        /* checksum: false in the pipeline: null, not a made-up 0x0000000000000000. */
        bad |= json_array_append_new(
            outputs,
            json_pack("{s:o, s:o, s:I, s:I, s:o, s:b, s:b, s:o}", "stage", pl_json_str(op->stage),
                      "path", pl__str_or_null(op->path), "batches", (json_int_t)op->batches,
                      "bytes_per_batch", (json_int_t)op->batch_bytes, "checksum",
                      op->checksummed ? pl_json_hex64(op->checksum) : json_null(), "checksummed",
                      op->checksummed, "finalized", op->finalized, "batch_checksums",
                      sums ? sums : json_null()));
    }
    /* The error again as a record (stage, batch, position), as the other --json outputs give it. */
    if (status != PL_OK && err) bad |= json_array_append_new(diags, pl_json_diag(err, "error"));
    PL__SET("engines", engines);
    PL__SET("stages", stages);
    PL__SET("outputs", outputs);
    PL__SET("diagnostics", diags);
#undef PL__SET
    free(eng);
    free(st);
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
oom:
    free(eng);
    free(st);
    json_decref(o);
    json_decref(engines);
    json_decref(stages);
    json_decref(outputs);
    json_decref(diags);
    return NULL;
}

void pl_report_json(FILE *out, const pl_plan *plan, const pl_run_result *res, pl_status status,
                    const pl_error *err)
{
    json_t *o = pl__summary(plan, res, status, err);
    if (!o || json_dumpf(o, out, JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15)) != 0)
        fprintf(out, "{\"schema_version\": %d, \"status\": \"ENOMEM\", \"exit_code\": 1}",
                PL_JSON_SCHEMA_VERSION);
    fputc('\n', out);
    json_decref(o);
}
