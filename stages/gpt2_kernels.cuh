/* gpt2_kernels: the gpt2 kind's device code (included by stages/gpt2_gpu.cu, which holds the
 * launchers): embedding, layernorm, flash attention, plain attention, log-probabilities. Device
 * code only, so tests/unit/test_gpt2_emu.cpp can also compile it on the CPU against a small
 * emulation of the CUDA built-ins and WMMA it uses, and check it without a GPU. */
#ifndef PL_GPT2_KERNELS_CUH
#define PL_GPT2_KERNELS_CUH

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

template <typename E>
__global__ void layernorm_kernel(E *out, const float *x, const float *w, const float *b,
                                 int64_t rows, int64_t first, int64_t step, int C, float eps)
{
    int lane = threadIdx.x & 31;
    int64_t r = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (r >= rows) return;
    const float *xr = x + (first + r * step) * C;
    E *orow = out + r * C;
    if (C % 4 == 0 && C <= kLnMax) {
        const float4 *x4 = reinterpret_cast<const float4 *>(xr);
        const int C4 = C / 4;
        float4 v[kLnVec];
        float s = 0;
#pragma unroll
        for (int j = 0; j < kLnVec; j++) {
            int c = lane + 32 * j;
            v[j] = c < C4 ? x4[c] : make_float4(0, 0, 0, 0);
            s += (v[j].x + v[j].y) + (v[j].z + v[j].w);
        }
        for (int o = 16; o > 0; o >>= 1)
            s += __shfl_xor_sync(0xffffffffu, s, o);
        float mean = s / C, q = 0;
#pragma unroll
        for (int j = 0; j < kLnVec; j++) {
            if (lane + 32 * j >= C4) continue;
            float a = v[j].x - mean, bb = v[j].y - mean, c = v[j].z - mean, d = v[j].w - mean;
            q += (a * a + bb * bb) + (c * c + d * d);
        }
        for (int o = 16; o > 0; o >>= 1)
            q += __shfl_xor_sync(0xffffffffu, q, o);
        float rstd = rsqrtf(q / C + eps);
#pragma unroll
        for (int j = 0; j < kLnVec; j++) {
            int c = lane + 32 * j;
            if (c >= C4) continue;
            float4 wv = reinterpret_cast<const float4 *>(w)[c];
            float4 bv = reinterpret_cast<const float4 *>(b)[c];
            orow[4 * c + 0] = from_f<E>((v[j].x - mean) * rstd * wv.x + bv.x);
            orow[4 * c + 1] = from_f<E>((v[j].y - mean) * rstd * wv.y + bv.y);
            orow[4 * c + 2] = from_f<E>((v[j].z - mean) * rstd * wv.z + bv.z);
            orow[4 * c + 3] = from_f<E>((v[j].w - mean) * rstd * wv.w + bv.w);
        }
        return;
    }
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
        orow[c] = from_f<E>((xr[c] - mean) * rstd * w[c] + b[c]);
}

/* ---- attention: flash style with WMMA tensor cores ----
 * A block of 4 warps owns 64 query rows of one (sequence, head); each warp 16 of them. K/V tiles
 * of 64 keys stream through two shared-memory buffers with cp.async (the next tile loads while
 * this one computes). Per tile: S = Q K^T (WMMA, f32) into the warp's shared scratch, online
 * softmax by the lanes (two lanes per row, 32 columns each), P (dtype) back to shared, O_tile =
 * P V (WMMA), and the lanes fold O_tile into their f32 running output with the softmax rescale.
 * Causal: tiles past the block's last query are skipped, the diagonal tile masked. */

constexpr int kBR = 64, kBC = 64, kWarps = 4;

template <int HD> struct attn_smem {
    static constexpr int LDE = HD + 8;  /* dtype row stride of Q, K, V tiles (16-byte pad) */
    static constexpr int LDS = kBC + 4; /* f32 row stride of the S / O scratch */
    static constexpr int LDP = kBC + 8; /* dtype row stride of P */
    /* Q, two K and two V buffers, S/O per warp, P per warp. */
    static constexpr size_t bytes = (size_t)(kBR + 4 * kBC) * LDE * 2 +
                                    (size_t)kWarps * 16 * LDS * 4 + (size_t)kWarps * 16 * LDP * 2;
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
#endif

template <typename E, int HD>
__global__ void __launch_bounds__(128)
    attention_kernel(E *out, const E *qkv, int T, int H, float scale_log2)
{
    using namespace nvcuda;
    using L = attn_smem<HD>;
    static_assert(HD % 16 == 0 && HD <= kBC, "head size must be a multiple of 16, at most 64");
    PL_DYNAMIC_SMEM(smem);
    E *sQ = reinterpret_cast<E *>(smem);
    E *sK = sQ + kBR * L::LDE; /* [2][kBC][LDE] */
    E *sV = sK + 2 * kBC * L::LDE;
    float *sS = reinterpret_cast<float *>(sV + 2 * kBC * L::LDE);
    E *sP = reinterpret_cast<E *>(sS + kWarps * 16 * L::LDS);

    const int qb = (int)gridDim.x - 1 - (int)blockIdx.x; /* longest rows first */
    const int h = blockIdx.y, b = blockIdx.z;
    const int C = H * HD;
    const int64_t row3 = 3 * (int64_t)C;
    const E *base = qkv + (int64_t)b * T * row3 + (int64_t)h * HD;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    constexpr int CH = HD / 8; /* 16-byte chunks per row */
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
    wmma::fragment<wmma::matrix_a, 16, 16, 16, E, wmma::row_major> qf[HD / 16];
#pragma unroll
    for (int kk = 0; kk < HD / 16; kk++)
        wmma::load_matrix_sync(qf[kk], sQ + warp * 16 * L::LDE + kk * 16, L::LDE);

    float *sSw = sS + warp * 16 * L::LDS;
    E *sPw = sP + warp * 16 * L::LDP;
    const int r = lane >> 1, half = lane & 1;
    const int q = qb * kBR + warp * 16 + r;
    float o[HD / 2];
#pragma unroll
    for (int i = 0; i < HD / 2; i++)
        o[i] = 0;
    float m = -INFINITY, l = 0;
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
#pragma unroll
        for (int j = 0; j < kBC / 16; j++) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
            wmma::fill_fragment(acc, 0.0f);
#pragma unroll
            for (int kk = 0; kk < HD / 16; kk++) {
                wmma::fragment<wmma::matrix_b, 16, 16, 16, E, wmma::col_major> kf;
                wmma::load_matrix_sync(kf, tK + j * 16 * L::LDE + kk * 16, L::LDE);
                wmma::mma_sync(acc, qf[kk], kf, acc);
            }
            wmma::store_matrix_sync(sSw + j * 16, acc, L::LDS, wmma::mem_row_major);
        }
        __syncwarp();
        /* Online softmax of this lane's 32 columns of row r. */
        float s[kBC / 2];
        float mx = -INFINITY;
#pragma unroll
        for (int i = 0; i < kBC / 2; i++) {
            int c = half * (kBC / 2) + i, k = k0 + c;
            float v = sSw[r * L::LDS + c] * scale_log2;
            s[i] = (k <= q && k < T) ? v : -INFINITY;
            mx = fmaxf(mx, s[i]);
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        float m_new = fmaxf(m, mx);
        float alpha = m_new == -INFINITY ? 1.0f : exp2f(m - m_new);
        float sum = 0;
#pragma unroll
        for (int i = 0; i < kBC / 2; i++) {
            float p = m_new == -INFINITY ? 0.0f : exp2f(s[i] - m_new);
            E pe = from_f<E>(p);
            sum += to_f(pe); /* the normaliser sums what P V multiplies */
            sPw[r * L::LDP + half * (kBC / 2) + i] = pe;
        }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        l = l * alpha + sum;
        m = m_new;
        __syncwarp();
        wmma::fragment<wmma::matrix_a, 16, 16, 16, E, wmma::row_major> pf[kBC / 16];
#pragma unroll
        for (int kk = 0; kk < kBC / 16; kk++)
            wmma::load_matrix_sync(pf[kk], sPw + kk * 16, L::LDP);
#pragma unroll
        for (int dj = 0; dj < HD / 16; dj++) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
            wmma::fill_fragment(acc, 0.0f);
#pragma unroll
            for (int kk = 0; kk < kBC / 16; kk++) {
                wmma::fragment<wmma::matrix_b, 16, 16, 16, E, wmma::row_major> vf;
                wmma::load_matrix_sync(vf, tV + kk * 16 * L::LDE + dj * 16, L::LDE);
                wmma::mma_sync(acc, pf[kk], vf, acc);
            }
            wmma::store_matrix_sync(sSw + dj * 16, acc, L::LDS, wmma::mem_row_major);
        }
        __syncwarp();
#pragma unroll
        for (int i = 0; i < HD / 2; i++)
            o[i] = o[i] * alpha + sSw[r * L::LDS + half * (HD / 2) + i];
        __syncthreads(); /* every warp is done with this tile's K/V (and its own S/O scratch) */
    }
#undef PL__LOAD_KV
    if (q < T) {
        float inv = l > 0 ? 1.0f / l : 0.0f;
        E *orow = out + ((int64_t)b * T + q) * C + (int64_t)h * HD + half * (HD / 2);
#pragma unroll
        for (int i = 0; i < HD / 2; i++)
            orow[i] = from_f<E>(o[i] * inv);
    }
}

/* ---- attention, plain: one warp per (query, head), keys in order, f32 online softmax. The
 * fallback PIPECTL_GPT2_ATTENTION=naive selects, to tell an attention bug from the rest. ---- */

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

} // namespace pl_gpt2

#endif
