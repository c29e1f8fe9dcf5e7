/* pl_trace: Chrome trace JSON of a run ("traceEvents" in microseconds): complete "X" slices per
 * stage and batch on one row per stream (more rows where a stream's slices overlap), flow arrows
 * ("s"/"f") along the plan's cross-stream edges of each batch, and counters ("C"): bytes in flight
 * per engine and slots in use. */
#include "pl_trace.h"

#include "pl_json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every event is a jansson object written as soon as it is made (the file is streamed: a long run
 * has millions of events, and no tree of all of them is built); only the array around them is
 * written by hand. Strings go through pl_json_str, the one JSON writer's: stage and stream names
 * are identifiers (checked), but the pipeline name may be anything (a Lua pipeline's name need
 * not be UTF-8): a byte that is not part of well-formed UTF-8 becomes U+FFFD and the trace stays
 * valid JSON. */
enum { PL__MAX_LANES = 64 }; /* rows per stream: overlapping slices of one stream */

typedef struct pl__slice {
    int64_t start, end;
    int stream, stage;
    int64_t batch;
} pl__slice;

/* The depth batch b ran at: depth: auto runs its calibration batches at the plan's depth. */
static int pl__depth_of(const pl_plan *plan, const pl_run_result *res, int64_t b)
{
    if (res->depth <= 0 || (res->depth_auto.on && b < res->depth_auto.calib_batches))
        return plan->depth;
    return res->depth;
}

static int pl__cmp_slice(const void *x, const void *y)
{
    const pl__slice *a = x, *b = y;
    if (a->stream != b->stream) return a->stream < b->stream ? -1 : 1;
    if (a->start != b->start) return a->start < b->start ? -1 : 1;
    if (a->end != b->end) return a->end > b->end ? -1 : 1; /* the enclosing one first */
    return a->batch < b->batch ? -1 : a->batch > b->batch;
}

/* Writes one event (",\n" before all but the first) and frees it; NULL (out of memory) writes
 * nothing, and *bad says so. */
static void pl__event(FILE *f, json_t *ev, bool first, bool *bad)
{
    if (!ev) {
        *bad = true;
        return;
    }
    if (!first) fputs(",\n", f);
    /* Into a buffer, then one fwrite: json_dumpf writes token by token. */
    char buf[1024];
    size_t n = json_dumpb(ev, buf, sizeof buf, JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15));
    if (n > 0 && n <= sizeof buf)
        fwrite(buf, 1, n, f);
    else if (json_dumpf(ev, f, JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15)) != 0)
        *bad = true;
    json_decref(ev);
}

/* Microseconds (the format's unit) from nanoseconds, to the nanosecond. */
static json_t *pl__us(int64_t ns)
{
    return json_real((double)ns / 1000.0);
}

typedef struct pl__tick {
    int64_t ts, delta;
} pl__tick;

static int pl__cmp_tick(const void *x, const void *y)
{
    const pl__tick *a = x, *b = y;
    return a->ts < b->ts ? -1 : a->ts > b->ts;
}

/* A counter track from +/- changes: one "C" event per distinct time, with the value after all
 * the changes at that time (so a slot freed and reused at one instant does not blip). */
static void pl__counter(FILE *f, const char *name, const char *key, pl__tick *t, size_t n,
                        bool *bad)
{
    qsort(t, n, sizeof *t, pl__cmp_tick);
    int64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        v += t[i].delta;
        if (i + 1 < n && t[i + 1].ts == t[i].ts) continue;
        json_t *args = json_object();
        if (args) json_object_set_new(args, key, json_integer((json_int_t)v));
        pl__event(f,
                  args ? json_pack("{s:o, s:s, s:i, s:o, s:o}", "name", pl_json_str(name), "ph",
                                   "C", "pid", 1, "ts", pl__us(t[i].ts), "args", args)
                       : NULL,
                  false, bad);
    }
}

static uint64_t pl__bytes_written(const pl_spec *spec, int s)
{
    uint64_t n = 0;
    const pl_stage *st = &spec->stages[s];
    for (int i = 0; i < st->n_writes; i++)
        n += spec->buffers[st->writes[i].index].bytes;
    return n;
}

/* Rows: lane 0 of stream k is tid k (what a run without overlap shows); a stream's further lanes
 * get tids from n_streams on. Sorts the slices (by stream, then start) and sets each one's tid in
 * tid_of, lanes[k] (the lanes stream k uses) and lane_tid[k * PL__MAX_LANES + l]. */
static void pl__assign_lanes(const pl_plan *plan, pl__slice *sl, size_t n, int *tid_of, int *lanes,
                             int *lane_tid)
{
    int64_t lane_end[PL__MAX_LANES];
    int next_tid = plan->n_streams;
    qsort(sl, n, sizeof *sl, pl__cmp_slice);
    for (size_t i = 0; i < n;) {
        int k = sl[i].stream;
        int used = 0;
        lane_tid[k * PL__MAX_LANES] = k;
        for (; i < n && sl[i].stream == k; i++) {
            int l = 0;
            while (l < used && lane_end[l] > sl[i].start)
                l++;
            if (l == PL__MAX_LANES) l = PL__MAX_LANES - 1; /* more overlap than that: share */
            if (l == used) {
                used++;
                if (l > 0) lane_tid[k * PL__MAX_LANES + l] = next_tid++;
            }
            lane_end[l] = sl[i].end;
            tid_of[sl[i].batch * plan->n_stages + sl[i].stage] = lane_tid[k * PL__MAX_LANES + l];
        }
        lanes[k] = used;
    }
}

/* Each row's name (its stream's, and which overlap lane) and place. */
static void pl__write_rows(FILE *f, const pl_plan *plan, const int *lanes, const int *lane_tid,
                           bool *bad)
{
    for (int k = 0; k < plan->n_streams; k++) {
        int nl = lanes[k] > 0 ? lanes[k] : 1;
        for (int l = 0; l < nl; l++) {
            int tid = l == 0 ? k : lane_tid[k * PL__MAX_LANES + l];
            char name[64];
            if (l == 0)
                snprintf(name, sizeof name, "%s (%s)", plan->streams[k].name,
                         pl_engine_name(plan->streams[k].engine));
            else
                snprintf(name, sizeof name, "%s (%s) overlap %d", plan->streams[k].name,
                         pl_engine_name(plan->streams[k].engine), l + 1);
            pl__event(f,
                      json_pack("{s:s, s:s, s:i, s:i, s:{s:o}}", "name", "thread_name", "ph", "M",
                                "pid", 1, "tid", tid, "args", "name", pl_json_str(name)),
                      false, bad);
            pl__event(f,
                      json_pack("{s:s, s:s, s:i, s:i, s:{s:i}}", "name", "thread_sort_index", "ph",
                                "M", "pid", 1, "tid", tid, "args", "sort_index",
                                k * PL__MAX_LANES + l),
                      false, bad);
        }
    }
}

/* Slices and flows are most of a trace (millions in a long run): one object of each shape is
 * made once and its values are set in place for each event (json_*_set: no allocation), so the
 * writer stays near the speed of printf. Names are the stages' (identifiers) and ASCII. */
static void pl__write_slices(FILE *f, const pl_plan *plan, const pl_run_result *res,
                             const pl__slice *sl, size_t n, const int *tid_of, bool *bad)
{
    const pl_spec *spec = plan->spec;
    json_t *xo = json_pack("{s:s, s:s, s:s, s:i, s:i, s:f, s:f, s:{s:I, s:I}}", "name", "", "cat",
                           "", "ph", "X", "pid", 1, "tid", 0, "ts", 0.0, "dur", 0.0, "args",
                           "batch", (json_int_t)0, "slot", (json_int_t)0);
    if (!xo) {
        *bad = true;
        return;
    }
    json_t *xargs = json_object_get(xo, "args");
    for (size_t i = 0; i < n; i++) {
        const pl__slice *x = &sl[i];
        const pl_plan_stage *ps = &plan->stages[x->stage];
        int bad_set =
            json_string_set(json_object_get(xo, "name"), spec->stages[x->stage].name) |
            json_string_set(json_object_get(xo, "cat"), pl_engine_name(ps->engine)) |
            json_integer_set(json_object_get(xo, "tid"),
                             tid_of[x->batch * plan->n_stages + x->stage]) |
            json_real_set(json_object_get(xo, "ts"), (double)x->start / 1000.0) |
            json_real_set(json_object_get(xo, "dur"), (double)(x->end - x->start) / 1000.0) |
            json_integer_set(json_object_get(xargs, "batch"), (json_int_t)x->batch) |
            json_integer_set(json_object_get(xargs, "slot"),
                             (json_int_t)(x->batch % pl__depth_of(plan, res, x->batch)));
        if (bad_set) *bad = true;
        pl__event(f, json_incref(xo), false, bad);
    }
    json_decref(xo);
}

/* Flow arrows: a batch's stage to the next one on another stream (the plan's reduced edges), from
 * the end of the first (1 ns inside it, so it binds to that slice) to the start of the second
 * ("bp": "e": bound to the slice that encloses that point). One object of each shape, set in
 * place for each arrow, as for slices. */
static void pl__write_flows(FILE *f, const pl_plan *plan, const pl_run_result *res, int64_t nb,
                            const int *tid_of, bool *bad)
{
    json_t *so = json_pack("{s:s, s:s, s:s, s:I, s:i, s:i, s:f}", "name", "", "cat", "flow", "ph",
                           "s", "id", (json_int_t)0, "pid", 1, "tid", 0, "ts", 0.0);
    json_t *fo =
        json_pack("{s:s, s:s, s:s, s:s, s:I, s:i, s:i, s:f}", "name", "", "cat", "flow", "ph", "f",
                  "bp", "e", "id", (json_int_t)0, "pid", 1, "tid", 0, "ts", 0.0);
    if (!so || !fo) *bad = true;
    int64_t flow_id = 0;
    for (int64_t b = 0; so && fo && b < nb; b++)
        for (int s = 0; s < plan->n_stages; s++) {
            const pl_plan_stage *ps = &plan->stages[s];
            const pl_span *to = pl_timing_span(res->timing, b, s);
            if (to->start_ns == 0 && to->end_ns == 0) continue;
            for (int j = 0; j < ps->n_preds; j++) {
                int p = ps->preds[j];
                const pl_span *from = pl_timing_span(res->timing, b, p);
                if (plan->stages[p].stream == ps->stream) continue;
                if (from->start_ns == 0 && from->end_ns == 0) continue;
                int64_t s_ts =
                    from->end_ns - 1 > from->start_ns ? from->end_ns - 1 : from->start_ns;
                flow_id++;
                char fname[32];
                snprintf(fname, sizeof fname, "batch %lld", (long long)b);
                int bad_set =
                    json_string_set(json_object_get(so, "name"), fname) |
                    json_integer_set(json_object_get(so, "id"), (json_int_t)flow_id) |
                    json_integer_set(json_object_get(so, "tid"), tid_of[b * plan->n_stages + p]) |
                    json_real_set(json_object_get(so, "ts"), (double)s_ts / 1000.0) |
                    json_string_set(json_object_get(fo, "name"), fname) |
                    json_integer_set(json_object_get(fo, "id"), (json_int_t)flow_id) |
                    json_integer_set(json_object_get(fo, "tid"), tid_of[b * plan->n_stages + s]) |
                    json_real_set(json_object_get(fo, "ts"), (double)to->start_ns / 1000.0);
                if (bad_set) *bad = true;
                pl__event(f, json_incref(so), false, bad);
                pl__event(f, json_incref(fo), false, bad);
            }
        }
    json_decref(so);
    json_decref(fo);
}

/* Counters. Bytes in flight on an engine: what its running stages write (a copy's size). Slots
 * in use: a batch holds its slot from its first timed stage's start to its last's end (with
 * sampled device timing, untimed batches show their host stages only). ticks: room for 2 n. */
static void pl__write_counters(FILE *f, const pl_plan *plan, const pl_run_result *res, int64_t nb,
                               const pl__slice *sl, size_t n, pl__tick *ticks, bool *bad)
{
    for (int e = 0; e < PL_ENGINE_COUNT; e++) {
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            if ((int)plan->stages[sl[i].stage].engine != e) continue;
            int64_t by = (int64_t)pl__bytes_written(plan->spec, sl[i].stage);
            ticks[m++] = (pl__tick){sl[i].start, by};
            ticks[m++] = (pl__tick){sl[i].end, -by};
        }
        if (!m) continue;
        char name[64];
        snprintf(name, sizeof name, "bytes in flight (%s)", pl_engine_name((pl_engine)e));
        pl__counter(f, name, "bytes", ticks, m, bad);
    }
    size_t m = 0;
    for (int64_t b = 0; b < nb; b++) {
        int64_t lo = INT64_MAX, hi = INT64_MIN;
        for (int s = 0; s < plan->n_stages; s++) {
            const pl_span *sp = pl_timing_span(res->timing, b, s);
            if (sp->start_ns == 0 && sp->end_ns == 0) continue;
            if (sp->start_ns < lo) lo = sp->start_ns;
            if (sp->end_ns > hi) hi = sp->end_ns;
        }
        if (lo > hi) continue;
        ticks[m++] = (pl__tick){lo, 1};
        ticks[m++] = (pl__tick){hi, -1};
    }
    if (m) pl__counter(f, "slots in use", "slots", ticks, m, bad);
}

static void pl__write_events(FILE *f, const pl_plan *plan, const pl_run_result *res, int64_t nb,
                             pl__slice *sl, size_t n, int *tid_of, pl__tick *ticks, bool *bad)
{
    int ns = plan->n_streams;
    int *lanes = calloc((size_t)(ns > 0 ? ns : 1), sizeof *lanes);
    int *lane_tid = calloc((size_t)(ns > 0 ? ns : 1) * PL__MAX_LANES, sizeof *lane_tid);
    if (lanes && lane_tid) {
        pl__assign_lanes(plan, sl, n, tid_of, lanes, lane_tid);
        pl__write_rows(f, plan, lanes, lane_tid, bad);
        pl__write_slices(f, plan, res, sl, n, tid_of, bad);
        pl__write_flows(f, plan, res, nb, tid_of, bad);
        pl__write_counters(f, plan, res, nb, sl, n, ticks, bad);
    }
    free(lanes);
    free(lane_tid);
}

int64_t pl_trace_batches(const pl_run_result *res)
{
    if (!res->timing) return 0;
    return res->batches_done < res->timing->keep ? res->batches_done : res->timing->keep;
}

int64_t pl_trace_batches_for(const pl_plan *plan)
{
    int64_t per = plan->n_stages > 0 ? plan->n_stages : 1;
    int64_t n = PL_TRACE_MAX_SPANS / per;
    if (n < 1) n = 1;
    return n < plan->batches ? n : plan->batches;
}

pl_status pl_trace_write(const char *path, const pl_plan *plan, const pl_run_result *res,
                         pl_error *err)
{
    const pl_spec *spec = plan->spec;
    int64_t nb = pl_trace_batches(res);
    size_t cells = (size_t)(nb * plan->n_stages);
    pl__slice *sl = malloc((cells ? cells : 1) * sizeof *sl);
    int *tid_of = malloc((cells ? cells : 1) * sizeof *tid_of);
    pl__tick *ticks = malloc((cells ? 2 * cells : 1) * sizeof *ticks);
    size_t n = strlen(path);
    char *tmp = malloc(n + sizeof ".partial");
    if (!sl || !tid_of || !ticks || !tmp) {
        free(sl);
        free(tid_of);
        free(ticks);
        free(tmp);
        return pl_error_set(err, PL_ENOMEM, "error: out of memory writing the trace");
    }
    memcpy(tmp, path, n);
    memcpy(tmp + n, ".partial", sizeof ".partial");
    size_t n_sl = 0;
    for (int64_t b = 0; b < nb; b++)
        for (int s = 0; s < plan->n_stages; s++) {
            const pl_span *sp = pl_timing_span(res->timing, b, s);
            if (sp->start_ns == 0 && sp->end_ns == 0) continue; /* not timed */
            sl[n_sl++] = (pl__slice){sp->start_ns, sp->end_ns, plan->stages[s].stream, s, b};
        }
    FILE *f = fopen(tmp, "w");
    if (!f) {
        pl_error_set(err, PL_EIO, "error: cannot write the trace '%s': %s", tmp, strerror(errno));
        free(sl);
        free(tid_of);
        free(ticks);
        free(tmp);
        return PL_EIO;
    }
    fprintf(f, "{\"displayTimeUnit\": \"ns\", \"traceEvents\": [\n");
    char title[256];
    char cut[96] = "";
    if (nb < res->batches_done)
        snprintf(cut, sizeof cut, ", first %lld of %lld batches", (long long)nb,
                 (long long)res->batches_done);
    snprintf(title, sizeof title, "pipectl %s (%s%s, depth %d%s)", spec->name,
             res->executor ? res->executor : "?", res->graphs ? ", CUDA Graphs" : "",
             res->depth > 0 ? res->depth : plan->depth, cut);
    bool bad = false;
    pl__event(f,
              json_pack("{s:s, s:s, s:i, s:{s:o}}", "name", "process_name", "ph", "M", "pid", 1,
                        "args", "name", pl_json_str(title)),
              true, &bad);
    pl__write_events(f, plan, res, nb, sl, n_sl, tid_of, ticks, &bad);
    fprintf(f, "\n]}\n");
    free(sl);
    free(tid_of);
    free(ticks);
    bool ok = !ferror(f) && !bad;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        pl_error_set(err, PL_EIO, "error: cannot write the trace '%s': %s", path, strerror(errno));
        remove(tmp);
        free(tmp);
        return PL_EIO;
    }
    free(tmp);
    return PL_OK;
}
