/* sink_sync: one background thread for every .npy sink of the process that, once a second, makes
 * each .partial's data durable (fdatasync) and then rewrites its fixed-length header to claim the
 * rows published before that fdatasync, so the header never claims a row the disk lacks, after a
 * SIGKILL or a power loss alike. Off the sink's own thread: an fdatasync waits for the disk (160 ms
 * a second for a sink writing 200 MiB/s here), which a sink that writes into the page cache never
 * waits for. The thread starts with the first sink and ends when the last one leaves. */
#include <errno.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "pl_npy.h"
#include "pl_sink.h"

static pthread_mutex_t pl__mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pl__cv = PTHREAD_COND_INITIALIZER;
static pl_sink_sync *pl__list; /* guarded by pl__mu, as everything below */
static bool pl__running;       /* a syncer thread exists (it may be about to end) */
static pid_t pl__running_pid;  /* in which process: a fork's child has no thread */

/* One entry: fdatasync, then the header. Called with pl__mu held, so that remove() waits for it. */
static void pl__sync_one(pl_sink_sync *e)
{
    int64_t first = __atomic_load_n(&e->published, __ATOMIC_ACQUIRE);
    if (first == e->synced || __atomic_load_n(&e->err, __ATOMIC_ACQUIRE)) return;
    char h[256];
    size_t hl = pl_npy_format_header(h, sizeof h, e->dtype, first, e->rank_rest, e->rest);
    int call = 0, er = 0;
    if (fdatasync(e->fd) != 0) {
        er = errno;
    } else {
        call = 1;
        size_t at = 0;
        while (hl == e->header_len && at < hl) {
            ssize_t w = pwrite(e->fd, h + at, hl - at, (off_t)at);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) break;
            at += (size_t)w;
        }
        if (hl != e->header_len || at < hl) er = hl != e->header_len ? EINVAL : errno ? errno : EIO;
    }
    if (er) {
        e->failed_call = call;
        __atomic_store_n(&e->err, er, __ATOMIC_RELEASE);
    } else {
        e->synced = first;
    }
}

static void *pl__syncer(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&pl__mu);
    while (pl__list) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 1;
        /* Woken early only by the last sink leaving (the list empty): then it ends. */
        while (pl__list && pthread_cond_timedwait(&pl__cv, &pl__mu, &until) != ETIMEDOUT)
            ;
        for (pl_sink_sync *e = pl__list; e; e = e->next)
            pl__sync_one(e);
    }
    pl__running = false;
    pthread_mutex_unlock(&pl__mu);
    return NULL;
}

int pl_sink_sync_add(pl_sink_sync *e)
{
    e->published = e->synced = 0;
    e->err = 0;
    e->failed_call = 0;
    pthread_mutex_lock(&pl__mu);
    int rc = 0;
    if (!pl__running || pl__running_pid != getpid()) {
        pthread_t t;
        pthread_attr_t at;
        rc = pthread_attr_init(&at);
        if (!rc) {
            pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
            /* It writes headers and syncs: a small stack leaves the address space (which a
             * `ulimit -v` may bound) to the work. */
            pthread_attr_setstacksize(&at, (size_t)256 << 10);
            rc = pthread_create(&t, &at, pl__syncer, NULL);
            pthread_attr_destroy(&at);
        }
        if (!rc) {
            pl__running = true;
            pl__running_pid = getpid();
        }
    }
    if (!rc) {
        e->next = pl__list;
        pl__list = e;
    }
    pthread_mutex_unlock(&pl__mu);
    return rc;
}

void pl_sink_sync_remove(pl_sink_sync *e)
{
    pthread_mutex_lock(&pl__mu);
    for (pl_sink_sync **p = &pl__list; *p; p = &(*p)->next)
        if (*p == e) {
            *p = e->next;
            break;
        }
    if (!pl__list) pthread_cond_broadcast(&pl__cv);
    pthread_mutex_unlock(&pl__mu);
}
