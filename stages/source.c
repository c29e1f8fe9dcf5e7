/* source: fills a per-batch host buffer from a file (raw, .npy, text or JSONL), stdin, a seeded
 * generator or a constant.
 * - Binary files are rows: a row is the buffer's shape after its first dimension B, and batch i
 *   reads rows [i*B, (i+1)*B). A .npy must be in C order and have the buffer's dtype (or any
 *   dtype with `cast:`, converted at read) and shape (rows, *rest) or (N, B, *rest): splitting
 *   the leading dimension is the same bytes; anything else (a transposed or reshaped array)
 *   would be read in the wrong order and is refused. A raw file is whole rows.
 * - The last batch: `last_batch: error` (default) refuses data that is not a whole number of
 *   batches, `drop` leaves its rows out, `pad` fills the batch up with `pad_value` and records
 *   its real rows for the sinks (pl_run_rows). `batches: all` counts ceil or floor accordingly.
 * - With `wrap: true` batch i reads batch i mod N; without it a file too short for the run fails
 *   at check time (check_files) and again at open, naming the first batch it cannot fill.
 * - A raw source refuses a file that looks like text (a CSV) unless its buffer is u8.
 * - Text and JSONL (source_text.c): one record per line into a u8 [B, L] buffer, lengths into
 *   an optional i32 [B] one; read in order, like stdin.
 * - `file: -` reads stdin as a stream, in order: a batch asked for before the ones ahead of it
 *   have run reads those first and keeps them until they are asked for (at most depth of them).
 * - generator random: counter-based (pl_rng.h: domain PL_RNG_SOURCE, id = stage index, batch =
 *   batch index, element index), so the data depends only on (seed, stage, batch, element), never
 *   on threads or depth.
 * - generator range: element j of batch b is b * count + j (integers wrap to the dtype).
 * - generator constant: every element is `value`.
 * - In memory (a run's pl_run_io for the stage, pipectl_bind_input): batch i is copied from the
 *   caller's memory, whatever the stage's file or generator says; nothing is opened. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pl_buffers.h"
#include "pl_half.h"
#include "pl_npy.h"
#include "pl_rng.h"
#include "pl_source.h"

static const pl_key pl__source_keys[] = {
    {"to", PL_KEY_NAME, NULL, NULL, "the host buffer to fill (required)"},
    {"file", PL_KEY_PATH, NULL, NULL,
     "raw, .npy, text or JSONL file, or - (stdin, read in order); batch i reads the i-th "
     "buffer-sized slice (text: B records)"},
    {"format", PL_KEY_ENUM, "auto|raw|npy|text|jsonl", "auto",
     "auto: by extension (.npy, .txt, .jsonl or .ndjson), else raw"},
    {"wrap", PL_KEY_BOOL, NULL, "false", "start again at the file's beginning when it runs out"},
    {"last_batch", PL_KEY_ENUM, "error|drop|pad", "error",
     "data that is not a whole number of batches: refuse it, leave the last rows out, or pad "
     "the last batch (sinks that write rows write only its real rows)"},
    {"pad_value", PL_KEY_NUM, NULL, "0", "last_batch: pad: the value of the padding elements"},
    {"cast", PL_KEY_ENUM, "u8|i32|i64|f16|bf16|f32|f64", "none",
     ".npy: convert its elements to this dtype (the buffer's) at read"},
    {"field", PL_KEY_STR, NULL, NULL, "jsonl: the field that holds each record's text"},
    {"lengths", PL_KEY_NAME, NULL, NULL,
     "text, jsonl: an i32 [B] host buffer for each record's length in bytes"},
    {"truncate", PL_KEY_BOOL, NULL, "false",
     "text, jsonl: cut a record longer than a row instead of refusing it"},
    {"generator", PL_KEY_ENUM, "random|range|constant", "random", "used when no file is given"},
    {"value", PL_KEY_NUM, NULL, "0", "constant: the value"},
    {"min", PL_KEY_NUM, NULL, "-1 (floats), 0 (integers)", "random: lower bound (inclusive)"},
    {"max", PL_KEY_NUM, NULL, "1 (floats), 100 (integers)", "random: upper bound (exclusive)"},
    {"seed", PL_KEY_INT, NULL, "run seed", "random: seed of this stage's stream"},
    {NULL, 0, NULL, NULL, NULL},
};

/* A key that only means something with another: refuse it where it is written. */
static pl_status pl__only_with(const pl_stage *st, const char *key, bool ok, const char *needs,
                               pl_error *err)
{
    const pl_opt *o = pl_stage_opt(st, key);
    if (!o || ok) return PL_OK;
    return pl_error_at(err, PL_EINPUT, o->pos, "source '%s': '%s' only applies %s; drop it",
                       st->name, key, needs);
}

static bool pl__ends_with(const char *s, const char *ext)
{
    size_t n = strlen(s), e = strlen(ext);
    return n >= e && strcmp(s + n - e, ext) == 0;
}

static pl_status pl__source_bind(pl_spec *spec, pl_stage *st, pl_error *err)
{
    int w;
    PL_CHECK(pl_kind_bind_ref(spec, st, "to", true, true, "the host buffer to fill", &w, err));
    pl_source_opts *o = pl_spec_alloc(spec, sizeof *o);
    if (!o) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    o->lengths = -1;
    const pl_opt *f = pl_stage_opt(st, "file");
    if (f) {
        o->file = f->str;
        o->file_pos = f->val_pos;
        o->from_stdin = strcmp(f->str, "-") == 0;
        const pl_opt *g = pl_stage_opt(st, "generator");
        if (g)
            return pl_error_at(err, PL_EINPUT, g->pos,
                               "source '%s' has both 'file' and 'generator'; keep one", st->name);
    }
    PL_CHECK(pl_opt_get_enum(st, "format", PL_SRC_AUTO, &o->format, err));
    if (o->file && o->format == PL_SRC_AUTO)
        o->format = pl__ends_with(o->file, ".npy")   ? PL_SRC_NPY
                    : pl__ends_with(o->file, ".txt") ? PL_SRC_TEXT
                    : pl__ends_with(o->file, ".jsonl") || pl__ends_with(o->file, ".ndjson")
                        ? PL_SRC_JSONL
                        : PL_SRC_RAW;
    bool text = o->format == PL_SRC_TEXT || o->format == PL_SRC_JSONL;
    PL_CHECK(pl_opt_get_bool(st, "wrap", false, &o->wrap, err));
    PL_CHECK(pl_opt_get_enum(st, "last_batch", PL_LAST_ERROR, &o->last_batch, err));
    PL_CHECK(pl_opt_get_num(st, "pad_value", 0, &o->pad_value, err));
    int cast;
    PL_CHECK(pl_opt_get_enum(st, "cast", -1, &cast, err));
    o->has_cast = cast >= 0;
    o->cast = o->has_cast ? (pl_dtype)cast : PL_F32;
    const pl_opt *co = pl_stage_opt(st, "cast");
    if (co) o->cast_pos = co->val_pos;
    o->field = pl_opt_get_str(st, "field", NULL);
    PL_CHECK(pl_opt_get_bool(st, "truncate", false, &o->truncate, err));
    PL_CHECK(pl__only_with(st, "format", o->file, "with a 'file'", err));
    PL_CHECK(pl__only_with(st, "wrap", o->file, "with a 'file'", err));
    PL_CHECK(pl__only_with(st, "last_batch", o->file, "with a 'file'", err));
    PL_CHECK(
        pl__only_with(st, "pad_value", o->last_batch == PL_LAST_PAD, "with last_batch: pad", err));
    PL_CHECK(pl__only_with(st, "cast", o->file && o->format == PL_SRC_NPY,
                           "with a .npy file (a raw file has no dtype to convert from)", err));
    PL_CHECK(pl__only_with(st, "field", o->format == PL_SRC_JSONL, "with format: jsonl", err));
    PL_CHECK(pl__only_with(st, "lengths", o->file && text, "with format: text or jsonl", err));
    PL_CHECK(pl__only_with(st, "truncate", o->file && text, "with format: text or jsonl", err));
    if (o->format == PL_SRC_JSONL && !o->field)
        return pl_error_at(err, PL_EINPUT, o->file_pos,
                           "source '%s' reads JSONL records but has no 'field:'; name the field "
                           "that holds each record's text (field: text)",
                           st->name);
    if (o->wrap && o->from_stdin)
        return pl_error_at(err, PL_EINPUT, pl_stage_opt(st, "wrap")->pos,
                           "source '%s' reads stdin, which cannot start again; drop 'wrap', or "
                           "save the data to a file",
                           st->name);
    if (o->wrap && text)
        return pl_error_at(err, PL_EINPUT, pl_stage_opt(st, "wrap")->pos,
                           "source '%s': 'wrap' repeats whole batches of a binary file, not text "
                           "records; drop it",
                           st->name);
    if (o->wrap && o->last_batch != PL_LAST_ERROR)
        return pl_error_at(err, PL_EINPUT, pl_stage_opt(st, "wrap")->pos,
                           "source '%s': 'wrap' repeats whole batches, so the file has no last "
                           "batch to drop or pad; drop 'wrap' or 'last_batch'",
                           st->name);
    if (o->from_stdin && o->format == PL_SRC_NPY)
        return pl_error_at(err, PL_EINPUT, o->file_pos,
                           "source '%s': a .npy cannot be read from stdin (its header gives the "
                           "shape the source checks first); save it to a file, or send raw bytes "
                           "with format: raw",
                           st->name);
    if (text) {
        PL_CHECK(pl_kind_bind_ref(spec, st, "lengths", true, false, "", &o->lengths, err));
    }
    PL_CHECK(pl_opt_get_enum(st, "generator", PL_GEN_RANDOM, &o->generator, err));
    PL_CHECK(pl_opt_get_num(st, "value", 0, &o->value, err));
    o->has_min = pl_stage_opt(st, "min") != NULL;
    o->has_max = pl_stage_opt(st, "max") != NULL;
    PL_CHECK(pl_opt_get_num(st, "min", 0, &o->min, err));
    PL_CHECK(pl_opt_get_num(st, "max", 0, &o->max, err));
    int64_t seed;
    o->has_seed = pl_stage_opt(st, "seed") != NULL;
    PL_CHECK(pl_opt_get_int(st, "seed", 0, INT64_MIN, INT64_MAX, &seed, err));
    o->seed = (uint64_t)seed;
    st->priv = o;
    return PL_OK;
}

/* The buffer the source fills: its `to` (the first write the bind added). */
static const pl_buffer *pl__to(const pl_spec *spec, const pl_stage *st)
{
    const pl_source_opts *o = st->priv;
    return pl_kind_wbuf(spec, st, st->n_writes - 1 - (o->lengths >= 0 ? 1 : 0));
}

/* min/max as the generator uses them: defaults per dtype. */
static void pl__source_range(const pl_source_opts *o, pl_dtype t, double *lo, double *hi)
{
    pl_rng_default_range(t, lo, hi);
    if (o->has_min) *lo = o->min;
    if (o->has_max) *hi = o->max;
}

static bool pl__int_fits(double v, pl_dtype t)
{
    if (v != floor(v)) return false;
    switch (t) {
    case PL_U8:
        return v >= 0 && v <= 255;
    case PL_I32:
        return v >= -2147483648.0 && v <= 2147483647.0;
    default:
        return v >= -9.2e18 && v <= 9.2e18;
    }
}

static pl_status pl__validate_file(const pl_spec *spec, const pl_stage *st, pl_error *err)
{
    const pl_source_opts *o = st->priv;
    const pl_buffer *b = pl__to(spec, st);
    char sh[96];
    if (o->format == PL_SRC_TEXT || o->format == PL_SRC_JSONL) {
        if (b->dtype != PL_U8 || b->rank != 2)
            return pl_error_at(err, PL_EINPUT, o->file_pos,
                               "source '%s' reads %s records into buffer '%s' (%s %s), which must "
                               "be u8 [B, L]: B records a batch, each in a row of L bytes",
                               st->name, o->format == PL_SRC_TEXT ? "text" : "JSONL", b->name,
                               pl_dtype_name(b->dtype), pl_kind_shape(b, sh, sizeof sh));
        if (o->lengths >= 0) {
            const pl_buffer *l = pl_kind_wbuf(spec, st, st->n_writes - 1);
            const pl_opt *lo = pl_stage_opt(st, "lengths");
            if (l->dtype != PL_I32 || l->rank != 1 || l->shape[0] != b->shape[0] ||
                l->where != PL_HOST)
                return pl_error_at(err, PL_EINPUT, lo->val_pos,
                                   "source '%s': lengths buffer '%s' is %s %s on the %s; it must "
                                   "be an i32 [%lld] host buffer (one length per row of '%s')",
                                   st->name, l->name, pl_dtype_name(l->dtype),
                                   pl_kind_shape(l, sh, sizeof sh), pl_where_name(l->where),
                                   (long long)b->shape[0], b->name);
        }
        return PL_OK;
    }
    if (o->has_cast && o->cast != b->dtype)
        return pl_error_at(err, PL_EINPUT, o->cast_pos,
                           "source '%s': cast: %s, but buffer '%s' is %s; cast converts the "
                           "file's elements to the buffer's dtype: write cast: %s",
                           st->name, pl_dtype_name(o->cast), b->name, pl_dtype_name(b->dtype),
                           pl_dtype_name(b->dtype));
    if (o->last_batch == PL_LAST_PAD && !pl_dtype_is_float(b->dtype) &&
        !pl__int_fits(o->pad_value, b->dtype))
        return pl_error_at(err, PL_EINPUT, pl_stage_opt(st, "pad_value")->val_pos,
                           "source '%s': pad_value %g does not fit buffer '%s' (%s); give a whole "
                           "number in its range",
                           st->name, o->pad_value, b->name, pl_dtype_name(b->dtype));
    return PL_OK;
}

static pl_status pl__source_validate(const pl_spec *spec, const pl_stage *st, pl_error *err)
{
    const pl_source_opts *o = st->priv;
    const pl_buffer *b = pl__to(spec, st);
    if (o->file) return pl__validate_file(spec, st, err);
    if (o->generator == PL_GEN_RANDOM) {
        double lo, hi;
        pl__source_range(o, b->dtype, &lo, &hi);
        const pl_opt *mo = pl_stage_opt(st, "max");
        pl_pos pos = mo ? mo->val_pos : st->pos;
        if (!(hi > lo))
            return pl_error_at(err, PL_EINPUT, pos,
                               "source '%s': max (%g) must be larger than min (%g)", st->name, hi,
                               lo);
        if (!pl_dtype_is_float(b->dtype) &&
            (!pl__int_fits(lo, b->dtype) || !pl__int_fits(hi - 1, b->dtype)))
            return pl_error_at(err, PL_EINPUT, pos,
                               "source '%s': buffer '%s' is %s, so min and max must be whole "
                               "numbers in its range (got %g and %g)",
                               st->name, b->name, pl_dtype_name(b->dtype), lo, hi);
    }
    if (o->generator == PL_GEN_CONSTANT && !pl_dtype_is_float(b->dtype) &&
        !pl__int_fits(o->value, b->dtype)) {
        const pl_opt *vo = pl_stage_opt(st, "value");
        return pl_error_at(err, PL_EINPUT, vo ? vo->val_pos : st->pos,
                           "source '%s': value %g does not fit buffer '%s' (%s); give a whole "
                           "number in its range",
                           st->name, o->value, b->name, pl_dtype_name(b->dtype));
    }
    return PL_OK;
}

/* One batch kept by a stream source until it is asked for (pl__seq_get). */
typedef struct pl__stash {
    int64_t batch; /* -1: free */
    char *mem;     /* the `to` buffer's bytes, then the lengths' */
} pl__stash;

typedef struct pl__source_state {
    int fd;
    uint64_t offset;     /* binary file: data start */
    int64_t rows;        /* rows (records) the file holds; -1 for stdin */
    int64_t n_batches;   /* the batches they make (last_batch decides the last one) */
    uint64_t file_row;   /* binary file: bytes of one row in the file */
    pl_dtype file_dtype; /* binary file: its elements (cast converts from them) */
    char path[4096];
    const char *name; /* into path: its base name, or "<stdin>" */
    /* In order (stdin, text): batches are read one after the other under mu. */
    bool seq;
    pthread_mutex_t mu;
    pl_src_in in;
    int64_t next;     /* the next batch the stream gives */
    int64_t got_rows; /* rows read so far */
    bool ended;       /* the stream ended (no batch from `next` on) */
    pl__stash *stash;
    int n_stash;
    uint64_t to_bytes, len_bytes;
    char *skip; /* a shard's stream: where the batches other shards run are read and dropped */
    const pl_run_io *io; /* the caller's memory stands in for the file or generator (borrowed) */
} pl__source_state;

static const char *pl__base(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* A raw file of a non-u8 buffer whose first bytes (at least 32) are all printable text in two
 * lines or more is almost surely a CSV or a text dump: reading it as binary numbers gives
 * garbage. Binary data passes this by chance with odds below 1e-13. */
static bool pl__looks_like_text(const unsigned char *p, size_t n, int *lines, bool *commas)
{
    *lines = 0;
    *commas = false;
    if (n < 32) return false;
    for (size_t i = 0; i < n; i++) {
        unsigned c = p[i];
        if (c == '\n') ++*lines;
        if (c == ',') *commas = true;
        if ((c < 0x20 && c != '\n' && c != '\r' && c != '\t') || c == 0x7f) return false;
    }
    return *lines >= 2;
}

/* The batches `rows` rows of B make under o->last_batch; an error names what does not fit. */
static pl_status pl__batches_of(const pl_stage *st, const pl_buffer *b, const char *name,
                                int64_t rows, const char *unit, pl__source_state *s, pl_error *err)
{
    const pl_source_opts *o = st->priv;
    int64_t B = b->shape[0], rem = rows % B;
    s->rows = rows;
    s->n_batches = rows / B + (o->last_batch == PL_LAST_PAD && rem ? 1 : 0);
    if (rem && o->last_batch == PL_LAST_ERROR)
        return pl_error_at(err, PL_EINPUT, o->file_pos,
                           "source '%s': '%s' holds %lld %s, not a whole number of batches of "
                           "%lld (buffer '%s'): the last batch would have %lld %s; set "
                           "last_batch: "
                           "pad (fill it up with pad_value) or last_batch: drop (leave them out), "
                           "or give whole batches",
                           st->name, name, (long long)rows, unit, (long long)B, b->name,
                           (long long)rem, unit);
    return PL_OK;
}

/* The batches of a text or JSONL file, each record read and checked (check time and open). */
static pl_status pl__probe_text(const pl_spec *spec, const pl_stage *st, int fd,
                                pl__source_state *s, pl_error *err)
{
    const pl_source_opts *o = st->priv;
    const pl_buffer *b = pl__to(spec, st);
    pl_src_in in;
    PL_CHECK(pl_src_in_init(&in, fd, s->name, err));
    int64_t n = 0;
    pl_status ps = pl_source_text_count(o, &in, b, &n, err);
    pl_src_in_fini(&in);
    if (ps != PL_OK) return pl_npy_error_at(err, o->file_pos, "source", st->name);
    if (lseek(fd, 0, SEEK_SET) != 0)
        return pl_error_at(err, PL_EINPUT, o->file_pos, "source '%s': cannot read '%s': %s",
                           st->name, s->path, strerror(errno));
    return pl__batches_of(st, b, s->name, n, "records", s, err);
}

/* The rows of a binary file: .npy header or raw size, dtype, shape and the text look. */
static pl_status pl__probe_binary(const pl_spec *spec, const pl_stage *st, FILE *f, uint64_t size,
                                  pl__source_state *s, pl_error *err)
{
    const pl_source_opts *o = st->priv;
    const pl_buffer *b = pl__to(spec, st);
    uint64_t row_count = (uint64_t)(b->count / b->shape[0]); /* elements in one row */
    s->file_dtype = b->dtype;
    if (o->format != PL_SRC_NPY) {
        if (b->dtype != PL_U8) {
            unsigned char head[4096];
            size_t k = size < sizeof head ? (size_t)size : sizeof head;
            int lines;
            bool commas;
            if (pread(fileno(f), head, k, 0) == (ssize_t)k &&
                pl__looks_like_text(head, k, &lines, &commas)) {
                static const char *const np[PL_DTYPE_COUNT] = {
                    "uint8", "int32", "int64", "float16", "float32", "float32", "float64"};
                char stem[256];
                snprintf(stem, sizeof stem, "%s", s->name);
                char *dot = strrchr(stem, '.');
                if (dot && dot != stem) *dot = '\0';
                return pl_error_at(
                    err, PL_EINPUT, o->file_pos,
                    "source '%s': '%s' looks like text (its first %zu bytes are printable, in %d "
                    "line%s), but a raw source reads binary %s; read text with format: text into "
                    "a u8 buffer, or convert it with numpy: np.save('%s.npy', np.loadtxt('%s'%s, "
                    "dtype='%s'))%s",
                    st->name, s->name, k, lines, lines == 1 ? "" : "s", pl_dtype_name(b->dtype),
                    stem, s->name, commas ? ", delimiter=','" : "", np[b->dtype],
                    b->dtype == PL_BF16 ? " and cast: bf16" : "");
            }
        }
        s->offset = 0;
        s->file_row = row_count * pl_dtype_size(b->dtype);
        if (size % s->file_row) {
            /* Not even whole rows: nothing last_batch could pad. */
            return pl_error_at(err, PL_EINPUT, o->file_pos,
                               "source '%s': '%s' holds %llu bytes, not a whole number of "
                               "batches of %llu bytes (buffer '%s'): the last %llu bytes would be "
                               "ignored; trim the file to whole batches or change the buffer's "
                               "shape",
                               st->name, s->path, (unsigned long long)size,
                               (unsigned long long)b->bytes, b->name,
                               (unsigned long long)(size % b->bytes));
        }
        int64_t rows = (int64_t)(size / s->file_row);
        if (rows % b->shape[0] && o->last_batch == PL_LAST_ERROR)
            return pl_error_at(err, PL_EINPUT, o->file_pos,
                               "source '%s': '%s' holds %llu bytes, not a whole number of "
                               "batches of %llu bytes (buffer '%s'): the last %llu bytes would be "
                               "ignored; set last_batch: pad or last_batch: drop, trim the file "
                               "to whole batches, or change the buffer's shape",
                               st->name, s->path, (unsigned long long)size,
                               (unsigned long long)b->bytes, b->name,
                               (unsigned long long)(size % b->bytes));
        return pl__batches_of(st, b, s->name, rows, "rows", s, err);
    }
    pl_npy_info info;
    if (pl_npy_read_header(f, s->path, &info, err) != PL_OK)
        return pl_npy_error_at(err, o->file_pos, "source", st->name);
    pl_dtype fd;
    bool known = pl_npy_descr_dtype(info.descr, &fd);
    if (info.fortran_order ||
        (!pl_npy_descr_matches(info.descr, b->dtype) && (!o->has_cast || !known))) {
        char also[96] = "";
        if (!info.fortran_order && !o->has_cast && known)
            snprintf(also, sizeof also, ", or set cast: %s to convert it at read",
                     pl_dtype_name(b->dtype));
        return pl_error_at(err, PL_EINPUT, o->file_pos,
                           "source '%s': '%s' holds '%s'%s but buffer '%s' is %s; save it as "
                           "numpy dtype '%s' in C order%s",
                           st->name, s->path, info.descr,
                           info.fortran_order ? " in Fortran order" : "", b->name,
                           pl_dtype_name(b->dtype), pl_npy_descr(b->dtype), also);
    }
    if (!pl_npy_descr_matches(info.descr, b->dtype)) s->file_dtype = fd;
    /* (rows, *rest), or (N, B, *rest): the same bytes in C order. Anything else (a transposed
     * or reshaped array of the right size) would be read in the wrong order. */
    int lead = info.rank - b->rank;
    bool ok = lead == 0 || lead == 1;
    for (int i = lead == 0 ? 1 : 0; ok && i < b->rank; i++)
        ok = info.shape[lead + i] == b->shape[i];
    if (!ok) {
        char have[160], want[160];
        pl_npy_shape_str(info.rank, info.shape, have, sizeof have);
        int64_t nshape[PL_MAX_RANK + 1];
        nshape[0] = 0;
        memcpy(nshape + 1, b->shape, (size_t)b->rank * sizeof *nshape);
        pl_npy_shape_str(b->rank + 1, nshape, want, sizeof want);
        char *zero = strstr(want, "(0");
        if (zero) zero[1] = 'N';
        return pl_error_at(err, PL_EINPUT, o->file_pos,
                           "source '%s': '%s' holds an array of shape %s, but batches of "
                           "buffer '%s' need shape %s; a transposed or reshaped array would be "
                           "read in the wrong order: save it with that shape",
                           st->name, s->name, have, b->name, want);
    }
    if (info.data_offset + info.data_bytes > size)
        return pl_error_at(
            err, PL_EINPUT, o->file_pos,
            "source '%s': '%s' is truncated: its header promises %llu bytes of "
            "data, the file has %llu",
            st->name, s->path, (unsigned long long)info.data_bytes,
            (unsigned long long)(size > info.data_offset ? size - info.data_offset : 0));
    s->offset = info.data_offset;
    s->file_row = row_count * pl_dtype_size(s->file_dtype);
    int64_t rows = lead == 0 ? info.shape[0] : info.shape[0] * b->shape[0];
    return pl__batches_of(st, b, s->name, rows, "rows", s, err);
}

/* Opens the source's file and checks it against the buffer and a run of `batches` batches; on
 * success fills s (rows, batches, layout, path) and leaves s->fd open. Used at check time
 * (check_files) and again at open, so both say the same. Not for stdin. */
static pl_status pl__source_probe(const pl_spec *spec, const pl_stage *st, int64_t batches,
                                  pl__source_state *s, pl_error *err)
{
    const pl_source_opts *o = st->priv;
    const pl_buffer *b = pl__to(spec, st);
    pl_status ps = PL_OK;
    s->fd = -1;
    pl_spec_path(spec, o->file, s->path, sizeof s->path);
    s->name = pl__base(s->path);
    FILE *f = fopen(s->path, "rb");
    if (!f)
        return pl_error_at(err, PL_EINPUT, o->file_pos, "source '%s': cannot open '%s': %s",
                           st->name, s->path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        ps = pl_error_at(err, PL_EINPUT, o->file_pos,
                         "source '%s': '%s' is not a regular file; a source reads batch i at its "
                         "offset, which a FIFO or a device cannot do: copy the data to a file",
                         st->name, s->path);
        goto done;
    }
    if (o->format == PL_SRC_TEXT || o->format == PL_SRC_JSONL)
        ps = pl__probe_text(spec, st, fileno(f), s, err);
    else
        ps = pl__probe_binary(spec, st, f, (uint64_t)sb.st_size, s, err);
    if (ps != PL_OK) goto done;
    const char *unit = o->format == PL_SRC_TEXT || o->format == PL_SRC_JSONL ? "records" : "bytes";
    uint64_t per = unit[0] == 'r' ? (uint64_t)b->shape[0] : b->bytes;
    if (s->n_batches == 0) {
        ps =
            pl_error_at(err, PL_EINPUT, o->file_pos,
                        "source '%s': %s holds no whole batch of %llu %s; give a larger "
                        "file or a smaller buffer%s",
                        st->name, s->name, (unsigned long long)per, unit,
                        s->rows && o->last_batch == PL_LAST_DROP ? ", or set last_batch: pad" : "");
        goto done;
    }
    if (!o->wrap && s->n_batches < batches) {
        ps = pl_error_at(err, PL_EINPUT, o->file_pos,
                         "source '%s': %s holds %lld batches of %llu %s, the run needs %lld: "
                         "batch %lld is the first it cannot fill; %srun fewer batches",
                         st->name, s->name, (long long)s->n_batches, (unsigned long long)per, unit,
                         (long long)batches, (long long)s->n_batches,
                         unit[0] == 'r' ? "" : "set wrap: true or ");
        goto done;
    }
    s->fd = dup(fileno(f));
    if (s->fd < 0)
        ps = pl_error_at(err, PL_EINPUT, o->file_pos, "source '%s': cannot open '%s': %s", st->name,
                         s->path, strerror(errno));
done:
    fclose(f);
    return ps;
}

static pl_status pl__source_check_files(const pl_spec *spec, const pl_stage *st, int64_t batches,
                                        pl_error *err)
{
    const pl_source_opts *o = st->priv;
    if (!o->file || o->from_stdin) return PL_OK; /* stdin: its length shows at run time */
    pl__source_state s;
    memset(&s, 0, sizeof s);
    pl_status ps = pl__source_probe(spec, st, batches, &s, err);
    if (s.fd >= 0) close(s.fd);
    return ps;
}

/* `batches: all`: a file without wrap ends after its batches (last_batch: pad counts a partial
 * last one, drop does not; error refuses it). Stdin does not count: its end is not known before
 * the run. */
static pl_status pl__source_count(const pl_spec *spec, const pl_stage *st, bool probe, int64_t *n,
                                  pl_error *err)
{
    const pl_source_opts *o = st->priv;
    *n = -1;
    if (!o->file || o->wrap || o->from_stdin) return PL_OK;
    *n = 0;
    if (!probe) return PL_OK;
    pl__source_state s;
    memset(&s, 0, sizeof s);
    pl_status ps = pl__source_probe(spec, st, 0, &s, err);
    if (s.fd >= 0) close(s.fd);
    if (ps == PL_OK) *n = s.n_batches;
    return ps;
}

static void pl__state_free(pl__source_state *s)
{
    if (!s) return;
    if (s->seq) {
        pl_src_in_fini(&s->in);
        pthread_mutex_destroy(&s->mu);
    }
    for (int i = 0; i < s->n_stash; i++)
        free(s->stash[i].mem);
    free(s->stash);
    free(s->skip);
    if (s->fd > 2) close(s->fd);
    free(s);
}

static pl_status pl__source_open(const pl_run_env *env, const pl_stage *st, void **state,
                                 pl_error *err)
{
    *state = NULL;
    const pl_source_opts *o = st->priv;
    const pl_run_io *io = pl_run_env_io(env, st->index);
    if (!o->file && !io) return PL_OK;
    const pl_buffer *b = pl__to(env->spec, st);
    pl__source_state *s = calloc(1, sizeof *s);
    if (!s) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    s->fd = -1;
    pl_status ps = PL_OK;
    if (io) {
        /* In memory: nothing to open; the caller's memory was checked against the run's batches
         * before it started (pl_source_memory_stage's caller), and is again here. */
        s->io = io;
        if (io->bytes / b->bytes < (uint64_t)env->batches) {
            pl__state_free(s);
            return pl_error_set(err, PL_EINPUT,
                                "error: source '%s': the memory bound to buffer '%s' holds %llu "
                                "batches, the run needs %lld",
                                st->name, b->name, (unsigned long long)(io->bytes / b->bytes),
                                (long long)env->batches);
        }
        *state = s;
        return PL_OK;
    }
    if (o->from_stdin) {
        snprintf(s->path, sizeof s->path, "<stdin>");
        s->name = s->path;
        s->fd = 0;
        s->rows = -1;
        s->file_row = b->bytes / (uint64_t)b->shape[0];
    } else {
        PL_CHECK_GOTO(pl__source_probe(env->spec, st, env->batches, s, err), ps, fail);
        /* A file's padded batch is known now, before any sink runs. */
        int64_t rem = s->rows % b->shape[0];
        if (o->last_batch == PL_LAST_PAD && rem && s->n_batches - 1 < env->batches)
            pl_run_rows_pad(env, s->n_batches - 1, rem);
    }
    s->seq = o->from_stdin || o->format == PL_SRC_TEXT || o->format == PL_SRC_JSONL;
    if (s->seq) {
        s->to_bytes = b->bytes;
        s->len_bytes = o->lengths >= 0 ? (uint64_t)b->shape[0] * sizeof(int32_t) : 0;
        s->n_stash = env->depth + 1;
        s->stash = calloc((size_t)s->n_stash, sizeof *s->stash);
        if (!s->stash || pthread_mutex_init(&s->mu, NULL) != 0) {
            s->seq = false;
            ps = pl_error_set(err, PL_ENOMEM, "error: out of memory");
            goto fail;
        }
        for (int i = 0; i < s->n_stash; i++)
            s->stash[i].batch = -1;
        ps = pl_src_in_init(&s->in, s->fd, s->name, err);
        if (ps != PL_OK) {
            pthread_mutex_destroy(&s->mu);
            s->seq = false;
            goto fail;
        }
    }
    *state = s;
    return PL_OK;
fail:
    pl__state_free(s);
    return ps;
}

static pl_status pl__source_close(const pl_run_env *env, const pl_stage *st, void *state,
                                  int64_t completed, bool failed, pl_error *err)
{
    (void)env, (void)st, (void)completed, (void)failed, (void)err;
    pl__state_free(state);
    return PL_OK;
}

static void pl__fill_value(void *dst, pl_dtype t, int64_t j, double v)
{
    switch (t) {
    case PL_F64:
        ((double *)dst)[j] = v;
        break;
    case PL_F32:
        ((float *)dst)[j] = (float)v;
        break;
    case PL_F16:
        ((uint16_t *)dst)[j] = pl_f32_to_f16((float)v);
        break;
    case PL_BF16:
        ((uint16_t *)dst)[j] = pl_f32_to_bf16((float)v);
        break;
    case PL_U8:
        ((uint8_t *)dst)[j] = (uint8_t)(int64_t)v;
        break;
    case PL_I32:
        ((int32_t *)dst)[j] = (int32_t)(int64_t)v;
        break;
    case PL_I64:
        ((int64_t *)dst)[j] = (int64_t)v;
        break;
    case PL_DTYPE_COUNT:
        break;
    }
}

/* Rows [rows, B) of batch memory `dst` become padding: pad_value, or NUL rows and length 0. */
static void pl__pad(const pl_source_opts *o, const pl_buffer *b, void *dst, int32_t *lens,
                    int64_t rows)
{
    int64_t per = b->count / b->shape[0];
    if (o->format == PL_SRC_TEXT || o->format == PL_SRC_JSONL) {
        memset((char *)dst + rows * per, 0, (size_t)((b->shape[0] - rows) * per));
        for (int64_t r = rows; lens && r < b->shape[0]; r++)
            lens[r] = 0;
        return;
    }
    for (int64_t j = rows * per; j < b->count; j++)
        pl__fill_value(dst, b->dtype, j, o->pad_value);
}

/* f64 to f32 rounding to odd: a second rounding (to f16 or bf16, nearest even) from it gives
 * the f64 value correctly rounded, which f64 -> f32 -> f16 with two nearest-even roundings does
 * not always. */
static float pl__f64_to_f32_odd(double d)
{
    float f = (float)d;
    if ((double)f == d || d != d) return f;
    if (fabs((double)f) > fabs(d)) f = nextafterf(f, 0.0f);
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u |= 1u;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Element j of a `t` array, as a double (floats) or an integer. */
static double pl__load_f(const void *p, pl_dtype t, int64_t j)
{
    switch (t) {
    case PL_F64:
        return ((const double *)p)[j];
    case PL_F32:
        return ((const float *)p)[j];
    case PL_F16:
        return pl_f16_to_f32(((const uint16_t *)p)[j]);
    case PL_BF16:
        return pl_bf16_to_f32(((const uint16_t *)p)[j]);
    default:
        return 0;
    }
}
static int64_t pl__load_i(const void *p, pl_dtype t, int64_t j)
{
    switch (t) {
    case PL_U8:
        return ((const uint8_t *)p)[j];
    case PL_I32:
        return ((const int32_t *)p)[j];
    case PL_I64:
        return ((const int64_t *)p)[j];
    default:
        return 0;
    }
}

static bool pl__i_fits(int64_t v, pl_dtype t)
{
    return t == PL_I64 || (t == PL_I32 && v >= INT32_MIN && v <= INT32_MAX) ||
           (t == PL_U8 && v >= 0 && v <= 255);
}

/* Converts n elements from `from` to `to`: floats round to nearest even (too large: infinity,
 * NaN stays NaN); an integer target takes only whole numbers in its range. On the first element
 * it refuses, returns false with its index in *bad and its value in *val. */
static bool pl__cast(const void *src, pl_dtype from, void *dst, pl_dtype to, int64_t n,
                     int64_t *bad, double *val)
{
    bool ff = pl_dtype_is_float(from);
    for (int64_t j = 0; j < n; j++) {
        if (ff) {
            double d = pl__load_f(src, from, j);
            switch (to) {
            case PL_F64:
                ((double *)dst)[j] = d;
                break;
            case PL_F32:
                ((float *)dst)[j] = (float)d;
                break;
            case PL_F16:
                ((uint16_t *)dst)[j] = pl_f32_to_f16(pl__f64_to_f32_odd(d));
                break;
            case PL_BF16:
                ((uint16_t *)dst)[j] = pl_f32_to_bf16(pl__f64_to_f32_odd(d));
                break;
            default:
                if (!(d == floor(d)) || !pl__int_fits(d, to) ||
                    (to == PL_I64 && (d < -9223372036854775808.0 || d >= 9223372036854775808.0))) {
                    *bad = j;
                    *val = d;
                    return false;
                }
                pl__fill_value(dst, to, j, d);
                break;
            }
            continue;
        }
        int64_t v = pl__load_i(src, from, j);
        switch (to) {
        case PL_F64:
            ((double *)dst)[j] = (double)v;
            break;
        case PL_F32:
            ((float *)dst)[j] = (float)v;
            break;
        case PL_F16:
            ((uint16_t *)dst)[j] = pl_f32_to_f16(pl__f64_to_f32_odd((double)v));
            break;
        case PL_BF16:
            ((uint16_t *)dst)[j] = pl_f32_to_bf16(pl__f64_to_f32_odd((double)v));
            break;
        default:
            if (!pl__i_fits(v, to)) {
                *bad = j;
                *val = (double)v;
                return false;
            }
            pl__fill_value(dst, to, j, (double)v);
            if (to == PL_I64) ((int64_t *)dst)[j] = v; /* exact past 2^53 */
            break;
        }
    }
    return true;
}

static pl_status pl__pread_all(int fd, void *dst, uint64_t n, uint64_t off, const char *path,
                               pl_error *err)
{
    uint64_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, (char *)dst + got, (size_t)(n - got), (off_t)(off + got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0)
            return pl_error_set(err, PL_EIO, "error: reading '%s' failed: %s", path,
                                r < 0 ? strerror(errno) : "the file got shorter");
        got += (uint64_t)r;
    }
    return PL_OK;
}

/* Batch `batch` of a binary file, by offset (any order, any worker). */
static pl_status pl__read_file(const pl_stage_ctx *ctx, pl__source_state *s, const pl_buffer *b,
                               void *dst, pl_error *err)
{
    const pl_source_opts *o = ctx->stage->priv;
    int64_t B = b->shape[0];
    int64_t bi = o->wrap ? ctx->batch % s->n_batches : ctx->batch;
    int64_t row0 = bi * B;
    int64_t rows = s->rows - row0 < B ? s->rows - row0 : B;
    if (rows <= 0)
        return pl_error_set(err, PL_EIO, "error: reading '%s' failed: the file got shorter",
                            s->path);
    uint64_t off = s->offset + (uint64_t)row0 * s->file_row;
    uint64_t n = (uint64_t)rows * s->file_row;
    if (s->file_dtype == b->dtype) {
        PL_CHECK(pl__pread_all(s->fd, dst, n, off, s->path, err));
    } else {
        void *tmp = malloc(n ? n : 1);
        if (!tmp) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
        pl_status ps = pl__pread_all(s->fd, tmp, n, off, s->path, err);
        int64_t per = b->count / B, bad;
        double val;
        if (ps == PL_OK && !pl__cast(tmp, s->file_dtype, dst, b->dtype, rows * per, &bad, &val))
            ps = pl_error_set(err, PL_EINPUT,
                              "error: '%s' element %lld of batch %lld (row %lld of the file) is "
                              "%.17g, which %s cannot hold; cast to an integer dtype takes only "
                              "whole numbers in its range: round or clip the data in numpy first",
                              s->name, (long long)bad, (long long)ctx->batch,
                              (long long)(row0 + bad / per), val, pl_dtype_name(b->dtype));
        free(tmp);
        PL_CHECK(ps);
    }
    if (rows < B) pl__pad(o, b, dst, NULL, rows);
    return PL_OK;
}

/* The stream's next batch (number s->next) into dst (and lens), under s->mu. */
static pl_status pl__seq_fill(const pl_stage_ctx *ctx, pl__source_state *s, const pl_buffer *b,
                              void *dst, int32_t *lens, pl_error *err)
{
    const pl_source_opts *o = ctx->stage->priv;
    int64_t B = b->shape[0], k = s->next, rows = 0;
    if (!s->ended && (o->format == PL_SRC_TEXT || o->format == PL_SRC_JSONL)) {
        for (; rows < B; rows++) {
            const char *rec;
            size_t n;
            bool more;
            PL_CHECK(pl_source_text_next(o, &s->in, &rec, &n, &more, err));
            if (!more) break;
            PL_CHECK(pl_source_text_row(o, &s->in, b, rec, n, dst, lens, rows, err));
        }
    } else if (!s->ended) {
        size_t got;
        PL_CHECK(pl_src_in_read(&s->in, dst, (size_t)b->bytes, &got, err));
        if (got % s->file_row)
            return pl_error_set(err, PL_EINPUT,
                                "error: %s ended inside a row: its %lld bytes are not whole "
                                "rows of %llu bytes (buffer '%s'); send whole rows",
                                s->name,
                                (long long)(s->got_rows * (int64_t)s->file_row + (int64_t)got),
                                (unsigned long long)s->file_row, b->name);
        rows = (int64_t)(got / s->file_row);
    }
    s->got_rows += rows;
    if (rows == B) return PL_OK;
    bool first_end = !s->ended;
    s->ended = true;
    const char *unit = o->format == PL_SRC_TEXT || o->format == PL_SRC_JSONL ? "records" : "rows";
    if (rows > 0 && o->last_batch == PL_LAST_PAD) {
        pl__pad(o, b, dst, lens, rows);
        pl_run_rows_pad(ctx->env, k, rows);
        return PL_OK;
    }
    if (rows > 0 && first_end && o->last_batch == PL_LAST_ERROR)
        return pl_error_set(err, PL_EINPUT,
                            "error: %s ended inside batch %lld: %lld %s, not a whole number of "
                            "batches of %lld (buffer '%s'); set last_batch: pad or last_batch: "
                            "drop, or send whole batches",
                            s->name, (long long)k, (long long)s->got_rows, unit, (long long)B,
                            b->name);
    return pl_error_set(
        err, PL_EINPUT,
        "error: %s ended after %lld %s (%lld batches of %lld), the run needs "
        "more: batch %lld is the first it cannot fill; run fewer batches",
        s->name, (long long)s->got_rows, unit,
        (long long)(s->got_rows / B + (o->last_batch == PL_LAST_PAD && s->got_rows % B ? 1 : 0)),
        (long long)B, (long long)k);
}

/* Batch ctx->batch of a stream: read in order; batches read ahead of the one asked for wait in
 * the stash until theirs asks. */
static pl_status pl__seq_get(const pl_stage_ctx *ctx, pl__source_state *s, const pl_buffer *b,
                             void *dst, int32_t *lens, pl_error *err)
{
    pl_status ps = PL_OK;
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->n_stash; i++) {
        if (s->stash[i].batch != ctx->batch) continue;
        memcpy(dst, s->stash[i].mem, (size_t)s->to_bytes);
        if (lens) memcpy(lens, s->stash[i].mem + s->to_bytes, (size_t)s->len_bytes);
        s->stash[i].batch = -1;
        goto done;
    }
    if (ctx->batch < s->next) {
        ps = pl_error_set(err, PL_ERUNTIME,
                          "error: batch %lld of %s was asked for twice: an executor bug, please "
                          "report it",
                          (long long)ctx->batch, s->name);
        goto done;
    }
    while (ps == PL_OK && s->next < ctx->batch) {
        if (pl_shard_local(&ctx->spec->run.shard, ctx->env->batches, s->next) < 0) {
            /* Another shard's batch: a stream is read in order, so it is read and dropped. */
            if (!s->skip) s->skip = malloc((size_t)(s->to_bytes + s->len_bytes));
            if (!s->skip) {
                ps = pl_error_set(err, PL_ENOMEM, "error: out of memory");
                break;
            }
            ps = pl__seq_fill(ctx, s, b, s->skip,
                              s->len_bytes ? (int32_t *)(s->skip + s->to_bytes) : NULL, err);
            if (ps == PL_OK) s->next++;
            continue;
        }
        pl__stash *slot = NULL;
        for (int i = 0; i < s->n_stash && !slot; i++)
            if (s->stash[i].batch < 0) slot = &s->stash[i];
        if (!slot) {
            ps = pl_error_set(err, PL_ERUNTIME,
                              "error: more than %d batches of %s ahead of batch %lld: an executor "
                              "bug, please report it",
                              s->n_stash, s->name, (long long)ctx->batch);
            break;
        }
        if (!slot->mem) slot->mem = malloc((size_t)(s->to_bytes + s->len_bytes));
        if (!slot->mem) {
            ps = pl_error_set(err, PL_ENOMEM, "error: out of memory");
            break;
        }
        ps = pl__seq_fill(ctx, s, b, slot->mem,
                          s->len_bytes ? (int32_t *)(slot->mem + s->to_bytes) : NULL, err);
        if (ps == PL_OK) slot->batch = s->next++;
    }
    if (ps == PL_OK) {
        ps = pl__seq_fill(ctx, s, b, dst, lens, err);
        s->next++;
    }
done:
    pthread_mutex_unlock(&s->mu);
    return ps;
}

static pl_status pl__source_run(pl_stage_ctx *ctx, pl_error *err)
{
    const pl_stage *st = ctx->stage;
    const pl_source_opts *o = st->priv;
    const pl_buffer *b = pl__to(ctx->spec, st);
    void *dst = ctx->bufs[b->index];
    pl__source_state *s = ctx->state;
    if (s && s->io) {
        /* In place, its readers read the caller's batch itself; else one copy into the slot's
         * buffer, as a file source's pread: pinned memory on the GPU executor, which its uploads
         * read. */
        if (!s->io->in_place)
            memcpy(dst, (const char *)s->io->data + (uint64_t)ctx->batch * b->bytes,
                   (size_t)b->bytes);
        return PL_OK;
    }
    if (s && s->seq) {
        int32_t *lens = o->lengths >= 0
                            ? ctx->bufs[pl_kind_wbuf(ctx->spec, st, st->n_writes - 1)->index]
                            : NULL;
        return pl__seq_get(ctx, s, b, dst, lens, err);
    }
    if (s) return pl__read_file(ctx, s, b, dst, err);
    switch (o->generator) {
    case PL_GEN_RANDOM: {
        double lo, hi;
        pl__source_range(o, b->dtype, &lo, &hi);
        uint64_t seed = o->has_seed ? o->seed : ctx->env->seed;
        pl_rng_fill(dst, b->dtype, b->count,
                    pl_rng_key(seed, PL_RNG_SOURCE, (uint64_t)st->index, (uint64_t)ctx->batch), 0,
                    lo, hi);
        break;
    }
    case PL_GEN_RANGE: {
        uint64_t base = (uint64_t)ctx->batch * (uint64_t)b->count;
        for (int64_t j = 0; j < b->count; j++) {
            uint64_t v = base + (uint64_t)j;
            switch (b->dtype) {
            case PL_U8:
                ((uint8_t *)dst)[j] = (uint8_t)v;
                break;
            case PL_I32:
                ((int32_t *)dst)[j] = (int32_t)(uint32_t)v;
                break;
            case PL_I64:
                ((int64_t *)dst)[j] = (int64_t)v;
                break;
            default:
                pl__fill_value(dst, b->dtype, j, (double)v);
                break;
            }
        }
        break;
    }
    case PL_GEN_CONSTANT:
        for (int64_t j = 0; j < b->count; j++)
            pl__fill_value(dst, b->dtype, j, o->value);
        break;
    }
    return PL_OK;
}

extern const pl_kind pl_kind_source; /* defined below */

pl_status pl_source_memory_stage(const pl_spec *spec, int buffer, int *stage, pl_error *err)
{
    *stage = -1;
    for (int i = 0; i < spec->n_stages; i++) {
        const pl_stage *st = &spec->stages[i];
        if (st->kind != &pl_kind_source || pl__to(spec, st)->index != buffer) continue;
        const pl_source_opts *o = st->priv;
        if (o->lengths >= 0)
            return pl_error_set(err, PL_EINPUT,
                                "error: source '%s' fills '%s' and its lengths buffer '%s' from "
                                "text records: in memory it would have no lengths to give; drop "
                                "'lengths' from the stage, or give the records in a file",
                                st->name, spec->buffers[buffer].name,
                                pl_kind_wbuf(spec, st, st->n_writes - 1)->name);
        *stage = i;
        return PL_OK;
    }
    return PL_OK;
}

const pl_kind pl_kind_source = {
    .name = "source",
    .engine = PL_ENGINE_HOST,
    .role = PL_ROLE_INPUT,
    .keys = pl__source_keys,
    .doc = "fills a per-batch host buffer from a file (raw, .npy, text, JSONL), stdin, a seeded "
           "generator or a constant",
    .bind = pl__source_bind,
    .validate = pl__source_validate,
    .check_files = pl__source_check_files,
    .count_batches = pl__source_count,
    .open = pl__source_open,
    .close = pl__source_close,
    .run_host = pl__source_run,
};
