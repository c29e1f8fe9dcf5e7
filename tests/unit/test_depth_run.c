/* test_depth_run: the driver of a run's phases (runtime/exec/pl_depth_run.c) over a fake backend
 * that runs batches by recording made-up spans: calibration, growth and the rest; the same depth
 * chosen; stops before, during and after the calibration and after the growth; failures during
 * the calibration and of the growth; a calibration that is the whole run; a fixed depth. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "pl_depth_run.h"
#include "pl_parse.h"
#include "pl_plan.h"
#include "pl_test.h"

/* gen (host0) -> up (h2d) -> k (compute) -> down (d2h) -> out (host1): the stage times below make
 * upload, kernel and download balanced, so the calibration chooses 4 (test_depth). */
static const char *pl__yaml = "pipeline: t\n"
                              "run: {batches: 100, depth: auto%s}\n"
                              "buffers:\n"
                              "  xh: {where: host, dtype: f32, shape: [1024]}\n"
                              "  xd: {where: device, dtype: f32, shape: [1024]}\n"
                              "  yh: {where: host, dtype: f32, shape: [1024]}\n"
                              "stages:\n"
                              "  - {name: gen, kind: source, to: xh}\n"
                              "  - {name: up, kind: h2d, from: xh, to: xd}\n"
                              "  - {name: k, kind: kernel, op: busy, duration_us: 1, reads: [xd]}\n"
                              "  - {name: down, kind: d2h, from: xd, to: yh, after: [k]}\n"
                              "  - {name: out, kind: sink, from: yh}\n";
static const double pl__us[5] = {10, 5000, 5000, 5000, 10}; /* in plan order */

/* The fake executor: batches run one after another, each recording its stages' spans; what the
 * driver asked of it is written to `calls`. */
typedef struct fake {
    const pl_plan *plan; /* the current phase's */
    pl_timing *log;
    volatile sig_atomic_t stop;
    int64_t done;
    int64_t stop_after; /* -1, or: the stop comes once this batch is done (seen by the phase) */
    bool stop_late;     /* the stop comes after the phase's last batch, unseen by the phase */
    int64_t fail_at;    /* -1, or: this batch fails */
    bool grow_fails;
    int on_depth_calls;
    pl_depth_choice heard; /* what on_depth was given */
    char calls[256];
} fake;

__attribute__((format(printf, 2, 3))) static void said(fake *f, const char *fmt, ...)
{
    size_t n = strlen(f->calls);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->calls + n, sizeof f->calls - n, fmt, ap);
    va_end(ap);
}

static pl_status f_run(void *user, int64_t limit, int64_t *done, bool *stopped, pl_error *err)
{
    fake *f = user;
    said(f, "run %lld..%lld; ", (long long)f->done, (long long)limit);
    pl_status st = PL_OK;
    int64_t t = 1000 + f->done * 100000000;
    for (int64_t b = f->done; b < limit && b < f->plan->batches; b++) {
        if (b == f->fail_at) {
            st = pl_error_set(err, PL_ERUNTIME, "stage 'k', batch %lld: boom", (long long)b);
            break;
        }
        for (int i = 0; i < f->plan->n_stages; i++) {
            int64_t d = (int64_t)(pl__us[i] * 1000);
            pl_timing_record(f->log, f->plan->order[i], b, (pl_span){t, t + d});
            t += d + 500;
        }
        f->done = b + 1;
        if (b == f->stop_after) {
            f->stop = 1;
            *stopped = true;
            break;
        }
    }
    if (f->stop_late) f->stop = 1;
    *done = f->done;
    return st;
}

static pl_status f_grow(void *user, const pl_plan *plan, pl_error *err)
{
    fake *f = user;
    said(f, "grow %d; ", plan->depth);
    if (f->grow_fails) return pl_error_set(err, PL_ENOMEM, "error: out of memory growing");
    f->plan = plan;
    return PL_OK;
}

static pl_status f_restart(void *user, const pl_plan *plan, int64_t first, pl_error *err)
{
    (void)err;
    fake *f = user;
    said(f, "restart %lld at %lld; ", (long long)plan->depth, (long long)first);
    CHECK(plan == f->plan);
    CHECK_EQ_INT(first, f->done);
    return PL_OK;
}

static void f_on_depth(void *user, const pl_depth_choice *c)
{
    fake *f = user;
    f->on_depth_calls++;
    f->heard = *c;
    said(f, "depth %d; ", c->depth);
}

typedef struct outcome {
    pl_status st;
    pl_error err;
    pl_run_result res;
    fake f;
    bool grown; /* the driver compiled a plan at the chosen depth */
} outcome;

/* Runs the driver over a fresh fake on the plan of `budget`, `batches` (0: the spec's) and
 * `depth` (PL_DEPTH_AUTO or a fixed one); `setup` adjusts the fake first. */
static void run(const char *budget, int64_t batches, int depth, void (*setup)(fake *), outcome *o)
{
    char text[2048];
    snprintf(text, sizeof text, pl__yaml, budget);
    pl_spec *spec = NULL;
    pl_plan *plan = NULL, *grown = NULL;
    if (pl_yaml_load_string("t.yaml", text, strlen(text), &spec, &o->err) != PL_OK ||
        pl_spec_check(spec, &o->err) != PL_OK ||
        pl_plan_compile_with(spec, batches, depth, &plan, &o->err) != PL_OK) {
        fprintf(stderr, "%s\n", o->err.msg);
        exit(1);
    }
    memset(&o->f, 0, sizeof o->f);
    fake *f = &o->f;
    f->plan = plan;
    f->stop_after = f->fail_at = -1;
    if (setup) setup(f);
    if (pl_timing_new(plan, 2 * (plan->depth_cap > plan->depth ? plan->depth_cap : plan->depth) + 2,
                      pl_depth_calib_batches(plan), &f->log, &o->err) != PL_OK) {
        fprintf(stderr, "%s\n", o->err.msg);
        exit(1);
    }
    pl_run_cfg cfg;
    pl_run_cfg_init(&cfg);
    cfg.stop = &f->stop;
    cfg.on_depth = f_on_depth;
    cfg.depth_user = f;
    memset(&o->res, 0, sizeof o->res);
    o->res.batch_clock = (pl_batch_clock){plan->depth, -1, -1, 0};
    pl_error_clear(&o->err);
    pl_depth_backend be = {f, f_run, f_grow, f_restart};
    o->st = pl_depth_run(plan, &cfg, f->log, &be, &o->res, &grown, &o->err);
    o->grown = grown != NULL;
    CHECK(!grown || grown->depth == o->res.depth_auto.depth);
    f->plan = NULL;
    pl_timing_free(f->log);
    f->log = NULL;
    pl_plan_free(grown);
    pl_plan_free(plan);
    pl_spec_free(spec);
}

static void stop_at_start(fake *f)
{
    f->stop = 1;
}
static void stop_in_calib(fake *f)
{
    f->stop_after = 1;
}
static void stop_after_calib(fake *f)
{
    f->stop_late = true;
}
static void stop_later(fake *f)
{
    f->stop_after = 9;
}
static void fail_in_calib(fake *f)
{
    f->fail_at = 2;
}
static void fail_later(fake *f)
{
    f->fail_at = 50;
}
static void grow_fails(fake *f)
{
    f->grow_fails = true;
}

int main(void)
{
    outcome o;
    /* The calibration at depth 1, the choice, the ring grown to 4, the rest from batch 4. */
    run("", 0, PL_DEPTH_AUTO, NULL, &o);
    CHECK_EQ_INT(o.st, PL_OK);
    CHECK_STR(o.f.calls, "run 0..4; depth 4; grow 4; restart 4 at 4; run 4..100; ");
    CHECK(o.grown);
    CHECK_EQ_INT(o.res.batches_done, 100);
    CHECK_EQ_INT(o.res.depth, 4);
    CHECK(o.res.depth_auto.on && o.res.depth_auto.chosen && o.res.depth_auto.calib_batches == 4);
    CHECK_EQ_INT(o.res.depth_auto.calib_depth, 1);
    CHECK_EQ_INT(o.f.on_depth_calls, 1);
    CHECK(o.f.heard.chosen && o.f.heard.depth == 4);
    CHECK_STR(o.f.heard.engine, "h2d");
    /* The steady state is measured from batch calibration + depth. */
    CHECK_EQ_INT(o.res.batch_clock.mark_b, 8);
    CHECK_EQ_INT(o.res.batch_clock.mark_ns, -1);

    /* The budget allows one slot: the calibration depth is chosen; the backend still grows (to
     * the same plan) and restarts. */
    run(", memory_budget: {device: 4KiB}", 0, PL_DEPTH_AUTO, NULL, &o);
    CHECK_EQ_INT(o.st, PL_OK);
    CHECK_STR(o.f.calls, "run 0..4; depth 1; grow 1; restart 1 at 4; run 4..100; ");
    CHECK(!o.grown && o.res.depth_auto.chosen && o.res.depth_auto.capped);
    CHECK_EQ_INT(o.res.depth, 1);
    CHECK_EQ_INT(o.res.batch_clock.mark_b, 5);

    /* Stopped before the run: nothing runs, no choice. */
    run("", 0, PL_DEPTH_AUTO, stop_at_start, &o);
    CHECK_EQ_INT(o.st, PL_EINTR);
    CHECK_STR(o.err.msg, "error: interrupted after 0 of 100 batches");
    CHECK_STR(o.f.calls, "run 0..0; depth 1; ");
    CHECK_EQ_INT(o.res.batches_done, 0);
    CHECK(o.res.depth_auto.on && !o.res.depth_auto.chosen);
    CHECK_STR(o.res.depth_auto.why, "depth auto: 1 (the run ended after 0 of its 4 calibration "
                                    "batches)");

    /* Stopped during the calibration: the batches started finish, nothing grows. */
    run("", 0, PL_DEPTH_AUTO, stop_in_calib, &o);
    CHECK_EQ_INT(o.st, PL_EINTR);
    CHECK_STR(o.err.msg, "error: interrupted after 2 of 100 batches");
    CHECK_STR(o.f.calls, "run 0..4; depth 1; ");
    CHECK_EQ_INT(o.res.batches_done, 2);
    CHECK_EQ_INT(o.res.depth, 1);
    CHECK_EQ_INT(o.f.on_depth_calls, 1);
    CHECK(!o.f.heard.chosen);
    CHECK_STR(o.res.depth_auto.why, "depth auto: 1 (the run ended after 2 of its 4 calibration "
                                    "batches)");
    CHECK_EQ_INT(o.res.batch_clock.mark_b, 1);

    /* Stopped once the calibration's batches were done: no batch would run at a new depth, so
     * the ring does not grow. */
    run("", 0, PL_DEPTH_AUTO, stop_after_calib, &o);
    CHECK_EQ_INT(o.st, PL_EINTR);
    CHECK_STR(o.f.calls, "run 0..4; depth 1; ");
    CHECK_EQ_INT(o.res.batches_done, 4);
    CHECK(!o.res.depth_auto.chosen);
    CHECK_EQ_INT(o.res.depth, 1);

    /* Stopped after the growth: the depth stays chosen. */
    run("", 0, PL_DEPTH_AUTO, stop_later, &o);
    CHECK_EQ_INT(o.st, PL_EINTR);
    CHECK_STR(o.err.msg, "error: interrupted after 10 of 100 batches");
    CHECK_STR(o.f.calls, "run 0..4; depth 4; grow 4; restart 4 at 4; run 4..100; ");
    CHECK(o.res.depth_auto.chosen);
    CHECK_EQ_INT(o.res.depth, 4);

    /* A failure in the calibration: its error, the batches before it kept, no choice. */
    run("", 0, PL_DEPTH_AUTO, fail_in_calib, &o);
    CHECK_EQ_INT(o.st, PL_ERUNTIME);
    CHECK_STR(o.err.msg, "stage 'k', batch 2: boom");
    CHECK_STR(o.f.calls, "run 0..4; depth 1; ");
    CHECK_EQ_INT(o.res.batches_done, 2);
    CHECK(!o.res.depth_auto.chosen);
    CHECK_EQ_INT(o.res.depth, 1);

    /* A failure after the growth. */
    run("", 0, PL_DEPTH_AUTO, fail_later, &o);
    CHECK_EQ_INT(o.st, PL_ERUNTIME);
    CHECK_STR(o.err.msg, "stage 'k', batch 50: boom");
    CHECK_EQ_INT(o.res.batches_done, 50);
    CHECK_EQ_INT(o.res.depth, 4);

    /* The ring cannot grow: the run ends after the calibration batches, which count. */
    run("", 0, PL_DEPTH_AUTO, grow_fails, &o);
    CHECK_EQ_INT(o.st, PL_ENOMEM);
    CHECK_STR(o.err.msg, "error: out of memory growing");
    CHECK_STR(o.f.calls, "run 0..4; depth 4; grow 4; ");
    CHECK_EQ_INT(o.res.batches_done, 4);
    CHECK_EQ_INT(o.res.depth, 1);
    CHECK(o.res.depth_auto.chosen);
    CHECK_EQ_INT(o.res.batch_clock.mark_b, 1);

    /* A run no longer than the calibration: one phase, no choice, no stop. */
    run("", 3, PL_DEPTH_AUTO, NULL, &o);
    CHECK_EQ_INT(o.st, PL_OK);
    CHECK_STR(o.f.calls, "run 0..3; depth 1; ");
    CHECK_EQ_INT(o.res.batches_done, 3);
    CHECK(o.res.depth_auto.on && !o.res.depth_auto.chosen);
    CHECK_STR(o.res.depth_auto.why,
              "depth auto: 1 (the run's 3 batches were all calibration batches)");

    /* A fixed depth: one phase of every batch, no depth record. */
    run("", 0, 3, NULL, &o);
    CHECK_EQ_INT(o.st, PL_OK);
    CHECK_STR(o.f.calls, "run 0..100; ");
    CHECK_EQ_INT(o.res.batches_done, 100);
    CHECK_EQ_INT(o.res.depth, 3);
    CHECK(!o.res.depth_auto.on);
    CHECK_EQ_INT(o.f.on_depth_calls, 0);
    CHECK_EQ_INT(o.res.batch_clock.mark_b, 3);
    /* ...stopped part way. */
    run("", 0, 3, stop_later, &o);
    CHECK_EQ_INT(o.st, PL_EINTR);
    CHECK_EQ_INT(o.res.batches_done, 10);
    PL_TEST_DONE();
}
