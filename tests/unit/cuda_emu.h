/* cuda_emu: just enough of CUDA's device built-ins and WMMA to run the gpt2 kind's kernels
 * (stages/gpt2_kernels.cuh) on CPU threads, one block at a time, one std::thread per CUDA
 * thread: __syncthreads and __syncwarp are barriers, shuffles go through per-warp slots, a WMMA
 * fragment holds its whole 16 x 16 tile in f32 (stores by lane 0, then the kernel's own
 * __syncwarp publishes them), __shared__ is block-wide static storage (blocks run in turn).
 * f16/bf16 are the host's bit conversions (runtime/pl_half.h). For tests only: it checks
 * indexing, masking, synchronisation and arithmetic, not timing. */
#ifndef PL_CUDA_EMU_H
#define PL_CUDA_EMU_H

#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

extern "C" {
#include "pl_half.h"
}

#define PL_CUDA_EMU 1
#define __global__
#define __device__
#define __launch_bounds__(...)
#define __shared__ static
#define PL_DYNAMIC_SMEM(name) unsigned char *name = emu::dyn_smem

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
    dim3() = default;
    dim3(unsigned a, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct int4 {
    int x, y, z, w;
};
inline int4 make_int4(int a, int b, int c, int d)
{
    return int4{a, b, c, d};
}
struct float4 {
    float x, y, z, w;
};
inline float4 make_float4(float a, float b, float c, float d)
{
    return float4{a, b, c, d};
}
struct __half {
    uint16_t bits;
};
struct __nv_bfloat16 {
    uint16_t bits;
};
inline float __half2float(__half h)
{
    return pl_f16_to_f32(h.bits);
}
inline __half __float2half_rn(float f)
{
    return __half{pl_f32_to_f16(f)};
}
inline float __bfloat162float(__nv_bfloat16 h)
{
    return pl_bf16_to_f32(h.bits);
}
inline __nv_bfloat16 __float2bfloat16_rn(float f)
{
    return __nv_bfloat16{pl_f32_to_bf16(f)};
}
inline float rsqrtf(float x)
{
    return 1.0f / std::sqrt(x);
}
inline int min(int a, int b)
{
    return a < b ? a : b;
}

namespace emu
{
struct block {
    std::barrier<> *all;
    std::vector<std::barrier<> *> warps;
    std::vector<uint64_t> slots; /* one per thread, for shuffles */
};
inline thread_local dim3 tid, bid;
inline dim3 grid_dim, block_dim;
inline block *cur;
inline unsigned char *dyn_smem;

/* Runs kernel() for every thread of every block of grid (blocks in turn). */
inline void launch(dim3 grid, dim3 blk, size_t smem_bytes, const std::function<void()> &kernel)
{
    std::vector<unsigned char> smem(smem_bytes + 256);
    dyn_smem = smem.data() + (256 - (uintptr_t)smem.data() % 256) % 256;
    grid_dim = grid;
    block_dim = blk;
    unsigned n = blk.x * blk.y * blk.z;
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                block b;
                std::barrier<> all((std::ptrdiff_t)n);
                b.all = &all;
                std::vector<std::barrier<> *> ws;
                for (unsigned w = 0; w < (n + 31) / 32; w++)
                    ws.push_back(new std::barrier<>(32));
                b.warps = ws;
                b.slots.assign(n, 0);
                cur = &b;
                std::vector<std::thread> th;
                for (unsigned t = 0; t < n; t++)
                    th.emplace_back([=, &kernel] {
                        tid = dim3(t % blk.x, t / blk.x % blk.y, t / (blk.x * blk.y));
                        bid = dim3(x, y, z);
                        kernel();
                    });
                for (auto &t : th)
                    t.join();
                for (auto *w : ws)
                    delete w;
            }
}
inline unsigned flat()
{
    return tid.x + block_dim.x * (tid.y + block_dim.y * tid.z);
}
} // namespace emu

#define threadIdx (emu::tid)
#define blockIdx (emu::bid)
#define blockDim (emu::block_dim)
#define gridDim (emu::grid_dim)

inline void __syncthreads()
{
    emu::cur->all->arrive_and_wait();
}
inline void __syncwarp(unsigned = 0xffffffffu)
{
    emu::cur->warps[emu::flat() / 32]->arrive_and_wait();
}
template <typename T> T __shfl_xor_sync(unsigned, T v, int lane_mask)
{
    static_assert(sizeof(T) <= 8, "shuffle of at most 8 bytes");
    unsigned me = emu::flat(), base = me & ~31u;
    uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof v);
    emu::cur->slots[me] = bits;
    __syncwarp();
    uint64_t o = emu::cur->slots[base + ((me - base) ^ (unsigned)lane_mask)];
    __syncwarp();
    T r;
    std::memcpy(&r, &o, sizeof r);
    return r;
}

/* cp.async as a plain copy: completion is immediate, so the waits have nothing to wait for. */
inline void cp_async16(void *dst, const void *src, bool valid)
{
    if (valid)
        std::memcpy(dst, src, 16);
    else
        std::memset(dst, 0, 16);
}
inline void cp_async_commit() {}
template <int N> inline void cp_async_wait() {}

namespace nvcuda
{
namespace wmma
{
struct matrix_a {
};
struct matrix_b {
};
struct accumulator {
};
struct row_major {
};
struct col_major {
};
enum layout_t { mem_row_major, mem_col_major };

template <typename Use, int M, int N, int K, typename T, typename Layout = void> struct fragment {
    float x[16 * 16]; /* [row][col] */
};
inline float emu_f(__half h)
{
    return __half2float(h);
}
inline float emu_f(__nv_bfloat16 h)
{
    return __bfloat162float(h);
}
template <typename Use, typename T, typename L>
void load_matrix_sync(fragment<Use, 16, 16, 16, T, L> &f, const T *p, unsigned ldm)
{
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++)
            f.x[r * 16 + c] =
                emu_f(std::is_same<L, row_major>::value ? p[r * ldm + c] : p[c * ldm + r]);
}
template <typename T> void fill_fragment(fragment<accumulator, 16, 16, 16, T> &f, float v)
{
    for (float &e : f.x)
        e = v;
}
template <typename TA, typename LA, typename TB, typename LB>
void mma_sync(fragment<accumulator, 16, 16, 16, float> &d,
              const fragment<matrix_a, 16, 16, 16, TA, LA> &a,
              const fragment<matrix_b, 16, 16, 16, TB, LB> &b,
              const fragment<accumulator, 16, 16, 16, float> &c)
{
    float out[256];
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) {
            float s = c.x[i * 16 + j];
            for (int k = 0; k < 16; k++)
                s += a.x[i * 16 + k] * b.x[k * 16 + j];
            out[i * 16 + j] = s;
        }
    std::memcpy(d.x, out, sizeof out);
}
inline void store_matrix_sync(float *p, const fragment<accumulator, 16, 16, 16, float> &f,
                              unsigned ldm, layout_t l)
{
    if (emu::flat() % 32 != 0) return; /* lane 0 writes; the kernel's __syncwarp publishes */
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++)
            p[l == mem_row_major ? r * ldm + c : c * ldm + r] = f.x[r * 16 + c];
}
} // namespace wmma
} // namespace nvcuda

#endif
