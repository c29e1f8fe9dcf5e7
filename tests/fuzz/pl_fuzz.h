/* pl_fuzz: what both front-end fuzz targets do with one input: load it, then check and plan what
 * loads. Besides crashes, leaks and hangs, it aborts when an error breaks the error contract (bad
 * input is PL_EINPUT with a non-empty "...error: ..." message; a failed load leaves no spec). */
#ifndef PL_FUZZ_H
#define PL_FUZZ_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_parse.h"
#include "pl_plan.h"

typedef pl_status (*pl_fuzz_load_fn)(const char *name, const char *text, size_t len, pl_spec **out,
                                     pl_error *err);

static void pl_fuzz_check_error(const pl_error *err, pl_status st, const char *what)
{
    if (st == PL_ENOMEM) return;
    if (st != PL_EINPUT || err->status != st || !strstr(err->msg, "error: ")) {
        fprintf(stderr, "%s broke the error contract: status %s, message '%s'\n", what,
                pl_status_name(st), err->msg);
        abort();
    }
}

static int pl_fuzz_one(pl_fuzz_load_fn load, const char *name, const unsigned char *data,
                       size_t size)
{
    pl_error err;
    pl_error_clear(&err);
    pl_spec *spec = NULL;
    pl_status st = load(name, (const char *)data, size, &spec, &err);
    if (st != PL_OK) {
        if (spec) abort();
        pl_fuzz_check_error(&err, st, name);
        return 0;
    }
    st = pl_spec_check(spec, &err);
    if (st == PL_OK) {
        pl_plan *plan = NULL;
        st = pl_plan_compile(spec, &plan, &err);
        pl_plan_free(plan);
    }
    if (st != PL_OK) pl_fuzz_check_error(&err, st, "check/plan");
    pl_spec_free(spec);
    return 0;
}

#endif
