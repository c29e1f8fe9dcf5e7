// pl_exec_kernels: the GPU executor's own kernels, one launcher each: fault injection (tests), a
// loop's test (pl_gpu_loop.c) and a loop's stream (pl_gpu_stream.c).
#include <cuda_runtime.h>
#include <stdint.h>

#include "pl_exec_gpu_int.h"

// Reads the host-mapped trigger word; when it is nonzero, stores to address 0x10, which no
// allocation ever covers: the launch fails with cudaErrorIllegalAddress like a real out-of-bounds
// write. One thread: it stands for "the op of this stage wrote out of bounds".
__global__ void pl__fault_kernel(const volatile uint32_t *trigger)
{
    if (*trigger) *(volatile int *)(uintptr_t)0x10 = 1;
}

extern "C" int pl_exec_launch_fault(const void *trigger_dev, void *stream)
{
    pl__fault_kernel<<<1, 1, 0, (cudaStream_t)stream>>>((const volatile uint32_t *)trigger_dev);
    return (int)cudaGetLastError();
}

// A loop's test, one thread: before the first iteration (first != 0) and as the body's last node.
// The iterations done (0, or one more than the counter held) go into the counter and the index;
// whether another iteration runs (below limit, the condition nonzero when there is one, and no
// abort asked: `stop`, a device word the host sets from a side stream on a second signal, so that a
// loop already on the device ends at its next test instead of running to its bound) goes into the
// WHILE node's handle (set != 0: a device loop), into the device word `decided` (what the stream
// kernel after it reads: one decision, even when the abort word changes in between) and into a
// host-mapped word (go: a loop the host launches iteration by iteration).
__global__ void pl__loop_test(unsigned long long handle, int set, int *counter, int first,
                              const int *cond, int *index, int limit, const volatile int *stop,
                              int *decided, volatile int *go)
{
    int it = first ? 0 : *counter + 1;
    *counter = it;
    if (index) *index = it;
    unsigned int run = it < limit && (!cond || *cond != 0) && !*stop;
    *decided = (int)run;
#if CUDART_VERSION >= 12040
    if (set) cudaGraphSetConditional((cudaGraphConditionalHandle)handle, run);
#else
    (void)handle, (void)set;
#endif
    if (go) {
        *go = (int)run;
        __threadfence_system();
    }
}

extern "C" int pl_exec_launch_loop_test(unsigned long long handle, int set, int *counter, int first,
                                        const int *cond, int *index, int limit, const int *stop,
                                        int *decided, int *go, void *stream)
{
    pl__loop_test<<<1, 1, 0, (cudaStream_t)stream>>>(handle, set, counter, first, cond, index,
                                                     limit, stop, decided, go);
    return (int)cudaGetLastError();
}

// The host's word at p (pinned, mapped), read at system scope with acquire order: what the host
// wrote before it is visible after it.
__device__ static unsigned long long pl__load_sys(const unsigned long long *p)
{
#if __CUDA_ARCH__ >= 700
    unsigned long long v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
#else
    return *(const volatile unsigned long long *)p;
#endif
}

// A loop's stream, one block, after the loop's test (pl_exec_gpu_int.h): thread 0 decides whether a
// delivery is due and waits for room, every thread copies its share of the new columns into the
// host-mapped mirror, then thread 0 publishes the delivery. The host reads the head, then what it
// covers: the fences order the mirror's and the record's writes before the head's, over PCIe.
__global__ void pl__loop_stream(pl_stream_dev a)
{
    __shared__ int s_due, s_it, s_end, s_slot;
    __shared__ long long s_lo, s_hi;
    __shared__ unsigned long long s_gen, s_cnt;
    if (threadIdx.x == 0) {
        int it = *a.counter;
        int run = *a.decided; // the test's, just before
        if (it == 0) {        // a new batch in this slot: nothing delivered yet
            a.state[1] = 0;
            a.state[2] = 0;
        }
        s_due = !run || (it > 0 && it % a.every == 0);
        if (s_due) {
            unsigned long long gen = (unsigned)a.state[0], cnt = (unsigned)a.state[1];
            unsigned long long need =
                (gen << 32) | (cnt >= (unsigned long long)a.ring ? cnt - a.ring + 1 : 0);
            while (pl__load_sys(a.ack) < need) {
#if __CUDA_ARCH__ >= 700
                __nanosleep(2000);
#endif
            }
            long long hi = (long long)a.start + it;
            s_it = it;
            s_end = !run;
            s_gen = gen;
            s_cnt = cnt;
            s_slot = (int)(cnt % (unsigned long long)a.ring);
            s_lo = a.state[2];
            s_hi = hi < a.cols ? hi : a.cols;
        }
    }
    __syncthreads();
    if (!s_due) return;
    long long seg = (s_hi - s_lo) * a.col_bytes; // bytes of one row's new columns
    if (a.col_bytes % 4 == 0) {                  // words: the buffers are at least 256-aligned
        long long words = seg / 4, total = a.rows * words;
        for (long long i = threadIdx.x; i < total; i += blockDim.x) {
            long long r = i / words, k = i % words;
            long long off = (r * a.cols + s_lo) * a.col_bytes / 4 + k;
            ((int *)a.mirror)[off] = ((const int *)a.from)[off];
        }
    } else {
        long long total = a.rows * seg;
        for (long long i = threadIdx.x; i < total; i += blockDim.x) {
            long long r = i / seg, k = i % seg;
            long long off = (r * a.cols + s_lo) * a.col_bytes + k;
            a.mirror[off] = a.from[off];
        }
    }
    if (a.finished)
        for (long long r = threadIdx.x; r < a.rows; r += blockDim.x)
            a.fin[(long long)s_slot * a.rows + r] = a.finished[r];
    __threadfence_system();
    __syncthreads();
    if (threadIdx.x == 0) {
        int *rec = a.recs + 4 * s_slot;
        rec[0] = s_it;
        rec[1] = (int)s_hi;
        rec[2] = s_end;
        rec[3] = 0;
        __threadfence_system();
        a.state[1] = (int)(s_cnt + 1);
        a.state[2] = (int)s_hi;
        if (s_end) a.state[0] = (int)(s_gen + 1);
        *(volatile unsigned long long *)a.head = (s_gen << 32) | (s_cnt + 1);
        __threadfence_system();
    }
}

extern "C" int pl_exec_launch_loop_stream(const pl_stream_dev *a, void *stream)
{
    pl__loop_stream<<<1, 256, 0, (cudaStream_t)stream>>>(*a);
    return (int)cudaGetLastError();
}
