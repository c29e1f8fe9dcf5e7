/* pl_cudalibs: cuBLAS, cuBLASLt and NVRTC through dlopen on first use (pl_cudalibs.h says why).
 * Each library is a list of the functions pipectl calls; the list gives both the resolution
 * (dlsym, under the library's own symbol name) and a same-named definition that forwards to it. A
 * function added at a call site without an entry here fails to link: there is no libcublas on the
 * link line to find it in. */
#include "pl_cudalibs.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

/* The definitions below are pipectl's own, not exports: hidden, so neither an embedder nor the
 * loaded libraries themselves (libcublas calls into libcublasLt) can bind to them. */
#pragma GCC visibility push(hidden)
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nvrtc.h>

/* X(return type, name, (parameters), (arguments)) */
#define PL__CUBLAS_FNS(X)                                                                          \
    X(cublasStatus_t, cublasCreate_v2, (cublasHandle_t * handle), (handle))                        \
    X(cublasStatus_t, cublasDestroy_v2, (cublasHandle_t handle), (handle))                         \
    X(cublasStatus_t, cublasSetStream_v2, (cublasHandle_t handle, cudaStream_t streamId),          \
      (handle, streamId))                                                                          \
    X(cublasStatus_t, cublasSetWorkspace_v2,                                                       \
      (cublasHandle_t handle, void *workspace, size_t workspaceSizeInBytes),                       \
      (handle, workspace, workspaceSizeInBytes))                                                   \
    X(cublasStatus_t, cublasGetProperty, (libraryPropertyType type, int *value), (type, value))    \
    X(cublasStatus_t, cublasGemmEx,                                                                \
      (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,    \
       int k, const void *alpha, const void *A, cudaDataType Atype, int lda, const void *B,        \
       cudaDataType Btype, int ldb, const void *beta, void *C, cudaDataType Ctype, int ldc,        \
       cublasComputeType_t computeType, cublasGemmAlgo_t algo),                                    \
      (handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc,  \
       computeType, algo))

#define PL__LT_FNS(X)                                                                              \
    X(cublasStatus_t, cublasLtCreate, (cublasLtHandle_t * lightHandle), (lightHandle))             \
    X(cublasStatus_t, cublasLtDestroy, (cublasLtHandle_t lightHandle), (lightHandle))              \
    X(cublasStatus_t, cublasLtMatmul,                                                              \
      (cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc, const void *alpha,          \
       const void *A, cublasLtMatrixLayout_t Adesc, const void *B, cublasLtMatrixLayout_t Bdesc,   \
       const void *beta, const void *C, cublasLtMatrixLayout_t Cdesc, void *D,                     \
       cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo, void *workspace,            \
       size_t workspaceSizeInBytes, cudaStream_t stream),                                          \
      (lightHandle, computeDesc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo,        \
       workspace, workspaceSizeInBytes, stream))                                                   \
    X(cublasStatus_t, cublasLtMatmulAlgoGetHeuristic,                                              \
      (cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc,                           \
       cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc,   \
       cublasLtMatrixLayout_t Ddesc, cublasLtMatmulPreference_t preference,                        \
       int requestedAlgoCount, cublasLtMatmulHeuristicResult_t heuristicResultsArray[],            \
       int *returnAlgoCount),                                                                      \
      (lightHandle, operationDesc, Adesc, Bdesc, Cdesc, Ddesc, preference, requestedAlgoCount,     \
       heuristicResultsArray, returnAlgoCount))                                                    \
    X(cublasStatus_t, cublasLtMatmulDescCreate,                                                    \
      (cublasLtMatmulDesc_t * matmulDesc, cublasComputeType_t computeType,                         \
       cudaDataType_t scaleType),                                                                  \
      (matmulDesc, computeType, scaleType))                                                        \
    X(cublasStatus_t, cublasLtMatmulDescDestroy, (cublasLtMatmulDesc_t matmulDesc), (matmulDesc))  \
    X(cublasStatus_t, cublasLtMatmulDescSetAttribute,                                              \
      (cublasLtMatmulDesc_t matmulDesc, cublasLtMatmulDescAttributes_t attr, const void *buf,      \
       size_t sizeInBytes),                                                                        \
      (matmulDesc, attr, buf, sizeInBytes))                                                        \
    X(cublasStatus_t, cublasLtMatmulPreferenceCreate, (cublasLtMatmulPreference_t * pref), (pref)) \
    X(cublasStatus_t, cublasLtMatmulPreferenceDestroy, (cublasLtMatmulPreference_t pref), (pref))  \
    X(cublasStatus_t, cublasLtMatmulPreferenceSetAttribute,                                        \
      (cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr,                 \
       const void *buf, size_t sizeInBytes),                                                       \
      (pref, attr, buf, sizeInBytes))                                                              \
    X(cublasStatus_t, cublasLtMatrixLayoutCreate,                                                  \
      (cublasLtMatrixLayout_t * matLayout, cudaDataType type, uint64_t rows, uint64_t cols,        \
       int64_t ld),                                                                                \
      (matLayout, type, rows, cols, ld))                                                           \
    X(cublasStatus_t, cublasLtMatrixLayoutDestroy, (cublasLtMatrixLayout_t matLayout), (matLayout))

#define PL__NVRTC_FNS(X)                                                                           \
    X(nvrtcResult, nvrtcVersion, (int *major, int *minor), (major, minor))                         \
    X(nvrtcResult, nvrtcCreateProgram,                                                             \
      (nvrtcProgram * prog, const char *src, const char *name, int numHeaders,                     \
       const char *const *headers, const char *const *includeNames),                               \
      (prog, src, name, numHeaders, headers, includeNames))                                        \
    X(nvrtcResult, nvrtcDestroyProgram, (nvrtcProgram * prog), (prog))                             \
    X(nvrtcResult, nvrtcAddNameExpression, (nvrtcProgram prog, const char *const name_expression), \
      (prog, name_expression))                                                                     \
    X(nvrtcResult, nvrtcCompileProgram,                                                            \
      (nvrtcProgram prog, int numOptions, const char *const *options),                             \
      (prog, numOptions, options))                                                                 \
    X(nvrtcResult, nvrtcGetLoweredName,                                                            \
      (nvrtcProgram prog, const char *const name_expression, const char **lowered_name),           \
      (prog, name_expression, lowered_name))                                                       \
    X(nvrtcResult, nvrtcGetCUBINSize, (nvrtcProgram prog, size_t * cubinSizeRet),                  \
      (prog, cubinSizeRet))                                                                        \
    X(nvrtcResult, nvrtcGetCUBIN, (nvrtcProgram prog, char *cubin), (prog, cubin))                 \
    X(nvrtcResult, nvrtcGetPTXSize, (nvrtcProgram prog, size_t * ptxSizeRet), (prog, ptxSizeRet))  \
    X(nvrtcResult, nvrtcGetPTX, (nvrtcProgram prog, char *ptx), (prog, ptx))                       \
    X(nvrtcResult, nvrtcGetProgramLogSize, (nvrtcProgram prog, size_t * logSizeRet),               \
      (prog, logSizeRet))                                                                          \
    X(nvrtcResult, nvrtcGetProgramLog, (nvrtcProgram prog, char *log), (prog, log))

/* The error-string functions are listed apart: unloaded, they answer with the load error, so a
 * call site's "NVRTC could not start compiling 'k': %s" says why. */
#define PL__NVRTC_STR_FNS(X) X(const char *, nvrtcGetErrorString, (nvrtcResult result), (result))
#define PL__LT_STR_FNS(X)                                                                          \
    X(const char *, cublasLtGetStatusName, (cublasStatus_t status), (status))                      \
    X(const char *, cublasLtGetStatusString, (cublasStatus_t status), (status))

typedef struct pl__lib {
    const char *base; /* "libcublas.so" */
    int major;        /* the soname's version: libcublas.so.13 */
    void *handle;     /* NULL until loaded, and if it cannot be */
    char error[512];  /* why not, once tried and failed */
} pl__lib;

static pl__lib pl__libs[PL_CUDALIB_COUNT] = {
    [PL_CUDALIB_CUBLAS] = {"libcublas.so", CUBLAS_VER_MAJOR, NULL, ""},
    [PL_CUDALIB_CUBLASLT] = {"libcublasLt.so", CUBLAS_VER_MAJOR, NULL, ""},
    [PL_CUDALIB_NVRTC] = {"libnvrtc.so", CUDART_VERSION / 1000, NULL, ""},
};

#define PL__PTR(ret, name, params, args) static ret(*pl__p_##name) params;
PL__CUBLAS_FNS(PL__PTR)
PL__LT_FNS(PL__PTR)
PL__LT_STR_FNS(PL__PTR)
PL__NVRTC_FNS(PL__PTR)
PL__NVRTC_STR_FNS(PL__PTR)

/* The versioned soname first (LD_LIBRARY_PATH, then the RUNPATH this binary was linked with:
 * the toolkit's lib64, as for libcudart), then the toolkit this was built against, then the
 * unversioned name (a toolkit with only the development link). The message is the first try's. */
static void *pl__open(pl__lib *lib)
{
    char name[256], first[384] = "";
    snprintf(name, sizeof name, "%s.%d", lib->base, lib->major);
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (h) return h;
    const char *why = dlerror();
    snprintf(first, sizeof first, "%s", why ? why : "not found");
#ifdef PL_CUDA_LIBDIR
    char path[512];
    snprintf(path, sizeof path, "%s/%s", PL_CUDA_LIBDIR, name);
    if ((h = dlopen(path, RTLD_NOW | RTLD_LOCAL))) return h;
#endif
    if ((h = dlopen(lib->base, RTLD_NOW | RTLD_LOCAL))) return h;
    snprintf(lib->error, sizeof lib->error,
             "cannot load %s: %s; is the CUDA toolkit's lib64 on the library path?", name, first);
    return NULL;
}

/* Resolves every listed function or none: a library without one of them counts as not loaded. */
#define PL__SYM(ret, name, params, args)                                                           \
    if (ok && !(*(void **)&pl__p_##name = dlsym(h, #name))) {                                      \
        snprintf(lib->error, sizeof lib->error,                                                    \
                 "cannot load %s.%d: it has no %s; is the CUDA toolkit's lib64 on the library "    \
                 "path?",                                                                          \
                 lib->base, lib->major, #name);                                                    \
        ok = 0;                                                                                    \
    }

static void pl__init_cublas(void)
{
    pl__lib *lib = &pl__libs[PL_CUDALIB_CUBLAS];
    void *h = pl__open(lib);
    int ok = h != NULL;
    PL__CUBLAS_FNS(PL__SYM)
    if (ok) lib->handle = h;
}

static void pl__init_lt(void)
{
    pl__lib *lib = &pl__libs[PL_CUDALIB_CUBLASLT];
    void *h = pl__open(lib);
    int ok = h != NULL;
    PL__LT_FNS(PL__SYM)
    PL__LT_STR_FNS(PL__SYM)
    if (ok) lib->handle = h;
}

static void pl__init_nvrtc(void)
{
    pl__lib *lib = &pl__libs[PL_CUDALIB_NVRTC];
    void *h = pl__open(lib);
    int ok = h != NULL;
    PL__NVRTC_FNS(PL__SYM)
    PL__NVRTC_STR_FNS(PL__SYM)
    if (ok) lib->handle = h;
}

static pthread_once_t pl__once[PL_CUDALIB_COUNT] = {PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT,
                                                    PTHREAD_ONCE_INIT};
static void (*const pl__init[PL_CUDALIB_COUNT])(void) = {pl__init_cublas, pl__init_lt,
                                                         pl__init_nvrtc};

static int pl__ready(pl_cudalib lib)
{
    pthread_once(&pl__once[lib], pl__init[lib]);
    return pl__libs[lib].handle != NULL;
}

const char *pl_cudalib_error(pl_cudalib lib)
{
    return pl__ready(lib) ? NULL : pl__libs[lib].error;
}

pl_status pl_cudalib_load(pl_cudalib lib, pl_error *err)
{
    if (pl__ready(lib)) return PL_OK;
    return pl_error_set(err, PL_ECUDA, "error: %s", pl__libs[lib].error);
}

#define PL__DEF_CUBLAS(ret, name, params, args)                                                    \
    ret name params                                                                                \
    {                                                                                              \
        if (!pl__ready(PL_CUDALIB_CUBLAS)) return CUBLAS_STATUS_NOT_INITIALIZED;                   \
        return pl__p_##name args;                                                                  \
    }
#define PL__DEF_LT(ret, name, params, args)                                                        \
    ret name params                                                                                \
    {                                                                                              \
        if (!pl__ready(PL_CUDALIB_CUBLASLT)) return CUBLAS_STATUS_NOT_INITIALIZED;                 \
        return pl__p_##name args;                                                                  \
    }
#define PL__DEF_LT_STR(ret, name, params, args)                                                    \
    ret name params                                                                                \
    {                                                                                              \
        if (!pl__ready(PL_CUDALIB_CUBLASLT)) return pl__libs[PL_CUDALIB_CUBLASLT].error;           \
        return pl__p_##name args;                                                                  \
    }
#define PL__DEF_NVRTC(ret, name, params, args)                                                     \
    ret name params                                                                                \
    {                                                                                              \
        if (!pl__ready(PL_CUDALIB_NVRTC)) return NVRTC_ERROR_INTERNAL_ERROR;                       \
        return pl__p_##name args;                                                                  \
    }
#define PL__DEF_NVRTC_STR(ret, name, params, args)                                                 \
    ret name params                                                                                \
    {                                                                                              \
        if (!pl__ready(PL_CUDALIB_NVRTC)) return pl__libs[PL_CUDALIB_NVRTC].error;                 \
        return pl__p_##name args;                                                                  \
    }

PL__CUBLAS_FNS(PL__DEF_CUBLAS)
PL__LT_FNS(PL__DEF_LT)
PL__LT_STR_FNS(PL__DEF_LT_STR)
PL__NVRTC_FNS(PL__DEF_NVRTC)
PL__NVRTC_STR_FNS(PL__DEF_NVRTC_STR)
#pragma GCC visibility pop
