/* pl_gpu_env: the GPU part of a bundle's environment, as JSON. */
#ifndef PL_GPU_ENV_H
#define PL_GPU_ENV_H

#include "pl_json.h"

/* Fills obj with device `device`'s properties: name, UUID, compute capability, SMs, clocks, copy
 * engines, driver, runtime, cuBLAS and NVRTC versions (runtime/device/pl_gpu_env.c). Without CUDA
 * in the build (runtime/record/pl_env.c), or when no device is usable: PL_ENODEV. */
pl_status pl_gpu_env_json(int device, json_t *obj, pl_error *err);

#endif
