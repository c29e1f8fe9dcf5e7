/* pl_depth: the choice of `depth: auto` from the calibration batches' spans (the rule is in
 * pl_depth.h). */
#include "pl_depth.h"
#include "pl_timing.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_run.h"
#include "pl_engines.h"

int64_t pl_depth_calib_batches(const pl_plan *plan)
{
    if (!plan->depth_auto) return 0;
    return plan->batches < PL_DEPTH_CALIB_BATCHES ? plan->batches : PL_DEPTH_CALIB_BATCHES;
}

static int pl__cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static int pl__cmp_iv(const void *a, const void *b)
{
    const pl_span *x = a, *y = b;
    return x->start_ns < y->start_ns ? -1 : x->start_ns > y->start_ns;
}

/* The logged span of (batch, stage); {0, 0} (not timed) outside the log. */
static pl_span pl__span(const pl_timing *t, int64_t b, int st)
{
    const pl_span *sp = pl_timing_span(t, b, st);
    return sp ? *sp : (pl_span){0, 0};
}

/* Median over batches [from, n) of the union of resource e's spans in each batch; `tmp` has room
 * for n - from values. */
static double pl__engine_median(const pl_plan *plan, const pl_timing *t, int64_t from, int64_t n,
                                const pl_engine_stats *e, int64_t *tmp)
{
    int ns = plan->n_stages, k = 0;
    pl_span *iv = malloc((size_t)(ns > 0 ? ns : 1) * sizeof *iv);
    if (!iv) return 0;
    for (int64_t b = from; b < n; b++) {
        int m = 0;
        for (int s = 0; s < ns; s++) {
            const pl_plan_stage *ps = &plan->stages[s];
            bool on =
                ps->engine == e->engine && (e->engine != PL_ENGINE_HOST || ps->stream == e->stream);
            pl_span sp = pl__span(t, b, s);
            if (on && !(sp.start_ns == 0 && sp.end_ns == 0)) iv[m++] = sp;
        }
        if (m == 0) continue;
        qsort(iv, (size_t)m, sizeof *iv, pl__cmp_iv);
        int64_t busy = 0, a = iv[0].start_ns, z = iv[0].end_ns;
        for (int i = 1; i < m; i++) {
            if (iv[i].start_ns > z) {
                busy += z - a;
                a = iv[i].start_ns;
            }
            if (iv[i].end_ns > z) z = iv[i].end_ns;
        }
        tmp[k++] = busy + (z - a);
    }
    free(iv);
    if (k == 0) return 0;
    qsort(tmp, (size_t)k, sizeof *tmp, pl__cmp_i64);
    return (double)tmp[(k - 1) / 2] * 1e-9;
}

static const char *pl__ms(double s, char *buf, size_t cap)
{
    if (s >= 1e-3)
        snprintf(buf, cap, "%.1f ms", s * 1e3);
    else
        snprintf(buf, cap, "%.1f us", s * 1e6);
    return buf;
}

/* "; budget allows 5: device 1.2 GiB/slot of 8.0 GiB" and the like. */
static void pl__cap_text(const pl_plan *plan, char *buf, size_t cap)
{
    const pl_spec *spec = plan->spec;
    const pl_budget *b = &spec->run.budget;
    char h1[32], h2[32];
    if (strncmp(plan->cap_why, "memory_budget.", 14) == 0) {
        bool dev = strcmp(plan->cap_why, "memory_budget.device") == 0;
        snprintf(buf, cap, "budget allows %d: %s %s/slot of %s", plan->depth_cap,
                 dev ? "device" : "pinned host",
                 pl_bytes_str(dev ? plan->device_per_slot : plan->host_per_slot, h1, sizeof h1),
                 pl_bytes_str(dev ? b->device : b->host_pinned, h2, sizeof h2));
        if ((dev ? plan->device_persistent : plan->host_persistent) > 0) {
            size_t n = strlen(buf);
            snprintf(
                buf + n, cap - n, " less %s persistent",
                pl_bytes_str(dev ? plan->device_persistent : plan->host_persistent, h1, sizeof h1));
        }
    } else if (strcmp(plan->cap_why, "no memory_budget") == 0) {
        snprintf(buf, cap, "no memory_budget: at most %d", plan->depth_cap);
    } else if (strcmp(plan->cap_why, "the batches") == 0) {
        snprintf(buf, cap, "at most %d: the run has %lld batches", plan->depth_cap,
                 (long long)plan->batches);
    } else {
        snprintf(buf, cap, "budget allows %d (PL_MAX_DEPTH)", plan->depth_cap);
    }
}

static void pl__init(const pl_plan *plan, pl_depth_choice *out)
{
    memset(out, 0, sizeof *out);
    out->on = true;
    out->calib_batches = pl_depth_calib_batches(plan);
    out->calib_depth = plan->depth;
    out->depth = plan->depth;
    out->cap = plan->depth_cap;
    out->cap_why = plan->cap_why;
}

void pl_depth_no_choice(const pl_plan *plan, int64_t done, pl_depth_choice *out)
{
    pl__init(plan, out);
    if (done >= plan->batches)
        snprintf(out->why, sizeof out->why,
                 "depth auto: %d (the run's %lld batches were all calibration batches)", out->depth,
                 (long long)plan->batches);
    else
        snprintf(out->why, sizeof out->why,
                 "depth auto: %d (the run ended after %lld of its %lld calibration batches)",
                 out->depth, (long long)done, (long long)out->calib_batches);
}

void pl_depth_choose(const pl_plan *plan, const pl_timing *tlog, int64_t n, pl_depth_choice *out)
{
    pl__init(plan, out);
    out->chosen = true;
    char capt[160], b1[32], b2[32], b3[32];
    pl__cap_text(plan, capt, sizeof capt);
    int ns = plan->n_stages;
    int64_t from = n >= 2 ? 1 : 0; /* batch 0 is warm-up when another one is measured */
    int64_t m = n - from;
    int64_t *dur = m > 0 ? calloc((size_t)m, sizeof *dur) : NULL;
    double *med = calloc((size_t)(ns > 0 ? ns : 1), sizeof *med);
    double *fin = calloc((size_t)(ns > 0 ? ns : 1), sizeof *fin);
    int *sprev = malloc((size_t)(ns > 0 ? ns : 1) * sizeof *sprev);
    pl_engine_stats *eng = pl_engines_new(plan);
    int be = -1, n_eng = 0, k = 0;
    double lat = 0, hold = 0;
    if (dur && med && fin && sprev && eng && ns > 0) {
        /* Each stage's time: the median of its measured spans. */
        for (int st = 0; st < ns; st++) {
            int64_t c = 0;
            for (int64_t b = from; b < n; b++) {
                pl_span sp = pl__span(tlog, b, st);
                if (sp.start_ns == 0 && sp.end_ns == 0) continue; /* not timed */
                dur[c++] = sp.end_ns - sp.start_ns;
            }
            if (c == 0) continue;
            qsort(dur, (size_t)c, sizeof *dur, pl__cmp_i64);
            med[st] = (double)dur[(c - 1) / 2] * 1e-9;
            k++;
        }
        /* One batch's latency: the critical path of those times through the batch's DAG (its
         * edges and stream order), not the spans' first-to-last, which at depth 1 still include
         * waiting for the previous batch's buffers (slot reuse is per buffer). */
        for (int st = 0; st < ns; st++)
            sprev[st] = -1;
        for (int q = 0; q < plan->n_streams; q++)
            for (int j = 1; j < plan->streams[q].n_stages; j++)
                sprev[plan->streams[q].stages[j]] = plan->streams[q].stages[j - 1];
        for (int i = 0; i < ns; i++) {
            int v = plan->order[i];
            const pl_plan_stage *ps = &plan->stages[v];
            double t = sprev[v] >= 0 ? fin[sprev[v]] : 0;
            for (int j = 0; j < ps->n_preds; j++)
                if (fin[ps->preds[j]] > t) t = fin[ps->preds[j]];
            fin[v] = t + med[v];
            if (fin[v] > lat) lat = fin[v];
        }
        /* How long each per-batch buffer is in use on that schedule: from its first accessor's
         * start to its last accessor's end. A slot is reused buffer by buffer (the plan's slot
         * reuse deps), so this, not the whole latency, is what the copies must cover. */
        const pl_spec *spec = plan->spec;
        for (int b = 0; b < spec->n_buffers; b++) {
            if (spec->buffers[b].persistent) continue;
            double lo = -1, hi = -1;
            for (int st = 0; st < ns; st++) {
                const pl_stage *sg = &spec->stages[st];
                bool uses = false;
                for (int j = 0; j < sg->n_reads && !uses; j++)
                    uses = sg->reads[j].index == b;
                for (int j = 0; j < sg->n_writes && !uses; j++)
                    uses = sg->writes[j].index == b;
                if (!uses) continue;
                double a = fin[st] - med[st];
                if (lo < 0 || a < lo) lo = a;
                if (fin[st] > hi) hi = fin[st];
            }
            if (lo >= 0 && hi - lo > hold) hold = hi - lo;
        }
        /* The bound: each engine's busy time per batch as the report counts it (the union of its
         * stages' spans: a device engine's streams share it, a host stream is a worker), the
         * median over the measured batches, like the stage times. Its resources, in the report's
         * order and names (pl_engines_measure; its per-batch figures are replaced below). */
        pl_run_result r;
        memset(&r, 0, sizeof r);
        r.timing = (pl_timing *)tlog; /* read only */
        r.batches_done = n;
        r.n_stages = ns;
        r.wall_ns = 1;
        be = pl_engines_measure(plan, &r, eng, &n_eng);
        double best = -1;
        for (int e = 0; be >= 0 && e < n_eng; e++) {
            eng[e].per_batch_s = pl__engine_median(plan, tlog, from, n, &eng[e], dur);
            if (eng[e].per_batch_s > best) {
                best = eng[e].per_batch_s;
                be = e;
            }
        }
    }
    if (k > 0 && be >= 0 && eng[be].per_batch_s > 0) {
        out->measured = m;
        out->latency_s = lat;
        out->hold_s = hold;
        out->period_s = eng[be].per_batch_s;
        snprintf(out->engine, sizeof out->engine, "%s", eng[be].name);
        double ratio = out->hold_s / out->period_s;
        int need = (int)ceil(ratio - 0.25);
        if (need < 1) need = 1;
        if (need > PL_MAX_DEPTH) need = PL_MAX_DEPTH;
        out->needed = need + 1 > PL_MAX_DEPTH ? PL_MAX_DEPTH : need + 1;
        out->depth = out->needed;
        if (out->depth > out->cap) {
            out->depth = out->cap;
            out->capped = true;
        }
        snprintf(out->why, sizeof out->why,
                 "depth auto: %d (bound engine %s %s/batch, one batch's latency %s, a slot's "
                 "buffers held %s -> %d; %s)",
                 out->depth, out->engine, pl__ms(out->period_s, b1, sizeof b1),
                 pl__ms(out->latency_s, b2, sizeof b2), pl__ms(out->hold_s, b3, sizeof b3),
                 out->needed, capt);
    } else {
        /* Nothing measured (no stage timed): the documented default depth, within the cap. */
        out->depth = plan->spec->run.depth < out->cap ? plan->spec->run.depth : out->cap;
        if (out->depth < 1) out->depth = 1;
        snprintf(out->why, sizeof out->why,
                 "depth auto: %d (no stage times from the calibration batches: the default "
                 "depth; %s)",
                 out->depth, capt);
    }
    free(dur);
    free(med);
    free(fin);
    free(sprev);
    free(eng);
}
