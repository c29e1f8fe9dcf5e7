/* pl_stage: the one small interface every stage kind implements, and the table of kinds.
 * Adding a kind: one file under stages/ defining a `const pl_kind pl_kind_<name>`, plus one line
 * in stages/pl_kinds.c. Nothing outside stages/ asks which kind a stage is: the checker, the plan
 * compiler, both executors, the report, the front ends and the CLI call these hooks and read these
 * fields, so every list of kinds and every key table comes from here. */
/* Layer runtime/core: owns the stage contract (pl_kind, its hooks, typed option access), the
 * checker (pl_check.c) and the plan compiler (pl_plan.h): everything between a pipeline as written
 * and what the executors run, without running it. May include runtime/base, lua and
 * runtime/device; the kinds themselves and their table live above it, in stages/. */
#ifndef PL_STAGE_H
#define PL_STAGE_H

#include "pl_spec.h"

/* Which engine runs a stage: it decides the stream family in the plan. */
typedef enum pl_engine {
    PL_ENGINE_HOST,    /* CPU worker */
    PL_ENGINE_H2D,     /* host-to-device copy engine */
    PL_ENGINE_COMPUTE, /* SMs */
    PL_ENGINE_D2H,     /* device-to-host copy engine */
    PL_ENGINE_COUNT
} pl_engine;

const char *pl_engine_name(pl_engine e); /* "host", "h2d", "compute", "d2h" */

/* Option types. Scalars are written as YAML scalars / Lua strings, numbers or booleans; lists as
 * YAML sequences / Lua arrays. */
typedef enum pl_key_type {
    PL_KEY_STR,         /* any text */
    PL_KEY_PATH,        /* a file path, relative to the pipeline file's directory */
    PL_KEY_INT,         /* 64-bit integer */
    PL_KEY_NUM,         /* floating point */
    PL_KEY_BOOL,        /* true/false */
    PL_KEY_ENUM,        /* one of `values` ("a|b|c") */
    PL_KEY_NAME,        /* one buffer name */
    PL_KEY_NAMES,       /* list of buffer names */
    PL_KEY_INTS,        /* list of integers */
    PL_KEY_INT_OR_INTS, /* an integer or a list of integers (chunks: 4, chunks: [1, 1, 2, 4]) */
    PL_KEY_SIZE,        /* a size in bytes: 4096, 512MiB, 8 GiB, 1.5GB (pl_bytes_parse) */
    PL_KEY_FUNC,  /* a Lua function value: pipeline.lua only. `values` names the key that stands in
                   * for it in the spec, then the keys it excludes ("script|code"): the spec
                   * records the pipeline script there and the runtime finds the function again */
    PL_KEY_MAP,   /* a mapping (the file's sections: run, buffers) */
    PL_KEY_LIST,  /* a list of mappings (the file's stages) */
    PL_KEY_ITEMS, /* list whose items are single values or one-entry mappings {tag: value}, like
                   * kernel args [{f32: 1.5}, {ptr: x_dev}, 3]: pl_opt.item_tags has the tags */
} pl_key_type;

typedef struct pl_key {
    const char *name;
    pl_key_type type;
    const char *values; /* PL_KEY_ENUM: "a|b|c" */
    const char *def;    /* default as text, NULL = required-or-none (documented in `doc`) */
    const char *doc;    /* one line for docs/pipeline-yaml.md and `--help` */
} pl_key;

/* One value of an enum key, with what a stage given it reads and writes (the kernel kind's
 * ops): `pipectl help KIND`, the JSON Schema and docs/pipeline-yaml.md list these. */
typedef struct pl_key_value {
    const char *name;
    const char *reads, *writes; /* the operands, as names ("x, y"; "" none; NULL any) */
    const char *doc;            /* one line */
} pl_key_value;

/* How a stage given value v is written: "reads: [x, y], writes: [z]", "writes: [y]", "any
 * reads/writes, untouched". */
const char *pl_key_value_usage(const pl_key_value *v, char *buf, size_t cap);

/* The keys every stage has, whatever its kind: name, kind, reads, writes, after. */
extern const pl_key pl_common_stage_keys[];

/* The real rows of a run's padded last batch (a source's `last_batch: pad`): the padding sources
 * record them (pl_run_rows_pad, stages/pl_kind_util.h), the sinks that write rows write only
 * those. One per run, shared by its stages; batch -1 while no batch is padded. */
typedef struct pl_run_rows {
    int64_t batch; /* the padded batch, -1 for none (atomic access) */
    int64_t rows;  /* its real rows along the first dimension (the fewest, if several pad);
                    * INT64_MAX while none */
} pl_run_rows;

/* A host buffer bound to the caller's memory for one run (pipectl.h: pipectl_bind_input,
 * pipectl_bind_output, pipectl_bind_output_fn): the source stage that fills it copies each batch
 * from `data` instead of reading its file or running its generator; the sink stage that writes it
 * copies each batch into `data` (or hands it to `fn`) instead of writing a file. `stage` is the
 * one stage the binding replaces, resolved before the run (pl_source_memory_stage,
 * pl_sink_memory_stage). Borrowed from the caller for the whole run. */
typedef struct pl_run_io {
    int buffer; /* index in spec->buffers: a host buffer */
    int stage;  /* the source (input) or sink (output) it stands in for; -1: a persistent
                 * buffer's contents, copied in before the stages open (pl_stage_rt_open) */
    bool output;
    /* Input: batch b (the pipeline's index) is bytes [b * buffer bytes, (b + 1) * buffer bytes).
     * Output: the sink's bytes one after the other, as its file would hold them after its
     * header; NULL with `fn`. */
    void *data;
    uint64_t bytes; /* of data */
    /* Output instead of data: called with each batch's bytes in batch order, from the host worker
     * that runs the sink, one call at a time; nonzero fails the run at that batch. */
    int (*fn)(void *user, const char *buffer, int64_t batch, const void *bytes, size_t n);
    void *user;
    /* Input, set by the executor before the first batch: the stages that read the buffer read
     * the caller's batch where it is (the host executor's buffer table, the GPU's uploads), so
     * the source copies nothing (pl_stage_rt.h says when). */
    bool in_place;
} pl_run_io;

/* Per-run state of one stage, created by `open`, destroyed by `close`. */
typedef struct pl_run_env {
    const struct pl_spec *spec;
    int64_t batches; /* the pipeline's batches (a shard runs some of them: spec->run.shard) */
    int depth;       /* slots */
    int workers;     /* host workers (lua states, search threads) */
    uint64_t seed;
    bool on_gpu; /* the GPU executor runs it (host buffers are pinned) */
    /* The GPU executor's per-device state (runtime/device/pl_gpu.h: cuBLAS, scratch, modules);
     * NULL on the host executor. Borrowed: valid from open() to close(). */
    struct pl_gpu_ctx *gpu;
    /* The run's host thread pool (runtime/base/pl_pool.h): workers - 1 helpers, as the calling
     * worker joins in. Owned by the stage runtime; kinds borrow it and may grow it in open(). */
    struct pl_pool *pool;
    /* During open() only: slot 0's buffers as pl_stage_ctx.bufs has them, so a persistent buffer
     * (its only copy, with its initial contents) can be read, e.g. to precompute over a corpus no
     * stage writes. Per-batch buffers hold nothing yet; on the GPU executor device entries are
     * NULL. NULL outside open() and where the caller has no buffers (bench). */
    void *const *open_bufs;
    /* The run's padded last batch; NULL where the caller runs no padding source (bench, tests
     * that build an env by hand): then no batch is padded. Owned by the stage runtime. */
    pl_run_rows *rows;
    /* The run's in-memory bindings (pl_run_io), n_io of them; NULL and 0 for none. Borrowed
     * from the run's configuration. */
    const pl_run_io *io;
    int n_io;
} pl_run_env;

/* The binding that replaces stage `stage` in this run, or NULL. */
static inline const pl_run_io *pl_run_env_io(const pl_run_env *env, int stage)
{
    for (int i = 0; env && i < env->n_io; i++)
        if (env->io[i].stage == stage) return &env->io[i];
    return NULL;
}

/* What a stage sees when it runs one batch on the host. */
typedef struct pl_stage_ctx {
    const pl_spec *spec;
    const pl_stage *stage;
    const pl_run_env *env;
    int64_t batch; /* the pipeline's index, the same whichever shard runs it */
    int slot;      /* the executor's batch count % depth */
    int worker;    /* 0..env->workers-1: which host worker runs it (selects a lua_State) */
    /* bufs[i]: this slot's memory for buffer i (persistent buffers: their only copy). On the host
     * executor, device buffers are host memory too; on the GPU executor only host buffers are
     * valid here (device entries are NULL). Borrowed from the executor. */
    void *const *bufs;
    void *state; /* from the kind's open(), or NULL */
} pl_stage_ctx;

/* What a device-engine stage sees when the GPU executor records one batch of it on a stream:
 * inside a slot graph's capture (batch -1: the graph replays for every batch of the slot) or as
 * plain launches (--no-graph). Everything is borrowed from the executor. */
typedef struct pl_dev_ctx {
    const pl_spec *spec;
    const pl_stage *stage;
    const pl_run_env *env;
    int64_t batch; /* -1 while capturing */
    int slot;
    void *const *host_bufs; /* this slot's pinned host buffers (device entries NULL) */
    void *const *dev_bufs;  /* this slot's device buffers (host entries NULL) */
    void *stream;           /* cudaStream_t, possibly capturing */
    void *state;            /* from the kind's open(), or NULL */
    /* Chunked stages (stage->chunks > 1): the kind enqueues its batch as stage->chunks row blocks
     * (block j: stage->chunk_rows[j] rows after the blocks before it) in order, calling
     * chunk_wait(ctx, j) before block j's work and chunk_mark(ctx, j) after it (pl_dev_chunk_wait /
     * pl_dev_chunk_mark). The executor turns them into waits on the same block of producers chunked
     * alike, and the events those wait on. NULL: nothing to do. */
    pl_status (*chunk_mark)(const struct pl_dev_ctx *ctx, int j, pl_error *err);
    pl_status (*chunk_wait)(const struct pl_dev_ctx *ctx, int j, pl_error *err);
    void *exec; /* the executor's, for those two */
} pl_dev_ctx;

/* One file a sink wrote (or, without `to`, the checksums it computed): what the report and
 * bundles list. Filled by a kind's `output` hook while the stage is still open. */
/* Per-batch checksums a sink keeps: those of its first batches, up to this many (512 KiB), so a
 * long run's memory stays flat; `checksum` (all bytes, a running hash) covers every batch. */
#define PL_BATCH_CHECKSUMS_MAX (INT64_C(1) << 16)

typedef struct pl_output {
    char stage[PL_MAX_NAME + 1];
    char *path;                /* final file name as opened (NULL: checksums only); owned */
    int64_t batches;           /* batches written, in order */
    uint64_t batch_bytes;      /* bytes per batch */
    uint64_t checksum;         /* pl_hash of all data bytes written (headers excluded) */
    uint64_t *batch_checksums; /* [n_batch_checksums]: pl_hash of each of the first batches'
                                * bytes; owned */
    int64_t n_batch_checksums; /* min(batches, PL_BATCH_CHECKSUMS_MAX) when checksummed */
    bool finalized;            /* the file is complete under its final name */
    bool checksummed;          /* checksums were taken (the sink's `checksum: true`) */
    /* The buffer it writes ("" when several: JSONL fields), and whether it went into the
     * caller's memory (pl_run_io) instead of a file. */
    char buffer[PL_MAX_NAME + 1];
    bool memory;
} pl_output;

/* How reproducible a stage's writes are (bundles: `pipectl replay`; docs/bundles.md). */
typedef enum pl_repro {
    PL_REPRO_EXACT,    /* bit-identical run to run and across executors: the host executor's C
                        * reference gives the GPU's bits */
    PL_REPRO_SAME_GPU, /* bit-identical run to run on one GPU, driver and build (deterministic
                        * reduction order, no unordered float atomics, pinned cuBLAS workspace);
                        * across executors or GPUs within a stated relative tolerance */
} pl_repro;

/* What a stage means for the data flow of a batch (flags): reports count bytes in and out. */
enum { PL_ROLE_INPUT = 1, PL_ROLE_OUTPUT = 2 };

typedef struct pl_kind {
    const char *name;
    pl_engine engine;
    const pl_key *keys; /* kind-specific keys, terminated by {NULL} */
    const char *doc;    /* one line */
    unsigned role;      /* PL_ROLE_* flags: its writes enter the pipeline (sources), its reads
                         * leave it (sinks) */
    /* Called by pl_spec_check after option types are checked and before names resolve: parse
     * options into st->priv (arena memory) and add the reads/writes the options imply. */
    pl_status (*bind)(pl_spec *spec, pl_stage *st, pl_error *err);
    /* Called after names resolve and buffer sizes are known: shapes, dtypes, where. */
    pl_status (*validate)(const pl_spec *spec, const pl_stage *st, pl_error *err);
    /* Optional, check time (pl_spec_check_files, `pipectl check`, `pipectl run` before anything
     * opens): the files a run of `batches` batches will touch. Inputs exist, are readable and
     * hold what the buffers need (dtype, shape, enough batches); outputs can be created. Reads
     * metadata and headers only, creates nothing; errors are PL_EINPUT at the option's position. */
    pl_status (*check_files)(const pl_spec *spec, const pl_stage *st, int64_t batches,
                             pl_error *err);
    /* Optional, for `batches: all` (run until the first source file ends): the whole batches
     * this checked stage's data holds, *n = -1 when it does not end (a generator, `wrap: true`).
     * With `probe` false it reads nothing and only says whether the data ends (*n = 0 when it
     * does): pl_spec_check uses that, check time and run start count (reading the file's size
     * and header, errors as check_files gives them). */
    pl_status (*count_batches)(const pl_spec *spec, const pl_stage *st, bool probe, int64_t *n,
                               pl_error *err);
    /* Optional per-run state (files, corpora, Lua states). close() is always called once open()
     * succeeded, also after an error; `completed` is how many batches finished in order. */
    pl_status (*open)(const pl_run_env *env, const pl_stage *st, void **state, pl_error *err);
    pl_status (*close)(const pl_run_env *env, const pl_stage *st, void *state, int64_t completed,
                       bool failed, pl_error *err);
    /* Runs one batch on the host. Device-engine kinds implement it too: it is the host executor's
     * reference (memcpy, the C version of a kernel op). */
    pl_status (*run_host)(pl_stage_ctx *ctx, pl_error *err);
    /* Device-engine kinds, CUDA builds: enqueue one batch on ctx->stream (a copy, a kernel, a
     * cuBLAS call). Must be capturable: no synchronization, no allocation. NULL for host kinds. */
    pl_status (*record)(const pl_dev_ctx *ctx, pl_error *err);
    /* One line for `pipectl plan` and reports: what this stage does with its options
     * ("scale alpha=2", "x -> x_dev"). Optional. */
    void (*describe)(const pl_spec *spec, const pl_stage *st, char *buf, size_t cap);
    /* Sinks: describe what the open stage wrote (called just before close, with the same
     * `completed`: after a failure, batches past it are taken back by close). *has = false when
     * the stage writes nothing the report lists. Optional. */
    pl_status (*output)(const pl_stage *st, void *state, int64_t completed, pl_output *out,
                        bool *has);
    /* What checking this stage has to tell the user besides errors, one message per line, into
     * buf ("" for nothing): compiler warnings, and with `verbose` what was compiled or found in a
     * cache. The library never prints: the CLI prints these after loading. Optional. */
    void (*notes)(const pl_stage *st, bool verbose, char *buf, size_t cap);
    /* Optional, on a checked stage: the device memory the kind allocates itself on the GPU
     * executor, beyond the pipeline's buffers: *per_slot for each slot (activations, scratch) and
     * *persistent once (a model's weights). run.memory_budget, depth: auto's cap and `pipectl
     * plan` count it, on both executors, so one budget gives one depth. */
    void (*device_memory)(const pl_spec *spec, const pl_stage *st, uint64_t *per_slot,
                          uint64_t *persistent);
    /* Optional, on a checked stage: the floating-point operations (a multiply-add is two) one
     * batch of run_host does, and in *blas how: true when BLAS does them, spread over the run's
     * pool (the host gemm), false for plain C loops on the calling thread (the GPT-2 reference).
     * The host executor's estimate (runtime/exec/pl_host_cost.h) is built on it, so `pipectl run`
     * can refuse GPU-sized work on a machine without a GPU. NULL: cheap (I/O, copies, Lua). */
    double (*host_flops)(const pl_spec *spec, const pl_stage *st, bool *blas);
    /* Stages whose batches must run in batch order (sinks writing one file). */
    bool ordered;
    /* Optional: the values of the enum key `values_key` documented one by one (the kernel's ops),
     * in the order of that key's `values`, terminated by {NULL}. */
    const char *values_key;
    const pl_key_value *values;
    /* Optional: how reproducible this (checked) stage's writes are; for PL_REPRO_SAME_GPU, *tol
     * gets the relative tolerance, norm-wise (||got - want|| <= tol ||want||), that replay allows
     * across executors. NULL: PL_REPRO_EXACT, so a kind whose GPU result is not its host
     * reference's bits (float reductions, cuBLAS, a model's forward) must set it, or replay of its
     * GPU bundles on the host reports a mismatch. */
    pl_repro (*repro)(const pl_spec *spec, const pl_stage *st, double *tol);
} pl_kind;

/* The kinds, in table order (stages/pl_kinds.c), NULL-terminated; *n gets their count. */
const pl_kind *const *pl_kinds(int *n);
/* The kind called `name`, or NULL. */
const pl_kind *pl_kind_find(const char *name);
/* Their names in table order (for "must be one of" messages and schemas). */
const char *const *pl_kind_names(int *n);
/* "source, search, h2d, ..." (static; for messages). */
const char *pl_kind_list(void);
/* The key definition for `key` in `kind` (common keys included), or NULL. */
const pl_key *pl_kind_key(const pl_kind *kind, const char *key);

/* Typed option access for bind hooks. Errors point at the value's position. */
pl_status pl_opt_get_int(const pl_stage *st, const char *key, int64_t def, int64_t min, int64_t max,
                         int64_t *out, pl_error *err);
pl_status pl_opt_get_num(const pl_stage *st, const char *key, double def, double *out,
                         pl_error *err);
pl_status pl_opt_get_bool(const pl_stage *st, const char *key, bool def, bool *out, pl_error *err);
/* Index of the option's value in the key's `values` list, or `def` when absent. */
pl_status pl_opt_get_enum(const pl_stage *st, const char *key, int def, int *out, pl_error *err);
const char *pl_opt_get_str(const pl_stage *st, const char *key, const char *def);
/* Checks every option of `st` against its kind's key table: unknown keys (with "did you mean"),
 * scalars where lists belong and back, and values that do not parse as the key's type. */
pl_status pl_stage_check_opts(const pl_spec *spec, const pl_stage *st, pl_error *err);

#endif
