/* pl_ops: the built-in kernel ops of the `kernel` stage kind. Each op has a C reference
 * implementation (stages/ops_ref.c, used by the host executor and as the GPU tests' reference)
 * and a GPU launcher (stages/ops_gpu.cu). Operands are the stage's reads then writes, in the
 * order written. */
#ifndef PL_OPS_H
#define PL_OPS_H

#include <stdint.h>

#include "pl_spec.h"

#define PL_OPS_MAP(X)                                                                              \
    /* id, name, reads, writes, doc */                                                             \
    X(FILL, "fill", 0, 1, "y = value")                                                             \
    X(SCALE, "scale", 1, 1, "y = alpha * x")                                                       \
    X(SAXPY, "saxpy", 2, 1, "z = alpha * x + y")                                                   \
    X(ADD, "add", 2, 1, "z = x + y")                                                               \
    X(SUM, "sum", 1, 1, "s[0] = sum of x (f64 accumulation; s is f32 or f64)")                    \
    X(CHECKSUM, "checksum", 1, 1, "s[0] = order-independent 64-bit hash of x's bytes (s: i64)")   \
    X(ARGMAX, "argmax", 1, 1, "y[r] = index of the largest x[r, :] (first on ties; y: i32)")      \
    X(GEMM, "gemm", 2, 1, "C[m,n] = alpha * A[m,k] B[k,n] + beta * C (f32, f16, bf16)")           \
    X(BUSY, "busy", 0, 0, "spin for duration_us (reads/writes optional; for benchmarks)")

typedef enum pl_op_id {
#define PL__OP_ENUM(id, name, r, w, doc) PL_OP_##id,
    PL_OPS_MAP(PL__OP_ENUM)
#undef PL__OP_ENUM
        PL_OP_COUNT
} pl_op_id;

const char *pl_op_name(pl_op_id op);
bool pl_op_parse(const char *name, pl_op_id *out);

/* Parsed options of a kernel stage (stage->priv). */
typedef struct pl_kernel_opts {
    pl_op_id op;
    double value;       /* fill */
    double alpha, beta; /* scale, saxpy, gemm */
    double duration_us; /* busy */
} pl_kernel_opts;

#endif
