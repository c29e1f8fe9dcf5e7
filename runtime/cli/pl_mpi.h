/* pl_mpi: the few MPI calls `pipectl run --mpi` makes, behind a small API so that only this file
 * includes mpi.h; without Open MPI at build time (PL_WITH_MPI) every call says so. No pipeline
 * data goes through MPI: each rank writes its parts, and MPI carries a record per rank, the
 * per-batch checksums and the stop notices (docs/scale.md says why). */
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
/* A peer's stop notice arrived (tests it without waiting). */
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
/* Rank 0's value on every rank (MPI_Bcast). */
int pl_mpi_bcast_int(int v);
void pl_mpi_barrier(void);
void pl_mpi_finalize(void);

#endif
