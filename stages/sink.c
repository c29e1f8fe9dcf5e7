/* sink: writes a host buffer's batches, in batch order, to a raw or .npy file, and checksums
 * them. */
#include "pl_stage.h"

static const pl_key pl__sink_keys[] = {
    {"from", PL_KEY_NAME, NULL, NULL, "the host buffer to write (required)"},
    {"to", PL_KEY_PATH, NULL, NULL, "output file; none: checksums only"},
    {"format", PL_KEY_ENUM, "auto|raw|npy", "auto", "auto: .npy by extension, else raw"},
    {"checksum", PL_KEY_BOOL, NULL, "true", "compute a checksum per batch (reported, bundled)"},
    {NULL, 0, NULL, NULL, NULL},
};

const pl_kind pl_kind_sink = {
    .name = "sink",
    .engine = PL_ENGINE_HOST,
    .keys = pl__sink_keys,
    .doc = "writes a host buffer's batches in order to a raw or .npy file, with checksums",
    .ordered = true,
};
