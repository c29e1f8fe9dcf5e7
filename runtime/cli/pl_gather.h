/* pl_gather: `pipectl run --mpi --mpi-write gather`: rank 0 writes every sink's final file itself
 * while the run goes on, from its own batches and those the other ranks send it (pl_mpi.h), with
 * the guarantees of one process's run, because the file is written by the sink kind itself: rank
 * 0 opens each gathered sink a second time, on the pipeline without its shard (so under the name
 * one process writes), and runs that instance on every batch in the pipeline's order: the
 * `.partial` and its lock, the sidecar `pipectl salvage` reads, the `.npy` header kept loadable,
 * the rename at the end, the checksums. Each rank's own sinks write into memory instead (pl_run_io
 * with a callback): rank 0's keep a copy for its writer, the others' send each batch to rank 0.
 *
 * Flow control: rank 0 asks a rank for a batch it announced only while it holds fewer than
 * `window` of that sink's batches from that rank (or the batch is the next to write), and its own
 * sinks wait likewise; a rank's sink waits until its batch is asked for, so rank 0 holds at most
 * window batches of each sink per rank. window is the run's depth (at least 2): a rank's sinks
 * are then never more than the batches in flight apart, and every batch rank 0 waits for can
 * still be made (none of the ranks can be stuck behind a batch that waits for it). Once a rank
 * stops or fails (its notice, a signal, rank 0's own failure) rank 0 asks for everything still
 * announced (at most the batches in flight), and every rank reaches its end.
 *
 * Which sinks: those writing a raw or .npy file. Text and JSONL lines, whose batches vary in
 * size, are refused (use --mpi-write parts); a sink without `to` (checksums only) runs on every
 * rank as before; stdout is refused for any shard. Shards are strided (run.shard_mode: range is
 * refused: rank 0 would hold every other rank's block until its own is written). */
#ifndef PL_GATHER_H
#define PL_GATHER_H

#include <signal.h>
#include <stdio.h>

#include "pl_mpi.h"
#include "pl_run.h"

typedef struct pl_gather pl_gather;

/* Every rank, once the spec is loaded and its shard set: what gather cannot write is PL_EINPUT at
 * its position (a text or JSONL sink, naming it; shard_mode: range), and the final files are
 * checked as one process checks them (the sinks' check_files without the shard). */
pl_status pl_gather_check(const pl_spec *spec, pl_error *err);

/* Before the run of `plan` (a shard of w's size > 1): binds each gathered sink to memory in
 * *cfg (cfg->io: the bindings live in *out). On rank 0 it also opens the final files, as one
 * process opens them when its run starts, and starts the writer thread; on a failure of the
 * writer it sets *stop to stop_value (the run then stops, as on a peer's notice) and tells the
 * other ranks to stop. *out: free with pl_gather_free; NULL after an error. */
pl_status pl_gather_start(const pl_plan *plan, const pl_mpi_world *w, volatile sig_atomic_t *stop,
                          int stop_value, pl_run_cfg *cfg, pl_gather **out, pl_error *err);

/* Every rank, once after its run, whatever happened to it (g NULL: the run never started), and
 * before the collectives: a rank other than 0 tells rank 0 it sends nothing more; rank 0 takes no
 * more batches of its own, asks for everything announced when `failed` (this rank did not
 * complete its shard), writes what arrives until every other rank's end, and stops its writer
 * (with g NULL it receives and drops what the others send). On rank 0, the writer's error, if it
 * had one (a write that failed, no memory): this rank's failure. */
pl_status pl_gather_end(pl_gather *g, const pl_mpi_world *w, bool failed, pl_error *err);

/* What a rank reported of one sink: the checksums of its batches, in its order. false: none. */
typedef bool (*pl_gather_sums_fn)(void *user, int rank, const char *stage, const uint64_t **sums,
                                  int64_t *n);

/* Rank 0, after the ranks' records (done[r]: the batches rank r completed in order): finalizes
 * each file with the batches before the first one a rank did not complete (all of them when
 * every rank completed its shard), each checked against the checksum its rank computed (sums),
 * and says on `out` (NULL: silent) what it wrote; what is missing and how to go on, to stderr.
 * PL_ERUNTIME when a batch's bytes differ from its rank's checksum, PL_EIO when a file cannot be
 * finished. */
pl_status pl_gather_finish(pl_gather *g, const int64_t *done, pl_gather_sums_fn sums, void *user,
                           FILE *out, pl_error *err);

/* Frees g (NULL is fine); a file still open is finalized as a failed run's. */
void pl_gather_free(pl_gather *g);

#endif
