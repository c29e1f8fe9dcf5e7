/* cublas: the no-device stand-in for libcublas (tests/stubcuda): the functions pipectl resolves
 * (runtime/device/pl_cudalibs.c, PL__CUBLAS_FNS), each succeeding at once; a GEMM computes
 * nothing. Handles are entered in the registry of the stand-in's libcudart, which this library
 * links, so the exit check covers them. */
#include <cublas_v2.h>

#include "pl_stubcuda.h"

cublasStatus_t cublasCreate_v2(cublasHandle_t *handle)
{
    pl_stub_obj *o = pl_stubcuda_new(PL_STUB_CUBLAS, "cublasCreate");
    *handle = (cublasHandle_t)o;
    return o ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle)
{
    return pl_stubcuda_destroy(handle, PL_STUB_CUBLAS, "cublasDestroy")
               ? CUBLAS_STATUS_SUCCESS
               : CUBLAS_STATUS_NOT_INITIALIZED;
}

/* The handle is checked; the stream is checked where work is issued on it. */
static cublasStatus_t pl__handle(cublasHandle_t handle, const char *fn)
{
    return pl_stubcuda_find(handle, PL_STUB_CUBLAS, fn) ? CUBLAS_STATUS_SUCCESS
                                                        : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId)
{
    return pl__handle(handle, "cublasSetStream");
}

cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void *workspace,
                                     size_t workspaceSizeInBytes)
{
    return pl__handle(handle, "cublasSetWorkspace");
}

cublasStatus_t cublasGetProperty(libraryPropertyType type, int *value)
{
    switch (type) {
    case MAJOR_VERSION:
        *value = CUBLAS_VER_MAJOR;
        break;
    case MINOR_VERSION:
        *value = CUBLAS_VER_MINOR;
        break;
    case PATCH_LEVEL:
        *value = CUBLAS_VER_PATCH;
        break;
    default:
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void *alpha,
                            const void *A, cudaDataType Atype, int lda, const void *B,
                            cudaDataType Btype, int ldb, const void *beta, void *C,
                            cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                            cublasGemmAlgo_t algo)
{
    if (m < 0 || n < 0 || k < 0) return CUBLAS_STATUS_INVALID_VALUE;
    return pl__handle(handle, "cublasGemmEx");
}
