/* pl_umod: a user kernel's module on the device: load (cubin, PTX, fatbin), look the kernel up,
 * read its parameter layout, launch it. Driver entry points come from
 * cudaGetDriverEntryPointByVersion, so the build links only cudart. */
#include "pl_nvrtc.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_gpu.h"

#define PL__MAX_PARAMS 256

typedef CUresult (*pl__load_fn)(CUmodule *, const void *, unsigned, CUjit_option *, void **);
typedef CUresult (*pl__unload_fn)(CUmodule);
typedef CUresult (*pl__getfn_fn)(CUfunction *, CUmodule, const char *);
typedef CUresult (*pl__count_fn)(unsigned *, CUmodule);
typedef CUresult (*pl__enum_fn)(CUfunction *, unsigned, CUmodule);
typedef CUresult (*pl__name_fn)(const char **, CUfunction);
typedef CUresult (*pl__param_fn)(CUfunction, size_t, size_t *, size_t *);
typedef CUresult (*pl__attr_fn)(CUfunction, CUfunction_attribute, int);
typedef CUresult (*pl__launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                  unsigned, unsigned, CUstream, void **, void **);
typedef CUresult (*pl__errstr_fn)(CUresult, const char **);

static struct {
    pthread_once_t once;
    bool ok;
    char missing[64];
    pl__load_fn load;
    pl__unload_fn unload;
    pl__getfn_fn getfn;
    pl__count_fn count;
    pl__enum_fn enumerate;
    pl__name_fn name;
    pl__param_fn param;
    pl__attr_fn attr;
    pl__launch_fn launch;
    pl__errstr_fn errname, errstr;
} pl__drv = {.once = PTHREAD_ONCE_INIT};

static void *pl__sym(const char *name, unsigned version)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion(name, &fn, version, cudaEnableDefault, &q) !=
            cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
        return NULL;
    return fn;
}

static void pl__drv_init(void)
{
/* Every symbol as of CUDA 12.4 (cuFuncGetParamInfo's release): the ABIs the typedefs above
 * describe. */
#define PL__GET(field, name)                                                                       \
    do {                                                                                           \
        *(void **)&pl__drv.field = pl__sym(name, 12040);                                           \
        if (!pl__drv.field && !pl__drv.missing[0])                                                 \
            snprintf(pl__drv.missing, sizeof pl__drv.missing, "%s", name);                         \
    } while (0)
    PL__GET(load, "cuModuleLoadDataEx");
    PL__GET(unload, "cuModuleUnload");
    PL__GET(getfn, "cuModuleGetFunction");
    PL__GET(count, "cuModuleGetFunctionCount");
    PL__GET(enumerate, "cuModuleEnumerateFunctions");
    PL__GET(name, "cuFuncGetName");
    PL__GET(param, "cuFuncGetParamInfo");
    PL__GET(attr, "cuFuncSetAttribute");
    PL__GET(launch, "cuLaunchKernel");
    PL__GET(errname, "cuGetErrorName");
    PL__GET(errstr, "cuGetErrorString");
#undef PL__GET
    pl__drv.ok = !pl__drv.missing[0];
}

static pl_status pl__drv_ready(pl_error *err)
{
    pthread_once(&pl__drv.once, pl__drv_init);
    if (!pl__drv.ok)
        return pl_error_set(err, PL_ECUDA,
                            "error: the CUDA driver has no %s (user kernels need a driver for "
                            "CUDA 12.4 or newer)",
                            pl__drv.missing);
    return PL_OK;
}

static const char *pl__cu_text(CUresult r, char *buf, size_t cap)
{
    const char *name = NULL, *text = NULL;
    if (pl__drv.errname) pl__drv.errname(r, &name);
    if (pl__drv.errstr) pl__drv.errstr(r, &text);
    snprintf(buf, cap, "%s (%s)", text ? text : "unknown error", name ? name : "?");
    return buf;
}

struct pl_umod {
    CUmodule mod;
    CUfunction fn;
    pl_umod_param *params;
    int n_params;
};

pl_status pl_umod_device_arch(int device, int *arch, pl_error *err)
{
    int major = 0, minor = 0;
    PL_CHECK(PL_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device),
                     NULL, -1, err));
    PL_CHECK(PL_CUDA(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device),
                     NULL, -1, err));
    *arch = major * 10 + minor;
    return PL_OK;
}

/* "a, b, c": the kernels of a loaded module. */
static void pl__list_functions(CUmodule mod, char *out, size_t cap)
{
    out[0] = '\0';
    unsigned n = 0;
    if (pl__drv.count(&n, mod) != CUDA_SUCCESS || n == 0) {
        snprintf(out, cap, "none");
        return;
    }
    if (n > 64) n = 64;
    CUfunction fns[64];
    if (pl__drv.enumerate(fns, n, mod) != CUDA_SUCCESS) return;
    size_t len = 0;
    for (unsigned i = 0; i < n && len < cap; i++) {
        const char *name = NULL;
        if (pl__drv.name(&name, fns[i]) != CUDA_SUCCESS || !name) continue;
        len += (size_t)snprintf(out + len, cap - len, "%s%s", len ? ", " : "", name);
    }
}

pl_status pl_umod_load(const void *image, size_t size, const char *symbol, const char *display,
                       pl_umod **out, pl_error *err)
{
    (void)size;
    *out = NULL;
    PL_CHECK(pl__drv_ready(err));
    /* The runtime makes the device's primary context current on this thread. */
    PL_CHECK(PL_CUDA(cudaFree(NULL), NULL, -1, err));
    pl_umod *m = calloc(1, sizeof *m);
    if (!m) return pl_error_set(err, PL_ENOMEM, "error: out of memory loading a module");
    char jit_log[4096] = "";
    CUjit_option jo[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *jv[2] = {jit_log, (void *)(uintptr_t)sizeof jit_log};
    char buf[256];
    CUresult r = pl__drv.load(&m->mod, image, 2, jo, jv);
    if (r != CUDA_SUCCESS) {
        free(m);
        return pl_error_set(err, PL_ECUDA, "error: cuModuleLoadDataEx failed: %s%s%s",
                            pl__cu_text(r, buf, sizeof buf), jit_log[0] ? "\n" : "", jit_log);
    }
    r = pl__drv.getfn(&m->fn, m->mod, symbol);
    if (r != CUDA_SUCCESS) {
        char list[1024];
        pl__list_functions(m->mod, list, sizeof list);
        pl_umod_free(m);
        return pl_error_set(err, PL_EINPUT, "error: the module has no kernel '%s'; it has: %s",
                            display, list);
    }
    m->params = calloc(PL__MAX_PARAMS, sizeof *m->params);
    if (!m->params) {
        pl_umod_free(m);
        return pl_error_set(err, PL_ENOMEM, "error: out of memory loading a module");
    }
    /* cuFuncGetParamInfo answers CUDA_ERROR_INVALID_VALUE past the last parameter. */
    while (m->n_params < PL__MAX_PARAMS) {
        size_t off = 0, sz = 0;
        if (pl__drv.param(m->fn, (size_t)m->n_params, &off, &sz) != CUDA_SUCCESS) break;
        m->params[m->n_params++] = (pl_umod_param){off, sz};
    }
    *out = m;
    return PL_OK;
}

void pl_umod_free(pl_umod *m)
{
    if (!m) return;
    /* Graphs and launches that use the kernel may still be in flight (a stopped run): let them
     * finish before the code goes away. Errors are moot here (a faulted context fails it all). */
    cudaDeviceSynchronize();
    if (m->mod) pl__drv.unload(m->mod);
    free(m->params);
    free(m);
}

const pl_umod_param *pl_umod_params(const pl_umod *m, int *n)
{
    *n = m->n_params;
    return m->params;
}

pl_status pl_umod_set_shared(pl_umod *m, unsigned bytes, pl_error *err)
{
    if (bytes <= 48u * 1024) return PL_OK;
    char buf[256];
    CUresult r = pl__drv.attr(m->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)bytes);
    if (r != CUDA_SUCCESS)
        return pl_error_set(err, PL_EINPUT,
                            "error: cannot allow %u bytes of dynamic shared memory: %s", bytes,
                            pl__cu_text(r, buf, sizeof buf));
    return PL_OK;
}

pl_status pl_umod_launch(const pl_umod *m, const unsigned grid[3], const unsigned block[3],
                         unsigned shared, void *stream, void **params, const char *stage,
                         int64_t batch, pl_error *err)
{
    CUresult r = pl__drv.launch(m->fn, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                                shared, (CUstream)stream, params, NULL);
    if (r == CUDA_SUCCESS) return PL_OK;
    char buf[256];
    if (batch >= 0)
        return pl_error_set(err, PL_ECUDA, "stage '%s', batch %lld: cuLaunchKernel failed: %s",
                            stage, (long long)batch, pl__cu_text(r, buf, sizeof buf));
    return pl_error_set(err, PL_ECUDA, "stage '%s': cuLaunchKernel failed: %s", stage,
                        pl__cu_text(r, buf, sizeof buf));
}
