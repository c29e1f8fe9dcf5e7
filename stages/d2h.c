/* d2h: copies a device buffer to a pinned host buffer on the device-to-host copy engine. On the
 * host executor it is a memcpy (shared with h2d). */
#include "pl_kind_util.h"

static const pl_key pl__d2h_keys[] = {
    {"from", PL_KEY_NAME, NULL, NULL, "device buffer (required)"},
    {"to", PL_KEY_NAME, NULL, NULL, "host buffer of the same dtype and size (required)"},
    PL_KIND_CHUNKS_KEY,
    {NULL, 0, NULL, NULL, NULL},
};

/* h2d.c: a copy is a copy, whichever way it goes. */
pl_status pl_copy_validate(const pl_spec *spec, const pl_stage *st, pl_error *err);
pl_status pl_copy_run_host(pl_stage_ctx *ctx, pl_error *err);
pl_status pl_copy_record(const pl_dev_ctx *ctx, pl_error *err);
void pl_copy_describe(const pl_spec *spec, const pl_stage *st, char *buf, size_t cap);
#ifdef PL_WITH_CUDA
#define PL__COPY_RECORD pl_copy_record
#else
#define PL__COPY_RECORD NULL
#endif

static pl_status pl__d2h_bind(pl_spec *spec, pl_stage *st, pl_error *err)
{
    int r, w;
    PL_CHECK(pl_kind_bind_ref(spec, st, "from", false, true, "the device buffer to copy", &r, err));
    PL_CHECK(pl_kind_bind_ref(spec, st, "to", true, true, "the host buffer to fill", &w, err));
    return pl_kind_bind_chunks(spec, st, r, err); /* blocks of the source's rows */
}

const pl_kind pl_kind_d2h = {
    .name = "d2h",
    .engine = PL_ENGINE_D2H,
    .keys = pl__d2h_keys,
    .doc = "device-to-host copy (device buffer to pinned host buffer)",
    .bind = pl__d2h_bind,
    .validate = pl_copy_validate,
    .run_host = pl_copy_run_host,
    .record = PL__COPY_RECORD,
    .describe = pl_copy_describe,
};
