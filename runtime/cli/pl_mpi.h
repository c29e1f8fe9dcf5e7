/* pl_mpi: the few MPI calls `pipectl run --mpi` and `replay --mpi` make, behind a small API so
 * that only this file includes mpi.h; without Open MPI at build time (PL_WITH_MPI) every call
 * says so. With `--mpi-write parts` (the default) no pipeline data goes through MPI: each rank
 * writes its parts, and MPI carries a record per rank, the per-batch checksums and the stop
 * notices; with `--mpi-write gather` the ranks also send rank 0 their sinks' batches, one at a
 * time when rank 0 asks for each (pl_gather.h; docs/scale.md says which is faster when).
 *
 * Threads: MPI runs MPI_THREAD_SERIALIZED, and every call here holds one lock, so the run's
 * threads (the reporting thread's stop check, sinks' workers sending batches, rank 0's writer)
 * may call in from any thread. No call waits by spinning: Open MPI's blocking calls poll a core
 * at full speed, which on a host with more ranks than cores takes the core from the rank being
 * waited for; here a wait tests its request, then sleeps (20 us, doubling to a few ms), and only
 * a transfer whose other side is known to be in it runs as a blocking call. */
#ifndef PL_MPI_H
#define PL_MPI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pl_status.h"

typedef struct pl_mpi_world {
    int rank, size;             /* MPI_COMM_WORLD */
    int local_rank, local_size; /* among the ranks of this host (MPI_Comm_split_type SHARED) */
    char host[64];
} pl_mpi_world;

/* The build has MPI. */
bool pl_mpi_built(void);
/* "Open MPI v4.1.4, ..." (the library's first line), or "not built", into buf. */
void pl_mpi_describe(char *buf, size_t cap);
/* MPI_Init_thread (serialized: one thread at a time calls MPI, the run's reporting thread during
 * the run, the main thread around it) and the world; posts the receive of stop notices.
 * PL_ENODEV without MPI in the build. */
pl_status pl_mpi_init(pl_mpi_world *w, pl_error *err);
/* A peer's stop notice arrived (tests it without waiting; while another thread is in MPI, says
 * what the last test found). */
bool pl_mpi_stop_told(void);
/* Tells every other rank to stop (non-blocking sends, completed by pl_mpi_drain); once. */
void pl_mpi_tell_stop(void);
/* Whether this rank told the others to stop. */
bool pl_mpi_told(void);
/* Every rank's `n` bytes at `mine`, into all[size * n], on every rank (MPI_Allgather). */
pl_status pl_mpi_allgather(const void *mine, size_t n, void *all, pl_error *err);
/* Gathers each rank's n_mine u64 to rank 0: *all (malloc'd, rank 0 only; free it) holds them
 * rank after rank, counts[size] (rank 0 only, caller's array) how many each sent. */
pl_status pl_mpi_gather_u64(const uint64_t *mine, int n_mine, uint64_t **all, int *counts,
                            pl_error *err);
/* Receives the stop notices still due (`told_me`: ranks that told, this one excluded), completes
 * this rank's sends. Every rank calls it after pl_mpi_allgather made the count known. */
void pl_mpi_drain(int told_me);
/* Gathers each rank's n_mine bytes to rank 0: *all (malloc'd, rank 0 only; free it) holds them
 * rank after rank, counts[size] (rank 0 only) how many each sent. */
pl_status pl_mpi_gather_bytes(const void *mine, int n_mine, char **all, int *counts, pl_error *err);
/* Rank 0's value on every rank (MPI_Bcast). */
int pl_mpi_bcast_int(int v);
/* The largest of every rank's v, on every rank (MPI_Allreduce). */
int pl_mpi_max_int(int v);
void pl_mpi_barrier(void);

/* ---- batches to rank 0 (--mpi-write gather) ------------------------------------------------ */

/* What a rank says of one batch it holds for rank 0. */
typedef struct pl_mpi_batch {
    int64_t stage; /* the sink's stage index; -1: the rank's end (it sends nothing more) */
    int64_t batch; /* the pipeline's index */
    int64_t bytes;
} pl_mpi_batch;

/* A rank other than 0: announces the batch, waits (sleeping) until rank 0 asks for it, then
 * sends its bytes (a blocking send: rank 0 is receiving them). `data` is borrowed until it
 * returns. Every announced batch is asked for: rank 0 asks when it has room, and for all of
 * them once a rank stopped or failed (pl_gather.c). Threads of one rank may each send a batch
 * at once (one sink each). */
pl_status pl_mpi_send_batch(const pl_mpi_batch *b, const void *data, pl_error *err);
/* A rank other than 0, once, after its last batch (whatever happened to it): rank 0 stops
 * waiting for it. */
pl_status pl_mpi_send_end(pl_error *err);
/* Rank 0: the next announcement of any rank (its rank and what it holds), without waiting;
 * false when none is due. */
bool pl_mpi_next_batch(int *rank, pl_mpi_batch *b);
/* Rank 0: asks `rank` for the batch it announced and receives its b->bytes bytes into buf. */
pl_status pl_mpi_pull_batch(int rank, const pl_mpi_batch *b, void *buf, pl_error *err);
void pl_mpi_finalize(void);

#endif
