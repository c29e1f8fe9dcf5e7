/* ops_gpu: the launchers of the GPU kernel ops (stages/kernel/ops_gpu.cu), callable from C. Each
 * enqueues its kernels on `stream` (a cudaStream_t; the stream is always last), never synchronizes,
 * works inside stream capture, and returns a cudaError_t as int (0 = cudaSuccess) for the C caller
 * (stages/kernel/kernel_gpu.c) to name the stage and batch. `dtype` is a pl_dtype. Element counts
 * are int64_t. Built only with PL_WITH_CUDA. */
#ifndef PL_OPS_GPU_H
#define PL_OPS_GPU_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Blocks per launch for grid-stride kernels: enough to fill every SM several times over. */
int pl_gpu_grid_for(int64_t items, int block, int sms);

/* y[i] = value converted to dtype, for i < n. */
int pl_gpu_launch_fill(int dtype, void *y, int64_t n, double value, int sms, void *stream);
/* y[i] = alpha * x[i]. x and y may alias. */
int pl_gpu_launch_scale(int dtype, void *y, const void *x, int64_t n, double alpha, int sms,
                        void *stream);
/* z[i] = alpha * x[i] + y[i]. */
int pl_gpu_launch_saxpy(int dtype, void *z, const void *x, const void *y, int64_t n, double alpha,
                        int sms, void *stream);
/* z[i] = x[i] + y[i]. */
int pl_gpu_launch_add(int dtype, void *z, const void *x, const void *y, int64_t n, int sms,
                      void *stream);

/* Blocks the sum uses, hence the doubles of scratch it needs: a function of n and sms only, so
 * the reduction order (and the result) is the same on every run. */
int pl_gpu_sum_blocks(int64_t n, int sms);
/* out[0] = sum of x[0..n) accumulated in f64 (out_dtype f32 or f64): each block sums a grid-stride
 * share, partials[b] holds block b's sum, and one block adds the partials in index order.
 * `partials` holds pl_gpu_sum_blocks(n, sms) doubles. Deterministic, not the host's order. */
int pl_gpu_launch_sum(int in_dtype, const void *x, int64_t n, int out_dtype, void *out,
                      double *partials, int sms, void *stream);
/* out[0] = pl_hash of the nbytes bytes at x (runtime/base/pl_hash.h), computed with 64-bit
 * atomicAdd: bit-identical to the host. `out` must be 8-byte aligned. */
int pl_gpu_launch_checksum(const void *x, uint64_t nbytes, uint64_t *out, int sms, void *stream);
/* y[r] = index of the largest x[r, c] over c < cols, the first one on ties (see pl_ops.h). */
int pl_gpu_launch_argmax(int dtype, const void *x, int64_t rows, int64_t cols, int32_t *y, int sms,
                         void *stream);
/* One block of 32 threads spins until %globaltimer has advanced by duration_us. */
int pl_gpu_launch_busy(double duration_us, void *stream);
/* An empty kernel <<<1, 1>>>: `doctor` measures launch and graph-node cost with it. */
int pl_gpu_launch_nop(void *stream);
/* Which image of this file's kernels the current device runs (cudaFuncGetAttributes on the empty
 * kernel): binary (SASS) and PTX versions as 10 * major + minor. Returns the cudaError_t, e.g.
 * cudaErrorNoKernelImageForDevice when the build has no image for it. */
int pl_gpu_kernel_image(int *binary_version, int *ptx_version);

#ifdef __cplusplus
}
#endif

#endif
