/* test_plan_threads: planning keeps no global state. Two threads compile plans at the same time,
 * of two different pipelines and of one shared pipeline, and every plan's listing is identical to
 * the one compiled alone. (Under ThreadSanitizer, .ci/run, a shared variable would also be
 * reported as a race.) */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>

#include "pl_parse.h"
#include "pl_plan.h"
#include "pl_plan_dump.h"
#include "pl_test.h"

enum { ROUNDS = 40 };

/* A generated pipeline with many cross-batch deps (each kernel writes a per-batch buffer and one
 * in `every` also a persistent one), so the sort of those deps has plenty to do. */
static char *t_yaml(int kernels, int every)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) exit(1);
    fprintf(f, "pipeline: gen%d\nrun: {batches: 8, depth: %d}\nbuffers:\n", kernels, 2 + every % 3);
    fprintf(f, "  x: {where: host, dtype: f32, shape: [16]}\n");
    fprintf(f, "  y: {where: host, dtype: f32, shape: [16]}\n");
    for (int i = 0; i <= kernels; i++)
        fprintf(f, "  d%d: {where: device, dtype: f32, shape: [16]}\n", i);
    for (int i = 0; i <= kernels; i += every)
        fprintf(f,
                "  p%d: {where: device, dtype: f32, shape: [16], persistent: true, init: zeros}\n",
                i);
    fprintf(f, "stages:\n  - {name: gen, kind: source, to: x, generator: random}\n");
    fprintf(f, "  - {name: up, kind: h2d, from: x, to: d0}\n");
    for (int i = 1; i <= kernels; i++) {
        int other = (i * 7) % i; /* an earlier buffer: a DAG, not a chain */
        if (i % every == 0)
            fprintf(f, "  - {name: k%d, kind: kernel, op: add, reads: [d%d, p%d], writes: [p%d]}\n",
                    i, i - 1, i, i);
        fprintf(f, "  - {name: j%d, kind: kernel, op: add, reads: [d%d, d%d], writes: [d%d]}\n", i,
                i - 1, other, i);
    }
    fprintf(f, "  - {name: down, kind: d2h, from: d%d, to: y}\n", kernels);
    fprintf(f, "  - {name: save, kind: sink, from: y}\n");
    fclose(f);
    return text;
}

static pl_spec *t_load(const char *name, const char *text)
{
    pl_spec *s = NULL;
    pl_error err;
    if (pl_yaml_load_string(name, text, strlen(text), &s, &err) != PL_OK ||
        pl_spec_check(s, &err) != PL_OK) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
    return s;
}

/* The plan's listing (what `pipectl plan` prints), malloc'd; NULL when compiling failed. */
static char *t_listing(const pl_spec *s)
{
    pl_plan *p = NULL;
    pl_error err;
    if (pl_plan_compile(s, &p, &err) != PL_OK) return NULL;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f) {
        pl_plan_dump(p, f);
        fclose(f);
    }
    pl_plan_free(p);
    return text;
}

typedef struct t_job {
    const pl_spec *spec;
    const char *want;
    int mismatches;
} t_job;

static void *t_plan_many(void *arg)
{
    t_job *j = arg;
    for (int r = 0; r < ROUNDS; r++) {
        char *got = t_listing(j->spec);
        if (!got || strcmp(got, j->want) != 0) j->mismatches++;
        free(got);
    }
    return NULL;
}

static void t_two_threads(const pl_spec *a, const char *want_a, const pl_spec *b,
                          const char *want_b)
{
    t_job ja = {a, want_a, 0}, jb = {b, want_b, 0};
    pthread_t ta, tb;
    CHECK(pthread_create(&ta, NULL, t_plan_many, &ja) == 0);
    CHECK(pthread_create(&tb, NULL, t_plan_many, &jb) == 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    CHECK_EQ_INT(ja.mismatches, 0);
    CHECK_EQ_INT(jb.mismatches, 0);
}

int main(void)
{
    char *ya = t_yaml(120, 3), *yb = t_yaml(45, 2);
    pl_spec *a = t_load("a.yaml", ya), *b = t_load("b.yaml", yb);
    char *want_a = t_listing(a), *want_b = t_listing(b);
    CHECK(want_a && want_b);
    if (!want_a || !want_b) PL_TEST_DONE();
    CHECK(strcmp(want_a, want_b) != 0);

    t_two_threads(a, want_a, b, want_b); /* two pipelines at once */
    t_two_threads(a, want_a, a, want_a); /* one pipeline (read-only, shared) from two threads */

    free(want_a);
    free(want_b);
    pl_spec_free(a);
    pl_spec_free(b);
    free(ya);
    free(yb);
    PL_TEST_DONE();
}
