/* pl_spec: the pipeline as written, resolved: buffers, stages, run options. Both front ends
 * (parser/pl_yaml.c, parser/pl_lua_front.c) build it through the functions below; check
 * (pl_check.c) resolves names and validates; the plan compiler (pl_plan.c) reads it.
 *
 * Ownership: a pl_spec owns everything reachable from it, allocated in its arena. Strings stored
 * in a spec (names, file names, option values) are interned copies; pointers into a spec stay
 * valid until pl_spec_free. */
#ifndef PL_SPEC_H
#define PL_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pl_shard.h"
#include "pl_status.h"

/* Documented limits (docs/pipeline-yaml.md). */
#define PL_MAX_RANK 8
#define PL_MAX_BUFFER_BYTES (UINT64_C(1) << 36) /* 64 GiB per buffer (per slot) */
#define PL_MAX_NAME 64                          /* bytes in a buffer or stage name */
#define PL_MAX_STAGES 100000
#define PL_MAX_BUFFERS 100000
#define PL_MAX_DEPTH 64   /* slots in flight */
#define PL_MAX_NESTING 16 /* YAML/Lua nesting depth */
#define PL_MAX_BATCHES (INT64_C(1) << 40)
#define PL_MAX_CHUNKS 64      /* row blocks of one chunked stage */
#define PL_MAX_LOOP INT32_MAX /* iterations of one loop per batch (its counters are i32) */
#define PL_MAX_PARALLEL 64    /* batches of one stage at once (`parallel`): the host workers' cap */

typedef enum pl_where { PL_HOST, PL_DEVICE } pl_where;

typedef enum pl_dtype {
    PL_U8,
    PL_I32,
    PL_I64,
    PL_F16,
    PL_BF16,
    PL_F32,
    PL_F64,
    PL_DTYPE_COUNT
} pl_dtype;

size_t pl_dtype_size(pl_dtype t);
const char *pl_dtype_name(pl_dtype t);
/* Returns true and sets *out when `s` names a dtype ("u8", "i32", "i64", "f16", "bf16", "f32",
 * "f64"). */
bool pl_dtype_parse(const char *s, pl_dtype *out);
bool pl_dtype_is_float(pl_dtype t);
const char *pl_where_name(pl_where w);

/* How a buffer starts out. Per-batch buffers with PL_INIT_NONE must be written by a stage of the
 * batch before anything reads them (checked). */
typedef enum pl_init {
    PL_INIT_NONE,
    PL_INIT_ZEROS,
    PL_INIT_RANDOM, /* seeded: run seed, buffer index: see pl_rng.h */
    PL_INIT_FILE,   /* raw bytes or .npy, exactly the buffer's size */
} pl_init;

typedef struct pl_buffer {
    const char *name;
    pl_pos pos; /* of the name */
    int index;  /* position in spec->buffers */
    pl_where where;
    pl_pos where_pos;
    pl_dtype dtype;
    pl_pos dtype_pos;
    int rank;
    int64_t shape[PL_MAX_RANK];
    pl_pos shape_pos;
    bool persistent; /* one copy for the whole run; otherwise one per slot */
    pl_pos persistent_pos;
    pl_init init;
    const char *init_file; /* PL_INIT_FILE */
    pl_pos init_pos;
    /* Filled by pl_spec_check: */
    int64_t count; /* elements */
    uint64_t bytes;
} pl_buffer;

/* A stage option as written: a scalar (text) or a list of scalars. Typing happens against the
 * stage kind's key table (runtime/core/pl_stage.h), so YAML and Lua give identical options. */
typedef struct pl_opt {
    const char *key;
    pl_pos pos; /* of the key */
    bool is_list;
    const char *str; /* scalar text (NULL for a list) */
    pl_pos val_pos;
    int n_items;
    const char **items;
    pl_pos *item_pos;
    const char **item_tags; /* [n_items]: an item's tag when written {tag: value}, else NULL */
} pl_opt;

/* A reference by name to a buffer or stage; `index` is -1 until pl_spec_check resolves it. */
typedef struct pl_ref {
    const char *name;
    pl_pos pos;
    int index;
} pl_ref;

/* A stage's kind: its whole behaviour (runtime/core/pl_stage.h). The spec only points at it, so
 * adding a kind changes nothing here. */
struct pl_kind;

/* A loop (docs/pipeline-yaml.md, "Loops"): a stage of its own in spec->stages whose body is the
 * stages right after it that name it as their parent, [first, first + n_body). Each batch runs
 * the body, its stages one after another, while the iterations done are below `count` (when
 * given) and `max`, and the `while` buffer (when given) is nonzero, tested before every
 * iteration; before each test the loop writes the iterations done into `index` (when given).
 * The front end fills it; pl_spec_check resolves the refs and gives the loop stage the reads and
 * writes of its body. Arena memory, owned by the spec. */
/* A loop's `stream:` (docs/pipeline-yaml.md, "loop.stream"): after every `every` iterations, and
 * after the last, the columns of `from` [B, N, ...] written since the last delivery (the step axis
 * is its second dimension: iteration i writes column start + i, the columns before `start` are
 * written before the loop) go to `to` as records, in order, per batch. The front end fills it;
 * pl_loop_check resolves the refs and checks it. Arena memory, owned by the spec. */
typedef enum pl_stream_format { PL_STREAM_AUTO, PL_STREAM_JSONL, PL_STREAM_RAW } pl_stream_format;

typedef struct pl_loop_stream {
    pl_pos pos;    /* of the `stream:` value */
    int64_t every; /* 1..PL_MAX_LOOP (0 until given) */
    pl_pos every_pos;
    pl_ref from;    /* the buffer a body stage writes, [B, N, ...], where the body runs */
    const char *to; /* path as written, "-" for stdout; NULL until given */
    pl_pos to_pos;
    pl_stream_format format; /* pl_loop_check resolves auto by `to`'s extension */
    pl_pos format_pos;
    int64_t start; /* the column iteration 0 writes: 0..N (default 1) */
    pl_pos start_pos;
    pl_ref finished;   /* an i32 [B] buffer, 1 once a row ended; name NULL when not given */
    const char *vocab; /* jsonl: the tokenizer whose text replaces the ids; NULL: none */
    pl_pos vocab_pos;
    bool skip_special; /* with vocab: <|endoftext|> gives no text */
    pl_pos skip_special_pos;
} pl_loop_stream;

typedef struct pl_loop {
    int64_t max; /* 1..PL_MAX_LOOP: the bound */
    pl_pos max_pos;
    int64_t count; /* 1..max, or 0: no fixed count */
    pl_pos count_pos;
    pl_ref cond;  /* `while`: an i32 [1] buffer; name NULL when not given */
    pl_ref index; /* an i32 [1] buffer the loop writes; name NULL when not given */
    int first, n_body;
    pl_pos pos;             /* of the `loop:` key */
    pl_loop_stream *stream; /* `stream:`, or NULL */
} pl_loop;

typedef struct pl_stage {
    const char *name;
    pl_pos pos; /* of the stage (its name) */
    int index;
    const struct pl_kind *kind; /* static, from the kind table; NULL until the front end sets it */
    pl_pos kind_pos;
    pl_opt *opts; /* kind-specific options, in the order written */
    int n_opts, cap_opts;
    /* reads/writes as written, plus those the kind derives from its options (h2d `from`/`to`,
     * search `corpus`, ...): filled by pl_spec_check through the kind's bind hook. */
    pl_ref *reads;
    int n_reads, cap_reads;
    pl_ref *writes;
    int n_writes, cap_writes;
    pl_ref *after;
    int n_after, cap_after;
    void *priv; /* the kind's parsed options, owned by the spec (allocated in its arena) */
    /* `chunks: N` or `chunks: [1, 1, 2, 4]` (kinds that take it: h2d, d2h, gpt2): the GPU
     * executor issues the batch as row blocks along the first dimension (the first chunk_dims
     * dimensions taken as one), N equal ones or one per
     * entry with that many rows, in order, and a consumer chunked the same way starts on block j
     * as soon as its producer has finished it (docs/pipeline-yaml.md). chunks: the blocks; 0 or 1:
     * one block. The kind's bind (pl_kind_bind_chunks) sets chunks, chunks_listed, chunks_pos,
     * chunks_read and, for a list, chunk_rows as written; pl_spec_check then checks them against
     * the rows they cut and normalises both forms into chunk_rows, because only then are the
     * rows known, and because "chunked alike" (pl_plan_chunk_linked) and the kinds' block
     * offsets are then one comparison and one prefix sum whichever form was written. */
    int chunks;
    const int64_t *chunk_rows; /* [chunks] once checked (NULL when chunks <= 1): rows of block j */
    bool chunks_listed;        /* written as a list: descriptions say "1+1+2+4", not "4" */
    int chunks_read;           /* the read whose first dimension the blocks cut (chunks: given) */
    /* `chunk_dims: k`: a block's rows are rows of chunks_read's first k dimensions (1: the first
     * dimension; 2 on ids [B, T]: positions, so a block may be part of a sequence). Set by bind. */
    int chunk_dims;
    pl_pos chunks_pos;
    /* An ordered kind (pl_kind.ordered) whose user said its batches may run at once (gpt2
     * `ordered: false`): the plan then leaves out the kind's batch-order wait, and on the GPU the
     * stage's work for different slots may share the device. Set by the kind's bind. */
    bool unordered;
    /* Loops: a loop stage points at its loop (kind pl_kind_loop_*, runtime/core/pl_stage.h); a
     * stage of a loop's body has the loop stage's index as its parent, every other stage -1. */
    pl_loop *loop;
    int parent;
    /* `parallel: N` (host kinds whose run_host is reentrant: lua, search, tokenize, detokenize;
     * pl_kind_bind_parallel): up to N batches of the stage run at once, each on its own host
     * worker (a lua stage: each worker's own Lua state), finishing in any order while everything
     * after it still sees them in batch order. The plan gives it a stream of its own. 0 or 1: one
     * batch at a time. Set by bind. */
    int parallel;
} pl_stage;

/* run.memory_budget (docs/pipeline-yaml.md): the most bytes the plan's buffers may take on each
 * side, every slot and the persistent buffers together; 0 on a side = no limit there. The GPU
 * executor's host buffers are pinned, so `host_pinned` bounds them (on the host executor the same
 * sizes are plain memory: the same budget gives the same depth on both). */
typedef struct pl_budget {
    bool set;
    pl_pos pos; /* of the memory_budget value */
    uint64_t device, host_pinned;
    pl_pos device_pos, host_pos;
} pl_budget;

/* run.loop, in the order of its schema values: how the GPU executor runs a loop whose body is
 * device stages (docs/architecture.md, "Loops"). */
typedef enum pl_loop_mode { PL_LOOP_DEVICE = 0, PL_LOOP_HOST = 1 } pl_loop_mode;

/* run.gpu_wait, in the order of its schema values. */
typedef enum pl_gpu_wait { PL_GPU_WAIT_POLL = 0, PL_GPU_WAIT_SLEEP = 1 } pl_gpu_wait;

typedef struct pl_run_opts {
    int64_t batches; /* default 16; with batches_all, 0 until pl_spec_resolve_batches */
    pl_pos batches_pos;
    bool batches_all; /* `batches: all`: as many as the shortest source file holds */
    int batches_from; /* after pl_spec_resolve_batches: the stage that set the count, or -1 */
    int depth;        /* slots in flight; default 4 (docs/perf.md); ignored when depth_auto */
    pl_pos depth_pos;
    bool depth_auto; /* depth: auto: chosen at run time (runtime/exec/pl_depth.h) */
    pl_budget budget;
    int device; /* CUDA device ordinal; default 0 */
    pl_pos device_pos;
    uint64_t seed; /* default 0 */
    pl_pos seed_pos;
    /* GPU executor: per-stage completion marks in the graphs, so a device fault names its stage
     * for certain (they cost copy/compute overlap: runtime/exec/gpu/pl_gpu_capture.c); default
     * false. `pipectl run --fault-marks` sets it. */
    bool fault_marks;
    /* GPU executor: while host stages gate a launch, the issue loop polls the device (default)
     * or sleeps until a device completion wakes it (runtime/exec/gpu/pl_gpu_launch.c). */
    pl_gpu_wait gpu_wait;
    /* GPU executor: a device loop is a conditional WHILE node in the slot's graph (device, the
     * default) or its body's graph launched from the host once per iteration (host). */
    pl_loop_mode loop_mode;
    /* Every file path the pipeline names stays inside its folder or out_dir, checked as it loads
     * (parser/pl_confine.c); `pipectl run --confine` sets it. Default false. */
    bool confine;
    pl_pos confine_pos;
    /* Which batches this process runs: index and count from `pipectl run --shard K/N` or the MPI
     * rank (never from the file: every shard reads the same pipeline), mode from run.shard_mode.
     * `batches` stays the pipeline's count; the plan of a shard has pl_shard_batches of them, and
     * the stage runtime maps each to its index here (pl_shard.h). Off (count 0) by default. */
    pl_shard shard;
} pl_run_opts;

typedef struct pl_arena pl_arena;

typedef struct pl_spec {
    const char *name; /* pipeline name; default: file's base name */
    const char *file; /* path of the pipeline file, as given */
    const char *dir;  /* its directory: relative paths in options resolve against it */
    /* `--out-dir`: sinks' relative paths resolve against it instead (pl_spec_out_path); relative
     * to the working directory. NULL: dir. */
    const char *out_dir;
    pl_buffer *buffers;
    int n_buffers, cap_buffers;
    pl_stage *stages;
    int n_stages, cap_stages;
    pl_run_opts run;
    bool checked;
    pl_arena *arena;
} pl_spec;

/* Lifecycle. pl_spec_new sets run-option defaults and file/dir/name from `file` (may be NULL). */
pl_status pl_spec_new(const char *file, pl_spec **out, pl_error *err);
void pl_spec_free(pl_spec *spec); /* NULL is fine */

/* Arena allocation, zeroed; freed with the spec. Abort-free: returns NULL on OOM. */
void *pl_spec_alloc(pl_spec *spec, size_t bytes);
const char *pl_spec_strdup(pl_spec *spec, const char *s);
const char *pl_spec_strndup(pl_spec *spec, const char *s, size_t n);

/* Builders used by the front ends. Returned pointers stay valid only until the next add of the
 * same kind (arrays grow): finish filling one element before adding the next. NULL on OOM. */
pl_buffer *pl_spec_add_buffer(pl_spec *spec, const char *name, pl_pos pos);
pl_stage *pl_spec_add_stage(pl_spec *spec, const char *name, pl_pos pos);
pl_opt *pl_stage_add_opt(pl_spec *spec, pl_stage *st, const char *key, pl_pos pos);
pl_status pl_opt_add_item(pl_spec *spec, pl_opt *opt, const char *text, pl_pos pos);
/* An item written as a one-entry mapping {tag: text} (PL_KEY_ITEMS keys). */
pl_status pl_opt_add_tagged_item(pl_spec *spec, pl_opt *opt, const char *tag, const char *text,
                                 pl_pos pos);
pl_ref *pl_stage_add_read(pl_spec *spec, pl_stage *st, const char *name, pl_pos pos);
pl_ref *pl_stage_add_write(pl_spec *spec, pl_stage *st, const char *name, pl_pos pos);
pl_ref *pl_stage_add_after(pl_spec *spec, pl_stage *st, const char *name, pl_pos pos);
/* Makes st a loop stage (st->loop, zeroed, in the arena): the front end fills it and adds its
 * body stages after it with parent = st->index. NULL on OOM. */
pl_loop *pl_stage_make_loop(pl_spec *spec, pl_stage *st, pl_pos pos);

/* The 64 GiB rule, written once (the front ends and pl_spec_check call it): the element count of
 * b's shape against int64 and count * dtype size against PL_MAX_BUFFER_BYTES. PL_OK and *count,
 * or PL_EINPUT at b->shape_pos naming the buffer. The shape's dimensions must be >= 1. */
pl_status pl_buffer_count(const pl_buffer *b, uint64_t *count, pl_error *err);

/* A size in bytes as written in a pipeline: a whole number of bytes ("4096"), or a number and a
 * unit, with or without a space: KiB, MiB, GiB, TiB (powers of 1024), kB, MB, GB, TB (powers of
 * 1000), B ("8GiB", "1.5 GiB", "512MiB"). false on anything else, or past 2^64-1. */
bool pl_bytes_parse(const char *s, uint64_t *out);
/* "1.2 GiB" (one decimal, binary units; "512 B" below 1 KiB) into buf. Returns buf. */
const char *pl_bytes_str(uint64_t bytes, char *buf, size_t cap);

/* Bytes of the spec's buffers (checked sizes): one slot of the per-batch ones, and the persistent
 * ones, on each side. The plan compiler adds the device memory stage kinds allocate themselves
 * (pl_kind.device_memory) to the device totals and repeats it in stage_* (0 here). */
typedef struct pl_mem_sizes {
    uint64_t host_per_slot, device_per_slot;
    uint64_t host_persistent, device_persistent;
    uint64_t stage_per_slot, stage_persistent; /* device, included above */
} pl_mem_sizes;
void pl_spec_mem_sizes(const pl_spec *spec, pl_mem_sizes *out);
/* The most slots run.memory_budget allows for these sizes (persistent + depth x per slot on each
 * side within its budget), at most PL_MAX_DEPTH; PL_MAX_DEPTH without a budget. *side (may be
 * NULL) = the side that limits it ("device", "host_pinned"), or NULL when nothing does. 0 when even
 * one slot does not fit. */
int pl_budget_max_depth(const pl_spec *spec, const pl_mem_sizes *m, const char **side);
/* PL_OK when `depth` slots of these sizes fit run.memory_budget; else PL_EINPUT at the budget
 * entry that is too small, with the sizes and what to change. */
pl_status pl_budget_check(const pl_spec *spec, const pl_mem_sizes *sizes, int depth, pl_error *err);

/* n integers as the DSL writes a shape or a list, "[4, 1024]", into buf; one that does not fit
 * ends "...]" (cap >= 5). Returns buf. */
const char *pl_dims_str(const int64_t *v, int n, char *buf, size_t cap);

/* A chunked stage's blocks as descriptions show them into buf: "4" (chunks: 4) or "1+1+2+4" (a
 * list). Returns buf. */
const char *pl_stage_chunks_str(const pl_stage *st, char *buf, size_t cap);

/* Lookups (linear or hashed; -1 when absent). */
int pl_spec_find_buffer(const pl_spec *spec, const char *name);
int pl_spec_find_stage(const pl_spec *spec, const char *name);
const pl_opt *pl_stage_opt(const pl_stage *st, const char *key); /* NULL when not given */

/* Resolves and validates the whole spec (pl_check.c): duplicate names, buffer sizes and caps,
 * each kind's options (bind hook), names in reads/writes/after, copy endpoints, cycles, hazards,
 * reads of never-written per-batch buffers, run options. The first error wins. */
pl_status pl_spec_check(pl_spec *spec, pl_error *err);

struct pl_diags;
/* pl_spec_check that lists every error it finds in `diags` (pl_diag.h; may be NULL: then it is
 * pl_spec_check): all bad buffers, all bad stage declarations, all stages whose names, engines or
 * kind rules fail, in one pass (a stage that touches a bad buffer, or whose declaration failed,
 * is not checked further); the whole-pipeline checks (batches: all, hazards, cycles) run only
 * when nothing else failed. *err is the first error, the one pl_spec_check returns. */
pl_status pl_spec_check_all(pl_spec *spec, struct pl_diags *diags, pl_error *err);

/* `batches: all` (run.batches_all): sets run.batches to the whole batches the shortest file
 * source holds (stages whose kind's count_batches says their data ends) and run.batches_from to
 * that stage; a no-op otherwise. Reads the files' headers and sizes; a file it cannot use gives
 * the error its check_files gives (PL_EINPUT at the stage's file:line:col). Call it on a checked
 * spec, before pl_spec_check_files and planning: check, plan, run and capture do. */
pl_status pl_spec_resolve_batches(pl_spec *spec, pl_error *err);

/* Check-time validation of the files a run of `batches` batches will touch, before anything
 * runs: every `init: file` buffer and every stage kind's check_files hook (source inputs exist,
 * are readable, have the buffer's dtype and shape and enough batches; sink targets can be written
 * and are not directories). Errors are PL_EINPUT with the stage's or buffer's file:line:col; all
 * of them go to `diags` (may be NULL), the first to *err. The spec must be checked. Reads only
 * headers and metadata; creates nothing. */
pl_status pl_spec_check_files(const pl_spec *spec, int64_t batches, struct pl_diags *diags,
                              pl_error *err);

/* Warnings (pl_diag.h, severity warning, status PL_ENOMEM) when the persistent buffers alone
 * take more than `host_bytes` of memory (the machine's physical memory, pl_host_memory; 0: no
 * check), naming the largest of them with their sizes, at the largest one's position. On the host
 * executor every buffer is host memory; on the GPU executor device buffers are not: their limit,
 * the GPU's memory, is pl_spec_check_device_memory's. The spec must be checked. Returns the
 * warnings added (0 or 1). */
int pl_spec_check_memory(const pl_spec *spec, uint64_t host_bytes, struct pl_diags *diags);
/* The same for the persistent device buffers against `device_bytes` (the GPU's memory; 0: no
 * check). The caller asks the GPU (which starts the CUDA runtime) only when there is something
 * worth asking about: pl_spec_persistent_device_bytes says how much. */
int pl_spec_check_device_memory(const pl_spec *spec, uint64_t device_bytes, struct pl_diags *diags);
uint64_t pl_spec_persistent_device_bytes(const pl_spec *spec);

/* "did you mean" helper: the candidate closest to `word` by edit distance (<= 2 edits and less
 * than half its length), or NULL. */
const char *pl_closest(const char *word, const char *const *candidates, int n);
/* User text inside a message: its first line, at most 60 bytes (then "..."), copied into buf. */
const char *pl_clip(const char *s, char buf[72]);

#endif
