/* kernel: a built-in op (stages/pl_ops.h) on device buffers; operands are reads then writes. */
#include "pl_ops.h"
#include "pl_stage.h"

static const pl_key pl__kernel_keys[] = {
    {"op", PL_KEY_ENUM, "fill|scale|saxpy|add|sum|checksum|argmax|gemm|busy", NULL,
     "the built-in op (required)"},
    {"value", PL_KEY_NUM, NULL, "0", "fill: the value"},
    {"alpha", PL_KEY_NUM, NULL, "1", "scale, saxpy, gemm: the factor"},
    {"beta", PL_KEY_NUM, NULL, "0", "gemm: factor of C's previous contents"},
    {"duration_us", PL_KEY_NUM, NULL, NULL, "busy: how long to spin, microseconds (required)"},
    {NULL, 0, NULL, NULL, NULL},
};

const pl_kind pl_kind_kernel = {
    .name = "kernel",
    .engine = PL_ENGINE_COMPUTE,
    .keys = pl__kernel_keys,
    .doc = "a built-in op on device buffers: fill, scale, saxpy, add, sum, checksum, argmax, "
           "gemm, busy",
};
