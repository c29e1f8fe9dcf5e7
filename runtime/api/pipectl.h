/* pipectl.h: the C API for embedding pipectl. Load a pipeline file (YAML or Lua), which checks it;
 * compile its plan; run the plan on the host executor (CPU threads) or the GPU executor; read what
 * its sinks wrote. docs/embedding.md has an example, the pkg-config line and the install layout.
 *
 * Conventions, the same for every function:
 *
 * - Errors. A function that can fail takes the handle (pipectl *) first and returns a status code:
 *   PIPECTL_OK or one of the PIPECTL_E* codes below. The handle then holds the error record of that
 *   call: pipectl_errcode(), pipectl_errmsg() (the complete message, as `pipectl` prints it), and
 *   where it happened as fields: pipectl_errfile/errline/errcol (a position in the pipeline file)
 *   or pipectl_errstage/errbatch (a stage, and a batch of the run). Branch on the code and the
 *   fields; the message is for people. A call that succeeds resets the record to PIPECTL_OK.
 * - Ownership. An OUT parameter (T **out) is set to NULL on entry and to a new object on success;
 *   the caller owns it and frees it with its *_free function. Every *_free function and
 *   pipectl_close accept NULL. Strings returned by accessors are borrowed: they stay valid until
 *   the object they came from is freed (for the error accessors: until the next call that takes
 *   the handle). Arguments are borrowed for the duration of the call.
 * - Lifetimes. A plan reads its pipeline: free every plan before the pipeline it was compiled
 *   from. A result is independent: it may outlive its plan and its pipeline.
 * - Threads. A handle, and each object, is used by one thread at a time. Different handles are
 *   independent and may be used by different threads at once; several threads may also compile
 *   one pipeline at once, and run plans of one pipeline at once, each on its own handle (compiling
 *   and running only read the pipeline; two runs writing one file fail: the second finds it
 *   locked). pipectl_interrupt is the exception: any thread or a signal handler may call it. There
 *   is no global state to initialise.
 * - Options. A function that takes options takes a struct whose first field, `size`, the caller
 *   sets to sizeof the struct it was compiled with (the *_OPTIONS_INIT macros do, and zero every
 *   other field); zero is every field's default. The library reads only the fields within `size`
 *   and takes the defaults for the rest, so a program built against an older pipectl.h keeps
 *   working with a newer library, and new options never change a function's signature. Structs
 *   the library fills (statistics) work the same way: it writes only the first `size` bytes.
 * - Memory the caller binds (pipectl_bind_input, pipectl_bind_output) is borrowed by the next run
 *   on that handle and must stay valid, and not move, until that run returns.
 * - Output. The library never prints. Messages are in the records; the caller shows them. (Lua
 *   code in a pipeline may print: Lua's print() writes to stderr, as the script asked.)
 * - Exit codes. pipectl_exit_code() maps a status to the CLI's convention (0 ok, 2 bad input,
 *   1 runtime failure, 130 interrupted), for programs that want to exit the same way.
 * - Environment. What a run does is set in the pipeline (its `run:` and stage keys); the library
 *   reads only these variables, which hold before any pipeline exists or for the whole process
 *   (docs/cli.md's environment table says more):
 *     PIPECTL_NVTX=0               no NVTX ranges (the domain "pipectl")
 *     PIPECTL_LUA_INSTRUCTIONS=N   a pipeline.lua script's instruction budget (default 10^9)
 *     PIPECTL_LUA_MEMORY=BYTES     a pipeline.lua script's memory cap (default 256 MiB)
 *     PIPECTL_ARCH=sm_NN           the SM user kernels are checked for without a GPU (sm_90)
 *     XDG_CACHE_HOME=DIR           compiled user kernels are cached under DIR/pipectl
 *     OPENBLAS_CORETYPE=NAME       OpenBLAS's kernels (read by OpenBLAS when it loads)
 *     PIPECTL_BLAS_PICKED=NAME     testing: stands for OpenBLAS's own pick of kernels
 *
 * Everything is declared here: no other header of pipectl is needed, and every public name starts
 * with pipectl_ or PIPECTL_ (the library's internal names are pl_ and hidden). */
/* Layer runtime/api: owns the public C API: this header and pl_api.c, the functions libpipectl
 * exports. This header includes nothing of ours (an embedder needs only this file); pl_api.c may
 * include every layer up to runtime/record. */
#ifndef PIPECTL_H
#define PIPECTL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && !defined(PIPECTL_API)
#define PIPECTL_API __attribute__((visibility("default")))
#elif !defined(PIPECTL_API)
#define PIPECTL_API
#endif

/* ---- Status codes -------------------------------------------------------------------------- */

enum {
    PIPECTL_OK = 0,
    PIPECTL_EINPUT = 1,   /* bad input: the pipeline file, or an argument (exit code 2) */
    PIPECTL_ERUNTIME = 2, /* a runtime failure not covered below (exit code 1) */
    PIPECTL_ENOMEM = 3,   /* out of memory (1) */
    PIPECTL_EIO = 4,      /* reading or writing a file failed (1) */
    PIPECTL_ECUDA = 5,    /* a CUDA call failed (1) */
    PIPECTL_ENODEV = 6,   /* the GPU executor was asked for, and there is no usable GPU (1) */
    PIPECTL_ELUA = 7,     /* Lua code failed: an error, its instruction budget or memory cap (1) */
    PIPECTL_EINTR = 8     /* the run was interrupted (pipectl_interrupt) (130) */
};

/* The code's name ("EINPUT") and a short text ("bad input"); "EUNKNOWN" and "unknown status" for
 * a code not listed above. Static strings. */
PIPECTL_API const char *pipectl_errname(int code);
PIPECTL_API const char *pipectl_errstr(int code);
/* 0, 2, 1 or 130, as `pipectl` exits for this code (1 for an unknown code). */
PIPECTL_API int pipectl_exit_code(int code);

/* The version of this header: PIPECTL_VERSION_NUMBER is MAJOR * 10000 + MINOR * 100 + PATCH, for
 * `#if PIPECTL_VERSION_NUMBER >= 200` (0.2.0: load options, pipectl_loads, buffers, in-memory
 * inputs and outputs, run options, statistics). A minor version adds functions and option fields;
 * it removes and changes none. */
#define PIPECTL_VERSION_MAJOR 0
#define PIPECTL_VERSION_MINOR 2
#define PIPECTL_VERSION_PATCH 0
#define PIPECTL_VERSION_STRING "0.2.0"
#define PIPECTL_VERSION_NUMBER                                                                     \
    (PIPECTL_VERSION_MAJOR * 10000 + PIPECTL_VERSION_MINOR * 100 + PIPECTL_VERSION_PATCH)

/* The library's version, "MAJOR.MINOR.PATCH" (static string): the library's, which may be newer
 * than the header a program was compiled with (PIPECTL_VERSION_STRING). */
PIPECTL_API const char *pipectl_version(void);

/* ---- The handle and its error record -------------------------------------------------------- */

typedef struct pipectl pipectl;

/* Makes a handle. *out is NULL and PIPECTL_ENOMEM returned when memory is short. */
PIPECTL_API int pipectl_open(pipectl **out);
/* Frees the handle. Objects made with it stay valid and are freed on their own. NULL is fine. */
PIPECTL_API void pipectl_close(pipectl *h);

/* The last call's status code; PIPECTL_OK after a call that succeeded. PIPECTL_ENOMEM for a NULL
 * handle (pipectl_open failed). */
PIPECTL_API int pipectl_errcode(const pipectl *h);
/* The last call's error message, one or more lines without a trailing newline, e.g.
 * "pipe.yaml:12:5: error: stage 'up' reads unknown buffer 'x_hst' (did you mean 'x_host'?)"; ""
 * after a call that succeeded. Never NULL. */
PIPECTL_API const char *pipectl_errmsg(const pipectl *h);
/* Where the last error is in the pipeline file: the file name, and a 1-based line and column.
 * NULL and 0 when the error has no position (most run-time errors have a stage instead; an error
 * opening a stage, such as a sink that cannot create its file, can have both). */
PIPECTL_API const char *pipectl_errfile(const pipectl *h);
PIPECTL_API int pipectl_errline(const pipectl *h);
PIPECTL_API int pipectl_errcol(const pipectl *h);
/* The stage the last error happened in (NULL when none), and the batch it happened on (-1 when
 * none: errors opening or closing a stage, and errors before or after the batches). */
PIPECTL_API const char *pipectl_errstage(const pipectl *h);
PIPECTL_API long long pipectl_errbatch(const pipectl *h);

/* ---- Pipelines ------------------------------------------------------------------------------ */

typedef struct pipectl_pipeline pipectl_pipeline;

/* Loads the pipeline file `path` (a .lua file runs the Lua front end, any other name is read as
 * YAML) and checks it: names resolve, shapes and dtypes agree, no cycles, no data hazards. Paths
 * inside the file (sink outputs, source files) are relative to the file's directory.
 * Errors: PIPECTL_EINPUT (the file cannot be read, or is not a valid pipeline: the record has the
 * position), PIPECTL_ELUA (the Lua script failed), PIPECTL_ENOMEM. */
PIPECTL_API int pipectl_load(pipectl *h, const char *path, pipectl_pipeline **out);
PIPECTL_API void pipectl_pipeline_free(pipectl_pipeline *p);
/* The pipeline's name (`pipeline:` in the file, else the file's base name), and its number of
 * stages. */
PIPECTL_API const char *pipectl_pipeline_name(const pipectl_pipeline *p);
PIPECTL_API int pipectl_pipeline_stages(const pipectl_pipeline *p);

/* What `pipectl check|plan|run` change in a pipeline as it loads, and what a pipeline given as
 * text needs. Zero is every field's default; see "Options" above. */
typedef struct pipectl_load_options {
    size_t size; /* sizeof(pipectl_load_options) */
    /* "KEY=VALUE" strings, as `--set` takes them (run.batches=4, STAGE.KEY, buffers.NAME.KEY;
     * VALUE is YAML), n_set of them, in order (the last one for a key wins). An error in one reads
     * "--set KEY=VALUE: error: ..." (PIPECTL_EINPUT). Borrowed for the call. */
    const char *const *set;
    int n_set;
    /* `--out-dir`: sinks' relative paths resolve against this folder (relative to the working
     * directory) instead of the pipeline's. Copied. NULL: the pipeline's folder. */
    const char *out_dir;
    int confine; /* nonzero: as run.confine: true (`--confine`) */
    /* pipectl_loads only. The name positions give the text ("pipe.yaml:3:5: ..."; NULL:
     * "<string>"), the folder its relative paths (sources, sinks, init files) resolve against
     * (NULL: the working directory), and which front end reads it (nonzero: pipeline.lua, else
     * YAML). */
    const char *name;
    const char *dir;
    int lua;
} pipectl_load_options;

#define PIPECTL_LOAD_OPTIONS_INIT                                                                  \
    {                                                                                              \
        sizeof(pipectl_load_options), NULL, 0, NULL, 0, NULL, NULL, 0                              \
    }

/* pipectl_load with options (NULL: none, the same as pipectl_load). Errors as pipectl_load. */
PIPECTL_API int pipectl_load_with(pipectl *h, const char *path, const pipectl_load_options *opts,
                                  pipectl_pipeline **out);
/* Loads a pipeline from `len` bytes of text (YAML, or Lua with opts->lua), and checks it, as
 * pipectl_load does a file. The text is read during the call only. Errors as pipectl_load; the
 * positions name opts->name. */
PIPECTL_API int pipectl_loads(pipectl *h, const char *text, size_t len,
                              const pipectl_load_options *opts, pipectl_pipeline **out);

/* Checks the files a run of `batches` batches would touch (0: the pipeline's run.batches), as
 * `pipectl check` does after the pipeline: inputs exist, are readable and hold the buffers'
 * dtype, shape and enough whole batches; sinks' targets can be written. Reads headers only and
 * creates nothing. Errors: PIPECTL_EINPUT at the option's position (file, line, column, stage). */
PIPECTL_API int pipectl_check(pipectl *h, const pipectl_pipeline *p, long long batches);

/* ---- Buffers -------------------------------------------------------------------------------- */

enum { /* pipectl_buffer_info.dtype: numpy's uint8, int32, int64, float16, bfloat16, float32,
        * float64 */
       PIPECTL_U8,
       PIPECTL_I32,
       PIPECTL_I64,
       PIPECTL_F16,
       PIPECTL_BF16,
       PIPECTL_F32,
       PIPECTL_F64
};

/* One buffer of a pipeline, as declared. */
typedef struct pipectl_buffer_info {
    size_t size;              /* sizeof(pipectl_buffer_info): set by the caller */
    const char *name;         /* borrowed from the pipeline */
    int device;               /* 1: where: device, 0: host */
    int persistent;           /* 1: one copy for the run; 0: one per batch in flight */
    int dtype;                /* PIPECTL_U8 ... PIPECTL_F64 */
    const char *dtype_name;   /* "f32" (static) */
    int rank;                 /* dimensions, 1..8 */
    long long shape[8];       /* shape[0..rank-1]; one batch's */
    unsigned long long bytes; /* of one batch */
    /* The stage that fills it from a file or generator (a source: what pipectl_bind_input
     * replaces), and the first that writes it to a file (a sink: what pipectl_bind_output
     * replaces); NULL when none. Borrowed from the pipeline. */
    const char *source;
    const char *sink;
} pipectl_buffer_info;

/* The pipeline's buffers, in declaration order: their count, and buffer i into *out (which the
 * caller sized: out->size). Returns PIPECTL_OK, or PIPECTL_EINPUT for a bad index, a NULL, or a
 * size smaller than the first version of the struct (no handle: nothing is recorded). */
PIPECTL_API int pipectl_pipeline_buffers(const pipectl_pipeline *p);
PIPECTL_API int pipectl_pipeline_buffer(const pipectl_pipeline *p, int i, pipectl_buffer_info *out);
/* The index of the buffer called `name`, or -1. */
PIPECTL_API int pipectl_pipeline_find_buffer(const pipectl_pipeline *p, const char *name);

/* ---- Plans ---------------------------------------------------------------------------------- */

typedef struct pipectl_plan pipectl_plan;

/* Compiles the pipeline's plan: streams, events, slots, cross-batch dependencies. `batches` and
 * `depth` (slots in flight) replace the file's run.batches and run.depth; 0 keeps the file's, -1
 * is `depth: auto` (the run chooses it after its first batches: docs/perf.md). The pipeline is
 * only read. Errors: PIPECTL_EINPUT (batches outside 0..2^40, depth outside -1..64, or the depth's
 * slots over run.memory_budget), PIPECTL_ENOMEM. */
PIPECTL_API int pipectl_compile(pipectl *h, const pipectl_pipeline *p, long long batches, int depth,
                                pipectl_plan **out);
PIPECTL_API void pipectl_plan_free(pipectl_plan *plan);
PIPECTL_API long long pipectl_plan_batches(const pipectl_plan *plan);
PIPECTL_API int pipectl_plan_depth(const pipectl_plan *plan);
/* The plan as `pipectl plan` prints it (several lines, ending in a newline), in *out; the caller
 * frees it with pipectl_free. Errors: PIPECTL_ENOMEM. */
PIPECTL_API int pipectl_plan_describe(pipectl *h, const pipectl_plan *plan, char **out);
enum { PIPECTL_PLAN_TEXT = 0, PIPECTL_PLAN_DOT = 1, PIPECTL_PLAN_JSON = 2 };
/* The plan in `format`: PIPECTL_PLAN_TEXT (pipectl_plan_describe's), PIPECTL_PLAN_DOT (Graphviz, as
 * `pipectl plan --dot`) or PIPECTL_PLAN_JSON (the "plan" object of `pipectl plan --json`,
 * docs/json.md; one line), NUL-terminated in *out; free it with pipectl_free. Errors:
 * PIPECTL_EINPUT (another format), PIPECTL_ENOMEM. */
PIPECTL_API int pipectl_plan_dump(pipectl *h, const pipectl_plan *plan, int format, char **out);
/* Frees memory the library handed over as a plain pointer (pipectl_plan_describe,
 * pipectl_plan_dump). NULL is fine. */
PIPECTL_API void pipectl_free(void *mem);

/* ---- Running -------------------------------------------------------------------------------- */

typedef struct pipectl_result pipectl_result;

enum {
    PIPECTL_EXECUTOR_AUTO =
        0, /* the GPU when one is usable, else the host; see pipectl_result_note */
    PIPECTL_EXECUTOR_HOST = 1, /* CPU threads: the reference, and what machines without a GPU run */
    PIPECTL_EXECUTOR_GPU = 2   /* CUDA Graphs per slot; PIPECTL_ENODEV without a GPU or CUDA */
};

/* Runs the plan's batches on `executor` with `workers` host worker threads (0: one per CPU, at
 * least one per stream, at most 64). Sinks write their files as the run goes, in batch order.
 * When the run fails or is interrupted, the batches that completed keep their outputs and *out
 * still receives a result that says what completed; *out stays NULL only when nothing ran (no GPU
 * for PIPECTL_EXECUTOR_GPU, a bad argument, out of memory before the start). Free it either way.
 * Errors: PIPECTL_EINPUT (executor or workers out of range), PIPECTL_ENODEV, PIPECTL_EIO (a sink or
 * source file), PIPECTL_ELUA, PIPECTL_ECUDA, PIPECTL_ENOMEM, PIPECTL_ERUNTIME, PIPECTL_EINTR; the
 * record names the stage and the batch that failed. */
PIPECTL_API int pipectl_run(pipectl *h, const pipectl_plan *plan, int executor, int workers,
                            pipectl_result **out);
/* Asks the run in progress on `h` to stop: no new batches start, those in flight finish or are
 * abandoned, and pipectl_run returns PIPECTL_EINTR with the completed batches' outputs kept. A
 * request made before pipectl_run starts stops that run at once; pipectl_run clears the request
 * when it returns. Async-signal-safe: meant for a SIGINT handler. */
PIPECTL_API void pipectl_interrupt(pipectl *h);

enum { /* pipectl_run_options.graphs: as `pipectl run --graphs` */
       PIPECTL_GRAPHS_AUTO = 0,
       PIPECTL_GRAPHS_STAGE = 1,
       PIPECTL_GRAPHS_SEGMENT = 2,
       PIPECTL_GRAPHS_NONE = 3
};
enum { /* pipectl_run_options.timing: as `pipectl run --timing` */
       PIPECTL_TIMING_SAMPLE = 0,
       PIPECTL_TIMING_ALL = 1,
       PIPECTL_TIMING_OFF = 2
};

/* What `pipectl run` takes besides the pipeline: zero is every field's default (see "Options"). */
typedef struct pipectl_run_options {
    size_t size;  /* sizeof(pipectl_run_options) */
    int executor; /* PIPECTL_EXECUTOR_AUTO (default), _HOST or _GPU */
    int workers;  /* host worker threads, 1..64; 0: one per CPU, at least one per stream */
    int graphs; /* GPU: PIPECTL_GRAPHS_AUTO (default), _STAGE, _SEGMENT or _NONE (plain launches) */
    int timing; /* GPU: device stage times: PIPECTL_TIMING_SAMPLE (default), _ALL or _OFF */
    /* Called after each batch completes, in batch order, on the thread that called the run, with
     * the batches done and the run's total (a progress bar). NULL: none. */
    void (*on_batch)(void *user, long long done, long long total);
    void *user; /* for on_batch and on_note */
    /* Called, on the calling thread, with a line the run has to tell while it runs: what
     * `depth: auto` chose and why (what `pipectl run` prints to stderr). NULL: none. */
    void (*on_note)(void *user, const char *line);
    /* Writes the timeline as Chrome trace JSON to this file after the run (`--trace`; also after
     * a failure). NULL: none. */
    const char *trace;
    /* Testing (`--fail-at STAGE:BATCH`): stage `fail_stage` fails on batch `fail_batch` with
     * PIPECTL_ERUNTIME. NULL: never. */
    const char *fail_stage;
    long long fail_batch;
} pipectl_run_options;

#define PIPECTL_RUN_OPTIONS_INIT                                                                   \
    {                                                                                              \
        sizeof(pipectl_run_options), 0, 0, 0, 0, NULL, NULL, NULL, NULL, NULL, 0                   \
    }

/* pipectl_run with options (NULL: the defaults) and the handle's in-memory bindings (below).
 * The rest is pipectl_run's: the result also after a failure, the errors, pipectl_interrupt.
 * More errors: PIPECTL_EINPUT for an option out of range or a binding that does not fit the plan
 * (the message names the buffer and what is wrong, before anything runs); bindings are cleared
 * when it returns, whatever happened. */
PIPECTL_API int pipectl_run_with(pipectl *h, const pipectl_plan *plan,
                                 const pipectl_run_options *opts, pipectl_result **out);

/* ---- In-memory inputs and outputs ----------------------------------------------------------- *
 *
 * A host buffer can take its batches from the caller's memory instead of the source stage that
 * fills it (its file or generator), or give them to the caller instead of the sink stage that
 * writes it to a file. Each binding names the buffer; it holds for the next pipectl_run or
 * pipectl_run_with on the handle, which checks it against the plan before anything runs and
 * clears every binding when it returns. pipectl_unbind clears them without a run.
 *
 * - Input (pipectl_bind_input): `bytes` bytes at `data` hold whole batches of the buffer, one
 *   after the other (batch b at data + b * the buffer's bytes: numpy's (batches, *shape) in C
 *   order), at least as many as the plan runs. The source stage that fills the buffer is not
 *   opened (its file is not read). The library only reads data; where it reads it:
 *     in place on the host executor when no stage but that source writes the buffer: every
 *       stage that reads it reads data itself, batch b at its offset;
 *     in place on the GPU executor when only uploads (h2d) read the buffer, it holds at least
 *       1 MiB a batch, and the copies are calls of their own (graphs stage, which auto picks for
 *       such copies, or none; not segment graphs, which bake the slot's address in): data is
 *       registered as pinned memory for the run (cudaHostRegister, undone before the run
 *       returns) and the uploads read it there;
 *     copied otherwise: each batch from data into the slot's host buffer (pinned on the GPU
 *       executor), as a file source reads it (also when registering fails).
 *   A persistent host buffer (one copy for the run: a search corpus) takes exactly its size:
 *   its contents, copied in once when the run starts, before the stages open, in place of its
 *   `init:`.
 * - Output (pipectl_bind_output): the sink stage that writes the buffer (the first one in stage
 *   order whose `from:` it is) opens no file; each batch's bytes, exactly those its file would
 *   get after its header, are copied into data one after the other, in batch order (batch b at
 *   data + b * the buffer's bytes, but for a padded last batch of a sink that writes rows, which
 *   gets its real rows only). The checksums are the ones the file would have
 *   (pipectl_output_checksum); pipectl_output_batches says how many batches data holds, also
 *   after a failure or an interrupt (bytes past them may have been written, and mean nothing).
 *   A text or JSONL sink's lines take a callback only.
 * - Output to a callback (pipectl_bind_output_fn): instead of copying, `fn` is called with each
 *   batch's bytes (as above; for text and JSONL sinks the lines, each ending in '\n') in batch
 *   order, one call at a time, from the host worker thread that runs the sink (not the thread
 *   that called the run). `data` is valid during the call only. A nonzero return fails the run at
 *   that batch with PIPECTL_ERUNTIME (the record names the sink and the batch). After a failure
 *   or an interrupt, fn may have had up to `depth` batches more than the result counts.
 *
 * Every binding is borrowed: data (and user) must stay valid until the run returns. Binding a
 * buffer twice the same way (input, or output) replaces the first binding; one buffer may be
 * both an input and an output. The checks at the run (PIPECTL_EINPUT, naming the
 * buffer): a buffer the pipeline has (with "did you mean"), on the host, filled by a source or
 * persistent (input) or written by a sink (output); bytes a whole number of batches, enough for
 * the run (input), the buffer's size (persistent) or room for every batch (output). */

/* Errors (no run needed): PIPECTL_EINPUT for a NULL name or data, bytes 0, or more than 64
 * bindings; PIPECTL_ENOMEM. */
PIPECTL_API int pipectl_bind_input(pipectl *h, const char *buffer, const void *data, size_t bytes);
PIPECTL_API int pipectl_bind_output(pipectl *h, const char *buffer, void *data, size_t bytes);
typedef int (*pipectl_batch_fn)(void *user, const char *buffer, long long batch, const void *data,
                                size_t bytes);
PIPECTL_API int pipectl_bind_output_fn(pipectl *h, const char *buffer, pipectl_batch_fn fn,
                                       void *user);
/* Drops the handle's bindings. */
PIPECTL_API void pipectl_unbind(pipectl *h);

PIPECTL_API void pipectl_result_free(pipectl_result *r);
/* "host" or "gpu": the executor that ran. */
PIPECTL_API const char *pipectl_result_executor(const pipectl_result *r);
/* With PIPECTL_EXECUTOR_AUTO, which executor was picked and why, e.g. "executor: host (no GPU
 * found)" (what `pipectl run` prints to stderr); "" otherwise. */
PIPECTL_API const char *pipectl_result_note(const pipectl_result *r);
/* Batches completed, in order, outputs written; and the run's wall time in seconds. */
PIPECTL_API long long pipectl_result_batches(const pipectl_result *r);
PIPECTL_API double pipectl_result_seconds(const pipectl_result *r);

/* Outputs: one per sink stage, in stage order, indexed 0..pipectl_result_outputs()-1. An index out
 * of range gives NULL, 0 or -1. */
PIPECTL_API int pipectl_result_outputs(const pipectl_result *r);
/* The sink stage's name. */
PIPECTL_API const char *pipectl_output_stage(const pipectl_result *r, int i);
/* The file it wrote, as opened (relative to the current directory when the pipeline file's path
 * was); NULL for a sink without `to:` (checksums only). */
PIPECTL_API const char *pipectl_output_path(const pipectl_result *r, int i);
/* Batches it wrote. */
PIPECTL_API long long pipectl_output_batches(const pipectl_result *r, int i);
/* The checksum of every data byte it wrote (file headers excluded), the one `pipectl run` prints
 * as 0x%016llx; and the checksum of batch `batch` alone, kept for the first 65536 batches so a
 * long run's memory stays flat (0 when out of range or past them). The checksums do not depend
 * on the executor, the depth or the number of workers. */
PIPECTL_API unsigned long long pipectl_output_checksum(const pipectl_result *r, int i);
PIPECTL_API unsigned long long pipectl_output_batch_checksum(const pipectl_result *r, int i,
                                                             long long batch);
/* 1 when the file was finalized under its final name, which a sink does however the run ends
 * (after a failure or an interrupt it holds the completed batches; docs/pipeline-yaml.md); 0 when
 * finalizing failed or the sink never opened. */
PIPECTL_API int pipectl_output_complete(const pipectl_result *r, int i);
/* The buffer the sink writes (its `from:`; NULL for a JSONL sink, which writes several), and 1
 * when it went into the caller's memory (pipectl_bind_output, _fn) instead of a file. */
PIPECTL_API const char *pipectl_output_buffer(const pipectl_result *r, int i);
PIPECTL_API int pipectl_output_in_memory(const pipectl_result *r, int i);

/* ---- Statistics: what the summary of `pipectl run` shows ------------------------------------ *
 *
 * Each function fills the caller's struct (out->size set by the caller: see "Options") from the
 * result and returns PIPECTL_OK, or PIPECTL_EINPUT for a NULL, an index out of range or a size
 * smaller than the first version of the struct. Strings are borrowed from the result. Times are in
 * seconds; figures that were not measured are -1. docs/json.md explains each figure (the same
 * names, in `pipectl run --json`). */

typedef struct pipectl_stats {
    size_t size;
    long long batches;         /* completed */
    long long batches_planned; /* the plan's */
    int depth;                 /* slots the batches ran with (depth: auto: the chosen one) */
    int workers;               /* host workers */
    const char *executor;      /* "host" or "gpu" */
    const char *graph_mode;    /* "segment", "stage" or "none" */
    const char *device;        /* "CPU", or the GPU's name */
    double wall_s;             /* the run's wall time, setup excluded */
    double per_batch_s;        /* wall_s / batches */
    double steady_per_batch_s; /* per batch after the pipeline filled (-1: too few batches) */
    double batches_per_s;
    unsigned long long bytes_in_per_batch;  /* what the sources fill */
    unsigned long long bytes_out_per_batch; /* what the sinks write */
    /* The bound: the busiest engine's busy time per batch; the engine, its slowest stage, and
     * bound / per batch (1: the run went as fast as its busiest engine allows). -1 and NULL when
     * nothing was timed. */
    double bound_s;
    const char *bound_engine;
    const char *bound_stage;
    double achieved;
    int stages;  /* entries for pipectl_result_stage_stats */
    int engines; /* entries for pipectl_result_engine_stats */
} pipectl_stats;
PIPECTL_API int pipectl_result_stats(const pipectl_result *r, pipectl_stats *out);

/* Stage i, in the plan's order (the summary table's rows). */
typedef struct pipectl_stage_stats {
    size_t size;
    const char *name, *kind;
    const char *engine; /* "host", "h2d", "compute" or "d2h" */
    const char *stream; /* the plan's stream */
    long long count;    /* batches timed */
    double mean_s, p50_s, p99_s, min_s, max_s, total_s;
    double busy; /* total_s / wall_s */
} pipectl_stage_stats;
PIPECTL_API int pipectl_result_stage_stats(const pipectl_result *r, int i,
                                           pipectl_stage_stats *out);

/* Engine i: each device engine and host stream, as the summary's engine table. */
typedef struct pipectl_engine_stats {
    size_t size;
    const char *name;   /* "h2d", "compute", "d2h", "host0", ... */
    const char *engine; /* its kind: "host", "h2d", "compute" or "d2h" */
    int stages;
    long long timed_batches;
    double busy_s;           /* the union of its stages' intervals */
    double busy_per_batch_s; /* busy_s per timed batch */
    double occupancy;        /* busy_s / wall_s */
} pipectl_engine_stats;
PIPECTL_API int pipectl_result_engine_stats(const pipectl_result *r, int i,
                                            pipectl_engine_stats *out);

#ifdef __cplusplus
}
#endif

#endif
