/* pl_plan: the plan compiler. STUB: being written. */
#include "pl_plan.h"

pl_status pl_plan_compile(const pl_spec *spec, pl_plan **out, pl_error *err)
{
    (void)spec;
    *out = NULL;
    return pl_error_set(err, PL_ERUNTIME, "error: plan compiler not built yet");
}

void pl_plan_free(pl_plan *plan)
{
    (void)plan;
}

void pl_plan_dump(const pl_plan *plan, FILE *out)
{
    (void)plan;
    (void)out;
}

void pl_plan_dump_dot(const pl_plan *plan, FILE *out)
{
    (void)plan;
    (void)out;
}
