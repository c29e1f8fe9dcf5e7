/* pl_doctor: the device report and quick measurements behind `pipectl doctor`. */
#include "pl_doctor.h"

#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "ops_gpu.h"
#include "pl_gpu.h"

#define PL__COPY_BYTES ((size_t)256 << 20)
#define PL__COPY_REPS 5
#define PL__LAUNCHES 10000
#define PL__GRAPH_NODES 1000
#define PL__GRAPH_REPS 20

typedef struct pl__doctor {
    cudaStream_t s1, s2;
    cudaEvent_t e0, e1, e2;
    void *h_a, *h_b; /* pinned */
    void *pageable;
    void *d_a, *d_b;
    cudaGraph_t graph;
    cudaGraphExec_t exec;
} pl__doctor;

static pl_status pl__elapsed(pl__doctor *d, cudaEvent_t from, cudaEvent_t to, double *ms,
                             pl_error *err)
{
    float f = 0;
    PL_CHECK(PL_CUDA(cudaEventSynchronize(to), NULL, -1, err));
    PL_CHECK(PL_CUDA(cudaEventElapsedTime(&f, from, to), NULL, -1, err));
    *ms = f;
    return PL_OK;
}

/* Best (shortest) time of `reps` copies of `bytes` on stream s1. */
static pl_status pl__time_copy(pl__doctor *d, void *dst, const void *src, size_t bytes,
                               enum cudaMemcpyKind kind, int reps, double *best_ms, pl_error *err)
{
    *best_ms = 1e30;
    for (int r = 0; r < reps; r++) {
        double ms;
        PL_CHECK(PL_CUDA(cudaEventRecord(d->e0, d->s1), NULL, -1, err));
        PL_CHECK(PL_CUDA(cudaMemcpyAsync(dst, src, bytes, kind, d->s1), NULL, -1, err));
        PL_CHECK(PL_CUDA(cudaEventRecord(d->e1, d->s1), NULL, -1, err));
        PL_CHECK(pl__elapsed(d, d->e0, d->e1, &ms, err));
        if (ms < *best_ms) *best_ms = ms;
    }
    return PL_OK;
}

/* H2D on s1 and D2H on s2, started together; the time until both are done. */
static pl_status pl__time_both(pl__doctor *d, size_t bytes, int reps, double *best_ms,
                               pl_error *err)
{
    *best_ms = 1e30;
    for (int r = 0; r < reps; r++) {
        double ms1, ms2;
        PL_CHECK(PL_CUDA(cudaEventRecord(d->e0, d->s1), NULL, -1, err));
        PL_CHECK(PL_CUDA(cudaStreamWaitEvent(d->s2, d->e0, 0), NULL, -1, err));
        PL_CHECK(PL_CUDA(cudaMemcpyAsync(d->d_a, d->h_a, bytes, cudaMemcpyHostToDevice, d->s1),
                         NULL, -1, err));
        PL_CHECK(PL_CUDA(cudaMemcpyAsync(d->h_b, d->d_b, bytes, cudaMemcpyDeviceToHost, d->s2),
                         NULL, -1, err));
        PL_CHECK(PL_CUDA(cudaEventRecord(d->e1, d->s1), NULL, -1, err));
        PL_CHECK(PL_CUDA(cudaEventRecord(d->e2, d->s2), NULL, -1, err));
        PL_CHECK(pl__elapsed(d, d->e0, d->e1, &ms1, err));
        PL_CHECK(pl__elapsed(d, d->e0, d->e2, &ms2, err));
        double ms = ms1 > ms2 ? ms1 : ms2;
        if (ms < *best_ms) *best_ms = ms;
    }
    return PL_OK;
}

static pl_status pl__launch_nop(cudaStream_t s, pl_error *err)
{
    return pl_cuda_check(pl_gpu_launch_nop(s), "empty kernel launch", NULL, -1, err);
}

/* Back-to-back launches of an empty kernel: the time per launch (launch throughput). */
static pl_status pl__time_launches(pl__doctor *d, double *us, pl_error *err)
{
    double ms;
    for (int i = 0; i < 100; i++)
        PL_CHECK(pl__launch_nop(d->s1, err)); /* warm up */
    PL_CHECK(PL_CUDA(cudaEventRecord(d->e0, d->s1), NULL, -1, err));
    for (int i = 0; i < PL__LAUNCHES; i++)
        PL_CHECK(pl__launch_nop(d->s1, err));
    PL_CHECK(PL_CUDA(cudaEventRecord(d->e1, d->s1), NULL, -1, err));
    PL_CHECK(pl__elapsed(d, d->e0, d->e1, &ms, err));
    *us = ms * 1e3 / PL__LAUNCHES;
    return PL_OK;
}

/* A graph of PL__GRAPH_NODES empty kernels in a chain, replayed: the time per node. */
static pl_status pl__time_graph(pl__doctor *d, double *us, pl_error *err)
{
    double ms;
    PL_CHECK(
        PL_CUDA(cudaStreamBeginCapture(d->s1, cudaStreamCaptureModeThreadLocal), NULL, -1, err));
    pl_status st = PL_OK;
    for (int i = 0; i < PL__GRAPH_NODES && st == PL_OK; i++)
        st = pl__launch_nop(d->s1, err);
    cudaError_t e = cudaStreamEndCapture(d->s1, &d->graph);
    PL_CHECK(st);
    PL_CHECK(PL_CUDA(e, NULL, -1, err));
    PL_CHECK(PL_CUDA(cudaGraphInstantiate(&d->exec, d->graph, 0), NULL, -1, err));
    PL_CHECK(PL_CUDA(cudaGraphUpload(d->exec, d->s1), NULL, -1, err));
    PL_CHECK(PL_CUDA(cudaGraphLaunch(d->exec, d->s1), NULL, -1, err)); /* warm up */
    PL_CHECK(PL_CUDA(cudaEventRecord(d->e0, d->s1), NULL, -1, err));
    for (int i = 0; i < PL__GRAPH_REPS; i++)
        PL_CHECK(PL_CUDA(cudaGraphLaunch(d->exec, d->s1), NULL, -1, err));
    PL_CHECK(PL_CUDA(cudaEventRecord(d->e1, d->s1), NULL, -1, err));
    PL_CHECK(pl__elapsed(d, d->e0, d->e1, &ms, err));
    *us = ms * 1e3 / ((double)PL__GRAPH_REPS * PL__GRAPH_NODES);
    return PL_OK;
}

/* The busy kernel asked for `want_us`, timed with events: smallest and largest of 5 single
 * launches (launch latency included), and the mean of 20 queued back to back (launch hidden). */
static pl_status pl__time_busy(pl__doctor *d, double want_us, double *lo, double *hi,
                               double *queued, pl_error *err)
{
    double total;
    PL_CHECK(PL_CUDA(cudaEventRecord(d->e0, d->s1), NULL, -1, err));
    for (int r = 0; r < 20; r++)
        PL_CHECK(
            pl_cuda_check(pl_gpu_launch_busy(want_us, d->s1), "busy kernel launch", NULL, -1, err));
    PL_CHECK(PL_CUDA(cudaEventRecord(d->e1, d->s1), NULL, -1, err));
    PL_CHECK(pl__elapsed(d, d->e0, d->e1, &total, err));
    *queued = total * 1e3 / 20;
    *lo = 1e30;
    *hi = 0;
    PL_CHECK(pl_cuda_check(pl_gpu_launch_busy(want_us, d->s1), "busy kernel launch", NULL, -1,
                           err)); /* warm up */
    for (int r = 0; r < 5; r++) {
        double ms;
        PL_CHECK(PL_CUDA(cudaEventRecord(d->e0, d->s1), NULL, -1, err));
        PL_CHECK(
            pl_cuda_check(pl_gpu_launch_busy(want_us, d->s1), "busy kernel launch", NULL, -1, err));
        PL_CHECK(PL_CUDA(cudaEventRecord(d->e1, d->s1), NULL, -1, err));
        PL_CHECK(pl__elapsed(d, d->e0, d->e1, &ms, err));
        if (ms * 1e3 < *lo) *lo = ms * 1e3;
        if (ms * 1e3 > *hi) *hi = ms * 1e3;
    }
    return PL_OK;
}

static int pl__attr(enum cudaDeviceAttr a, int dev)
{
    int v = 0;
    if (cudaDeviceGetAttribute(&v, a, dev) != cudaSuccess) v = -1;
    return v;
}

#ifndef PL_CUDA_ARCHS
#define PL_CUDA_ARCHS "?"
#endif

/* Whether CMAKE_CUDA_ARCHITECTURES (PL_CUDA_ARCHS, ',' for ';': "80-real,86-real,89-real,90")
 * holds SASS for
 * sm_`v`: "N" and "N-real" do, "N-virtual" is PTX only. "native" or "all": unknown (-1). */
static int pl__built_sass(int v)
{
    const char *p = PL_CUDA_ARCHS;
    bool parsed = false;
    while (*p) {
        char *end;
        long n = strtol(p, &end, 10);
        if (end == p) return parsed ? 0 : -1;
        parsed = true;
        if (n == v && strncmp(end, "-virtual", 8) != 0) return 1;
        p = end + strcspn(end, ",");
        if (*p == ',') p++;
    }
    return 0;
}

/* The kernel image this device runs, from cudaFuncGetAttributes on one of our kernels (the
 * driver's own choice, not a guess from the compute capability). *ok is false when there is none:
 * every kernel launch would fail with "no kernel image is available". */
static void pl__image(int dev, const struct cudaDeviceProp *p, FILE *out, bool *ok)
{
    int bin = 0, ptx = 0, cc = p->major * 10 + p->minor;
    int e = cudaSetDevice(dev) == cudaSuccess ? pl_gpu_kernel_image(&bin, &ptx) : -1;
    *ok = e == 0;
    if (e != 0) {
        fprintf(out,
                "  kernel image           NONE for sm_%d: this pipectl was built for %s; rebuild "
                "with\n                         -DCMAKE_CUDA_ARCHITECTURES=%d (or native) (%s)\n",
                cc, PL_CUDA_ARCHS, cc,
                e > 0 ? cudaGetErrorName((cudaError_t)e) : "cudaSetDevice failed");
        return;
    }
    int sass = pl__built_sass(bin);
    if (sass == 1)
        fprintf(out, "  kernel image           sm_%d SASS (built for %s)\n", bin, PL_CUDA_ARCHS);
    else if (sass == 0)
        fprintf(out,
                "  kernel image           JIT-compiled from compute_%d PTX for sm_%d (first use "
                "compiles;\n                         built for %s: add %d for SASS)\n",
                ptx, cc, PL_CUDA_ARCHS, cc);
    else
        fprintf(out, "  kernel image           binary sm_%d, PTX compute_%d (built for %s)\n", bin,
                ptx, PL_CUDA_ARCHS);
}

static pl_status pl__describe(int dev, FILE *out, bool *image_ok, pl_error *err)
{
    struct cudaDeviceProp p;
    PL_CHECK(PL_CUDA(cudaGetDeviceProperties(&p, dev), NULL, -1, err));
    fprintf(out, "device %d: %s\n", dev, p.name);
    fprintf(out, "  compute capability     %d.%d\n", p.major, p.minor);
    fprintf(out, "  multiprocessors (SMs)  %d\n", p.multiProcessorCount);
    fprintf(out, "  memory                 %.1f GiB, bus %d bits, L2 %.0f MiB\n",
            (double)p.totalGlobalMem / (1u << 30), pl__attr(cudaDevAttrGlobalMemoryBusWidth, dev),
            pl__attr(cudaDevAttrL2CacheSize, dev) / 1048576.0);
    fprintf(out, "  SM clock (peak)        %d MHz\n", pl__attr(cudaDevAttrClockRate, dev) / 1000);
    fprintf(out, "  async copy engines     %d\n", pl__attr(cudaDevAttrAsyncEngineCount, dev));
    fprintf(out, "  concurrent kernels     %s\n",
            pl__attr(cudaDevAttrConcurrentKernels, dev) > 0 ? "yes" : "no");
    fprintf(out, "  map host memory        %s\n",
            pl__attr(cudaDevAttrCanMapHostMemory, dev) > 0 ? "yes" : "no");
    fprintf(out, "  register host memory   %s\n",
            pl__attr(cudaDevAttrHostRegisterSupported, dev) > 0 ? "yes" : "no");
    fprintf(out, "  pageable access        %s\n",
            pl__attr(cudaDevAttrPageableMemoryAccess, dev) > 0 ? "yes (coherent)" : "no");
    fprintf(out, "  PCI bus                %04x:%02x:%02x\n", p.pciDomainID, p.pciBusID,
            p.pciDeviceID);
    pl__image(dev, &p, out, image_ok);
    if (!*image_ok)
        pl_error_set(err, PL_ENODEV,
                     "device %d (%s, compute capability %d.%d) has no kernel image in this "
                     "pipectl (built for CUDA architectures %s): rebuild with "
                     "-DCMAKE_CUDA_ARCHITECTURES=%d%d or =native",
                     dev, p.name, p.major, p.minor, PL_CUDA_ARCHS, p.major, p.minor);
    return PL_OK;
}

static double pl__gbps(size_t bytes, double ms)
{
    return ms > 0 ? (double)bytes / (ms * 1e-3) / 1e9 : 0;
}

pl_status pl_doctor_run(int device, FILE *out, pl_error *err)
{
    pl_status st = PL_OK;
    pl__doctor d;
    memset(&d, 0, sizeof d);
    int n = 0, drv = 0, rt = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0)
        return pl_error_set(err, PL_ENODEV, "no usable CUDA device: %s (%s)",
                            e != cudaSuccess ? cudaGetErrorString(e) : "no device found",
                            e != cudaSuccess ? cudaGetErrorName(e) : "count 0");
    if (device < 0 || device >= n)
        return pl_error_set(err, PL_EINPUT,
                            "device %d does not exist; this machine has devices 0..%d", device,
                            n - 1);
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    fprintf(out, "CUDA driver %d.%d, runtime %d.%d, %d device(s)\n", drv / 1000, drv % 1000 / 10,
            rt / 1000, rt % 1000 / 10, n);
    pl_error image_err = {0};
    bool image_ok = true;
    for (int i = 0; i < n; i++) {
        bool ok;
        pl_error other = {0}; /* another device without an image: said, not an error here */
        PL_CHECK(pl__describe(i, out, &ok, i == device ? &image_err : &other));
        if (i == device) image_ok = ok;
    }
    fflush(out);
    /* Nothing to measure with kernels that cannot run: say why, exit 1. */
    if (!image_ok) {
        *err = image_err;
        return err->status;
    }

    size_t bytes = PL__COPY_BYTES;
    double h2d, d2h, both, pageable, launch_us, node_us, busy[3][3];
    static const double busy_want[3] = {10, 100, 1000};
    PL_CHECK_GOTO(PL_CUDA(cudaSetDevice(device), NULL, -1, err), st, done);
    PL_CHECK_GOTO(PL_CUDA(cudaStreamCreateWithFlags(&d.s1, cudaStreamNonBlocking), NULL, -1, err),
                  st, done);
    PL_CHECK_GOTO(PL_CUDA(cudaStreamCreateWithFlags(&d.s2, cudaStreamNonBlocking), NULL, -1, err),
                  st, done);
    PL_CHECK_GOTO(PL_CUDA(cudaEventCreate(&d.e0), NULL, -1, err), st, done);
    PL_CHECK_GOTO(PL_CUDA(cudaEventCreate(&d.e1), NULL, -1, err), st, done);
    PL_CHECK_GOTO(PL_CUDA(cudaEventCreate(&d.e2), NULL, -1, err), st, done);
    PL_CHECK_GOTO(PL_CUDA(cudaHostAlloc(&d.h_a, bytes, cudaHostAllocDefault), NULL, -1, err), st,
                  done);
    PL_CHECK_GOTO(PL_CUDA(cudaHostAlloc(&d.h_b, bytes, cudaHostAllocDefault), NULL, -1, err), st,
                  done);
    PL_CHECK_GOTO(PL_CUDA(cudaMalloc(&d.d_a, bytes), NULL, -1, err), st, done);
    PL_CHECK_GOTO(PL_CUDA(cudaMalloc(&d.d_b, bytes), NULL, -1, err), st, done);
    d.pageable = malloc(bytes);
    if (!d.pageable) {
        st = pl_error_set(err, PL_ENOMEM, "cannot allocate %zu bytes of host memory", bytes);
        goto done;
    }
    /* Touch every page (and never copy zeros: nothing here may be faster on untouched memory). */
    memset(d.h_a, 0x5a, bytes);
    memset(d.h_b, 0xa5, bytes);
    memset(d.pageable, 0x3c, bytes);
    PL_CHECK_GOTO(PL_CUDA(cudaMemcpy(d.d_b, d.h_b, bytes, cudaMemcpyHostToDevice), NULL, -1, err),
                  st, done);

    PL_CHECK_GOTO(
        pl__time_copy(&d, d.d_a, d.h_a, bytes, cudaMemcpyHostToDevice, PL__COPY_REPS, &h2d, err),
        st, done);
    PL_CHECK_GOTO(
        pl__time_copy(&d, d.h_b, d.d_b, bytes, cudaMemcpyDeviceToHost, PL__COPY_REPS, &d2h, err),
        st, done);
    PL_CHECK_GOTO(pl__time_both(&d, bytes, PL__COPY_REPS, &both, err), st, done);
    PL_CHECK_GOTO(
        pl__time_copy(&d, d.d_a, d.pageable, bytes, cudaMemcpyHostToDevice, 3, &pageable, err), st,
        done);
    PL_CHECK_GOTO(pl__time_launches(&d, &launch_us, err), st, done);
    PL_CHECK_GOTO(pl__time_graph(&d, &node_us, err), st, done);
    for (int i = 0; i < 3; i++)
        PL_CHECK_GOTO(pl__time_busy(&d, busy_want[i], &busy[i][0], &busy[i][1], &busy[i][2], err),
                      st, done);

    fprintf(out, "\nmeasurements on device %d (copies: %zu MiB, best of %d)\n", device, bytes >> 20,
            PL__COPY_REPS);
    fprintf(out, "  %-40s %12s\n", "what", "result");
    fprintf(out, "  %-40s %9.1f GB/s  (%.2f ms)\n", "pinned H2D", pl__gbps(bytes, h2d), h2d);
    fprintf(out, "  %-40s %9.1f GB/s  (%.2f ms)\n", "pinned D2H", pl__gbps(bytes, d2h), d2h);
    fprintf(out, "  %-40s %9.1f GB/s  (%.2f ms, both directions summed)\n",
            "pinned H2D + D2H at once", pl__gbps(2 * bytes, both), both);
    fprintf(out, "  %-40s %9.1f GB/s  (%.2f ms, best of 3)\n", "pageable H2D",
            pl__gbps(bytes, pageable), pageable);
    fprintf(out, "  %-40s %9.2f us\n", "kernel launch (empty, 10000 back to back)", launch_us);
    fprintf(out, "  %-40s %9.2f us\n", "graph node (1000 empty kernels, replayed)", node_us);
    for (int i = 0; i < 3; i++) {
        char what[64];
        snprintf(what, sizeof what, "busy kernel asked %.0f us, took", busy_want[i]);
        fprintf(out, "  %-40s %9.1f us  (20 queued; one launch alone %.1f..%.1f)\n", what,
                busy[i][2], busy[i][0], busy[i][1]);
    }
done:
    if (d.exec) cudaGraphExecDestroy(d.exec);
    if (d.graph) cudaGraphDestroy(d.graph);
    free(d.pageable);
    cudaFree(d.d_b);
    cudaFree(d.d_a);
    cudaFreeHost(d.h_b);
    cudaFreeHost(d.h_a);
    if (d.e2) cudaEventDestroy(d.e2);
    if (d.e1) cudaEventDestroy(d.e1);
    if (d.e0) cudaEventDestroy(d.e0);
    if (d.s2) cudaStreamDestroy(d.s2);
    if (d.s1) cudaStreamDestroy(d.s1);
    return st;
}
