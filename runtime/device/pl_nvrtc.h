/* pl_nvrtc: user kernels on the CUDA side. Compiling CUDA source with NVRTC into a cubin, cached
 * under $XDG_CACHE_HOME/pipectl (pl_nvrtc.c; needs no GPU, so `pipectl check` compiles too), and
 * loading modules, checking a kernel's parameters and launching it through the driver API
 * obtained with cudaGetDriverEntryPointByVersion (pl_umod.c; libcuda is never linked). Speaks
 * plain C types: no CUDA header leaks out. Built only with PL_WITH_CUDA. */
#ifndef PL_NVRTC_H
#define PL_NVRTC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pl_status.h"

typedef struct pl_nvrtc_in {
    const char *src; /* NUL-terminated CUDA source */
    size_t len;
    const char *name;     /* the program's name in NVRTC's messages ("kernels/my.cu") */
    const char *function; /* a name expression: "scale", "scale<float>" */
    const char *const *options;
    int n_options;
    const char *const *includes; /* header folders (-I), also hashed into the cache key */
    int n_includes;
    int arch; /* 90: sm_90 */
} pl_nvrtc_in;

typedef struct pl_nvrtc_out {
    void *image; /* cubin, malloc'd (caller frees) */
    size_t size;
    char *lowered; /* the kernel's symbol, malloc'd */
    char *log;     /* NVRTC's messages (warnings on success, errors on failure), malloc'd or NULL */
    bool compile_failed; /* the source did not compile: `log` has NVRTC's diagnostics */
    bool no_function;    /* the source compiled but has no kernel `function`: see `entries` */
    char *entries;       /* no_function: "scale, add_one" (the kernels it has), malloc'd */
    bool cached;         /* taken from the cache: nothing was compiled */
    double ms;           /* compile (or cache read) time */
    char key[33];        /* the cache key (hex) */
} pl_nvrtc_out;

/* Compiles (or finds in the cache) `in`. PL_OK: image and lowered are set. Compile errors and a
 * missing function return PL_EINPUT with compile_failed / no_function set (the caller turns the
 * log into positioned messages); other failures (NVRTC missing, out of memory) PL_ERUNTIME with a
 * message. A cache that cannot be written is not an error (the next run compiles again). */
pl_status pl_nvrtc_compile(const pl_nvrtc_in *in, pl_nvrtc_out *out, pl_error *err);
void pl_nvrtc_out_fini(pl_nvrtc_out *out);

/* "13.0" */
const char *pl_nvrtc_version(void);
/* The cache folder into dir: $XDG_CACHE_HOME/pipectl, else $HOME/.cache/pipectl. */
void pl_nvrtc_cache_dir(char *dir, size_t cap);

/* ---- pl_umod.c: modules on a device ---- */

typedef struct pl_umod pl_umod;

typedef struct pl_umod_param {
    size_t offset, size;
} pl_umod_param;

/* Loads `image` (cubin, PTX text or fatbin) on the current device and looks up `symbol`. The
 * error names `display` (the function as written) and, when it is missing, lists the kernels
 * the module has. PTX JIT errors carry the JIT log. */
pl_status pl_umod_load(const void *image, size_t size, const char *symbol, const char *display,
                       pl_umod **out, pl_error *err);
void pl_umod_free(pl_umod *m); /* NULL is fine */
/* The kernel's parameters (cuFuncGetParamInfo): *n of them, sizes and offsets (borrowed from m). */
const pl_umod_param *pl_umod_params(const pl_umod *m, int *n);
/* Allows `bytes` of dynamic shared memory (above 48 KiB needs an attribute). */
pl_status pl_umod_set_shared(pl_umod *m, unsigned bytes, pl_error *err);
/* cuLaunchKernel on `stream` (a cudaStream_t; capturable) with params[i] pointing at argument i.
 * Errors name the stage and batch (batch < 0: while capturing). */
pl_status pl_umod_launch(const pl_umod *m, const unsigned grid[3], const unsigned block[3],
                         unsigned shared, void *stream, void **params, const char *stage,
                         int64_t batch, pl_error *err);
/* The current device's SM version (90 = sm_90). */
pl_status pl_umod_device_arch(int device, int *arch, pl_error *err);

#endif
