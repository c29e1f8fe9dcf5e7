// pl_exec_kernels: the GPU executor's own kernels, one launcher each: fault injection (tests), and
// a loop's test (pl_gpu_loop.c).
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
// WHILE node's handle (set != 0: a device loop) and into a host-mapped word (go: a loop the host
// launches iteration by iteration).
__global__ void pl__loop_test(unsigned long long handle, int set, int *counter, int first,
                              const int *cond, int *index, int limit, const volatile int *stop,
                              volatile int *go)
{
    int it = first ? 0 : *counter + 1;
    *counter = it;
    if (index) *index = it;
    unsigned int run = it < limit && (!cond || *cond != 0) && !*stop;
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
                                        int *go, void *stream)
{
    pl__loop_test<<<1, 1, 0, (cudaStream_t)stream>>>(handle, set, counter, first, cond, index,
                                                     limit, stop, go);
    return (int)cudaGetLastError();
}
