/* test_trace: the Chrome trace of a made-up run where kernels of three batches run at once on
 * one stream: they get rows of their own (slices on one row must nest), every row is named, a
 * flow arrow joins each batch's stages across streams, the counters are there, and a pipeline
 * name that is not UTF-8 still gives valid JSON. tests/e2e/check_trace.py validates the file
 * against the Trace Event Format when python3 is present. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pl_plan.h"
#include "pl_trace.h"
#include "pl_test.h"
#include "pl_test_plan.h"

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) n = 0;
    if (s) s[n] = '\0';
    fclose(f);
    return s;
}

static int count(const char *s, const char *what)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, what)); p += strlen(what))
        n++;
    return n;
}

int main(void)
{
    pl_spec *spec;
    pl_plan *plan;
    if (!t_load_plan("pipelines/quickstart.yaml", &spec, &plan)) return 1;
    pl_error err;
    spec->name = "bad \xff\xfe name \xe2\x82"; /* invalid UTF-8, and a cut-off sequence */
    /* quickstart: gen (host0), up (h2d), double (compute0), down (d2h), save (host1); three
     * batches whose kernels run side by side from 1 ms to 21 ms. */
    pl_run_result r;
    memset(&r, 0, sizeof r);
    r.executor = "gpu";
    r.graphs = true;
    r.n_stages = plan->n_stages;
    r.batches_done = r.batches_issued = r.batches_planned = 3;
    r.wall_ns = 30000000;
    CHECK(pl_timing_new(plan, 4, 3, &r.timing, &err) == PL_OK);
    const char *names[] = {"gen", "up", "double", "down", "save"};
    for (int64_t b = 0; b < 3; b++)
        for (int i = 0; i < 5; i++) {
            int s = pl_spec_find_stage(spec, names[i]);
            int64_t t0 = i == 2  ? 1000000 + b * 1000
                         : i < 2 ? b * 300000 + i * 100000 + 1
                                 : 21100000 + b * 300000 + i * 100000;
            int64_t t1 = i == 2 ? 21000000 + b * 1000 : t0 + 90000;
            pl_timing_record(r.timing, s, b, (pl_span){t0, t1});
        }
    char path[] = "/tmp/pl_test_traceXXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    CHECK(pl_trace_write(path, plan, &r, &err) == PL_OK);
    char *t = slurp(path);
    CHECK(t != NULL);
    if (t) {
        /* U+FFFD for each invalid byte, as UTF-8 (pl_json writes non-ASCII as it is) */
        CHECK(strstr(t,
                     "\"pipectl bad \xef\xbf\xbd\xef\xbf\xbd name \xef\xbf\xbd\xef\xbf\xbd (gpu, "
                     "CUDA Graphs") != NULL);
        CHECK_EQ_INT(count(t, "\"ph\": \"X\""), 15);
        /* The three overlapping kernels: compute0 and two more rows, each named. */
        CHECK(strstr(t, "\"compute0 (compute)\"") != NULL);
        CHECK(strstr(t, "\"compute0 (compute) overlap 2\"") != NULL);
        CHECK(strstr(t, "\"compute0 (compute) overlap 3\"") != NULL);
        CHECK_EQ_INT(count(t, "\"thread_name\""), 7);
        /* 4 cross-stream edges a batch (gen>up>double>down>save), 3 batches. */
        CHECK_EQ_INT(count(t, "\"ph\": \"s\""), 12);
        CHECK_EQ_INT(count(t, "\"ph\": \"f\", \"bp\": \"e\""), 12);
        /* Slots: all three in use once the third batch starts. */
        CHECK(strstr(t, "\"name\": \"slots in use\", \"ph\": \"C\", \"pid\": 1, \"ts\": 600.001, "
                        "\"args\": {\"slots\": 3}}") != NULL);
        /* Bytes in flight on the SMs: 3 x 1 MiB (y_dev) while the three kernels overlap. */
        CHECK(strstr(t, "\"args\": {\"bytes\": 3145728}") != NULL);
        free(t);
    }
    if (system("command -v python3 >/dev/null 2>&1") == 0) {
        char cmd[256];
        snprintf(cmd, sizeof cmd, "python3 tests/e2e/check_trace.py %s 12 5", path);
        CHECK(system(cmd) == 0);
    } else {
        printf("python3 not found: the trace was not validated against the Trace Event Format\n");
    }
    /* A log shorter than the run (a long run's trace keeps its first batches): those batches,
     * and the title says so. */
    pl_timing *full = r.timing;
    CHECK(pl_timing_new(plan, 4, 2, &r.timing, &err) == PL_OK);
    for (int64_t b = 0; b < 3; b++)
        for (int s = 0; s < plan->n_stages; s++)
            pl_timing_record(r.timing, s, b, *pl_timing_span(full, b, s));
    pl_timing_free(full);
    CHECK_EQ_INT(pl_trace_batches(&r), 2);
    CHECK(pl_trace_write(path, plan, &r, &err) == PL_OK);
    t = slurp(path);
    CHECK(t && strstr(t, "depth 4, first 2 of 3 batches)") != NULL);
    CHECK(t && count(t, "\"ph\": \"X\"") == 10);
    free(t);
    /* What a run keeps for a trace: every batch, or as many as PL_TRACE_MAX_SPANS spans hold. */
    CHECK_EQ_INT(pl_trace_batches_for(plan), plan->batches);
    int64_t planned = plan->batches;
    plan->batches = PL_MAX_BATCHES;
    CHECK_EQ_INT(pl_trace_batches_for(plan), PL_TRACE_MAX_SPANS / plan->n_stages);
    plan->batches = planned;
    remove(path);
    pl_run_result_fini(&r);
    pl_plan_free(plan);
    pl_spec_free(spec);
    PL_TEST_DONE();
}
