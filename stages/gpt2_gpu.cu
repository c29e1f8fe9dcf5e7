/* gpt2_gpu: the gpt2 kind's kernels (embedding, layernorm, flash attention, log-probabilities)
 * and one thin launcher each (stages/gpt2_gpu.h). The GEMMs go through cuBLASLt
 * (runtime/gpu/pl_gpu_lt.c); stages/gpt2.c strings them together. The C reference is
 * stages/gpt2_ref.c. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <mma.h>
#include <stdint.h>

extern "C" {
#include "gpt2_gpu.h"
#include "pl_spec.h"
}

#include "gpt2_kernels.cuh"

namespace
{
using namespace pl_gpt2;

template <typename E, int HD> int attention_setup()
{
    return (int)cudaFuncSetAttribute(attention_kernel<E, HD>,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     (int)attn_smem<HD>::bytes);
}

template <typename E, int HD>
int attention_launch(void *out, const void *qkv, int B, int T, int H, cudaStream_t s)
{
    dim3 grid((unsigned)((T + kBR - 1) / kBR), (unsigned)H, (unsigned)B);
    float scale_log2 = 1.4426950408889634f / sqrtf((float)HD);
    attention_kernel<E, HD><<<grid, kWarps * 32, attn_smem<HD>::bytes, s>>>(
        static_cast<E *>(out), static_cast<const E *>(qkv), T, H, scale_log2);
    return (int)cudaGetLastError();
}

template <typename E>
int attention_any(int hd, void *out, const void *qkv, int B, int T, int H, cudaStream_t s)
{
    switch (hd) {
    case 16:
        return attention_launch<E, 16>(out, qkv, B, T, H, s);
    case 32:
        return attention_launch<E, 32>(out, qkv, B, T, H, s);
    case 64:
        return attention_launch<E, 64>(out, qkv, B, T, H, s);
    default:
        return (int)cudaErrorInvalidValue;
    }
}

int grid_for(int64_t items, int block)
{
    int64_t g = (items + block - 1) / block;
    return (int)(g < 1 ? 1 : g > 65535 * 8 ? 65535 * 8 : g);
}

} // namespace

extern "C" int pl_gpt2_gpu_setup(void)
{
    int e = 0;
    if (!e) e = attention_setup<__half, 16>();
    if (!e) e = attention_setup<__half, 32>();
    if (!e) e = attention_setup<__half, 64>();
    if (!e) e = attention_setup<__nv_bfloat16, 16>();
    if (!e) e = attention_setup<__nv_bfloat16, 32>();
    if (!e) e = attention_setup<__nv_bfloat16, 64>();
    return e;
}

extern "C" int pl_gpt2_gpu_head_ok(int hd)
{
    return hd == 16 || hd == 32 || hd == 64;
}

extern "C" int pl_gpt2_launch_embed(int dtype, float *x, const int32_t *ids, const void *wte,
                                    const float *wpe, int64_t N, int T, int C, int V, void *stream)
{
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    int grid = grid_for(N * C, 256);
    if (dtype == PL_F16)
        embed_kernel<<<grid, 256, 0, s>>>(x, ids, static_cast<const __half *>(wte), wpe, N, T, C,
                                          V);
    else if (dtype == PL_BF16)
        embed_kernel<<<grid, 256, 0, s>>>(x, ids, static_cast<const __nv_bfloat16 *>(wte), wpe, N,
                                          T, C, V);
    else
        return (int)cudaErrorInvalidValue;
    return (int)cudaGetLastError();
}

extern "C" int pl_gpt2_launch_layernorm(int dtype, void *out, const float *x, const float *w,
                                        const float *b, int64_t rows, int64_t first, int64_t step,
                                        int C, float eps, void *stream)
{
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    unsigned grid = (unsigned)((rows + 7) / 8);
    if (dtype == PL_F16)
        layernorm_kernel<<<grid, 256, 0, s>>>(static_cast<__half *>(out), x, w, b, rows, first,
                                              step, C, eps);
    else if (dtype == PL_BF16)
        layernorm_kernel<<<grid, 256, 0, s>>>(static_cast<__nv_bfloat16 *>(out), x, w, b, rows,
                                              first, step, C, eps);
    else
        return (int)cudaErrorInvalidValue;
    return (int)cudaGetLastError();
}

extern "C" int pl_gpt2_launch_attention(int dtype, void *out, const void *qkv, int B, int T, int H,
                                        int head_dim, void *stream)
{
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    if (dtype == PL_F16) return attention_any<__half>(head_dim, out, qkv, B, T, H, s);
    if (dtype == PL_BF16) return attention_any<__nv_bfloat16>(head_dim, out, qkv, B, T, H, s);
    return (int)cudaErrorInvalidValue;
}

extern "C" int pl_gpt2_launch_attention_naive(int dtype, void *out, const void *qkv, int B, int T,
                                              int H, int head_dim, void *stream)
{
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    if (head_dim > 64) return (int)cudaErrorInvalidValue;
    int64_t threads = (int64_t)B * T * H * 32;
    unsigned grid = (unsigned)((threads + 255) / 256);
    float scale = 1.0f / sqrtf((float)head_dim);
    if (dtype == PL_F16)
        attention_naive_kernel<<<grid, 256, 0, s>>>(
            static_cast<__half *>(out), static_cast<const __half *>(qkv), B, T, H, head_dim, scale);
    else if (dtype == PL_BF16)
        attention_naive_kernel<<<grid, 256, 0, s>>>(static_cast<__nv_bfloat16 *>(out),
                                                    static_cast<const __nv_bfloat16 *>(qkv), B, T,
                                                    H, head_dim, scale);
    else
        return (int)cudaErrorInvalidValue;
    return (int)cudaGetLastError();
}

extern "C" int pl_gpt2_launch_logprob(int ldtype, float *out, const void *logits,
                                      const int32_t *targets, int64_t rows, int P, int T, int V,
                                      void *stream)
{
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    unsigned grid = (unsigned)rows;
    if (ldtype == PL_F16)
        logprob_kernel<<<grid, 256, 0, s>>>(out, static_cast<const __half *>(logits), targets, rows,
                                            P, T, V);
    else if (ldtype == PL_BF16)
        logprob_kernel<<<grid, 256, 0, s>>>(out, static_cast<const __nv_bfloat16 *>(logits),
                                            targets, rows, P, T, V);
    else if (ldtype == PL_F32)
        logprob_kernel<<<grid, 256, 0, s>>>(out, static_cast<const float *>(logits), targets, rows,
                                            P, T, V);
    else
        return (int)cudaErrorInvalidValue;
    return (int)cudaGetLastError();
}
