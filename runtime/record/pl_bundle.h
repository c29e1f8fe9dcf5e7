/* pl_bundle: capture bundles (a folder that keeps everything that makes a run's result what it
 * is) and their replay and comparison (`pipectl capture`, `replay`, `diff`; docs/bundles.md has
 * the format field by field). The library writes and compares; the CLI prints.
 *
 * Ownership: a pl_bundle owns its manifest; results own their arrays (free with the _fini
 * functions, which accept zeroed records). */
/* Layer runtime/record: owns what a run leaves behind for people and for later runs: the
 * end-of-run report, the trace, capture bundles with their replay and comparison, the recorded
 * environment, the canonical YAML and the plan listings. May include every layer up to
 * runtime/exec/gpu (a replay runs the plan again). */
#ifndef PL_BUNDLE_H
#define PL_BUNDLE_H

#include "pl_run.h"
#include "pl_json.h"
#include "pl_parse.h"
#include "pl_sha256.h"

/* The manifest's format: "schema": "pipectl-bundle", "schema_version": 1. */
#define PL_BUNDLE_SCHEMA "pipectl-bundle"
#define PL_BUNDLE_SCHEMA_VERSION 1

/* The plan as JSON: streams, stages (engine, stream, preds, segment), events, cross-batch deps,
 * segments, memory; no file names or positions, so the original and the canonical pipeline give
 * the same object. New reference, NULL on OOM. */
json_t *pl_plan_json(const pl_plan *plan);
/* SHA-256 of pl_plan_json, compact, as hex. */
pl_status pl_plan_digest(const pl_plan *plan, char hex[PL_SHA256_HEX], pl_error *err);

typedef struct pl_capture_cfg {
    const char *file; /* the pipeline (YAML or Lua) */
    const char *dir;  /* the bundle folder: created; must not exist or be empty */
    int64_t batches;  /* > 0: overrides run.batches; -1: all (until the first source file ends) */
    int depth;        /* > 0: overrides run.depth; PL_DEPTH_AUTO: depth: auto */
    pl_run_cfg run;   /* executor (AUTO is resolved here), graphs, timing, workers, stop */
    int reps;         /* runs, >= 1: the spread of their stage times is the recorded noise */
    bool copy_inputs, copy_outputs;
    const char *command; /* the command line, recorded as it was (may be NULL) */
    /* --set (the manifest lists them; the bundled pipeline.yaml has them applied, so a replay
     * needs none), --out-dir (where the runs' sinks write; made before the first run) and
     * --confine, applied as the pipeline loads. */
    pl_load_opts load;
    /* A shard of a larger run (`capture --shard K/N`, `--mpi`): called on the loaded pipeline
     * before its plan is compiled, to set run.shard (and the rank's run.device). The shard is
     * recorded in the manifest ("shard"), so replay runs the same batches. NULL: the whole run. */
    pl_status (*adjust)(void *user, pl_spec *spec, pl_error *err);
    void *adjust_user;
    /* With MPI, this rank of the world, recorded in the manifest ("rank"); NULL otherwise. */
    const struct pl_capture_rank *rank;
} pl_capture_cfg;

/* One rank of an MPI world, as a bundle records it. */
typedef struct pl_capture_rank {
    int rank, size;             /* MPI_COMM_WORLD */
    int local_rank, local_size; /* among the ranks of its host */
    const char *host;           /* borrowed */
} pl_capture_rank;

typedef struct pl_capture_info {
    const char *executor; /* "host" / "gpu" (static) */
    char note[96];        /* what `--executor auto` picked, or "" */
    int64_t batches_done;
    int reps, n_inputs, n_outputs, n_graphs;
    /* The reps' checksums: all equal, or the first sink and batch that differed between runs. */
    bool reps_identical;
    char reps_sink[PL_MAX_NAME + 1];
    int64_t reps_batch;
    char spec_digest[PL_SHA256_HEX], plan_digest[PL_SHA256_HEX];
    /* The last run's result, owned (pl_capture_info_fini) like spec: a shard's part manifests
     * are written from them. Zeroed when no run completed. */
    pl_run_result last;
    pl_spec *spec; /* the pipeline as run (owned; NULL when it did not load) */
} pl_capture_info;

/* Frees what *info owns; accepts a zeroed one. */
void pl_capture_info_fini(pl_capture_info *info);

/* Runs the pipeline cfg->reps times and writes the bundle (manifest.json last, so a folder with a
 * manifest is complete). A failed run fails the capture with its status; the folder then has no
 * manifest. */
pl_status pl_bundle_capture(const pl_capture_cfg *cfg, pl_capture_info *info, pl_error *err);

typedef struct pl_bundle {
    char *dir;
    int fd; /* the folder, open: every file of the bundle is opened from it */
    json_t *manifest;
} pl_bundle;

/* Reads DIR/manifest.json and checks its schema and version, then that the bundle is closed:
 * every path the manifest names (files, inputs and outputs bundled, the pipeline, the plan, the
 * trace, the graphs) is relative, stays in the folder, and is a regular file reached through
 * folders only (a missing one is for replay to report). PL_EINPUT (exit 2) with a message that
 * says what is wrong: not a bundle, corrupt JSON (with line and column), another version, a path
 * out of the bundle ("../x (the manifest's files[3].path) climbs out of the bundle"), a symlink
 * ("inputs/0-in.raw is a symlink to /etc/shadow: a bundle holds regular files only"), a FIFO or
 * a device; nothing is opened through those. */
pl_status pl_bundle_open(const char *dir, pl_bundle **out, pl_error *err);
void pl_bundle_free(pl_bundle *b);

/* Opens the bundle's file rel for reading without following a symlink on the way: *fd, to close.
 * Refuses (PL_EINPUT, naming it) a symlink, a FIFO, a device, a socket, a folder, an absolute
 * path or one that climbs out with '..', before opening it. A missing file is PL_EIO with
 * *missing set (missing may be NULL). Every reader of a bundle opens its files through this. */
pl_status pl_bundle_file_open(const pl_bundle *b, const char *rel, int *fd, bool *missing,
                              pl_error *err);
/* The whole of the bundle's file rel (pl_bundle_file_open), at most max bytes (else PL_EINPUT),
 * NUL-terminated in *text (owned by the caller, free it). */
pl_status pl_bundle_file_read(const pl_bundle *b, const char *rel, size_t max, char **text,
                              size_t *len, bool *missing, pl_error *err);

/* One file whose SHA-256 is not the recorded one (or that is missing). */
typedef struct pl_file_check {
    char path[512]; /* as checked: relative to the bundle, or an absolute input path */
    char what[160]; /* "input of stage 'gen' (file)", "bundled file" */
    bool missing;
    char want[PL_SHA256_HEX], got[PL_SHA256_HEX];
} pl_file_check;

typedef enum pl_sink_verdict {
    PL_SINK_MATCH,      /* every batch's checksum is the recorded one */
    PL_SINK_DIFFER,     /* a batch differs (or the batch counts differ) */
    PL_SINK_WITHIN_TOL, /* not bit-identical, as allowed across executors (pl_repro), and the
                         * copied output is within the stated tolerance */
    PL_SINK_UNVERIFIED, /* differs where bits may differ, but no copied output to compare */
    PL_SINK_ABSENT,     /* the sink is in one record only */
    PL_SINK_UNCHECKED,  /* a sink with `checksum: false`: nothing to compare */
} pl_sink_verdict;

typedef struct pl_sink_cmp {
    char stage[PL_MAX_NAME + 1];
    int64_t batches_a, batches_b;
    int64_t n_differ;    /* batches whose checksums differ (missing ones count) */
    int64_t first_batch; /* first differing batch, -1 when none */
    uint64_t first_a, first_b;
    bool exact;     /* bit-identical by design across executors (pl_repro) */
    double tol;     /* when not exact */
    double rel_err; /* PL_SINK_WITHIN_TOL / DIFFER after a compare of copied outputs; -1 if none */
    pl_sink_verdict verdict;
} pl_sink_cmp;

typedef struct pl_stage_cmp {
    char name[PL_MAX_NAME + 1];
    char engine[16];
    bool in_a, in_b;
    int64_t count_a, count_b;
    double mean_a, p50_a, p99_a, mean_b, p50_b, p99_b;
    double noise; /* A's recorded run-to-run spread of the p50 (relative), -1 when unknown */
    double band;  /* the relative band the p50 ratio may stray from 1 within noise: max(2 noise,
                   * 0.05); -1 when unknown */
    bool beyond;  /* |p50_b / p50_a - 1| > band */
} pl_stage_cmp;

typedef struct pl_env_diff {
    char key[96]; /* "gpu.name", "pipectl.commit", "plan.digest" */
    char a[192], b[192];
} pl_env_diff;

/* What two records (a bundle and a replay, or two bundles) have in common and not. */
typedef struct pl_compare {
    pl_sink_cmp *sinks;
    int n_sinks;
    int64_t n_differ; /* batches that differ, over all sinks (DIFFER and UNVERIFIED) */
    int first_sink;   /* index into sinks of the first difference (lowest batch, then sink
                       * order), -1 when none */
    pl_stage_cmp *stages;
    int n_stages;
    pl_env_diff *env;
    int n_env;
} pl_compare;

void pl_compare_fini(pl_compare *c);

typedef struct pl_replay_cfg {
    pl_run_cfg run;        /* executor: PL_EXEC_AUTO means the recorded one */
    bool workers_given;    /* else the recorded worker count */
    bool graph_mode_given; /* else the recorded graph mode (run.graph_mode) */
    int reps;              /* >= 1; the median of their stage means is compared */
    bool allow_changed_inputs;
    const char *out_dir; /* where the replay's outputs go (kept); NULL: a temporary folder,
                          * removed afterwards */
} pl_replay_cfg;

typedef struct pl_replay_result {
    pl_file_check *changed; /* inputs and bundled files that differ from their recorded hashes */
    int n_changed;
    const char *executor_rec; /* borrowed from the manifest */
    const char *executor;     /* what ran now (static) */
    char note[160];           /* e.g. "recorded on gpu, replayed on host: ..." or "" */
    int64_t batches_done;
    pl_compare cmp;  /* a = recorded, b = now */
    char **warnings; /* lines for stderr: a sink of the bundled pipeline that writes outside the
                      * bundle, or whose file in the replay folder leads elsewhere (a link) */
    int n_warnings;
} pl_replay_result;

void pl_replay_result_fini(pl_replay_result *r);

/* Checks the inputs and bundled files, runs the bundled pipeline, compares. PL_OK when it ran
 * (whatever the comparison says: r->cmp tells); PL_EINPUT naming the first changed input when
 * inputs changed and cfg->allow_changed_inputs is false (r->changed lists all of them); the run's
 * status when it failed. */
pl_status pl_bundle_replay(const pl_bundle *b, const pl_replay_cfg *cfg, pl_replay_result *r,
                           pl_error *err);

/* Compares two bundles without running anything (`pipectl diff`): sinks, stage times,
 * environment, spec and plan digests. Text differences of pipeline.yaml and plan.txt are the
 * CLI's to show (the files are in the folders). */
pl_status pl_bundle_diff(const pl_bundle *a, const pl_bundle *b, pl_compare *c, pl_error *err);

/* dir/rel into buf; rel unchanged when absolute. */
const char *pl_bundle_path(const char *dir, const char *rel, char *buf, size_t cap);

#endif
