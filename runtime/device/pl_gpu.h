/* pl_gpu: the CUDA services that the GPU executor, the kinds, `doctor` and `bench` share: checks,
 * copies, device memory, cuBLASLt matmuls. cudaError_t and CUDA types stay inside the CUDA-only
 * code (runtime/device/, runtime/exec/gpu/, runtime/cli/gpu/, and under stages/ the .cu files and
 * *_gpu.c): this header speaks in pl_status and void pointers so C code elsewhere never includes
 * CUDA headers. Built only with PL_WITH_CUDA. */
/* Layer runtime/device: owns the CUDA services kinds, executors and commands call: error checks,
 * copies, device memory, cuBLAS, cuBLASLt and NVRTC loaded on first use, user-kernel modules, the
 * GPU part of a bundle's environment. May include runtime/base and lua, and the CUDA headers; it
 * knows no stage kind, plan or executor. */
#ifndef PL_GPU_H
#define PL_GPU_H

#include <stdint.h>

#include "pl_spec.h"

/* Turns a CUDA runtime status (cudaError_t as int) into PL_ECUDA with a message that names the
 * call, the stage and the batch: "stage 'up', batch 7: cudaMemcpyAsync failed: an illegal memory
 * access was encountered (cudaErrorIllegalAddress)". stage may be NULL (setup), batch < 0 (no
 * batch). Returns PL_OK for cudaSuccess. */
pl_status pl_cuda_check(int cuda_status, const char *call, const char *stage, int64_t batch,
                        pl_error *err);
#define PL_CUDA(call, stage, batch, err) pl_cuda_check((int)(call), #call, (stage), (batch), (err))

/* Enqueues a copy of `bytes` on `stream` (cudaStream_t): to_device = pinned host -> device, else
 * device -> pinned host. Capturable. Errors name the call, the stage and the batch. */
pl_status pl_gpu_copy_async(void *dst, const void *src, uint64_t bytes, bool to_device,
                            void *stream, const char *stage, int64_t batch, pl_error *err);

/* Device memory and cuBLASLt matmuls for stage kinds that keep their own device state (the gpt2
 * kind's weights and activations), created in open() and freed in close() (runtime/device/
 * pl_gpu_lt.c). Errors name `stage` (may be NULL). */
pl_status pl_gpu_alloc(size_t bytes, void **out, const char *stage, pl_error *err);
void pl_gpu_free(void *p); /* accepts NULL */
/* Synchronous copies outside any capture (setup and tests only). */
pl_status pl_gpu_upload(void *dst, const void *src, size_t bytes, const char *stage, pl_error *err);
pl_status pl_gpu_download(void *dst, const void *src, size_t bytes, const char *stage,
                          pl_error *err);
pl_status pl_gpu_sync(const char *stage, pl_error *err);

/* One cuBLASLt matmul with its algorithm chosen once (the heuristic's first answer), so every
 * capture records the same kernels. In row-major terms: Y[n, m] = X[n, k] W[m, k]^T (+ bias[m])
 * (GELU) (+ Y when accumulate), W and X of dtype `ab` (f16 or bf16), Y and bias of dtype `d`
 * (ab's or f32). */
typedef enum pl_gpu_epilogue {
    PL_GPU_EPI_NONE,
    PL_GPU_EPI_BIAS,
    PL_GPU_EPI_GELU_BIAS
} pl_gpu_epilogue;
typedef struct pl_gpu_mm_shape {
    int m, n, k;
    pl_dtype ab, d;
    pl_gpu_epilogue epilogue;
    const void *bias; /* device, [m] of dtype d; with PL_GPU_EPI_BIAS / GELU_BIAS */
    bool accumulate;  /* beta = 1: Y += ... (the residual add) */
    int ldd;          /* Y's column stride in elements (rows of the row-major result), >= m; 0: m.
                       * cuBLASLt's Hopper kernels need every column of Y 16-byte aligned: an
                       * odd m (GPT-2's vocabulary, 50257) otherwise leaves it the slow ones */
} pl_gpu_mm_shape;
typedef struct pl_gpu_lt pl_gpu_lt; /* a cuBLASLt handle */
pl_status pl_gpu_lt_new(pl_gpu_lt **out, pl_error *err);
void pl_gpu_lt_free(pl_gpu_lt *lt);
typedef struct pl_gpu_mm pl_gpu_mm;
/* `workspace`: the bytes each run will be given. The algorithm is the fastest the heuristic
 * names for this shape; none: PL_ECUDA naming the shape. */
pl_status pl_gpu_mm_new(pl_gpu_lt *lt, const pl_gpu_mm_shape *s, size_t workspace, pl_gpu_mm **out,
                        const char *stage, pl_error *err);
void pl_gpu_mm_free(pl_gpu_mm *mm);
/* Enqueues the matmul on `stream` (capturable). */
pl_status pl_gpu_mm_run(const pl_gpu_mm *mm, const void *W, const void *X, void *Y, void *workspace,
                        void *stream, const char *stage, int64_t batch, pl_error *err);
/* Times the heuristic's candidates (up to 8) on these operands, outside any capture, and keeps
 * the fastest for every later run if it beats the heuristic's first choice by 10% (the choice
 * sets the result's bits: near-equal candidates must not swap from run to run); *best_us (may be
 * NULL) gets its time per run. Y is overwritten
 * (accumulated into when `accumulate`). */
pl_status pl_gpu_mm_tune(pl_gpu_mm *mm, const void *W, const void *X, void *Y, void *workspace,
                         const char *stage, double *best_us, pl_error *err);
/* dst runs src's algorithm (same shape, dtypes and epilogue; another bias pointer). */
void pl_gpu_mm_copy_algo(pl_gpu_mm *dst, const pl_gpu_mm *src);
/* Device `device`'s memory in bytes (cudaGetDeviceProperties' totalGlobalMem: starts the CUDA
 * runtime, not a context). PL_ECUDA naming the call when the device cannot be asked. */
pl_status pl_gpu_memory_total(int device, uint64_t *bytes, pl_error *err);
/* CUDA devices this process sees (CUDA_VISIBLE_DEVICES applied); 0 when none or on error. */
int pl_gpu_device_count(void);
/* Multiprocessors of the current device. */
int pl_gpu_sm_count(void);

#endif
