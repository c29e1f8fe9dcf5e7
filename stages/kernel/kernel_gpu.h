/* kernel_gpu: the kernel kind's GPU side (kernel_gpu.c): the per-device state its ops need and the
 * call that enqueues one op. Built only with PL_WITH_CUDA. */
#ifndef PL_KERNEL_GPU_H
#define PL_KERNEL_GPU_H

#include "pl_gpu.h"

/* Per-device state the ops need: cuBLAS handle with a preallocated workspace (so gemm can be
 * captured into a graph), the busy kernel's calibration. Created once per run. */
typedef struct pl_gpu_ctx pl_gpu_ctx;
pl_status pl_gpu_ctx_new(int device, pl_gpu_ctx **out, pl_error *err);
void pl_gpu_ctx_free(pl_gpu_ctx *ctx);

/* Enqueues kernel stage `st` (its op from stage->priv, a pl_kernel_opts) on `stream` (a
 * cudaStream_t), with dev_bufs[i] the device address of buffer i for this slot. Works inside stream
 * capture. Errors name the stage and batch. */
pl_status pl_gpu_op_record(pl_gpu_ctx *ctx, const pl_spec *spec, const pl_stage *st,
                           void *const *dev_bufs, void *stream, int64_t batch, pl_error *err);

#endif
