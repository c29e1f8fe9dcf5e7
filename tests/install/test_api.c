/* test_api: the public API (pipectl.h) through libpipectl alone, as an embedder sees it: error
 * records (code, message, position or stage and batch) that agree with the messages word for word,
 * over the whole bad-input corpus; load, compile, run and the results; checksums that do not
 * depend on depth; interrupt; bad arguments; two threads compiling one pipeline. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <pipectl.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "pl_test.h"

static char t_dir[] = "/tmp/pipectl_test_api_XXXXXX";

static char *t_write(const char *name, const char *text)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", t_dir, name);
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
    return path;
}

static char *t_slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = calloc(1, 1 << 16);
    size_t n = buf ? fread(buf, 1, (1 << 16) - 1, f) : 0;
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* 6 batches: a lua stage writes the batch index (and fails on batch `fail_at` when >= 0), a sink
 * writes the file, another only checksums. */
static const char *t_pipeline(int fail_at)
{
    static char text[2048];
    snprintf(text, sizeof text,
             "pipeline: api\n"
             "run: {batches: 6, depth: 2}\n"
             "buffers:\n"
             "  a: {dtype: i32, shape: [4]}\n"
             "stages:\n"
             "  - {name: gen, kind: lua, writes: [a], code: \"function run(batch, opts, bufs) "
             "if batch == %d then error('boom') end bufs.a:fill(batch * 3) end\"}\n"
             "  - {name: save, kind: sink, from: a, to: out/a.npy}\n"
             "  - {name: sums, kind: sink, from: a}\n",
             fail_at);
    return text;
}

static void test_codes(void)
{
    CHECK_STR(pipectl_errname(PIPECTL_ELUA), "ELUA");
    CHECK_STR(pipectl_errstr(PIPECTL_EINPUT), "bad input");
    CHECK_STR(pipectl_errname(99), "EUNKNOWN");
    CHECK_EQ_INT(pipectl_exit_code(PIPECTL_OK), 0);
    CHECK_EQ_INT(pipectl_exit_code(PIPECTL_EINPUT), 2);
    CHECK_EQ_INT(pipectl_exit_code(PIPECTL_EIO), 1);
    CHECK_EQ_INT(pipectl_exit_code(PIPECTL_EINTR), 130);
    CHECK(pipectl_version()[0] >= '0' && pipectl_version()[0] <= '9');
    CHECK_EQ_INT(pipectl_errcode(NULL), PIPECTL_ENOMEM);
    CHECK(pipectl_errmsg(NULL)[0] != '\0');
    /* Every free function takes NULL. */
    pipectl_close(NULL);
    pipectl_pipeline_free(NULL);
    pipectl_plan_free(NULL);
    pipectl_result_free(NULL);
    pipectl_free(NULL);
}

/* Every case of the bad-input corpus: the message is what `pipectl check` prints first (the
 * .expected file's first line, where the folder's own path is written <bad>: check lists every
 * error, the API returns the first), and the record's position is the one the message starts
 * with. Cases made bad by command-line arguments (NAME.args) are the CLI's. */
static void test_bad_corpus(pipectl *h)
{
    char cwd[4096], here[4096];
    if (!getcwd(cwd, sizeof cwd) || chdir("tests/parser/bad") != 0 || !getcwd(here, sizeof here)) {
        CHECK(!"tests/parser/bad not found (run from the source tree)");
        return;
    }
    DIR *d = opendir(".");
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".yaml") != 0) continue;
        char expected[512], args[512];
        snprintf(expected, sizeof expected, "%.*s.expected", (int)(len - 5), e->d_name);
        snprintf(args, sizeof args, "%.*s.args", (int)(len - 5), e->d_name);
        if (access(args, F_OK) == 0) continue;
        char *want = t_slurp(expected);
        if (!want) continue;
        char *nl = strchr(want, '\n');
        if (nl) nl[1] = '\0';
        n++;
        pipectl_pipeline *p = (pipectl_pipeline *)1;
        int code = pipectl_load(h, e->d_name, &p);
        CHECK(p == NULL);
        CHECK_EQ_INT(pipectl_exit_code(code), 2);
        CHECK_EQ_INT(pipectl_errcode(h), code);
        char got[8192];
        const char *msg = pipectl_errmsg(h), *at = strstr(msg, here);
        if (at)
            snprintf(got, sizeof got, "%.*s<bad>%s\n", (int)(at - msg), msg, at + strlen(here));
        else
            snprintf(got, sizeof got, "%s\n", msg);
        if (strcmp(got, want) != 0) {
            fprintf(stderr, "%s: message differs:\n  got:  %s  want: %s", e->d_name, got, want);
            CHECK(!"message as pipectl check prints it");
        }
        char where[1024];
        if (pipectl_errfile(h)) {
            snprintf(where, sizeof where, "%s:%d:%d: error: ", pipectl_errfile(h),
                     pipectl_errline(h), pipectl_errcol(h));
            CHECK(pipectl_errline(h) > 0 && pipectl_errcol(h) > 0);
        } else {
            snprintf(where, sizeof where, "error: ");
            CHECK_EQ_INT(pipectl_errline(h), 0);
        }
        if (strncmp(pipectl_errmsg(h), where, strlen(where)) != 0) {
            fprintf(stderr, "%s: record says '%s', message is '%s'\n", e->d_name, where,
                    pipectl_errmsg(h));
            CHECK(!"the record's position is the message's");
        }
        CHECK(pipectl_errstage(h) == NULL);
        CHECK_EQ_INT(pipectl_errbatch(h), -1);
        free(want);
    }
    if (d) closedir(d);
    CHECK(n > 50);
    CHECK(chdir(cwd) == 0);
}

static void test_run(pipectl *h)
{
    pipectl_pipeline *p = NULL;
    CHECK_EQ_INT(pipectl_load(h, t_write("ok.yaml", t_pipeline(-1)), &p), PIPECTL_OK);
    CHECK_EQ_INT(pipectl_errcode(h), PIPECTL_OK);
    CHECK_STR(pipectl_errmsg(h), "");
    CHECK_STR(pipectl_pipeline_name(p), "api");
    CHECK_EQ_INT(pipectl_pipeline_stages(p), 3);

    unsigned long long sum[2] = {0, 0}, sums[2] = {0, 0};
    for (int depth = 1; depth <= 2; depth++) {
        pipectl_plan *plan = NULL;
        CHECK_EQ_INT(pipectl_compile(h, p, 0, depth == 1 ? 1 : 0, &plan), PIPECTL_OK);
        CHECK_EQ_INT(pipectl_plan_depth(plan), depth);
        CHECK_EQ_INT(pipectl_plan_batches(plan), 6);
        char *text = NULL;
        CHECK_EQ_INT(pipectl_plan_describe(h, plan, &text), PIPECTL_OK);
        CHECK(text && strstr(text, "plan for pipeline 'api'") == text);
        pipectl_free(text);
        pipectl_result *r = NULL;
        CHECK_EQ_INT(pipectl_run(h, plan, PIPECTL_EXECUTOR_HOST, depth, &r), PIPECTL_OK);
        CHECK_STR(pipectl_result_executor(r), "host");
        CHECK_STR(pipectl_result_note(r), "");
        CHECK_EQ_INT(pipectl_result_batches(r), 6);
        CHECK(pipectl_result_seconds(r) > 0);
        CHECK_EQ_INT(pipectl_result_outputs(r), 2);
        CHECK_STR(pipectl_output_stage(r, 0), "save");
        CHECK(pipectl_output_path(r, 0) && strstr(pipectl_output_path(r, 0), "out/a.npy"));
        CHECK_STR(pipectl_output_stage(r, 1), "sums");
        CHECK(pipectl_output_path(r, 1) == NULL);
        CHECK_EQ_INT(pipectl_output_batches(r, 0), 6);
        CHECK_EQ_INT(pipectl_output_complete(r, 0), 1);
        CHECK(pipectl_output_batch_checksum(r, 0, 5) != 0);
        CHECK(pipectl_output_batch_checksum(r, 0, 6) == 0);
        CHECK(pipectl_output_stage(r, 2) == NULL && pipectl_output_batches(r, -1) == -1);
        sum[depth - 1] = pipectl_output_checksum(r, 0);
        sums[depth - 1] = pipectl_output_checksum(r, 1);
        pipectl_result_free(r);
        pipectl_plan_free(plan);
    }
    CHECK(sum[0] != 0 && sum[0] == sum[1] && sums[0] == sum[0] && sums[1] == sum[1]);

    /* The file's batches replaced; auto says what it picked. */
    pipectl_plan *plan = NULL;
    CHECK_EQ_INT(pipectl_compile(h, p, 3, 0, &plan), PIPECTL_OK);
    pipectl_result *r = NULL;
    int code = pipectl_run(h, plan, PIPECTL_EXECUTOR_AUTO, 0, &r);
    CHECK_EQ_INT(code, PIPECTL_OK);
    CHECK_EQ_INT(pipectl_result_batches(r), 3);
    CHECK(strncmp(pipectl_result_note(r), "executor: ", 10) == 0);
    pipectl_result_free(r);

    /* An interrupt asked for before the run stops it at once; the next run is not affected. */
    pipectl_interrupt(h);
    code = pipectl_run(h, plan, PIPECTL_EXECUTOR_HOST, 0, &r);
    CHECK_EQ_INT(code, PIPECTL_EINTR);
    CHECK_EQ_INT(pipectl_errcode(h), PIPECTL_EINTR);
    CHECK(pipectl_result_batches(r) < 3);
    pipectl_result_free(r);
    CHECK_EQ_INT(pipectl_run(h, plan, PIPECTL_EXECUTOR_HOST, 0, &r), PIPECTL_OK);
    CHECK_EQ_INT(pipectl_result_batches(r), 3);
    pipectl_result_free(r);

    /* The GPU executor: runs where there is a GPU, else ENODEV with no result. */
    r = (pipectl_result *)1;
    code = pipectl_run(h, plan, PIPECTL_EXECUTOR_GPU, 0, &r);
    if (code == PIPECTL_ENODEV)
        CHECK(r == NULL && strncmp(pipectl_errmsg(h), "error: ", 7) == 0);
    else
        CHECK_EQ_INT(code, PIPECTL_OK);
    pipectl_result_free(r);

    /* Bad arguments: EINPUT, nothing made. */
    pipectl_plan *bad = (pipectl_plan *)1;
    CHECK_EQ_INT(pipectl_compile(h, p, -1, 0, &bad), PIPECTL_EINPUT);
    CHECK(bad == NULL);
    CHECK_STR(pipectl_errmsg(h), "error: batches is -1; it must be 0 (the pipeline's run.batches) "
                                 "or between 1 and 1099511627776");
    CHECK_EQ_INT(pipectl_compile(h, p, 0, 65, &bad), PIPECTL_EINPUT);
    CHECK_STR(pipectl_errmsg(h),
              "error: depth is 65; it must be 0 (the pipeline's run.depth), -1 (auto) or between 1 "
              "and 64");
    CHECK_EQ_INT(pipectl_run(h, plan, 7, 0, &r), PIPECTL_EINPUT);
    CHECK(r == NULL);
    CHECK_EQ_INT(pipectl_run(h, plan, PIPECTL_EXECUTOR_HOST, 65, &r), PIPECTL_EINPUT);
    CHECK_EQ_INT(pipectl_run(h, NULL, PIPECTL_EXECUTOR_HOST, 0, &r), PIPECTL_EINPUT);
    CHECK_STR(pipectl_errmsg(h), "error: pipectl_run: the plan is NULL");
    pipectl_plan_free(plan);
    pipectl_pipeline_free(p);
    CHECK_EQ_INT(pipectl_load(h, NULL, &p), PIPECTL_EINPUT);
    CHECK(p == NULL);
}

/* A stage that fails at run time: the record names the stage and the batch, the message says the
 * same, and the batches before it are kept. */
static void test_run_error(pipectl *h)
{
    pipectl_pipeline *p = NULL;
    pipectl_plan *plan = NULL;
    pipectl_result *r = NULL;
    CHECK_EQ_INT(pipectl_load(h, t_write("fail.yaml", t_pipeline(3)), &p), PIPECTL_OK);
    CHECK_EQ_INT(pipectl_compile(h, p, 0, 0, &plan), PIPECTL_OK);
    CHECK_EQ_INT(pipectl_run(h, plan, PIPECTL_EXECUTOR_HOST, 2, &r), PIPECTL_ELUA);
    CHECK_EQ_INT(pipectl_errcode(h), PIPECTL_ELUA);
    CHECK_STR(pipectl_errstage(h), "gen");
    CHECK_EQ_INT(pipectl_errbatch(h), 3);
    CHECK(pipectl_errfile(h) == NULL);
    CHECK(strncmp(pipectl_errmsg(h), "stage 'gen', batch 3: ", 22) == 0);
    CHECK(strstr(pipectl_errmsg(h), "boom") != NULL);
    CHECK(r != NULL);
    /* Batches 0-2 ran; each sink kept those it wrote (one may be a batch ahead of the other),
     * and the result counts those every stage finished. */
    CHECK(pipectl_result_batches(r) <= 3);
    CHECK(pipectl_output_batches(r, 0) >= pipectl_result_batches(r));
    CHECK(pipectl_output_batches(r, 0) <= 3);
    CHECK_EQ_INT(pipectl_output_complete(r, 0), 1);
    pipectl_result_free(r);
    pipectl_plan_free(plan);
    pipectl_pipeline_free(p);

    /* A sink that cannot create its file fails when the run starts: the record has the
     * position of `to:` and the stage, and no batch. */
    char text[2048];
    snprintf(text, sizeof text, "%s", t_pipeline(-1));
    char *to = strstr(text, "out/a.npy");
    memcpy(to, "ok.yaml/a", 9); /* a file as a folder */
    CHECK_EQ_INT(pipectl_load(h, t_write("nofile.yaml", text), &p), PIPECTL_OK);
    CHECK_EQ_INT(pipectl_compile(h, p, 0, 0, &plan), PIPECTL_OK);
    int code = pipectl_run(h, plan, PIPECTL_EXECUTOR_HOST, 0, &r);
    CHECK_EQ_INT(code, PIPECTL_EIO);
    CHECK_STR(pipectl_errstage(h), "save");
    CHECK_EQ_INT(pipectl_errbatch(h), -1);
    CHECK(pipectl_errfile(h) && strstr(pipectl_errfile(h), "nofile.yaml"));
    CHECK_EQ_INT(pipectl_errline(h), 7);
    CHECK(strstr(pipectl_errmsg(h), "nofile.yaml:7:") &&
          strstr(pipectl_errmsg(h), "error: sink 'save'"));
    pipectl_result_free(r);
    pipectl_plan_free(plan);
    pipectl_pipeline_free(p);
}

typedef struct t_job {
    const pipectl_pipeline *p;
    char *first;
    int mismatches;
} t_job;

static void *t_compile_many(void *arg)
{
    t_job *j = arg;
    pipectl *h = NULL;
    if (pipectl_open(&h) != PIPECTL_OK) return NULL;
    for (int i = 0; i < 20; i++) {
        pipectl_plan *plan = NULL;
        char *text = NULL;
        if (pipectl_compile(h, j->p, 0, 1 + i % 3, &plan) != PIPECTL_OK ||
            pipectl_plan_describe(h, plan, &text) != PIPECTL_OK)
            j->mismatches++;
        else if (i == 0)
            j->first = text, text = NULL;
        pipectl_free(text);
        pipectl_plan_free(plan);
    }
    pipectl_close(h);
    return NULL;
}

/* A .lua file goes to the Lua front end: the same pipeline as the YAML quickstart. */
static void test_lua(pipectl *h)
{
    pipectl_pipeline *y = NULL, *l = NULL;
    CHECK_EQ_INT(pipectl_load(h, "pipelines/quickstart.yaml", &y), PIPECTL_OK);
    CHECK_EQ_INT(pipectl_load(h, "pipelines/quickstart.lua", &l), PIPECTL_OK);
    CHECK_EQ_INT(pipectl_pipeline_stages(l), pipectl_pipeline_stages(y));
    CHECK_STR(pipectl_pipeline_name(l), pipectl_pipeline_name(y));
    pipectl_pipeline_free(y);
    pipectl_pipeline_free(l);
}

static void test_threads(pipectl *h)
{
    pipectl_pipeline *p = NULL;
    CHECK_EQ_INT(pipectl_load(h, "pipelines/diamond.yaml", &p), PIPECTL_OK);
    t_job a = {p, NULL, 0}, b = {p, NULL, 0};
    pthread_t ta, tb;
    CHECK(pthread_create(&ta, NULL, t_compile_many, &a) == 0);
    CHECK(pthread_create(&tb, NULL, t_compile_many, &b) == 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    CHECK_EQ_INT(a.mismatches + b.mismatches, 0);
    CHECK(a.first && b.first && strcmp(a.first, b.first) == 0);
    pipectl_free(a.first);
    pipectl_free(b.first);
    pipectl_pipeline_free(p);
}

int main(void)
{
    if (!mkdtemp(t_dir)) return 1;
    test_codes();
    pipectl *h = NULL;
    CHECK_EQ_INT(pipectl_open(&h), PIPECTL_OK);
    test_bad_corpus(h);
    test_run(h);
    test_run_error(h);
    test_lua(h);
    test_threads(h);
    pipectl_close(h);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", t_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", t_dir);
    PL_TEST_DONE();
}
