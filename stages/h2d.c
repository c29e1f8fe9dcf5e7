/* h2d: copies a pinned host buffer to a device buffer on the host-to-device copy engine. */
#include "pl_stage.h"

static const pl_key pl__h2d_keys[] = {
    {"from", PL_KEY_NAME, NULL, NULL, "host buffer (required)"},
    {"to", PL_KEY_NAME, NULL, NULL, "device buffer of the same dtype and size (required)"},
    {NULL, 0, NULL, NULL, NULL},
};

const pl_kind pl_kind_h2d = {
    .name = "h2d",
    .engine = PL_ENGINE_H2D,
    .keys = pl__h2d_keys,
    .doc = "host-to-device copy (pinned host buffer to device buffer)",
};
