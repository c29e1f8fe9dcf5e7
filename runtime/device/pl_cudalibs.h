/* pl_cudalibs: cuBLAS, cuBLASLt and NVRTC loaded with dlopen on first use, not linked at build
 * time. Linked, they cost every process ~200 MB of RSS and ~60 ms at start-up (their relocations
 * and static constructors), even `pipectl version`; loaded lazily, only a run that multiplies on
 * the GPU or compiles a user kernel pays. pl_cudalibs.c defines, under the libraries' own names
 * (hidden, so the loaded libraries never bind to them), each function pipectl calls: the call
 * sites stay as they were, and a function whose library cannot be loaded returns that library's
 * failure status (CUBLAS_STATUS_NOT_INITIALIZED, NVRTC_ERROR_INTERNAL_ERROR) and its error-string
 * functions return the load error. */
#ifndef PL_CUDALIBS_H
#define PL_CUDALIBS_H

#include "pl_status.h"

typedef enum pl_cudalib {
    PL_CUDALIB_CUBLAS,
    PL_CUDALIB_CUBLASLT,
    PL_CUDALIB_NVRTC,
    PL_CUDALIB_COUNT
} pl_cudalib;

/* Loads `lib` once (pthread_once; safe from any thread). PL_OK when it is loaded and every
 * function pipectl uses resolved; otherwise PL_ECUDA with "cannot load libcublas.so.13: <why>; is
 * the CUDA toolkit's lib64 on the library path?" (the same message every time). */
pl_status pl_cudalib_load(pl_cudalib lib, pl_error *err);

/* The load error of `lib` (static storage), or NULL once it is loaded. Loads it if needed. */
const char *pl_cudalib_error(pl_cudalib lib);

#endif
