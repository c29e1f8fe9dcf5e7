/* pl_env: what a bundle records about where a run happened: pipectl (version, commit, build
 * options), the host (CPU model and threads, OS), the libraries (libyaml, Lua, jansson,
 * libcrypto), the PIPECTL_* settings in the environment, and the GPU (runtime/device/pl_gpu_env.c:
 * name, UUID, compute capability, SMs, clocks, copy engines, driver, runtime, cuBLAS, NVRTC). */
#ifndef PL_ENV_H
#define PL_ENV_H

#include <stdbool.h>

#include "pl_json.h"

/* A new object describing this process's environment. With gpu true, "gpu" describes CUDA device
 * `device` (or is null with "gpu_note" saying why: no CUDA in this build, no device). */
pl_status pl_env_json(bool gpu, int device, json_t **out, pl_error *err);

#endif
