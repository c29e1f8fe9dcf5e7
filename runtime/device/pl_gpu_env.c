/* pl_gpu_env: the GPU part of a bundle's environment (runtime/record/pl_env.h): what could make
 * times or results differ on another day or another GPU. */
#include <stdio.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nvrtc.h>

#include "pl_gpu.h"
#include "pl_gpu_env.h"

static json_t *pl__attr(enum cudaDeviceAttr a, int dev)
{
    int v = 0;
    if (cudaDeviceGetAttribute(&v, a, dev) != cudaSuccess) return json_null();
    return json_integer(v);
}

pl_status pl_gpu_env_json(int device, json_t *g, pl_error *err)
{
    struct cudaDeviceProp p;
    PL_CHECK(PL_CUDA(cudaGetDeviceProperties(&p, device), NULL, -1, err));
    char uuid[48];
    const unsigned char *u = (const unsigned char *)p.uuid.bytes;
    snprintf(uuid, sizeof uuid,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
             u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14],
             u[15]);
    char cc[16];
    snprintf(cc, sizeof cc, "%d.%d", p.major, p.minor);
    int drv = 0, rt = 0, cublas = 0, nv_major = 0, nv_minor = 0;
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    cublasGetProperty(MAJOR_VERSION, &cublas);
    int cb_minor = 0, cb_patch = 0;
    cublasGetProperty(MINOR_VERSION, &cb_minor);
    cublasGetProperty(PATCH_LEVEL, &cb_patch);
    nvrtcVersion(&nv_major, &nv_minor);
    char ver[32];
    pl_status st = PL_OK;
    PL_CHECK(pl_json_set(g, "device", json_integer(device), err));
    PL_CHECK(pl_json_set(g, "name", pl_json_str(p.name), err));
    PL_CHECK(pl_json_set(g, "uuid", json_string(uuid), err));
    PL_CHECK(pl_json_set(g, "compute_capability", json_string(cc), err));
    PL_CHECK(pl_json_set(g, "sms", json_integer(p.multiProcessorCount), err));
    PL_CHECK(pl_json_set(g, "sm_clock_khz", pl__attr(cudaDevAttrClockRate, device), err));
    PL_CHECK(pl_json_set(g, "memory_clock_khz", pl__attr(cudaDevAttrMemoryClockRate, device), err));
    PL_CHECK(pl_json_set(g, "memory_bytes", json_integer((json_int_t)p.totalGlobalMem), err));
    PL_CHECK(pl_json_set(g, "copy_engines", pl__attr(cudaDevAttrAsyncEngineCount, device), err));
    snprintf(ver, sizeof ver, "%d.%d", drv / 1000, (drv % 1000) / 10);
    PL_CHECK(pl_json_set(g, "driver", json_string(ver), err));
    snprintf(ver, sizeof ver, "%d.%d", rt / 1000, (rt % 1000) / 10);
    PL_CHECK(pl_json_set(g, "runtime", json_string(ver), err));
    snprintf(ver, sizeof ver, "%d.%d.%d", cublas, cb_minor, cb_patch);
    PL_CHECK(pl_json_set(g, "cublas", json_string(ver), err));
    snprintf(ver, sizeof ver, "%d.%d", nv_major, nv_minor);
    PL_CHECK(pl_json_set(g, "nvrtc", json_string(ver), err));
    return st;
}
