/* fuzz_yaml: libFuzzer target for the YAML front end: load, then check and plan what parses.
 * Besides crashes, leaks and hangs, it aborts when an error breaks the error contract (bad input
 * is PL_EINPUT with a non-empty "...error: ..." message). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_parse.h"
#include "pl_plan.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

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
    pl_status st = pl_yaml_load_string("fuzz.yaml", (const char *)data, size, &spec, &err);
    if (st != PL_OK) {
        if (spec) abort(); /* a failed load leaves *out NULL */
        pl__check_error(&err, st, "pl_yaml_load_string");
        return 0;
    }
    st = pl_spec_check(spec, &err);
    if (st == PL_OK) {
        pl_plan *plan = NULL;
        st = pl_plan_compile(spec, &plan, &err);
        pl_plan_free(plan);
    }
    /* A stub (check or plan not written yet) says so and is not a finding. */
    if (st != PL_OK && !(st == PL_ERUNTIME && strstr(err.msg, "not built yet")))
        pl__check_error(&err, st, "check/plan");
    pl_spec_free(spec);
    return 0;
}
