/* source: fills a per-batch host buffer from a file (raw or .npy), a seeded generator or a
 * constant. */
#include "pl_stage.h"

static const pl_key pl__source_keys[] = {
    {"to", PL_KEY_NAME, NULL, NULL, "the host buffer to fill (required)"},
    {"file", PL_KEY_PATH, NULL, NULL, "raw or .npy file; batch i reads the i-th buffer-sized slice"},
    {"wrap", PL_KEY_BOOL, NULL, "false", "start again at the file's beginning when it runs out"},
    {"generator", PL_KEY_ENUM, "random|range|constant", "random", "used when no file is given"},
    {"value", PL_KEY_NUM, NULL, "0", "constant: the value"},
    {"min", PL_KEY_NUM, NULL, "-1 (floats), 0 (integers)", "random: lower bound (inclusive)"},
    {"max", PL_KEY_NUM, NULL, "1 (floats), 100 (integers)", "random: upper bound (exclusive)"},
    {"seed", PL_KEY_INT, NULL, "run seed", "random: seed of this stage's stream"},
    {NULL, 0, NULL, NULL, NULL},
};

const pl_kind pl_kind_source = {
    .name = "source",
    .engine = PL_ENGINE_HOST,
    .keys = pl__source_keys,
    .doc = "fills a per-batch host buffer from a file, a seeded generator or a constant",
};
