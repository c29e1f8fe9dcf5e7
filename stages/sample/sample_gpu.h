/* sample_gpu: the sample kind's launcher (stages/sample/sample_gpu.cu), callable from C. It
 * enqueues on `stream` (a cudaStream_t, last), never synchronizes, works inside stream capture
 * and returns a cudaError_t as int (0 = success). Built only with PL_WITH_CUDA. */
#ifndef PL_SAMPLE_GPU_H
#define PL_SAMPLE_GPU_H

#include <stdint.h>

#include "pl_sample.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One step of pl_sample_step on the device: logits [B, V] of ldtype (f16, bf16, f32), step (NULL:
 * column 0) and batch (NULL: 0; i64 when batch64, else i32) read on the device when the kernel
 * runs, so a captured graph replays it for any step and batch. tokens [B, N], finished [B]; next,
 * count and limits may be NULL. A block per sequence, then one block for the count. */
int pl_sample_gpu_launch(const pl_sample_params *p, int ldtype, const void *logits, int B, int V,
                         int N, const int32_t *step, const void *batch, int batch64,
                         const int32_t *limits, int32_t *tokens, int32_t *next, int32_t *finished,
                         int32_t *count, void *stream);

#ifdef __cplusplus
}
#endif

#endif
