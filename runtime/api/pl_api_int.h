/* pl_api_int: what the API's files share (pl_api.c, pl_api_io.c, pl_api_stats.c), and its run
 * driver, which `pipectl run` calls too (runtime/cli/cmd_run.c): a run of the CLI and one of
 * pipectl_run_with go through the same function. Not installed: embedders see pipectl.h only. */
#ifndef PL_API_INT_H
#define PL_API_INT_H

#include "pl_exec.h"

/* Bindings one handle holds (pipectl_bind_*) at most. */
#define PL_API_MAX_BINDS 64

/* A binding as the caller gave it: by buffer name, checked against a plan when its run starts
 * (pl_api_run). data and user are borrowed from the caller. */
typedef struct pl_api_bind {
    char name[PL_MAX_NAME + 1];
    bool output;
    void *data; /* NULL for an output with fn */
    uint64_t bytes;
    int (*fn)(void *user, const char *buffer, long long batch, const void *data, size_t bytes);
    void *user;
} pl_api_bind;

/* Runs `plan` as pl_run does, with the n bindings `binds` (may be 0): each one is resolved first
 * to the source or sink stage it replaces and checked against the plan's buffers and batches
 * (PL_EINPUT naming the buffer, before anything runs: res is then untouched but for zeroes), then
 * handed to the stages through the run's configuration for the run. */
pl_status pl_api_run(const pl_plan *plan, const pl_run_cfg *cfg, const pl_api_bind *binds, int n,
                     pl_run_result *res, pl_error *err);

/* The summary's figures of a run, kept in a result so it outlives its plan (pl_api_stats.c). */
typedef struct pl_api_stage_stats {
    char name[PL_MAX_NAME + 1];
    char stream[32];
    const char *kind, *engine; /* static */
    int64_t count;
    double mean_s, p50_s, p99_s, min_s, max_s, total_s, busy;
} pl_api_stage_stats;

typedef struct pl_api_engine_stats {
    char name[32];
    const char *engine; /* static */
    int stages;
    int64_t timed;
    double busy_s, per_batch_s, occupancy;
} pl_api_engine_stats;

typedef struct pl_api_stats {
    double wall_s, per_batch_s, steady_per_batch_s, batches_per_s;
    uint64_t bytes_in, bytes_out;
    double bound_s, achieved;                            /* -1: not measured */
    char bound_engine[32], bound_stage[PL_MAX_NAME + 1]; /* "" when none */
    int depth;
    pl_api_stage_stats *stages; /* [n_stages], in plan order; owned */
    int n_stages;
    pl_api_engine_stats *engines; /* [n_engines]; owned */
    int n_engines;
} pl_api_stats;

/* Fills *out from a run of plan (the report's figures: pl_report.h, pl_engines.h). PL_ENOMEM. */
pl_status pl_api_stats_fill(const pl_plan *plan, const pl_run_result *res, pl_api_stats *out,
                            pl_error *err);
void pl_api_stats_fini(pl_api_stats *s);

#endif
