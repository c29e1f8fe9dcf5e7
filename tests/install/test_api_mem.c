/* test_api_mem: the API's 0.2 additions through libpipectl alone: the version macros, load options
 * and pipelines from text, the buffers, plan formats, run options, statistics, and in-memory
 * inputs and outputs: an input gives what the same bytes in a file give, an output holds what the
 * sink's file would, a callback gets the batches in order, every binding mistake is refused
 * before the run with the buffer named, and two threads run plans of one pipeline at once. */
#define _POSIX_C_SOURCE 200809L
#include <pipectl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pl_test.h"

static char t_dir[] = "/tmp/pipectl_test_api_mem_XXXXXX";

static const char *t_path(const char *name)
{
    static char path[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(path[k], sizeof path[k], "%s/%s", t_dir, name);
    return path[k];
}

static void t_write(const char *name, const void *data, size_t n)
{
    FILE *f = fopen(t_path(name), "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", t_path(name));
        exit(1);
    }
}

/* The whole file into a malloc'd buffer, *n bytes; NULL when it cannot be read. */
static char *t_slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)len + 1);
    *n = buf ? fread(buf, 1, (size_t)len, f) : 0;
    fclose(f);
    return buf;
}

static bool t_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* 5 batches of i32 [3, 4] from a raw file, doubled on the "device", written to out/y.raw and
 * checksummed by a second sink. */
static const char *t_text =
    "pipeline: mem\n"
    "run: {batches: 5, depth: 2}\n"
    "buffers:\n"
    "  x: {where: host, dtype: i32, shape: [3, 4]}\n"
    "  x_dev: {where: device, dtype: i32, shape: [3, 4]}\n"
    "  y_dev: {where: device, dtype: i32, shape: [3, 4]}\n"
    "  y: {where: host, dtype: i32, shape: [3, 4]}\n"
    "stages:\n"
    "  - {name: load, kind: source, to: x, file: x.raw}\n"
    "  - {name: up, kind: h2d, from: x, to: x_dev}\n"
    "  - {name: twice, kind: kernel, op: scale, alpha: 2, reads: [x_dev], writes: [y_dev]}\n"
    "  - {name: down, kind: d2h, from: y_dev, to: y}\n"
    "  - {name: save, kind: sink, from: y, to: out/y.raw}\n";

enum { T_BATCHES = 5, T_ELEMS = 12, T_BYTES = T_ELEMS * 4 };

static pipectl_pipeline *t_load(pipectl *h, const char *text)
{
    pipectl_load_options o = PIPECTL_LOAD_OPTIONS_INIT;
    o.dir = t_dir;
    o.name = "mem.yaml";
    pipectl_pipeline *p = NULL;
    CHECK_EQ_INT(pipectl_loads(h, text, strlen(text), &o, &p), PIPECTL_OK);
    if (!p) fprintf(stderr, "%s\n", pipectl_errmsg(h));
    return p;
}

static pipectl_result *t_run(pipectl *h, pipectl_pipeline *p, int want)
{
    pipectl_plan *plan = NULL;
    CHECK_EQ_INT(pipectl_compile(h, p, 0, 0, &plan), PIPECTL_OK);
    pipectl_run_options o = PIPECTL_RUN_OPTIONS_INIT;
    o.executor = PIPECTL_EXECUTOR_HOST;
    pipectl_result *r = NULL;
    int code = pipectl_run_with(h, plan, &o, &r);
    if (code != want) fprintf(stderr, "run: %s\n", pipectl_errmsg(h));
    CHECK_EQ_INT(code, want);
    pipectl_plan_free(plan);
    return r;
}

static void test_version(void)
{
    CHECK_STR(pipectl_version(), PIPECTL_VERSION_STRING);
    CHECK(PIPECTL_VERSION_NUMBER >= 200);
    CHECK_EQ_INT(PIPECTL_VERSION_NUMBER, PIPECTL_VERSION_MAJOR * 10000 +
                                             PIPECTL_VERSION_MINOR * 100 + PIPECTL_VERSION_PATCH);
}

/* Text with a name and a folder; --set; the buffers as declared; the plan's formats. */
static void test_load(pipectl *h)
{
    pipectl_load_options o = PIPECTL_LOAD_OPTIONS_INIT;
    o.name = "bad.yaml";
    pipectl_pipeline *p = (pipectl_pipeline *)1;
    const char *bad = "pipeline: x\nbuffers:\n  a: {dtype: f33, shape: [4]}\n";
    CHECK_EQ_INT(pipectl_loads(h, bad, strlen(bad), &o, &p), PIPECTL_EINPUT);
    CHECK(p == NULL);
    CHECK_STR(pipectl_errfile(h), "bad.yaml");
    CHECK_EQ_INT(pipectl_errline(h), 3);
    CHECK(strncmp(pipectl_errmsg(h), "bad.yaml:3:", 11) == 0);
    /* NULL options: "<string>" */
    CHECK_EQ_INT(pipectl_loads(h, bad, strlen(bad), NULL, &p), PIPECTL_EINPUT);
    CHECK_STR(pipectl_errfile(h), "<string>");

    const char *sets[] = {"run.batches=3", "twice.alpha=3"};
    o = (pipectl_load_options)PIPECTL_LOAD_OPTIONS_INIT;
    o.set = sets;
    o.n_set = 2;
    o.dir = t_dir;
    CHECK_EQ_INT(pipectl_loads(h, t_text, strlen(t_text), &o, &p), PIPECTL_OK);
    pipectl_plan *plan = NULL;
    CHECK_EQ_INT(pipectl_compile(h, p, 0, 0, &plan), PIPECTL_OK);
    CHECK_EQ_INT(pipectl_plan_batches(plan), 3);
    char *text = NULL;
    CHECK_EQ_INT(pipectl_plan_dump(h, plan, PIPECTL_PLAN_DOT, &text), PIPECTL_OK);
    CHECK(text && strncmp(text, "digraph", 7) == 0);
    pipectl_free(text);
    CHECK_EQ_INT(pipectl_plan_dump(h, plan, PIPECTL_PLAN_JSON, &text), PIPECTL_OK);
    CHECK(text && text[0] == '{' && strstr(text, "\"streams\""));
    pipectl_free(text);
    CHECK_EQ_INT(pipectl_plan_dump(h, plan, PIPECTL_PLAN_TEXT, &text), PIPECTL_OK);
    CHECK(text && strstr(text, "plan for pipeline 'mem'"));
    pipectl_free(text);
    CHECK_EQ_INT(pipectl_plan_dump(h, plan, 7, &text), PIPECTL_EINPUT);
    CHECK(text == NULL);
    pipectl_plan_free(plan);

    CHECK_EQ_INT(pipectl_pipeline_buffers(p), 4);
    CHECK_EQ_INT(pipectl_pipeline_find_buffer(p, "y"), 3);
    CHECK_EQ_INT(pipectl_pipeline_find_buffer(p, "z"), -1);
    pipectl_buffer_info b = {.size = sizeof b};
    CHECK_EQ_INT(pipectl_pipeline_buffer(p, 0, &b), PIPECTL_OK);
    CHECK_STR(b.name, "x");
    CHECK_EQ_INT(b.device, 0);
    CHECK_EQ_INT(b.dtype, PIPECTL_I32);
    CHECK_STR(b.dtype_name, "i32");
    CHECK_EQ_INT(b.rank, 2);
    CHECK_EQ_INT(b.shape[0], 3);
    CHECK_EQ_INT(b.shape[1], 4);
    CHECK_EQ_INT(b.bytes, T_BYTES);
    CHECK_STR(b.source, "load");
    CHECK(b.sink == NULL);
    CHECK_EQ_INT(pipectl_pipeline_buffer(p, 3, &b), PIPECTL_OK);
    CHECK_STR(b.sink, "save");
    CHECK(b.source == NULL);
    CHECK_EQ_INT(pipectl_pipeline_buffer(p, 1, &b), PIPECTL_OK);
    CHECK_EQ_INT(b.device, 1);
    CHECK_EQ_INT(pipectl_pipeline_buffer(p, 4, &b), PIPECTL_EINPUT);
    b.size = 4;
    CHECK_EQ_INT(pipectl_pipeline_buffer(p, 0, &b), PIPECTL_EINPUT);
    pipectl_pipeline_free(p);

    const char *badset[] = {"run.batches=zero"};
    o.set = badset;
    o.n_set = 1;
    CHECK_EQ_INT(pipectl_loads(h, t_text, strlen(t_text), &o, &p), PIPECTL_EINPUT);
    CHECK(strncmp(pipectl_errmsg(h), "--set run.batches=zero: ", 24) == 0);
    o.size = 0;
    CHECK_EQ_INT(pipectl_loads(h, t_text, strlen(t_text), &o, &p), PIPECTL_EINPUT);
    CHECK(strstr(pipectl_errmsg(h), "PIPECTL_LOAD_OPTIONS_INIT") != NULL);

    /* pipectl_check: the files a run would read. */
    o = (pipectl_load_options)PIPECTL_LOAD_OPTIONS_INIT;
    o.dir = t_dir;
    CHECK_EQ_INT(pipectl_loads(h, t_text, strlen(t_text), &o, &p), PIPECTL_OK);
    CHECK_EQ_INT(pipectl_check(h, p, 0), PIPECTL_EINPUT);
    CHECK_STR(pipectl_errfile(h), "<string>");
    CHECK_EQ_INT(pipectl_errline(h), 9);
    CHECK(strstr(pipectl_errmsg(h), "cannot open") != NULL);
    int32_t data[T_BATCHES * T_ELEMS];
    for (int i = 0; i < T_BATCHES * T_ELEMS; i++)
        data[i] = i * 7 - 100;
    t_write("x.raw", data, sizeof data);
    CHECK_EQ_INT(pipectl_check(h, p, 0), PIPECTL_OK);
    CHECK_EQ_INT(pipectl_check(h, p, 6), PIPECTL_EINPUT);
    CHECK(strstr(pipectl_errmsg(h), "the run needs 6") != NULL);
    pipectl_pipeline_free(p);
}

/* Input from memory = the same bytes from the file; output into memory = the file's bytes. */
static void test_memory(pipectl *h)
{
    int32_t data[T_BATCHES * T_ELEMS];
    for (int i = 0; i < T_BATCHES * T_ELEMS; i++)
        data[i] = i * 7 - 100;
    t_write("x.raw", data, sizeof data);
    pipectl_pipeline *p = t_load(h, t_text);
    if (!p) return;
    pipectl_result *r = t_run(h, p, PIPECTL_OK);
    unsigned long long want = pipectl_output_checksum(r, 0);
    CHECK_STR(pipectl_output_buffer(r, 0), "y");
    CHECK_EQ_INT(pipectl_output_in_memory(r, 0), 0);
    pipectl_result_free(r);
    size_t n = 0;
    char *file = t_slurp(t_path("out/y.raw"), &n);
    CHECK(file && n == sizeof data);
    for (int i = 0; file && i < T_BATCHES * T_ELEMS; i++)
        CHECK_EQ_INT(((int32_t *)file)[i], 2 * data[i]);
    unlink(t_path("out/y.raw"));

    /* The file is gone: a bound input does not read it. */
    unlink(t_path("x.raw"));
    int32_t got[T_BATCHES * T_ELEMS];
    memset(got, 0x55, sizeof got);
    CHECK_EQ_INT(pipectl_bind_input(h, "x", data, sizeof data), PIPECTL_OK);
    CHECK_EQ_INT(pipectl_bind_output(h, "y", got, sizeof got), PIPECTL_OK);
    r = t_run(h, p, PIPECTL_OK);
    CHECK_EQ_INT(pipectl_result_batches(r), T_BATCHES);
    CHECK_EQ_INT(pipectl_output_batches(r, 0), T_BATCHES);
    CHECK_EQ_INT(pipectl_output_checksum(r, 0), want);
    CHECK(pipectl_output_path(r, 0) == NULL);
    CHECK_EQ_INT(pipectl_output_in_memory(r, 0), 1);
    pipectl_result_free(r);
    CHECK(file && memcmp(got, file, sizeof got) == 0);
    CHECK(!t_exists(t_path("out/y.raw")));
    free(file);

    /* Bindings hold for one run: the next one reads the file again (gone: EIO at open). */
    r = t_run(h, p, PIPECTL_EINPUT);
    CHECK_STR(pipectl_errstage(h), "load");
    pipectl_result_free(r);
    pipectl_pipeline_free(p);
}

typedef struct t_seen {
    long long next;
    int fail_at;
    int bad;
    int32_t first[T_ELEMS];
} t_seen;

static int t_take(void *user, const char *buffer, long long batch, const void *data, size_t n)
{
    t_seen *s = user;
    if (strcmp(buffer, "y") != 0 || batch != s->next || n != T_BYTES) s->bad++;
    if (batch == 0) memcpy(s->first, data, sizeof s->first);
    s->next++;
    return batch == s->fail_at ? 42 : 0;
}

/* A callback gets every batch in order; a nonzero return fails the run at that batch. */
static void test_callback(pipectl *h)
{
    int32_t data[T_BATCHES * T_ELEMS];
    for (int i = 0; i < T_BATCHES * T_ELEMS; i++)
        data[i] = i;
    pipectl_pipeline *p = t_load(h, t_text);
    if (!p) return;
    t_seen s = {0, -1, 0, {0}};
    CHECK_EQ_INT(pipectl_bind_input(h, "x", data, sizeof data), PIPECTL_OK);
    CHECK_EQ_INT(pipectl_bind_output_fn(h, "y", t_take, &s), PIPECTL_OK);
    pipectl_result *r = t_run(h, p, PIPECTL_OK);
    CHECK_EQ_INT(s.next, T_BATCHES);
    CHECK_EQ_INT(s.bad, 0);
    CHECK_EQ_INT(s.first[11], 22);
    pipectl_result_free(r);

    s = (t_seen){0, 2, 0, {0}};
    CHECK_EQ_INT(pipectl_bind_input(h, "x", data, sizeof data), PIPECTL_OK);
    CHECK_EQ_INT(pipectl_bind_output_fn(h, "y", t_take, &s), PIPECTL_OK);
    r = t_run(h, p, PIPECTL_ERUNTIME);
    CHECK_STR(pipectl_errstage(h), "save");
    CHECK_EQ_INT(pipectl_errbatch(h), 2);
    CHECK(strstr(pipectl_errmsg(h), "the callback that takes buffer 'y' returned 42") != NULL);
    CHECK_EQ_INT(pipectl_output_batches(r, 0), 2);
    pipectl_result_free(r);
    pipectl_pipeline_free(p);
}

/* Each mistake is refused before anything runs, naming the buffer; nothing is left bound. */
static void test_bind_errors(pipectl *h)
{
    int32_t data[T_BATCHES * T_ELEMS] = {0};
    pipectl_pipeline *p = t_load(h, t_text);
    if (!p) return;
    struct {
        const char *buffer;
        bool output;
        size_t bytes;
        const char *msg;
    } cases[] = {
        {"y_devv", false, sizeof data,
         "error: input 'y_devv': pipeline 'mem' has no buffer 'y_devv' (did you mean 'y_dev'?)"},
        {"x_dev", false, sizeof data,
         "error: input 'x_dev': buffer 'x_dev' is on the device; bind the host buffer it is "
         "copied from (an h2d's 'from')"},
        {"y", false, sizeof data,
         "error: input 'y': no source fills buffer 'y' (stage 'down' writes it); an input stands "
         "in for a source stage: bind the buffer a source's 'to:' names"},
        {"x", true, sizeof data,
         "error: output 'x': no sink writes buffer 'x' (stage 'up' reads it); add a stage "
         "{kind: sink, from: x} (without 'to:' it writes no file)"},
        {"x", false, 4 * T_BYTES,
         "error: input 'x': the memory holds 4 batches of buffer 'x', the run needs 5; give "
         "more, or run fewer"},
        {"x", false, sizeof data - 4,
         "error: input 'x': 236 bytes are not a whole number of batches of buffer 'x' (48 bytes "
         "each: i32 [3, ...])"},
        {"y", true, 2 * T_BYTES,
         "error: output 'y': the memory holds 2 batches of buffer 'y', the run writes 5; give "
         "room for every batch"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int code = cases[i].output ? pipectl_bind_output(h, cases[i].buffer, data, cases[i].bytes)
                                   : pipectl_bind_input(h, cases[i].buffer, data, cases[i].bytes);
        CHECK_EQ_INT(code, PIPECTL_OK);
        pipectl_result *r = (pipectl_result *)1;
        pipectl_plan *plan = NULL;
        CHECK_EQ_INT(pipectl_compile(h, p, 0, 0, &plan), PIPECTL_OK);
        CHECK_EQ_INT(pipectl_run_with(h, plan, NULL, &r), PIPECTL_EINPUT);
        CHECK(r == NULL);
        CHECK_STR(pipectl_errmsg(h), cases[i].msg);
        pipectl_plan_free(plan);
    }
    CHECK_EQ_INT(pipectl_bind_input(h, NULL, data, 4), PIPECTL_EINPUT);
    CHECK_EQ_INT(pipectl_bind_input(h, "x", NULL, 4), PIPECTL_EINPUT);
    CHECK_EQ_INT(pipectl_bind_output(h, "y", data, 0), PIPECTL_EINPUT);
    CHECK_EQ_INT(pipectl_bind_output_fn(h, "y", NULL, NULL), PIPECTL_EINPUT);
    CHECK_STR(pipectl_errmsg(h), "error: pipectl_bind_output_fn: fn is NULL");
    /* Binding twice replaces; unbind drops. */
    CHECK_EQ_INT(pipectl_bind_input(h, "x", data, 4), PIPECTL_OK);
    CHECK_EQ_INT(pipectl_bind_input(h, "x", data, sizeof data), PIPECTL_OK);
    pipectl_unbind(h);
    pipectl_pipeline_free(p);

    /* A text sink's lines take a callback, not memory of a fixed size. */
    const char *text = "pipeline: t\nrun: {batches: 2}\nbuffers:\n"
                       "  s: {where: host, dtype: u8, shape: [2, 8]}\nstages:\n"
                       "  - {name: gen, kind: source, to: s, generator: constant, value: 65}\n"
                       "  - {name: lines, kind: sink, from: s, to: out/s.txt}\n";
    p = t_load(h, text);
    if (!p) return;
    char room[64];
    CHECK_EQ_INT(pipectl_bind_output(h, "s", room, sizeof room), PIPECTL_OK);
    pipectl_result *r = t_run(h, p, PIPECTL_EINPUT);
    CHECK(r == NULL);
    CHECK(strstr(pipectl_errmsg(h), "sink 'lines' writes buffer 's' as text lines") != NULL);
    pipectl_pipeline_free(p);
}

/* An input another stage writes too is copied, never written where the caller keeps it. */
static void test_not_in_place(pipectl *h)
{
    const char *text = "pipeline: rw\nrun: {batches: 3, depth: 2}\nbuffers:\n"
                       "  a: {where: host, dtype: i32, shape: [4]}\nstages:\n"
                       "  - {name: gen, kind: source, to: a, generator: constant}\n"
                       "  - {name: bump, kind: lua, reads: [a], writes: [a], code: \"function "
                       "run(batch, opts, bufs) for i = 1, #bufs.a do bufs.a[i] = bufs.a[i] + 1 end "
                       "end\"}\n"
                       "  - {name: save, kind: sink, from: a}\n";
    pipectl_pipeline *p = t_load(h, text);
    if (!p) return;
    int32_t in[12], out[12];
    for (int i = 0; i < 12; i++)
        in[i] = i;
    CHECK_EQ_INT(pipectl_bind_input(h, "a", in, sizeof in), PIPECTL_OK);
    CHECK_EQ_INT(pipectl_bind_output(h, "a", out, sizeof out), PIPECTL_OK);
    pipectl_result *r = t_run(h, p, PIPECTL_OK);
    for (int i = 0; i < 12; i++) {
        CHECK_EQ_INT(in[i], i);
        CHECK_EQ_INT(out[i], i + 1);
    }
    pipectl_result_free(r);
    pipectl_pipeline_free(p);
}

/* A persistent buffer's contents from memory, in place of its init; exactly its size. */
static void test_persistent(pipectl *h)
{
    const char *text = "pipeline: w\nrun: {batches: 3}\nbuffers:\n"
                       "  w: {where: host, dtype: i32, shape: [4], persistent: true, init: zeros}\n"
                       "  w_dev: {where: device, dtype: i32, shape: [4]}\n"
                       "  y: {where: host, dtype: i32, shape: [4]}\nstages:\n"
                       "  - {name: up, kind: h2d, from: w, to: w_dev}\n"
                       "  - {name: down, kind: d2h, from: w_dev, to: y}\n"
                       "  - {name: save, kind: sink, from: y}\n";
    pipectl_pipeline *p = t_load(h, text);
    if (!p) return;
    int32_t w[4] = {1, 2, 3, 4}, y[12] = {0};
    CHECK_EQ_INT(pipectl_bind_input(h, "w", w, sizeof w), PIPECTL_OK);
    CHECK_EQ_INT(pipectl_bind_output(h, "y", y, sizeof y), PIPECTL_OK);
    pipectl_result *r = t_run(h, p, PIPECTL_OK);
    for (int i = 0; i < 12; i++)
        CHECK_EQ_INT(y[i], i % 4 + 1);
    pipectl_result_free(r);
    CHECK_EQ_INT(pipectl_bind_input(h, "w", w, 8), PIPECTL_OK);
    r = t_run(h, p, PIPECTL_EINPUT);
    CHECK_STR(pipectl_errmsg(h), "error: input 'w': persistent buffer 'w' is 16 bytes (i32), the "
                                 "memory 8; give exactly its contents");
    CHECK_EQ_INT(pipectl_bind_output(h, "w", w, sizeof w), PIPECTL_OK);
    r = t_run(h, p, PIPECTL_EINPUT);
    CHECK(strstr(pipectl_errmsg(h), "buffer 'w' is persistent") != NULL);
    pipectl_pipeline_free(p);
}

static void t_count(void *user, long long done, long long total)
{
    long long *seen = user;
    if (done == seen[0] + 1 && total == T_BATCHES)
        seen[0] = done;
    else
        seen[1]++;
}

/* Options, old-size structs, statistics. */
static void test_options_stats(pipectl *h)
{
    int32_t data[T_BATCHES * T_ELEMS] = {0};
    pipectl_pipeline *p = t_load(h, t_text);
    if (!p) return;
    pipectl_plan *plan = NULL;
    CHECK_EQ_INT(pipectl_compile(h, p, 0, 0, &plan), PIPECTL_OK);

    long long seen[2] = {0, 0};
    pipectl_run_options o = PIPECTL_RUN_OPTIONS_INIT;
    o.executor = PIPECTL_EXECUTOR_HOST;
    o.workers = 2;
    o.on_batch = t_count;
    o.user = seen;
    o.trace = t_path("trace.json");
    CHECK_EQ_INT(pipectl_bind_input(h, "x", data, sizeof data), PIPECTL_OK);
    pipectl_result *r = NULL;
    CHECK_EQ_INT(pipectl_run_with(h, plan, &o, &r), PIPECTL_OK);
    CHECK_EQ_INT(seen[0], T_BATCHES);
    CHECK_EQ_INT(seen[1], 0);
    CHECK(t_exists(t_path("trace.json")));

    pipectl_stats st = {.size = sizeof st};
    CHECK_EQ_INT(pipectl_result_stats(r, &st), PIPECTL_OK);
    CHECK_EQ_INT(st.batches, T_BATCHES);
    CHECK_EQ_INT(st.batches_planned, T_BATCHES);
    CHECK_EQ_INT(st.depth, 2);
    CHECK_EQ_INT(st.workers, 2);
    CHECK_STR(st.executor, "host");
    CHECK_STR(st.device, "CPU");
    CHECK(st.wall_s > 0 && st.per_batch_s > 0);
    CHECK_EQ_INT(st.bytes_in_per_batch, T_BYTES);
    CHECK_EQ_INT(st.bytes_out_per_batch, T_BYTES);
    CHECK(st.bound_s > 0 && st.bound_engine && st.bound_stage && st.achieved > 0);
    CHECK_EQ_INT(st.stages, 5);
    CHECK(st.engines >= 1);
    const char *order[] = {"load", "up", "twice", "down", "save"};
    for (int i = 0; i < 5; i++) {
        pipectl_stage_stats ss = {.size = sizeof ss};
        CHECK_EQ_INT(pipectl_result_stage_stats(r, i, &ss), PIPECTL_OK);
        CHECK_STR(ss.name, order[i]);
        CHECK_EQ_INT(ss.count, T_BATCHES);
        CHECK(ss.mean_s > 0 && ss.p99_s >= ss.p50_s && ss.max_s >= ss.min_s);
    }
    pipectl_stage_stats ss = {.size = sizeof ss};
    CHECK_EQ_INT(pipectl_result_stage_stats(r, 1, &ss), PIPECTL_OK);
    CHECK_STR(ss.kind, "h2d");
    CHECK_STR(ss.engine, "h2d");
    CHECK_EQ_INT(pipectl_result_stage_stats(r, 5, &ss), PIPECTL_EINPUT);
    pipectl_engine_stats es = {.size = sizeof es};
    CHECK_EQ_INT(pipectl_result_engine_stats(r, 0, &es), PIPECTL_OK);
    CHECK(es.name && es.engine && es.stages >= 1 && es.busy_s > 0);
    CHECK_EQ_INT(pipectl_result_engine_stats(r, st.engines, &es), PIPECTL_EINPUT);
    /* The result outlives its plan and pipeline. */
    pipectl_plan_free(plan);
    pipectl_pipeline_free(p);
    CHECK_EQ_INT(pipectl_result_stats(r, &st), PIPECTL_OK);
    CHECK_EQ_INT(st.stages, 5);
    pipectl_result_free(r);

    /* A caller built against a smaller struct: fields past its size are the defaults. */
    p = t_load(h, t_text);
    if (!p) return;
    CHECK_EQ_INT(pipectl_compile(h, p, 0, 0, &plan), PIPECTL_OK);
    o = (pipectl_run_options)PIPECTL_RUN_OPTIONS_INIT;
    o.executor = PIPECTL_EXECUTOR_HOST;
    o.graphs = 99; /* past the size given: not read */
    o.size = offsetof(pipectl_run_options, graphs);
    CHECK_EQ_INT(pipectl_bind_input(h, "x", data, sizeof data), PIPECTL_OK);
    CHECK_EQ_INT(pipectl_run_with(h, plan, &o, &r), PIPECTL_OK);
    pipectl_result_free(r);
    o.size = sizeof o;
    CHECK_EQ_INT(pipectl_run_with(h, plan, &o, &r), PIPECTL_EINPUT);
    CHECK_STR(pipectl_errmsg(h),
              "error: pipectl_run_with: graphs is 99; use one of PIPECTL_GRAPHS_*");
    o.graphs = 0;
    o.fail_stage = "twice";
    o.fail_batch = 3;
    CHECK_EQ_INT(pipectl_bind_input(h, "x", data, sizeof data), PIPECTL_OK);
    CHECK_EQ_INT(pipectl_run_with(h, plan, &o, &r), PIPECTL_ERUNTIME);
    CHECK_STR(pipectl_errstage(h), "twice");
    CHECK_EQ_INT(pipectl_errbatch(h), 3);
    CHECK(r && pipectl_result_batches(r) <= 3);
    pipectl_result_free(r);
    o.fail_stage = "nope";
    CHECK_EQ_INT(pipectl_run_with(h, plan, &o, &r), PIPECTL_EINPUT);
    CHECK_STR(pipectl_errmsg(h),
              "error: pipectl_run_with: fail_stage 'nope' is not a stage of the pipeline");
    pipectl_plan_free(plan);
    pipectl_pipeline_free(p);
}

typedef struct t_job {
    const pipectl_pipeline *p;
    const int32_t *in;
    int32_t out[T_BATCHES * T_ELEMS];
    unsigned long long sum;
    int code;
} t_job;

static void *t_run_one(void *arg)
{
    t_job *j = arg;
    pipectl *h = NULL;
    if (pipectl_open(&h) != PIPECTL_OK) return NULL;
    pipectl_plan *plan = NULL;
    pipectl_result *r = NULL;
    pipectl_run_options o = PIPECTL_RUN_OPTIONS_INIT;
    o.executor = PIPECTL_EXECUTOR_HOST;
    j->code = pipectl_compile(h, j->p, 0, 0, &plan);
    if (j->code == PIPECTL_OK) j->code = pipectl_bind_input(h, "x", j->in, sizeof j->out);
    if (j->code == PIPECTL_OK) j->code = pipectl_bind_output(h, "y", j->out, sizeof j->out);
    if (j->code == PIPECTL_OK) j->code = pipectl_run_with(h, plan, &o, &r);
    j->sum = pipectl_output_checksum(r, 0);
    pipectl_result_free(r);
    pipectl_plan_free(plan);
    pipectl_close(h);
    return NULL;
}

/* Two threads run plans of one pipeline at once, each on its own handle and memory. */
static void test_threads(pipectl *h)
{
    static int32_t a_in[T_BATCHES * T_ELEMS], b_in[T_BATCHES * T_ELEMS];
    for (int i = 0; i < T_BATCHES * T_ELEMS; i++) {
        a_in[i] = i;
        b_in[i] = -i;
    }
    pipectl_pipeline *p = t_load(h, t_text);
    if (!p) return;
    static t_job a, b;
    a = (t_job){.p = p, .in = a_in};
    b = (t_job){.p = p, .in = b_in};
    pthread_t ta, tb;
    CHECK(pthread_create(&ta, NULL, t_run_one, &a) == 0);
    CHECK(pthread_create(&tb, NULL, t_run_one, &b) == 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    CHECK_EQ_INT(a.code, PIPECTL_OK);
    CHECK_EQ_INT(b.code, PIPECTL_OK);
    for (int i = 0; i < T_BATCHES * T_ELEMS; i++) {
        if (a.out[i] != 2 * i || b.out[i] != -2 * i) {
            CHECK(a.out[i] == 2 * i && b.out[i] == -2 * i);
            break;
        }
    }
    CHECK(a.sum != b.sum);
    pipectl_pipeline_free(p);
}

int main(void)
{
    if (!mkdtemp(t_dir)) return 1;
    test_version();
    pipectl *h = NULL;
    CHECK_EQ_INT(pipectl_open(&h), PIPECTL_OK);
    test_load(h);
    test_memory(h);
    test_callback(h);
    test_bind_errors(h);
    test_persistent(h);
    test_not_in_place(h);
    test_options_stats(h);
    test_threads(h);
    pipectl_close(h);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", t_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", t_dir);
    PL_TEST_DONE();
}
