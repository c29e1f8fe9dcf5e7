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
    pl_error_set(err, PL_ECUDA, "%s%.*s failed: %s (%s)", where, (int)len, name,
                 cudaGetErrorString(e), cudaGetErrorName(e));
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
