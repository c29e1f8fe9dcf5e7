/* bench_lua: the per-batch cost of a lua stage's call (run_host on one worker state: reseeding
 * math.random, the opts table, one view per buffer, the protected call, the budget hook), for a
 * trivial function and a few buffer counts. Usage: bench_lua [calls]   (default 200000)
 * Prints one line per case: ns per batch (median of 5 runs). Through the whole host executor:
 *   local p = pipectl.pipeline{name = "trivial", run = {batches = 20000, depth = 3}}
 *   p:buffer("a", {dtype = "f32", shape = {256}})
 *   p:stage{name = "t", kind = "lua", writes = {"a"}, fn = function(batch, opts, bufs) end}
 *   return p
 * saved as trivial.lua and run with `pipectl run --executor host trivial.lua`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pl_parse.h"
#include "pl_stage.h"

static int64_t pl__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int pl__cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One lua stage `t` reading n_bufs - 1 buffers and writing one, with `body` as its function. */
static double pl__bench(const char *label, int n_bufs, const char *body, int64_t calls)
{
    char text[4096];
    size_t n = 0;
    n += (size_t)snprintf(text + n, sizeof text - n, "local p = pipectl.pipeline{}\n");
    for (int i = 0; i < n_bufs; i++)
        n += (size_t)snprintf(text + n, sizeof text - n,
                              "p:buffer('b%d', {dtype = 'f32', shape = {256}, init = 'zeros', "
                              "persistent = true})\n",
                              i);
    n += (size_t)snprintf(text + n, sizeof text - n, "p:stage{name = 't', kind = 'lua', reads = {");
    for (int i = 1; i < n_bufs; i++)
        n += (size_t)snprintf(text + n, sizeof text - n, "%s'b%d'", i > 1 ? ", " : "", i);
    n += (size_t)snprintf(text + n, sizeof text - n, "}, writes = {%s}, code = [[%s]]}\nreturn p\n",
                          n_bufs ? "'b0'" : "", body);
    pl_spec *spec = NULL;
    pl_error err;
    if (pl_lua_load_string("bench.lua", text, n, &spec, &err) != PL_OK ||
        pl_spec_check(spec, &err) != PL_OK) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
    const pl_stage *st = &spec->stages[0];
    const pl_kind *k = (st->kind);
    pl_run_env env = {.spec = spec, .batches = calls, .depth = 1, .workers = 1};
    void *state = NULL;
    if (k->open(&env, st, &state, &err) != PL_OK) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
    void *bufs[16];
    for (int i = 0; i < n_bufs; i++)
        bufs[i] = calloc(256, sizeof(float));
    double runs[5];
    for (int r = 0; r < 5; r++) {
        int64_t t0 = pl__now_ns();
        for (int64_t b = 0; b < calls; b++) {
            pl_stage_ctx ctx = {spec, st, &env, b, 0, 0, bufs, state};
            if (k->run_host(&ctx, &err) != PL_OK) {
                fprintf(stderr, "%s\n", err.msg);
                exit(1);
            }
        }
        runs[r] = (double)(pl__now_ns() - t0) / (double)calls;
    }
    qsort(runs, 5, sizeof runs[0], pl__cmp);
    printf("%-44s %8.0f ns/batch  (median of 5 x %lld calls; min %.0f, max %.0f)\n", label, runs[2],
           (long long)calls, runs[0], runs[4]);
    k->close(&env, st, state, calls, false, &err);
    for (int i = 0; i < n_bufs; i++)
        free(bufs[i]);
    pl_spec_free(spec);
    return runs[2];
}

int main(int argc, char **argv)
{
    int64_t calls = argc > 1 ? atoll(argv[1]) : 200000;
    if (calls < 1) calls = 1;
    pl__bench("empty function, 1 buffer", 1, "function run() end", calls);
    pl__bench("empty function, 4 buffers", 4, "function run() end", calls);
    pl__bench("one element read + write, 2 buffers", 2,
              "function run(b, o, bufs) bufs.b0[1] = bufs.b1[1] + b end", calls);
    pl__bench("256-element loop (read+write), 2 buffers", 2,
              "function run(b, o, bufs) local x, y = bufs.b1, bufs.b0 for i = 1, #y do y[i] = x[i] "
              "+ 1 end end",
              calls / 10 > 0 ? calls / 10 : 1);
    pl__bench("fromstring/tostring 1 KiB, 2 buffers", 2,
              "function run(b, o, bufs) bufs.b0:fromstring(bufs.b1:tostring()) end", calls);
    return 0;
}
