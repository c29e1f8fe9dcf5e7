/* pl_gpu_stream: loop streams (pl_loop.stream) on the GPU executor (docs/architecture.md,
 * "Streams"). A loop that is a WHILE node runs with no host round trip per iteration, and its
 * stream adds none: after each test of the loop (the one before the node and the one that ends
 * its body) the stream kernel (pl_exec_launch_loop_stream) copies the columns due into pinned,
 * device-mapped host memory per (slot, loop) and publishes the delivery with a counter; a host
 * thread of this file polls the counters, hands each delivery to the stream's writer
 * (stages/pl_stream.h) in order and acknowledges it, which is all the device ever waits for: a
 * slot's next batch before writing its first delivery (the mirror is reused), and a batch whose
 * host side has fallen a whole ring of deliveries behind. A host-launched loop (run.loop: host)
 * copies its deliveries itself between launches (pl_gpu_loop.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pl_exec_gpu_int.h"
#include "pl_gx.h"
#include "pl_stream.h"

/* One (slot, loop) of a streaming WHILE-node loop. */
typedef struct pl__sslot {
    int loop, slot, stage; /* plan loop, slot, its loop stage */
    pl_stream_shape sh;
    int ring;    /* deliveries a batch may be ahead of the host */
    void *block; /* the pinned, mapped memory (cudaHostAlloc) */
    /* Host addresses in block; their device aliases are in dev. */
    unsigned long long *head, *ack;
    int *recs, *fin;
    char *mirror;
    pl_stream_dev dev; /* the kernel's arguments, but the per-capture ones */
    /* The poller's: the slot's batches streamed (as the device counts them), deliveries taken
     * from the one streaming, the columns they covered, and the batch it is (the executor's
     * count; -1 until the first delivery after the entry was made). */
    unsigned gen, taken;
    int64_t lo, local;
} pl__sslot;

struct pl_gx_streams {
    pl_gx *gx;
    pl__sslot *ss;
    int n;
    int *state; /* device: int[3] per entry (pl_stream_dev.state) */
    pthread_t thread;
    bool started;
    int stop; /* atomic: the device is idle, take what is left and leave */
};

static size_t pl__up(size_t v, size_t a)
{
    return (v + a - 1) / a * a;
}

/* The entry of (loop l, slot), or NULL: the loop does not stream, or is not a WHILE node. */
static pl__sslot *pl__find(const pl_gx_streams *gs, int l, int slot)
{
    for (int i = 0; gs && i < gs->n; i++)
        if (gs->ss[i].loop == l && gs->ss[i].slot == slot) return &gs->ss[i];
    return NULL;
}

/* Hands the deliveries slot entry e has published and not yet given to the writer; true when it
 * took one. A failure stays in the writer, which drops what comes later and reports it at close;
 * the deliveries are acknowledged all the same, so the device never waits on a failed stream. */
static bool pl__take(pl_gx_streams *gs, pl__sslot *e)
{
    pl_gx *gx = gs->gx;
    bool any = false;
    for (;;) {
        unsigned long long h = __atomic_load_n(e->head, __ATOMIC_ACQUIRE);
        unsigned hg = (unsigned)(h >> 32), hc = (unsigned)h;
        /* An older head is the last batch's end, already taken; the device waits for the ack
         * before publishing a newer batch's. */
        if (hg != e->gen || hc <= e->taken) return any;
        int r = (int)(e->taken % (unsigned)e->ring);
        const int *rec = e->recs + 4 * r;
        int64_t step = rec[0], hi = rec[1];
        bool end = rec[2] != 0;
        /* Batches come to a slot in order, each streaming once: the first one of this slot in
         * the phase the entry was made for, then every depth-th (a phase that does not make the
         * ring again goes on from the batches before it, all streamed). */
        int64_t d = gx->depth;
        if (e->local < 0) {
            int64_t first = __atomic_load_n(&gx->stream_first, __ATOMIC_ACQUIRE);
            e->local = first + ((e->slot - first) % d + d) % d;
        }
        int64_t local = e->local;
        int64_t batch = pl_shard_global(&gx->spec->run.shard, gx->spec->run.batches, local);
        pl_stream *w = gx->rt_open ? gx->rt.state[e->stage] : NULL;
        if (w) {
            pl_error err;
            pl_error_clear(&err);
            const int32_t *fin =
                e->sh.finished >= 0 ? e->fin + (size_t)r * (size_t)e->sh.rows : NULL;
            (void)pl_stream_put(w, local, batch, step, e->lo, hi, e->mirror, fin, end, &err);
        }
        e->lo = hi;
        e->taken++;
        if (end) {
            e->gen++;
            e->taken = 0;
            e->lo = 0;
            e->local += d;
        }
        __atomic_store_n(e->ack, ((unsigned long long)e->gen << 32) | e->taken, __ATOMIC_RELEASE);
        any = true;
    }
}

/* The poller: every entry, then a short sleep when nothing came (20 us, doubling up to 1 ms: a
 * delivery's latency, not its cost). After the stop, what is left. */
static void *pl__poll(void *arg)
{
    pl_gx_streams *gs = arg;
    long idle_ns = 20000;
    for (;;) {
        bool stop = __atomic_load_n(&gs->stop, __ATOMIC_ACQUIRE) != 0;
        bool any = false;
        for (int i = 0; i < gs->n; i++)
            any |= pl__take(gs, &gs->ss[i]);
        if (any) {
            idle_ns = 20000;
            continue;
        }
        if (stop) break;
        struct timespec ts = {0, idle_ns};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
        if (idle_ns < 1000000) idle_ns *= 2;
    }
    return NULL;
}

pl_status pl_gx_stream_create(pl_gx *gx, pl_error *err)
{
    const pl_plan *p = gx->plan;
    int per = 0;
    for (int l = 0; l < p->n_loops; l++)
        per += p->loops[l].graph && gx->spec->stages[p->loops[l].stage].loop->stream != NULL;
    if (!gx->streams_on || per == 0) return PL_OK;
    pl_gx_streams *gs = calloc(1, sizeof *gs);
    if (!gs) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    gx->loop_out = gs;
    gs->gx = gx;
    gs->ss = calloc((size_t)per * (size_t)gx->depth, sizeof *gs->ss);
    if (!gs->ss) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    gs->n = per * gx->depth;
    size_t n_state = (size_t)gs->n * 3 * sizeof(int);
    PL_CHECK(PL_CUDA(cudaMalloc((void **)&gs->state, n_state), NULL, -1, err));
    PL_CHECK(PL_CUDA(cudaMemset(gs->state, 0, n_state), NULL, -1, err));
    int k = 0;
    for (int l = 0; l < p->n_loops; l++) {
        const pl_stage *L = &gx->spec->stages[p->loops[l].stage];
        if (!p->loops[l].graph || !L->loop->stream) continue;
        for (int slot = 0; slot < gx->depth; slot++, k++) {
            pl__sslot *e = &gs->ss[k];
            const char *name = L->name;
            e->loop = l;
            e->slot = slot;
            e->local = -1;
            e->stage = L->index;
            pl_stream_shape_of(gx->spec, L, &e->sh);
            int64_t most = e->sh.limit / e->sh.every + 1; /* deliveries a batch makes */
            e->ring = most < 256 ? (int)most : 256;
            size_t rows = (size_t)e->sh.rows;
            size_t o_recs = 64, o_fin = o_recs + (size_t)e->ring * 4 * sizeof(int);
            size_t o_mirror =
                pl__up(o_fin + (e->sh.finished >= 0 ? (size_t)e->ring * rows * 4 : 0), 256);
            size_t bytes = o_mirror + rows * (size_t)e->sh.cols * (size_t)e->sh.col_bytes;
            PL_CHECK(PL_CUDA(cudaHostAlloc(&e->block, bytes, cudaHostAllocMapped), name, -1, err));
            memset(e->block, 0, bytes);
            char *dev = NULL;
            PL_CHECK(PL_CUDA(cudaHostGetDevicePointer((void **)&dev, e->block, 0), name, -1, err));
            char *h = e->block;
            e->head = (unsigned long long *)h;
            e->ack = (unsigned long long *)(h + 8);
            e->recs = (int *)(h + o_recs);
            e->fin = (int *)(h + o_fin);
            e->mirror = h + o_mirror;
            e->dev.head = (unsigned long long *)dev;
            e->dev.ack = (const unsigned long long *)(dev + 8);
            e->dev.recs = (int *)(dev + o_recs);
            e->dev.fin = (int *)(dev + o_fin);
            e->dev.mirror = dev + o_mirror;
            e->dev.state = gs->state + 3 * k;
            e->dev.ring = e->ring;
            e->dev.every = (int)e->sh.every;
            e->dev.start = (int)e->sh.start;
            e->dev.rows = e->sh.rows;
            e->dev.cols = e->sh.cols;
            e->dev.col_bytes = (long long)e->sh.col_bytes;
            void *const *db = pl_buffers_slot(gx->dbufs, slot);
            e->dev.from = db[e->sh.from];
            e->dev.finished = e->sh.finished >= 0 ? db[e->sh.finished] : NULL;
        }
    }
    return PL_OK;
}

pl_status pl_gx_stream_start(pl_gx *gx, pl_error *err)
{
    pl_gx_streams *gs = gx->loop_out;
    if (!gs || gs->started) return PL_OK;
    __atomic_store_n(&gs->stop, 0, __ATOMIC_RELEASE);
    int rc = pthread_create(&gs->thread, NULL, pl__poll, gs);
    if (rc != 0)
        return pl_error_set(err, rc == EAGAIN ? PL_ENOMEM : PL_ERUNTIME,
                            "error: %scannot start the thread that takes loop streams from the "
                            "device: %s",
                            rc == EAGAIN ? "out of memory: " : "", strerror(rc));
    gs->started = true;
    return PL_OK;
}

void pl_gx_stream_stop(pl_gx *gx)
{
    pl_gx_streams *gs = gx->loop_out;
    if (!gs || !gs->started) return;
    /* Every delivery the device will make is made once it is idle; the poller keeps taking them
     * meanwhile (a delivery may wait for it). After a fault the synchronize fails at once. */
    cudaDeviceSynchronize();
    cudaGetLastError();
    __atomic_store_n(&gs->stop, 1, __ATOMIC_RELEASE);
    pthread_join(gs->thread, NULL);
    gs->started = false;
}

void pl_gx_stream_destroy(pl_gx *gx)
{
    pl_gx_streams *gs = gx->loop_out;
    if (!gs) return;
    pl_gx_stream_stop(gx);
    for (int i = 0; gs->ss && i < gs->n; i++)
        if (gs->ss[i].block) cudaFreeHost(gs->ss[i].block);
    if (gs->state) cudaFree(gs->state);
    free(gs->ss);
    free(gs);
    gx->loop_out = NULL;
}

pl_status pl_gx_stream_record(pl_gx *gx, int l, int slot, cudaStream_t s, const int *counter,
                              const int *decided, pl_error *err)
{
    pl__sslot *e = pl__find(gx->loop_out, l, slot);
    if (!e) return PL_OK;
    pl_stream_dev a = e->dev;
    a.counter = counter;
    a.decided = decided;
    return PL_CUDA(pl_exec_launch_loop_stream(&a, s), pl_gx_sname(gx, e->stage), -1, err);
}
