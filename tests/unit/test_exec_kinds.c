/* test_exec_kinds: the host side of the built-in kinds and the host executor, through YAML
 * pipelines: exact search results (ip, l2, ties, payload gather, thread-count independence),
 * source files (raw, .npy, wrap, the too-short message), sink finalization (header fixed, nothing
 * replaced when nothing was written), validate messages of kernel ops, a stop before the first
 * batch, and the JSON summary. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pl_exec.h"
#include "pl_exec_host.h"
#include "pl_hash.h"
#include "pl_npy.h"
#include "pl_parse.h"
#include "pl_plan.h"
#include "pl_report.h"
#include "pl_test.h"

static char tmp[256];

/* Loads and checks YAML text (printf-style); returns NULL with *msg on error. */
static pl_spec *load(pl_error *err, const char *fmt, ...)
{
    char text[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    pl_spec *s = NULL;
    if (pl_yaml_load_string("t.yaml", text, strlen(text), &s, err) != PL_OK) return NULL;
    if (pl_spec_check(s, err) != PL_OK) {
        pl_spec_free(s);
        return NULL;
    }
    return s;
}

static pl_status run(pl_spec *s, pl_run_cfg *cfg, pl_run_result *res, pl_error *err)
{
    pl_plan *plan = NULL;
    pl_status st = pl_plan_compile(s, &plan, err);
    if (st == PL_OK) st = pl_exec_host_run(plan, cfg, res, err);
    pl_plan_free(plan);
    return st;
}

static void *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *p = malloc((size_t)n + 1);
    *len = fread(p, 1, (size_t)n, f);
    ((char *)p)[*len] = '\0';
    fclose(f);
    return p;
}

static void write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    fwrite(data, 1, n, f);
    fclose(f);
}

/* Corpus of 6 vectors in 2-d; queries chosen so ip and l2 give known orders and a tie. */
static void test_search(void)
{
    float corpus[12] = {1, 0, 0, 1, 2, 0, -1, 0, 1, 1, 2, 0}; /* rows 2 and 5 identical */
    float q[4] = {1, 0, 0, 1};
    int32_t payload[6 * 2];
    for (int i = 0; i < 12; i++)
        payload[i] = 100 * (i / 2) + i % 2;
    char cp[300], qp[300], pp[300];
    snprintf(cp, sizeof cp, "%s/corpus.bin", tmp);
    snprintf(qp, sizeof qp, "%s/q.bin", tmp);
    snprintf(pp, sizeof pp, "%s/payload.bin", tmp);
    write_file(cp, corpus, sizeof corpus);
    write_file(qp, q, sizeof q);
    write_file(pp, payload, sizeof payload);
    for (int metric = 0; metric < 2; metric++)
        for (int threads = 1; threads <= 3; threads += 2) {
            pl_error err;
            pl_spec *s =
                load(&err,
                     "run: {batches: 2, depth: 2}\n"
                     "buffers:\n"
                     "  q: {dtype: f32, shape: [2, 2]}\n"
                     "  c: {dtype: f32, shape: [6, 2], persistent: true, init: file, file: %s}\n"
                     "  p: {dtype: i32, shape: [6, 2], persistent: true, init: file, file: %s}\n"
                     "  ids: {dtype: i32, shape: [2, 3]}\n"
                     "  hits: {dtype: i32, shape: [2, 3, 2]}\n"
                     "stages:\n"
                     "  - {name: src, kind: source, to: q, file: %s, wrap: true}\n"
                     "  - {name: s, kind: search, queries: q, corpus: c, k: 3, metric: %s,"
                     " ids: ids, payload: p, hits: hits, threads: %d}\n"
                     "  - {name: o1, kind: sink, from: ids, to: %s/ids.bin}\n"
                     "  - {name: o2, kind: sink, from: hits, to: %s/hits.bin}\n",
                     cp, pp, qp, metric ? "l2" : "ip", threads, tmp, tmp);
            CHECK(s != NULL);
            if (!s) {
                fprintf(stderr, "%s\n", err.msg);
                continue;
            }
            pl_run_cfg cfg;
            pl_run_cfg_init(&cfg);
            pl_run_result res;
            CHECK_EQ_INT(run(s, &cfg, &res, &err), PL_OK);
            char path[300];
            size_t n = 0;
            snprintf(path, sizeof path, "%s/ids.bin", tmp);
            int32_t *ids = slurp(path, &n);
            CHECK_EQ_INT(n, 2 * 6 * 4);
            /* ip, q0 = (1,0): scores 1,0,2,-1,1,2 -> 2 (tie with 5: smaller index first), 5, 0.
             * ip, q1 = (0,1): 0,1,0,0,1,0 -> 1, 4, then the zeros: 0.
             * l2, q0: distances 0,2,1,4,1,1 -> 0, 2, 4.  l2, q1: 2,0,5,2,1,5 -> 1, 4, 0. */
            int32_t want_ip[6] = {2, 5, 0, 1, 4, 0}, want_l2[6] = {0, 2, 4, 1, 4, 0};
            const int32_t *want = metric ? want_l2 : want_ip;
            for (int b = 0; b < 2 && ids; b++)
                for (int i = 0; i < 6; i++)
                    CHECK_EQ_INT(ids[b * 6 + i], want[i]);
            snprintf(path, sizeof path, "%s/hits.bin", tmp);
            int32_t *hits = slurp(path, &n);
            CHECK_EQ_INT(n, 2 * 12 * 4);
            for (int i = 0; i < 6 && hits; i++) {
                CHECK_EQ_INT(hits[2 * i], 100 * want[i]);
                CHECK_EQ_INT(hits[2 * i + 1], 100 * want[i] + 1);
            }
            free(ids);
            free(hits);
            pl_run_result_fini(&res);
            pl_spec_free(s);
        }
}

static void test_source_files(void)
{
    /* A .npy of 3 batches of i32 [4] (header written by pl_npy), read with and without wrap. */
    char np[300], out[300], hdr[256];
    snprintf(np, sizeof np, "%s/in.npy", tmp);
    snprintf(out, sizeof out, "%s/copy.npy", tmp);
    int64_t rest[1] = {4};
    size_t hl = pl_npy_format_header(hdr, sizeof hdr, PL_I32, 3, 1, rest);
    int32_t vals[12];
    for (int i = 0; i < 12; i++)
        vals[i] = i * 7;
    FILE *f = fopen(np, "wb");
    fwrite(hdr, 1, hl, f);
    fwrite(vals, 1, sizeof vals, f);
    fclose(f);
    const char *yaml = "run: {batches: %d}\n"
                       "buffers:\n"
                       "  x: {dtype: %s, shape: [4]}\n"
                       "stages:\n"
                       "  - {name: src, kind: source, to: x, file: %s%s}\n"
                       "  - {name: out, kind: sink, from: x, to: %s}\n";
    pl_error err;
    pl_run_cfg cfg;
    pl_run_cfg_init(&cfg);
    pl_run_result res;

    pl_spec *s = load(&err, yaml, 5, "i32", np, ", wrap: true", out);
    CHECK(s && run(s, &cfg, &res, &err) == PL_OK);
    size_t n = 0;
    unsigned char *got = slurp(out, &n);
    CHECK(got && n == hl + 5 * 16);
    if (got && n == hl + 5 * 16) {
        const int32_t *d = (const int32_t *)(got + hl);
        for (int b = 0; b < 5; b++)
            for (int i = 0; i < 4; i++)
                CHECK_EQ_INT(d[b * 4 + i], vals[(b % 3) * 4 + i]);
        CHECK(strstr((char *)got + 10, "'shape': (5, 4)") != NULL);
    }
    free(got);
    pl_run_result_fini(&res);
    pl_spec_free(s);

    /* Too short without wrap: a clear error at open, status EINPUT; nothing replaces copy.npy. */
    s = load(&err, yaml, 5, "i32", np, "", out);
    CHECK(s != NULL);
    CHECK_EQ_INT(run(s, &cfg, &res, &err), PL_EINPUT);
    CHECK_STR(err.msg, "t.yaml:5:44: error: source 'src': in.npy holds 3 batches of 16 bytes, the "
                       "run needs 5: batch 3 is the first it cannot fill; set wrap: true or run "
                       "fewer batches");
    got = slurp(out, &n);
    CHECK(got && n == hl + 5 * 16); /* the previous output is untouched */
    free(got);
    pl_run_result_fini(&res);
    pl_spec_free(s);

    /* dtype mismatch. */
    s = load(&err, yaml, 2, "f32", np, "", out);
    CHECK_EQ_INT(run(s, &cfg, &res, &err), PL_EINPUT);
    CHECK(strstr(err.msg, "holds '<i4' but buffer 'x' is f32") != NULL);
    pl_run_result_fini(&res);
    pl_spec_free(s);
}

static void test_validate_messages(void)
{
    pl_error err;
    const char *base = "buffers:\n"
                       "  a: {where: device, dtype: f32, shape: [2, 3]}\n"
                       "  b: {where: device, dtype: f32, shape: [4, 2]}\n"
                       "  c: {where: device, dtype: f32, shape: [2, 2]}\n"
                       "  s: {where: device, dtype: f32, shape: [2]}\n"
                       "  h: {where: host, dtype: f32, shape: [2, 3]}\n"
                       "stages:\n"
                       "  - {name: src, kind: source, to: h}\n"
                       "  - {name: up, kind: h2d, from: h, to: a}\n"
                       "  - {name: fb, kind: kernel, op: fill, writes: [b]}\n"
                       "  - {name: k, kind: kernel, %s}\n";
    CHECK(load(&err, base, "op: gemm, reads: [a, b], writes: [c]") == NULL);
    CHECK_STR(err.msg, "t.yaml:11:12: error: kernel stage 'k': gemm needs A [m, k], B [k, n] and "
                       "C [m, n]; got A 'a' [2, 3], B 'b' [4, 2], C 'c' [2, 2]");
    CHECK(load(&err, base, "op: sum, reads: [a], writes: [s]") == NULL);
    CHECK_STR(err.msg, "t.yaml:11:59: error: kernel stage 'k': op sum writes one value: 's' must "
                       "be f32 or f64 with shape [1], not f32 [2]");
    CHECK(load(&err, base, "op: add, reads: [a], writes: [c]") == NULL);
    CHECK_STR(err.msg, "t.yaml:11:12: error: kernel stage 'k': op add takes 2 read(s) and 1 "
                       "write(s), got 1 and 1; write it as reads: [x, y], writes: [z]");
    CHECK(load(&err, base, "op: scale, reads: [a], writes: [c]") == NULL);
    CHECK_STR(err.msg, "t.yaml:11:48: error: kernel stage 'k': op scale is elementwise: 'a' is "
                       "f32 [2, 3] but 'c' is f32 [2, 2]; give all operands one dtype and shape");
    CHECK(load(&err, base, "op: argmax, reads: [a], writes: [c]") == NULL);
    CHECK_STR(err.msg, "t.yaml:11:62: error: kernel stage 'k': argmax of 'a' [2, 3] gives one "
                       "index per row: 'c' must be i32 [2], not f32 [2, 2]");
    CHECK(load(&err, base, "op: busy, duration_us: 0") == NULL);
    CHECK_STR(err.msg, "t.yaml:11:52: error: kernel stage 'k': op busy needs 'duration_us:' "
                       "greater than 0 (how long to spin, microseconds)");
    CHECK(load(&err, base, "op: gemm, beta: 1, reads: [a, b], writes: [c]") == NULL);
}

static void test_stop_and_json(void)
{
    pl_error err;
    char out[300];
    snprintf(out, sizeof out, "%s/stop.npy", tmp);
    write_file(out, "old", 3);
    pl_spec *s = load(&err,
                      "run: {batches: 4}\n"
                      "buffers:\n"
                      "  x: {dtype: f32, shape: [8]}\n"
                      "stages:\n"
                      "  - {name: src, kind: source, to: x, generator: range}\n"
                      "  - {name: out, kind: sink, from: x, to: %s}\n",
                      out);
    CHECK(s != NULL);
    volatile sig_atomic_t stop = 1;
    pl_run_cfg cfg;
    pl_run_cfg_init(&cfg);
    cfg.stop = &stop;
    pl_run_result res;
    pl_status st = run(s, &cfg, &res, &err);
    /* The stop may land before any batch or after some: either way EINTR and a consistent file. */
    CHECK_EQ_INT(st, PL_EINTR);
    CHECK(strncmp(err.msg, "error: interrupted after ", 25) == 0);
    size_t n = 0;
    char *got = slurp(out, &n);
    if (res.batches_done == 0 && res.outputs[0].batches == 0) CHECK(got && n == 3); /* untouched */
    free(got);
    pl_run_result_fini(&res);

    stop = 0;
    cfg.trace_batches = 4; /* the span log the checks below read */
    pl_plan *plan;
    CHECK(pl_plan_compile(s, &plan, &err) == PL_OK);
    CHECK_EQ_INT(pl_exec_host_run(plan, &cfg, &res, &err), PL_OK);
    CHECK_EQ_INT(res.batches_done, 4);
    CHECK_EQ_INT(res.n_outputs, 1);
    CHECK(res.outputs[0].finalized);
    for (int64_t b = 0; b < 4; b++) {
        float v[8];
        for (int i = 0; i < 8; i++)
            v[i] = (float)(b * 8 + i);
        CHECK(res.outputs[0].batch_checksums[b] == pl_hash(v, sizeof v));
        for (int k = 0; k < res.n_stages; k++)
            CHECK(pl_timing_span(res.timing, b, k) &&
                  pl_timing_span(res.timing, b, k)->end_ns >=
                      pl_timing_span(res.timing, b, k)->start_ns);
    }
    char js[300];
    snprintf(js, sizeof js, "%s/r.json", tmp);
    FILE *f = fopen(js, "w");
    pl_report_json(f, plan, &res, PL_OK, NULL);
    fclose(f);
    got = slurp(js, &n);
    CHECK(got && strstr(got, "\"status\": \"ok\"") && strstr(got, "\"batches_done\": 4") &&
          strstr(got, "\"executor\": \"host\"") && strstr(got, "\"stages\": [{\"name\": \"src\""));
    free(got);
    pl_run_result_fini(&res);
    pl_plan_free(plan);
    pl_spec_free(s);
}

int main(void)
{
    snprintf(tmp, sizeof tmp, "/tmp/pl_test_exec_XXXXXX");
    if (!mkdtemp(tmp)) PL_TEST_SKIP("cannot create a temporary directory");
    test_search();
    test_source_files();
    test_validate_messages();
    test_stop_and_json();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (!pl_test_failures && system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp);
    PL_TEST_DONE();
}
