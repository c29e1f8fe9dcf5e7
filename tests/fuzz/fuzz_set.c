/* fuzz_set: libFuzzer target for `--set KEY=VALUE` (parser/pl_override.c, and the YAML value
 * parser it hands VALUE to): each line of the input is one --set (up to 16), applied to a fixed
 * pipeline that has a source, a kernel, a lua stage and a sink, through the YAML front end (byte 0
 * even) or the Lua one (odd, the same pipeline written in Lua); what loads is checked and planned.
 * Findings as the front-end targets (tests/fuzz/pl_fuzz.h: a crash, a leak, or an error that is
 * not PL_EINPUT with "error: ..."). */
#include <stdlib.h>

#include "pl_fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static const char pl__yaml[] =
    "pipeline: base\n"
    "run: {batches: 4, depth: 2, seed: 1}\n"
    "buffers:\n"
    "  x: {where: host, dtype: f32, shape: [4, 8]}\n"
    "  x_dev: {where: device, dtype: f32, shape: [4, 8]}\n"
    "  y_dev: {where: device, dtype: f32, shape: [4, 8]}\n"
    "  y: {where: host, dtype: f32, shape: [4, 8]}\n"
    "  s: {where: host, dtype: f64, shape: [1]}\n"
    "stages:\n"
    "  - {name: gen, kind: source, to: x, generator: random}\n"
    "  - {name: up, kind: h2d, from: x, to: x_dev}\n"
    "  - {name: scale, kind: kernel, op: scale, alpha: 2, reads: [x_dev], writes: [y_dev]}\n"
    "  - {name: down, kind: d2h, from: y_dev, to: y}\n"
    "  - {name: post, kind: lua, reads: [y], writes: [s], code: \"function run(b, o, v) "
    "v.s[1] = v.y:sum() end\"}\n"
    "  - {name: save, kind: sink, from: s, to: /dev/null}\n";

static const char pl__lua[] =
    "local p = pipectl.pipeline{name = 'base', run = {batches = 4, depth = 2, seed = 1}}\n"
    "p:buffer('x', {where = 'host', dtype = 'f32', shape = {4, 8}})\n"
    "p:buffer('x_dev', {where = 'device', dtype = 'f32', shape = {4, 8}})\n"
    "p:buffer('y_dev', {where = 'device', dtype = 'f32', shape = {4, 8}})\n"
    "p:buffer('y', {where = 'host', dtype = 'f32', shape = {4, 8}})\n"
    "p:buffer('s', {where = 'host', dtype = 'f64', shape = {1}})\n"
    "p:stage{name = 'gen', kind = 'source', to = 'x', generator = 'random'}\n"
    "p:stage{name = 'up', kind = 'h2d', from = 'x', to = 'x_dev'}\n"
    "p:stage{name = 'scale', kind = 'kernel', op = 'scale', alpha = 2, reads = {'x_dev'}, "
    "writes = {'y_dev'}}\n"
    "p:stage{name = 'down', kind = 'd2h', from = 'y_dev', to = 'y'}\n"
    "p:stage{name = 'post', kind = 'lua', reads = {'y'}, writes = {'s'}, code = 'function "
    "run(b, o, v) v.s[1] = v.y:sum() end'}\n"
    "p:stage{name = 'save', kind = 'sink', from = 's', to = '/dev/null'}\n"
    "return p\n";

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    setenv("PIPECTL_LUA_INSTRUCTIONS", "200000", 1);
    setenv("PIPECTL_LUA_MEMORY", "16777216", 1);
    return 0;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    if (size < 1) return 0;
    bool lua = data[0] & 1;
    char *text = malloc(size); /* the lines, NUL-ended in place */
    if (!text) return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    const char *sets[16];
    int n = 0;
    for (char *p = text; n < 16;) { /* a NUL inside a line ends the input there */
        sets[n++] = p;
        char *nl = strchr(p, '\n');
        if (!nl) break;
        *nl = '\0';
        p = nl + 1;
    }
    pl_load_opts opts;
    memset(&opts, 0, sizeof opts);
    opts.sets = sets;
    opts.n_sets = n;
    pl_error err;
    pl_error_clear(&err);
    pl_spec *spec = NULL;
    pl_status st =
        lua ? pl_lua_load_string_opts("base.lua", pl__lua, sizeof pl__lua - 1, &opts, &spec, &err)
            : pl_yaml_load_string_opts("base.yaml", pl__yaml, sizeof pl__yaml - 1, &opts, &spec,
                                       &err);
    if (st != PL_OK) {
        if (spec) abort();
        pl_fuzz_check_error(&err, st, "--set");
    } else {
        st = pl_spec_check(spec, &err);
        if (st == PL_OK) {
            pl_plan *plan = NULL;
            st = pl_plan_compile(spec, &plan, &err);
            pl_plan_free(plan);
        }
        if (st != PL_OK) pl_fuzz_check_error(&err, st, "check/plan after --set");
        pl_spec_free(spec);
    }
    free(text);
    return 0;
}
