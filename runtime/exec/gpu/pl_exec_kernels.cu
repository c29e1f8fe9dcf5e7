// pl_exec_kernels: the GPU executor's own test-only kernel (fault injection), with its launcher.
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
