/* pl_cuda: turns CUDA runtime statuses into pl_error messages that name the call, stage and batch.
 */
#include "pl_gpu.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>

pl_status pl_cuda_check(int cuda_status, const char *call, const char *stage, int64_t batch,
                        pl_error *err)
{
    if (cuda_status == (int)cudaSuccess) return PL_OK;
    cudaError_t e = (cudaError_t)cuda_status;
    /* PL_CUDA passes the whole call expression; the message names the function only, so it
     * stays one readable line ("cudaMemcpyAsync failed: ..."). */
    const char *name = call ? call : "CUDA call";
    size_t len = strcspn(name, "(");
    char where[PL_MAX_NAME + 64] = "";
    if (stage && batch >= 0)
        snprintf(where, sizeof where, "stage '%s', batch %lld: ", stage, (long long)batch);
    else if (stage)
        snprintf(where, sizeof where, "stage '%s': ", stage);
    else if (batch >= 0)
        snprintf(where, sizeof where, "batch %lld: ", (long long)batch);
    /* A build without an image for this GPU fails at its first kernel: say what fixes it. */
    const char *hint = e == cudaErrorNoKernelImageForDevice
                           ? "; this pipectl was not built for this GPU's architecture: 'pipectl "
                             "doctor' says which it was built for (rebuild with "
                             "-DCMAKE_CUDA_ARCHITECTURES=native)"
                           : "";
    pl_error_set(err, PL_ECUDA, "%s%.*s failed: %s (%s)%s", where, (int)len, name,
                 cudaGetErrorString(e), cudaGetErrorName(e), hint);
    if (stage) pl_error_tag(err, stage, batch);
    return PL_ECUDA;
}

pl_status pl_gpu_copy_async(void *dst, const void *src, uint64_t bytes, bool to_device,
                            void *stream, const char *stage, int64_t batch, pl_error *err)
{
    return PL_CUDA(cudaMemcpyAsync(dst, src, bytes,
                                   to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost,
                                   (cudaStream_t)stream),
                   stage, batch, err);
}

pl_status pl_gpu_memory_total(int device, uint64_t *bytes, pl_error *err)
{
    struct cudaDeviceProp p;
    *bytes = 0;
    PL_CHECK(PL_CUDA(cudaGetDeviceProperties(&p, device), NULL, -1, err));
    *bytes = (uint64_t)p.totalGlobalMem;
    return PL_OK;
}

int pl_gpu_device_count(void)
{
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}
