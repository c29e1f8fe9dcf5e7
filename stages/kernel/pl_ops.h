/* pl_ops: the built-in kernel ops of the `kernel` stage kind. Each op has a C reference
 * implementation (stages/kernel/ops_ref.c, used by the host executor and as the GPU tests'
 * reference) and a GPU launcher (stages/kernel/ops_gpu.cu). Operands are the stage's reads then
 * writes, in the order written. */
#ifndef PL_OPS_H
#define PL_OPS_H

#include <stdint.h>

#include "pl_spec.h"

struct pl_pool;

#define PL_OPS_MAP(X)                                                                              \
    /* id, name, reads, writes, doc */                                                             \
    X(FILL, "fill", 0, 1, "y = value")                                                             \
    X(SCALE, "scale", 1, 1, "y = alpha * x")                                                       \
    X(SAXPY, "saxpy", 2, 1, "z = alpha * x + y")                                                   \
    X(ADD, "add", 2, 1, "z = x + y")                                                               \
    X(SUM, "sum", 1, 1, "s[0] = sum of x (f64 accumulation; s is f32 or f64)")                     \
    X(CHECKSUM, "checksum", 1, 1, "s[0] = order-independent 64-bit hash of x's bytes (s: i64)")    \
    X(ARGMAX, "argmax", 1, 1, "y[r] = index of the largest x[r, :] (first on ties; y: i32)")       \
    X(GEMM, "gemm", 2, 1, "C[m,n] = alpha * A[m,k] B[k,n] + beta * C (f32, f16, bf16)")            \
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
    /* A user kernel (source:, code: or module:; stages/kernel/pl_ukern.h), or NULL for a built-in
     * op: then `op` and the rest apply. */
    const struct pl_ukern *user;
    pl_op_id op;
    double value;       /* fill */
    double alpha, beta; /* scale, saxpy, gemm */
    double duration_us; /* busy */
} pl_kernel_opts;

/* Runs kernel stage `st` (its op and options from st->priv) on host memory: bufs[i] is buffer i
 * (stages/kernel/ops_ref.c). The C reference of every op, used by the host executor and as the GPU
 * tests' reference. Semantics:
 * - fill, scale, saxpy, add work on every dtype, operands of one dtype and shape. f32/f16/bf16
 *   compute in f32 and round to the dtype (nearest even); f64 in double; saxpy is one fused
 *   multiply-add (fmaf / fma). Integers: add wraps (two's complement); fill/scale/saxpy compute in
 *   double, round to nearest even and saturate to the dtype's range.
 * - sum: x of any dtype, each element converted to double and added in index order; s is f32
 *   (rounded once at the end) or f64.
 * - checksum: s[0] = pl_hash(x's bytes) (runtime/base/pl_hash.h) as i64 bits.
 * - argmax: x [..., cols] -> y i32 [...] (x rank 1: y [1]); first index on ties; NaN never wins.
 * - gemm: row-major A [m,k], B [k,n], C [m,n], one float dtype; BLAS sgemm (f32 accumulation in
 *   BLAS's order; f16/bf16 widened to f32, C rounded once); C = alpha * acc + beta * C in f32.
 *   beta != 0 reads C (C must be persistent). Deterministic for a given shape and row split.
 * - busy: sleeps (nanosleep) duration_us on the host; operands are not touched.
 * The spec parameter gives buffer dtypes and shapes. */
pl_status pl_op_run_ref(const pl_spec *spec, const pl_stage *st, void *const *bufs, pl_error *err);

/* The same, with the ops that parallelise (gemm: blocks of rows of C) spread over `pool` on up
 * to `parallel` threads (the host executor's kernel stages pass the run's pool). */
pl_status pl_op_run_host(const pl_spec *spec, const pl_stage *st, void *const *bufs,
                         struct pl_pool *pool, int parallel, pl_error *err);

#endif
