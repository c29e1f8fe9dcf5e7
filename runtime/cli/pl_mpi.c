/* pl_mpi: MPI for `pipectl run --mpi` and `replay --mpi` (pl_mpi.h); stubs that say "built
 * without MPI" otherwise. */
#include "pl_mpi.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef PL_WITH_MPI
#include <mpi.h>

enum { PL__TAG_STOP = 17, PL__TAG_HEAD, PL__TAG_GO, PL__TAG_DATA };

/* A batch's bytes go in messages of at most this many (MPI counts are ints). */
#define PL__CHUNK ((int64_t)1 << 30)

static struct {
    MPI_Request recv;
    bool recv_pending; /* the stop notice's receive is posted and unmatched */
    int got;           /* stop notices received */
    int notice;        /* the received notice's payload */
    MPI_Request *sends;
    int n_sends;
    bool told;
    int rank, size;
    /* A rank other than 0: rank 0's request for a batch, received by whichever sending thread
     * looked first, for the thread that holds that batch. Rank 0 asks a rank for one batch at a
     * time (it receives it before asking again), so one slot is enough. */
    int64_t go[2];
    bool go_due;
} pl__m;

/* Every MPI call holds it (MPI_THREAD_SERIALIZED: one thread at a time). */
static pthread_mutex_t pl__mu = PTHREAD_MUTEX_INITIALIZER;

static void pl__lock(void)
{
    pthread_mutex_lock(&pl__mu);
}

static void pl__unlock(void)
{
    pthread_mutex_unlock(&pl__mu);
}

/* Sleeps *us microseconds, then doubles it up to max_us: the waits below look often at first
 * (a reply is usually near) and then rarely (a slow rank leaves the cores to the others). */
static void pl__nap(int *us, int max_us)
{
    struct timespec ts = {0, (long)*us * 1000L};
    nanosleep(&ts, NULL);
    *us = *us * 2 < max_us ? *us * 2 : max_us;
}

/* Waits for *req without spinning (pl_mpi.h). */
static int pl__wait(MPI_Request *req, int max_us)
{
    int us = 20, done = 0, rc = MPI_SUCCESS;
    for (;;) {
        pl__lock();
        rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        pl__unlock();
        if (done || rc != MPI_SUCCESS) return rc;
        pl__nap(&us, max_us);
    }
}

/* Collectives wait for the slowest rank, which may be minutes (rank 0 merging 3 GB, a rank with
 * more batches): 5 ms between looks. */
#define PL__COLL_WAIT_US 5000

bool pl_mpi_built(void)
{
    return true;
}

void pl_mpi_describe(char *buf, size_t cap)
{
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int n = 0;
    if (MPI_Get_library_version(v, &n) != MPI_SUCCESS) n = 0;
    v[n < (int)sizeof v ? n : (int)sizeof v - 1] = '\0';
    v[strcspn(v, "\n,")] = '\0'; /* "Open MPI v4.1.4" */
    snprintf(buf, cap, "%s", v[0] ? v : "MPI");
}

pl_status pl_mpi_init(pl_mpi_world *w, pl_error *err)
{
    memset(w, 0, sizeof *w);
    /* The transfers that remain blocking calls (a batch to rank 0) poll while the rank's host
     * workers want the same cores: Open MPI's polling then yields the core between looks
     * (sched_yield) unless the user chose otherwise. Measured on 2 cores, 2 ranks sending 3.3 GB
     * through shared memory: 5.0-5.5 s against 6.0-6.1 s, and none of the 20-50 s runs where
     * the two polling sides kept the cores from each other (docs/perf.md, "MPI outputs"). */
    setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
    int provided = 0;
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
        return pl_error_set(err, PL_ERUNTIME, "error: --mpi: MPI_Init_thread failed");
    MPI_Comm_rank(MPI_COMM_WORLD, &w->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &w->size);
    /* The ranks of this host, in rank order: the local rank picks the GPU. */
    MPI_Comm local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, w->rank, MPI_INFO_NULL, &local);
    MPI_Comm_rank(local, &w->local_rank);
    MPI_Comm_size(local, &w->local_size);
    MPI_Comm_free(&local);
    if (gethostname(w->host, sizeof w->host) != 0) strcpy(w->host, "?");
    w->host[sizeof w->host - 1] = '\0';
    pl__m.rank = w->rank;
    pl__m.size = w->size;
    if (w->size > 1) {
        MPI_Irecv(&pl__m.notice, 1, MPI_INT, MPI_ANY_SOURCE, PL__TAG_STOP, MPI_COMM_WORLD,
                  &pl__m.recv);
        pl__m.recv_pending = true;
    }
    return PL_OK;
}

bool pl_mpi_stop_told(void)
{
    /* The reporting thread asks after every batch: it does not wait behind a batch being sent. */
    if (pthread_mutex_trylock(&pl__mu) != 0)
        return __atomic_load_n(&pl__m.got, __ATOMIC_ACQUIRE) > 0;
    if (pl__m.recv_pending) {
        int done = 0;
        MPI_Test(&pl__m.recv, &done, MPI_STATUS_IGNORE);
        if (done) {
            pl__m.recv_pending = false;
            __atomic_add_fetch(&pl__m.got, 1, __ATOMIC_RELEASE);
        }
    }
    bool told = pl__m.got > 0;
    pl__unlock();
    return told;
}

void pl_mpi_tell_stop(void)
{
    pl__lock();
    if (pl__m.told || pl__m.size < 2) {
        pl__unlock();
        return;
    }
    pl__m.told = true;
    static int one = 1;
    pl__m.sends = calloc((size_t)pl__m.size, sizeof *pl__m.sends);
    for (int r = 0; pl__m.sends && r < pl__m.size; r++) /* no memory: the others finish */
        if (r != pl__m.rank)
            MPI_Isend(&one, 1, MPI_INT, r, PL__TAG_STOP, MPI_COMM_WORLD,
                      &pl__m.sends[pl__m.n_sends++]);
    pl__unlock();
}

bool pl_mpi_told(void)
{
    pl__lock();
    bool t = pl__m.told && pl__m.sends;
    pl__unlock();
    return t;
}

pl_status pl_mpi_allgather(const void *mine, size_t n, void *all, pl_error *err)
{
    MPI_Request rq;
    pl__lock();
    int rc = MPI_Iallgather(mine, (int)n, MPI_BYTE, all, (int)n, MPI_BYTE, MPI_COMM_WORLD, &rq);
    pl__unlock();
    if (rc == MPI_SUCCESS) rc = pl__wait(&rq, PL__COLL_WAIT_US);
    if (rc != MPI_SUCCESS)
        return pl_error_set(err, PL_ERUNTIME, "error: --mpi: MPI_Allgather failed");
    return PL_OK;
}

/* The counts of every rank to rank 0 (counts: rank 0's array), then n_mine elements of type t
 * each into *all (malloc'd on rank 0, elem bytes each), rank after rank. */
static pl_status pl__gatherv(const void *mine, int n_mine, MPI_Datatype t, size_t elem, void **all,
                             int *counts, pl_error *err)
{
    if (all) *all = NULL;
    int *displs = NULL;
    char *buf = NULL;
    MPI_Request rq;
    pl__lock();
    int rc = MPI_Igather(&n_mine, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD, &rq);
    pl__unlock();
    if (rc == MPI_SUCCESS) rc = pl__wait(&rq, PL__COLL_WAIT_US);
    bool ok = rc == MPI_SUCCESS;
    /* Every rank takes part in the Gatherv whatever rank 0 could allocate: it then receives
     * nothing (counts 0), and says so after. */
    bool oom = false;
    if (ok && pl__m.rank == 0) {
        int64_t sum = 0;
        displs = calloc((size_t)pl__m.size, sizeof *displs);
        for (int r = 0; displs && r < pl__m.size; r++) {
            displs[r] = (int)sum;
            sum += counts[r];
        }
        buf = displs ? malloc((size_t)(sum > 0 ? sum : 1) * elem) : NULL;
        if (!buf) {
            oom = true;
            for (int r = 0; r < pl__m.size; r++)
                counts[r] = 0;
        }
    }
    static int zero_displs;
    if (ok) {
        pl__lock();
        rc = MPI_Igatherv(mine, n_mine, t, buf, counts, displs ? displs : &zero_displs, t, 0,
                          MPI_COMM_WORLD, &rq);
        pl__unlock();
        if (rc == MPI_SUCCESS) rc = pl__wait(&rq, PL__COLL_WAIT_US);
        ok = rc == MPI_SUCCESS;
    }
    free(displs);
    if (!ok || oom) {
        free(buf);
        return ok ? pl_error_set(err, PL_ENOMEM,
                                 "error: out of memory gathering the ranks' "
                                 "records")
                  : pl_error_set(err, PL_ERUNTIME, "error: --mpi: MPI_Gatherv failed");
    }
    if (all)
        *all = buf;
    else
        free(buf);
    return PL_OK;
}

pl_status pl_mpi_gather_u64(const uint64_t *mine, int n_mine, uint64_t **all, int *counts,
                            pl_error *err)
{
    void *a = NULL;
    pl_status st =
        pl__gatherv(mine, n_mine, MPI_UINT64_T, sizeof(uint64_t), all ? &a : NULL, counts, err);
    if (all) *all = a;
    return st;
}

pl_status pl_mpi_gather_bytes(const void *mine, int n_mine, char **all, int *counts, pl_error *err)
{
    void *a = NULL;
    pl_status st = pl__gatherv(mine, n_mine, MPI_BYTE, 1, all ? &a : NULL, counts, err);
    if (all) *all = a;
    return st;
}

void pl_mpi_drain(int told_me)
{
    pl__lock();
    if (pl__m.recv_pending) {
        if (pl__m.got < told_me) {
            MPI_Wait(&pl__m.recv, MPI_STATUS_IGNORE);
            __atomic_add_fetch(&pl__m.got, 1, __ATOMIC_RELEASE);
        } else {
            MPI_Cancel(&pl__m.recv);
            MPI_Wait(&pl__m.recv, MPI_STATUS_IGNORE);
        }
        pl__m.recv_pending = false;
    }
    int v;
    /* Every notice still due was sent before its rank's record (the Allgather): it is here. */
    while (pl__m.got < told_me) {
        MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, PL__TAG_STOP, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        __atomic_add_fetch(&pl__m.got, 1, __ATOMIC_RELEASE);
    }
    pl__unlock();
    for (int i = 0; i < pl__m.n_sends; i++)
        pl__wait(&pl__m.sends[i], PL__COLL_WAIT_US);
    free(pl__m.sends);
    pl__m.sends = NULL;
    pl__m.n_sends = 0;
}

int pl_mpi_bcast_int(int v)
{
    MPI_Request rq;
    pl__lock();
    int rc = MPI_Ibcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD, &rq);
    pl__unlock();
    if (rc == MPI_SUCCESS) pl__wait(&rq, PL__COLL_WAIT_US);
    return v;
}

int pl_mpi_max_int(int v)
{
    int out = v;
    MPI_Request rq;
    pl__lock();
    int rc = MPI_Iallreduce(&v, &out, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &rq);
    pl__unlock();
    if (rc == MPI_SUCCESS) pl__wait(&rq, PL__COLL_WAIT_US);
    return out;
}

void pl_mpi_barrier(void)
{
    MPI_Request rq;
    pl__lock();
    int rc = MPI_Ibarrier(MPI_COMM_WORLD, &rq);
    pl__unlock();
    if (rc == MPI_SUCCESS) pl__wait(&rq, PL__COLL_WAIT_US);
}

void pl_mpi_finalize(void)
{
    pl__lock();
    MPI_Finalize();
    pl__unlock();
}

/* ---- batches to rank 0 -------------------------------------------------------------------- */

/* An announcement (or the end) to rank 0: a small message, sent at once. */
static pl_status pl__head(const pl_mpi_batch *b, pl_error *err)
{
    int64_t head[3] = {b->stage, b->batch, b->bytes};
    MPI_Request rq;
    pl__lock();
    int rc = MPI_Isend(head, 3, MPI_INT64_T, 0, PL__TAG_HEAD, MPI_COMM_WORLD, &rq);
    pl__unlock();
    if (rc == MPI_SUCCESS) rc = pl__wait(&rq, 1000);
    if (rc != MPI_SUCCESS)
        return pl_error_set(err, PL_ERUNTIME,
                            "error: --mpi: sending rank 0 a batch's notice "
                            "failed (MPI_Isend)");
    return PL_OK;
}

pl_status pl_mpi_send_batch(const pl_mpi_batch *b, const void *data, pl_error *err)
{
    PL_CHECK(pl__head(b, err));
    /* Until rank 0 asks for this one: whichever sending thread looks receives rank 0's request
     * and leaves it in go[] for the thread that holds that batch. */
    int us = 20;
    for (;;) {
        pl__lock();
        if (!pl__m.go_due) {
            int flag = 0;
            MPI_Iprobe(0, PL__TAG_GO, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
            if (flag) {
                MPI_Recv(pl__m.go, 2, MPI_INT64_T, 0, PL__TAG_GO, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
                pl__m.go_due = true;
            }
        }
        if (pl__m.go_due && pl__m.go[0] == b->stage && pl__m.go[1] == b->batch) {
            pl__m.go_due = false;
            /* Rank 0 is receiving it now: a blocking send moves it at the memory's speed (a
             * non-blocking one moves only while this side calls MPI). */
            int rc = MPI_SUCCESS;
            const char *p = data;
            for (int64_t at = 0; at < b->bytes && rc == MPI_SUCCESS; at += PL__CHUNK) {
                int64_t n = b->bytes - at < PL__CHUNK ? b->bytes - at : PL__CHUNK;
                rc = MPI_Send(p + at, (int)n, MPI_BYTE, 0, PL__TAG_DATA, MPI_COMM_WORLD);
            }
            pl__unlock();
            if (rc != MPI_SUCCESS)
                return pl_error_set(err, PL_ERUNTIME,
                                    "error: --mpi: sending rank 0 batch %lld failed (MPI_Send)",
                                    (long long)b->batch);
            return PL_OK;
        }
        pl__unlock();
        pl__nap(&us, 250); /* a batch waits at most this long past its request */
    }
}

pl_status pl_mpi_send_end(pl_error *err)
{
    pl_mpi_batch end = {-1, 0, 0};
    return pl__head(&end, err);
}

bool pl_mpi_next_batch(int *rank, pl_mpi_batch *b)
{
    int flag = 0;
    MPI_Status s;
    int64_t head[3];
    pl__lock();
    MPI_Iprobe(MPI_ANY_SOURCE, PL__TAG_HEAD, MPI_COMM_WORLD, &flag, &s);
    if (flag)
        MPI_Recv(head, 3, MPI_INT64_T, s.MPI_SOURCE, PL__TAG_HEAD, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    pl__unlock();
    if (!flag) return false;
    *rank = s.MPI_SOURCE;
    *b = (pl_mpi_batch){head[0], head[1], head[2]};
    return true;
}

pl_status pl_mpi_pull_batch(int rank, const pl_mpi_batch *b, void *buf, pl_error *err)
{
    int64_t go[2] = {b->stage, b->batch};
    MPI_Request rq;
    pl__lock();
    int rc = MPI_Isend(go, 2, MPI_INT64_T, rank, PL__TAG_GO, MPI_COMM_WORLD, &rq);
    pl__unlock();
    bool sized = true;
    char *p = buf;
    for (int64_t at = 0; at < b->bytes && rc == MPI_SUCCESS; at += PL__CHUNK) {
        int64_t n = b->bytes - at < PL__CHUNK ? b->bytes - at : PL__CHUNK;
        /* Sleeps until the rank is sending (its thread wakes to the request), then receives
         * at full speed while it does. */
        int us = 20, flag = 0, count = 0;
        for (;;) {
            MPI_Message m;
            MPI_Status s;
            pl__lock();
            rc = MPI_Improbe(rank, PL__TAG_DATA, MPI_COMM_WORLD, &flag, &m, &s);
            if (rc == MPI_SUCCESS && flag) {
                MPI_Get_count(&s, MPI_BYTE, &count);
                char *into = p + at;
                char *other = count == (int)n ? NULL : malloc(count > 0 ? (size_t)count : 1);
                sized = sized && count == (int)n;
                /* A message of another size is received all the same (into other, or
                 * truncated when there is no memory), so its sender is not left waiting. */
                rc = MPI_Mrecv(other ? other : into, other || count == (int)n ? count : (int)n,
                               MPI_BYTE, &m, MPI_STATUS_IGNORE);
                free(other);
            }
            pl__unlock();
            if (rc != MPI_SUCCESS || flag) break;
            pl__nap(&us, 100);
        }
    }
    if (rc == MPI_SUCCESS) rc = pl__wait(&rq, 1000);
    if (rc != MPI_SUCCESS)
        return pl_error_set(err, PL_ERUNTIME,
                            "error: --mpi: receiving batch %lld from rank %d failed",
                            (long long)b->batch, rank);
    if (!sized)
        return pl_error_set(err, PL_ERUNTIME,
                            "error: --mpi: rank %d sent batch %lld in other sizes than the %lld "
                            "bytes it announced",
                            rank, (long long)b->batch, (long long)b->bytes);
    return PL_OK;
}

#else /* !PL_WITH_MPI */

bool pl_mpi_built(void)
{
    return false;
}

void pl_mpi_describe(char *buf, size_t cap)
{
    snprintf(buf, cap, "not built (run --mpi needs Open MPI at build time)");
}

pl_status pl_mpi_init(pl_mpi_world *w, pl_error *err)
{
    memset(w, 0, sizeof *w);
    return pl_error_set(err, PL_ENODEV,
                        "error: --mpi: pipectl was built without MPI (PL_WITH_MPI=OFF, or no "
                        "Open MPI found: install libopenmpi-dev and rebuild); --shard K/N runs "
                        "one shard without it");
}

bool pl_mpi_stop_told(void)
{
    return false;
}

void pl_mpi_tell_stop(void) {}

bool pl_mpi_told(void)
{
    return false;
}

pl_status pl_mpi_allgather(const void *mine, size_t n, void *all, pl_error *err)
{
    memcpy(all, mine, n);
    return PL_OK;
}

pl_status pl_mpi_gather_u64(const uint64_t *mine, int n_mine, uint64_t **all, int *counts,
                            pl_error *err)
{
    counts[0] = n_mine;
    *all = malloc((size_t)(n_mine > 0 ? n_mine : 1) * sizeof **all);
    if (!*all) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    if (n_mine) memcpy(*all, mine, (size_t)n_mine * sizeof *mine);
    return PL_OK;
}

void pl_mpi_drain(int told_me)
{
    (void)told_me;
}

pl_status pl_mpi_gather_bytes(const void *mine, int n_mine, char **all, int *counts, pl_error *err)
{
    counts[0] = n_mine;
    *all = malloc(n_mine > 0 ? (size_t)n_mine : 1);
    if (!*all) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    if (n_mine) memcpy(*all, mine, (size_t)n_mine);
    return PL_OK;
}

int pl_mpi_bcast_int(int v)
{
    return v;
}

int pl_mpi_max_int(int v)
{
    return v;
}

void pl_mpi_barrier(void) {}

static pl_status pl__no_mpi(pl_error *err)
{
    return pl_error_set(err, PL_ENODEV, "error: --mpi: pipectl was built without MPI");
}

pl_status pl_mpi_send_batch(const pl_mpi_batch *b, const void *data, pl_error *err)
{
    (void)b;
    (void)data;
    return pl__no_mpi(err);
}

pl_status pl_mpi_send_end(pl_error *err)
{
    return pl__no_mpi(err);
}

bool pl_mpi_next_batch(int *rank, pl_mpi_batch *b)
{
    (void)rank;
    (void)b;
    return false;
}

pl_status pl_mpi_pull_batch(int rank, const pl_mpi_batch *b, void *buf, pl_error *err)
{
    (void)rank;
    (void)b;
    (void)buf;
    return pl__no_mpi(err);
}

void pl_mpi_finalize(void) {}

#endif
