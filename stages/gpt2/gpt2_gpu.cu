/* gpt2_gpu: the gpt2 kind's kernels (embedding, layernorm, flash attention, log-probabilities)
 * and one thin launcher each (stages/gpt2/gpt2_gpu.h). The GEMMs go through cuBLASLt
 * (runtime/device/pl_gpu_lt.c); stages/gpt2/gpt2.c strings them together. The C reference is
 * stages/gpt2/gpt2_ref.c. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

extern "C" {
#include "gpt2.h"
#include "gpt2_gpu.h"
#include "pl_spec.h"
}

#include "gpt2_kernels.cuh"

namespace
{
using namespace pl_gpt2;
static_assert(kHeadMaxRows == PL_GPT2_HEAD_MAX_ROWS, "gpt2.h sizes the head kernel's rows");

template <typename E, int HD, int NW, int MT> int attention_setup()
{
    return (int)cudaFuncSetAttribute(attention_kernel<E, HD, NW, MT>,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     (int)attn_smem<HD, NW, MT>::bytes);
}

template <typename E, int HD, int NW, int MT>
int attention_launch(void *out, const void *qkv, int B, int T, int H, cudaStream_t s)
{
    using L = attn_smem<HD, NW, MT>;
    dim3 grid((unsigned)((T + L::BR - 1) / L::BR), (unsigned)H, (unsigned)B);
    float scale_log2 = 1.4426950408889634f / sqrtf((float)HD);
    attention_kernel<E, HD, NW, MT><<<grid, NW * 32, L::bytes, s>>>(
        static_cast<E *>(out), static_cast<const E *>(qkv), T, H, scale_log2);
    return (int)cudaGetLastError();
}

/* 4 warps of one m-tile each (64 query rows per block). Measured on the H200 (bench_gpt2): 8 warps
 * of one m-tile (128 rows) the same at T = 1024 and 5-10% slower at T = 512 (fewer blocks to
 * balance the causal triangle); 4 warps of two m-tiles (FlashAttention-2's 128 x 64 tile, each K/V
 * fragment serving two mma) the same at T = 1024 and 10% slower at T = 512 (attention 0.428 vs
 * 0.386 ms), and with the unmasked tiles free of mask code the same at T 1024 (0.930 against
 * 0.928 ms f16, 0.955 against 0.964 bf16) and 10% slower at T 512 (0.376 against 0.341). The
 * kernel keeps MT as a template parameter (the emulation test covers MT = 2) for larger head
 * sizes. */
template <typename E, int HD>
int attention_hd(void *out, const void *qkv, int B, int T, int H, cudaStream_t s)
{
    return attention_launch<E, HD, 4, 1>(out, qkv, B, T, H, s);
}

template <typename E>
int attention_any(int hd, void *out, const void *qkv, int B, int T, int H, cudaStream_t s)
{
    switch (hd) {
    case 16:
        return attention_hd<E, 16>(out, qkv, B, T, H, s);
    case 32:
        return attention_hd<E, 32>(out, qkv, B, T, H, s);
    case 64:
        return attention_hd<E, 64>(out, qkv, B, T, H, s);
    default:
        return (int)cudaErrorInvalidValue;
    }
}

template <typename E> int attention_setup_all()
{
    int e = 0;
    if (!e) e = attention_setup<E, 16, 4, 1>();
    if (!e) e = attention_setup<E, 32, 4, 1>();
    if (!e) e = attention_setup<E, 64, 4, 1>();
    if (!e) e = attention_setup<E, 16, 4, 2>();
    if (!e) e = attention_setup<E, 32, 4, 2>();
    if (!e) e = attention_setup<E, 64, 4, 2>();
    return e;
}

int grid_for(int64_t items, int block)
{
    int64_t g = (items + block - 1) / block;
    return (int)(g < 1 ? 1 : g > 65535 * 8 ? 65535 * 8 : g);
}

} // namespace

extern "C" int pl_gpt2_gpu_setup(void)
{
    int e = attention_setup_all<__half>();
    return e ? e : attention_setup_all<__nv_bfloat16>();
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

namespace
{
using namespace pl_gpt2;
template <typename E, int NV>
void layernorm_launch(void *out, void *lo, const float *x, const float *w, const float *b,
                      int64_t rows, int64_t first, int64_t step, int C, float eps, cudaStream_t s)
{
    unsigned grid = (unsigned)((rows + 7) / 8);
    layernorm_kernel<E, NV><<<grid, 256, 0, s>>>(static_cast<E *>(out), static_cast<E *>(lo), x, w,
                                                 b, rows, first, step, C, eps);
}

} // namespace

extern "C" int pl_gpt2_launch_layernorm(int dtype, void *out, void *lo, const float *x,
                                        const float *w, const float *b, int64_t rows, int64_t first,
                                        int64_t step, int C, float eps, void *stream)
{
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    if (dtype != PL_F16 && dtype != PL_F32 && dtype != PL_BF16) return (int)cudaErrorInvalidValue;
    ln_with_width(C, [&](auto nv) {
        constexpr int NV = decltype(nv)::value;
        if (dtype == PL_F16)
            layernorm_launch<__half, NV>(out, lo, x, w, b, rows, first, step, C, eps, s);
        else if (dtype == PL_F32)
            layernorm_launch<float, NV>(out, lo, x, w, b, rows, first, step, C, eps, s);
        else
            layernorm_launch<__nv_bfloat16, NV>(out, lo, x, w, b, rows, first, step, C, eps, s);
    });
    return (int)cudaGetLastError();
}

extern "C" int pl_gpt2_head_small_ok(int rows, int C)
{
    return rows >= 1 && rows <= kHeadMaxRows && C % 8 == 0;
}

extern "C" int pl_gpt2_launch_head_f32(int dtype, float *out, const float *h, const void *wte,
                                       int rows, int C, int V, int sms, void *stream)
{
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    if (!pl_gpt2_head_small_ok(rows, C)) return (int)cudaErrorInvalidValue;
    /* Enough warps to keep the memory system busy: 8 blocks of 8 warps per SM. */
    int64_t warps = (int64_t)(sms > 0 ? sms : 132) * 64;
    if (warps > (V + kHeadV - 1) / kHeadV) warps = (V + kHeadV - 1) / kHeadV;
    unsigned grid = (unsigned)((warps + 7) / 8);
    if (dtype == PL_F16)
        head_f32_kernel<<<grid, 256, 0, s>>>(out, h, static_cast<const __half *>(wte), rows, C, V);
    else if (dtype == PL_BF16)
        head_f32_kernel<<<grid, 256, 0, s>>>(out, h, static_cast<const __nv_bfloat16 *>(wte), rows,
                                             C, V);
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

extern "C" int pl_gpt2_launch_attention_last(int dtype, void *out, const void *qkv, int B, int T,
                                             int H, int head_dim, void *stream)
{
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    dim3 grid((unsigned)H, (unsigned)B);
    float scale = 1.0f / sqrtf((float)head_dim);
#define PL__LAST(E, HD)                                                                            \
    attention_last_kernel<E, HD>                                                                   \
        <<<grid, 32, 0, s>>>(static_cast<E *>(out), static_cast<const E *>(qkv), T, H, scale)
    if (dtype == PL_F16 && head_dim == 16)
        PL__LAST(__half, 16);
    else if (dtype == PL_F16 && head_dim == 32)
        PL__LAST(__half, 32);
    else if (dtype == PL_F16 && head_dim == 64)
        PL__LAST(__half, 64);
    else if (dtype == PL_BF16 && head_dim == 16)
        PL__LAST(__nv_bfloat16, 16);
    else if (dtype == PL_BF16 && head_dim == 32)
        PL__LAST(__nv_bfloat16, 32);
    else if (dtype == PL_BF16 && head_dim == 64)
        PL__LAST(__nv_bfloat16, 64);
    else
        return (int)cudaErrorInvalidValue;
#undef PL__LAST
    return (int)cudaGetLastError();
}

extern "C" int pl_gpt2_launch_gather_rows(float *dst, const float *src, int rows, int64_t first,
                                          int64_t step, int C, void *stream)
{
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    gather_rows_kernel<<<grid_for((int64_t)rows * C, 256), 256, 0, s>>>(dst, src, rows, first, step,
                                                                        C);
    return (int)cudaGetLastError();
}

extern "C" int pl_gpt2_launch_unpad(int elem_bytes, void *dst, const void *src, int64_t rows, int V,
                                    int ld, void *stream)
{
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    int grid = (int)(rows < 65535 * 8 ? (rows > 0 ? rows : 1) : 65535 * 8);
    if (elem_bytes == 2)
        unpad_rows_kernel<<<grid, 256, 0, s>>>(static_cast<uint16_t *>(dst),
                                               static_cast<const uint16_t *>(src), rows, V, ld);
    else
        unpad_rows_kernel<<<grid, 256, 0, s>>>(static_cast<float *>(dst),
                                               static_cast<const float *>(src), rows, V, ld);
    return (int)cudaGetLastError();
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

extern "C" int pl_gpt2_gpu_device(void)
{
    int d = 0;
    return cudaGetDevice(&d) == cudaSuccess ? d : 0;
}

extern "C" int pl_gpt2_launch_embed_at(int dtype, float *x, const int32_t *ids, const void *wte,
                                       const float *wpe, const int32_t *lengths,
                                       const int32_t *step, int B, int C, int V, int P,
                                       void *stream)
{
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    int grid = grid_for((int64_t)B * C, 256);
    if (dtype == PL_F16)
        embed_at_kernel<<<grid, 256, 0, s>>>(x, ids, static_cast<const __half *>(wte), wpe, lengths,
                                             step, B, C, V, P);
    else if (dtype == PL_BF16)
        embed_at_kernel<<<grid, 256, 0, s>>>(x, ids, static_cast<const __nv_bfloat16 *>(wte), wpe,
                                             lengths, step, B, C, V, P);
    else
        return (int)cudaErrorInvalidValue;
    return (int)cudaGetLastError();
}

namespace
{
/* The current device has programmatic dependent launch (compute capability 9.0 and later). */
bool pdl_ok()
{
    int dev = 0, major = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    return major >= 9;
}

template <typename E>
int cache_write_as(int kv_dtype, void *cache_l, const void *qkv, const int32_t *lengths, int B,
                   int T, int H, int hd, int P, cudaStream_t s)
{
    int grid = grid_for((int64_t)B * T * H * hd, 256);
    const E *q = static_cast<const E *>(qkv);
    if (kv_dtype == PL_F32)
        cache_write_kernel<E, float>
            <<<grid, 256, 0, s>>>(static_cast<float *>(cache_l), q, lengths, B, T, H, hd, P);
    else
        cache_write_kernel<E, E>
            <<<grid, 256, 0, s>>>(static_cast<E *>(cache_l), q, lengths, B, T, H, hd, P);
    return (int)cudaGetLastError();
}

template <typename E, typename CT, int HD>
int cached_launch(void *out, float *parts, const void *qkv, void *cache_l, const int32_t *lengths,
                  const int32_t *step, int B, int T, int H, int P, int splits, int *count,
                  bool early, cudaStream_t s)
{
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)splits, (unsigned)H, (unsigned)B);
    cfg.blockDim = dim3(kCachedThreads);
    cfg.stream = s;
    /* early: programmatic dependent launch (its blocks load the cached keys and values while the
     * QKV kernel before it runs; attention_cached_kernel says why that is safe) */
    cudaLaunchAttribute attr;
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    if (early && pdl_ok()) {
        cfg.attrs = &attr;
        cfg.numAttrs = 1;
    }
    float scale = 1.0f / sqrtf((float)HD);
    int e = (int)cudaLaunchKernelEx(&cfg, attention_cached_kernel<E, CT, HD>, static_cast<E *>(out),
                                    parts, count, static_cast<const E *>(qkv),
                                    static_cast<CT *>(cache_l), lengths, step, B, T, H, P, splits,
                                    scale);
    if (e || splits == 1 || count) return e; /* count: the kernel merged its splits itself */
    attention_combine_kernel<E>
        <<<dim3((unsigned)H, (unsigned)B), HD, 0, s>>>(static_cast<E *>(out), parts, H, HD, splits);
    return (int)cudaGetLastError();
}

template <typename E, typename CT>
int cached_hd(int hd, void *out, float *parts, const void *qkv, void *cache_l,
              const int32_t *lengths, const int32_t *step, int B, int T, int H, int P, int splits,
              int *count, bool early, cudaStream_t s)
{
    switch (hd) {
    case 16:
        return cached_launch<E, CT, 16>(out, parts, qkv, cache_l, lengths, step, B, T, H, P, splits,
                                        count, early, s);
    case 32:
        return cached_launch<E, CT, 32>(out, parts, qkv, cache_l, lengths, step, B, T, H, P, splits,
                                        count, early, s);
    case 64:
        return cached_launch<E, CT, 64>(out, parts, qkv, cache_l, lengths, step, B, T, H, P, splits,
                                        count, early, s);
    default:
        return (int)cudaErrorInvalidValue;
    }
}
} // namespace

extern "C" int pl_gpt2_launch_cache_write(int dtype, int kv_dtype, void *cache_l, const void *qkv,
                                          const int32_t *lengths, int B, int T, int H, int head_dim,
                                          int P, void *stream)
{
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    if (kv_dtype != PL_F32 && kv_dtype != dtype) return (int)cudaErrorInvalidValue;
    if (dtype == PL_F16)
        return cache_write_as<__half>(kv_dtype, cache_l, qkv, lengths, B, T, H, head_dim, P, s);
    if (dtype == PL_BF16)
        return cache_write_as<__nv_bfloat16>(kv_dtype, cache_l, qkv, lengths, B, T, H, head_dim, P,
                                             s);
    return (int)cudaErrorInvalidValue;
}

extern "C" int pl_gpt2_launch_attention_cached(int dtype, int kv_dtype, void *out, float *parts,
                                               int *count, const void *qkv, void *cache_l,
                                               const int32_t *lengths, const int32_t *step, int B,
                                               int T, int H, int head_dim, int P, int splits,
                                               int early, void *stream)
{
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    if (splits < 1 || splits > 65535 || (splits > 1 && !parts) || B > 65535 || H > 65535 ||
        (count && splits > kCachedMaxSplits) || (early && !step))
        return (int)cudaErrorInvalidValue;
    bool f32 = kv_dtype == PL_F32, e = early != 0;
    if (!f32 && kv_dtype != dtype) return (int)cudaErrorInvalidValue;
    if (dtype == PL_F16)
        return f32 ? cached_hd<__half, float>(head_dim, out, parts, qkv, cache_l, lengths, step, B,
                                              T, H, P, splits, count, e, s)
                   : cached_hd<__half, __half>(head_dim, out, parts, qkv, cache_l, lengths, step, B,
                                               T, H, P, splits, count, e, s);
    if (dtype == PL_BF16)
        return f32 ? cached_hd<__nv_bfloat16, float>(head_dim, out, parts, qkv, cache_l, lengths,
                                                     step, B, T, H, P, splits, count, e, s)
                   : cached_hd<__nv_bfloat16, __nv_bfloat16>(head_dim, out, parts, qkv, cache_l,
                                                             lengths, step, B, T, H, P, splits,
                                                             count, e, s);
    return (int)cudaErrorInvalidValue;
}

extern "C" int pl_gpt2_launch_gather_last(float *dst, const float *x, const int32_t *lengths, int B,
                                          int T, int C, void *stream)
{
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    gather_last_kernel<<<grid_for((int64_t)B * C, 256), 256, 0, s>>>(dst, x, lengths, B, T, C);
    return (int)cudaGetLastError();
}

extern "C" int pl_gpt2_launch_embed_ln(int dtype, float *x, void *out, const int32_t *ids,
                                       const void *wte, const float *wpe, const int32_t *lengths,
                                       const int32_t *step, const float *w, const float *b, int B,
                                       int C, int V, int P, float eps, void *stream)
{
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    if (dtype != PL_F16 && dtype != PL_BF16) return (int)cudaErrorInvalidValue;
    int e = 0;
    ln_with_width(C, [&](auto nv) {
        constexpr int NV = decltype(nv)::value;
        if constexpr (NV == 0) { /* a row the fused kernel does not hold: the two kernels */
            e = pl_gpt2_launch_embed_at(dtype, x, ids, wte, wpe, lengths, step, B, C, V, P, stream);
            if (!e)
                e = pl_gpt2_launch_layernorm(dtype, out, NULL, x, w, b, B, 0, 1, C, eps, stream);
        } else {
            unsigned grid = (unsigned)((B + 7) / 8);
            if (dtype == PL_F16)
                embed_ln_kernel<__half, NV><<<grid, 256, 0, s>>>(
                    x, static_cast<__half *>(out), ids, static_cast<const __half *>(wte), wpe,
                    lengths, step, w, b, B, C, V, P, eps);
            else
                embed_ln_kernel<__nv_bfloat16, NV>
                    <<<grid, 256, 0, s>>>(x, static_cast<__nv_bfloat16 *>(out), ids,
                                          static_cast<const __nv_bfloat16 *>(wte), wpe, lengths,
                                          step, w, b, B, C, V, P, eps);
            e = (int)cudaGetLastError();
        }
    });
    return e;
}

namespace
{
static_assert(kLinMaxRows == PL_GPT2_LIN_MAX_ROWS, "gpt2_gpu.h sizes the small linear's rows");

template <typename E, lin_in IN, lin_out OUT, int KS, int NV>
int lin_launch(void *Y, const void *X, const void *W, const void *bias, const float *lnw,
               const float *lnb, float eps, int rows, int K, int N, bool early, cudaStream_t s)
{
    constexpr int JB = kLinWarps / KS;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)((N + JB - 1) / JB));
    cfg.blockDim = dim3(kLinWarps * 32);
    cfg.dynamicSmemBytes = IN == lin_in::layernorm ? (size_t)rows * K * sizeof(E) : 0;
    cfg.stream = s;
    /* Programmatic dependent launch where the device has it (sm_90 on): the kernel starts while
     * the one before it runs and loads its weights meanwhile (pdl_wait, gpt2_kernels.cuh). */
    cudaLaunchAttribute attr;
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    if (early && pdl_ok()) {
        cfg.attrs = &attr;
        cfg.numAttrs = 1;
    }
    const E *w = static_cast<const E *>(W);
    return (int)cudaLaunchKernelEx(&cfg, linear_small_kernel<E, IN, OUT, KS, NV>, Y, X, w, bias,
                                   lnw, lnb, eps, rows, K, N);
}

template <typename E>
int lin_residual(void *Y, const void *X, const void *W, const void *bias, int rows, int K, int N,
                 bool early, cudaStream_t s)
{
    switch (lin_slices(K)) {
    case 4:
        return lin_launch<E, lin_in::plain, lin_out::residual, 4, 1>(Y, X, W, bias, NULL, NULL, 0,
                                                                     rows, K, N, early, s);
    case 2:
        return lin_launch<E, lin_in::plain, lin_out::residual, 2, 1>(Y, X, W, bias, NULL, NULL, 0,
                                                                     rows, K, N, early, s);
    default:
        return lin_launch<E, lin_in::plain, lin_out::residual, 1, 1>(Y, X, W, bias, NULL, NULL, 0,
                                                                     rows, K, N, early, s);
    }
}

template <typename E>
int lin_as(int in, int out, void *Y, const void *X, const void *W, const void *bias,
           const float *lnw, const float *lnb, float eps, int rows, int K, int N, bool early,
           cudaStream_t s)
{
    if (in == PL_GPT2_LIN_LAYERNORM) {
        int e = (int)cudaErrorInvalidValue;
        ln_with_width(K, [&](auto nv) {
            constexpr int NV = decltype(nv)::value;
            if constexpr (NV > 0) {
                if (out == PL_GPT2_LIN_BIAS)
                    e = lin_launch<E, lin_in::layernorm, lin_out::bias, 1, NV>(
                        Y, X, W, bias, lnw, lnb, eps, rows, K, N, early, s);
                else if (out == PL_GPT2_LIN_GELU)
                    e = lin_launch<E, lin_in::layernorm, lin_out::gelu, 1, NV>(
                        Y, X, W, bias, lnw, lnb, eps, rows, K, N, early, s);
            }
        });
        return e;
    }
    return lin_residual<E>(Y, X, W, bias, rows, K, N, early, s);
}
} // namespace

extern "C" int pl_gpt2_linear_small_ok(int in, int out, int rows, int K, int N)
{
    if (rows < 1 || rows > kLinMaxRows || K < 8 || K % 8 || N < 1) return 0;
    if (in == PL_GPT2_LIN_LAYERNORM)
        return K <= kLnMax && (out == PL_GPT2_LIN_BIAS || out == PL_GPT2_LIN_GELU);
    return in == PL_GPT2_LIN_PLAIN && out == PL_GPT2_LIN_RESIDUAL;
}

extern "C" int pl_gpt2_launch_linear_small(int dtype, int in, int out, void *Y, const void *X,
                                           const void *W, const void *bias, const float *lnw,
                                           const float *lnb, float eps, int rows, int K, int N,
                                           int early, void *stream)
{
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    if (!pl_gpt2_linear_small_ok(in, out, rows, K, N)) return (int)cudaErrorInvalidValue;
    if (dtype == PL_F16)
        return lin_as<__half>(in, out, Y, X, W, bias, lnw, lnb, eps, rows, K, N, early, s);
    if (dtype == PL_BF16)
        return lin_as<__nv_bfloat16>(in, out, Y, X, W, bias, lnw, lnb, eps, rows, K, N, early, s);
    return (int)cudaErrorInvalidValue;
}
