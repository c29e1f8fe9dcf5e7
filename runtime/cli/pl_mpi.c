/* pl_mpi: MPI for `pipectl run --mpi` (pl_mpi.h); stubs that say "built without MPI" otherwise. */
#include "pl_mpi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef PL_WITH_MPI
#include <mpi.h>

enum { PL__TAG_STOP = 17 };

static struct {
    MPI_Request recv;
    bool recv_pending; /* the stop notice's receive is posted and unmatched */
    int got;           /* stop notices received */
    int notice;        /* the received notice's payload */
    MPI_Request *sends;
    int n_sends;
    bool told;
    int rank, size;
} pl__m;

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
    if (pl__m.recv_pending) {
        int done = 0;
        MPI_Test(&pl__m.recv, &done, MPI_STATUS_IGNORE);
        if (done) {
            pl__m.recv_pending = false;
            pl__m.got++;
        }
    }
    return pl__m.got > 0;
}

void pl_mpi_tell_stop(void)
{
    if (pl__m.told || pl__m.size < 2) return;
    pl__m.told = true;
    static int one = 1;
    pl__m.sends = calloc((size_t)pl__m.size, sizeof *pl__m.sends);
    if (!pl__m.sends) return; /* the others finish their shards: slower, not wrong */
    for (int r = 0; r < pl__m.size; r++)
        if (r != pl__m.rank)
            MPI_Isend(&one, 1, MPI_INT, r, PL__TAG_STOP, MPI_COMM_WORLD,
                      &pl__m.sends[pl__m.n_sends++]);
}

bool pl_mpi_told(void)
{
    return pl__m.told && pl__m.sends;
}

pl_status pl_mpi_allgather(const void *mine, size_t n, void *all, pl_error *err)
{
    if (MPI_Allgather(mine, (int)n, MPI_BYTE, all, (int)n, MPI_BYTE, MPI_COMM_WORLD) != MPI_SUCCESS)
        return pl_error_set(err, PL_ERUNTIME, "error: --mpi: MPI_Allgather failed");
    return PL_OK;
}

pl_status pl_mpi_gather_u64(const uint64_t *mine, int n_mine, uint64_t **all, int *counts,
                            pl_error *err)
{
    if (all) *all = NULL;
    int *displs = NULL;
    uint64_t *buf = NULL;
    int ok = MPI_Gather(&n_mine, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD) == MPI_SUCCESS;
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
        buf = displs ? malloc((size_t)(sum > 0 ? sum : 1) * sizeof *buf) : NULL;
        if (!buf) {
            oom = true;
            for (int r = 0; r < pl__m.size; r++)
                counts[r] = 0;
        }
    }
    static int zero_displs;
    ok = ok && MPI_Gatherv(mine, n_mine, MPI_UINT64_T, buf, counts, displs ? displs : &zero_displs,
                           MPI_UINT64_T, 0, MPI_COMM_WORLD) == MPI_SUCCESS;
    free(displs);
    if (!ok || oom) {
        free(buf);
        return ok ? pl_error_set(err, PL_ENOMEM, "error: out of memory gathering checksums")
                  : pl_error_set(err, PL_ERUNTIME, "error: --mpi: MPI_Gatherv failed");
    }
    if (all)
        *all = buf;
    else
        free(buf);
    return PL_OK;
}

void pl_mpi_drain(int told_me)
{
    if (pl__m.recv_pending) {
        if (pl__m.got < told_me) {
            MPI_Wait(&pl__m.recv, MPI_STATUS_IGNORE);
            pl__m.got++;
        } else {
            MPI_Cancel(&pl__m.recv);
            MPI_Wait(&pl__m.recv, MPI_STATUS_IGNORE);
        }
        pl__m.recv_pending = false;
    }
    int v;
    while (pl__m.got < told_me) {
        MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, PL__TAG_STOP, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        pl__m.got++;
    }
    if (pl__m.n_sends) MPI_Waitall(pl__m.n_sends, pl__m.sends, MPI_STATUSES_IGNORE);
    free(pl__m.sends);
    pl__m.sends = NULL;
    pl__m.n_sends = 0;
}

int pl_mpi_bcast_int(int v)
{
    MPI_Bcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return v;
}

void pl_mpi_barrier(void)
{
    MPI_Barrier(MPI_COMM_WORLD);
}

void pl_mpi_finalize(void)
{
    MPI_Finalize();
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

int pl_mpi_bcast_int(int v)
{
    return v;
}

void pl_mpi_barrier(void) {}

void pl_mpi_finalize(void) {}

#endif
