/* cudart: the no-device stand-in for libcudart (tests/stubcuda). Each entry point pipectl links
 * (`nm -D --undefined-only pipectl | grep cuda`) succeeds at once, as if its work were done:
 * events and streams are always complete, copies and memsets outside a capture happen when
 * called, kernels and graph launches do nothing, host functions run at once on the calling
 * thread. Memory, device and pinned alike, is zeroed host memory. What the stand-in checks
 * instead is the host side: every handle is validated against the registry (pl_stubcuda.h), and
 * stream capture keeps the state CUDA keeps (which streams a capture has joined through event
 * waits, which capture an event was recorded in, and capture being invalidated by a
 * synchronization), failing as CUDA fails where the executor depends on it. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_stubcuda.h"

/* The compiler-generated launch and registration calls (crt/host_runtime.h declares them for
 * C++ only). */
void **__cudaRegisterFatBinary(void *fatCubin);
void __cudaRegisterFatBinaryEnd(void **fatCubinHandle);
void __cudaUnregisterFatBinary(void **fatCubinHandle);
void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun,
                            const char *deviceName, int thread_limit, uint3 *tid, uint3 *bid,
                            dim3 *bDim, dim3 *gDim, int *wSize);
unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem,
                                     struct CUstream_st *stream);
cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem,
                                       void *stream);
cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *fun);
cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args,
                               size_t sharedMem, cudaStream_t stream);

/* A capture in progress (or ended: events recorded in it keep pointing here). */
struct pl_stub_capture {
    pl_stub_obj *graph;  /* what it records into */
    pl_stub_obj *origin; /* the stream it began on: the one that must end it */
    bool open, invalid;
    bool to_graph; /* cudaStreamBeginCaptureToGraph: the graph is the caller's */
    unsigned long long id;
    pl_stub_obj **streams; /* the streams in it, the origin first */
    int n, cap;
};

static unsigned long long pl__capture_ids;
static _Thread_local cudaError_t pl__last;
static _Thread_local enum cudaStreamCaptureMode pl__mode = cudaStreamCaptureModeGlobal;

/* <<<>>> pushes a launch's configuration, the kernel's host stub pops it: one a thread. */
typedef struct pl__config {
    dim3 grid, block;
    size_t shared;
    cudaStream_t stream;
} pl__config;
#define PL__CONFIG_DEPTH 8
static _Thread_local pl__config pl__configs[PL__CONFIG_DEPTH];
static _Thread_local int pl__n_configs;

static cudaError_t pl__fail(cudaError_t e)
{
    pl__last = e;
    return e;
}

/* A call's result: success, or `e` recorded as the last error. */
static cudaError_t pl__ok(bool ok, cudaError_t e)
{
    return ok ? cudaSuccess : pl__fail(e);
}

static bool pl__special_stream(cudaStream_t s)
{
    return s == NULL || s == cudaStreamLegacy || s == cudaStreamPerThread;
}

/* The record of stream `s` (NULL for the special streams), or false after a misuse. Caller holds
 * the lock. */
static bool pl__stream(cudaStream_t s, const char *fn, pl_stub_obj **out)
{
    *out = NULL;
    if (pl__special_stream(s)) return true;
    return (*out = pl_stubcuda_find_locked(s, PL_STUB_STREAM, fn)) != NULL;
}

/* The open capture `s` takes part in, or NULL. Caller holds the lock. */
static pl_stub_capture *pl__capturing(const pl_stub_obj *so)
{
    return so && so->cap && so->cap->open ? so->cap : NULL;
}

/* Work issued on `s` outside a capture happens now; inside one it is recorded and never runs. */
static cudaError_t pl__issue(cudaStream_t s, const char *fn, bool *now)
{
    pl_stubcuda_lock();
    pl_stub_obj *so;
    bool ok = pl__stream(s, fn, &so);
    *now = ok && !pl__capturing(so);
    pl_stubcuda_unlock();
    return pl__ok(ok, cudaErrorInvalidResourceHandle);
}

static bool pl__join(pl_stub_capture *c, pl_stub_obj *so)
{
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 4;
        pl_stub_obj **a = realloc(c->streams, (size_t)cap * sizeof *a);
        if (!a) return false;
        c->streams = a;
        c->cap = cap;
    }
    c->streams[c->n++] = so;
    so->cap = c;
    return true;
}

/* --- device, versions, errors ------------------------------------------------------------------
 */

cudaError_t cudaGetDeviceCount(int *count)
{
    *count = 1;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device)
{
    *device = 0;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
    return pl__ok(device == 0, cudaErrorInvalidDevice);
}

cudaError_t cudaDeviceSynchronize(void)
{
    return cudaSuccess;
}

/* An H200: sm_90, 132 SMs, two copy engines, 141 GiB. */
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    if (device != 0) return pl__fail(cudaErrorInvalidDevice);
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "pipectl CUDA stand-in (sm_90, no device)");
    prop->major = 9;
    prop->minor = 0;
    prop->totalGlobalMem = (size_t)141 << 30;
    prop->sharedMemPerBlock = 48 << 10;
    prop->sharedMemPerBlockOptin = 227 << 10;
    prop->sharedMemPerMultiprocessor = 228 << 10;
    prop->regsPerBlock = 65536;
    prop->warpSize = 32;
    prop->maxThreadsPerBlock = 1024;
    prop->maxThreadsPerMultiProcessor = 2048;
    prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = 1024;
    prop->maxThreadsDim[2] = 64;
    prop->maxGridSize[0] = 0x7fffffff;
    prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
    prop->multiProcessorCount = 132;
    prop->asyncEngineCount = 2;
    prop->concurrentKernels = 1;
    prop->canMapHostMemory = 1;
    prop->unifiedAddressing = 1;
    prop->memoryBusWidth = 6144;
    prop->l2CacheSize = 50 << 20;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
    if (device != 0) return pl__fail(cudaErrorInvalidDevice);
    switch (attr) {
    case cudaDevAttrComputeCapabilityMajor:
        *value = 9;
        break;
    case cudaDevAttrComputeCapabilityMinor:
        *value = 0;
        break;
    case cudaDevAttrMultiProcessorCount:
        *value = 132;
        break;
    case cudaDevAttrAsyncEngineCount:
        *value = 2;
        break;
    case cudaDevAttrConcurrentKernels:
        *value = 1;
        break;
    case cudaDevAttrCanMapHostMemory:
        *value = 1;
        break;
    case cudaDevAttrHostRegisterSupported:
        *value = 1;
        break;
    case cudaDevAttrPageableMemoryAccess:
        *value = 0;
        break;
    case cudaDevAttrClockRate:
        *value = 1980000;
        break; /* kHz */
    case cudaDevAttrMemoryClockRate:
        *value = 2619000;
        break; /* kHz */
    case cudaDevAttrGlobalMemoryBusWidth:
        *value = 6144;
        break;
    case cudaDevAttrL2CacheSize:
        *value = 50 << 20;
        break;
    case cudaDevAttrWarpSize:
        *value = 32;
        break;
    case cudaDevAttrMaxThreadsPerBlock:
        *value = 1024;
        break;
    default:
        *value = 0;
        break;
    }
    return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *version)
{
    *version = CUDART_VERSION;
    return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *version)
{
    *version = CUDART_VERSION;
    return cudaSuccess;
}

cudaError_t cudaGetLastError(void)
{
    cudaError_t e = pl__last;
    pl__last = cudaSuccess;
    return e;
}

#define PL__ERRORS(X)                                                                              \
    X(cudaSuccess, "no error")                                                                     \
    X(cudaErrorInvalidValue, "invalid argument")                                                   \
    X(cudaErrorMemoryAllocation, "out of memory")                                                  \
    X(cudaErrorInvalidDevice, "invalid device ordinal")                                            \
    X(cudaErrorInvalidResourceHandle, "invalid resource handle")                                   \
    X(cudaErrorIllegalState, "the operation is not permitted in the current state")                \
    X(cudaErrorStreamCaptureUnsupported, "operation not permitted when stream is capturing")       \
    X(cudaErrorStreamCaptureInvalidated,                                                           \
      "operation failed due to a previous error during capture")                                   \
    X(cudaErrorStreamCaptureUnmatched, "the capture was not initiated in this stream")             \
    X(cudaErrorStreamCaptureIsolation, "dependency created on uncaptured work in another stream")

const char *cudaGetErrorName(cudaError_t error)
{
#define PL__ERR_NAME(e, text)                                                                      \
    if (error == e) return #e;
    PL__ERRORS(PL__ERR_NAME)
#undef PL__ERR_NAME
    return "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t error)
{
#define PL__ERR_TEXT(e, text)                                                                      \
    if (error == e) return text " (CUDA stand-in)";
    PL__ERRORS(PL__ERR_TEXT)
#undef PL__ERR_TEXT
    return "unknown error (CUDA stand-in)";
}

/* The one driver entry point a stub can honour: cuStreamWriteValue32 (run.fault_marks). Module
 * loading for user kernels needs a real image and is reported missing, as an old driver would. */
static CUresult pl__write_value32(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                                  unsigned int flags)
{
    bool now;
    if (pl__issue((cudaStream_t)stream, "cuStreamWriteValue32", &now) != cudaSuccess)
        return CUDA_ERROR_INVALID_HANDLE;
    if (now) *(cuuint32_t *)(uintptr_t)addr = value;
    return CUDA_SUCCESS;
}

cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **funcPtr,
                                             unsigned int cudaVersion, unsigned long long flags,
                                             enum cudaDriverEntryPointQueryResult *driverStatus)
{
    *funcPtr = NULL;
    enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    if (strcmp(symbol, "cuStreamWriteValue32") == 0) {
        *(CUresult(**)(CUstream, CUdeviceptr, cuuint32_t, unsigned))funcPtr = pl__write_value32;
        q = cudaDriverEntryPointSuccess;
    }
    if (driverStatus) *driverStatus = q;
    return cudaSuccess;
}

/* --- kernels -----------------------------------------------------------------------------------
 */

/* The fat binary handle is never read back but by these calls: any non-null value will do. */
static void *pl__fatbin_handle[4];

void **__cudaRegisterFatBinary(void *fatCubin)
{
    return pl__fatbin_handle;
}

void __cudaRegisterFatBinaryEnd(void **fatCubinHandle) {}

void __cudaUnregisterFatBinary(void **fatCubinHandle) {}

void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun,
                            const char *deviceName, int thread_limit, uint3 *tid, uint3 *bid,
                            dim3 *bDim, dim3 *gDim, int *wSize)
{
}

unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem,
                                     struct CUstream_st *stream)
{
    if (pl__n_configs == PL__CONFIG_DEPTH) {
        pl_stubcuda_misuse("__cudaPushCallConfiguration: %d launches configured and not made",
                           PL__CONFIG_DEPTH);
        return 1;
    }
    pl__configs[pl__n_configs++] = (pl__config){gridDim, blockDim, sharedMem, stream};
    return 0;
}

cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem,
                                       void *stream)
{
    if (pl__n_configs == 0) return pl__fail(cudaErrorInvalidValue);
    pl__config c = pl__configs[--pl__n_configs];
    *gridDim = c.grid;
    *blockDim = c.block;
    *sharedMem = c.shared;
    *(cudaStream_t *)stream = c.stream;
    return cudaSuccess;
}

cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *fun)
{
    *kernel = (cudaKernel_t)(uintptr_t)fun;
    return cudaSuccess;
}

cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args,
                               size_t sharedMem, cudaStream_t stream)
{
    if (!kernel || gridDim.x * gridDim.y * gridDim.z == 0 ||
        blockDim.x * blockDim.y * blockDim.z == 0 || blockDim.x * blockDim.y * blockDim.z > 1024)
        return pl__fail(cudaErrorInvalidValue);
    bool now;
    return pl__issue(stream, "kernel launch", &now);
}

cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func, void **args)
{
    (void)args;
    if (!config || !func) return pl__fail(cudaErrorInvalidValue);
    return __cudaLaunchKernel((cudaKernel_t)(uintptr_t)func, config->gridDim, config->blockDim,
                              NULL, config->dynamicSmemBytes, config->stream);
}

cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *attr, const void *func)
{
    memset(attr, 0, sizeof *attr);
    attr->binaryVersion = 90;
    attr->ptxVersion = 90;
    attr->maxThreadsPerBlock = 1024;
    attr->numRegs = 32;
    return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, int value)
{
    return cudaSuccess;
}

/* --- memory ------------------------------------------------------------------------------------
 */

cudaError_t cudaMalloc(void **devPtr, size_t size)
{
    *devPtr = pl_stubcuda_alloc(PL_STUB_DEVICE_MEM, size, "cudaMalloc");
    return pl__ok(*devPtr, cudaErrorMemoryAllocation);
}

cudaError_t cudaFree(void *devPtr)
{
    if (!devPtr) return cudaSuccess;
    return pl__ok(pl_stubcuda_destroy(devPtr, PL_STUB_DEVICE_MEM, "cudaFree"),
                  cudaErrorInvalidValue);
}

cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
    *pHost = pl_stubcuda_alloc(PL_STUB_HOST_MEM, size, "cudaHostAlloc");
    return pl__ok(*pHost, cudaErrorMemoryAllocation);
}

cudaError_t cudaFreeHost(void *ptr)
{
    if (!ptr) return cudaSuccess;
    return pl__ok(pl_stubcuda_destroy(ptr, PL_STUB_HOST_MEM, "cudaFreeHost"),
                  cudaErrorInvalidValue);
}

/* Mapped pinned memory: the device address is the host address (unified addressing). */
cudaError_t cudaHostGetDevicePointer(void **pDevice, void *pHost, unsigned int flags)
{
    if (!pl_stubcuda_find(pHost, PL_STUB_HOST_MEM, "cudaHostGetDevicePointer"))
        return pl__fail(cudaErrorInvalidValue);
    *pDevice = pHost;
    return cudaSuccess;
}

cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags)
{
    if (!ptr || size == 0) return pl__fail(cudaErrorInvalidValue);
    return pl__ok(pl_stubcuda_register(ptr, size, "cudaHostRegister"),
                  cudaErrorHostMemoryAlreadyRegistered);
}

cudaError_t cudaHostUnregister(void *ptr)
{
    return pl__ok(pl_stubcuda_destroy(ptr, PL_STUB_HOST_REG, "cudaHostUnregister"),
                  cudaErrorHostMemoryNotRegistered);
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    if (count) memmove(dst, src, count);
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                            cudaStream_t stream)
{
    bool now;
    cudaError_t e = pl__issue(stream, "cudaMemcpyAsync", &now);
    if (e == cudaSuccess && now && count) memmove(dst, src, count);
    return e;
}

cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                              size_t width, size_t height, enum cudaMemcpyKind kind,
                              cudaStream_t stream)
{
    if (width > dpitch || width > spitch) return pl__fail(cudaErrorInvalidValue);
    bool now;
    cudaError_t e = pl__issue(stream, "cudaMemcpy2DAsync", &now);
    for (size_t r = 0; e == cudaSuccess && now && r < height; r++)
        memmove((char *)dst + r * dpitch, (const char *)src + r * spitch, width);
    return e;
}

cudaError_t cudaMemset(void *devPtr, int value, size_t count)
{
    memset(devPtr, value, count);
    return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream)
{
    bool now;
    cudaError_t e = pl__issue(stream, "cudaMemsetAsync", &now);
    if (e == cudaSuccess && now) memset(devPtr, value, count);
    return e;
}

/* --- streams -----------------------------------------------------------------------------------
 */

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags)
{
    pl_stub_obj *o = pl_stubcuda_new(PL_STUB_STREAM, "cudaStreamCreateWithFlags");
    *pStream = (cudaStream_t)o;
    return pl__ok(o != NULL, cudaErrorMemoryAllocation);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    pl_stubcuda_lock();
    pl_stub_obj *so = pl_stubcuda_find_locked(stream, PL_STUB_STREAM, "cudaStreamDestroy");
    pl_stub_capture *c = pl__capturing(so);
    pl_stubcuda_unlock();
    if (c)
        pl_stubcuda_misuse("cudaStreamDestroy: stream #%llu is capturing (capture %llu)",
                           (unsigned long long)so->seq, c->id);
    if (!so) return pl__fail(cudaErrorInvalidResourceHandle);
    pl_stubcuda_destroy(stream, PL_STUB_STREAM, "cudaStreamDestroy");
    return cudaSuccess;
}

/* A synchronization that waits for a capturing stream is illegal and invalidates its capture. */
static cudaError_t pl__sync(cudaStream_t stream, const char *fn)
{
    pl_stubcuda_lock();
    pl_stub_obj *so;
    bool ok = pl__stream(stream, fn, &so);
    pl_stub_capture *c = ok ? pl__capturing(so) : NULL;
    if (c) c->invalid = true;
    pl_stubcuda_unlock();
    if (!ok) return pl__fail(cudaErrorInvalidResourceHandle);
    return c ? pl__fail(cudaErrorStreamCaptureUnsupported) : cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
    return pl__sync(stream, "cudaStreamSynchronize");
}

cudaError_t cudaStreamQuery(cudaStream_t stream)
{
    return pl__sync(stream, "cudaStreamQuery");
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
    const char *fn = "cudaStreamWaitEvent";
    cudaError_t e = cudaSuccess;
    pl_stubcuda_lock();
    pl_stub_obj *so, *eo = pl_stubcuda_find_locked(event, PL_STUB_EVENT, fn);
    if (!pl__stream(stream, fn, &so) || !eo) {
        e = cudaErrorInvalidResourceHandle;
        goto done;
    }
    pl_stub_capture *ec = eo->cap && eo->cap->open ? eo->cap : NULL, *sc = pl__capturing(so);
    if (ec && !sc) {
        /* Waiting on an event of a capture draws the stream into it (fork). */
        if (!so) {
            e = cudaErrorStreamCaptureImplicit;
            goto done;
        }
        if (!pl__join(ec, so)) e = cudaErrorMemoryAllocation;
    } else if (ec && sc && ec != sc) {
        sc->invalid = ec->invalid = true;
        e = cudaErrorStreamCaptureIsolation;
    }
done:
    pl_stubcuda_unlock();
    return e == cudaSuccess ? e : pl__fail(e);
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *userData)
{
    bool now;
    cudaError_t e = pl__issue(stream, "cudaLaunchHostFunc", &now);
    if (e == cudaSuccess && now) fn(userData);
    return e;
}

/* --- events ------------------------------------------------------------------------------------
 */

cudaError_t cudaEventCreate(cudaEvent_t *event)
{
    pl_stub_obj *o = pl_stubcuda_new(PL_STUB_EVENT, "cudaEventCreate");
    *event = (cudaEvent_t)o;
    return pl__ok(o != NULL, cudaErrorMemoryAllocation);
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
    pl_stub_obj *o = pl_stubcuda_new(PL_STUB_EVENT, "cudaEventCreateWithFlags");
    *event = (cudaEvent_t)o;
    return pl__ok(o != NULL, cudaErrorMemoryAllocation);
}

cudaError_t cudaEventDestroy(cudaEvent_t event)
{
    return pl__ok(pl_stubcuda_destroy(event, PL_STUB_EVENT, "cudaEventDestroy"),
                  cudaErrorInvalidResourceHandle);
}

static cudaError_t pl__record(cudaEvent_t event, cudaStream_t stream, const char *fn)
{
    cudaError_t e = cudaSuccess;
    pl_stubcuda_lock();
    pl_stub_obj *so, *eo = pl_stubcuda_find_locked(event, PL_STUB_EVENT, fn);
    if (pl__stream(stream, fn, &so) && eo)
        eo->cap = pl__capturing(so);
    else
        e = cudaErrorInvalidResourceHandle;
    pl_stubcuda_unlock();
    return e == cudaSuccess ? e : pl__fail(e);
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    return pl__record(event, stream, "cudaEventRecord");
}

cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream, unsigned int flags)
{
    return pl__record(event, stream, "cudaEventRecordWithFlags");
}

cudaError_t cudaEventQuery(cudaEvent_t event)
{
    return pl__ok(pl_stubcuda_find(event, PL_STUB_EVENT, "cudaEventQuery"),
                  cudaErrorInvalidResourceHandle);
}

cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
    return pl__ok(pl_stubcuda_find(event, PL_STUB_EVENT, "cudaEventSynchronize"),
                  cudaErrorInvalidResourceHandle);
}

/* A microsecond: positive, so that rates computed from device times stay finite. */
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    if (!pl_stubcuda_find(start, PL_STUB_EVENT, "cudaEventElapsedTime") ||
        !pl_stubcuda_find(end, PL_STUB_EVENT, "cudaEventElapsedTime"))
        return pl__fail(cudaErrorInvalidResourceHandle);
    *ms = 0.001f;
    return cudaSuccess;
}

/* The live graph `graph`, a body graph or one of the caller's. Caller holds the lock. */
static pl_stub_obj *pl__graph(cudaGraph_t graph, const char *fn)
{
    pl_stub_obj *o = pl_stubcuda_peek_locked(graph);
    if (o && o->live && (o->kind == PL_STUB_GRAPH || o->kind == PL_STUB_BODY_GRAPH)) return o;
    return pl_stubcuda_find_locked(graph, PL_STUB_GRAPH, fn); /* reports why not */
}

/* --- stream capture ----------------------------------------------------------------------------
 */

static cudaError_t pl__begin(cudaStream_t stream, pl_stub_obj *graph, const char *fn)
{
    cudaError_t e = cudaSuccess;
    pl_stubcuda_lock();
    pl_stub_obj *so;
    pl_stub_capture *c = NULL;
    if (!pl__stream(stream, fn, &so)) {
        e = cudaErrorInvalidResourceHandle;
    } else if (!so) {
        e = cudaErrorStreamCaptureUnsupported; /* the legacy stream cannot capture */
    } else if (pl__capturing(so)) {
        e = cudaErrorIllegalState;
    } else if (!(c = calloc(1, sizeof *c)) || !pl__join(c, so)) {
        e = cudaErrorMemoryAllocation;
    } else {
        c->to_graph = graph != NULL;
        c->graph = graph ? graph : pl_stubcuda_new_locked(PL_STUB_GRAPH, "cudaStreamEndCapture");
        c->origin = so;
        c->open = true;
        c->id = ++pl__capture_ids;
        if (!c->graph) e = cudaErrorMemoryAllocation;
    }
    if (e != cudaSuccess && c) {
        if (so && so->cap == c) so->cap = NULL;
        free(c->streams);
        free(c);
    }
    pl_stubcuda_unlock();
    return e == cudaSuccess ? e : pl__fail(e);
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
    return pl__begin(stream, NULL, "cudaStreamBeginCapture");
}

cudaError_t cudaStreamBeginCaptureToGraph(cudaStream_t stream, cudaGraph_t graph,
                                          const cudaGraphNode_t *dependencies,
                                          const cudaGraphEdgeData *dependencyData,
                                          size_t numDependencies, enum cudaStreamCaptureMode mode)
{
    const char *fn = "cudaStreamBeginCaptureToGraph";
    pl_stubcuda_lock();
    pl_stub_obj *g = pl__graph(graph, fn);
    pl_stubcuda_unlock();
    if (!g) return pl__fail(cudaErrorInvalidResourceHandle);
    return pl__begin(stream, g, fn);
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph)
{
    const char *fn = "cudaStreamEndCapture";
    cudaError_t e = cudaSuccess;
    *pGraph = NULL;
    pl_stubcuda_lock();
    pl_stub_obj *so;
    pl_stub_capture *c = NULL;
    if (!pl__stream(stream, fn, &so))
        e = cudaErrorInvalidResourceHandle;
    else if (!(c = pl__capturing(so)))
        e = cudaErrorIllegalState;
    else if (c->origin != so)
        e = cudaErrorStreamCaptureUnmatched;
    if (e == cudaSuccess) {
        c->open = false;
        for (int i = 0; i < c->n; i++)
            if (c->streams[i]->cap == c) c->streams[i]->cap = NULL;
        if (!c->invalid) {
            *pGraph = (cudaGraph_t)c->graph;
        } else {
            /* An invalidated capture's graph is CUDA's to drop. */
            e = cudaErrorStreamCaptureInvalidated;
        }
    }
    pl_stubcuda_unlock();
    if (e == cudaErrorStreamCaptureInvalidated && !c->to_graph)
        pl_stubcuda_destroy(c->graph, PL_STUB_GRAPH, fn);
    return e == cudaSuccess ? e : pl__fail(e);
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus *status)
{
    pl_stubcuda_lock();
    pl_stub_obj *so;
    bool ok = pl__stream(stream, "cudaStreamIsCapturing", &so);
    pl_stub_capture *c = ok ? pl__capturing(so) : NULL;
    *status = !c           ? cudaStreamCaptureStatusNone
              : c->invalid ? cudaStreamCaptureStatusInvalidated
                           : cudaStreamCaptureStatusActive;
    pl_stubcuda_unlock();
    return pl__ok(ok, cudaErrorInvalidResourceHandle);
}

/* The capture's dependency set is given as empty: a node added on it is a root, which is a valid
 * graph whatever the real dependencies were. */
cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream,
                                     enum cudaStreamCaptureStatus *captureStatus_out,
                                     unsigned long long *id_out, cudaGraph_t *graph_out,
                                     const cudaGraphNode_t **dependencies_out,
                                     const cudaGraphEdgeData **edgeData_out,
                                     size_t *numDependencies_out)
{
    pl_stubcuda_lock();
    pl_stub_obj *so;
    bool ok = pl__stream(stream, "cudaStreamGetCaptureInfo", &so);
    pl_stub_capture *c = ok ? pl__capturing(so) : NULL;
    *captureStatus_out = !c           ? cudaStreamCaptureStatusNone
                         : c->invalid ? cudaStreamCaptureStatusInvalidated
                                      : cudaStreamCaptureStatusActive;
    if (id_out) *id_out = c ? c->id : 0;
    if (graph_out) *graph_out = c ? (cudaGraph_t)c->graph : NULL;
    if (dependencies_out) *dependencies_out = NULL;
    if (edgeData_out) *edgeData_out = NULL;
    if (numDependencies_out) *numDependencies_out = 0;
    pl_stubcuda_unlock();
    return pl__ok(ok, cudaErrorInvalidResourceHandle);
}

cudaError_t cudaStreamUpdateCaptureDependencies(cudaStream_t stream, cudaGraphNode_t *dependencies,
                                                const cudaGraphEdgeData *dependencyData,
                                                size_t numDependencies, unsigned int flags)
{
    const char *fn = "cudaStreamUpdateCaptureDependencies";
    cudaError_t e = cudaSuccess;
    pl_stubcuda_lock();
    pl_stub_obj *so;
    if (!pl__stream(stream, fn, &so))
        e = cudaErrorInvalidResourceHandle;
    else if (!pl__capturing(so))
        e = cudaErrorIllegalState;
    for (size_t i = 0; e == cudaSuccess && i < numDependencies; i++)
        if (!pl_stubcuda_find_locked(dependencies[i], PL_STUB_NODE, fn)) e = cudaErrorInvalidValue;
    pl_stubcuda_unlock();
    return e == cudaSuccess ? e : pl__fail(e);
}

cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode)
{
    enum cudaStreamCaptureMode old = pl__mode;
    pl__mode = *mode;
    *mode = old;
    return cudaSuccess;
}

/* --- graphs ------------------------------------------------------------------------------------
 */

cudaError_t cudaGraphDestroy(cudaGraph_t graph)
{
    return pl__ok(pl_stubcuda_destroy(graph, PL_STUB_GRAPH, "cudaGraphDestroy"),
                  cudaErrorInvalidResourceHandle);
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                                 unsigned long long flags)
{
    *pGraphExec = NULL;
    if (!pl_stubcuda_find(graph, PL_STUB_GRAPH, "cudaGraphInstantiate"))
        return pl__fail(cudaErrorInvalidResourceHandle);
    pl_stub_obj *o = pl_stubcuda_new(PL_STUB_GRAPH_EXEC, "cudaGraphInstantiate");
    *pGraphExec = (cudaGraphExec_t)o;
    return pl__ok(o != NULL, cudaErrorMemoryAllocation);
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t graphExec)
{
    return pl__ok(pl_stubcuda_destroy(graphExec, PL_STUB_GRAPH_EXEC, "cudaGraphExecDestroy"),
                  cudaErrorInvalidResourceHandle);
}

static cudaError_t pl__launch_exec(cudaGraphExec_t graphExec, cudaStream_t stream, const char *fn)
{
    if (!pl_stubcuda_find(graphExec, PL_STUB_GRAPH_EXEC, fn))
        return pl__fail(cudaErrorInvalidResourceHandle);
    bool now;
    return pl__issue(stream, fn, &now);
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream)
{
    return pl__launch_exec(graphExec, stream, "cudaGraphLaunch");
}

cudaError_t cudaGraphUpload(cudaGraphExec_t graphExec, cudaStream_t stream)
{
    return pl__launch_exec(graphExec, stream, "cudaGraphUpload");
}

cudaError_t cudaGraphConditionalHandleCreate(cudaGraphConditionalHandle *pHandle_out,
                                             cudaGraph_t graph, unsigned int defaultLaunchValue,
                                             unsigned int flags)
{
    static unsigned long long handles;
    pl_stubcuda_lock();
    bool ok = pl__graph(graph, "cudaGraphConditionalHandleCreate") != NULL;
    *pHandle_out = ++handles;
    pl_stubcuda_unlock();
    return pl__ok(ok, cudaErrorInvalidResourceHandle);
}

cudaError_t cudaGraphAddNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                             const cudaGraphNode_t *pDependencies,
                             const cudaGraphEdgeData *dependencyData, size_t numDependencies,
                             struct cudaGraphNodeParams *nodeParams)
{
    const char *fn = "cudaGraphAddNode";
    cudaError_t e = cudaSuccess;
    *pGraphNode = NULL;
    pl_stubcuda_lock();
    pl_stub_obj *node = NULL, **bodies = NULL;
    if (!pl__graph(graph, fn)) {
        e = cudaErrorInvalidResourceHandle;
        goto done;
    }
    for (size_t i = 0; i < numDependencies; i++)
        if (!pl_stubcuda_find_locked(pDependencies[i], PL_STUB_NODE, fn)) {
            e = cudaErrorInvalidValue;
            goto done;
        }
    if (!(node = pl_stubcuda_new_locked(PL_STUB_NODE, fn))) {
        e = cudaErrorMemoryAllocation;
        goto done;
    }
    if (nodeParams->type == cudaGraphNodeTypeConditional) {
        /* The bodies are CUDA's, filled in by the caller (cudaStreamBeginCaptureToGraph) and
         * freed with the graph: never the caller's to destroy. */
        unsigned n = nodeParams->conditional.size;
        if (n == 0 || (nodeParams->conditional.type == cudaGraphCondTypeWhile && n != 1)) {
            e = cudaErrorInvalidValue;
            goto done;
        }
        if (!(bodies = calloc(n, sizeof *bodies))) {
            e = cudaErrorMemoryAllocation;
            goto done;
        }
        for (unsigned i = 0; i < n; i++)
            if (!(bodies[i] = pl_stubcuda_new_locked(PL_STUB_BODY_GRAPH, fn))) {
                e = cudaErrorMemoryAllocation;
                goto done;
            }
        node->extra = bodies;
        nodeParams->conditional.phGraph_out = (cudaGraph_t *)bodies;
    }
    *pGraphNode = (cudaGraphNode_t)node;
done:
    pl_stubcuda_unlock();
    return e == cudaSuccess ? e : pl__fail(e);
}

/* The stand-in keeps no nodes or edges: a graph reads as empty. */
cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t *nodes, size_t *numNodes)
{
    pl_stubcuda_lock();
    bool ok = pl__graph(graph, "cudaGraphGetNodes") != NULL;
    pl_stubcuda_unlock();
    *numNodes = 0;
    return pl__ok(ok, cudaErrorInvalidResourceHandle);
}

cudaError_t cudaGraphGetEdges(cudaGraph_t graph, cudaGraphNode_t *from, cudaGraphNode_t *to,
                              cudaGraphEdgeData *edgeData, size_t *numEdges)
{
    pl_stubcuda_lock();
    bool ok = pl__graph(graph, "cudaGraphGetEdges") != NULL;
    pl_stubcuda_unlock();
    *numEdges = 0;
    return pl__ok(ok, cudaErrorInvalidResourceHandle);
}

cudaError_t cudaGraphNodeGetType(cudaGraphNode_t node, enum cudaGraphNodeType *pType)
{
    if (!pl_stubcuda_find(node, PL_STUB_NODE, "cudaGraphNodeGetType"))
        return pl__fail(cudaErrorInvalidResourceHandle);
    *pType = cudaGraphNodeTypeEmpty;
    return cudaSuccess;
}

cudaError_t cudaGraphDebugDotPrint(cudaGraph_t graph, const char *path, unsigned int flags)
{
    pl_stubcuda_lock();
    bool ok = pl__graph(graph, "cudaGraphDebugDotPrint") != NULL;
    pl_stubcuda_unlock();
    if (!ok) return pl__fail(cudaErrorInvalidResourceHandle);
    FILE *f = fopen(path, "w");
    if (!f) return pl__fail(cudaErrorInvalidValue);
    fputs("digraph pl_stubcuda {\n}\n", f);
    return pl__ok(fclose(f) == 0, cudaErrorInvalidValue);
}
