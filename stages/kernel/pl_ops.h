/* pl_ops: the built-in kernel ops of the `kernel` stage kind, as one table (PL_OPS_MAP). Each op
 * has a C reference implementation (stages/kernel/ops_ref.c, used by the host executor and as the
 * GPU tests' reference) and a GPU launcher (stages/kernel/ops_gpu.cu, called from kernel_gpu.c).
 * Operands are the stage's reads then writes, in the order written.
 *
 * Everything else about an op comes from its row: the enum and the names, the `op:` values of the
 * kernel kind's key table, the operand counts and the usage text of count errors, the rule check
 * applies to the operands (pl_op_check), `describe`, the reproducibility class, `pipectl help
 * kernel`, the `op` enum of `pipectl schema` with each op's doc, and the op table of
 * docs/pipeline-yaml.md (tests/parser/test_yaml.c compares it with the rows).
 *
 * Adding an op `foo`:
 *   1. one row X(FOO, foo, ...) below;
 *   2. `static pl_status pl__ref_foo(const pl__ref_call *c, pl_error *err)` in ops_ref.c (the C
 *      reference);
 *   3. its launcher `pl_gpu_launch_foo` in ops_gpu.cu (declared in ops_gpu.h), and
 *      `static pl_status pl__gpu_foo(const pl__gpu_call *c, pl_error *err)` in kernel_gpu.c, which
 *      calls it with the operands' addresses and sizes.
 * ops_ref.c and kernel_gpu.c build their tables of those functions from PL_OPS_MAP, so an op
 * without either function does not compile. A rule other than the ones below is a function
 * pl_op_rule_NAME in pl_ops.c (declared here); an option other than value, alpha, beta and
 * duration_us is a field of pl_kernel_opts, a key of the kind (kernel.c) and a PL_OPT_* bit. */
#ifndef PL_OPS_H
#define PL_OPS_H

#include <stdint.h>

#include "pl_spec.h"

struct pl_pool;
struct pl_op_desc;

/* The options an op reads, as bits of the `opts` column: each is a field of pl_kernel_opts and a
 * key of the kernel kind, which documents which ops read it (a test compares the two). */
enum {
    PL_OPT_VALUE = 1u << 0,    /* value: */
    PL_OPT_ALPHA = 1u << 1,    /* alpha: */
    PL_OPT_BETA = 1u << 2,     /* beta: */
    PL_OPT_DURATION = 1u << 3, /* duration_us: */
};

/* The dtypes of the `dtypes` column: the ones the rule lets through (0: every dtype). */
#define PL_DT(t) (1u << PL_##t)

/* How reproducible an op's results are (the kind's repro hook; docs/bundles.md). */
typedef enum pl_op_repro {
    PL_OP_EXACT,  /* the host's bits on the GPU (elementwise, integer atomics, first index) */
    PL_OP_REDUCE, /* a fixed reduction tree of its own on the GPU, not the host's index order */
    PL_OP_BLAS,   /* cuBLAS: deterministic on one GPU, within the GPU tests' tolerance across */
} pl_op_repro;

/* The table. Columns:
 *   id, name   PL_OP_<id>; the name as written after `op:` (a C identifier: it names the op's
 *              functions in ops_ref.c and kernel_gpu.c)
 *   reads      the operand names of its reads ("x, y"; "" for none; NULL: any reads, untouched)
 *   writes     the same for its writes
 *   rule       the check of the operands' dtypes and shapes: pl_op_rule_<rule> (pl_ops.c)
 *   dtypes     the dtypes the rule allows (PL_DT(F32) | ...; 0: every dtype)
 *   opts       the options it reads (PL_OPT_* bits)
 *   repro      its pl_op_repro class
 *   doc        one line: what it computes */
#define PL_OPS_MAP(X)                                                                              \
    X(FILL, fill, "", "y", same, 0, PL_OPT_VALUE, PL_OP_EXACT, "y = value")                        \
    X(SCALE, scale, "x", "y", same, 0, PL_OPT_ALPHA, PL_OP_EXACT, "y = alpha * x")                 \
    X(SAXPY, saxpy, "x, y", "z", same, 0, PL_OPT_ALPHA, PL_OP_EXACT, "z = alpha * x + y")          \
    X(ADD, add, "x, y", "z", same, 0, 0, PL_OP_EXACT, "z = x + y")                                 \
    X(SUM, sum, "x", "s", one_value, PL_DT(F32) | PL_DT(F64), 0, PL_OP_REDUCE,                     \
      "s[0] = sum of x (f64 accumulation; s is f32 or f64)")                                       \
    X(CHECKSUM, checksum, "x", "s", one_value, PL_DT(I64), 0, PL_OP_EXACT,                         \
      "s[0] = order-independent 64-bit hash of x's bytes (s: i64)")                                \
    X(ARGMAX, argmax, "x", "y", rows, PL_DT(I32), 0, PL_OP_EXACT,                                  \
      "y[r] = index of the largest x[r, :] (first on ties; y: i32)")                               \
    X(GEMM, gemm, "A, B", "C", matmul, PL_DT(F32) | PL_DT(F16) | PL_DT(BF16),                      \
      PL_OPT_ALPHA | PL_OPT_BETA, PL_OP_BLAS,                                                      \
      "C[m,n] = alpha * A[m,k] B[k,n] + beta * C (f32, f16, bf16)")                                \
    X(BUSY, busy, NULL, NULL, spin, 0, PL_OPT_DURATION, PL_OP_EXACT,                               \
      "spin for duration_us (reads/writes optional; for benchmarks)")

typedef enum pl_op_id {
#define PL__OP_ENUM(id, name, r, w, rule, dt, opts, repro, doc) PL_OP_##id,
    PL_OPS_MAP(PL__OP_ENUM)
#undef PL__OP_ENUM
        PL_OP_COUNT
} pl_op_id;

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

/* Checks a bound kernel stage's operands (resolved, on the device) against op `d`: dtypes, shapes
 * and the options that depend on them. Errors are PL_EINPUT at the operand's position. */
typedef pl_status (*pl_op_rule)(const pl_spec *spec, const pl_stage *st, const struct pl_op_desc *d,
                                pl_error *err);
#define PL__OP_RULE(id, name, r, w, rule, dt, opts, repro, doc)                                    \
    pl_status pl_op_rule_##rule(const pl_spec *spec, const pl_stage *st,                           \
                                const struct pl_op_desc *d, pl_error *err);
PL_OPS_MAP(PL__OP_RULE)
#undef PL__OP_RULE

/* One row of the table (pl_ops[op]). */
typedef struct pl_op_desc {
    pl_op_id id;
    const char *name;
    const char *reads, *writes; /* operand names; NULL: any, untouched */
    pl_op_rule rule;
    unsigned dtypes;
    unsigned opts;
    pl_op_repro repro;
    const char *doc;
} pl_op_desc;

extern const pl_op_desc pl_ops[PL_OP_COUNT];

/* "fill|scale|...": the `op:` values, a constant (the kind's key table points at it). */
extern const char pl_op_values[];

const char *pl_op_name(pl_op_id op);
bool pl_op_parse(const char *name, pl_op_id *out);

/* How many operands a `reads` or `writes` column names (-1 for NULL: any). */
int pl_op_operands(const char *names);

/* How a stage with op `d` is written: "reads: [x, y], writes: [z]" ("writes: [y]" without reads;
 * pl_key_value_usage). */
const char *pl_op_usage(const pl_op_desc *d, char *buf, size_t cap);

/* The checks of a kernel stage with a built-in op (its kind's validate): the operand counts, then
 * the op's rule. */
pl_status pl_op_check(const pl_spec *spec, const pl_stage *st, pl_error *err);

/* "scale alpha=2", "gemm alpha=1 beta=0", "busy 50 us": the op and the options it reads. */
void pl_op_describe(const pl_kernel_opts *o, char *buf, size_t cap);

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
