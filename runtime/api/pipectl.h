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
 *   one pipeline at once (compiling only reads it). There is no global state to initialise.
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

/* The library's version, "MAJOR.MINOR.PATCH" (static string). */
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
/* Frees memory the library handed over as a plain pointer (pipectl_plan_describe). NULL is fine. */
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

#ifdef __cplusplus
}
#endif

#endif
