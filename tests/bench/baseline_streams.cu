/* baseline_streams: the hand-written CUDA version of the balanced pipeline that `pipectl bench`
 * compares against: upload, a busy kernel, download, on three streams with events, N buffers in
 * rotation (batch i uses buffer i % N). No pipectl code: plain CUDA runtime calls.
 *
 *   bench_baseline BYTES BATCHES BUFFERS BUSY_US
 *
 * prints one line:
 *   baseline bytes=B batches=K buffers=N busy_us=U total_ms=T per_batch_us=P gbps=G
 * where T is the time from the first upload to the last download (after one warm-up round),
 * P = T / K and G = B * K / T (bytes of input per second, 1e9 bytes = 1 GB; each batch also
 * downloads B bytes). Exit 1 with the CUDA message on any error. */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "bench_baseline: %s:%d: %s failed: %s (%s)\n", __FILE__, __LINE__,     \
                    #call, cudaGetErrorString(e_), cudaGetErrorName(e_));                          \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* The same spin as pipectl's busy op: one warp, thread 0 watches %globaltimer. */
__global__ void busy_kernel(uint64_t ns)
{
    if (threadIdx.x != 0) return;
    uint64_t t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}

struct pipeline {
    size_t bytes;
    int nbuf;
    uint64_t busy_ns;
    cudaStream_t up, comp, down;
    void **h_in, **h_out, **d_buf;
    cudaEvent_t *uploaded, *computed, *downloaded;
};

/* Enqueues batches [first, first + count). Batch i on buffer s = i % N: its upload waits for the
 * download of batch i - N (same device buffer), the kernel for the upload, the download for the
 * kernel. Events are re-recorded per batch; a wait binds to the last record enqueued before it,
 * which is the right batch because everything is enqueued in batch order. */
static void enqueue(struct pipeline *p, long first, long count)
{
    for (long i = first; i < first + count; i++) {
        int s = (int)(i % p->nbuf);
        if (i >= p->nbuf) CHECK(cudaStreamWaitEvent(p->up, p->downloaded[s], 0));
        CHECK(cudaMemcpyAsync(p->d_buf[s], p->h_in[s], p->bytes, cudaMemcpyHostToDevice, p->up));
        CHECK(cudaEventRecord(p->uploaded[s], p->up));
        CHECK(cudaStreamWaitEvent(p->comp, p->uploaded[s], 0));
        busy_kernel<<<1, 32, 0, p->comp>>>(p->busy_ns);
        CHECK(cudaGetLastError());
        CHECK(cudaEventRecord(p->computed[s], p->comp));
        CHECK(cudaStreamWaitEvent(p->down, p->computed[s], 0));
        CHECK(cudaMemcpyAsync(p->h_out[s], p->d_buf[s], p->bytes, cudaMemcpyDeviceToHost, p->down));
        CHECK(cudaEventRecord(p->downloaded[s], p->down));
    }
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: bench_baseline BYTES BATCHES BUFFERS BUSY_US\n"
                        "  e.g. bench_baseline 67108864 32 3 1200\n");
        return 2;
    }
    char *end;
    unsigned long long bytes = strtoull(argv[1], &end, 10);
    long batches = strtol(argv[2], NULL, 10);
    int nbuf = (int)strtol(argv[3], NULL, 10);
    double busy_us = strtod(argv[4], NULL);
    if (bytes == 0 || *end || batches < 1 || nbuf < 1 || nbuf > 64 || busy_us < 0) {
        fprintf(stderr, "bench_baseline: need BYTES >= 1, BATCHES >= 1, 1 <= BUFFERS <= 64, "
                        "BUSY_US >= 0\n");
        return 2;
    }
    struct pipeline p;
    memset(&p, 0, sizeof p);
    p.bytes = (size_t)bytes;
    p.nbuf = nbuf;
    p.busy_ns = (uint64_t)(busy_us * 1000.0 + 0.5);
    CHECK(cudaStreamCreateWithFlags(&p.up, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&p.comp, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&p.down, cudaStreamNonBlocking));
    p.h_in = (void **)calloc(nbuf, sizeof(void *));
    p.h_out = (void **)calloc(nbuf, sizeof(void *));
    p.d_buf = (void **)calloc(nbuf, sizeof(void *));
    p.uploaded = (cudaEvent_t *)calloc(nbuf, sizeof(cudaEvent_t));
    p.computed = (cudaEvent_t *)calloc(nbuf, sizeof(cudaEvent_t));
    p.downloaded = (cudaEvent_t *)calloc(nbuf, sizeof(cudaEvent_t));
    if (!p.h_in || !p.h_out || !p.d_buf || !p.uploaded || !p.computed || !p.downloaded) {
        fprintf(stderr, "bench_baseline: out of host memory\n");
        return 1;
    }
    for (int s = 0; s < nbuf; s++) {
        CHECK(cudaHostAlloc(&p.h_in[s], p.bytes, cudaHostAllocDefault));
        CHECK(cudaHostAlloc(&p.h_out[s], p.bytes, cudaHostAllocDefault));
        CHECK(cudaMalloc(&p.d_buf[s], p.bytes));
        memset(p.h_in[s], 0x40 + s, p.bytes); /* touched, and not zeros */
        memset(p.h_out[s], 0x11, p.bytes);
        CHECK(cudaEventCreateWithFlags(&p.uploaded[s], cudaEventDisableTiming));
        CHECK(cudaEventCreateWithFlags(&p.computed[s], cudaEventDisableTiming));
        CHECK(cudaEventCreateWithFlags(&p.downloaded[s], cudaEventDisableTiming));
    }
    cudaEvent_t t0, t1;
    CHECK(cudaEventCreate(&t0));
    CHECK(cudaEventCreate(&t1));

    /* Warm-up round: one batch per buffer, then everything idle. */
    enqueue(&p, 0, nbuf);
    CHECK(cudaDeviceSynchronize());
    for (int s = 0; s < nbuf; s++)
        memset(p.h_out[s], 0x11, p.bytes);

    /* Timed run: t0 on the upload stream before the first upload, t1 on the download stream
     * after the last download (which, by the event chain, follows every other operation). */
    CHECK(cudaEventRecord(t0, p.up));
    enqueue(&p, 0, batches);
    CHECK(cudaEventRecord(t1, p.down));
    CHECK(cudaEventSynchronize(t1));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, t0, t1));

    /* The data made the round trip: the last batch's output equals its input. */
    int s_last = (int)((batches - 1) % nbuf);
    if (memcmp(p.h_in[s_last], p.h_out[s_last], p.bytes) != 0) {
        fprintf(stderr, "bench_baseline: output of batch %ld differs from its input\n",
                batches - 1);
        return 1;
    }
    printf("baseline bytes=%llu batches=%ld buffers=%d busy_us=%.1f total_ms=%.3f "
           "per_batch_us=%.2f gbps=%.3f\n",
           bytes, batches, nbuf, busy_us, ms, ms * 1e3 / batches,
           (double)bytes * batches / (ms * 1e-3) / 1e9);

    for (int s = 0; s < nbuf; s++) {
        cudaEventDestroy(p.downloaded[s]);
        cudaEventDestroy(p.computed[s]);
        cudaEventDestroy(p.uploaded[s]);
        cudaFree(p.d_buf[s]);
        cudaFreeHost(p.h_out[s]);
        cudaFreeHost(p.h_in[s]);
    }
    cudaEventDestroy(t1);
    cudaEventDestroy(t0);
    cudaStreamDestroy(p.down);
    cudaStreamDestroy(p.comp);
    cudaStreamDestroy(p.up);
    free(p.downloaded);
    free(p.computed);
    free(p.uploaded);
    free(p.d_buf);
    free(p.h_out);
    free(p.h_in);
    return 0;
}
