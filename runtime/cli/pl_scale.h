/* pl_scale: what `pipectl run --shard K/N` and `--mpi` add to a run (docs/scale.md): the shard
 * set on the spec before the plan is compiled with its batches, the run's configuration (a peer's
 * stop notice, --fail-at in the pipeline's batches), the part manifests after the run, and with
 * MPI the world's outcome: every rank reaches the same collectives whatever happened to it
 * (failed to load, failed at batch k, stopped by a signal), rank 0 merges the parts when every
 * rank completed its shard (or with --mpi-write gather finalizes the files it wrote during the
 * run, pl_gather.h) and prints the ranks' summary, and every rank exits non-zero when one
 * failed. */
#ifndef PL_SCALE_H
#define PL_SCALE_H

#include <limits.h>
#include <signal.h>

#include "pl_cli.h"
#include "pl_gather.h"
#include "pl_mpi.h"
#include "pl_run.h"

/* What *pl_run_cfg.stop holds when another rank told this one to stop (signals are > 0). */
#define PL_SCALE_STOP_PEER (-1)

/* --mpi-write: how the outputs of a world are written, in the order of the option's values. */
typedef enum pl_scale_write {
    PL_SCALE_PARTS = 0, /* each rank its parts, rank 0 merges them after the run (default) */
    PL_SCALE_GATHER,    /* the ranks send rank 0 their batches, rank 0 writes the files */
} pl_scale_write;

typedef struct pl_scale {
    bool mpi; /* --mpi */
    pl_scale_write write;
    bool on;        /* the run is a shard: --shard K/N, or --mpi with more than one rank */
    pl_shard shard; /* index and count (the mode comes from the spec) */
    bool quiet;     /* --quiet: rank 0 prints no summary of the ranks */
    pl_mpi_world world;
    bool mpi_up;                 /* MPI_Init ran: the collectives and MPI_Finalize are owed */
    bool ended;                  /* the collectives ran */
    int world_rc;                /* with MPI: the exit code the world's outcome asks of this rank */
    volatile sig_atomic_t *stop; /* the run's stop flag (borrowed) */
    void (*on_batch)(void *user, int64_t done, int64_t total); /* the run's, wrapped */
    void *user;
    char digest[65];   /* the pipeline's (pl_parts_digest), as every shard has it */
    pl_gather *gather; /* --mpi-write gather, from pl_scale_start on (owned) */
} pl_scale;

/* Whether sc writes the world's outputs through rank 0 (--mpi-write gather, more than one rank). */
bool pl_scale_gathers(const pl_scale *sc);

/* Zeroes *sc. */
void pl_scale_init(pl_scale *sc);
/* --shard K/N: 0 <= K < N, N >= 1 (N == 1: the whole run). Usage error (2) otherwise; 0 if
 * fine. */
int pl_scale_parse_shard(const pl_cmd *cmd, int id, const char *v, pl_scale *sc);
/* --mpi: MPI_Init and the world; the shard is rank K of N. PL_ENODEV without MPI in the build,
 * PL_EINPUT with --shard too. */
pl_status pl_scale_begin(pl_scale *sc, pl_error *err);
/* After the spec is loaded and its batches resolved: sets spec->run.shard, and with MPI
 * spec->run.device (the GPU of this rank's local rank: pl_scale.c says how), and refuses what a
 * shard cannot run (more shards than batches, a sink writing to stdout; with --mpi-write gather
 * what pl_gather_check refuses) with PL_EINPUT. */
pl_status pl_scale_apply(pl_scale *sc, pl_spec *spec, pl_error *err);
/* The batches this process's plan runs: pl_shard_batches of the spec's (0: the spec's). */
int64_t pl_scale_batches(const pl_scale *sc, const pl_spec *spec);
/* The run's configuration: fail_batch (given in the pipeline's batches) becomes this shard's
 * count of it (-1: another shard runs it); with MPI, on_batch also looks for a peer's stop
 * notice and turns it into a stop. */
void pl_scale_config(pl_scale *sc, const pl_spec *spec, pl_run_cfg *cfg);
/* Right before the run of plan with cfg (after pl_scale_config): with --mpi-write gather, the
 * sinks bound to memory in cfg and rank 0's files opened (pl_gather_start). An error is this
 * rank's failure: give it to pl_scale_end. */
pl_status pl_scale_start(pl_scale *sc, const pl_plan *plan, pl_run_cfg *cfg, pl_error *err);
/* The name --trace writes: a shard's part of it ("trace.part-K-of-N.json", in buf of cap bytes). */
const char *pl_scale_trace(const pl_scale *sc, const char *trace, char *buf, size_t cap);
/* After the run (st: how it ended on this process; res may be NULL when it never ran, spec too
 * when it never loaded): writes the part manifests; with MPI the world's outcome (see above).
 * Returns st, or what failed after it (a manifest, the merge). */
pl_status pl_scale_end(pl_scale *sc, const pl_spec *spec, const pl_run_result *res, pl_status st,
                       pl_error *err);
/* Before exiting with `rc`: with MPI, the collectives if pl_scale_end did not run (err: why this
 * rank stops, may be NULL), and MPI_Finalize. Returns the exit code: rc, or non-zero when
 * another rank failed. */
int pl_scale_finish(pl_scale *sc, int rc, const pl_error *err);

#endif
