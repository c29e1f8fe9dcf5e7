/* d2h: copies a device buffer to a pinned host buffer on the device-to-host copy engine. On the
 * host executor it is a memcpy (shared with h2d). */
#include "pl_kind_util.h"

static const pl_key pl__d2h_keys[] = {
    {"from", PL_KEY_NAME, NULL, NULL, "device buffer (required)"},
    {"to", PL_KEY_NAME, NULL, NULL, "host buffer of the same dtype and size (required)"},
    {NULL, 0, NULL, NULL, NULL},
};

pl_status pl_copy_run_host(pl_stage_ctx *ctx, pl_error *err); /* h2d.c */

static pl_status pl__d2h_bind(pl_spec *spec, pl_stage *st, pl_error *err)
{
    int r, w;
    PL_CHECK(pl_kind_bind_ref(spec, st, "from", false, true, "the device buffer to copy", &r, err));
    return pl_kind_bind_ref(spec, st, "to", true, true, "the host buffer to fill", &w, err);
}

const pl_kind pl_kind_d2h = {
    .name = "d2h",
    .engine = PL_ENGINE_D2H,
    .keys = pl__d2h_keys,
    .doc = "device-to-host copy (device buffer to pinned host buffer)",
    .bind = pl__d2h_bind,
    .run_host = pl_copy_run_host,
};
