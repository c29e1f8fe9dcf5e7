/* test_depth: depth: auto's choice (runtime/exec/pl_depth.c) from made-up calibration spans, under
 * several stage timings and memory budgets; the size parser; the budget's cap and check. */
#include <stdlib.h>
#include <string.h>

#include "pl_depth.h"
#include "pl_timing.h"
#include "pl_exec.h"
#include "pl_parse.h"
#include "pl_plan.h"
#include "pl_test.h"

/* gen (host0) -> up (h2d) -> k (compute) -> down (d2h) -> out (host1); per-slot: 4 KiB device,
 * 8 KiB host. */
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

static pl_spec *load(const char *budget, pl_error *err)
{
    char text[2048];
    snprintf(text, sizeof text, pl__yaml, budget);
    pl_spec *spec = NULL;
    if (pl_yaml_load_string("t.yaml", text, strlen(text), &spec, err) != PL_OK) return NULL;
    if (pl_spec_check(spec, err) != PL_OK) {
        pl_spec_free(spec);
        return NULL;
    }
    return spec;
}

/* Spans of n batches run one after another (depth 1): each stage of batch b takes us[stage]
 * microseconds (plan order is gen, up, k, down, out), batch 0 `warm` times slower. */
/* Made-up spans of n batches run one after another, recorded as a run records them. */
static pl_timing *spans_of(const pl_plan *p, int64_t n, const double us[5], double warm)
{
    pl_timing *tm = NULL;
    pl_error err;
    if (pl_timing_new(p, (int)n + 2, n, &tm, &err) != PL_OK) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
    int64_t t = 1000;
    for (int64_t b = 0; b < n; b++)
        for (int i = 0; i < p->n_stages; i++) {
            int s = p->order[i];
            int64_t d = (int64_t)(us[i] * 1000 * (b == 0 ? warm : 1));
            pl_timing_record(tm, s, b, (pl_span){t, t + d});
            t += d + 500; /* a 0.5 us hand-off between stages */
        }
    return tm;
}

static int choose(const char *budget, const double us[5], pl_depth_choice *c)
{
    pl_error err;
    pl_spec *spec = load(budget, &err);
    pl_plan *plan = NULL;
    if (!spec || pl_plan_compile(spec, &plan, &err) != PL_OK) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
    CHECK(plan->depth_auto);
    CHECK_EQ_INT(plan->depth, 1);
    int64_t n = pl_depth_calib_batches(plan);
    CHECK_EQ_INT(n, 4);
    pl_timing *tm = spans_of(plan, n, us, 10.0);
    pl_depth_choose(plan, tm, n, c);
    pl_timing_free(tm);
    pl_plan_free(plan);
    pl_spec_free(spec);
    return c->depth;
}

int main(void)
{
    pl_depth_choice c;
    /* One slow engine: latency about one period -> 1 + the spare slot. */
    const double one[5] = {1, 1, 20000, 1, 1};
    CHECK_EQ_INT(choose("", one, &c), 2);
    CHECK(c.chosen && c.needed == 2 && !c.capped && c.measured == 3);
    CHECK_STR(c.engine, "compute");
    CHECK_STR(c.cap_why, "no memory_budget");
    CHECK_EQ_INT(c.cap, PL_DEPTH_AUTO_MAX);
    CHECK_STR(c.why, "depth auto: 2 (bound engine compute 20.0 ms/batch, one batch's latency 20.0 "
                     "ms, a slot's buffers held 20.0 ms -> 2; no memory_budget: at most 16)");
    /* Balanced upload, kernel, download: latency 3 periods -> 4 (the design's "3-4 slots"). */
    const double three[5] = {10, 5000, 5000, 5000, 10};
    CHECK_EQ_INT(choose("", three, &c), 4);
    CHECK_STR(c.engine, "h2d");
    /* Up to a quarter period past a whole number is left to the spare slot... */
    const double q[5] = {1, 900, 4000, 1, 1}; /* 4.9 ms / 4 ms = 1.23 */
    CHECK_EQ_INT(choose("", q, &c), 2);
    /* ...more is not. */
    const double q2[5] = {1, 1400, 4000, 1, 1}; /* 5.4 / 4 = 1.35 */
    CHECK_EQ_INT(choose("", q2, &c), 3);
    /* A host stage the pace-setter: the host stream is the engine. The latency is 11 ms, but no
     * buffer is held that long (xh 9 ms: gen, up; xd 3 ms; yh 1 ms): slots are reused buffer by
     * buffer, so 9 / 8 -> 1, + 1 (the latency would say 2 + 1). */
    const double host[5] = {8000, 1000, 1000, 1000, 1};
    CHECK_EQ_INT(choose("", host, &c), 2);
    CHECK_STR(c.engine, "host0");
    CHECK(c.latency_s > 0.0109 && c.latency_s < 0.0111 && c.hold_s > 0.0089 && c.hold_s < 0.0091);
    /* The budget caps: 4 KiB of device memory per slot, so 10 KiB allows 2. */
    CHECK_EQ_INT(choose(", memory_budget: {device: 10KiB}", three, &c), 2);
    CHECK(c.capped && c.needed == 4 && c.cap == 2);
    CHECK_STR(c.cap_why, "memory_budget.device");
    CHECK_STR(c.why, "depth auto: 2 (bound engine h2d 5.0 ms/batch, one batch's latency 15.0 ms, a "
                     "slot's buffers held 15.0 ms -> 4; budget allows 2: device 4.0 KiB/slot of "
                     "10.0 KiB)");
    /* The pinned host side: 8 KiB per slot, 24 KiB allows 3. */
    CHECK_EQ_INT(choose(", memory_budget: {device: 1GiB, host_pinned: 24KiB}", three, &c), 3);
    CHECK_STR(c.cap_why, "memory_budget.host_pinned");
    /* A budget that allows more than needed does not raise the choice. */
    CHECK_EQ_INT(choose(", memory_budget: {device: 1GiB, host_pinned: 1GiB}", one, &c), 2);
    CHECK_STR(c.cap_why, "PL_MAX_DEPTH");

    /* Sizes. */
    uint64_t v = 0;
    CHECK(pl_bytes_parse("8GiB", &v) && v == (UINT64_C(8) << 30));
    CHECK(pl_bytes_parse("1.5 GiB", &v) && v == (UINT64_C(3) << 29));
    CHECK(pl_bytes_parse("4096", &v) && v == 4096);
    CHECK(pl_bytes_parse("2MB", &v) && v == 2000000);
    CHECK(pl_bytes_parse("512 KiB", &v) && v == 524288);
    CHECK(!pl_bytes_parse("8gib", &v));
    CHECK(!pl_bytes_parse("GiB", &v));
    CHECK(!pl_bytes_parse("1.5", &v));
    CHECK(!pl_bytes_parse("-1GiB", &v));
    CHECK(!pl_bytes_parse("99999999999999999999", &v));
    CHECK(!pl_bytes_parse("20000000TiB", &v));

    /* A fixed depth over the budget is an error when the plan is compiled. */
    pl_error err;
    pl_spec *spec = load(", memory_budget: {device: 10KiB}", &err);
    CHECK(spec != NULL);
    pl_plan *plan = NULL;
    CHECK_EQ_INT(pl_plan_compile_with(spec, 0, 3, &plan, &err), PL_EINPUT);
    CHECK_STR(err.msg,
              "t.yaml:2:58: error: run: memory_budget: 'device' is 10.0 KiB (10240 bytes), "
              "but depth 3 "
              "needs 12.0 KiB of device memory (3 slots x 4.0 KiB + 0 B persistent); use "
              "depth 2 (what the budget allows) or depth: auto, or raise "
              "memory_budget.device to at least 12.0 KiB");
    CHECK_EQ_INT(pl_plan_compile_with(spec, 0, 2, &plan, &err), PL_OK);
    CHECK(!plan->depth_auto && plan->depth == 2);
    pl_plan_free(plan);
    /* Fewer batches than the calibration: all of them calibrate, the cap is the batches. */
    CHECK_EQ_INT(pl_plan_compile_with(spec, 3, PL_DEPTH_AUTO, &plan, &err), PL_OK);
    CHECK(plan->depth_auto && pl_depth_calib_batches(plan) == 3);
    pl_plan_free(plan);
    pl_spec_free(spec);
    /* Too small for one slot: pl_spec_check says so. */
    CHECK(load(", memory_budget: {device: 3KiB}", &err) == NULL);
    CHECK_STR(err.msg,
              "t.yaml:2:58: error: run: memory_budget: 'device' is 3.0 KiB (3072 bytes), but "
              "one slot "
              "needs 4.0 KiB (4096 bytes) of device memory: 4.0 KiB of per-batch buffers "
              "+ 0 B persistent; raise memory_budget.device to at least 4.0 KiB, or make "
              "the device buffers smaller");
    PL_TEST_DONE();
}
