/* pl_gpu: what the GPU executor, the ops, `doctor` and `bench` share. cudaError_t and CUDA types
 * stay inside runtime/gpu/ and the .cu files under stages/: this header speaks in pl_status and
 * void pointers so C code elsewhere never includes CUDA headers. Built only with PL_WITH_CUDA. */
#ifndef PL_GPU_H
#define PL_GPU_H

#include <stdint.h>

#include "pl_spec.h"

/* Turns a CUDA runtime status (cudaError_t as int) into PL_ECUDA with a message that names the
 * call, the stage and the batch: "stage 'up', batch 7: cudaMemcpyAsync failed: an illegal memory
 * access was encountered (cudaErrorIllegalAddress)". stage may be NULL (setup), batch < 0 (no
 * batch). Returns PL_OK for cudaSuccess. */
pl_status pl_cuda_check(int cuda_status, const char *call, const char *stage, int64_t batch,
                        pl_error *err);
#define PL_CUDA(call, stage, batch, err) pl_cuda_check((int)(call), #call, (stage), (batch), (err))

/* Enqueues a copy of `bytes` on `stream` (cudaStream_t): to_device = pinned host -> device, else
 * device -> pinned host. Capturable. Errors name the call, the stage and the batch. */
pl_status pl_gpu_copy_async(void *dst, const void *src, uint64_t bytes, bool to_device,
                            void *stream, const char *stage, int64_t batch, pl_error *err);

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
