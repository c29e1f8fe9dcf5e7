/* pl_shard: which of a pipeline's batches one process runs (`pipectl run --shard K/N`, a rank of
 * `--mpi`): the mapping between "the i-th batch this process runs" and the pipeline's batch
 * index, and the names of the part files its sinks write. Executors count their batches 0..n-1;
 * the stage runtime hands kinds the pipeline's index, so a source reads the same slice and a
 * generator draws the same numbers as in a single run (docs/scale.md). */
#ifndef PL_SHARD_H
#define PL_SHARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* run.shard_mode, in the order of its schema values. */
typedef enum pl_shard_mode {
    PL_SHARD_STRIDE = 0, /* shard K runs the batches b with b mod N == K */
    PL_SHARD_RANGE = 1,  /* shard K runs one contiguous block: [K*B/N, (K+1)*B/N) */
} pl_shard_mode;

typedef struct pl_shard {
    int index; /* K, 0 <= K < count */
    int count; /* N; 0 or 1: the process runs every batch */
    pl_shard_mode mode;
} pl_shard;

/* The process runs a part of the batches (count > 1). */
static inline bool pl_shard_on(const pl_shard *sh)
{
    return sh && sh->count > 1;
}

/* How many of `total` batches the shard runs (total itself when off). */
int64_t pl_shard_batches(const pl_shard *sh, int64_t total);
/* The pipeline's index of the shard's i-th batch (i itself when off). */
int64_t pl_shard_global(const pl_shard *sh, int64_t total, int64_t i);
/* The shard's position of the pipeline's batch b, or -1 when another shard runs it. */
int64_t pl_shard_local(const pl_shard *sh, int64_t total, int64_t b);
/* "stride" or "range" (static). */
const char *pl_shard_mode_name(pl_shard_mode m);

/* The part a shard's sink writes for `path`: "out.npy" -> "out.part-K-of-N.npy", "out" ->
 * "out.part-K-of-N" (the extension, the last dot after the last slash, stays last so the format
 * a name implies stays the same). Returns false when it does not fit in cap bytes. */
bool pl_shard_part_path(const char *path, int index, int count, char *out, size_t cap);

#endif
