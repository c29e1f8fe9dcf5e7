/* pl_timing: stage spans folded into fixed-size statistics as batches complete (pl_timing.h). */
#include "pl_timing.h"

#include <stdlib.h>
#include <string.h>

pl_status pl_timing_new(const pl_plan *plan, int window, int64_t keep, pl_timing **out,
                        pl_error *err)
{
    *out = NULL;
    pl_timing *t = calloc(1, sizeof *t);
    int n = plan->n_stages;
    size_t ns = (size_t)(n > 0 ? n : 1);
    if (window < 1) window = 1;
    if (keep < 0) keep = 0;
    if (keep > plan->batches) keep = plan->batches;
    if (!t) goto oom;
    t->n_stages = n;
    t->window = window;
    t->keep = keep;
    pthread_mutex_init(&t->mu, NULL);
    t->hist = calloc(ns, sizeof *t->hist);
    t->res_of = calloc(ns, sizeof *t->res_of);
    t->res = calloc((size_t)(PL_ENGINE_COUNT + plan->n_streams), sizeof *t->res);
    t->rows = calloc((size_t)window * ns, sizeof *t->rows);
    t->row_b = malloc((size_t)window * sizeof *t->row_b);
    t->row_n = calloc((size_t)window, sizeof *t->row_n);
    if (keep > 0 && (size_t)keep > SIZE_MAX / sizeof *t->kept / ns) goto oom;
    t->kept = keep > 0 ? calloc((size_t)keep * ns, sizeof *t->kept) : NULL;
    t->body_off = calloc(ns + 1, sizeof *t->body_off);
    t->body = calloc(ns, sizeof *t->body);
    if (!t->hist || !t->res_of || !t->res || !t->rows || !t->row_b || !t->row_n ||
        (keep > 0 && !t->kept) || !t->body_off || !t->body)
        goto oom;
    for (int i = 0; i < plan->n_loops; i++)
        t->body_off[plan->loops[i].stage + 1] = plan->loops[i].n_body;
    for (int s = 0; s < n; s++)
        t->body_off[s + 1] += t->body_off[s];
    for (int i = 0; i < plan->n_loops; i++)
        memcpy(&t->body[t->body_off[plan->loops[i].stage]], plan->loops[i].body,
               (size_t)plan->loops[i].n_body * sizeof *t->body);
    for (int r = 0; r < window; r++)
        t->row_b[r] = -1;
    /* Resources: device engines that have stages (pl_engine order), then host streams. */
    int dev_res[PL_ENGINE_COUNT];
    for (int e = 0; e < PL_ENGINE_COUNT; e++) {
        dev_res[e] = -1;
        if (e == PL_ENGINE_HOST) continue;
        for (int s = 0; s < n; s++)
            if ((int)plan->stages[s].engine == e && !plan->stages[s].body) {
                t->res[t->n_res] = (pl_timing_res){.engine = (pl_engine)e, .stream = -1};
                dev_res[e] = t->n_res++;
                break;
            }
    }
    int *host_res = calloc((size_t)(plan->n_streams > 0 ? plan->n_streams : 1), sizeof *host_res);
    if (!host_res) goto oom;
    for (int k = 0; k < plan->n_streams; k++) {
        host_res[k] = -1;
        if (plan->streams[k].engine != PL_ENGINE_HOST) continue;
        t->res[t->n_res] = (pl_timing_res){.engine = PL_ENGINE_HOST, .stream = k};
        host_res[k] = t->n_res++;
    }
    for (int r = 0; r < t->n_res; r++)
        t->res[r].last_b = -1;
    for (int s = 0; s < n; s++) {
        /* A body stage runs inside its loop, on the loop's resource. */
        const pl_plan_stage *ps = &plan->stages[s];
        const pl_plan_stage *on = ps->body ? &plan->stages[plan->loops[ps->loop].stage] : ps;
        pl_hist_init(&t->hist[s]);
        t->res_of[s] = on->engine == PL_ENGINE_HOST ? host_res[on->stream] : dev_res[on->engine];
        if (t->res_of[s] >= 0) t->res[t->res_of[s]].n_stages++;
    }
    free(host_res);
    *out = t;
    return PL_OK;
oom:
    pl_timing_free(t);
    return pl_error_set(err, PL_ENOMEM,
                        "error: out of memory setting up the run's timing (%d stages)", n);
}

void pl_timing_free(pl_timing *t)
{
    if (!t) return;
    for (int s = 0; t->hist && s < t->n_stages; s++)
        pl_hist_fini(&t->hist[s]);
    for (int r = 0; t->res && r < t->n_res; r++)
        free(t->res[r].busy.iv);
    if (t->res) pthread_mutex_destroy(&t->mu);
    free(t->hist);
    free(t->res_of);
    free(t->res);
    free(t->rows);
    free(t->row_b);
    free(t->row_n);
    free(t->kept);
    free(t->body_off);
    free(t->body);
    free(t);
}

/* Adds [a, z) to the union. Spans arrive nearly in time order (batch after batch), so the search
 * starts from the latest interval. */
static void pl__busy_add(pl_busy *u, int64_t a, int64_t z)
{
    if (a < u->frontier) a = u->frontier; /* the closed part is counted already */
    if (z <= a) return;
    int hi = u->n; /* intervals [hi, n) start after z */
    while (hi > 0 && u->iv[hi - 1].start_ns > z)
        hi--;
    int lo = hi; /* intervals [lo, hi) touch [a, z] */
    while (lo > 0 && u->iv[lo - 1].end_ns >= a)
        lo--;
    if (lo < hi) {
        if (u->iv[lo].start_ns < a) a = u->iv[lo].start_ns;
        if (u->iv[hi - 1].end_ns > z) z = u->iv[hi - 1].end_ns;
        u->iv[lo] = (pl_span){a, z};
        memmove(&u->iv[lo + 1], &u->iv[hi], (size_t)(u->n - hi) * sizeof *u->iv);
        u->n -= hi - lo - 1;
        return;
    }
    if (u->n == u->cap && u->cap < PL_BUSY_OPEN) {
        int nc = u->cap ? 2 * u->cap : 4;
        pl_span *iv = realloc(u->iv, (size_t)nc * sizeof *iv);
        if (iv) {
            u->iv = iv;
            u->cap = nc;
        }
    }
    if (u->n == u->cap) { /* full (or out of memory): close the earliest */
        if (u->n == 0) {  /* no room at all: count it, exact for spans in time order */
            u->closed_ns += z - a;
            u->frontier = z;
            return;
        }
        if (lo == 0) { /* before every open interval and after the frontier: disjoint */
            u->closed_ns += z - a;
            return;
        }
        u->closed_ns += u->iv[0].end_ns - u->iv[0].start_ns;
        u->frontier = u->iv[0].end_ns;
        memmove(&u->iv[0], &u->iv[1], (size_t)(u->n - 1) * sizeof *u->iv);
        u->n--;
        lo--;
    }
    memmove(&u->iv[lo + 1], &u->iv[lo], (size_t)(u->n - lo) * sizeof *u->iv);
    u->iv[lo] = (pl_span){a, z};
    u->n++;
}

int64_t pl_timing_busy_ns(const pl_timing *t, int r)
{
    const pl_busy *u = &t->res[r].busy;
    int64_t b = u->closed_ns;
    for (int i = 0; i < u->n; i++)
        b += u->iv[i].end_ns - u->iv[i].start_ns;
    return b;
}

static bool pl__timed(const pl_span *sp)
{
    return sp->start_ns != 0 || sp->end_ns != 0;
}

/* One span into the statistics; `count`: batch b counts as timed on its resource (not for a
 * span that comes after its batch was folded: that batch was counted then). */
static void pl__fold_span(pl_timing *t, int s, int64_t b, const pl_span *sp, bool count)
{
    if (!pl__timed(sp)) return;
    pl_hist_add(&t->hist[s], sp->end_ns - sp->start_ns);
    int r = t->res_of[s];
    if (r < 0) return;
    pl_timing_res *x = &t->res[r];
    pl__busy_add(&x->busy, sp->start_ns, sp->end_ns);
    if (count && x->last_b != b) {
        x->timed++;
        x->last_b = b;
    }
}

static void pl__fold_row(pl_timing *t, int row)
{
    int64_t b = t->row_b[row];
    pl_span *sp = &t->rows[(size_t)row * (size_t)t->n_stages];
    for (int s = 0; s < t->n_stages; s++)
        pl__fold_span(t, s, b, &sp[s], true);
    if (b < t->keep)
        memcpy(&t->kept[(size_t)b * (size_t)t->n_stages], sp, (size_t)t->n_stages * sizeof *sp);
    memset(sp, 0, (size_t)t->n_stages * sizeof *sp);
    t->row_n[row] = 0;
    t->folded++;
}

static void pl__record(pl_timing *t, int stage, int64_t batch, pl_span sp)
{
    int row = (int)(batch % t->window);
    if (t->row_b[row] > batch) {
        /* Its row was taken by a later batch (below): the span goes straight in. */
        pl__fold_span(t, stage, batch, &sp, false);
        if (batch < t->keep) t->kept[(size_t)batch * (size_t)t->n_stages + (size_t)stage] = sp;
    } else {
        if (t->row_b[row] < batch) {
            /* A stage ran `window` batches ahead of another one (stages that share no buffer
             * are not held back by slots): the older batch is folded as it is, and the spans it
             * still reports go straight in. Counts stay exact; only a span of a batch that never
             * completes could be counted. */
            if (t->row_n[row] > 0) pl__fold_row(t, row);
            t->row_b[row] = batch;
        }
        t->rows[(size_t)row * (size_t)t->n_stages + (size_t)stage] = sp;
        if (++t->row_n[row] == t->n_stages) pl__fold_row(t, row);
    }
}

void pl_timing_record(pl_timing *t, int stage, int64_t batch, pl_span sp)
{
    if (!t || stage < 0 || stage >= t->n_stages || batch < 0) return;
    pthread_mutex_lock(&t->mu);
    pl__record(t, stage, batch, sp);
    /* A loop's body stages ran inside it: they report with it, untimed. */
    for (int i = t->body_off[stage]; i < t->body_off[stage + 1]; i++)
        pl__record(t, t->body[i], batch, (pl_span){0, 0});
    pthread_mutex_unlock(&t->mu);
}

const pl_span *pl_timing_span(const pl_timing *t, int64_t batch, int stage)
{
    if (!t || batch < 0 || batch >= t->keep || stage < 0 || stage >= t->n_stages) return NULL;
    return &t->kept[(size_t)batch * (size_t)t->n_stages + (size_t)stage];
}
