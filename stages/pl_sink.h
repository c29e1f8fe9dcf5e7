/* pl_sink: the sink kind's text and JSONL formats (stages/sink_text.c), which stages/sink.c
 * writes through the same .partial file, lock and finalization as raw and .npy batches. */
#ifndef PL_SINK_H
#define PL_SINK_H

#include <limits.h>
#include <sys/types.h>

#include "pl_kind_util.h"

typedef struct pl_sink_field {
    const char *name; /* the JSON key */
    int read;         /* the buffer: index in the stage's reads */
    pl_pos pos;
} pl_sink_field;

typedef struct pl_sink_text {
    bool jsonl;
    int from, lengths; /* text: indices in reads (lengths -1 without) */
    pl_sink_field *fields;
    int n_fields;          /* jsonl */
    const char *row_field; /* jsonl: the record index's key, or NULL */
} pl_sink_text;

/* A growing byte string (malloc'd; free p). */
typedef struct pl_sink_buf {
    char *p;
    size_t n, cap;
} pl_sink_buf;

/* Appends n bytes to o. PL_ENOMEM only. */
pl_status pl_sink_buf_put(pl_sink_buf *o, const char *s, size_t n, pl_error *err);
/* Appends the JSON string of n bytes (invalid UTF-8 becomes U+FFFD). PL_ENOMEM only. */
pl_status pl_sink_buf_json_str(pl_sink_buf *o, const char *s, size_t n, pl_error *err);
/* Appends elements [*j, *j + product of dims) of p (dtype t) as nested JSON arrays over dims (a
 * number when rank is 0), as JSONL records write them; *j moves past them. PL_ENOMEM only. */
pl_status pl_sink_buf_json_values(pl_sink_buf *o, const void *p, pl_dtype t, const int64_t *dims,
                                  int rank, int64_t *j, pl_error *err);

/* Bind: `from` (text, already bound by the caller at t->from) and `lengths`, or `fields` and
 * `row_field` (jsonl), as reads of st; their options are refused where they do not belong. */
pl_status pl_sink_text_bind(pl_spec *spec, pl_stage *st, bool jsonl, pl_sink_text *t,
                            pl_error *err);
/* Validate: text rows are u8 [B, L] host buffers, lengths i32 [B]; every JSONL field a host
 * buffer with the first field's B rows. */
pl_status pl_sink_text_validate(const pl_spec *spec, const pl_stage *st, const pl_sink_text *t,
                                pl_error *err);
/* Rows per batch (the first dimension the records run along). */
int64_t pl_sink_text_rows(const pl_spec *spec, const pl_stage *st, const pl_sink_text *t);
/* Appends the first `rows` records of batch `batch` to out: one line each. Text: row r's bytes
 * (up to lengths[r] or its first NUL); a row holding a line break is an error. JSONL: an object
 * with the fields in order: u8 [B, L] rows as strings (to the first NUL; invalid UTF-8 becomes
 * U+FFFD), [B] buffers as numbers, [B, ...] as arrays; integers exactly, floats in the fewest
 * digits that read back to the same value of their dtype, NaN and infinities as null. */
pl_status pl_sink_text_format(const pl_spec *spec, const pl_stage *st, const pl_sink_text *t,
                              void *const *bufs, int64_t batch, int64_t rows, pl_sink_buf *out,
                              pl_error *err);

/* The .npy sinks' background sync (stages/sink_sync.c): one thread for the process, started by
 * the first pl_sink_sync_add, that once a second, for each entry whose published count moved,
 * fdatasyncs its fd and then rewrites its header (pwrite at 0) with that count. */
typedef struct pl_sink_sync {
    /* Set by the sink before pl_sink_sync_add; read-only after. */
    int fd;
    size_t header_len; /* what pl_npy_format_header gives for any first dimension */
    pl_dtype dtype;
    int rank_rest;
    int64_t rest[PL_MAX_RANK];
    /* The header's first dimension once the data it covers is written (pl_sink_sync_publish). */
    int64_t published;
    /* The errno of the syncer's failed call, 0 (atomic; it stops syncing the entry then), and
     * which: 0 fdatasync, 1 the header's pwrite. */
    int err;
    int failed_call;
    /* The syncer's own. */
    int64_t synced;
    struct pl_sink_sync *next;
} pl_sink_sync;

/* Registers e (borrowed until pl_sink_sync_remove); 0, or pthread_create's error. */
int pl_sink_sync_add(pl_sink_sync *e);
/* Unregisters e; once it returns the syncer touches neither e nor its fd. */
void pl_sink_sync_remove(pl_sink_sync *e);
/* Called after the bytes covering `first` are written (write(2) returned). */
static inline void pl_sink_sync_publish(pl_sink_sync *e, int64_t first)
{
    __atomic_store_n(&e->published, first, __ATOMIC_RELEASE);
}
static inline int pl_sink_sync_error(const pl_sink_sync *e)
{
    return __atomic_load_n(&e->err, __ATOMIC_ACQUIRE);
}
/* What a sink's file is made of, for the manifest of a shard's part (`pipectl merge` joins the
 * parts back by it): one batch is `batch_rows` rows (text, JSONL: lines) of `row_bytes` bytes
 * each (0 for text, whose lines vary); a padded last batch may hold fewer rows (`rows`: the sink
 * writes only real rows). */
typedef struct pl_sink_part {
    const char *format;   /* "raw", "npy", "text" or "jsonl" (static) */
    const pl_buffer *buf; /* the buffer written (JSONL: its first field's) */
    int64_t batch_rows;
    uint64_t row_bytes;
    bool rows;
} pl_sink_part;

/* Fills *out for a checked sink stage that writes a file; false for another stage or a sink
 * without `to`. */
bool pl_sink_part_info(const pl_spec *spec, const pl_stage *st, pl_sink_part *out);

/* Where a file output's bytes go (a sink's `to`, a loop stream's), resolved from the name as
 * written: --out-dir applied, a shard's part name, symlinks followed. */
typedef struct pl_sink_target {
    bool is_stdout;
    bool stream;      /* FIFO, character device or stdout: written through */
    const char *what; /* for streams: "a FIFO", "a character device", "stdout" */
    char path[PATH_MAX];
} pl_sink_target;

/* Resolves `to` (written at to_pos) into *t and checks it can be written: not a directory (the
 * message suggests 'to: TO/EXAMPLE'), a block device or a socket, its nearest existing folder
 * writable; `npy`: a .npy file, which a FIFO or stdout cannot take. Messages start with `who`
 * ("sink 'save'") and call the writer `noun` ("sink"). Creates nothing. PL_EINPUT. */
pl_status pl_sink_target_resolve(const pl_spec *spec, const char *who, const char *noun,
                                 const char *to, pl_pos to_pos, bool npy, const char *example,
                                 pl_sink_target *t, pl_error *err);
/* The target's canonical name, to tell two names of one file ("-" for stdout): absolute,
 * normalised, symlinks followed, the existing prefix resolved by realpath. */
void pl_sink_canon(const pl_spec *spec, const char *to, char *out, size_t cap);
/* A sink stage's canonical target (pl_sink_canon of its `to`), or NULL (no file, or no sink). */
const char *pl_sink_canon_of(const pl_stage *st);
/* mkdir -p of the directory part of `path`; 0, or -1 with errno. */
int pl_sink_mkdirs(const char *path);
/* write(2) (pwrite at `at` when `positioned`) of all n bytes, again on EINTR and short writes;
 * PL_EIO with errno on failure. */
pl_status pl_sink_write_all(int fd, const void *p, size_t n, off_t at, bool positioned);
/* Opens `partial` (the .partial of `final`) for writing under an exclusive lock held until close,
 * and empties it; a lock another process holds is PL_EIO naming it. Messages as for
 * pl_sink_target_resolve. *out: the fd, owned by the caller. */
pl_status pl_sink_open_locked(const char *who, const char *noun, pl_pos pos, const char *partial,
                              const char *final, int *out, pl_error *err);

/* The sink stage that writes host buffer `buffer` (its `from`; the first such sink in stage
 * order), which a run's in-memory output (pl_run_io, pipectl_bind_output) replaces: *stage = its
 * index, -1 when no sink writes it. PL_EINPUT naming the stage when it cannot be replaced: a text
 * or JSONL sink's lines into memory of a fixed size (`callback` false; a callback takes them). */
pl_status pl_sink_memory_stage(const pl_spec *spec, int buffer, bool callback, int *stage,
                               pl_error *err);

#endif
