/* d2h: copies a device buffer to a pinned host buffer on the device-to-host copy engine. */
#include "pl_stage.h"

static const pl_key pl__d2h_keys[] = {
    {"from", PL_KEY_NAME, NULL, NULL, "device buffer (required)"},
    {"to", PL_KEY_NAME, NULL, NULL, "host buffer of the same dtype and size (required)"},
    {NULL, 0, NULL, NULL, NULL},
};

const pl_kind pl_kind_d2h = {
    .name = "d2h",
    .engine = PL_ENGINE_D2H,
    .keys = pl__d2h_keys,
    .doc = "device-to-host copy (device buffer to pinned host buffer)",
};
