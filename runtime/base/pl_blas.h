/* pl_blas: the one door to BLAS (OpenBLAS, a required dependency). pipectl runs its host work in
 * parallel through its own pool (pl_pool.h), so OpenBLAS is switched to one thread before the
 * first call: each pool task calls a single-threaded sgemm on its own block, and no second set
 * of threads competes for the cores. The kernels are OpenBLAS's choice for the CPU, made when
 * the library loads (before main), so OPENBLAS_CORETYPE in the environment is the only way to
 * another set. Where OpenBLAS falls back to kernels far below the CPU's instruction set (its
 * Prescott fallback on the H200 machine's AVX-512 host: search 3-4x slower), the command line
 * sets the variable and re-executes itself once, before anything runs (pl_blas_better_core;
 * docs/perf.md, "OpenBLAS core type"). */
#ifndef PL_BLAS_H
#define PL_BLAS_H

#include <stdbool.h>
#include <stdint.h>

/* C[m, n] = alpha * A[m, k] op(B) + beta * C, row-major, f32. trans_b: B is stored [n, k] (so
 * op(B) = B^T); otherwise [k, n]. lda/ldb/ldc are row strides in elements. Single-threaded.
 * m == 1 with trans_b goes through sgemv (same result up to summation order). */
void pl_blas_sgemm(bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                   int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc);

/* Switches OpenBLAS to one thread (once per process; pl_blas_sgemm does it too). For code that
 * reaches BLAS through another library from pool threads (FAISS). */
void pl_blas_init(void);

/* "OpenBLAS 0.3.21 (Haswell kernels)": the library and the kernels it picked for this CPU, for
 * reports. Returns a static string. */
const char *pl_blas_describe(void);

/* The OPENBLAS_CORETYPE to run with instead of what OpenBLAS picked, or NULL: "SkylakeX" when the
 * CPU has AVX-512 (F, BW, DQ, VL) and the pick is not an AVX-512 core; "Haswell" when it has
 * AVX2 and FMA and the pick is an older core (Prescott, Nehalem, Sandybridge, ...). NULL when
 * OPENBLAS_CORETYPE is set already (the user's choice, or the re-executed process). For tests,
 * PIPECTL_BLAS_PICKED=NAME stands for OpenBLAS's pick. */
const char *pl_blas_better_core(void);

#endif
