/* pl_status: one status table for all of pipectl, and the error record that carries a message. */
/* Layer runtime/base, the lowest: owns what every other folder shares and nothing that knows a
 * stage kind, a plan or an executor: status and error records, the spec (the pipeline as
 * written), a run's memory, checksums and SHA-256, .npy, random numbers, the dependency graph, the
 * thread pool, and the doors to OpenBLAS, jansson and NVTX. May include its own headers only (and
 * system or third-party ones); tests/layering.sh has the order of the layers. */
#ifndef PL_STATUS_H
#define PL_STATUS_H

#include <stdarg.h>
#include <stdint.h>

/* X(name, exit code, short text). Exit codes: 2 bad input, 1 runtime failure, 130 interrupted. */
#define PL_STATUS_MAP(X)                                                                           \
    X(OK, 0, "ok")                                                                                 \
    X(EINPUT, 2, "bad input")                                                                      \
    X(ERUNTIME, 1, "runtime failure")                                                              \
    X(ENOMEM, 1, "out of memory")                                                                  \
    X(EIO, 1, "I/O error")                                                                         \
    X(ECUDA, 1, "CUDA error")                                                                      \
    X(ENODEV, 1, "no GPU")                                                                         \
    X(ELUA, 1, "Lua error")                                                                        \
    X(EINTR, 130, "interrupted")

typedef enum pl_status {
#define PL__STATUS_ENUM(name, code, text) PL_##name,
    PL_STATUS_MAP(PL__STATUS_ENUM)
#undef PL__STATUS_ENUM
        PL_STATUS_COUNT
} pl_status;

const char *pl_status_name(pl_status st); /* "EINPUT" */
const char *pl_status_text(pl_status st); /* "bad input" */
int pl_status_exit_code(pl_status st);

/* A position in a pipeline file, 1-based. `file` is borrowed: it lives as long as the spec that
 * produced it (strings are interned in the spec's arena). line == 0 means "no position";
 * line == PL_POS_ARG means a command-line argument as a whole, which `file` names
 * ("--set run.batches=4": what that argument put into the pipeline). */
typedef struct pl_pos {
    const char *file;
    int line;
    int col;
} pl_pos;

#define PL_POS_ARG (-1)

#define PL_ERROR_MSG_MAX 2048
#define PL_ERROR_FILE_MAX 512 /* a longer file name is cut in the record (the message keeps it) */
#define PL_ERROR_STAGE_MAX 65 /* PL_MAX_NAME + 1 */

/* The last error, as a record: a status, a complete user-facing message (no trailing newline),
 * and where it happened as fields that code branches on (the message says the same in words;
 * nothing parses it). Lives on the caller's stack or in a handle; functions that fail fill it and
 * return the same status. Every field is a copy, so a record outlives the spec it talks about. */
typedef struct pl_error {
    pl_status status;
    char msg[PL_ERROR_MSG_MAX];
    char file[PL_ERROR_FILE_MAX];   /* the pipeline file (or the PL_POS_ARG argument); "" when
                                     * the error has no position */
    int line, col;                  /* 1-based; 0 when the error has no position or is at an
                                     * argument */
    char stage[PL_ERROR_STAGE_MAX]; /* the stage it happened in; "" when none */
    int64_t batch;                  /* the batch it happened on; -1 when none */
} pl_error;

/* Formats msg, sets status and clears the position, stage and batch; returns st. err may be NULL
 * (the status still propagates). */
pl_status pl_error_set(pl_error *err, pl_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
pl_status pl_error_vset(pl_error *err, pl_status st, const char *fmt, va_list ap);
/* "file:line:col: error: <fmt>" and the position fields (stage and batch cleared); with
 * pos.line == 0 it is just "error: <fmt>" with no position; with PL_POS_ARG "arg: error: <fmt>"
 * (file set, line and col 0). */
pl_status pl_error_at(pl_error *err, pl_status st, pl_pos pos, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Prefixes the existing message: "<prefix>: <old message>", keeping every field. Returns
 * err->status. */
pl_status pl_error_prefix(pl_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Attaches a failure to stage `stage` (copied) on batch `batch` (-1: not on a batch), as the
 * executors do with what a stage's hook returned. When the record names no stage yet, it records
 * both and the message becomes "error: stage 'x', batch N: <message without its leading
 * 'error: '>" (", batch N" left out when batch < 0). When it already names one (the hook said it
 * itself, with pl_error_tag), only a missing batch is filled in and the message is left as it is.
 * Returns err->status (PL_ERUNTIME when err is NULL). */
pl_status pl_error_stage(pl_error *err, const char *stage, int64_t batch);
/* Records stage and batch without touching the message, for a message that already names them in
 * its own words. Returns err->status (PL_ERUNTIME when err is NULL). */
pl_status pl_error_tag(pl_error *err, const char *stage, int64_t batch);
/* Status OK, empty message, no position, stage or batch. */
void pl_error_clear(pl_error *err);

/* Propagate a non-OK status. PL_CHECK returns it; PL_CHECK_GOTO stores it in `st` and jumps. */
#define PL_CHECK(expr)                                                                             \
    do {                                                                                           \
        pl_status pl__s = (expr);                                                                  \
        if (pl__s != PL_OK) return pl__s;                                                          \
    } while (0)
#define PL_CHECK_GOTO(expr, st, label)                                                             \
    do {                                                                                           \
        (st) = (expr);                                                                             \
        if ((st) != PL_OK) goto label;                                                             \
    } while (0)

#endif
