/* fuzz_lua: libFuzzer target for the Lua front end (pl_lua_load_string): the input runs as a
 * pipeline script in the sandbox, then what loads is checked and planned. Limits are lowered
 * (PIPECTL_LUA_INSTRUCTIONS / _MEMORY) so endless loops and memory bombs end fast. Besides
 * crashes, leaks and hangs, it aborts when an error breaks the error contract (bad input is
 * PL_EINPUT with a non-empty "...error: ..." message). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_parse.h"
#include "pl_plan.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    setenv("PIPECTL_LUA_INSTRUCTIONS", "200000", 1);
    setenv("PIPECTL_LUA_MEMORY", "16777216", 1);
    return 0;
}

static void pl__check_error(const pl_error *err, pl_status st, const char *what)
{
    if (st == PL_ENOMEM) return;
    if (st != PL_EINPUT || err->status != st || !strstr(err->msg, "error: ")) {
        fprintf(stderr, "%s broke the error contract: status %s, message '%s'\n", what,
                pl_status_name(st), err->msg);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    pl_error err;
    pl_error_clear(&err);
    pl_spec *spec = NULL;
    pl_status st = pl_lua_load_string("fuzz.lua", (const char *)data, size, &spec, &err);
    if (st != PL_OK) {
        if (spec) abort(); /* a failed load leaves *out NULL */
        pl__check_error(&err, st, "pl_lua_load_string");
        return 0;
    }
    st = pl_spec_check(spec, &err);
    if (st == PL_OK) {
        pl_plan *plan = NULL;
        st = pl_plan_compile(spec, &plan, &err);
        pl_plan_free(plan);
    }
    if (st != PL_OK) pl__check_error(&err, st, "check/plan");
    pl_spec_free(spec);
    return 0;
}
