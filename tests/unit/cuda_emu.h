/* cuda_emu: just enough of CUDA's device built-ins, ldmatrix and mma.sync to run the gpt2 kind's
 * kernels (stages/gpt2/gpt2_kernels.cuh) on CPU threads, one block at a time, one std::thread per
 * CUDA thread: __syncthreads and __syncwarp are barriers, shuffles go through per-warp slots, and
 * the warp-wide ldmatrix and mma.sync m16n8k16 gather every lane's registers through per-thread
 * slots and hand each lane its part by the PTX ISA's fragment layouts, so a kernel that gets a
 * layout wrong computes a wrong result here too. __shared__ is block-wide static storage (blocks
 * run in turn).
 * f16/bf16 are the host's bit conversions (runtime/base/pl_half.h). For tests only: it checks
 * indexing, masking, synchronisation and arithmetic, not timing. */
#ifndef PL_CUDA_EMU_H
#define PL_CUDA_EMU_H

#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

extern "C" {
#include "pl_half.h"
}

#define PL_CUDA_EMU 1
#define __global__
#define __device__
#define __forceinline__ inline
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
struct uint2 {
    unsigned x, y;
};
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
    std::vector<uint64_t> slots;    /* one per thread, for shuffles */
    std::vector<const void *> ptrs; /* one per thread, for ldmatrix */
    std::vector<uint32_t> regs;     /* six per thread, for mma */
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
                b.ptrs.assign(n, nullptr);
                b.regs.assign((size_t)n * 6, 0);
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

/* Blocks run one after another, a block's threads at once: a lock is enough. */
inline int atomicAdd(int *p, int v)
{
    static std::mutex mu;
    std::lock_guard<std::mutex> g(mu);
    int old = *p;
    *p = old + v;
    return old;
}
inline void __threadfence()
{
    std::atomic_thread_fence(std::memory_order_seq_cst);
}
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
/* ex2.approx.ftz: the exact value (the device's is within 2 ulp). */
inline float ex2_ftz(float x)
{
    return std::exp2(x);
}
template <int N> inline void cp_async_wait() {}

inline float emu_f(__half h)
{
    return __half2float(h);
}
inline float emu_f(__nv_bfloat16 h)
{
    return __bfloat162float(h);
}
inline uint16_t bits_of(__half v)
{
    return v.bits;
}
inline uint16_t bits_of(__nv_bfloat16 v)
{
    return v.bits;
}

namespace emu
{
/* ldmatrix .x4 (trans): lane i names row i % 8 of matrix i / 8; register j of lane l holds matrix
 * j's row l / 4 at columns 2 (l % 4), + 1 (trans: column l / 4 of rows 2 (l % 4), + 1), the
 * lower column in the low half. */
inline void ldsm(uint32_t (&r)[4], const void *p, bool trans)
{
    unsigned me = flat(), base = me & ~31u, l = me - base;
    cur->ptrs[me] = p;
    __syncwarp();
    for (unsigned j = 0; j < 4; j++) {
        if (!trans) {
            const uint16_t *row = static_cast<const uint16_t *>(cur->ptrs[base + 8 * j + l / 4]);
            r[j] = (uint32_t)row[2 * (l % 4)] | (uint32_t)row[2 * (l % 4) + 1] << 16;
        } else {
            const uint16_t *a =
                static_cast<const uint16_t *>(cur->ptrs[base + 8 * j + 2 * (l % 4)]);
            const uint16_t *b =
                static_cast<const uint16_t *>(cur->ptrs[base + 8 * j + 2 * (l % 4) + 1]);
            r[j] = (uint32_t)a[l / 4] | (uint32_t)b[l / 4] << 16;
        }
    }
    __syncwarp();
}
} // namespace emu
inline void ldsm_x4(uint32_t (&r)[4], const void *p)
{
    emu::ldsm(r, p, false);
}
inline void ldsm_x4_trans(uint32_t (&r)[4], const void *p)
{
    emu::ldsm(r, p, true);
}
/* mma.sync m16n8k16, row.col, f32 accumulation. Lane l = 4 g + t: A registers a0..a3 hold
 * (row g, columns 2t, 2t+1), (g + 8, 2t..), (g, 2t + 8..), (g + 8, 2t + 8..); B b0, b1 hold
 * (rows 2t, 2t+1, column g), (rows 2t + 8.., g); C/D c0, c1 (row g, columns 2t, 2t+1), c2, c3
 * (row g + 8). */
template <typename E>
inline void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
    unsigned me = emu::flat(), base = me & ~31u, l = me - base;
    uint32_t *mine = &emu::cur->regs[(size_t)me * 6];
    for (int i = 0; i < 4; i++)
        mine[i] = a[i];
    mine[4] = b0;
    mine[5] = b1;
    __syncwarp();
    auto half = [](uint32_t w, int hi) {
        E e;
        e.bits = (uint16_t)(hi ? w >> 16 : w & 0xffff);
        return (double)emu_f(e);
    };
    auto A = [&](int r, int k) {
        unsigned lane = 4 * (r % 8) + (k % 8) / 2;
        int reg = (r >= 8) + 2 * (k >= 8);
        return half(emu::cur->regs[(size_t)(base + lane) * 6 + reg], k % 2);
    };
    auto B = [&](int k, int n) {
        unsigned lane = 4 * n + (k % 8) / 2;
        return half(emu::cur->regs[(size_t)(base + lane) * 6 + 4 + (k >= 8)], k % 2);
    };
    float out[4];
    for (int i = 0; i < 4; i++) {
        int r = (int)(l / 4) + 8 * (i >= 2), c = 2 * (int)(l % 4) + (i & 1);
        double acc = d[i];
        for (int k = 0; k < 16; k++)
            acc += A(r, k) * B(k, c);
        out[i] = (float)acc;
    }
    __syncwarp();
    for (int i = 0; i < 4; i++)
        d[i] = out[i];
}

#endif
