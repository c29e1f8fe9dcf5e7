/* pl_check: resolves and validates a spec. STUB: being written. */
#include "pl_spec.h"

pl_status pl_spec_check(pl_spec *spec, pl_error *err)
{
    (void)spec;
    return pl_error_set(err, PL_ERUNTIME, "error: checks not built yet");
}
