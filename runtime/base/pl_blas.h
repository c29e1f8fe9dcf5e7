/* pl_blas: the one door to BLAS (OpenBLAS, a required dependency). OpenBLAS is not linked: it is
 * loaded on first use (pl_blas_load, from the search stage and the host gemm op), as the CUDA
 * libraries are (pl_cudalibs.c), so a command that needs no BLAS never starts it. Linked, its
 * pthread build starts one thread per core as the program loads, each mapping a 128 MiB work
 * buffer, and OpenBLAS retries a failed mapping forever: under a low address-space limit
 * (`ulimit -v`) those threads spin and exit() waits for them.
 *
 * pipectl runs its host work in parallel through its own pool (pl_pool.h), so OpenBLAS is loaded
 * with one thread (OPENBLAS_NUM_THREADS=1 while it loads): each pool task calls a single-threaded
 * sgemm on its own block, and no second set of threads competes for the cores. Each call in
 * flight holds one of OpenBLAS's work buffers (128 MiB of address space, kept until exit). Under
 * an address-space or data limit (`ulimit -v`, `ulimit -d`), a call that would need one more
 * waits for a running call to finish when there is no room for it (checked with a trial
 * mapping), so the number of buffers is bounded by the limit and no call spins. Loading maps the
 * first buffer, so a process without room for one fails there with an out-of-memory error.
 *
 * The kernels are OpenBLAS's choice for the CPU, made when the library loads, so
 * OPENBLAS_CORETYPE in the environment is the only way to another set. Where OpenBLAS falls back
 * to kernels far below the CPU's instruction set (its Prescott fallback on the H200 machine's
 * AVX-512 host: search 3-4x slower), loading sets the variable and loads the library again
 * (pl_blas_better_core; docs/perf.md, "OpenBLAS core type"). */
#ifndef PL_BLAS_H
#define PL_BLAS_H

#include <stdbool.h>
#include <stdint.h>

#include "pl_status.h"

/* Loads OpenBLAS once per process (later calls return the first call's result) and maps its
 * first work buffer. PL_ERUNTIME when the library cannot be loaded, PL_ENOMEM ("out of memory:
 * ...") when the address space has no room for a work buffer. Call it before the first
 * pl_blas_sgemm, and before code that reaches BLAS through another library (FAISS). Sets
 * OPENBLAS_CORETYPE in the environment when it picks a better core (above). */
pl_status pl_blas_load(pl_error *err);

/* C[m, n] = alpha * A[m, k] op(B) + beta * C, row-major, f32. trans_b: B is stored [n, k] (so
 * op(B) = B^T); otherwise [k, n]. lda/ldb/ldc are row strides in elements. Single-threaded;
 * safe from many threads at once (a call may wait for a work buffer, above). m == 1 with
 * trans_b goes through sgemv (same result up to summation order). pl_blas_load must have
 * succeeded (the process aborts otherwise). */
void pl_blas_sgemm(bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                   int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc);

/* "OpenBLAS 0.3.21 (Haswell kernels)": the library and the kernels it picked for this CPU, for
 * reports; loads OpenBLAS. "OpenBLAS not loaded: <why>" when it cannot. Returns a static
 * string. */
const char *pl_blas_describe(void);

/* The OPENBLAS_CORETYPE to run with instead of what OpenBLAS picked, or NULL: "SkylakeX" when the
 * CPU has AVX-512 (F, BW, DQ, VL) and the pick is not an AVX-512 core; "Haswell" when it has
 * AVX2 and FMA and the pick is an older core (Prescott, Nehalem, Sandybridge, ...). NULL when
 * OPENBLAS_CORETYPE is set already (the user's choice, or the library loaded again) or OpenBLAS
 * is not loaded. For tests, PIPECTL_BLAS_PICKED=NAME stands for OpenBLAS's pick. */
const char *pl_blas_better_core(void);

#endif
