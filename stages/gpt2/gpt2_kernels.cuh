/* gpt2_kernels: the gpt2 kind's device code (included by stages/gpt2/gpt2_gpu.cu, which holds the
 * launchers): embedding, layernorm, flash attention, plain attention, log-probabilities. Device
 * code only, so tests/unit/test_gpt2_emu.cpp can also compile it on the CPU against a small
 * emulation of the CUDA built-ins, ldmatrix and mma.sync it uses, and check it without a GPU. */
#ifndef PL_GPT2_KERNELS_CUH
#define PL_GPT2_KERNELS_CUH

#include <type_traits>

#ifndef PL_DYNAMIC_SMEM
#define PL_DYNAMIC_SMEM(name) extern __shared__ __align__(128) unsigned char name[]
#endif

namespace pl_gpt2
{

template <typename E> __device__ inline float to_f(E v);
template <> __device__ inline float to_f<__half>(__half v)
{
    return __half2float(v);
}
template <> __device__ inline float to_f<__nv_bfloat16>(__nv_bfloat16 v)
{
    return __bfloat162float(v);
}
template <> __device__ inline float to_f<float>(float v)
{
    return v;
}
template <typename E> __device__ inline E from_f(float v);
template <> __device__ inline __half from_f<__half>(float v)
{
    return __float2half_rn(v);
}
template <> __device__ inline __nv_bfloat16 from_f<__nv_bfloat16>(float v)
{
    return __float2bfloat16_rn(v);
}
template <> __device__ inline float from_f<float>(float v)
{
    return v;
}

/* ---- embedding ---- */

template <typename E>
__global__ void embed_kernel(float *x, const int32_t *ids, const E *wte, const float *wpe,
                             int64_t N, int T, int C, int V)
{
    int64_t total = N * C;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t n = i / C;
        int c = (int)(i - n * C);
        int32_t id = ids[n];
        if (id < 0 || id >= V) id = 0;
        x[i] = to_f(wte[(int64_t)id * C + c]) + wpe[(int64_t)(n % T) * C + c];
    }
}

/* ---- layernorm: one warp per row, f32 statistics ----
 * Rows of up to kLnMax floats (GPT-2's widest is 1600) with C % 4 == 0 are read once, as float4,
 * into registers; others take two more passes over the row (which stays in L1). */

constexpr int kLnVec = 13; /* float4 per lane: 13 x 4 x 32 = 1664 floats */
constexpr int kLnMax = kLnVec * 4 * 32;
/* The kernel is built for NV float4 per lane (NV 0: the scalar path) and launched with the
 * smallest NV that holds the row: one width for every C held 13 float4 in registers (84 a
 * thread, two 256-thread blocks an SM) where GPT-2 124M's 768 needs 6; measured at T 1024 it then
 * ran at 32% of the DRAM rate, latency-bound. */
constexpr int kLnWidths[] = {1, 2, 4, 6, 8, 10, kLnVec};

/* The launchers' choice, shared with the CPU emulation test: f(std::integral_constant<int, NV>())
 * with the narrowest of kLnWidths that holds a row of C (C % 4 == 0, C <= 128 NV), else NV 0
 * (the scalar path). Host code. */
template <int I = 0, typename F> inline void ln_with_width(int C, F &&f)
{
    constexpr int n = (int)(sizeof kLnWidths / sizeof kLnWidths[0]);
    if constexpr (I == n)
        f(std::integral_constant<int, 0>());
    else if (C % 4 == 0 && C <= 128 * kLnWidths[I])
        f(std::integral_constant<int, kLnWidths[I]>());
    else
        ln_with_width<I + 1>(C, static_cast<F &&>(f));
}

/* out = layernorm(x) rounded to E; lo (when not NULL) = what that rounding lost, also in E, so
 * out + lo carries about twice E's mantissa: the bf16 LM head runs on both halves (a GEMM each,
 * the second accumulating) and its logits miss only the weights' own rounding. */
template <typename E> __device__ inline void ln_store(E *out, E *lo, int64_t i, float v)
{
    E hi = from_f<E>(v);
    out[i] = hi;
    if (lo) lo[i] = from_f<E>(v - to_f(hi));
}

#ifndef PL_CUDA_EMU
template <typename E> __device__ inline uint32_t pack2(float lo, float hi);
template <> __device__ inline uint32_t pack2<__half>(float lo, float hi)
{
    __half2 v = __floats2half2_rn(lo, hi); /* one cvt.rn.f16x2.f32 */
    return *reinterpret_cast<uint32_t *>(&v);
}
template <> __device__ inline uint32_t pack2<__nv_bfloat16>(float lo, float hi)
{
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&v);
}
#else
/* Rounds (lo, hi) to E and packs them as one register, lo in the low half (the lower column). */
template <typename E> inline uint32_t pack2(float lo, float hi)
{
    return (uint32_t)bits_of(from_f<E>(lo)) | (uint32_t)bits_of(from_f<E>(hi)) << 16;
}
#endif

/* Four consecutive outputs (index 4 c4 ..) as one 8-byte store (16 for f32), and their rounding
 * residuals when lo is not NULL. */
template <typename E>
__device__ inline void ln_store4(E *out, E *lo, int64_t c4, float a, float b, float c, float d)
{
    if constexpr (sizeof(E) == 4) {
        reinterpret_cast<float4 *>(out)[c4] = make_float4(a, b, c, d);
    } else {
        uint2 v = {pack2<E>(a, b), pack2<E>(c, d)};
        reinterpret_cast<uint2 *>(out)[c4] = v;
        if (lo) {
            float ra = a - to_f(from_f<E>(a)), rb = b - to_f(from_f<E>(b));
            float rc = c - to_f(from_f<E>(c)), rd = d - to_f(from_f<E>(d));
            uint2 r = {pack2<E>(ra, rb), pack2<E>(rc, rd)};
            reinterpret_cast<uint2 *>(lo)[c4] = r;
        }
    }
}

/* The layernorm's scale and shift, lane-strided as ln_row4's rows (the ones past C / 4 zero). */
template <int NV>
__device__ inline void ln_wb4(const float *w, const float *b, int C, int lane, float4 (&wv)[NV],
                              float4 (&bv)[NV])
{
    const int C4 = C / 4;
#pragma unroll
    for (int j = 0; j < NV; j++) {
        int c = lane + 32 * j;
        wv[j] = c < C4 ? reinterpret_cast<const float4 *>(w)[c] : make_float4(0, 0, 0, 0);
        bv[j] = c < C4 ? reinterpret_cast<const float4 *>(b)[c] : make_float4(0, 0, 0, 0);
    }
}

/* One row's layernorm from its values in registers, NV float4 a lane (the row's C4 = C / 4 float4
 * lane-strided: lane l holds float4 l, l + 32, ...; the ones past C4 zero), into orow (and lrow),
 * with the scale and shift already loaded (ln_wb4). */
template <typename E, int NV>
__device__ inline void ln_row4_wb(const float4 (&v)[NV], const float4 (&wv)[NV],
                                  const float4 (&bv)[NV], E *orow, E *lrow, int C, float eps,
                                  int lane)
{
    const int C4 = C / 4;
    float s = 0;
#pragma unroll
    for (int j = 0; j < NV; j++)
        s += (v[j].x + v[j].y) + (v[j].z + v[j].w);
    for (int o = 16; o > 0; o >>= 1)
        s += __shfl_xor_sync(0xffffffffu, s, o);
    float mean = s / C, q = 0;
#pragma unroll
    for (int j = 0; j < NV; j++) {
        if (lane + 32 * j >= C4) continue;
        float a = v[j].x - mean, bb = v[j].y - mean, c = v[j].z - mean, d = v[j].w - mean;
        q += (a * a + bb * bb) + (c * c + d * d);
    }
    for (int o = 16; o > 0; o >>= 1)
        q += __shfl_xor_sync(0xffffffffu, q, o);
    float rstd = rsqrtf(q / C + eps);
#pragma unroll
    for (int j = 0; j < NV; j++) {
        int c = lane + 32 * j;
        if (c >= C4) continue;
        ln_store4(orow, lrow, c, (v[j].x - mean) * rstd * wv[j].x + bv[j].x,
                  (v[j].y - mean) * rstd * wv[j].y + bv[j].y,
                  (v[j].z - mean) * rstd * wv[j].z + bv[j].z,
                  (v[j].w - mean) * rstd * wv[j].w + bv[j].w);
    }
}

/* ln_row4_wb with the scale and shift loaded here: their loads go out before the two reductions,
 * not after (a round trip less on a row's latency, which decode waits for). */
template <typename E, int NV>
__device__ inline void ln_row4(const float4 (&v)[NV], E *orow, E *lrow, const float *w,
                               const float *b, int C, float eps, int lane)
{
    float4 wv[NV], bv[NV];
    ln_wb4<NV>(w, b, C, lane, wv, bv);
    ln_row4_wb<E, NV>(v, wv, bv, orow, lrow, C, eps, lane);
}

template <typename E, int NV>
__global__ void layernorm_kernel(E *out, E *lo, const float *x, const float *w, const float *b,
                                 int64_t rows, int64_t first, int64_t step, int C, float eps)
{
    static_assert(NV >= 0 && NV <= kLnVec, "float4 per lane");
    int lane = threadIdx.x & 31;
    int64_t r = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (r >= rows) return;
    const float *xr = x + (first + r * step) * C;
    E *orow = out + r * C, *lrow = lo ? lo + r * C : nullptr;
    if constexpr (NV > 0) { /* the launcher checked C % 4 == 0 and C <= 128 NV */
        const float4 *x4 = reinterpret_cast<const float4 *>(xr);
        const int C4 = C / 4;
        float4 v[NV];
#pragma unroll
        for (int j = 0; j < NV; j++) {
            int c = lane + 32 * j;
            v[j] = c < C4 ? x4[c] : make_float4(0, 0, 0, 0);
        }
        ln_row4<E, NV>(v, orow, lrow, w, b, C, eps, lane);
    } else {
        float s = 0;
        for (int c = lane; c < C; c += 32)
            s += xr[c];
        for (int o = 16; o > 0; o >>= 1)
            s += __shfl_xor_sync(0xffffffffu, s, o);
        float mean = s / C, v = 0;
        for (int c = lane; c < C; c += 32) {
            float d = xr[c] - mean;
            v += d * d;
        }
        for (int o = 16; o > 0; o >>= 1)
            v += __shfl_xor_sync(0xffffffffu, v, o);
        float rstd = rsqrtf(v / C + eps);
        for (int c = lane; c < C; c += 32)
            ln_store(orow, lrow, c, (xr[c] - mean) * rstd * w[c] + b[c]);
    }
}

/* ---- attention: FlashAttention-2 style on mma.sync m16n8k16 ----
 * A block of NW warps owns 16 NW query rows of one (sequence, head); each warp 16 of them, its
 * Q fragments held in registers for the whole kernel. K/V tiles of kBC keys stream through two
 * shared-memory buffers with cp.async (the next tile loads while this one computes). Per tile and
 * warp: S = Q K^T lands in registers (the m16n8k16 accumulator layout), the online softmax runs
 * on those registers (a row's 64 scores live in the 4 lanes of a quad: two shuffles reduce it),
 * and the accumulator layout of P is, element for element, the A-operand layout of the next
 * product, so O += P V follows without P touching shared memory. ldmatrix loads the K (plain)
 * and V (transposed) fragments; the 16-byte row padding keeps its eight rows on distinct banks.
 * Causal: tiles past the block's last query are skipped, the diagonal tile masked. Only the
 * output passes through shared memory (the warp's own Q rows), for 16-byte stores. */

constexpr int kBC = 64; /* keys per K/V tile */

template <int HD, int NW, int MT = 1> struct attn_smem {
    static constexpr int BR = 16 * MT * NW; /* query rows per block: NW warps of MT m-tiles */
    static constexpr int LDE = HD + 8;      /* dtype row stride of Q, K, V tiles (16-byte pad) */
    /* Q, two K and two V buffers. */
    static constexpr size_t bytes = (size_t)(BR + 4 * kBC) * LDE * 2;
};

#ifndef PL_CUDA_EMU
/* 16 bytes global -> shared without passing through registers; valid = false writes zeros (the
 * source is then not read). */
__device__ inline void cp_async16(void *dst, const void *src, bool valid)
{
    unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    int n = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(n));
}
__device__ inline void cp_async_commit()
{
    asm volatile("cp.async.commit_group;\n" ::);
}
/* Waits until at most N of this thread's committed groups are still in flight. */
template <int N> __device__ inline void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
/* Four 8 x 8 b16 matrices from shared memory; lane i gives the address of row i % 8 of matrix
 * i / 8, and register j receives matrix j's row lane / 4, columns 2 (lane % 4) and + 1 (trans:
 * column lane / 4, rows 2 (lane % 4) and + 1). */
__device__ inline void ldsm_x4(uint32_t (&r)[4], const void *p)
{
    unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a)
                 : "memory");
}
__device__ inline void ldsm_x4_trans(uint32_t (&r)[4], const void *p)
{
    unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a)
                 : "memory");
}
/* d += a b for one 16 x 8 x 16 tile, f32 accumulation. */
template <typename E>
__device__ inline void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);
template <>
__device__ inline void mma16816<__half>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                        uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, "
                 "%6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ inline void mma16816<__nv_bfloat16>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                               uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, "
                 "%6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ inline uint16_t bits_of(__half v)
{
    return __half_as_ushort(v);
}
__device__ inline uint16_t bits_of(__nv_bfloat16 v)
{
    return __bfloat16_as_ushort(v);
}
/* 2^x in one MUFU.EX2, subnormal results flushed to zero. exp2f also handles subnormals, at three
 * more instructions an element (it scales the argument into range and the result back); a P
 * under 2^-126 is a zero in f16 and adds nothing next to the row's largest weight, 1. */
__device__ inline float ex2_ftz(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
#endif

template <typename E> struct is_f16 {
    static constexpr bool value = false;
};
template <> struct is_f16<__half> {
    static constexpr bool value = true;
};
/* The two bf16 halves of a packed register, as f32 (a bf16 is the top half of an f32). */
__device__ inline float sum2_bf16(uint32_t w)
{
    uint32_t lo = w << 16, hi = w & 0xffff0000u;
    float a, b;
    memcpy(&a, &lo, 4);
    memcpy(&b, &hi, 4);
    return a + b;
}

/* One K/V tile for one warp (the kernel below): S = Q K^T into registers, the online softmax on
 * them, O += P V. MASK: the tile holds keys after some of the warp's rows (the diagonal tile) or
 * past the sequence's end; the other tiles, all but one per query block, run without any mask
 * code (a compare and a select per score, and the branches around them, measured as a large
 * part of the kernel's non-tensor instructions). */
template <bool MASK, typename E, int HD, int MT, int LDE>
__device__ __forceinline__ void
attn_tile(const E *tK, const E *tV, const uint32_t (&qf)[MT][HD / 16][4], float (&o)[MT][HD / 8][4],
          float (&m0)[MT], float (&m1)[MT], float (&l0)[MT], float (&l1)[MT], int k0, int q_first,
          int T, float scale_log2, int lane)
{
    constexpr int NS = kBC / 8; /* S n-tiles (8 keys each) */
    constexpr int NO = HD / 8;  /* O n-tiles (8 dims each) */
    constexpr int KQ = HD / 16; /* k-steps of Q K^T */
    const int g = lane >> 2, t4 = lane & 3;
    float s[MT][NS][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int j = 0; j < NS; j++)
            s[mt][j][0] = s[mt][j][1] = s[mt][j][2] = s[mt][j][3] = 0;
            /* Each K fragment loaded serves the warp's MT m-tiles. */
#pragma unroll
    for (int j = 0; j < NS; j += 2)
#pragma unroll
        for (int kk = 0; kk < KQ; kk++) {
            uint32_t kf[4]; /* b0, b1 of n-tile j, then of j + 1 */
            ldsm_x4(kf, tK + (8 * j + 8 * (lane >> 4) + (lane & 7)) * LDE + kk * 16 +
                            8 * ((lane >> 3) & 1));
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                mma16816<E>(s[mt][j], qf[mt][kk], kf[0], kf[1]);
                mma16816<E>(s[mt][j + 1], qf[mt][kk], kf[2], kf[3]);
            }
        }
    /* The maxima are of the raw scores (the scale is positive), scaled once per row below, and
     * each P element is one FFMA into exp2: exp2(s * scale_log2 - m). */
    uint32_t pf[MT][kBC / 16][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
        if constexpr (MASK) {
            /* Key k of row r is masked when k > r (causal) or k >= T: k > min(r, T - 1). The
             * element (j, e) holds key k0 + 2 t4 + 8 j + (e & 1), so it is one compare of a
             * constant with the row's limit. */
            const int r0 = q_first + mt * 16 + g, c0 = k0 + 2 * t4;
            const int lim0 = min(r0, T - 1) - c0, lim1 = min(r0 + 8, T - 1) - c0;
#pragma unroll
            for (int j = 0; j < NS; j++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    if (8 * j + (e & 1) > (e < 2 ? lim0 : lim1)) s[mt][j][e] = -INFINITY;
        }
        float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
        for (int j = 0; j < NS; j++) {
            mx0 = fmaxf(mx0, fmaxf(s[mt][j][0], s[mt][j][1]));
            mx1 = fmaxf(mx1, fmaxf(s[mt][j][2], s[mt][j][3]));
        }
        mx0 *= scale_log2;
        mx1 *= scale_log2;
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
        const float n0 = fmaxf(m0[mt], mx0), n1 = fmaxf(m1[mt], mx1);
        /* A row with nothing unmasked yet keeps base 0: exp2(-inf - 0) = 0, no NaN. */
        const float b0 = n0 == -INFINITY ? 0.0f : n0, b1 = n1 == -INFINITY ? 0.0f : n1;
        const float a0 = ex2_ftz(m0[mt] - b0), a1 = ex2_ftz(m1[mt] - b1);
        m0[mt] = n0;
        m1[mt] = n1;
        l0[mt] *= a0;
        l1[mt] *= a1;
#pragma unroll
        for (int j = 0; j < NO; j++) {
            o[mt][j][0] *= a0;
            o[mt][j][1] *= a0;
            o[mt][j][2] *= a1;
            o[mt][j][3] *= a1;
        }
        /* P's accumulator tiles 2 kk and 2 kk + 1 are the A fragment of k-step kk. The sum l: in
         * f16 of the f32 values, as in FlashAttention-2 (P's rounding is then an unbiased error
         * of 2^-11 in the product); in bf16 of the rounded values, so the weights P V uses sum to
         * exactly 1 and their 2^-9 errors partly cancel (measured: the f32 sum costs bf16 about
         * 0.3% of GPT-2 124M's argmaxes). */
#pragma unroll
        for (int kk = 0; kk < kBC / 16; kk++) {
            const float *x = s[mt][2 * kk], *y = s[mt][2 * kk + 1];
            float p[8];
            p[0] = ex2_ftz(fmaf(x[0], scale_log2, -b0));
            p[1] = ex2_ftz(fmaf(x[1], scale_log2, -b0));
            p[2] = ex2_ftz(fmaf(x[2], scale_log2, -b1));
            p[3] = ex2_ftz(fmaf(x[3], scale_log2, -b1));
            p[4] = ex2_ftz(fmaf(y[0], scale_log2, -b0));
            p[5] = ex2_ftz(fmaf(y[1], scale_log2, -b0));
            p[6] = ex2_ftz(fmaf(y[2], scale_log2, -b1));
            p[7] = ex2_ftz(fmaf(y[3], scale_log2, -b1));
            pf[mt][kk][0] = pack2<E>(p[0], p[1]);
            pf[mt][kk][1] = pack2<E>(p[2], p[3]);
            pf[mt][kk][2] = pack2<E>(p[4], p[5]);
            pf[mt][kk][3] = pack2<E>(p[6], p[7]);
            if constexpr (sizeof(E) == 2 && !is_f16<E>::value) {
                l0[mt] += sum2_bf16(pf[mt][kk][0]) + sum2_bf16(pf[mt][kk][2]);
                l1[mt] += sum2_bf16(pf[mt][kk][1]) + sum2_bf16(pf[mt][kk][3]);
            } else {
                l0[mt] += (p[0] + p[1]) + (p[4] + p[5]);
                l1[mt] += (p[2] + p[3]) + (p[6] + p[7]);
            }
        }
    }
    /* Each V fragment loaded serves the warp's MT m-tiles. */
#pragma unroll
    for (int kk = 0; kk < kBC / 16; kk++)
#pragma unroll
        for (int j = 0; j < NO; j += 2) {
            uint32_t vf[4]; /* b0, b1 of O n-tile j, then of j + 1 */
            ldsm_x4_trans(vf, tV + (kk * 16 + (lane & 7) + 8 * ((lane >> 3) & 1)) * LDE + 8 * j +
                                  8 * (lane >> 4));
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                mma16816<E>(o[mt][j], pf[mt][kk], vf[0], vf[1]);
                mma16816<E>(o[mt][j + 1], pf[mt][kk], vf[2], vf[3]);
            }
        }
}

/* Four blocks of one m-tile per SM (16 warps): at most 128 registers a thread, where the compiler
 * would take 134 and fit only three. */
template <typename E, int HD, int NW, int MT>
__global__ void __launch_bounds__(NW * 32, MT == 1 ? 4 : 2)
    attention_kernel(E *out, const E *qkv, int T, int H, float scale_log2)
{
    using L = attn_smem<HD, NW, MT>;
    constexpr int kBR = L::BR;
    constexpr int WR = 16 * MT; /* query rows per warp: MT m-tiles of 16 */
    static_assert(HD % 16 == 0 && HD <= 128, "head size must be a multiple of 16, at most 128");
    constexpr int NO = HD / 8;  /* O n-tiles (8 dims each) */
    constexpr int KQ = HD / 16; /* k-steps of Q K^T */
    PL_DYNAMIC_SMEM(smem);
    E *sQ = reinterpret_cast<E *>(smem);
    E *sK = sQ + kBR * L::LDE; /* [2][kBC][LDE] */
    E *sV = sK + 2 * kBC * L::LDE;

    const int qb = (int)gridDim.x - 1 - (int)blockIdx.x; /* longest rows first */
    const int h = blockIdx.y, b = blockIdx.z;
    const int C = H * HD;
    const int64_t row3 = 3 * (int64_t)C;
    const E *base = qkv + (int64_t)b * T * row3 + (int64_t)h * HD;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int g = lane >> 2, t4 = lane & 3;   /* the quad (row) and the lane in it */
    constexpr int CH = HD / 8;                /* 16-byte chunks per row */
    const int q_first = qb * kBR + warp * WR; /* this warp's first query */
    const int kv_end = min(T, (qb + 1) * kBR);
    const int n_tiles = (kv_end + kBC - 1) / kBC;

    for (int i = tid; i < kBR * CH; i += blockDim.x) {
        int r = i / CH, c = (i % CH) * 8, q = qb * kBR + r;
        cp_async16(sQ + r * L::LDE + c, q < T ? base + (int64_t)q * row3 + c : base, q < T);
    }
    cp_async_commit();
    /* K/V tile t into buffer t & 1. */
#define PL__LOAD_KV(t)                                                                             \
    do {                                                                                           \
        E *dk = sK + ((t)&1) * kBC * L::LDE, *dv = sV + ((t)&1) * kBC * L::LDE;                    \
        for (int i = tid; i < kBC * CH; i += blockDim.x) {                                         \
            int rr = i / CH, c = (i % CH) * 8, k = (t)*kBC + rr;                                   \
            const E *src = k < T ? base + (int64_t)k * row3 + c : base;                            \
            cp_async16(dk + rr * L::LDE + c, src + (k < T ? C : 0), k < T);                        \
            cp_async16(dv + rr * L::LDE + c, src + (k < T ? 2 * C : 0), k < T);                    \
        }                                                                                          \
        cp_async_commit();                                                                         \
    } while (0)
    PL__LOAD_KV(0);
    cp_async_wait<1>(); /* Q has landed (tile 0 may still be in flight) */
    __syncthreads();
    /* A fragments of m-tile mt: rows g, g + 8; columns 2 t4 (+1), 2 t4 + 8 (+1) */
    uint32_t qf[MT][KQ][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int kk = 0; kk < KQ; kk++)
            ldsm_x4(qf[mt][kk],
                    sQ + (warp * WR + mt * 16 + (lane & 7) + 8 * ((lane >> 3) & 1)) * L::LDE +
                        kk * 16 + 8 * (lane >> 4));

    float o[MT][NO][4]; /* rows g (0, 1) and g + 8 (2, 3); columns 8 j + 2 t4 (+1) */
    float m0[MT], m1[MT], l0[MT], l1[MT]; /* l: this lane's part of the sum */
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
#pragma unroll
        for (int j = 0; j < NO; j++)
            o[mt][j][0] = o[mt][j][1] = o[mt][j][2] = o[mt][j][3] = 0;
        m0[mt] = m1[mt] = -INFINITY;
        l0[mt] = l1[mt] = 0;
    }
    for (int it = 0; it < n_tiles; it++) {
        const int k0 = it * kBC;
        if (it + 1 < n_tiles) {
            PL__LOAD_KV(it + 1); /* into the buffer the previous tile used: all are done with it */
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads(); /* tile it is in shared memory for every warp */
        const E *tK = sK + (it & 1) * kBC * L::LDE, *tV = sV + (it & 1) * kBC * L::LDE;
        if (k0 <= q_first + WR - 1) { /* else every key of the tile is after this warp's rows */
            if (k0 + kBC - 1 > q_first || k0 + kBC > T)
                attn_tile<true, E, HD, MT, L::LDE>(tK, tV, qf, o, m0, m1, l0, l1, k0, q_first, T,
                                                   scale_log2, lane);
            else
                attn_tile<false, E, HD, MT, L::LDE>(tK, tV, qf, o, m0, m1, l0, l1, k0, q_first, T,
                                                    scale_log2, lane);
        }
        __syncthreads(); /* every warp is done with this tile's K/V */
    }
#undef PL__LOAD_KV
    /* The warp's own Q rows (read only by it, into registers) stage its output. */
    E *sO = sQ + warp * WR * L::LDE;
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
        float a = l0[mt], c = l1[mt];
        a += __shfl_xor_sync(0xffffffffu, a, 1);
        a += __shfl_xor_sync(0xffffffffu, a, 2);
        c += __shfl_xor_sync(0xffffffffu, c, 1);
        c += __shfl_xor_sync(0xffffffffu, c, 2);
        const float i0 = a > 0 ? 1.0f / a : 0.0f, i1 = c > 0 ? 1.0f / c : 0.0f;
#pragma unroll
        for (int j = 0; j < NO; j++) {
            *reinterpret_cast<uint32_t *>(sO + (mt * 16 + g) * L::LDE + 8 * j + 2 * t4) =
                pack2<E>(o[mt][j][0] * i0, o[mt][j][1] * i0);
            *reinterpret_cast<uint32_t *>(sO + (mt * 16 + g + 8) * L::LDE + 8 * j + 2 * t4) =
                pack2<E>(o[mt][j][2] * i1, o[mt][j][3] * i1);
        }
    }
    __syncwarp();
    for (int i = lane; i < WR * CH; i += 32) {
        int r = i / CH, c = (i % CH) * 8, q = q_first + r;
        if (q < T)
            *reinterpret_cast<int4 *>(out + ((int64_t)b * T + q) * C + (int64_t)h * HD + c) =
                *reinterpret_cast<const int4 *>(sO + r * L::LDE + c);
    }
}

/* ---- attention at the last position only: one warp per (sequence, head) ----
 * When only each sequence's last position is wanted, the last layer needs the attention of that
 * one query (its keys and values are every position's, from the full QKV GEMM). A lane takes keys
 * lane, lane + 32, ...: the whole dot product, an online softmax and its own output in f32; the
 * 32 partial results then merge by log-sum-exp through shuffles. K and V rows are read as 16-byte
 * vectors. out is [B, C]: row b is sequence b's last position. */
/* Eight E (one 16-byte load) as f32. */
template <typename E> __device__ inline void unpack8v(int4 raw, float (&f)[8])
{
    E e[8];
    memcpy(e, &raw, sizeof raw);
#pragma unroll
    for (int i = 0; i < 8; i++)
        f[i] = to_f(e[i]);
}

template <typename E> __device__ inline void unpack8(const int4 *p, float (&f)[8])
{
    unpack8v<E>(*p, f);
}

/* The 32 lanes' online-softmax states (max m, sum l, output o) merged by log-sum-exp through
 * shuffles: every lane ends with the warp's result. A lane that saw no key has m = -inf and
 * weight 0. With `from` > 1 (a power of 2) only lanes `from` apart merge: each lane ends with the
 * result of the lanes equal to it modulo `from` (groups of `from` lanes holding parts of o). */
template <int HD>
__device__ inline void warp_merge_softmax(float &m, float &l, float (&o)[HD], int from = 1)
{
    for (int off = 16; off >= from; off >>= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, off);
        const float l2 = __shfl_xor_sync(0xffffffffu, l, off);
        const float mn = fmaxf(m, m2);
        const float a = m == -INFINITY ? 0.0f : expf(m - mn);
        const float a2 = m2 == -INFINITY ? 0.0f : expf(m2 - mn);
#pragma unroll
        for (int i = 0; i < HD; i++) {
            const float o2 = __shfl_xor_sync(0xffffffffu, o[i], off);
            o[i] = o[i] * a + o2 * a2;
        }
        l = l * a + l2 * a2;
        m = mn;
    }
}

template <typename E, int HD>
__global__ void __launch_bounds__(32)
    attention_last_kernel(E *out, const E *qkv, int T, int H, float scale)
{
    static_assert(HD % 8 == 0, "head size must be a multiple of 8");
    const int h = blockIdx.x, b = blockIdx.y, lane = threadIdx.x & 31;
    const int C = H * HD;
    const int64_t row3 = 3 * (int64_t)C;
    const E *base = qkv + (int64_t)b * T * row3 + (int64_t)h * HD;
    float q[HD], o[HD];
    {
        const E *qr = base + (int64_t)(T - 1) * row3;
#pragma unroll
        for (int i = 0; i < HD; i++) {
            q[i] = to_f(qr[i]) * scale;
            o[i] = 0;
        }
    }
    float m = -INFINITY, l = 0;
    for (int s = lane; s < T; s += 32) {
        const int4 *k4 = reinterpret_cast<const int4 *>(base + (int64_t)s * row3 + C);
        const int4 *v4 = reinterpret_cast<const int4 *>(base + (int64_t)s * row3 + 2 * C);
        float d = 0;
#pragma unroll
        for (int c = 0; c < HD / 8; c++) {
            float kv[8];
            unpack8<E>(k4 + c, kv);
#pragma unroll
            for (int i = 0; i < 8; i++)
                d += q[8 * c + i] * kv[i];
        }
        const float mn = fmaxf(m, d), a = expf(m - mn), p = expf(d - mn); /* exp(-inf) = 0 */
#pragma unroll
        for (int c = 0; c < HD / 8; c++) {
            float vv[8];
            unpack8<E>(v4 + c, vv);
#pragma unroll
            for (int i = 0; i < 8; i++)
                o[8 * c + i] = o[8 * c + i] * a + p * vv[i];
        }
        l = l * a + p;
        m = mn;
    }
    /* Merge the lanes' (m, l, o): every lane ends with the whole result. A lane that saw no key
     * (T < 32) has m = -inf and weight 0. */
    warp_merge_softmax<HD>(m, l, o);
    const float inv = l > 0 ? 1.0f / l : 0.0f;
    E *orow = out + (int64_t)b * C + (int64_t)h * HD;
#pragma unroll
    for (int i = 0; i < HD; i++)
        if (i % 32 == lane) orow[i] = from_f<E>(o[i] * inv);
}

/* dst[r, :] = src[first + r * step, :] for r < rows (f32 rows of C). */
__global__ void gather_rows_kernel(float *dst, const float *src, int rows, int64_t first,
                                   int64_t step, int C)
{
    int64_t total = (int64_t)rows * C;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = i / C;
        dst[i] = src[(first + r * step) * C + (i - r * C)];
    }
}

/* dst[r, :V] = src[r, :V] for r < rows: rows of ld elements packed to rows of V (the LM head's
 * padded logits into the output buffer). A block per row at a time, so no element needs a 64-bit
 * division to find its row (the first version, one flat index per element, took about as long
 * as the head's GEMM). Each thread stores 16 aligned bytes at a time, gathered from 16/sizeof(T)
 * loads (a packed row starts anywhere: V is odd for GPT-2): 2-byte stores left the copy at a
 * third of the HBM's bandwidth, 0.1 ms of the one-sequence forward before its download. */
struct alignas(16) pl_vec16 {
    unsigned w[4];
};

template <typename T>
__global__ void unpad_rows_kernel(T *dst, const T *src, int64_t rows, int V, int ld)
{
    static_assert(16 % sizeof(T) == 0, "whole elements per 16 bytes");
    constexpr int VE = (int)(16 / sizeof(T));
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const T *sr = src + r * ld;
        T *dr = dst + r * V;
        /* Elements before dr's first 16-byte boundary, then whole vectors, then the rest. */
        int head = (int)(((16 - (uintptr_t)dr % 16) % 16) / sizeof(T));
        head = head < V ? head : V;
        int nvec = (V - head) / VE;
        for (int c = threadIdx.x; c < head; c += blockDim.x)
            dr[c] = sr[c];
#pragma unroll 2
        for (int k = threadIdx.x; k < nvec; k += blockDim.x) {
            int c = head + k * VE;
            union {
                pl_vec16 v;
                T e[VE];
            } u;
#pragma unroll
            for (int j = 0; j < VE; j++)
                u.e[j] = sr[c + j];
            *reinterpret_cast<pl_vec16 *>(dr + c) = u.v;
        }
        for (int c = head + nvec * VE + threadIdx.x; c < V; c += blockDim.x)
            dr[c] = sr[c];
    }
}

/* ---- attention, plain: one warp per (query, head), keys in order, f32 online softmax. The
 * fallback `attention: naive` selects, to tell an attention bug from the rest. ---- */

template <typename E>
__global__ void attention_naive_kernel(E *out, const E *qkv, int B, int T, int H, int HD,
                                       float scale)
{
    int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (w >= (int64_t)B * T * H) return;
    int h = (int)(w % H);
    int64_t bt = w / H;
    int t = (int)(bt % T);
    int64_t b = bt / T;
    int C = H * HD;
    const E *q = qkv + (b * T + t) * 3 * C + (int64_t)h * HD;
    float m = -INFINITY, l = 0, o0 = 0, o1 = 0; /* lane owns dims lane and lane + 32 */
    for (int s = 0; s <= t; s++) {
        const E *k = qkv + (b * T + s) * 3 * C + C + (int64_t)h * HD;
        float d = 0;
        for (int i = lane; i < HD; i += 32)
            d += to_f(q[i]) * to_f(k[i]);
        for (int o = 16; o > 0; o >>= 1)
            d += __shfl_xor_sync(0xffffffffu, d, o);
        d *= scale;
        float mn = fmaxf(m, d), a = expf(m - mn), p = expf(d - mn);
        const E *v = k + C;
        o0 = o0 * a + (lane < HD ? p * to_f(v[lane]) : 0.0f);
        o1 = o1 * a + (lane + 32 < HD ? p * to_f(v[lane + 32]) : 0.0f);
        l = l * a + p;
        m = mn;
    }
    E *orow = out + (b * T + t) * C + (int64_t)h * HD;
    if (lane < HD) orow[lane] = from_f<E>(o0 / l);
    if (lane + 32 < HD) orow[lane + 32] = from_f<E>(o1 / l);
}

/* ---- LM head for a few rows, in f32: logits[r, v] = h[r, :] . wte[v, :] ----
 * At the last positions there are only B rows, and the GEMM of [B, C] x [C, V] is a
 * matrix-vector product bound by reading the V x C embedding once (77 MB at 124M). A warp takes
 * kHeadV vocabulary rows at a time and reads them as 16-byte vectors; each h chunk (f32, from
 * L1: rows x C floats) it loads serves all kHeadV of them. The activations are never rounded to
 * 16 bits. */
constexpr int kHeadMaxRows = 16, kHeadV = 4;

template <typename E>
__global__ void head_f32_kernel(float *out, const float *h, const E *wte, int rows, int C, int V)
{
    const int lane = threadIdx.x & 31;
    const int64_t w0 = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int64_t nw = ((int64_t)gridDim.x * blockDim.x) >> 5;
    const int C8 = C / 8; /* C % 8 == 0: 16-byte chunks of E */
    for (int64_t v0 = w0 * kHeadV; v0 < V; v0 += nw * kHeadV) {
        float acc[kHeadMaxRows][kHeadV];
#pragma unroll
        for (int r = 0; r < kHeadMaxRows; r++)
#pragma unroll
            for (int u = 0; u < kHeadV; u++)
                acc[r][u] = 0;
        for (int c8 = lane; c8 < C8; c8 += 32) {
            float wv[kHeadV][8];
#pragma unroll
            for (int u = 0; u < kHeadV; u++) {
                int64_t v = v0 + u < V ? v0 + u : V - 1; /* past the end: a repeat, not stored */
                int4 raw = reinterpret_cast<const int4 *>(wte + v * C)[c8];
                E e[8]; /* memcpy, not a cast: no aliasing questions in the CPU build of tests */
                memcpy(e, &raw, sizeof raw);
#pragma unroll
                for (int i = 0; i < 8; i++)
                    wv[u][i] = to_f(e[i]);
            }
#pragma unroll
            for (int r = 0; r < kHeadMaxRows; r++) {
                if (r >= rows) break;
                const float4 *hr = reinterpret_cast<const float4 *>(h + (int64_t)r * C) + 2 * c8;
                float4 a = hr[0], b = hr[1];
#pragma unroll
                for (int u = 0; u < kHeadV; u++)
                    acc[r][u] += wv[u][0] * a.x + wv[u][1] * a.y + wv[u][2] * a.z + wv[u][3] * a.w +
                                 wv[u][4] * b.x + wv[u][5] * b.y + wv[u][6] * b.z + wv[u][7] * b.w;
            }
        }
#pragma unroll
        for (int r = 0; r < kHeadMaxRows; r++) {
            if (r >= rows) break;
#pragma unroll
            for (int u = 0; u < kHeadV; u++) {
                float x = acc[r][u];
                for (int o = 16; o > 0; o >>= 1)
                    x += __shfl_xor_sync(0xffffffffu, x, o);
                if (lane == u && v0 + u < V) out[(int64_t)r * V + v0 + u] = x;
            }
        }
    }
}

/* ---- log-probabilities: one block per row ---- */

template <typename E>
__global__ void logprob_kernel(float *out, const E *logits, const int32_t *targets, int64_t rows,
                               int P, int T, int V)
{
    __shared__ float red[32];
    int64_t r = blockIdx.x;
    if (r >= rows) return;
    const E *x = logits + r * V;
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = blockDim.x >> 5;
    float mx = -INFINITY;
    for (int c = tid; c < V; c += blockDim.x)
        mx = fmaxf(mx, to_f(x[c]));
    for (int o = 16; o > 0; o >>= 1)
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    if (lane == 0) red[warp] = mx;
    __syncthreads();
    mx = red[0];
    for (int i = 1; i < nw; i++)
        mx = fmaxf(mx, red[i]);
    __syncthreads();
    float s = 0;
    for (int c = tid; c < V; c += blockDim.x)
        s += expf(to_f(x[c]) - mx);
    for (int o = 16; o > 0; o >>= 1)
        s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) red[warp] = s;
    __syncthreads();
    if (tid == 0) {
        float tot = 0;
        for (int i = 0; i < nw; i++)
            tot += red[i];
        int64_t bq = r / P;
        int t = P == T ? (int)(r % P) : T - 1;
        int32_t tg = targets[bq * T + t];
        if (tg < 0 || tg >= V) tg = 0;
        out[r] = to_f(x[tg]) - mx - logf(tot);
    }
}

/* ---- prefill and decode: the KV cache ----
 * A layer's cache, cache_l, is [2, B, H, P, HD]: the keys then the values of each sequence and
 * head, P positions of HD, in CT (the model's dtype E, or f32). The value a key has in the cache is
 * the QKV GEMM's E value (widened to f32 in an f32 cache), so reading it from the QKV row or from
 * the cache gives the same number. */

/* A sequence's length from a lengths buffer (NULL: dflt), clamped to [1, hi]. */
__device__ inline int seq_len(const int32_t *lengths, int b, int dflt, int hi)
{
    int n = lengths ? lengths[b] : dflt;
    return n < 1 ? 1 : n > hi ? hi : n;
}

/* Decode's position of sequence b: lengths[b] (at least 1) + step, clamped to [0, P - 1]. */
__device__ inline int decode_pos(const int32_t *lengths, const int32_t *step, int b, int P)
{
    int64_t p = (int64_t)seq_len(lengths, b, 1, 0x7fffffff) + step[0];
    return p < 0 ? 0 : p > P - 1 ? P - 1 : (int)p;
}

/* x[b, :] = wte[ids[b], :] + wpe[p_b, :] (p_b = decode_pos) for the B new tokens. */
template <typename E>
__global__ void embed_at_kernel(float *x, const int32_t *ids, const E *wte, const float *wpe,
                                const int32_t *lengths, const int32_t *step, int B, int C, int V,
                                int P)
{
    int64_t total = (int64_t)B * C;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        int b = (int)(i / C), c = (int)(i - (int64_t)b * C);
        int32_t id = ids[b];
        if (id < 0 || id >= V) id = 0;
        int p = decode_pos(lengths, step, b, P);
        x[i] = to_f(wte[(int64_t)id * C + c]) + wpe[(int64_t)p * C + c];
    }
}

/* Decode's embeddings and the first layer's layernorm in one kernel, a warp per row: x[b, :] as
 * embed_at_kernel writes it, and out[b, :] = layernorm(x[b, :]) * w + b as layernorm_kernel
 * writes it (the same arithmetic: the same bits), from the row in registers. NV > 0 (the launcher
 * falls back to the two kernels otherwise). */
template <typename E, int NV>
__global__ void embed_ln_kernel(float *x, E *out, const int32_t *ids, const E *wte,
                                const float *wpe, const int32_t *lengths, const int32_t *step,
                                const float *w, const float *b, int B, int C, int V, int P,
                                float eps)
{
    static_assert(NV > 0 && NV <= kLnVec, "float4 per lane");
    const int lane = threadIdx.x & 31;
    const int r = (int)(blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5));
    if (r >= B) return;
    int32_t id = ids[r];
    if (id < 0 || id >= V) id = 0;
    const E *er = wte + (int64_t)id * C;
    const float4 *p4 =
        reinterpret_cast<const float4 *>(wpe + (int64_t)decode_pos(lengths, step, r, P) * C);
    float4 *x4 = reinterpret_cast<float4 *>(x + (int64_t)r * C);
    const int C4 = C / 4;
    float4 v[NV];
#pragma unroll
    for (int j = 0; j < NV; j++) {
        int c = lane + 32 * j;
        if (c < C4) {
            float4 q = p4[c];
            v[j] = make_float4(to_f(er[4 * c]) + q.x, to_f(er[4 * c + 1]) + q.y,
                               to_f(er[4 * c + 2]) + q.z, to_f(er[4 * c + 3]) + q.w);
            x4[c] = v[j];
        } else {
            v[j] = make_float4(0, 0, 0, 0);
        }
    }
    ln_row4<E, NV>(v, out + (int64_t)r * C, nullptr, w, b, C, eps, lane);
}

/* Prefill: the keys and values of qkv [B, T, 3C] at positions t < len_b into cache_l. */
template <typename E, typename CT>
__global__ void cache_write_kernel(CT *cache_l, const E *qkv, const int32_t *lengths, int B, int T,
                                   int H, int HD, int P)
{
    const int C = H * HD;
    int64_t total = (int64_t)B * T * C;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t bt = i / C;
        int c = (int)(i - bt * C), t = (int)(bt % T), b = (int)(bt / T);
        if (t >= seq_len(lengths, b, T, T)) continue;
        int h = c / HD, d = c - h * HD;
        const E *row = qkv + bt * 3 * C;
        int64_t at = (((int64_t)b * H + h) * P + t) * HD + d; /* the keys' half */
        cache_l[at] = from_f<CT>(to_f(row[C + c]));
        cache_l[at + (int64_t)B * H * P * HD] = from_f<CT>(to_f(row[2 * C + c]));
    }
}

/* Eight consecutive elements (16-byte aligned) as f32: one 16-byte load of a 16-bit type, two of
 * f32. */
template <typename T> __device__ inline void load8(const T *p, float (&f)[8])
{
    if constexpr (sizeof(T) == 4) {
        const float4 *q = reinterpret_cast<const float4 *>(p);
        float4 a = q[0], b = q[1];
        f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z,
        f[7] = b.w;
    } else {
        unpack8<T>(reinterpret_cast<const int4 *>(p), f);
    }
}

/* ---- programmatic dependent launch (Hopper) ----
 * A kernel launched with the programmatic-serialization attribute (gpt2_gpu.cu's launchers, where
 * the device has it) may start while the kernel before it in the stream still runs: it first reads
 * what does not depend on that kernel (the weights), then pdl_wait() holds it until the kernel
 * before has finished and its writes are visible. pdl_trigger() lets the kernel after this one
 * start early. Both are no-ops in a kernel launched without the attribute, and before sm_90. */
__device__ inline void pdl_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ inline void pdl_trigger()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/* ---- the cached attention: one query per sequence over its cache (prefill's last layer, decode)
 * A block of kCachedThreads per (split, head, sequence): the split's keys (a contiguous range of
 * the sequence's n keys, n / splits each) go to groups of G = HD / 8 lanes, a key a group at a
 * time; each lane of a group holds 8 of the HD dimensions (one 16-byte load of the key's row, and
 * of the value's), the group's lanes sum the dot product in log2 G shuffles, and each group keeps
 * an online softmax (max, sum) and its 8 dimensions of the output in f32. The groups of a warp
 * then merge by log-sum-exp through shuffles (8 values a lane), and the warps in shared memory.
 * With one split the block writes out[b, h]; with several it writes its partial (the output
 * unnormalised, the maximum and the sum), and the last of the splits' blocks to finish merges
 * them (count given, S <= kCachedMaxSplits) or attention_combine_kernel does. The key at the
 * query's own position (n - 1) is read from the query's QKV row; decode (step given) also appends
 * that row's key and value to the cache at position n - 1 (split 0 does), so no block reads a
 * cache entry another writes in the same launch.
 * Prefill (step NULL): the query is row b T + n - 1 of qkv [B, T, 3C], n = len_b (lengths, or T).
 * Decode: the query is row b of qkv [B, 3C], at position n - 1 = decode_pos.
 * Launched early (programmatic dependent launch, decode at batch 1), the block loads the keys and
 * values of its first kCachedPre rounds before pdl_wait(): the cache rows before n - 1, lengths
 * and step were all written before the decode's embedding kernel, which launches plainly and so
 * starts only once everything before it has finished; only the QKV row is the kernel before's. */
constexpr int kCachedThreads = 128, kCachedMaxSplits = 32, kCachedPre = 2;

__device__ inline float ld_cg(const float *p)
{
#ifdef PL_CUDA_EMU
    return *p;
#else
    return __ldcg(p);
#endif
}

/* Dimension i of (sequence b, head h)'s attention output from its S splits' partials pp (S rows of
 * HD + 2: the output, the maximum, the sum). CG: pp is global memory other blocks wrote, read from
 * L2 (ld.cg: L1 is not coherent); else shared memory. */
template <bool CG> __device__ inline float merge_splits(const float *pp, int i, int HD, int S)
{
    auto ld = [&](int k) { return CG ? ld_cg(pp + k) : pp[k]; };
    float mx = -INFINITY;
    for (int s = 0; s < S; s++)
        mx = fmaxf(mx, ld(s * (HD + 2) + HD));
    float sl = 0, so = 0;
    for (int s = 0; s < S; s++) {
        const float ms = ld(s * (HD + 2) + HD);
        if (ms == -INFINITY) continue;
        const float e = expf(ms - mx);
        sl += ld(s * (HD + 2) + HD + 1) * e;
        so += ld(s * (HD + 2) + i) * e;
    }
    return sl > 0 ? so / sl : 0.0f;
}

template <typename E, typename CT, int HD>
__global__ void __launch_bounds__(kCachedThreads)
    attention_cached_kernel(E *out, float *parts, int *count, const E *qkv, CT *cache_l,
                            const int32_t *lengths, const int32_t *step, int B, int T, int H, int P,
                            int S, float scale)
{
    static_assert(HD % 8 == 0 && HD <= 256 && 32 % (HD / 8) == 0, "head size: 8 lanes' worth");
    constexpr int NW = kCachedThreads / 32, G = HD / 8, KPW = 32 / G; /* keys a warp at once */
    __shared__ float sm_m[NW], sm_l[NW], sm_o[NW][HD];
    __shared__ float sm_p[kCachedMaxSplits * (HD + 2)]; /* the last block: every split's partial */
    __shared__ bool sm_last;
    pdl_trigger(); /* the projection after this may load its weights meanwhile */
    const int sp = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane % G, slot = lane / G; /* the lane's dimensions 8 g.., its key slot */
    const int C = H * HD;
    int n;
    int64_t qrow;
    if (step) {
        n = decode_pos(lengths, step, b, P) + 1;
        qrow = b;
    } else {
        n = seq_len(lengths, b, T, T);
        qrow = (int64_t)b * T + n - 1;
    }
    const E *qr = qkv + qrow * 3 * C + (int64_t)h * HD;
    CT *kc = cache_l + ((int64_t)b * H + h) * P * HD;
    CT *vc = kc + (int64_t)B * H * P * HD;
    const int chunk = (n + S - 1) / S, k0 = sp * chunk, k1 = k0 + chunk < n ? k0 + chunk : n;
    /* The cached keys and values of the first kCachedPre rounds (a round: NW KPW keys), before
     * the wait; the query's own (n - 1) comes from its QKV row after it. */
    float pk[kCachedPre][8], pv[kCachedPre][8];
#pragma unroll
    for (int r = 0; r < kCachedPre; r++) {
        const int j = k0 + warp * KPW + r * NW * KPW + slot;
#pragma unroll
        for (int i = 0; i < 8; i++)
            pk[r][i] = pv[r][i] = 0;
        if (j < k1 && j != n - 1) {
            load8(kc + (int64_t)j * HD + 8 * g, pk[r]);
            load8(vc + (int64_t)j * HD + 8 * g, pv[r]);
        }
    }
    pdl_wait();
    if (step && sp == 0)
        for (int i = tid; i < HD; i += kCachedThreads) {
            kc[(int64_t)(n - 1) * HD + i] = from_f<CT>(to_f(qr[C + i]));
            vc[(int64_t)(n - 1) * HD + i] = from_f<CT>(to_f(qr[2 * C + i]));
        }
    float q[8], o[8];
    load8(qr + 8 * g, q);
#pragma unroll
    for (int i = 0; i < 8; i++) {
        q[i] *= scale;
        o[i] = 0;
    }
    float m = -INFINITY, l = 0;
    /* One key a group: every lane of a warp calls it alike (the shuffles need all 32); a slot
     * past the split's last key computes nothing. */
    auto attend = [&](int j, float(&kv)[8], float(&vv)[8]) {
        const bool valid = j < k1;
        if (j == n - 1) { /* its key and value: the QKV row */
            load8(qr + C + 8 * g, kv);
            load8(qr + 2 * C + 8 * g, vv);
        }
        float d = 0;
#pragma unroll
        for (int i = 0; i < 8; i++)
            d += q[i] * kv[i];
#pragma unroll
        for (int off = 1; off < G; off <<= 1) /* the group's lanes: adjacent, G a power of 2 */
            d += __shfl_xor_sync(0xffffffffu, d, off);
        if (!valid) return;
        const float mn = fmaxf(m, d), a = expf(m - mn), p = expf(d - mn); /* exp(-inf) = 0 */
#pragma unroll
        for (int i = 0; i < 8; i++)
            o[i] = o[i] * a + p * vv[i];
        l = l * a + p;
        m = mn;
    };
    int j0 = k0 + warp * KPW;
#pragma unroll
    for (int r = 0; r < kCachedPre; r++, j0 += NW * KPW)
        if (j0 < k1) attend(j0 + slot, pk[r], pv[r]);
    for (; j0 < k1; j0 += NW * KPW) {
        const int j = j0 + slot;
        float kv[8] = {0, 0, 0, 0, 0, 0, 0, 0}, vv[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        if (j < k1 && j != n - 1) {
            load8(kc + (int64_t)j * HD + 8 * g, kv);
            load8(vc + (int64_t)j * HD + 8 * g, vv);
        }
        attend(j, kv, vv);
    }
    /* The warp's groups merge (a group that saw no key has m = -inf and weight 0); lanes of
     * slot 0 end with the warp's result for their 8 dimensions. */
    warp_merge_softmax<8>(m, l, o, G);
    if (lane == 0) {
        sm_m[warp] = m;
        sm_l[warp] = l;
    }
    if (slot == 0)
#pragma unroll
        for (int i = 0; i < 8; i++)
            sm_o[warp][8 * g + i] = o[i];
    __syncthreads();
    for (int i = tid; i < HD; i += kCachedThreads) {
        float mx = -INFINITY;
        for (int w = 0; w < NW; w++)
            mx = fmaxf(mx, sm_m[w]);
        float sl = 0, so = 0;
        for (int w = 0; w < NW; w++) {
            if (sm_m[w] == -INFINITY) continue;
            const float e = expf(sm_m[w] - mx);
            sl += sm_l[w] * e;
            so += sm_o[w][i] * e;
        }
        if (S == 1) {
            out[(int64_t)b * C + (int64_t)h * HD + i] = from_f<E>(sl > 0 ? so / sl : 0.0f);
        } else {
            float *pp = parts + (((int64_t)b * H + h) * S + sp) * (HD + 2);
            pp[i] = so;
            if (i == 0) {
                pp[HD] = mx;
                pp[HD + 1] = sl;
            }
        }
    }
    if (S == 1 || !count) return;
    /* count given: the last of the S blocks of (b, h) to finish merges their partials into out
     * (no second launch), and sets the count back to 0 for the next launch. Each block's partial
     * is written and made visible (the fence) before it counts itself. */
    __threadfence();
    __syncthreads();
    int *cnt = count + (int64_t)b * H + h;
    if (tid == 0) sm_last = atomicAdd(cnt, 1) == S - 1;
    __syncthreads();
    if (!sm_last) return;
    __threadfence();
    /* The S partials into shared memory in one pass (every load in flight at once), then the
     * merge of each dimension from there. */
    const float *pp = parts + ((int64_t)b * H + h) * S * (HD + 2);
    for (int i = tid; i < S * (HD + 2); i += kCachedThreads)
        sm_p[i] = ld_cg(pp + i);
    __syncthreads();
    for (int i = tid; i < HD; i += kCachedThreads)
        out[(int64_t)b * C + (int64_t)h * HD + i] = from_f<E>(merge_splits<false>(sm_p, i, HD, S));
    if (tid == 0) *cnt = 0;
}

/* out[b, h] = the merge of the splits' partials (attention_cached_kernel with S > 1 and no
 * count): a block per (head, sequence), a thread per dimension. */
template <typename E>
__global__ void attention_combine_kernel(E *out, const float *parts, int H, int HD, int S)
{
    const int h = blockIdx.x, b = blockIdx.y, i = threadIdx.x;
    if (i >= HD) return;
    out[(int64_t)b * H * HD + (int64_t)h * HD + i] =
        from_f<E>(merge_splits<true>(parts + ((int64_t)b * H + h) * S * (HD + 2), i, HD, S));
}

/* dst[b, :] = x[b T + len_b - 1, :]: each sequence's last real position (f32 rows of C). */
__global__ void gather_last_kernel(float *dst, const float *x, const int32_t *lengths, int B, int T,
                                   int C)
{
    int64_t total = (int64_t)B * C;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        int b = (int)(i / C), c = (int)(i - (int64_t)b * C);
        dst[i] = x[((int64_t)b * T + seq_len(lengths, b, T, T) - 1) * C + c];
    }
}

/* ---- linear layers at a few rows: decode at a small batch ----
 * Y[r, j] = X[r, :] . W[j, :] + bias[j] for r < rows <= kLinMaxRows, W [N, K] row-major (each
 * output feature's K weights adjacent, cuBLASLt's A in pl_gpu_lt.c), f32 arithmetic. At a few
 * rows this is a matrix-vector product bound by reading W once (GPT-2 124M: 1.2 to 4.7 MB a
 * matrix, 3-5 us of the ~600 us a decode step took through cuBLASLt), so the kernel is built to
 * keep that read in flight: a warp per (output feature, K slice), each lane 16-byte chunks of the
 * row, kLinU of them loaded before the first multiply; a long row is cut into KS slices
 * (lin_slices) whose warps meet in shared memory (in slice order: the result's bits do not depend
 * on timing).
 * The prologue and epilogue take the neighbours a decode layer would otherwise launch apart:
 *   IN  plain:     X is [rows, K] of E (read through L1 by every warp);
 *       layernorm: X is the f32 residual stream [rows, K]; each block normalises it (ln_row4,
 *                  layernorm_kernel's bits) into shared memory first: ln_1 before c_attn, ln_2
 *                  before c_fc;
 *   OUT bias:      Y (E) = acc + bias (bias E);
 *       gelu:      Y (E) = gelu_tanh(acc + bias) (bias E), c_fc's activation;
 *       residual:  Y (f32) += acc + bias (bias f32): the residual add after c_proj. */
constexpr int kLinMaxRows = 8, kLinWarps = 4, kLinU = 4;
enum class lin_in { plain, layernorm };
enum class lin_out { bias, gelu, residual };

/* The launchers' choice of K slices, shared with the CPU emulation test: the most (4, 2, 1) that
 * leave each warp's slice at least 64 16-byte chunks (two a lane), so that a long row (c_proj
 * after the MLP: K 3072) still has all of its chunks in flight at once while a short one (K 768)
 * is not cut into idle lanes. Host code. */
inline int lin_slices(int K)
{
    const int K8 = K / 8;
    for (int ks = 4; ks > 1; ks /= 2)
        if (K8 % ks == 0 && K8 / ks >= 64) return ks;
    return 1;
}

__device__ inline float gelu_tanh(float x)
{
    const float s = 0.7978845608028654f; /* sqrt(2 / pi), as gpt2_ref.c */
    return 0.5f * x * (1.0f + tanhf(s * (x + 0.044715f * x * x * x)));
}

template <typename E> __device__ inline int4 ld_stream16(const E *p)
{
#ifdef PL_CUDA_EMU
    return *reinterpret_cast<const int4 *>(p);
#else
    return __ldg(reinterpret_cast<const int4 *>(p)); /* read-only: weights never change in a run */
#endif
}

template <typename E, lin_in IN, lin_out OUT, int KS, int NV>
__global__ void __launch_bounds__(kLinWarps * 32)
    linear_small_kernel(void *Y, const void *X, const E *W, const void *bias, const float *lnw,
                        const float *lnb, float eps, int rows, int K, int N)
{
    static_assert(kLinWarps % KS == 0, "the block's warps split into KS slices per feature");
    constexpr int JB = kLinWarps / KS; /* output features per block */
    PL_DYNAMIC_SMEM(lin_smem);         /* layernorm: the block's X, [rows, K] of E */
    __shared__ float red[kLinWarps][kLinMaxRows];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int j = blockIdx.x * JB + warp / KS, ks = warp % KS;
    const int per = K / 8 / KS, c_lo = ks * per; /* the warp's slice: 16-byte chunks of the row */
    const E *wr = W + (int64_t)(j < N ? j : 0) * K + 8 * c_lo;
    /* The weights depend on no kernel before: their first kLinU chunks a lane are on the way
     * before the wait for the kernel that writes X (and, launched early, while it runs). */
    int4 raw[kLinU];
#pragma unroll
    for (int u = 0; u < kLinU; u++) {
        const int c = lane + 32 * u;
        raw[u] = j < N && c < per ? ld_stream16(wr + 8 * c) : make_int4(0, 0, 0, 0);
    }
    /* and so do the layernorm's scale and shift, in the warps that normalise a row */
    float4 lw[IN == lin_in::layernorm ? NV : 1], lb[IN == lin_in::layernorm ? NV : 1];
    if constexpr (IN == lin_in::layernorm)
        if (warp < rows) ln_wb4<NV>(lnw, lnb, K, lane, lw, lb);
    pdl_trigger();
    pdl_wait();
    const E *xs = static_cast<const E *>(X);
    if constexpr (IN == lin_in::layernorm) {
        E *xw = reinterpret_cast<E *>(lin_smem);
        const int C4 = K / 4; /* the launcher checked K % 4 == 0 and K <= 128 NV */
        for (int r = warp; r < rows; r += kLinWarps) {
            const float4 *x4 =
                reinterpret_cast<const float4 *>(static_cast<const float *>(X) + (int64_t)r * K);
            float4 v[NV];
#pragma unroll
            for (int q = 0; q < NV; q++) {
                int c = lane + 32 * q;
                v[q] = c < C4 ? x4[c] : make_float4(0, 0, 0, 0);
            }
            ln_row4_wb<E, NV>(v, lw, lb, xw + (int64_t)r * K, nullptr, K, eps, lane);
        }
        __syncthreads();
        xs = xw;
    }
    /* The residual this adds to: loaded now (the kernel before may have written it), used last. */
    float resid = 0;
    if constexpr (OUT == lin_out::residual)
        if (ks == 0 && j < N && lane < rows)
            resid = static_cast<const float *>(Y)[(int64_t)lane * N + j];
    float acc[kLinMaxRows];
#pragma unroll
    for (int r = 0; r < kLinMaxRows; r++)
        acc[r] = 0;
    if (j < N) {
        for (int c0 = lane; c0 < per; c0 += 32 * kLinU) {
            if (c0 != lane) /* a row longer than kLinU chunks a lane: the next ones */
#pragma unroll
                for (int u = 0; u < kLinU; u++) {
                    const int c = c0 + 32 * u;
                    raw[u] = c < per ? ld_stream16(wr + 8 * c) : make_int4(0, 0, 0, 0);
                }
#pragma unroll
            for (int u = 0; u < kLinU; u++) {
                const int c = c0 + 32 * u;
                if (c >= per) break;
                float w8[8];
                unpack8v<E>(raw[u], w8);
#pragma unroll
                for (int r = 0; r < kLinMaxRows; r++) {
                    if (r >= rows) break;
                    float x8[8];
                    load8(xs + (int64_t)r * K + 8 * (c_lo + c), x8);
                    float d = 0;
#pragma unroll
                    for (int i = 0; i < 8; i++)
                        d += w8[i] * x8[i];
                    acc[r] += d;
                }
            }
        }
    }
    float v = 0; /* lane r: row r's sum over the warp's slice */
#pragma unroll
    for (int r = 0; r < kLinMaxRows; r++) {
        if (r >= rows) break;
        float a = acc[r];
        for (int o = 16; o > 0; o >>= 1)
            a += __shfl_xor_sync(0xffffffffu, a, o);
        if (lane == r) v = a;
    }
    if constexpr (KS > 1) {
        if (lane < rows) red[warp][lane] = v;
        __syncthreads();
        if (ks != 0) return;
        v = 0;
#pragma unroll
        for (int q = 0; q < KS; q++)
            v += lane < rows ? red[warp + q][lane] : 0.0f;
    }
    if (j >= N || lane >= rows) return;
    const int64_t at = (int64_t)lane * N + j;
    if constexpr (OUT == lin_out::residual) {
        static_cast<float *>(Y)[at] = resid + (v + static_cast<const float *>(bias)[j]);
    } else {
        float y = v + to_f(static_cast<const E *>(bias)[j]);
        if constexpr (OUT == lin_out::gelu) y = gelu_tanh(y);
        static_cast<E *>(Y)[at] = from_f<E>(y);
    }
}

} // namespace pl_gpt2

#endif
