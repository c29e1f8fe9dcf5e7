/* sample_kernels: the sample kind's device code (included by stages/sample/sample_gpu.cu, which
 * holds the launcher): a block per sequence chooses its token as pl_sample.h defines it, then one
 * block counts the sequences still going. Device code only, so tests/unit/test_sample_emu.cpp can
 * compile it on the CPU against tests/unit/cuda_emu.h and compare it with the C reference.
 *
 * The top-k and top-p thresholds are found by bisection over the order-preserving integer image
 * of the f32 values (32 block-wide counts or sums each), not by sorting the row: the k-th largest
 * value is exactly the one a sort finds, and the top-p threshold is the largest value whose kept
 * mass reaches top_p, as the reference defines it (with f32 sums in a fixed tree order). The draw
 * scans the kept values in index order: each thread owns a contiguous range, a block-wide scan
 * gives each range's start, and the thread whose range holds u times the total walks it. */
#ifndef PL_SAMPLE_KERNELS_CUH
#define PL_SAMPLE_KERNELS_CUH

#include "pl_philox.h"

namespace pl_sample
{

template <typename L> __device__ inline float lf(L v);
template <> __device__ inline float lf<float>(float v)
{
    return v;
}
template <> __device__ inline float lf<__half>(__half v)
{
    return __half2float(v);
}
template <> __device__ inline float lf<__nv_bfloat16>(__nv_bfloat16 v)
{
    return __bfloat162float(v);
}

/* NaN as -inf (pl_sample.h). */
__device__ inline float unnan(float v)
{
    return v != v ? -INFINITY : v;
}

/* f32 -> u32 preserving order (-inf smallest of the non-NaN values). */
__device__ inline uint32_t okey(float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    return (u & 0x80000000u) ? ~u : u | 0x80000000u;
}

/* The most blocks' threads: 1024 (32 warps). */
constexpr int kMaxThreads = 1024;

/* Block-wide sums; every thread gets the result. red: 33 shared slots. */
template <typename T> __device__ inline T block_sum(T v, T *red)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) red[warp] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        T s = 0;
        for (int w = 0; w < nw; w++)
            s += red[w];
        red[32] = s;
    }
    __syncthreads();
    T r = red[32];
    __syncthreads(); /* red is free for the next call */
    return r;
}

/* The argmax of the row (the largest value, the first index on ties, NaN as -inf): *best_v and
 * *best_i for every thread. */
template <typename L>
__device__ inline void row_argmax(const L *row, int V, float *rv, int *ri, float *best_v,
                                  int *best_i)
{
    float bv = -INFINITY;
    int bi = V; /* none yet: larger than any index */
    /* kArgU loads a thread in flight per round (one block scans the row: at batch 1 a serial
     * load a round made this the slowest kernel of a decode step); the rule (largest, then
     * lowest index) does not depend on the order the values are seen in. */
    constexpr int kArgU = 16;
    const int nt = (int)blockDim.x;
    auto see = [&](float y, int v) {
        if (y > bv || (y == bv && v < bi)) bv = y, bi = v;
    };
    if constexpr (sizeof(L) == 4) { /* f32: the 16-byte aligned middle of the row as float4 */
        const int head = (int)((16 - (uintptr_t)row % 16) % 16 / 4);
        const int n4 = head < V ? (V - head) / 4 : 0;
        const float4 *r4 = reinterpret_cast<const float4 *>(row + head);
        for (int q0 = (int)threadIdx.x; q0 < n4; q0 += kArgU * nt) {
            float4 x[kArgU];
#pragma unroll
            for (int u = 0; u < kArgU; u++) {
                const int q = q0 + u * nt;
                x[u] = q < n4 ? r4[q] : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
            }
#pragma unroll
            for (int u = 0; u < kArgU; u++) {
                const int q = q0 + u * nt, v = head + 4 * q;
                if (q >= n4) break;
                see(unnan(x[u].x), v);
                see(unnan(x[u].y), v + 1);
                see(unnan(x[u].z), v + 2);
                see(unnan(x[u].w), v + 3);
            }
        }
        /* the unaligned head (up to 3 values) and the tail (up to 3) */
        const int tail = head + 4 * n4;
        for (int k = (int)threadIdx.x; k < head + (V - tail); k += nt) {
            const int v = k < head ? k : tail + (k - head);
            if (v >= V) break;
            see(unnan(lf(row[v])), v);
        }
    } else {
        for (int v0 = (int)threadIdx.x; v0 < V; v0 += kArgU * nt) {
            float x[kArgU];
#pragma unroll
            for (int u = 0; u < kArgU; u++) {
                const int v = v0 + u * nt;
                x[u] = v < V ? unnan(lf(row[v])) : -INFINITY;
            }
#pragma unroll
            for (int u = 0; u < kArgU; u++)
                if (v0 + u * nt < V) see(x[u], v0 + u * nt);
        }
    }
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, bv, o);
        int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (ov > bv || (ov == bv && oi < bi)) bv = ov, bi = oi;
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    if (lane == 0) rv[warp] = bv, ri[warp] = bi;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < nw; w++)
            if (rv[w] > rv[0] || (rv[w] == rv[0] && ri[w] < ri[0])) rv[0] = rv[w], ri[0] = ri[w];
        if (ri[0] >= V) ri[0] = 0; /* every value -inf: index 0 */
    }
    __syncthreads();
    *best_v = rv[0];
    *best_i = ri[0];
    __syncthreads();
}

/* The token of one row by pl_sample.h's rule, for every thread of the block (block-uniform
 * arguments). */
template <typename L> __device__ int choose(const L *row, int V, const pl_sample_params &p, float u)
{
    __shared__ float red_f[33], arg_v[32];
    __shared__ int red_i[33], arg_i[32];
    __shared__ float scan[kMaxThreads];
    __shared__ int pick;
    float bv;
    int bi;
    row_argmax(row, V, arg_v, arg_i, &bv, &bi);
    if (p.method == PL_SAMPLE_GREEDY || bv == -INFINITY) return bi;
    const float temp = p.temperature, zmax = bv / temp;
    /* kept: z > -inf and okey(z) >= tau */
    uint32_t tau = 0;
    if (p.top_k > 0 && p.top_k < V) {
        int n = 0;
        for (int v = threadIdx.x; v < V; v += blockDim.x)
            n += unnan(lf(row[v])) / temp > -INFINITY;
        if (p.top_k < block_sum(n, red_i)) {
            uint64_t lo = 0, hi = (uint64_t)1 << 32; /* count(lo) >= k > count(hi) */
            while (hi - lo > 1) {
                uint64_t mid = (lo + hi) / 2;
                int c = 0;
                for (int v = threadIdx.x; v < V; v += blockDim.x) {
                    float z = unnan(lf(row[v])) / temp;
                    c += z > -INFINITY && okey(z) >= (uint32_t)mid;
                }
                if (block_sum(c, red_i) >= p.top_k)
                    lo = mid;
                else
                    hi = mid;
            }
            tau = (uint32_t)lo;
        }
    }
    if (p.top_p < 1.0f) {
        float s = 0;
        for (int v = threadIdx.x; v < V; v += blockDim.x) {
            float z = unnan(lf(row[v])) / temp;
            if (z > -INFINITY && okey(z) >= tau) s += expf(z - zmax);
        }
        const float target = p.top_p * block_sum(s, red_f);
        uint64_t lo = tau, hi = (uint64_t)1 << 32; /* mass(lo) >= target > mass(hi) */
        while (hi - lo > 1) {
            uint64_t mid = (lo + hi) / 2;
            float m = 0;
            for (int v = threadIdx.x; v < V; v += blockDim.x) {
                float z = unnan(lf(row[v])) / temp;
                if (z > -INFINITY && okey(z) >= (uint32_t)mid) m += expf(z - zmax);
            }
            if (block_sum(m, red_f) >= target)
                lo = mid;
            else
                hi = mid;
        }
        tau = (uint32_t)lo;
    }
    /* The draw: thread t owns indices [t chunk, (t + 1) chunk). */
    const int chunk = (V + (int)blockDim.x - 1) / (int)blockDim.x;
    const int v0 = (int)threadIdx.x * chunk, v1 = v0 + chunk < V ? v0 + chunk : V;
    float local = 0;
    int last = -1;
    for (int v = v0; v < v1; v++) {
        float z = unnan(lf(row[v])) / temp;
        if (z > -INFINITY && okey(z) >= tau) {
            local += expf(z - zmax);
            last = v;
        }
    }
    scan[threadIdx.x] = local;
    if (threadIdx.x == 0) pick = -1;
    __syncthreads();
    for (int off = 1; off < (int)blockDim.x; off <<= 1) { /* inclusive scan (Hillis-Steele) */
        float add = (int)threadIdx.x >= off ? scan[threadIdx.x - off] : 0.0f;
        __syncthreads();
        scan[threadIdx.x] += add;
        __syncthreads();
    }
    const float total = scan[blockDim.x - 1], r = u * total;
    const float start = threadIdx.x > 0 ? scan[threadIdx.x - 1] : 0.0f, end = scan[threadIdx.x];
    if (last >= 0 && start <= r && r < end) { /* consecutive half-open ranges: one thread */
        float acc = start;
        int got = last;
        for (int v = v0; v < v1; v++) {
            float z = unnan(lf(row[v])) / temp;
            if (!(z > -INFINITY && okey(z) >= tau)) continue;
            acc += expf(z - zmax);
            if (acc > r) {
                got = v;
                break;
            }
        }
        pick = got;
    }
    /* No range holds r (rounding put it at the total): the last kept index. */
    int mx = last;
    for (int o = 16; o > 0; o >>= 1) {
        int other = __shfl_xor_sync(0xffffffffu, mx, o);
        mx = other > mx ? other : mx;
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    if (lane == 0) arg_i[warp] = mx;
    __syncthreads();
    int result = pick;
    if (result < 0) {
        result = arg_i[0];
        for (int w = 1; w < nw; w++)
            result = arg_i[w] > result ? arg_i[w] : result;
    }
    __syncthreads();
    return result < 0 ? bi : result;
}

/* One sequence per block: its token of column col (pl_sample_step's rules). */
template <typename L>
__global__ void sample_kernel(const L *logits, int B, int V, int N, const int32_t *step,
                              const void *batch, int batch64, const int32_t *limits,
                              int32_t *tokens, int32_t *next, int32_t *finished, pl_sample_params p)
{
    const int b = blockIdx.x;
    if (b >= B) return;
    int col = 0;
    if (step) col = step[0] < 0 || step[0] >= 0x7ffffffe ? 0x7fffffff : step[0] + 1;
    int64_t bt = 0;
    if (batch)
        bt = batch64 ? *static_cast<const int64_t *>(batch) : *static_cast<const int32_t *>(batch);
    int32_t *row = tokens + (int64_t)b * N;
    bool done = col > 0 && finished[b] != 0;
    int limit = p.max_new;
    if (limits) limit = limits[b] < 1 ? 1 : limits[b] < p.max_new ? limits[b] : p.max_new;
    int t = p.pad;
    if (col >= N) {
        done = true;
    } else if (!done) {
        float u = pl_sample_uniform(p.seed, bt, b, col);
        t = choose(logits + (int64_t)b * V, V, p, u);
        done = (p.eos >= 0 && t == p.eos) || col + 1 >= limit;
    }
    if (threadIdx.x == 0) {
        if (col < N) row[col] = t;
        if (next) next[b] = t;
        finished[b] = done ? 1 : 0;
    }
    if (col == 0)
        for (int c = 1 + (int)threadIdx.x; c < N; c += blockDim.x)
            row[c] = p.pad;
}

/* count[0] = the sequences with finished[b] == 0 (one block). */
__global__ void count_kernel(int32_t *count, const int32_t *finished, int B)
{
    __shared__ int red[33];
    int n = 0;
    for (int b = threadIdx.x; b < B; b += blockDim.x)
        n += finished[b] == 0;
    n = block_sum(n, red);
    if (threadIdx.x == 0) count[0] = n;
}

} // namespace pl_sample

#endif
