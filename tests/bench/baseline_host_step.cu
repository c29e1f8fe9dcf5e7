/* baseline_host_step: the hand-written CUDA version of pipelines/host_step.yaml that
 * tests/bench/run_bench.sh (STEPS=hoststep) runs beside pipectl: per batch, upload x -> kernel 1
 * (y = 2x) -> download y -> a host step in C on y (s = fftshift(y), the Lua step's byte moves done
 * with two memcpy) -> upload s -> kernel 2 (z = y + s) -> download z. Plain CUDA runtime calls
 * and pthreads, no graphs and no pipectl code: six streams (upload, compute, download for each of
 * the two device segments), pinned memory, DEPTH slots in flight, events for every slot-reuse
 * hazard and no device-wide sync in the steady state.
 *
 *   bench_host_step BYTES BATCHES DEPTH KERNEL [WORKERS [HOST]]
 *
 * BYTES: bytes of each buffer per batch (f32 elements, a multiple of 8); KERNEL: "op" (the two ops
 * alone) or a number of microseconds each device step also spins after its op (a busy kernel as
 * pipectl's busy op; compute per batch = both ops + 2 x KERNEL); WORKERS (default 1): host threads
 * running the host step, batch i on thread i % WORKERS (1 is what pipectl does: one host stream
 * runs a stage's batches one after another); HOST: "direct" (default: two memcpy from y into s) or
 * "staged" (each half copied into a scratch buffer first, then into s: the memory traffic of the
 * Lua step, whose y:tostring() makes a Lua string that s:fromstring() copies again), so the
 * executors can be compared with the same host work.
 *
 * Threads: the main thread enqueues segment 1 of batch i (upload x, kernel 1, download y) once
 * segment 2 of batch i - DEPTH (same slot) is enqueued; a worker waits (host condition variable)
 * until segment 1 of its batch is enqueued, then for its download (cudaEventSynchronize on that
 * slot's event, nothing device-wide), runs the host step and enqueues segment 2. Slot reuse:
 * upload x of batch i + DEPTH waits for kernel 1 of batch i (x_dev), kernel 1 for kernel 2 of
 * batch i (y_dev), kernel 2 for the download of z of batch i (z_dev); the host buffers y and s are
 * safe by the host-side order (docs/perf.md, "host step").
 *
 * First it times each piece alone (best of 10, the same rotation over slots): both uploads, both
 * downloads, both directions at once, both device steps, the host step. The bound per batch is
 * the largest of those (host step divided by min(WORKERS, DEPTH)). Then a warm-up round and the
 * timed run. Prints an "alone ..." line (each piece, ns), a "run ..." line (the host step's mean in
 * the timed run) and last:
 *   host_step bytes=B batches=K depth=D workers=W host=H kernel=op|U per_batch_ns=P
 *             total_per_batch_ns=T bound_ns=N bound=NAME achieved=R verify=OK
 * where P is the steady-state time per batch (completion of the last batch minus completion of
 * batch K/4, over the batches between; every batch's download of z records a timing event),
 * T = first upload to last download / K, R = N / P. verify: the last batch's y, s and z compared
 * bit for bit with a CPU computation (OK or MISMATCH; exit 1 on a mismatch or any CUDA error). */
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "bench_host_step: %s:%d: %s failed: %s (%s)\n", __FILE__, __LINE__,    \
                    #call, cudaGetErrorString(e_), cudaGetErrorName(e_));                          \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define PCHECK(call)                                                                               \
    do {                                                                                           \
        int e_ = (call);                                                                           \
        if (e_ != 0) {                                                                             \
            fprintf(stderr, "bench_host_step: %s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,  \
                    strerror(e_));                                                                 \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* ---- kernels (one launcher each, stream last) ---- */

/* y = alpha * x in f32, as pipectl's scale op (alpha 2: exact). */
__global__ void scale_kernel(const float *x, float *y, float alpha, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] = alpha * x[i];
}

/* z = x + y in f32, as pipectl's add op. */
__global__ void add_kernel(const float *x, const float *y, float *z, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        z[i] = x[i] + y[i];
}

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

static int grid_for(size_t n)
{
    size_t g = (n + 255) / 256;
    return (int)(g < 4096 ? g : 4096);
}

static void launch_scale(const float *x, float *y, size_t n, cudaStream_t st)
{
    scale_kernel<<<grid_for(n), 256, 0, st>>>(x, y, 2.0f, n);
    CHECK(cudaGetLastError());
}

static void launch_add(const float *x, const float *y, float *z, size_t n, cudaStream_t st)
{
    add_kernel<<<grid_for(n), 256, 0, st>>>(x, y, z, n);
    CHECK(cudaGetLastError());
}

static void launch_busy(uint64_t ns, cudaStream_t st)
{
    if (ns == 0) return;
    busy_kernel<<<1, 32, 0, st>>>(ns);
    CHECK(cudaGetLastError());
}

/* ---- the host step: s = fftshift(y), s[i] = y[(i - n/2) mod n], as the Lua step computes ---- */

static void host_step(float *s, const float *y, size_t n, float *scratch)
{
    size_t h = n / 2;
    if (scratch) { /* staged: as tostring() then fromstring() */
        memcpy(scratch, y + (n - h), h * sizeof(float));
        memcpy(s, scratch, h * sizeof(float));
        memcpy(scratch, y, (n - h) * sizeof(float));
        memcpy(s + h, scratch, (n - h) * sizeof(float));
        return;
    }
    memcpy(s, y + (n - h), h * sizeof(float));
    memcpy(s + h, y, (n - h) * sizeof(float));
}

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* ---- the pipeline ---- */

struct slot {
    float *h_x, *h_y, *h_s, *h_z; /* pinned */
    float *d_x, *d_y, *d_s, *d_z;
    /* Recorded per batch: after upload x, kernel 1, download y, upload s, kernel 2, download z. */
    cudaEvent_t up1, k1, y_ready, up2, k2, z_ready;
};

struct pipeline {
    size_t n, bytes;
    int depth, workers;
    uint64_t busy_ns;
    cudaStream_t up1, comp1, down1, up2, comp2, down2;
    struct slot *slots;
    /* Host-side order: last1[s] / last2[s] = the last batch whose segment 1 / 2 is enqueued on
     * slot s (-1: none yet in this run). */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    long *last1, *last2;
    long batches;
    cudaEvent_t *done; /* timing event after each batch's download of z (NULL: warm-up) */
    double host_ns;    /* host step time in the run, summed over batches */
    bool staged;       /* host step through a scratch buffer (HOST = staged) */
};

struct worker_arg {
    struct pipeline *p;
    int id;
    float *scratch; /* staged host step: n floats of this worker's own; NULL: direct */
};

static void wait_last(struct pipeline *p, long *last, int s, long want)
{
    PCHECK(pthread_mutex_lock(&p->mu));
    while (last[s] < want)
        PCHECK(pthread_cond_wait(&p->cv, &p->mu));
    PCHECK(pthread_mutex_unlock(&p->mu));
}

static void set_last(struct pipeline *p, long *last, int s, long i)
{
    PCHECK(pthread_mutex_lock(&p->mu));
    last[s] = i;
    PCHECK(pthread_cond_broadcast(&p->cv));
    PCHECK(pthread_mutex_unlock(&p->mu));
}

/* Segment 1 of batch i: upload x, kernel 1 (+ spin), download y. */
static void enqueue_seg1(struct pipeline *p, long i)
{
    int s = (int)(i % p->depth);
    struct slot *q = &p->slots[s];
    if (i >= p->depth) CHECK(cudaStreamWaitEvent(p->up1, q->k1, 0)); /* x_dev read by batch i-D */
    CHECK(cudaMemcpyAsync(q->d_x, q->h_x, p->bytes, cudaMemcpyHostToDevice, p->up1));
    CHECK(cudaEventRecord(q->up1, p->up1));
    CHECK(cudaStreamWaitEvent(p->comp1, q->up1, 0));
    if (i >= p->depth) CHECK(cudaStreamWaitEvent(p->comp1, q->k2, 0)); /* y_dev read by i-D */
    launch_scale(q->d_x, q->d_y, p->n, p->comp1);
    launch_busy(p->busy_ns, p->comp1);
    CHECK(cudaEventRecord(q->k1, p->comp1));
    CHECK(cudaStreamWaitEvent(p->down1, q->k1, 0));
    CHECK(cudaMemcpyAsync(q->h_y, q->d_y, p->bytes, cudaMemcpyDeviceToHost, p->down1));
    CHECK(cudaEventRecord(q->y_ready, p->down1));
}

/* Segment 2 of batch i: upload s, kernel 2 (+ spin), download z. */
static void enqueue_seg2(struct pipeline *p, long i)
{
    int s = (int)(i % p->depth);
    struct slot *q = &p->slots[s];
    CHECK(cudaMemcpyAsync(q->d_s, q->h_s, p->bytes, cudaMemcpyHostToDevice, p->up2));
    CHECK(cudaEventRecord(q->up2, p->up2));
    CHECK(cudaStreamWaitEvent(p->comp2, q->up2, 0));
    if (i >= p->depth) CHECK(cudaStreamWaitEvent(p->comp2, q->z_ready, 0)); /* z_dev of i-D */
    launch_add(q->d_y, q->d_s, q->d_z, p->n, p->comp2);
    launch_busy(p->busy_ns, p->comp2);
    CHECK(cudaEventRecord(q->k2, p->comp2));
    CHECK(cudaStreamWaitEvent(p->down2, q->k2, 0));
    CHECK(cudaMemcpyAsync(q->h_z, q->d_z, p->bytes, cudaMemcpyDeviceToHost, p->down2));
    CHECK(cudaEventRecord(q->z_ready, p->down2));
    if (p->done) CHECK(cudaEventRecord(p->done[i], p->down2));
}

static void *worker_main(void *arg)
{
    struct worker_arg *a = (struct worker_arg *)arg;
    struct pipeline *p = a->p;
    double host = 0;
    for (long i = a->id; i < p->batches; i += p->workers) {
        int s = (int)(i % p->depth);
        struct slot *q = &p->slots[s];
        wait_last(p, p->last1, s, i);            /* y_ready now names batch i's download */
        CHECK(cudaEventSynchronize(q->y_ready)); /* that slot's download only */
        double t0 = now_ns();
        host_step(q->h_s, q->h_y, p->n, a->scratch);
        host += now_ns() - t0;
        enqueue_seg2(p, i);
        set_last(p, p->last2, s, i);
    }
    PCHECK(pthread_mutex_lock(&p->mu));
    p->host_ns += host;
    PCHECK(pthread_mutex_unlock(&p->mu));
    return NULL;
}

/* Runs batches 0..count-1 (slot i % depth) and waits for the last one. */
static void run_batches(struct pipeline *p, long count, cudaEvent_t *done)
{
    p->batches = count;
    p->done = done;
    p->host_ns = 0;
    for (int s = 0; s < p->depth; s++)
        p->last1[s] = p->last2[s] = -1;
    pthread_t th[64];
    struct worker_arg wa[64];
    for (int w = 0; w < p->workers; w++) {
        wa[w].p = p;
        wa[w].id = w;
        wa[w].scratch = NULL;
        if (p->staged && !(wa[w].scratch = (float *)malloc(p->bytes))) {
            fprintf(stderr, "bench_host_step: out of host memory\n");
            exit(1);
        }
        PCHECK(pthread_create(&th[w], NULL, worker_main, &wa[w]));
    }
    for (long i = 0; i < count; i++) {
        int s = (int)(i % p->depth);
        if (i >= p->depth) wait_last(p, p->last2, s, i - p->depth); /* k2's event names i-D */
        enqueue_seg1(p, i);
        set_last(p, p->last1, s, i);
    }
    for (int w = 0; w < p->workers; w++) {
        PCHECK(pthread_join(th[w], NULL));
        free(wa[w].scratch);
    }
    CHECK(cudaStreamSynchronize(p->down2));
}

/* ---- each piece alone ---- */

static float elapsed_ms(cudaEvent_t a, cudaEvent_t b)
{
    float ms = 0;
    CHECK(cudaEventSynchronize(b));
    CHECK(cudaEventElapsedTime(&ms, a, b));
    return ms;
}

struct alone {
    double h2d, d2h, both, compute, host; /* ns per batch */
};

static void measure_alone(struct pipeline *p, struct alone *m)
{
    const int reps = 10;
    float *scratch = p->staged ? (float *)malloc(p->bytes) : NULL;
    if (p->staged && !scratch) {
        fprintf(stderr, "bench_host_step: out of host memory\n");
        exit(1);
    }
    cudaEvent_t a, b, c;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    CHECK(cudaEventCreate(&c));
    m->h2d = m->d2h = m->both = m->compute = m->host = 1e300;
    for (int r = 0; r < reps; r++) {
        struct slot *q = &p->slots[r % p->depth];
        /* Both uploads of a batch, one after the other. */
        CHECK(cudaEventRecord(a, p->up1));
        CHECK(cudaMemcpyAsync(q->d_x, q->h_x, p->bytes, cudaMemcpyHostToDevice, p->up1));
        CHECK(cudaMemcpyAsync(q->d_s, q->h_s, p->bytes, cudaMemcpyHostToDevice, p->up1));
        CHECK(cudaEventRecord(b, p->up1));
        double t = elapsed_ms(a, b) * 1e6;
        if (t < m->h2d) m->h2d = t;
        /* Both downloads. */
        CHECK(cudaEventRecord(a, p->down1));
        CHECK(cudaMemcpyAsync(q->h_y, q->d_y, p->bytes, cudaMemcpyDeviceToHost, p->down1));
        CHECK(cudaMemcpyAsync(q->h_z, q->d_z, p->bytes, cudaMemcpyDeviceToHost, p->down1));
        CHECK(cudaEventRecord(b, p->down1));
        t = elapsed_ms(a, b) * 1e6;
        if (t < m->d2h) m->d2h = t;
        /* Both uploads and both downloads at once (the copy engines share the link). */
        CHECK(cudaEventRecord(a, p->up1));
        CHECK(cudaStreamWaitEvent(p->down1, a, 0));
        CHECK(cudaMemcpyAsync(q->d_x, q->h_x, p->bytes, cudaMemcpyHostToDevice, p->up1));
        CHECK(cudaMemcpyAsync(q->d_s, q->h_s, p->bytes, cudaMemcpyHostToDevice, p->up1));
        CHECK(cudaMemcpyAsync(q->h_y, q->d_y, p->bytes, cudaMemcpyDeviceToHost, p->down1));
        CHECK(cudaMemcpyAsync(q->h_z, q->d_z, p->bytes, cudaMemcpyDeviceToHost, p->down1));
        CHECK(cudaEventRecord(c, p->up1));
        CHECK(cudaStreamWaitEvent(p->down1, c, 0));
        CHECK(cudaEventRecord(b, p->down1));
        t = elapsed_ms(a, b) * 1e6;
        if (t < m->both) m->both = t;
        /* Both device steps. */
        CHECK(cudaEventRecord(a, p->comp1));
        launch_scale(q->d_x, q->d_y, p->n, p->comp1);
        launch_busy(p->busy_ns, p->comp1);
        launch_add(q->d_y, q->d_s, q->d_z, p->n, p->comp1);
        launch_busy(p->busy_ns, p->comp1);
        CHECK(cudaEventRecord(b, p->comp1));
        t = elapsed_ms(a, b) * 1e6;
        if (t < m->compute) m->compute = t;
        /* The host step, on pinned buffers as in the run. */
        double t0 = now_ns();
        host_step(q->h_s, q->h_y, p->n, scratch);
        t = now_ns() - t0;
        if (t < m->host) m->host = t;
    }
    CHECK(cudaDeviceSynchronize());
    free(scratch);
    cudaEventDestroy(c);
    cudaEventDestroy(b);
    cudaEventDestroy(a);
}

/* ---- setup, run, report ---- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static float rand_pm1(void) /* [-1, 1), splitmix64 */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (float)((double)(z >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
}

/* The last batch's slot against a CPU computation, bit for bit. Returns 0 when all match. */
static int verify(const struct pipeline *p, long batch)
{
    const struct slot *q = &p->slots[batch % p->depth];
    size_t n = p->n;
    float *y = (float *)malloc(n * sizeof *y), *s = (float *)malloc(n * sizeof *s);
    if (!y || !s) {
        fprintf(stderr, "bench_host_step: out of host memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        y[i] = 2.0f * q->h_x[i];
    host_step(s, y, n, NULL);
    int bad = 0;
    for (size_t i = 0; i < n && !bad; i++) {
        float z = y[i] + s[i];
        const char *what = NULL;
        float got = 0, want = 0;
        if (memcmp(&q->h_y[i], &y[i], 4) != 0)
            what = "y", got = q->h_y[i], want = y[i];
        else if (memcmp(&q->h_s[i], &s[i], 4) != 0)
            what = "s", got = q->h_s[i], want = s[i];
        else if (memcmp(&q->h_z[i], &z, 4) != 0)
            what = "z", got = q->h_z[i], want = z;
        if (what) {
            fprintf(stderr, "bench_host_step: batch %ld: %s[%zu] is %.9g, the CPU gives %.9g\n",
                    batch, what, i, got, want);
            bad = 1;
        }
    }
    free(s);
    free(y);
    return bad;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc < 5 || argc > 7) {
        fprintf(stderr, "usage: bench_host_step BYTES BATCHES DEPTH KERNEL [WORKERS [HOST]]\n"
                        "  KERNEL: op | BUSY_US (each device step also spins that long)\n"
                        "  HOST: direct (default) | staged (through a scratch buffer, as Lua)\n"
                        "  e.g. bench_host_step 4194304 256 4 op\n");
        return 2;
    }
    char *end1, *end2 = NULL;
    unsigned long long bytes = strtoull(argv[1], &end1, 10);
    long batches = strtol(argv[2], NULL, 10);
    int depth = (int)strtol(argv[3], NULL, 10);
    double busy_us = strcmp(argv[4], "op") == 0 ? 0 : strtod(argv[4], &end2);
    int workers = argc >= 6 ? (int)strtol(argv[5], NULL, 10) : 1;
    const char *host = argc >= 7 ? argv[6] : "direct";
    if (bytes < 8 || bytes % 8 || *end1 || batches < 8 || depth < 1 || depth > 64 ||
        (end2 && (*end2 || busy_us < 0)) || workers < 1 || workers > 64 ||
        (strcmp(host, "direct") != 0 && strcmp(host, "staged") != 0)) {
        fprintf(stderr, "bench_host_step: need BYTES >= 8 and a multiple of 8, BATCHES >= 8, "
                        "1 <= DEPTH <= 64, KERNEL 'op' or a number >= 0, 1 <= WORKERS <= 64, "
                        "HOST 'direct' or 'staged'\n");
        return 2;
    }
    struct pipeline p;
    memset(&p, 0, sizeof p);
    p.bytes = (size_t)bytes;
    p.n = p.bytes / sizeof(float);
    p.depth = depth;
    p.workers = workers;
    p.staged = strcmp(host, "staged") == 0;
    p.busy_ns = (uint64_t)(busy_us * 1000.0 + 0.5);
    cudaStream_t *streams[6] = {&p.up1, &p.comp1, &p.down1, &p.up2, &p.comp2, &p.down2};
    for (int i = 0; i < 6; i++)
        CHECK(cudaStreamCreateWithFlags(streams[i], cudaStreamNonBlocking));
    p.slots = (struct slot *)calloc((size_t)depth, sizeof *p.slots);
    p.last1 = (long *)calloc((size_t)depth, sizeof(long));
    p.last2 = (long *)calloc((size_t)depth, sizeof(long));
    cudaEvent_t *done = (cudaEvent_t *)calloc((size_t)batches, sizeof(cudaEvent_t));
    double *fin = (double *)calloc((size_t)batches, sizeof(double));
    if (!p.slots || !p.last1 || !p.last2 || !done || !fin) {
        fprintf(stderr, "bench_host_step: out of host memory\n");
        return 1;
    }
    PCHECK(pthread_mutex_init(&p.mu, NULL));
    PCHECK(pthread_cond_init(&p.cv, NULL));
    for (int s = 0; s < depth; s++) {
        struct slot *q = &p.slots[s];
        float **host[4] = {&q->h_x, &q->h_y, &q->h_s, &q->h_z};
        float **dev[4] = {&q->d_x, &q->d_y, &q->d_s, &q->d_z};
        for (int b = 0; b < 4; b++) {
            CHECK(cudaHostAlloc((void **)host[b], p.bytes, cudaHostAllocDefault));
            memset(*host[b], 0x11, p.bytes); /* touched */
            CHECK(cudaMalloc((void **)dev[b], p.bytes));
            CHECK(cudaMemset(*dev[b], 0, p.bytes));
        }
        for (size_t i = 0; i < p.n; i++)
            q->h_x[i] = rand_pm1();
        cudaEvent_t *ev[6] = {&q->up1, &q->k1, &q->y_ready, &q->up2, &q->k2, &q->z_ready};
        for (int e = 0; e < 6; e++)
            CHECK(cudaEventCreateWithFlags(ev[e], cudaEventDisableTiming));
    }
    for (long i = 0; i < batches; i++)
        CHECK(cudaEventCreate(&done[i]));
    CHECK(cudaDeviceSynchronize());

    struct alone m;
    measure_alone(&p, &m);
    double host_per = m.host / (workers < depth ? workers : depth);
    struct {
        const char *name;
        double ns;
    } parts[5] = {{"h2d", m.h2d},
                  {"d2h", m.d2h},
                  {"h2d+d2h", m.both},
                  {"compute", m.compute},
                  {"host", host_per}};
    int bi = 0;
    for (int i = 1; i < 5; i++)
        if (parts[i].ns > parts[bi].ns) bi = i;
    printf("alone h2d_ns=%.0f d2h_ns=%.0f both_ns=%.0f compute_ns=%.0f host_ns=%.0f "
           "(best of 10; h2d/d2h: both copies of a batch; both: the four at once)\n",
           m.h2d, m.d2h, m.both, m.compute, m.host);

    /* Warm-up round: every slot once, then idle. */
    run_batches(&p, 2L * depth, NULL);

    cudaEvent_t t0;
    CHECK(cudaEventCreate(&t0));
    CHECK(cudaEventRecord(t0, p.up1));
    run_batches(&p, batches, done);
    for (long i = 0; i < batches; i++)
        fin[i] = elapsed_ms(t0, done[i]) * 1e6;
    qsort(fin, (size_t)batches, sizeof *fin, cmp_double);
    long w = batches / 4;
    double per = (fin[batches - 1] - fin[w]) / (double)(batches - 1 - w);
    double total = fin[batches - 1] / (double)batches;
    int bad = verify(&p, batches - 1);
    char kernel[32];
    if (p.busy_ns)
        snprintf(kernel, sizeof kernel, "%.1f", busy_us);
    else
        snprintf(kernel, sizeof kernel, "op");
    printf("run host_in_run_ns=%.0f (mean host step in the timed run)\n",
           p.host_ns / (double)batches);
    printf(
        "host_step bytes=%llu batches=%ld depth=%d workers=%d host=%s kernel=%s per_batch_ns=%.0f "
        "total_per_batch_ns=%.0f bound_ns=%.0f bound=%s achieved=%.4f verify=%s\n",
        bytes, batches, depth, workers, host, kernel, per, total, parts[bi].ns, parts[bi].name,
        parts[bi].ns / per, bad ? "MISMATCH" : "OK");

    cudaEventDestroy(t0);
    for (long i = 0; i < batches; i++)
        cudaEventDestroy(done[i]);
    for (int s = 0; s < depth; s++) {
        struct slot *q = &p.slots[s];
        cudaEvent_t ev[6] = {q->z_ready, q->k2, q->up2, q->y_ready, q->k1, q->up1};
        for (int e = 0; e < 6; e++)
            cudaEventDestroy(ev[e]);
        float *dev[4] = {q->d_z, q->d_s, q->d_y, q->d_x};
        float *host[4] = {q->h_z, q->h_s, q->h_y, q->h_x};
        for (int b = 0; b < 4; b++) {
            cudaFree(dev[b]);
            cudaFreeHost(host[b]);
        }
    }
    for (int i = 5; i >= 0; i--)
        cudaStreamDestroy(*streams[i]);
    pthread_cond_destroy(&p.cv);
    pthread_mutex_destroy(&p.mu);
    free(fin);
    free(done);
    free(p.last2);
    free(p.last1);
    free(p.slots);
    return bad;
}
