/* pl_test_plan: a checked example pipeline and its plan, for the tests of what reads a plan
 * (statistics, reports, traces). */
#ifndef PL_TEST_PLAN_H
#define PL_TEST_PLAN_H

#include <stdio.h>

#include "pl_parse.h"
#include "pl_plan.h"

/* Loads and checks `file` (relative to the test's working directory, the source tree) and
 * compiles its plan; on failure prints why and returns false. The caller frees both. */
static inline bool t_load_plan(const char *file, pl_spec **spec, pl_plan **plan)
{
    pl_error err;
    *spec = NULL;
    *plan = NULL;
    if (pl_load_checked(file, spec, &err) != PL_OK || pl_plan_compile(*spec, plan, &err) != PL_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return false;
    }
    return true;
}

#endif
