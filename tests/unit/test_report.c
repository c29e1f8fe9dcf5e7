/* test_report: the run summary's statistics and bound, from a made-up run result: device stages
 * timed on some batches only (the GPU executor's sampled timing), or on none (timing off). */
#include <stdlib.h>
#include <string.h>

#include "pl_plan.h"
#include "pl_report.h"
#include "pl_test.h"
#include "pl_test_plan.h"

/* The run's timing from a whole-run array of spans (as a test builds it; executors keep fixed-size
 * statistics): every stage of every batch reports, {0, 0} for "not timed". Replaces r->timing. */
static void set_timing(pl_run_result *r, const pl_plan *p, const pl_span *spans, int64_t nb)
{
    pl_error e;
    pl_timing_free(r->timing);
    r->timing = NULL;
    CHECK(pl_timing_new(p, 4, nb, &r->timing, &e) == PL_OK);
    for (int64_t b = 0; b < nb; b++)
        for (int s = 0; s < p->n_stages; s++)
            pl_timing_record(r->timing, s, b, spans[b * p->n_stages + s]);
}

/* quickstart: gen (host), up, double, down (device), save (host). */
static pl_span *fill(pl_run_result *r, const pl_plan *p, int64_t nb, int timed_every)
{
    memset(r, 0, sizeof *r);
    r->executor = "gpu";
    r->n_stages = p->n_stages;
    r->batches_done = r->batches_issued = r->batches_planned = nb;
    r->wall_ns = nb * 1000000;
    pl_span *spans = calloc((size_t)(nb * p->n_stages), sizeof *spans);
    for (int64_t b = 0; b < nb; b++)
        for (int s = 0; s < p->n_stages; s++) {
            bool dev = p->stages[s].engine != PL_ENGINE_HOST;
            if (dev && (timed_every <= 0 || b % timed_every != 0)) continue;
            int64_t t0 = b * 1000000 + 1000 * s + 1;
            /* device stages take 300 us, host stages 100 us */
            spans[b * p->n_stages + s] = (pl_span){t0, t0 + (dev ? 300000 : 100000)};
        }
    set_timing(r, p, spans, nb);
    return spans;
}

int main(void)
{
    pl_spec *spec;
    pl_plan *plan;
    if (!t_load_plan("pipelines/quickstart.yaml", &spec, &plan)) return 1;
    pl_stage_stats st[8];
    int bs;
    int up = pl_spec_find_stage(spec, "up"), save = pl_spec_find_stage(spec, "save");

    /* Sampled: device stages count only their timed batches; the bound is the slowest mean. */
    pl_run_result r;
    pl_span *sp = fill(&r, plan, 16, 4);
    double bound = pl_report_stats(plan, &r, st, &bs);
    CHECK_EQ_INT(st[up].count, 4);
    CHECK_EQ_INT(st[save].count, 16);
    CHECK(bs >= 0 && plan->stages[bs].engine != PL_ENGINE_HOST);
    CHECK(bound > 0.000299 && bound < 0.000301);
    pl_run_result_fini(&r);
    free(sp);

    /* Timing off: a device stage could be the slowest, so there is no bound, in text and JSON. */
    sp = fill(&r, plan, 16, 0);
    bound = pl_report_stats(plan, &r, st, &bs);
    CHECK_EQ_INT(st[up].count, 0);
    CHECK_EQ_INT(bs, -1);
    CHECK(bound == 0);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    pl_report_print(f, plan, &r, PL_OK);
    fclose(f);
    CHECK(strstr(buf, "no bound without device stage times") != NULL);
    CHECK(strstr(buf, "achieved") == NULL);
    free(buf);
    f = open_memstream(&buf, &len);
    pl_report_json(f, plan, &r, PL_OK, NULL);
    fclose(f);
    CHECK(strstr(buf, "\"bound_s\": null, \"bound_stage\": null, \"achieved\": null") != NULL);
    CHECK(strstr(buf, "\"steady_per_batch_s\": null") != NULL); /* no batch clock */
    free(buf);
    /* The steady state: batch 3 done at 5 ms, batch 15 at 11 ms: 12 batches in 6 ms. */
    r.batch_clock = (pl_batch_clock){3, 5000000, 15, 11000000};
    f = open_memstream(&buf, &len);
    pl_report_json(f, plan, &r, PL_OK, NULL);
    fclose(f);
    CHECK(strstr(buf, "\"steady_per_batch_s\": 0.0005") != NULL);
    free(buf);
    pl_run_result_fini(&r);
    free(sp);

    /* Kernels of different batches side by side (measured on the H200: three 20 ms busy kernels
     * at once): the SMs are busy 20 ms for 3 batches, not 60 ms, so the bound is 6.67 ms a batch
     * and the 7 ms measured is 95% of it (a sum of spans would claim 286%). */
    int dbl = pl_spec_find_stage(spec, "double");
    sp = fill(&r, plan, 3, 1);
    r.wall_ns = 21000000;
    for (int64_t b = 0; b < 3; b++)
        for (int s = 0; s < plan->n_stages; s++)
            sp[b * plan->n_stages + s] =
                s == dbl ? (pl_span){500000, 20500000} : (pl_span){b * 10 + 1, b * 10 + 5};
    set_timing(&r, plan, sp, 3);
    bound = pl_report_stats(plan, &r, st, &bs);
    CHECK_EQ_INT(bs, dbl);
    CHECK(bound > 0.006666 && bound < 0.006667);
    CHECK(st[dbl].mean_s > 0.0199 && st[dbl].mean_s < 0.0201); /* the stage's own mean: 20 ms */
    pl_engine_stats *eng = pl_engines_new(plan);
    int n_eng = 0, be = pl_engines_measure(plan, &r, eng, &n_eng);
    CHECK(be >= 0 && strcmp(eng[be].name, "compute") == 0);
    CHECK(eng[be].occupancy > 0.952 && eng[be].occupancy < 0.953);
    CHECK_EQ_INT(eng[be].timed, 3);
    free(eng);
    f = open_memstream(&buf, &len);
    pl_report_print(f, plan, &r, PL_OK);
    fclose(f);
    CHECK(strstr(buf, "achieved 95.2% of the bound") != NULL);
    CHECK(strstr(buf, "compute sets the pace (slowest stage on it: 'double')") != NULL);
    CHECK(strstr(buf, "over 100%") == NULL);
    free(buf);
    f = open_memstream(&buf, &len);
    pl_report_json(f, plan, &r, PL_OK, NULL);
    fclose(f);
    CHECK(strstr(buf, "\"bound_stage\": \"double\", \"achieved\": 0.9524, \"bound_engine\": "
                      "\"compute\"") != NULL);
    /* numbers are rounded (ns, 1e-4), written without trailing zeros (jansson) */
    CHECK(strstr(buf, "{\"name\": \"compute\", \"engine\": \"compute\", \"stages\": 1, "
                      "\"timed_batches\": 3, \"busy_s\": 0.02, \"busy_per_batch_s\": "
                      "0.006666667, \"occupancy\": 0.9524}") != NULL);
    free(buf);

    /* Sampled spans that include waiting behind untimed batches can pass 100%: said, with why. */
    r.wall_ns = 15000000; /* 3 batches in 15 ms; compute timed on batch 0 only for 20 ms */
    for (int64_t b = 1; b < 3; b++)
        sp[b * plan->n_stages + dbl] = (pl_span){0, 0};
    set_timing(&r, plan, sp, 3);
    f = open_memstream(&buf, &len);
    pl_report_print(f, plan, &r, PL_OK);
    fclose(f);
    CHECK(strstr(buf, "achieved 400.0% of the bound") != NULL);
    CHECK(strstr(buf, "(over 100%: compute was timed on 1 of 3 batches, and a sampled span "
                      "includes waiting behind the untimed batches' work") != NULL);
    free(buf);

    /* An output without checksums says so, in text and JSON (no made-up 0x0000000000000000). */
    r.n_outputs = 1;
    r.outputs = calloc(1, sizeof *r.outputs);
    snprintf(r.outputs[0].stage, sizeof r.outputs[0].stage, "save");
    r.outputs[0].batches = 3;
    r.outputs[0].finalized = true;
    f = open_memstream(&buf, &len);
    pl_report_print(f, plan, &r, PL_OK);
    fclose(f);
    CHECK(strstr(buf, "save: 3 batches consumed (no file, no checksum: checksum: false)") != NULL);
    CHECK(strstr(buf, "0x0000000000000000") == NULL);
    free(buf);
    f = open_memstream(&buf, &len);
    pl_report_json(f, plan, &r, PL_OK, NULL);
    fclose(f);
    CHECK(strstr(buf, "\"checksum\": null, \"checksummed\": false") != NULL);
    free(buf);
    pl_run_result_fini(&r);
    free(sp);

    pl_plan_free(plan);
    pl_spec_free(spec);
    PL_TEST_DONE();
}
