/* cublaslt: the no-device stand-in for libcublasLt (tests/stubcuda): the functions pipectl
 * resolves (runtime/device/pl_cudalibs.c, PL__LT_FNS), each succeeding at once. A heuristic
 * query offers one algorithm that needs no workspace; a matmul computes nothing. Handles,
 * descriptors, layouts and preferences are entered in the stand-in's registry (libcudart). */
#include <cublasLt.h>
#include <string.h>

#include "pl_stubcuda.h"

static cublasStatus_t pl__made(void *o)
{
    return o ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}

static cublasStatus_t pl__ok(bool ok)
{
    return ok ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t *lightHandle)
{
    return pl__made(*lightHandle =
                        (cublasLtHandle_t)pl_stubcuda_new(PL_STUB_CUBLASLT, "cublasLtCreate"));
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle)
{
    return pl__ok(pl_stubcuda_destroy(lightHandle, PL_STUB_CUBLASLT, "cublasLtDestroy"));
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc,
                              const void *alpha, const void *A, cublasLtMatrixLayout_t Adesc,
                              const void *B, cublasLtMatrixLayout_t Bdesc, const void *beta,
                              const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo,
                              void *workspace, size_t workspaceSizeInBytes, cudaStream_t stream)
{
    const char *fn = "cublasLtMatmul";
    return pl__ok(pl_stubcuda_find(lightHandle, PL_STUB_CUBLASLT, fn) &&
                  pl_stubcuda_find(computeDesc, PL_STUB_LT_DESC, fn) &&
                  pl_stubcuda_find(Adesc, PL_STUB_LT_LAYOUT, fn) &&
                  pl_stubcuda_find(Bdesc, PL_STUB_LT_LAYOUT, fn) &&
                  pl_stubcuda_find(Cdesc, PL_STUB_LT_LAYOUT, fn) &&
                  pl_stubcuda_find(Ddesc, PL_STUB_LT_LAYOUT, fn));
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc, cublasLtMatrixLayout_t Adesc,
    cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
    cublasLtMatmulPreference_t preference, int requestedAlgoCount,
    cublasLtMatmulHeuristicResult_t heuristicResultsArray[], int *returnAlgoCount)
{
    const char *fn = "cublasLtMatmulAlgoGetHeuristic";
    if (requestedAlgoCount < 1) return CUBLAS_STATUS_INVALID_VALUE;
    if (!pl_stubcuda_find(lightHandle, PL_STUB_CUBLASLT, fn) ||
        !pl_stubcuda_find(operationDesc, PL_STUB_LT_DESC, fn) ||
        !pl_stubcuda_find(preference, PL_STUB_LT_PREF, fn))
        return CUBLAS_STATUS_INVALID_VALUE;
    memset(&heuristicResultsArray[0], 0, sizeof heuristicResultsArray[0]);
    heuristicResultsArray[0].state = CUBLAS_STATUS_SUCCESS;
    heuristicResultsArray[0].wavesCount = 1.0f;
    *returnAlgoCount = 1;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *matmulDesc,
                                        cublasComputeType_t computeType, cudaDataType_t scaleType)
{
    return pl__made(*matmulDesc = (cublasLtMatmulDesc_t)pl_stubcuda_new(
                        PL_STUB_LT_DESC, "cublasLtMatmulDescCreate"));
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc)
{
    return pl__ok(pl_stubcuda_destroy(matmulDesc, PL_STUB_LT_DESC, "cublasLtMatmulDescDestroy"));
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                              cublasLtMatmulDescAttributes_t attr, const void *buf,
                                              size_t sizeInBytes)
{
    return pl__ok(pl_stubcuda_find(matmulDesc, PL_STUB_LT_DESC, "cublasLtMatmulDescSetAttribute"));
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref)
{
    return pl__made(*pref = (cublasLtMatmulPreference_t)pl_stubcuda_new(
                        PL_STUB_LT_PREF, "cublasLtMatmulPreferenceCreate"));
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref)
{
    return pl__ok(pl_stubcuda_destroy(pref, PL_STUB_LT_PREF, "cublasLtMatmulPreferenceDestroy"));
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void *buf, size_t sizeInBytes)
{
    return pl__ok(pl_stubcuda_find(pref, PL_STUB_LT_PREF, "cublasLtMatmulPreferenceSetAttribute"));
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *matLayout, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld)
{
    return pl__made(*matLayout = (cublasLtMatrixLayout_t)pl_stubcuda_new(
                        PL_STUB_LT_LAYOUT, "cublasLtMatrixLayoutCreate"));
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout)
{
    return pl__ok(pl_stubcuda_destroy(matLayout, PL_STUB_LT_LAYOUT, "cublasLtMatrixLayoutDestroy"));
}

const char *cublasLtGetStatusName(cublasStatus_t status)
{
    return status == CUBLAS_STATUS_SUCCESS ? "CUBLAS_STATUS_SUCCESS" : "CUBLAS_STATUS_STUB_ERROR";
}

const char *cublasLtGetStatusString(cublasStatus_t status)
{
    return status == CUBLAS_STATUS_SUCCESS ? "success (cuBLASLt stand-in)"
                                           : "an invalid argument (cuBLASLt stand-in)";
}
