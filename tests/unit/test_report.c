/* test_report: the run summary's statistics and bound, from a made-up run result: device stages
 * timed on some batches only (the GPU executor's sampled timing), or on none (timing off). */
#include <stdlib.h>
#include <string.h>

#include "pl_parse.h"
#include "pl_plan.h"
#include "pl_report.h"
#include "pl_test.h"

/* quickstart: gen (host), up, double, down (device), save (host). */
static void fill(pl_run_result *r, const pl_plan *p, int64_t nb, int timed_every)
{
    memset(r, 0, sizeof *r);
    r->executor = "gpu";
    r->n_stages = p->n_stages;
    r->batches_done = r->batches_issued = r->batches_planned = nb;
    r->wall_ns = nb * 1000000;
    r->spans = calloc((size_t)(nb * p->n_stages), sizeof *r->spans);
    for (int64_t b = 0; b < nb; b++)
        for (int s = 0; s < p->n_stages; s++) {
            bool dev = p->stages[s].engine != PL_ENGINE_HOST;
            if (dev && (timed_every <= 0 || b % timed_every != 0)) continue;
            int64_t t0 = b * 1000000 + 1000 * s + 1;
            /* device stages take 300 us, host stages 100 us */
            r->spans[b * p->n_stages + s] = (pl_span){t0, t0 + (dev ? 300000 : 100000)};
        }
}

int main(void)
{
    pl_spec *spec = NULL;
    pl_plan *plan = NULL;
    pl_error err;
    if (pl_load_checked("pipelines/quickstart.yaml", &spec, &err) != PL_OK ||
        pl_plan_compile(spec, &plan, &err) != PL_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    pl_stage_stats st[8];
    int bs;
    int up = pl_spec_find_stage(spec, "up"), save = pl_spec_find_stage(spec, "save");

    /* Sampled: device stages count only their timed batches; the bound is the slowest mean. */
    pl_run_result r;
    fill(&r, plan, 16, 4);
    double bound = pl_report_stats(plan, &r, st, &bs);
    CHECK_EQ_INT(st[up].count, 4);
    CHECK_EQ_INT(st[save].count, 16);
    CHECK(bs >= 0 && plan->stages[bs].engine != PL_ENGINE_HOST);
    CHECK(bound > 0.000299 && bound < 0.000301);
    pl_run_result_fini(&r);

    /* Timing off: a device stage could be the slowest, so there is no bound, in text and JSON. */
    fill(&r, plan, 16, 0);
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
    free(buf);
    pl_run_result_fini(&r);

    pl_plan_free(plan);
    pl_spec_free(spec);
    PL_TEST_DONE();
}
