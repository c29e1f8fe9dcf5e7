/* test_exec_gpu: the GPU executor gives the host executor's sink outputs, with graphs and with
 * --no-graph, at depths 1 and 3: for small pipelines built here (a chain, a fork-join across
 * compute streams, a persistent accumulator with cross-batch device deps, a host stage between
 * two device segments) and for every pipeline in pipelines/ (host_step.yaml/.lua: a Lua stage
 * between two device segments), with the default sampled timing (lean and timed graphs mixed in
 * one run), and the built-in ones also timing every 2nd batch, every batch and none; a pipeline
 * the GPU executor refuses fails the test. Also: a host stage between device stages run once
 * through both executors (checksums equal), device spans respect the dependencies, and exactly
 * the sampled batches have device spans. Skipped (77) without a CUDA device.
 * PL_GT_SELFTEST=1 runs the same comparisons host against host (checks the test itself). */
#include <dirent.h>

#include "pl_gpu_test.h"
#include "pl_report.h"

static bool gt_selftest;
static int gt_compared, gt_exact, gt_tolerant;
static int gt_timing = 16; /* pl_run_cfg.timing_period of the GPU runs */

static pl_exec_kind gt_gpu(void)
{
    return gt_selftest ? PL_EXEC_HOST : PL_EXEC_GPU;
}

/* source -> up -> scale -> down -> sink */
static void build_chain(pl_spec *s)
{
    s->run.batches = 10;
    gt_buf(s, "x_host", PL_HOST, PL_F32, 100003, false, PL_INIT_NONE);
    gt_buf(s, "x_dev", PL_DEVICE, PL_F32, 100003, false, PL_INIT_NONE);
    gt_buf(s, "y_dev", PL_DEVICE, PL_F32, 100003, false, PL_INIT_NONE);
    gt_buf(s, "y_host", PL_HOST, PL_F32, 100003, false, PL_INIT_NONE);
    pl_stage *src = gt_stage(s, "gen", pl_kind_find("source"));
    gt_opt(s, src, "to", "x_host");
    gt_copy(s, "up", pl_kind_find("h2d"), "x_host", "x_dev");
    const char *in[] = {"x_dev", NULL};
    gt_kernel(s, "scale", "scale", in, "y_dev", "alpha", "3");
    gt_copy(s, "down", pl_kind_find("d2h"), "y_dev", "y_host");
    pl_stage *sink = gt_stage(s, "save", pl_kind_find("sink"));
    gt_opt(s, sink, "from", "y_host");
    gt_opt(s, sink, "to", "y.npy");
}

/* source -> up -> {scale a, scale b} -> add -> down -> sink, plus the input downloaded again on
 * its own branch and a checksum of it: two compute streams and cross-stream events in the graph. */
static void build_forkjoin(pl_spec *s)
{
    const int64_t n = 65536;
    s->run.batches = 9;
    gt_buf(s, "x_host", PL_HOST, PL_F32, n, false, PL_INIT_NONE);
    gt_buf(s, "x_dev", PL_DEVICE, PL_F32, n, false, PL_INIT_NONE);
    gt_buf(s, "a_dev", PL_DEVICE, PL_F32, n, false, PL_INIT_NONE);
    gt_buf(s, "b_dev", PL_DEVICE, PL_F32, n, false, PL_INIT_NONE);
    gt_buf(s, "c_dev", PL_DEVICE, PL_F32, n, false, PL_INIT_NONE);
    gt_buf(s, "h_dev", PL_DEVICE, PL_I64, 1, false, PL_INIT_NONE);
    gt_buf(s, "c_host", PL_HOST, PL_F32, n, false, PL_INIT_NONE);
    gt_buf(s, "h_host", PL_HOST, PL_I64, 1, false, PL_INIT_NONE);
    pl_stage *src = gt_stage(s, "gen", pl_kind_find("source"));
    gt_opt(s, src, "to", "x_host");
    gt_copy(s, "up", pl_kind_find("h2d"), "x_host", "x_dev");
    const char *x[] = {"x_dev", NULL}, *ab[] = {"a_dev", "b_dev", NULL};
    gt_kernel(s, "twice", "scale", x, "a_dev", "alpha", "2");
    gt_kernel(s, "half", "scale", x, "b_dev", "alpha", "0.5");
    gt_kernel(s, "hash", "checksum", x, "h_dev", NULL, NULL);
    gt_kernel(s, "sum2", "add", ab, "c_dev", NULL, NULL);
    gt_copy(s, "down", pl_kind_find("d2h"), "c_dev", "c_host");
    gt_copy(s, "down_hash", pl_kind_find("d2h"), "h_dev", "h_host");
    pl_stage *k1 = gt_stage(s, "save", pl_kind_find("sink"));
    gt_opt(s, k1, "from", "c_host");
    gt_opt(s, k1, "to", "c.npy");
    pl_stage *k2 = gt_stage(s, "save_hash", pl_kind_find("sink"));
    gt_opt(s, k2, "from", "h_host");
    gt_opt(s, k2, "to", "h.npy");
}

/* A persistent device accumulator: acc = 0.5 * acc + x per batch, downloaded every batch. The
 * result of batch b depends on every earlier batch, so cross-batch deps between device stages
 * (distance 1, shorter than the slot cycle) must hold for it to match. */
static void build_accum(pl_spec *s)
{
    const int64_t n = 4099;
    s->run.batches = 12;
    gt_buf(s, "x_host", PL_HOST, PL_F32, n, false, PL_INIT_NONE);
    gt_buf(s, "x_dev", PL_DEVICE, PL_F32, n, false, PL_INIT_NONE);
    gt_buf(s, "acc", PL_DEVICE, PL_F32, n, true, PL_INIT_ZEROS);
    gt_buf(s, "tmp", PL_DEVICE, PL_F32, n, false, PL_INIT_NONE);
    gt_buf(s, "acc_host", PL_HOST, PL_F32, n, false, PL_INIT_NONE);
    pl_stage *src = gt_stage(s, "gen", pl_kind_find("source"));
    gt_opt(s, src, "to", "x_host");
    gt_copy(s, "up", pl_kind_find("h2d"), "x_host", "x_dev");
    const char *a[] = {"acc", NULL}, *tx[] = {"tmp", "x_dev", NULL};
    gt_kernel(s, "decay", "scale", a, "tmp", "alpha", "0.5");
    pl_stage *acc = gt_kernel(s, "accumulate", "add", tx, "acc", NULL, NULL);
    pl_stage_add_after(s, acc, "decay", gt_nopos);
    gt_copy(s, "down", pl_kind_find("d2h"), "acc", "acc_host");
    pl_stage *k = gt_stage(s, "save", pl_kind_find("sink"));
    gt_opt(s, k, "from", "acc_host");
    gt_opt(s, k, "to", "acc.npy");
}

typedef void (*gt_builder)(pl_spec *s);

/* Loads (file) or builds (builder) a fresh spec with depth and sinks set. */
static pl_spec *gt_make(const char *file, gt_builder build, int depth, const char *dir)
{
    pl_spec *s = NULL;
    pl_error e;
    if (file) {
        if (pl_load_file(file, &s, &e) != PL_OK) {
            fprintf(stderr, "%s: %s\n", file, e.msg);
            return NULL;
        }
    } else {
        pl_spec_new(NULL, &s, &e);
        build(s);
    }
    s->run.depth = depth;
    if (s->run.batches > 12) s->run.batches = 12; /* enough batches to cycle every slot */
    gt_redirect_sinks(s, dir);
    return s;
}

/* Runs on the host (reference) once, then on the GPU with graphs/--no-graph at depths 1 and 3,
 * comparing every sink file. */
static void gt_compare_pipeline(const char *label, const char *file, gt_builder build)
{
    char ref_dir[600];
    snprintf(ref_dir, sizeof ref_dir, "%s", gt_scratch("ref"));
    pl_spec *ref = gt_make(file, build, 3, ref_dir);
    CHECK(ref != NULL);
    if (!ref) return;
    gt_run hr;
    gt_run_spec(ref, PL_EXEC_HOST, false, NULL, &hr);
    if (hr.st != PL_OK) {
        fprintf(stderr, "%s: host reference failed: %s\n", label, hr.err.msg);
        CHECK(hr.st == PL_OK);
        pl_run_result_fini(&hr.res);
        pl_spec_free(ref);
        return;
    }
    double tol = gt_tolerance(ref);
    const int depths[2] = {1, 3};
    for (int g = 0; g < 2; g++)
        for (int di = 0; di < 2; di++) {
            char dir[600], tag[96];
            snprintf(dir, sizeof dir, "%s", gt_scratch("gpu"));
            snprintf(tag, sizeof tag, "%s [%s, depth %d, timing %d]", label,
                     g ? "graphs" : "no-graph", depths[di], gt_timing);
            pl_spec *s = gt_make(file, build, depths[di], dir);
            pl_run_cfg cfg;
            pl_run_cfg_init(&cfg);
            cfg.timing_period = gt_timing;
            gt_run r;
            gt_run_spec(s, gt_gpu(), g == 1, &cfg, &r);
            /* The GPU executor runs every plan (host stages between device segments included):
             * a refusal is a failure, so no pipeline in pipelines/ drops out of the comparison. */
            if (r.st != PL_OK) fprintf(stderr, "%s: %s\n", tag, r.err.msg);
            CHECK(r.st == PL_OK);
            CHECK_EQ_INT(r.res.batches_done, hr.res.batches_done);
            CHECK_EQ_INT(r.res.n_outputs, hr.res.n_outputs);
            for (int o = 0; r.st == PL_OK && o < hr.res.n_outputs && o < r.res.n_outputs; o++) {
                const pl_output *want = &hr.res.outputs[o], *got = &r.res.outputs[o];
                char why[256];
                bool ok;
                if (want->path && got->path) {
                    int si = pl_spec_find_stage(s, want->stage);
                    pl_dtype t = si >= 0 ? s->buffers[s->stages[si].reads[0].index].dtype : PL_U8;
                    ok = gt_compare_files(want->path, got->path, t, tol, why, sizeof why);
                } else {
                    ok = want->checksum == got->checksum;
                    snprintf(why, sizeof why, "checksums %s", ok ? "equal" : "differ");
                }
                printf("%-44s sink '%s': %s\n", tag, want->stage, why);
                if (!ok) fprintf(stderr, "%s: sink '%s' differs: %s\n", tag, want->stage, why);
                CHECK(ok);
                gt_compared++;
                if (strstr(why, "identical") || strstr(why, "equal"))
                    gt_exact++;
                else if (ok)
                    gt_tolerant++;
            }
            pl_run_result_fini(&r.res);
            pl_spec_free(s);
        }
    pl_run_result_fini(&hr.res);
    pl_spec_free(ref);
}

/* source -> up -> scale -> down -> sink, then a second source (a host stage ordered after the
 * download: between the two device segments of the batch) -> up2 -> add of both device results ->
 * down2 -> sink. Segment 2 reads y_dev, which segment 1 wrote. Compared like the other built-in
 * pipelines, in every mode and timing. */
static void build_between(pl_spec *s)
{
    build_chain(s);
    gt_buf(s, "z_host", PL_HOST, PL_F32, 100003, false, PL_INIT_NONE);
    gt_buf(s, "z_dev", PL_DEVICE, PL_F32, 100003, false, PL_INIT_NONE);
    gt_buf(s, "w_dev", PL_DEVICE, PL_F32, 100003, false, PL_INIT_NONE);
    gt_buf(s, "w_host", PL_HOST, PL_F32, 100003, false, PL_INIT_NONE);
    pl_stage *g2 = gt_stage(s, "gen2", pl_kind_find("source"));
    gt_opt(s, g2, "to", "z_host");
    pl_stage_add_after(s, g2, "down", gt_nopos);
    gt_copy(s, "up2", pl_kind_find("h2d"), "z_host", "z_dev");
    const char *yz[] = {"y_dev", "z_dev", NULL};
    gt_kernel(s, "mix", "add", yz, "w_dev", NULL, NULL);
    gt_copy(s, "down2", pl_kind_find("d2h"), "w_dev", "w_host");
    pl_stage *sink = gt_stage(s, "save2", pl_kind_find("sink"));
    gt_opt(s, sink, "from", "w_host");
    gt_opt(s, sink, "to", "w.npy");
}

/* A host stage between device stages of one batch: the device work is cut into two segments,
 * each captured per slot, with the host stage run between them; outputs equal the host's. */
static void test_host_between(void)
{
    pl_spec *s = NULL;
    pl_error e;
    pl_spec_new(NULL, &s, &e);
    build_chain(s);
    gt_buf(s, "z_host", PL_HOST, PL_F32, 100003, false, PL_INIT_NONE);
    gt_buf(s, "z_dev", PL_DEVICE, PL_F32, 100003, false, PL_INIT_NONE);
    pl_stage *g2 = gt_stage(s, "gen2", pl_kind_find("source"));
    gt_opt(s, g2, "to", "z_host");
    pl_stage_add_after(s, g2, "down", gt_nopos);
    gt_copy(s, "up2", pl_kind_find("h2d"), "z_host", "z_dev");
    gt_redirect_sinks(s, gt_scratch("between"));
    gt_run h, r;
    gt_run_spec(s, PL_EXEC_HOST, false, NULL, &h);
    gt_run_spec(s, PL_EXEC_GPU, true, NULL, &r);
    printf("host stage between device stages: host %s, gpu %s\n", pl_status_name(h.st),
           pl_status_name(r.st));
    CHECK_EQ_INT(h.st, PL_OK);
    CHECK_EQ_INT(r.st, PL_OK);
    CHECK_EQ_INT(r.res.n_outputs, h.res.n_outputs);
    for (int i = 0; i < r.res.n_outputs && i < h.res.n_outputs; i++) {
        CHECK_EQ_INT(r.res.outputs[i].batches, h.res.outputs[i].batches);
        CHECK(r.res.outputs[i].checksum == h.res.outputs[i].checksum);
    }
    pl_run_result_fini(&h.res);
    pl_run_result_fini(&r.res);
    pl_spec_free(s);
}

/* Device spans come from events inside the graph: within a batch, the kernel starts after the
 * upload ends and the download after the kernel; the sink (host clock) after the download. With
 * timing period `timing` only the sampled batches have device spans (graphs: b % timing ==
 * timing / 2, or the middle batch of a shorter run; --no-graph: every batch unless timing is off);
 * host stages always have theirs. */
static void test_spans(bool graphs, int timing)
{
    pl_spec *s = NULL;
    pl_error e;
    pl_spec_new(NULL, &s, &e);
    build_chain(s);
    gt_redirect_sinks(s, gt_scratch("spans"));
    pl_run_cfg cfg;
    pl_run_cfg_init(&cfg);
    cfg.timing_period = timing;
    cfg.trace_batches = 10; /* the span log read below */
    gt_run r;
    gt_run_spec(s, PL_EXEC_GPU, graphs, &cfg, &r);
    CHECK(r.st == PL_OK);
    CHECK_STR(r.res.executor, "gpu");
    CHECK(r.res.graphs == graphs);
    CHECK_EQ_INT(r.res.batches_done, 10);
    int up = pl_spec_find_stage(s, "up"), k = pl_spec_find_stage(s, "scale"),
        dn = pl_spec_find_stage(s, "down"), sk = pl_spec_find_stage(s, "save");
    const int64_t slack = 1000, host_slack = 500000; /* float ms rounding; clock mapping */
    int timed_batches = 0;
    for (int64_t b = 0; r.st == PL_OK && b < r.res.batches_done; b++) {
        const pl_span *sp = pl_timing_span(r.res.timing, b, 0); /* the batch's row */
        bool timed = timing >= 0 && (!graphs || timing == 0 ||
                                     (10 <= timing / 2 ? b == 5 : b % timing == timing / 2));
        CHECK(sp[sk].start_ns > 0 && sp[sk].end_ns >= sp[sk].start_ns);
        if (!timed) {
            CHECK(sp[up].start_ns == 0 && sp[up].end_ns == 0);
            CHECK(sp[k].start_ns == 0 && sp[k].end_ns == 0);
            CHECK(sp[dn].start_ns == 0 && sp[dn].end_ns == 0);
            continue;
        }
        timed_batches++;
        CHECK(sp[up].start_ns > 0 && sp[up].end_ns >= sp[up].start_ns);
        CHECK(sp[k].start_ns + slack >= sp[up].end_ns);
        CHECK(sp[dn].start_ns + slack >= sp[k].end_ns);
        CHECK(sp[sk].start_ns + host_slack >= sp[dn].end_ns);
    }
    printf("spans [%s, timing %d]: device stages timed on %d of 10 batches\n",
           graphs ? "graphs" : "no-graph", timing, timed_batches);
    /* The report's per-stage statistics count the timed batches only. */
    pl_plan *plan = NULL;
    if (r.st == PL_OK && pl_plan_compile(s, &plan, &e) == PL_OK) {
        pl_stage_stats st[8];
        int bs;
        pl_report_stats(plan, &r.res, st, &bs);
        CHECK_EQ_INT(st[up].count, timed_batches);
        CHECK_EQ_INT(st[dn].count, timed_batches);
        CHECK_EQ_INT(st[sk].count, 10);
        CHECK(timed_batches == 0 || st[k].mean_s > 0);
        CHECK(timed_batches == 0 ? bs == -1 : bs >= 0); /* no bound without device times */
    }
    pl_plan_free(plan);
    pl_run_result_fini(&r.res);
    pl_spec_free(s);
}

static int gt_cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static bool gt_skip_host(const char *path)
{
    FILE *f = fopen(path, "r");
    char line[512];
    bool skip = false;
    while (f && !skip && fgets(line, sizeof line, f))
        skip = strncmp(line, "# pipectl-test: skip-host", 25) == 0 ||
               strncmp(line, "-- pipectl-test: skip-host", 26) == 0; /* a .lua's comment */
    if (f) fclose(f);
    return skip;
}

int main(void)
{
    gt_selftest = getenv("PL_GT_SELFTEST") && strcmp(getenv("PL_GT_SELFTEST"), "1") == 0;
    if (!gt_selftest) gt_skip_without_device();
    gt_compare_pipeline("builtin:chain", NULL, build_chain);
    gt_compare_pipeline("builtin:forkjoin", NULL, build_forkjoin);
    gt_compare_pipeline("builtin:accum", NULL, build_accum);
    gt_compare_pipeline("builtin:between", NULL, build_between);
    /* Timing every 2nd batch alternates lean and timed graphs: cross-batch waits must name the
     * event set the earlier batch's graph recorded. */
    const int timings[3] = {2, 0, -1};
    for (int t = 0; t < 3; t++) {
        gt_timing = timings[t];
        gt_compare_pipeline("builtin:chain", NULL, build_chain);
        gt_compare_pipeline("builtin:forkjoin", NULL, build_forkjoin);
        gt_compare_pipeline("builtin:accum", NULL, build_accum);
        gt_compare_pipeline("builtin:between", NULL, build_between);
    }
    gt_timing = 16;
    if (!gt_selftest) {
        test_host_between();
        for (int t = 0; t < 4; t++) {
            const int timing[4] = {16, 0, -1, 4};
            test_spans(true, timing[t]);
            test_spans(false, timing[t]);
        }
    }
    /* Every pipeline shipped in pipelines/. */
    const char *pdir = PL_SOURCE_DIR "/pipelines";
    DIR *d = opendir(pdir);
    char *names[256];
    int n = 0;
    for (struct dirent *de; d && (de = readdir(d)) && n < 256;) {
        size_t l = strlen(de->d_name);
        if ((l > 5 && strcmp(de->d_name + l - 5, ".yaml") == 0) ||
            (l > 4 && strcmp(de->d_name + l - 4, ".lua") == 0))
            names[n++] = strdup(de->d_name);
    }
    if (d) closedir(d);
    qsort(names, (size_t)n, sizeof names[0], gt_cmp_str);
    for (int i = 0; i < n; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", pdir, names[i]);
        /* "# pipectl-test: skip-host" ("--" in .lua): too large for the host executor (GPT-2 at
         * full size); tests/gpu/test_gpt2_gpu.sh compares its stages on a tiny model instead. */
        if (gt_skip_host(path))
            printf("skip: %s (pipectl-test: skip-host)\n", names[i]);
        else
            gt_compare_pipeline(names[i], path, NULL);
        free(names[i]);
    }
    printf("%d pipeline files; %d sink outputs compared: %d bit-identical, %d within tolerance\n",
           n, gt_compared, gt_exact, gt_tolerant);
    PL_TEST_DONE();
}
