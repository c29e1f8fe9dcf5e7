/* pl_source: what the source kind's files share (stages/source.c: the kind, binary files and
 * generators; stages/source_text.c: text and JSONL records): its parsed options, a buffered input
 * stream read in order (a file or stdin), and the text formats' record reader. */
#ifndef PL_SOURCE_H
#define PL_SOURCE_H

#include <jansson.h>

#include "pl_kind_util.h"

enum { PL_SRC_AUTO, PL_SRC_RAW, PL_SRC_NPY, PL_SRC_TEXT, PL_SRC_JSONL }; /* `format:` */
enum { PL_LAST_ERROR, PL_LAST_DROP, PL_LAST_PAD };                       /* `last_batch:` */
enum { PL_GEN_RANDOM, PL_GEN_RANGE, PL_GEN_CONSTANT };                   /* `generator:` */

typedef struct pl_source_opts {
    const char *file; /* as written; NULL: generator */
    pl_pos file_pos;
    bool from_stdin; /* file: - */
    int format;      /* resolved: never PL_SRC_AUTO when file is set */
    bool wrap;
    int last_batch;
    double pad_value;
    bool has_cast;
    pl_dtype cast;
    pl_pos cast_pos;
    const char *field; /* jsonl: the record's field */
    int lengths;       /* index in writes of the i32 [B] lengths buffer, -1 without */
    bool truncate;
    int generator;
    double value, min, max;
    bool has_min, has_max, has_seed;
    uint64_t seed;
} pl_source_opts;

/* A stream read from its start to its end, in order, through a buffer. */
typedef struct pl_src_in {
    int fd;
    char *buf;
    size_t cap, beg, end;
    bool eof;
    char *line; /* a line that crossed the buffer's end, assembled */
    size_t line_cap;
    int64_t lineno;    /* lines returned so far: the last one's number */
    json_t *record;    /* jsonl: the object the last record came from */
    const char *name;  /* for messages: the file's base name, or "<stdin>" */
    int64_t bytes_off; /* bytes consumed before buf[beg] */
} pl_src_in;

/* fd is borrowed (closed by the caller). PL_ENOMEM on failure. */
pl_status pl_src_in_init(pl_src_in *in, int fd, const char *name, pl_error *err);
void pl_src_in_fini(pl_src_in *in);
/* Up to n bytes into dst: *got < n only at the end of the stream. PL_EIO on a read error. */
pl_status pl_src_in_read(pl_src_in *in, void *dst, size_t n, size_t *got, pl_error *err);

/* The next record of a text or JSONL stream, its bytes in *s (valid until the next call), *n of
 * them; *more = false at the end. Text: each line, without its '\n' (nor a '\r' before it; a
 * UTF-8 byte order mark before the first is left out). JSONL: each line that is not blank, an
 * object whose `field` is a string. Errors are PL_EINPUT "error: NAME:LINE: ..." (the data
 * file's line), for pl_npy_error_at to anchor at the file option. */
pl_status pl_source_text_next(const pl_source_opts *o, pl_src_in *in, const char **s, size_t *n,
                              bool *more, pl_error *err);
/* Copies record (s, n) into row `r` of the u8 [B, L] buffer `to` (NUL-padded), its length into
 * lens[r] (lens may be NULL): a record longer than L is an error naming in's line unless
 * o->truncate (then it is cut to L bytes, back to the start of a UTF-8 character). */
pl_status pl_source_text_row(const pl_source_opts *o, const pl_src_in *in, const pl_buffer *to,
                             const char *s, size_t n, void *to_mem, int32_t *lens, int64_t r,
                             pl_error *err);
/* The records of a whole text or JSONL stream, each one read and checked as a run reads it
 * (check time: bad JSON, a missing field, a record too long are reported before the run). */
pl_status pl_source_text_count(const pl_source_opts *o, pl_src_in *in, const pl_buffer *to,
                               int64_t *records, pl_error *err);

/* The source stage that fills host buffer `buffer` (its `to`), which a run's in-memory input
 * (pl_run_io, pipectl_bind_input) replaces: *stage = its index, -1 when no source fills it.
 * PL_EINPUT naming the stage when it cannot be replaced (a text source that also fills a lengths
 * buffer). */
pl_status pl_source_memory_stage(const pl_spec *spec, int buffer, int *stage, pl_error *err);

#endif
