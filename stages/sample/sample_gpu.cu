/* sample_gpu: the sample kind's kernels (stages/sample/sample_kernels.cuh) and their launcher
 * (sample_gpu.h). The C reference is stages/sample/sample_ref.c. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

extern "C" {
#include "pl_sample.h"
#include "pl_spec.h"
#include "sample_gpu.h"
}

#include "sample_kernels.cuh"

/* 512 threads a row: GPT-2's 50257 logits are about 100 per thread, and B rows run at once. */
static const int pl__sample_threads = 512;

extern "C" int pl_sample_gpu_launch(const pl_sample_params *p, int ldtype, const void *logits,
                                    int B, int V, int N, const int32_t *step, const void *batch,
                                    int batch64, const int32_t *limits, int32_t *tokens,
                                    int32_t *next, int32_t *finished, int32_t *count, void *stream)
{
    using namespace pl_sample;
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    if (B < 1 || B > 0x7fffffff || V < 1 || N < 1) return (int)cudaErrorInvalidValue;
    dim3 grid((unsigned)B);
    if (ldtype == PL_F32)
        sample_kernel<<<grid, pl__sample_threads, 0, s>>>(static_cast<const float *>(logits), B, V,
                                                          N, step, batch, batch64, limits, tokens,
                                                          next, finished, *p);
    else if (ldtype == PL_F16)
        sample_kernel<<<grid, pl__sample_threads, 0, s>>>(static_cast<const __half *>(logits), B, V,
                                                          N, step, batch, batch64, limits, tokens,
                                                          next, finished, *p);
    else if (ldtype == PL_BF16)
        sample_kernel<<<grid, pl__sample_threads, 0, s>>>(
            static_cast<const __nv_bfloat16 *>(logits), B, V, N, step, batch, batch64, limits,
            tokens, next, finished, *p);
    else
        return (int)cudaErrorInvalidValue;
    int e = (int)cudaGetLastError();
    if (e || !count) return e;
    count_kernel<<<1, 256, 0, s>>>(count, finished, B);
    return (int)cudaGetLastError();
}
