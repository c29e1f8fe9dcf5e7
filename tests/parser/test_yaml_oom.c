/* test_yaml_oom: fails every allocation of the YAML front end in turn (SQLite's fault tests):
 * each load must then return PL_ENOMEM with a message, set *out to NULL, and free everything it
 * allocated. Allocations are counted through the linker's --wrap (see CMakeLists.txt), so this
 * sees pipectl's own mallocs (tree nodes, spec arena), not libyaml's. */
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>

#include "pl_parse.h"
#include "pl_test.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
void __wrap_free(void *p);

static long fail_at = -1; /* the allocation number that fails, -1: none */
static long n_allocs, live;

static bool fail_now(void)
{
    return n_allocs++ == fail_at;
}

void *__wrap_malloc(size_t n)
{
    if (fail_now()) return NULL;
    void *p = __real_malloc(n);
    if (p) live++;
    return p;
}

void *__wrap_calloc(size_t n, size_t size)
{
    if (fail_now()) return NULL;
    void *p = __real_calloc(n, size);
    if (p) live++;
    return p;
}

void *__wrap_realloc(void *p, size_t n)
{
    if (fail_now()) return NULL;
    void *q = __real_realloc(p, n);
    if (q && !p) live++;
    return q;
}

void __wrap_free(void *p)
{
    if (p) live--;
    __real_free(p);
}

static const char text[] =
    "pipeline: oom\n"
    "run: {batches: 4, depth: 2}\n"
    "buffers:\n"
    "  x_host: {where: host, dtype: f32, shape: [256]}\n"
    "  x_dev: {where: device, shape: [256]}\n"
    "  tab: {dtype: i32, shape: [4, 4], persistent: true, init: file, file: t.npy}\n"
    "stages:\n"
    "  - {name: gen, kind: source, to: x_host}\n"
    "  - {name: up, kind: h2d, from: x_host, to: x_dev, after: [gen]}\n"
    "  - {name: k, kind: kernel, op: scale, reads: [x_dev], writes: [x_dev], extra: [1, 2, 3]}\n"
    "  - {name: dup, kind: lua, code: x, code: y}\n"; /* ends in an error: both paths fail */

int main(void)
{
    /* A run without failures: how many allocations a load makes, and nothing left behind. */
    pl_error err;
    pl_spec *spec = NULL;
    long before = live;
    pl_status st = pl_yaml_load_string("oom.yaml", text, sizeof text - 1, &spec, &err);
    CHECK_EQ_INT(st, PL_EINPUT); /* the duplicate 'code' */
    CHECK_EQ_INT(live, before);
    long total = n_allocs;
    CHECK(total > 10);
    int ok_runs = 0;
    for (long k = 0; k < total; k++) {
        n_allocs = 0;
        fail_at = k;
        before = live;
        spec = (pl_spec *)&err;
        pl_error_clear(&err);
        st = pl_yaml_load_string("oom.yaml", text, sizeof text - 1, &spec, &err);
        fail_at = -1;
        if (st != PL_ENOMEM)
            fprintf(stderr, "allocation %ld failed: status %s: %s\n", k, pl_status_name(st),
                    err.msg);
        CHECK_EQ_INT(st, PL_ENOMEM);
        CHECK(spec == NULL);
        CHECK(strstr(err.msg, "error: out of memory") == err.msg);
        if (live != before)
            fprintf(stderr, "allocation %ld failed: %ld blocks leaked\n", k, live - before);
        CHECK_EQ_INT(live, before);
        ok_runs++;
    }
    printf("%d allocation failures, each reported as out of memory without leaks\n", ok_runs);
    PL_TEST_DONE();
}
