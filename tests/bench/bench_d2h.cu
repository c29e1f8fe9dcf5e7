/* bench_d2h: what sets the pace of a large device-to-host download, and what slows it. gpt2.yaml's
 * 412 MB logits download per batch is its bound (docs/perf.md); its first batches ran 3-9%
 * slower while later batches' forwards ran beside them. This times one download of BYTES (default
 * gpt2.yaml's batch, 8 x 512 x 50257 f16) into pinned memory:
 *
 *   one       one cudaMemcpyAsync on one stream
 *   chunks4   four equal copies on one stream
 *   ce2, ce3  split in 2 or 3 parts on as many streams (copy engines) at once
 *   sm        a kernel storing into the mapped pinned buffer (zero copy), no copy engine
 *   ce+sm     half by a copy engine, half by the kernel, at once
 *   +hbm      one copy while a kernel streams HBM (read and write) on all SMs
 *   +store    one copy while a kernel only stores to HBM (as the LM head writes logits)
 *   +alu      one copy while a kernel runs FMAs on all SMs, no memory
 *   +gemm     one copy while cuBLAS runs f16 GEMMs (8192^3) back to back
 *   +fresh    one copy while a kernel stores once into 2 GB fresh from cudaMalloc, never written
 *   +fresh0   the same, the 2 GB zeroed by cudaMemset first (outside the timing)
 *   reg4k     one copy into anonymous memory in 4 KB pages (MADV_NOHUGEPAGE), cudaHostRegister'ed
 *   regthp    the same in transparent huge pages (MADV_HUGEPAGE; the line says how much of it
 *             the kernel gave as huge pages)
 *
 *   bench_d2h [BYTES] [REPS]
 *
 * prints a line per case: the best of REPS (default 5) in ms and GB/s (1e9 bytes), and the
 * ratio to `one`. Plain CUDA and cuBLAS calls, no pipectl code; exit 1 with the message of any
 * failed call. Needs about 30 GB of device memory with the default REPS (+fresh keeps a new 2 GB
 * buffer for every repetition until the program exits). */
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "bench_d2h: %s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,        \
                    cudaGetErrorString(e_));                                                       \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)
#define CHECK_BLAS(call)                                                                           \
    do {                                                                                           \
        cublasStatus_t s_ = (call);                                                                \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                         \
            fprintf(stderr, "bench_d2h: %s:%d: %s failed: status %d\n", __FILE__, __LINE__, #call, \
                    (int)s_);                                                                      \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* Zero copy: each thread stores 16-byte words of src into the mapped host buffer. */
__global__ void store_to_host(const int4 *__restrict__ src, int4 *dst, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dst[i] = src[i];
}

/* HBM traffic for `rounds` passes: copy a into b (read and write), or only store into b. */
__global__ void hbm_kernel(const int4 *__restrict__ a, int4 *b, size_t n, int rounds, int store)
{
    for (int r = 0; r < rounds; r++)
        for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
             i += (size_t)gridDim.x * blockDim.x)
            b[i] = store ? make_int4(r, (int)i, 0, 0) : a[i];
}

__global__ void alu_kernel(float *out, int iters)
{
    float x = threadIdx.x, y = 1.0001f;
    for (int i = 0; i < iters; i++) {
        x = fmaf(x, y, 0.5f);
        y = fmaf(y, x, -0.25f);
    }
    if (x == 12345.f) out[0] = y; /* never true: keeps the loop */
}

static int g_reps = 5;
static cudaStream_t g_s[3], g_bg;
static cudaEvent_t g_a, g_b;

static double elapsed(void)
{
    float ms = 0;
    CHECK(cudaEventSynchronize(g_b));
    CHECK(cudaEventElapsedTime(&ms, g_a, g_b));
    return ms;
}

/* Copies `bytes` from d to h in `parts` parts on `streams` streams (round robin); g_a is recorded
 * on stream 0 first and every stream waits for it, g_b after all have finished. */
static void copy_parts(char *h, const char *d, size_t bytes, int parts, int streams)
{
    CHECK(cudaEventRecord(g_a, g_s[0]));
    for (int k = 1; k < streams; k++)
        CHECK(cudaStreamWaitEvent(g_s[k], g_a, 0));
    size_t off = 0;
    for (int p = 0; p < parts; p++) {
        size_t n = bytes / parts + (p == parts - 1 ? bytes % parts : 0);
        CHECK(cudaMemcpyAsync(h + off, d + off, n, cudaMemcpyDeviceToHost, g_s[p % streams]));
        off += n;
    }
    cudaEvent_t done[3];
    for (int k = 1; k < streams; k++) {
        CHECK(cudaEventCreateWithFlags(&done[k], cudaEventDisableTiming));
        CHECK(cudaEventRecord(done[k], g_s[k]));
        CHECK(cudaStreamWaitEvent(g_s[0], done[k], 0));
    }
    CHECK(cudaEventRecord(g_b, g_s[0]));
    CHECK(cudaStreamSynchronize(g_s[0]));
    for (int k = 1; k < streams; k++)
        CHECK(cudaEventDestroy(done[k]));
}

/* kB of anonymous huge pages in this process (/proc/self/smaps_rollup), -1 if unreadable. */
static long anon_huge_kb(void)
{
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    if (!f) return -1;
    char line[256];
    long kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "AnonHugePages: %ld kB", &kb) == 1) break;
    fclose(f);
    return kb;
}

static void report(const char *name, double ms, size_t bytes, double one_ms)
{
    printf("  %-8s %8.3f ms  %6.2f GB/s  %5.3fx one\n", name, ms, bytes / (ms * 1e6),
           one_ms > 0 ? one_ms / ms : 1.0);
}

int main(int argc, char **argv)
{
    size_t bytes = argc > 1 ? strtoull(argv[1], NULL, 10) : (size_t)8 * 512 * 50257 * 2;
    if (argc > 2) g_reps = atoi(argv[2]);
    bytes &= ~(size_t)15;
    char *h, *d;
    CHECK(cudaHostAlloc((void **)&h, bytes, cudaHostAllocMapped));
    CHECK(cudaMalloc((void **)&d, bytes));
    CHECK(cudaMemset(d, 7, bytes));
    int sms = 0;
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    for (int k = 0; k < 3; k++)
        CHECK(cudaStreamCreateWithFlags(&g_s[k], cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&g_bg, cudaStreamNonBlocking));
    CHECK(cudaEventCreate(&g_a));
    CHECK(cudaEventCreate(&g_b));
    int4 *hd = NULL;
    CHECK(cudaHostGetDevicePointer((void **)&hd, h, 0));
    printf("bench_d2h: %zu bytes into pinned memory, best of %d\n", bytes, g_reps);

    double one = 1e30, t;
    struct {
        const char *name;
        int parts, streams;
    } cc[] = {{"one", 1, 1}, {"chunks4", 4, 1}, {"ce2", 2, 2}, {"ce3", 3, 3}};
    for (int c = 0; c < 4; c++) {
        double best = 1e30;
        for (int r = 0; r <= g_reps; r++) {
            copy_parts(h, d, bytes, cc[c].parts, cc[c].streams);
            t = elapsed();
            if (r > 0 && t < best) best = t;
        }
        if (c == 0) one = best;
        report(cc[c].name, best, bytes, one);
    }

    /* Zero copy alone, then half and half. */
    size_t n16 = bytes / 16;
    for (int half = 0; half < 2; half++) {
        double best = 1e30;
        for (int r = 0; r <= g_reps; r++) {
            size_t ce = half ? (bytes / 2) & ~(size_t)15 : 0;
            CHECK(cudaEventRecord(g_a, g_s[0]));
            CHECK(cudaStreamWaitEvent(g_s[1], g_a, 0));
            if (ce) CHECK(cudaMemcpyAsync(h, d, ce, cudaMemcpyDeviceToHost, g_s[1]));
            store_to_host<<<sms * 4, 256, 0, g_s[0]>>>((const int4 *)(d + ce), hd + ce / 16,
                                                       n16 - ce / 16);
            CHECK(cudaGetLastError());
            cudaEvent_t e;
            CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
            CHECK(cudaEventRecord(e, g_s[1]));
            CHECK(cudaStreamWaitEvent(g_s[0], e, 0));
            CHECK(cudaEventRecord(g_b, g_s[0]));
            t = elapsed();
            CHECK(cudaEventDestroy(e));
            if (r > 0 && t < best) best = t;
        }
        report(half ? "ce+sm" : "sm", best, bytes, one);
    }

    /* One copy beside a background load that outlasts it (about 3x the copy's time). */
    size_t hbm = (size_t)2 << 30;
    int4 *a, *b;
    CHECK(cudaMalloc((void **)&a, hbm));
    CHECK(cudaMalloc((void **)&b, hbm));
    CHECK(cudaMemset(a, 1, hbm));
    float *sink;
    CHECK(cudaMalloc((void **)&sink, 4));
    cublasHandle_t blas;
    CHECK_BLAS(cublasCreate(&blas));
    CHECK_BLAS(cublasSetStream(blas, g_bg));
    const int G = 8192;
    __half *ga = (__half *)a, *gb = (__half *)b, *gc = (__half *)a + (size_t)G * G;
    const float one_f = 1.f, zero_f = 0.f;
    const char *bgname[] = {"+hbm", "+store", "+alu", "+gemm"};
    for (int k = 0; k < 4; k++) {
        double best = 1e30;
        for (int r = 0; r <= g_reps; r++) {
            /* sized for roughly 20 ms on an H200: 2 GB copied at ~3 TB/s is ~1.4 ms a round */
            if (k == 0 || k == 1) hbm_kernel<<<sms * 4, 256, 0, g_bg>>>(a, b, hbm / 16, 14, k);
            if (k == 2) alu_kernel<<<sms * 8, 256, 0, g_bg>>>(sink, 1 << 18);
            if (k == 3)
                for (int g = 0; g < 16; g++)
                    CHECK_BLAS(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, G, G, G, &one_f, ga,
                                            CUDA_R_16F, G, gb, CUDA_R_16F, G, &zero_f, gc,
                                            CUDA_R_16F, G, CUBLAS_COMPUTE_32F,
                                            CUBLAS_GEMM_DEFAULT));
            CHECK(cudaGetLastError());
            copy_parts(h, d, bytes, 1, 1);
            t = elapsed();
            CHECK(cudaStreamSynchronize(g_bg));
            if (r > 0 && t < best) best = t;
        }
        report(bgname[k], best, bytes, one);
    }
    /* First writes into fresh allocations: a new 2 GB buffer every repetition, never freed, so no
     * pages come back from this process's earlier allocations. */
    for (int k = 0; k < 2; k++) {
        double best = 1e30, kern = 0;
        for (int r = 0; r <= g_reps; r++) {
            int4 *f;
            CHECK(cudaMalloc((void **)&f, hbm));
            if (k) CHECK(cudaMemset(f, 0, hbm));
            CHECK(cudaDeviceSynchronize());
            cudaEvent_t k0, k1;
            CHECK(cudaEventCreate(&k0));
            CHECK(cudaEventCreate(&k1));
            CHECK(cudaEventRecord(k0, g_bg));
            hbm_kernel<<<sms * 4, 256, 0, g_bg>>>(a, f, hbm / 16, 1, 1);
            CHECK(cudaGetLastError());
            CHECK(cudaEventRecord(k1, g_bg));
            copy_parts(h, d, bytes, 1, 1);
            t = elapsed();
            CHECK(cudaEventSynchronize(k1));
            float kms = 0;
            CHECK(cudaEventElapsedTime(&kms, k0, k1));
            CHECK(cudaEventDestroy(k0));
            CHECK(cudaEventDestroy(k1));
            if (r > 0 && t < best) {
                best = t;
                kern = kms;
            }
        }
        printf("  %-8s %8.3f ms  %6.2f GB/s  %5.3fx one  (the store kernel %.2f ms)\n",
               k ? "+fresh0" : "+fresh", best, bytes / (best * 1e6), one / best, kern);
    }
    /* Registered anonymous memory, 4 KB pages against transparent huge pages. */
    for (int k = 0; k < 2; k++) {
        size_t al = (size_t)2 << 20, n = (bytes + al - 1) / al * al;
        void *m = mmap(NULL, n + al, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) {
            printf("  %-8s mmap failed\n", k ? "regthp" : "reg4k");
            continue;
        }
        char *p = (char *)(((uintptr_t)m + al - 1) / al * al);
        long before = anon_huge_kb();
        madvise(p, n, k ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
        memset(p, 1, n);
        long huge = anon_huge_kb() - before;
        CHECK(cudaHostRegister(p, n, cudaHostRegisterDefault));
        double best = 1e30;
        for (int r = 0; r <= g_reps; r++) {
            copy_parts(p, d, bytes, 1, 1);
            t = elapsed();
            if (r > 0 && t < best) best = t;
        }
        printf("  %-8s %8.3f ms  %6.2f GB/s  %5.3fx one  (%ld of %zu kB in huge pages)\n",
               k ? "regthp" : "reg4k", best, bytes / (best * 1e6), one / best, huge, n >> 10);
        CHECK(cudaHostUnregister(p));
        munmap(m, n + al);
    }
    /* The background kernels' own time, to show they outlast the copy. */
    CHECK(cudaEventRecord(g_a, g_bg));
    hbm_kernel<<<sms * 4, 256, 0, g_bg>>>(a, b, hbm / 16, 14, 0);
    CHECK(cudaEventRecord(g_b, g_bg));
    printf("  (hbm kernel alone %.2f ms", elapsed());
    CHECK(cudaEventRecord(g_a, g_bg));
    alu_kernel<<<sms * 8, 256, 0, g_bg>>>(sink, 1 << 18);
    CHECK(cudaEventRecord(g_b, g_bg));
    printf(", alu kernel %.2f ms", elapsed());
    CHECK(cudaEventRecord(g_a, g_bg));
    for (int g = 0; g < 16; g++)
        CHECK_BLAS(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, G, G, G, &one_f, ga, CUDA_R_16F, G,
                                gb, CUDA_R_16F, G, &zero_f, gc, CUDA_R_16F, G, CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT));
    CHECK(cudaEventRecord(g_b, g_bg));
    printf(", 16 gemms %.2f ms)\n", elapsed());
    cublasDestroy(blas);
    return 0;
}
