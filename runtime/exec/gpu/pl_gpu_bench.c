/* pl_gpu_bench: the raw measurements `pipectl bench` sets the bound with: pinned copies each way
 * and both at once, and the busy kernel alone. */
#include <cuda_runtime_api.h>
#include <stdlib.h>

#include "ops_gpu.h"
#include "pl_exec_gpu_int.h"
#include "pl_gpu.h"

static double pl__ms_between(cudaEvent_t a, cudaEvent_t b)
{
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    return (double)ms * 1e6;
}

pl_status pl_gpu_measure_copies(int device, uint64_t bytes, int reps, pl_gpu_copy_times *out,
                                pl_error *err)
{
    void *h_in = NULL, *h_out = NULL, *d_in = NULL, *d_out = NULL;
    cudaStream_t up = NULL, down = NULL;
    cudaEvent_t e[6] = {0};
    pl_status st = PL_OK;
    out->h2d_ns = out->d2h_ns = out->both_ns = 1e300;
    PL_CHECK_GOTO(PL_CUDA(cudaSetDevice(device), NULL, -1, err), st, done);
    PL_CHECK_GOTO(PL_CUDA(cudaHostAlloc(&h_in, bytes, cudaHostAllocDefault), NULL, -1, err), st,
                  done);
    PL_CHECK_GOTO(PL_CUDA(cudaHostAlloc(&h_out, bytes, cudaHostAllocDefault), NULL, -1, err), st,
                  done);
    PL_CHECK_GOTO(PL_CUDA(cudaMalloc(&d_in, bytes), NULL, -1, err), st, done);
    PL_CHECK_GOTO(PL_CUDA(cudaMalloc(&d_out, bytes), NULL, -1, err), st, done);
    PL_CHECK_GOTO(PL_CUDA(cudaStreamCreateWithFlags(&up, cudaStreamNonBlocking), NULL, -1, err), st,
                  done);
    PL_CHECK_GOTO(PL_CUDA(cudaStreamCreateWithFlags(&down, cudaStreamNonBlocking), NULL, -1, err),
                  st, done);
    for (int i = 0; i < 6; i++)
        PL_CHECK_GOTO(PL_CUDA(cudaEventCreate(&e[i]), NULL, -1, err), st, done);
    /* Never time zeros or untouched pages: fill the source once. */
    for (uint64_t i = 0; i < bytes; i++)
        ((unsigned char *)h_in)[i] = (unsigned char)(i * 131 + 7);
    PL_CHECK_GOTO(PL_CUDA(cudaMemcpy(d_out, h_in, bytes, cudaMemcpyHostToDevice), NULL, -1, err),
                  st, done);
    for (int r = 0; r <= reps; r++) { /* round 0 warms up */
        PL_CHECK_GOTO(PL_CUDA(cudaEventRecord(e[0], up), NULL, -1, err), st, done);
        PL_CHECK_GOTO(
            PL_CUDA(cudaMemcpyAsync(d_in, h_in, bytes, cudaMemcpyHostToDevice, up), NULL, -1, err),
            st, done);
        PL_CHECK_GOTO(PL_CUDA(cudaEventRecord(e[1], up), NULL, -1, err), st, done);
        PL_CHECK_GOTO(PL_CUDA(cudaMemcpyAsync(h_out, d_out, bytes, cudaMemcpyDeviceToHost, up),
                              NULL, -1, err),
                      st, done);
        PL_CHECK_GOTO(PL_CUDA(cudaEventRecord(e[2], up), NULL, -1, err), st, done);
        /* Both at once: start together (down waits for e[2]), finish when both have. */
        PL_CHECK_GOTO(PL_CUDA(cudaStreamWaitEvent(down, e[2], 0), NULL, -1, err), st, done);
        PL_CHECK_GOTO(
            PL_CUDA(cudaMemcpyAsync(d_in, h_in, bytes, cudaMemcpyHostToDevice, up), NULL, -1, err),
            st, done);
        PL_CHECK_GOTO(PL_CUDA(cudaMemcpyAsync(h_out, d_out, bytes, cudaMemcpyDeviceToHost, down),
                              NULL, -1, err),
                      st, done);
        PL_CHECK_GOTO(PL_CUDA(cudaEventRecord(e[3], down), NULL, -1, err), st, done);
        PL_CHECK_GOTO(PL_CUDA(cudaStreamWaitEvent(up, e[3], 0), NULL, -1, err), st, done);
        PL_CHECK_GOTO(PL_CUDA(cudaEventRecord(e[4], up), NULL, -1, err), st, done);
        PL_CHECK_GOTO(PL_CUDA(cudaEventSynchronize(e[4]), NULL, -1, err), st, done);
        if (r == 0) continue;
        double a = pl__ms_between(e[0], e[1]), b = pl__ms_between(e[1], e[2]),
               c = pl__ms_between(e[2], e[4]);
        if (a < out->h2d_ns) out->h2d_ns = a;
        if (b < out->d2h_ns) out->d2h_ns = b;
        if (c < out->both_ns) out->both_ns = c;
    }
done:
    for (int i = 0; i < 6; i++)
        if (e[i]) cudaEventDestroy(e[i]);
    if (up) cudaStreamDestroy(up);
    if (down) cudaStreamDestroy(down);
    cudaFree(d_in);
    cudaFree(d_out);
    cudaFreeHost(h_in);
    cudaFreeHost(h_out);
    return st;
}

pl_status pl_gpu_measure_busy(int device, double us, int reps, double *ns, pl_error *err)
{
    cudaStream_t s = NULL;
    cudaEvent_t a = NULL, b = NULL;
    pl_status st = PL_OK;
    *ns = 1e300;
    PL_CHECK_GOTO(PL_CUDA(cudaSetDevice(device), NULL, -1, err), st, done);
    PL_CHECK_GOTO(PL_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), NULL, -1, err), st,
                  done);
    PL_CHECK_GOTO(PL_CUDA(cudaEventCreate(&a), NULL, -1, err), st, done);
    PL_CHECK_GOTO(PL_CUDA(cudaEventCreate(&b), NULL, -1, err), st, done);
    for (int r = 0; r <= reps; r++) {
        PL_CHECK_GOTO(PL_CUDA(cudaEventRecord(a, s), NULL, -1, err), st, done);
        PL_CHECK_GOTO(PL_CUDA(pl_gpu_launch_busy(us, s), NULL, -1, err), st, done);
        PL_CHECK_GOTO(PL_CUDA(cudaEventRecord(b, s), NULL, -1, err), st, done);
        PL_CHECK_GOTO(PL_CUDA(cudaEventSynchronize(b), NULL, -1, err), st, done);
        double t = pl__ms_between(a, b);
        if (r > 0 && t < *ns) *ns = t;
    }
done:
    if (a) cudaEventDestroy(a);
    if (b) cudaEventDestroy(b);
    if (s) cudaStreamDestroy(s);
    return st;
}
