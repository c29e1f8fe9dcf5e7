/* sink: writes a host buffer's batches, in batch order, to a raw or .npy file, or records from
 * buffers as text lines or JSONL (sink_text.c), and checksums them. Nothing completed is ever lost
 * and nothing half-written appears under the final name: batches go to "<to>.partial", written
 * through (write(2)) per batch; close() always finalizes: truncates to the batches written, fixes
 * the .npy header's first dimension to that count (the batches, or with `layout: rows` the rows:
 * (batches*B, *rest), the shape a source read) and renames the file to its final name, after an
 * error or Ctrl-C too. Sinks that write rows
 * (`layout: rows`, text, JSONL) write only the real rows of a padded last batch (pl_run_rows). Only
 * when a run fails before its first batch is the partial file removed, leaving an older output of
 * that name untouched.
 *
 * Targets (docs/pipeline-yaml.md, "Sink targets"):
 * - a regular file (new or existing): as above. A symlink is followed to its target, which is
 *   replaced (the link stays). The ".partial" carries an exclusive lock (fcntl) for the whole
 *   run: a second run writing the same file fails at open, naming the other process.
 * - a FIFO, a character device (/dev/null, a terminal) or `-` (stdout): written through, no
 *   .partial, nothing to rename; raw only (a .npy header is fixed at the end, which a stream
 *   cannot take back).
 * - a directory, a block device or a socket: refused at check time (check_files) and at open.
 * If the .partial disappears during the run (its directory was removed), close() notices, saves
 * the batches again from the open file under the final name and says so.
 * - in memory (a run's pl_run_io for the stage, pipectl_bind_output): no file; each batch's bytes,
 *   the ones the file would get after its header, go into the caller's memory one after the other
 *   (or to its callback), checksummed the same.
 *
 * What a killed run leaves (SIGKILL, a crash, power loss) is recoverable. The .partial is always a
 * prefix of whole batches plus at most one torn one, and a .npy's header (fixed-length, written
 * with 0 rows at open) is rewritten in place about once a second, after an fdatasync of the
 * data, by a background thread (sink_sync.c), so it never claims rows that are not on disk:
 * numpy.load reads the batches up to the last rewrite. Beside it, "<to>.partial.meta" (JSON,
 * written at open, removed with the .partial) says what the file is, where it goes and how big a
 * batch is, so `pipectl salvage` (cmd_salvage.c) can cut the torn batch, fix the header, rename it
 * and give the checksums the run would have. */
#define _XOPEN_SOURCE 700 /* realpath */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pl_buffers.h"
#include "pl_hash.h"
#include "pl_json.h"
#include "pl_npy.h"
#include "pl_sink.h"
#include "pl_source.h"

extern const pl_kind pl_kind_sink;   /* defined below; sinks compare notes with each other */
extern const pl_kind pl_kind_source; /* whose padded batches sinks that write rows follow */

static const pl_key pl__sink_keys[] = {
    {"from", PL_KEY_NAME, NULL, NULL,
     "the host buffer to write (required), except for jsonl, which reads those of fields"},
    {"to", PL_KEY_PATH, NULL, NULL,
     "output file, FIFO, character device or - (stdout); none: checksums only"},
    {"format", PL_KEY_ENUM, "auto|raw|npy|text|jsonl", "auto",
     "auto: by extension (.npy, .txt, .jsonl or .ndjson), else raw"},
    {"layout", PL_KEY_ENUM, "batches|rows", "batches",
     "raw, npy: batches writes shape (batches, *buffer shape); rows writes (batches*B, *rest), "
     "the batches' rows one after another, and only the real rows of a padded last batch"},
    {"lengths", PL_KEY_NAME, NULL, NULL,
     "text: an i32 [B] host buffer with each row's length in bytes (else a row ends at its "
     "first NUL)"},
    {"fields", PL_KEY_ITEMS, NULL, NULL,
     "jsonl, which needs it: the record's fields in order, [{name: buffer}, ...] or "
     "[buffer, ...]"},
    {"row_field", PL_KEY_STR, NULL, NULL,
     "jsonl: a first field with the record's index (0-based, across batches)"},
    {"checksum", PL_KEY_BOOL, NULL, "true", "compute a checksum per batch (reported, bundled)"},
    {NULL, 0, NULL, NULL, NULL},
};

enum { PL__FMT_AUTO, PL__FMT_RAW, PL__FMT_NPY, PL__FMT_TEXT, PL__FMT_JSONL };

/* The canonical targets of a spec's sinks (canon -> first stage index), shared by all its sinks,
 * so the one-file-two-sinks check is linear: a sink looks its target up instead of comparing
 * with every earlier sink (50,000 sinks took 25 s). Arena memory; grown by doubling. */
typedef struct pl__sink_reg {
    const char **keys;
    int *vals;
    uint32_t cap, n;
    /* The first source with last_batch: pad (-1: none), looked for once for all sinks: sinks that
     * write rows check their rows against its. */
    bool pad_known;
    int pad_stage;
} pl__sink_reg;

typedef struct pl__sink_opts {
    pl__sink_reg *reg; /* shared by every sink of the spec */
    int from;          /* index in reads (-1 for jsonl) */
    const char *to;    /* as written, or NULL */
    pl_pos to_pos;
    int format;
    bool checksum;
    bool npy;          /* format npy, or auto and `to` ends in .npy */
    bool rows;         /* writes rows: layout: rows, text, jsonl */
    pl_sink_text text; /* text and jsonl (format PL__FMT_TEXT, PL__FMT_JSONL) */
    const char *canon; /* the target as an absolute, normalised path ("-": stdout), to compare */
} pl__sink_opts;

typedef pl_sink_target pl__target;

typedef struct pl__sink_state {
    int fd;
    bool npy;
    bool stream;
    char path[PATH_MAX];         /* final name (the file written, symlinks followed) */
    char partial[PATH_MAX + 16]; /* path + ".partial" */
    char meta[PATH_MAX + 24];    /* partial + ".meta" ("" until written) */
    uint64_t short_at;           /* where the sidecar's "short_batch" value starts */
    size_t header_len;
    pl_sink_sync sync; /* .npy: the header's rewrites (sink_sync.c) */
    bool syncing;      /* sync is registered */
    uint64_t batch_bytes;
    uint64_t row_bytes;
    int64_t written;
    uint64_t bytes;  /* data bytes written (after the header) */
    int64_t rows;    /* rows written */
    pl_sink_buf out; /* text, jsonl: the batch's text */
    uint64_t *sums;  /* checksums of the first PL_BATCH_CHECKSUMS_MAX batches */
    int64_t cap_sums;
    pl_hash_stream all;
    /* The running hash before each of the last n_hist batches ([b % n_hist]), so close can take
     * back batches another stage's failure left uncommitted (at most depth of them: the
     * scheduler runs a sink's batch only once every non-output stage finished it). */
    pl_hash_stream *hist;
    uint64_t *hist_bytes; /* bytes and rows written before each of those batches */
    int64_t *hist_rows;
    int n_hist;
    const pl_run_io *io; /* in memory: the caller's memory or callback instead of a file */
} pl__sink_state;

static bool pl__ends_with(const char *s, const char *ext)
{
    size_t n = strlen(s), e = strlen(ext);
    return n >= e && strcmp(s + n - e, ext) == 0;
}

/* Lexically normalises an absolute path in place: "//", "/./" and "/x/../" go. */
static void pl__normalise(char *p)
{
    char out[PATH_MAX];
    size_t k = 0;
    const char *c = p;
    while (*c) {
        while (*c == '/')
            c++;
        if (!*c) break;
        const char *e = strchr(c, '/');
        size_t n = e ? (size_t)(e - c) : strlen(c);
        if (n == 1 && c[0] == '.') {
        } else if (n == 2 && c[0] == '.' && c[1] == '.') {
            while (k > 0 && out[k - 1] != '/')
                k--;
            if (k > 0) k--;
        } else if (k + 1 + n < sizeof out) {
            out[k++] = '/';
            memcpy(out + k, c, n);
            k += n;
        }
        c += n;
    }
    if (k == 0) out[k++] = '/';
    out[k] = '\0';
    memcpy(p, out, k + 1);
}

/* out = a[0..alen) + "/" + b, cut to cap (paths longer than PATH_MAX fail later, at open). */
static void pl__join(char *out, size_t cap, const char *a, size_t alen, const char *b)
{
    size_t bl = strlen(b);
    if (alen > cap - 1) alen = cap - 1;
    memmove(out, a, alen);
    size_t k = alen;
    if (k < cap - 1) out[k++] = '/';
    if (bl > cap - 1 - k) bl = cap - 1 - k;
    memcpy(out + k, b, bl);
    out[k + bl] = '\0';
}

/* Follows symlinks from `path` (up to 40, as the kernel does) to the name actually written. */
static void pl__follow(char *path, size_t cap)
{
    for (int hop = 0; hop < 40; hop++) {
        struct stat sb;
        if (lstat(path, &sb) != 0 || !S_ISLNK(sb.st_mode)) return;
        char link[PATH_MAX];
        ssize_t n = readlink(path, link, sizeof link - 1);
        if (n <= 0) return;
        link[n] = '\0';
        char next[PATH_MAX];
        if (link[0] == '/') {
            snprintf(next, sizeof next, "%s", link);
        } else {
            const char *slash = strrchr(path, '/');
            if (slash)
                pl__join(next, sizeof next, path, (size_t)(slash - path), link);
            else
                snprintf(next, sizeof next, "%s", link);
        }
        snprintf(path, cap, "%s", next);
    }
}

/* The target's canonical name: absolute, normalised, symlinks followed, and the longest prefix
 * that exists resolved by realpath, so 'o/a.npy' and './o/a.npy' (or a link to it) compare
 * equal before either exists. */
void pl_sink_canon(const pl_spec *spec, const char *to, char *out, size_t cap)
{
    if (strcmp(to, "-") == 0) {
        snprintf(out, cap, "-");
        return;
    }
    char p[PATH_MAX], abs[PATH_MAX];
    pl_spec_out_path(spec, to, p, sizeof p);
    pl__follow(p, sizeof p);
    if (p[0] == '/') {
        snprintf(abs, sizeof abs, "%s", p);
    } else {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof cwd)) snprintf(cwd, sizeof cwd, ".");
        pl__join(abs, sizeof abs, cwd, strlen(cwd), p);
    }
    pl__normalise(abs);
    size_t n = strlen(abs);
    for (size_t cut = n; cut > 0; cut--) {
        if (cut < n && abs[cut] != '/') continue;
        char prefix[PATH_MAX], real[PATH_MAX];
        memcpy(prefix, abs, cut);
        prefix[cut] = '\0';
        if (realpath(prefix, real)) {
            snprintf(out, cap, "%s%s", strcmp(real, "/") == 0 && cut < n ? "" : real, abs + cut);
            return;
        }
    }
    snprintf(out, cap, "%s", abs);
}

static uint32_t pl__str_hash(const char *c)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (; *c; c++)
        h = (h ^ (unsigned char)*c) * 16777619u;
    return h;
}

/* Index stored for `key`, or -1. */
static int pl__reg_get(const pl__sink_reg *r, const char *key)
{
    if (!r->cap) return -1;
    for (uint32_t i = pl__str_hash(key) & (r->cap - 1); r->keys[i]; i = (i + 1) & (r->cap - 1))
        if (strcmp(r->keys[i], key) == 0) return r->vals[i];
    return -1;
}

/* Stores key -> val unless key is there (the first sink keeps it). */
static int pl__reg_put(pl_spec *spec, pl__sink_reg *r, const char *key, int val)
{
    if (pl__reg_get(r, key) >= 0) return 0;
    if ((r->n + 1) * 2 > r->cap) {
        uint32_t cap = r->cap ? r->cap * 2 : 64;
        const char **keys = pl_spec_alloc(spec, cap * sizeof *keys);
        int *vals = pl_spec_alloc(spec, cap * sizeof *vals);
        if (!keys || !vals) return -1;
        for (uint32_t i = 0; i < r->cap; i++) {
            if (!r->keys[i]) continue;
            uint32_t j = pl__str_hash(r->keys[i]) & (cap - 1);
            while (keys[j])
                j = (j + 1) & (cap - 1);
            keys[j] = r->keys[i];
            vals[j] = r->vals[i];
        }
        r->keys = keys;
        r->vals = vals;
        r->cap = cap;
    }
    uint32_t i = pl__str_hash(key) & (r->cap - 1);
    while (r->keys[i])
        i = (i + 1) & (r->cap - 1);
    r->keys[i] = key;
    r->vals[i] = val;
    r->n++;
    return 0;
}

/* The registry of the nearest earlier sink (binds run in stage order), or a new one. Each scan
 * stops at the previous sink, so all scans together pass each stage once. */
static pl__sink_reg *pl__reg_of(pl_spec *spec, const pl_stage *st)
{
    for (int i = st->index - 1; i >= 0; i--) {
        const pl_stage *o = &spec->stages[i];
        if (o->kind == &pl_kind_sink && o->priv) return ((const pl__sink_opts *)o->priv)->reg;
    }
    return pl_spec_alloc(spec, sizeof(pl__sink_reg));
}

static pl_status pl__sink_bind(pl_spec *spec, pl_stage *st, pl_error *err)
{
    pl__sink_opts *o = pl_spec_alloc(spec, sizeof *o);
    if (!o) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    const pl_opt *to = pl_stage_opt(st, "to");
    if (to) {
        o->to = to->str;
        o->to_pos = to->val_pos;
    }
    PL_CHECK(pl_opt_get_enum(st, "format", PL__FMT_AUTO, &o->format, err));
    PL_CHECK(pl_opt_get_bool(st, "checksum", true, &o->checksum, err));
    int layout;
    PL_CHECK(pl_opt_get_enum(st, "layout", 0, &layout, err));
    if (o->format == PL__FMT_AUTO && o->to)
        o->format = pl__ends_with(o->to, ".npy")   ? PL__FMT_NPY
                    : pl__ends_with(o->to, ".txt") ? PL__FMT_TEXT
                    : pl__ends_with(o->to, ".jsonl") || pl__ends_with(o->to, ".ndjson")
                        ? PL__FMT_JSONL
                        : PL__FMT_RAW;
    bool text = o->format == PL__FMT_TEXT || o->format == PL__FMT_JSONL;
    if (!o->to && o->format != PL__FMT_AUTO && !text) {
        const pl_opt *fo = pl_stage_opt(st, "format");
        return pl_error_at(err, PL_EINPUT, fo->pos,
                           "sink '%s' has a 'format' but no 'to' file; add 'to: out/%s.npy' or "
                           "drop 'format'",
                           st->name, st->name);
    }
    const pl_opt *lo = pl_stage_opt(st, "layout");
    if (lo && text)
        return pl_error_at(err, PL_EINPUT, lo->pos,
                           "sink '%s': 'layout' is for raw and .npy files; text and JSONL write "
                           "rows already: drop it",
                           st->name);
    o->rows = layout == 1 || text;
    o->from = -1;
    if (o->format != PL__FMT_JSONL)
        PL_CHECK(pl_kind_bind_ref(spec, st, "from", false, true, "the host buffer to write",
                                  &o->from, err));
    else if (pl_stage_opt(st, "from"))
        return pl_error_at(err, PL_EINPUT, pl_stage_opt(st, "from")->pos,
                           "sink '%s' writes JSONL records, whose buffers 'fields' names; drop "
                           "'from' (or add it to fields: [{%s: %s}])",
                           st->name, pl_stage_opt(st, "from")->str, pl_stage_opt(st, "from")->str);
    o->text.from = o->from;
    if (text) {
        PL_CHECK(pl_sink_text_bind(spec, st, o->format == PL__FMT_JSONL, &o->text, err));
    } else {
        static const char *const only[][2] = {{"lengths", "format: text"},
                                              {"fields", "format: jsonl"},
                                              {"row_field", "format: jsonl"}};
        for (int i = 0; i < 3; i++) {
            const pl_opt *x = pl_stage_opt(st, only[i][0]);
            if (x)
                return pl_error_at(err, PL_EINPUT, x->pos,
                                   "sink '%s': '%s' only applies with %s; drop it", st->name,
                                   only[i][0], only[i][1]);
        }
    }
    if (o->to) {
        o->npy = o->format == PL__FMT_NPY;
        char c[PATH_MAX];
        pl_sink_canon(spec, o->to, c, sizeof c);
        o->canon = pl_spec_strdup(spec, c);
        if (!o->canon) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    }
    o->reg = pl__reg_of(spec, st);
    if (!o->reg || (o->to && pl__reg_put(spec, o->reg, o->canon, st->index) != 0))
        return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    st->priv = o;
    return PL_OK;
}

/* The rows a sink writes along its buffers' first dimension: those of a padding source's
 * buffer, or the sink could not tell its padded rows from real ones. */
static pl_status pl__check_pad_rows(const pl_spec *spec, const pl_stage *st, pl_error *err)
{
    const pl__sink_opts *o = st->priv;
    pl__sink_reg *reg = o->reg;
    if (!reg->pad_known) {
        reg->pad_known = true;
        reg->pad_stage = -1;
        for (int i = 0; i < spec->n_stages && reg->pad_stage < 0; i++) {
            const pl_stage *x = &spec->stages[i];
            const pl_source_opts *so = x->priv;
            if (x->kind == &pl_kind_source && so && so->file && so->last_batch == PL_LAST_PAD)
                reg->pad_stage = i;
        }
    }
    if (reg->pad_stage < 0) return PL_OK;
    const pl_stage *src = &spec->stages[reg->pad_stage];
    /* Its `to`: the last write its bind added, or the one before a lengths buffer. */
    const pl_buffer *sb = pl_kind_wbuf(
        spec, src, src->n_writes - 1 - (((const pl_source_opts *)src->priv)->lengths >= 0));
    int64_t rows = o->format == PL__FMT_TEXT || o->format == PL__FMT_JSONL
                       ? pl_sink_text_rows(spec, st, &o->text)
                       : pl_kind_rbuf(spec, st, o->from)->shape[0];
    if (rows == sb->shape[0]) return PL_OK;
    char sh[96];
    return pl_error_at(err, PL_EINPUT, st->pos,
                       "sink '%s' writes rows of %lld a batch, but source '%s' pads the last batch "
                       "of '%s' %s: its real rows would not be known here; write layout: batches "
                       "(padding included), or give the sink's buffer %lld rows",
                       st->name, (long long)rows, src->name, sb->name,
                       pl_kind_shape(sb, sh, sizeof sh), (long long)sb->shape[0]);
}

const char *pl_sink_canon_of(const pl_stage *st)
{
    if (st->kind != &pl_kind_sink || !st->priv) return NULL;
    const pl__sink_opts *o = st->priv;
    return o->to ? o->canon : NULL;
}

bool pl_sink_part_info(const pl_spec *spec, const pl_stage *st, pl_sink_part *out)
{
    memset(out, 0, sizeof *out);
    if (st->kind != &pl_kind_sink || !st->priv) return false;
    const pl__sink_opts *o = st->priv;
    if (!o->to) return false;
    static const char *const names[] = {"raw", "raw", "npy", "text", "jsonl"};
    bool text = o->format == PL__FMT_TEXT || o->format == PL__FMT_JSONL;
    out->format = names[o->format];
    int read = !text ? o->from : o->text.jsonl ? o->text.fields[0].read : o->text.from;
    out->buf = pl_kind_rbuf(spec, st, read);
    out->batch_rows = text ? pl_sink_text_rows(spec, st, &o->text) : out->buf->shape[0];
    out->row_bytes = text ? 0 : out->buf->bytes / (uint64_t)out->buf->shape[0];
    out->rows = o->rows;
    return true;
}

/* Two sinks writing one file would clobber each other: refuse it, comparing canonical paths. */
static pl_status pl__sink_validate(const pl_spec *spec, const pl_stage *st, pl_error *err)
{
    const pl__sink_opts *o = st->priv;
    if (o->format == PL__FMT_TEXT || o->format == PL__FMT_JSONL)
        PL_CHECK(pl_sink_text_validate(spec, st, &o->text, err));
    if (o->rows) PL_CHECK(pl__check_pad_rows(spec, st, err));
    if (!o->to) return PL_OK;
    int first = pl__reg_get(o->reg, o->canon);
    if (first >= 0 && first != st->index) {
        const pl_stage *other = &spec->stages[first];
        const pl__sink_opts *oo = other->priv;
        if (strcmp(oo->to, o->to) == 0)
            return pl_error_at(err, PL_EINPUT, o->to_pos,
                               "sinks '%s' and '%s' both write '%s' (line %d); give each sink its "
                               "own file",
                               other->name, st->name, o->to, oo->to_pos.line);
        return pl_error_at(err, PL_EINPUT, o->to_pos,
                           "sinks '%s' and '%s' both write '%s' ('%s' at line %d is the same "
                           "file); give each sink its own file",
                           other->name, st->name, o->canon, oo->to, oo->to_pos.line);
    }
    return PL_OK;
}

/* The nearest existing ancestor directory of `path` must be a writable directory (mkdir -p and
 * the .partial + rename need it). */
static pl_status pl__check_dir(const char *who, pl_pos pos, const char *path, pl_error *err)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    for (;;) {
        char *slash = strrchr(dir, '/');
        if (!slash) {
            snprintf(dir, sizeof dir, ".");
        } else if (slash == dir) {
            dir[1] = '\0';
        } else {
            *slash = '\0';
        }
        struct stat sb;
        if (stat(dir, &sb) == 0) {
            if (!S_ISDIR(sb.st_mode))
                return pl_error_at(err, PL_EINPUT, pos,
                                   "%s: cannot create '%s': '%s' is not a directory", who, path,
                                   dir);
            if (access(dir, W_OK | X_OK) != 0)
                return pl_error_at(err, PL_EINPUT, pos,
                                   "%s: cannot create '%s': directory '%s' is not writable: %s",
                                   who, path, dir, strerror(errno));
            return PL_OK;
        }
        if (errno != ENOENT)
            return pl_error_at(err, PL_EINPUT, pos, "%s: cannot create '%s': %s: %s", who, path,
                               dir, strerror(errno));
        if (strcmp(dir, ".") == 0 || strcmp(dir, "/") == 0) return PL_OK;
    }
}

/* A shard's sink writes its part of the file (pl_shard_part_path); `pipectl merge` joins them. */
static pl_status pl__part_path(const pl_spec *spec, const char *who, pl_pos to_pos,
                               pl_sink_target *t, pl_error *err)
{
    const pl_shard *sh = &spec->run.shard;
    if (!pl_shard_on(sh)) return PL_OK;
    char part[PATH_MAX];
    if (!pl_shard_part_path(t->path, sh->index, sh->count, part, sizeof part))
        return pl_error_at(err, PL_EINPUT, to_pos, "%s: the part name of '%s' is too long", who,
                           t->path);
    memcpy(t->path, part, sizeof part);
    return PL_OK;
}

pl_status pl_sink_target_resolve(const pl_spec *spec, const char *who, const char *noun,
                                 const char *to, pl_pos to_pos, bool npy, const char *example,
                                 pl_sink_target *t, pl_error *err)
{
    memset(t, 0, sizeof *t);
    if (strcmp(to, "-") == 0) {
        t->is_stdout = t->stream = true;
        t->what = "stdout";
        snprintf(t->path, sizeof t->path, "-");
    } else {
        pl_spec_out_path(spec, to, t->path, sizeof t->path);
        PL_CHECK(pl__part_path(spec, who, to_pos, t, err));
        pl__follow(t->path, sizeof t->path);
        struct stat sb;
        if (stat(t->path, &sb) == 0) {
            if (S_ISDIR(sb.st_mode))
                return pl_error_at(err, PL_EINPUT, to_pos,
                                   "%s: '%s' is a directory; give a file name, e.g. 'to: %s/%s'",
                                   who, t->path, to, example);
            if (S_ISFIFO(sb.st_mode) || S_ISCHR(sb.st_mode)) {
                t->stream = true;
                t->what = S_ISFIFO(sb.st_mode) ? "a FIFO" : "a character device";
                if (access(t->path, W_OK) != 0)
                    return pl_error_at(err, PL_EINPUT, to_pos, "%s: cannot write '%s': %s", who,
                                       t->path, strerror(errno));
            } else if (!S_ISREG(sb.st_mode)) {
                return pl_error_at(err, PL_EINPUT, to_pos,
                                   "%s: '%s' is %s; a %s writes a regular file, a FIFO, a "
                                   "character device (/dev/null) or - (stdout)",
                                   who, t->path,
                                   S_ISBLK(sb.st_mode) ? "a block device" : "a socket", noun);
            }
        } else if (errno != ENOENT && errno != ENOTDIR) { /* ENOTDIR: pl__check_dir names it */
            return pl_error_at(err, PL_EINPUT, to_pos, "%s: cannot write '%s': %s", who, t->path,
                               strerror(errno));
        }
        if (!t->stream) PL_CHECK(pl__check_dir(who, to_pos, t->path, err));
    }
    if (t->stream && npy)
        return pl_error_at(err, PL_EINPUT, to_pos,
                           "%s: '%s' is %s, and a .npy header is completed at the end of "
                           "the run, which a stream cannot take back; set format: raw",
                           who, to, t->what);
    return PL_OK;
}

/* Resolves and checks where the sink writes. Check time and open time both call it. */
static pl_status pl__target_resolve(const pl_spec *spec, const pl_stage *st, pl__target *t,
                                    pl_error *err)
{
    const pl__sink_opts *o = st->priv;
    char who[PL_MAX_NAME + 16], example[PL_MAX_NAME + 8];
    snprintf(who, sizeof who, "sink '%s'", st->name);
    snprintf(example, sizeof example, "%s%s", st->name, o->npy ? ".npy" : ".bin");
    return pl_sink_target_resolve(spec, who, "sink", o->to, o->to_pos, o->npy, example, t, err);
}

static pl_status pl__sink_check_files(const pl_spec *spec, const pl_stage *st, int64_t batches,
                                      pl_error *err)
{
    (void)batches;
    const pl__sink_opts *o = st->priv;
    if (!o->to) return PL_OK;
    pl__target t;
    return pl__target_resolve(spec, st, &t, err);
}

int pl_sink_mkdirs(const char *path)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", path);
    char *slash = strrchr(tmp, '/');
    if (!slash) return 0;
    *slash = '\0';
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(tmp, 0777) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    if (*tmp && mkdir(tmp, 0777) != 0 && errno != EEXIST) return -1;
    return 0;
}

pl_status pl_sink_write_all(int fd, const void *p, size_t n, off_t at, bool positioned)
{
    const char *c = p;
    while (n) {
        ssize_t w = positioned ? pwrite(fd, c, n, at) : write(fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return PL_EIO;
        c += w;
        n -= (size_t)w;
        at += w;
    }
    return PL_OK;
}

/* The .npy header: (batches, *shape), or with layout: rows (rows, *shape[1:]). */
static size_t pl__header(const pl_buffer *b, bool rows, int64_t first, char *buf, size_t cap)
{
    if (rows) return pl_npy_format_header(buf, cap, b->dtype, first, b->rank - 1, b->shape + 1);
    return pl_npy_format_header(buf, cap, b->dtype, first, b->rank, b->shape);
}

/* The sidecar's value of "short_batch": [batch, rows], fixed-width so it is rewritten in place. */
#define PL__SHORT_FMT "[%20lld, %20lld]}\n"

/* Writes the sidecar "<partial>.meta" that `pipectl salvage` reads (docs/pipeline-yaml.md, "What
 * each ending leaves"): what the file is, its final name, the size of a batch and a row, and
 * "short_batch", the one batch that may hold fewer rows (a padded last batch, [-1, 0] until it is
 * written), so that salvage can tell it from a torn one. */
static pl_status pl__meta_create(const pl_run_env *env, const pl_stage *st, pl__sink_state *s,
                                 int64_t rows_per_batch, pl_error *err)
{
    static const char *const formats[] = {"raw", "raw", "npy", "text", "jsonl"};
    const pl__sink_opts *o = st->priv;
    snprintf(s->meta, sizeof s->meta, "%s.meta", s->partial);
    json_t *j = json_pack(
        "{s:i, s:o, s:o, s:o, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:b}", "pipectl_partial", 1,
        "pipeline", pl_json_str(env->spec->name), "stage", pl_json_str(st->name), "final",
        pl_json_str(s->path), "format", formats[o->format], "layout", o->rows ? "rows" : "batches",
        "header_bytes", (json_int_t)s->header_len, "batch_bytes", (json_int_t)s->batch_bytes,
        "row_bytes", (json_int_t)s->row_bytes, "rows_per_batch", (json_int_t)rows_per_batch,
        "batches", (json_int_t)env->batches, "checksum", (int)o->checksum);
    char *txt = j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(j);
    size_t n = txt ? strlen(txt) : 0;
    char *buf = n ? malloc(n + 96) : NULL;
    if (!buf) {
        free(txt);
        s->meta[0] = '\0';
        return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    }
    memcpy(buf, txt, n - 1); /* the object without its closing brace */
    free(txt);
    int k = snprintf(buf + n - 1, 96, ",\"short_batch\":");
    s->short_at = n - 1 + (uint64_t)k;
    k += snprintf(buf + s->short_at, 96 - (size_t)k, PL__SHORT_FMT, -1LL, 0LL);
    pl_status ps = PL_OK;
    int fd = open(s->meta, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0 || pl_sink_write_all(fd, buf, n - 1 + (size_t)k, 0, false) != PL_OK) {
        ps = pl_error_set(err, PL_EIO, "error: sink '%s': cannot write '%s': %s", st->name, s->meta,
                          strerror(errno));
        if (fd >= 0) unlink(s->meta);
        s->meta[0] = '\0';
    }
    if (fd >= 0 && close(fd) != 0 && ps == PL_OK) {
        ps = pl_error_set(err, PL_EIO, "error: sink '%s': cannot write '%s': %s", st->name, s->meta,
                          strerror(errno));
        unlink(s->meta);
        s->meta[0] = '\0';
    }
    free(buf);
    return ps;
}

/* Records in the sidecar that batch `batch` holds `rows` rows, fewer than a whole batch, before
 * its bytes are written. */
static pl_status pl__meta_short(const pl_stage *st, pl__sink_state *s, int64_t batch, int64_t rows,
                                pl_error *err)
{
    char v[64];
    int n = snprintf(v, sizeof v, PL__SHORT_FMT, (long long)batch, (long long)rows);
    int fd = open(s->meta, O_WRONLY | O_CLOEXEC);
    pl_status ps = PL_OK;
    if (fd < 0 || pl_sink_write_all(fd, v, (size_t)n, (off_t)s->short_at, true) != PL_OK ||
        close(fd) != 0) {
        ps = pl_error_set(err, PL_EIO, "error: sink '%s': cannot write '%s': %s", st->name, s->meta,
                          strerror(errno));
        if (fd >= 0) close(fd);
    }
    return ps;
}

static void pl__state_free(pl__sink_state *s)
{
    free(s->sums);
    free(s->hist);
    free(s->hist_bytes);
    free(s->hist_rows);
    free(s->out.p);
    free(s);
}

/* Opens `partial` for writing under an exclusive lock held until close, and empties it: two runs
 * that open it with O_TRUNC together interleave their batches. After locking, the name
 * must still lead to the locked file: otherwise the run that held it renamed or removed it
 * meanwhile, and the new name is tried again. Filesystems without locks (ENOLCK) are written
 * unlocked. */
pl_status pl_sink_open_locked(const char *who, const char *noun, pl_pos pos, const char *partial,
                              const char *final, int *out, pl_error *err)
{
    *out = -1;
    for (int attempt = 0; attempt < 64; attempt++) {
        int fd =
            open(partial, O_RDWR | O_CREAT | O_CLOEXEC, 0666); /* read back by pl__save_again */
        if (fd < 0)
            return pl_error_at(err, PL_EIO, pos, "%s: cannot create '%s': %s", who, partial,
                               strerror(errno));
        struct flock fl;
        memset(&fl, 0, sizeof fl);
        fl.l_type = F_WRLCK;
        fl.l_whence = SEEK_SET;
        if (fcntl(fd, F_SETLK, &fl) != 0) {
            int e = errno;
            if (e == EACCES || e == EAGAIN) {
                struct flock q;
                memset(&q, 0, sizeof q);
                q.l_type = F_WRLCK;
                q.l_whence = SEEK_SET;
                long pid = fcntl(fd, F_GETLK, &q) == 0 && q.l_type != F_UNLCK ? (long)q.l_pid : 0;
                close(fd);
                char proc[64] = "";
                if (pid > 0) snprintf(proc, sizeof proc, " (process %ld)", pid);
                return pl_error_at(err, PL_EIO, pos,
                                   "%s: '%s' is being written by another run%s, which holds the "
                                   "lock on '%s'; wait for it to finish, or give this %s another "
                                   "'to'",
                                   who, final, proc, partial, noun);
            }
            if (e != ENOLCK && e != EOPNOTSUPP && e != EINVAL) {
                close(fd);
                return pl_error_at(err, PL_EIO, pos, "%s: cannot lock '%s': %s", who, partial,
                                   strerror(e));
            }
        }
        struct stat a, b;
        if (fstat(fd, &a) == 0 && stat(partial, &b) == 0 && a.st_dev == b.st_dev &&
            a.st_ino == b.st_ino) {
            if (ftruncate(fd, 0) != 0) {
                pl_status ps = pl_error_at(err, PL_EIO, pos, "%s: cannot empty '%s': %s", who,
                                           partial, strerror(errno));
                close(fd);
                return ps;
            }
            *out = fd;
            return PL_OK;
        }
        close(fd);
    }
    return pl_error_at(err, PL_EIO, pos,
                       "%s: '%s' keeps being replaced by another process; give this %s another "
                       "'to'",
                       who, partial, noun);
}

/* The sink's pl_sink_open_locked. */
static pl_status pl__open_locked(const pl_stage *st, pl_pos pos, const char *partial,
                                 const char *final, int *out, pl_error *err)
{
    char who[PL_MAX_NAME + 16];
    snprintf(who, sizeof who, "sink '%s'", st->name);
    return pl_sink_open_locked(who, "sink", pos, partial, final, out, err);
}

static pl_status pl__sink_open(const pl_run_env *env, const pl_stage *st, void **state,
                               pl_error *err)
{
    *state = NULL;
    const pl__sink_opts *o = st->priv;
    const pl_buffer *b = o->from >= 0 ? pl_kind_rbuf(env->spec, st, o->from) : NULL;
    pl__sink_state *s = calloc(1, sizeof *s);
    if (!s) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    s->fd = -1;
    bool text = o->format == PL__FMT_TEXT || o->format == PL__FMT_JSONL;
    s->batch_bytes = b && !text ? b->bytes : 0;
    s->row_bytes = b ? b->bytes / (uint64_t)b->shape[0] : 0;
    s->n_hist = env->depth + 2;
    s->hist = calloc((size_t)s->n_hist, sizeof *s->hist);
    s->hist_bytes = calloc((size_t)s->n_hist, sizeof *s->hist_bytes);
    s->hist_rows = calloc((size_t)s->n_hist, sizeof *s->hist_rows);
    if (!s->hist || !s->hist_bytes || !s->hist_rows) {
        pl__state_free(s);
        return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    }
    s->io = pl_run_env_io(env, st->index);
    if (!o->to || s->io) {
        *state = s; /* checksums only, or in memory: no file */
        return PL_OK;
    }
    pl__target t;
    pl_status ps = pl__target_resolve(env->spec, st, &t, err);
    if (ps == PL_EINPUT) {
        /* The same words as at check time, but now it is the run that cannot write: I/O. */
        if (err) err->status = PL_EIO;
        ps = PL_EIO;
    }
    if (ps != PL_OK) goto fail;
    snprintf(s->path, sizeof s->path, "%s", t.path);
    s->npy = o->npy;
    s->stream = t.stream;
    if (t.stream) {
        /* Written through as it comes; a FIFO's open waits for a reader, as `cat >fifo` does. */
        s->fd = t.is_stdout ? fcntl(1, F_DUPFD_CLOEXEC, 3) : open(t.path, O_WRONLY | O_CLOEXEC);
        if (s->fd < 0) {
            ps = pl_error_at(err, PL_EIO, o->to_pos, "sink '%s': cannot open '%s': %s", st->name,
                             t.path, strerror(errno));
            goto fail;
        }
        *state = s;
        return PL_OK;
    }
    snprintf(s->partial, sizeof s->partial, "%s.partial", s->path);
    if (pl_sink_mkdirs(s->path) != 0) {
        ps = pl_error_at(err, PL_EIO, o->to_pos,
                         "sink '%s': cannot create the directory of '%s': %s", st->name, s->path,
                         strerror(errno));
        goto fail;
    }
    PL_CHECK_GOTO(pl__open_locked(st, o->to_pos, s->partial, s->path, &s->fd, err), ps, fail);
    if (s->npy) {
        /* 0 rows until the first rewrite (pl__sync_header): the file loads at every moment. */
        char h[256];
        s->header_len = pl__header(b, o->rows, 0, h, sizeof h);
        if (!s->header_len || pl_sink_write_all(s->fd, h, s->header_len, 0, false) != PL_OK) {
            ps = pl_error_set(err, PL_EIO, "error: sink '%s': cannot write '%s': %s", st->name,
                              s->partial, strerror(errno));
            unlink(s->partial);
            goto fail;
        }
    }
    ps = pl__meta_create(env, st, s,
                         text ? pl_sink_text_rows(env->spec, st, &o->text) : b->shape[0], err);
    if (ps == PL_OK && s->npy) {
        pl_sink_sync *y = &s->sync;
        y->fd = s->fd;
        y->header_len = s->header_len;
        y->dtype = b->dtype;
        y->rank_rest = o->rows ? b->rank - 1 : b->rank;
        memcpy(y->rest, o->rows ? b->shape + 1 : b->shape, (size_t)y->rank_rest * sizeof *y->rest);
        int rc = pl_sink_sync_add(y);
        /* EAGAIN: no room for the thread (an address-space limit, or the thread limit) */
        if (rc)
            ps = pl_error_set(err, rc == EAGAIN ? PL_ENOMEM : PL_ERUNTIME,
                              "error: sink '%s': %scannot start the thread that syncs .npy "
                              "headers: %s",
                              st->name, rc == EAGAIN ? "out of memory: " : "", strerror(rc));
        s->syncing = rc == 0;
        if (rc) unlink(s->meta);
    }
    if (ps != PL_OK) {
        unlink(s->partial);
        goto fail;
    }
    *state = s;
    return PL_OK;
fail:
    if (s->fd >= 0) close(s->fd);
    pl__state_free(s);
    return ps;
}

/* A batch's bytes (what the file would get) into the caller's memory, after those before it,
 * or to the caller's callback. */
static pl_status pl__sink_memory(const pl_stage_ctx *ctx, const pl__sink_state *s, const void *data,
                                 size_t n, pl_error *err)
{
    const pl_run_io *io = s->io;
    const char *name = ctx->spec->buffers[io->buffer].name;
    if (io->fn) {
        int rc = io->fn(io->user, name, ctx->batch, data, n);
        if (rc != 0)
            return pl_error_set(err, PL_ERUNTIME,
                                "error: sink '%s': the callback that takes buffer '%s' returned "
                                "%d",
                                ctx->stage->name, name, rc);
        return PL_OK;
    }
    if (s->bytes + n > io->bytes)
        return pl_error_set(err, PL_EINPUT,
                            "error: sink '%s': the memory bound to buffer '%s' (%llu bytes) is "
                            "full at batch %lld; give room for every batch of the run",
                            ctx->stage->name, name, (unsigned long long)io->bytes,
                            (long long)ctx->batch);
    memcpy((char *)io->data + s->bytes, data, n);
    return PL_OK;
}

static pl_status pl__sink_run(pl_stage_ctx *ctx, pl_error *err)
{
    const pl_stage *st = ctx->stage;
    const pl__sink_opts *o = st->priv;
    pl__sink_state *s = ctx->state;
    /* A shard's batches come in the pipeline's order too, its own only. */
    int64_t want = pl_shard_global(&ctx->spec->run.shard, ctx->env->batches, s->written);
    if (ctx->batch != want)
        return pl_error_set(err, PL_ERUNTIME,
                            "error: sink got batch %lld out of order (expected %lld): an executor "
                            "bug, please report it",
                            (long long)ctx->batch, (long long)want);
    bool text = o->format == PL__FMT_TEXT || o->format == PL__FMT_JSONL;
    int64_t full = text ? pl_sink_text_rows(ctx->spec, st, &o->text)
                        : pl_kind_rbuf(ctx->spec, st, o->from)->shape[0];
    int64_t rows = o->rows ? pl_run_rows_of(ctx->env, ctx->batch, full) : full;
    const void *data;
    size_t n;
    if (text) {
        s->out.n = 0;
        PL_CHECK(pl_sink_text_format(ctx->spec, st, &o->text, ctx->bufs, ctx->batch, rows, &s->out,
                                     err));
        data = s->out.p ? s->out.p : "";
        n = s->out.n;
    } else {
        data = ctx->bufs[st->reads[o->from].index];
        n = rows == full ? (size_t)s->batch_bytes : (size_t)((uint64_t)rows * s->row_bytes);
    }
    s->hist_bytes[s->written % s->n_hist] = s->bytes;
    s->hist_rows[s->written % s->n_hist] = s->rows;
    if (rows < full && s->meta[0]) PL_CHECK(pl__meta_short(st, s, ctx->batch, rows, err));
    if (s->fd >= 0 && pl_sink_write_all(s->fd, data, n, 0, false) != PL_OK)
        return pl_error_set(err, PL_EIO, "error: writing '%s' failed: %s",
                            s->stream ? s->path : s->partial, strerror(errno));
    if (s->io) PL_CHECK(pl__sink_memory(ctx, s, data, n, err));
    s->bytes += n;
    s->rows += rows;
    if (o->checksum) {
        if (s->written < PL_BATCH_CHECKSUMS_MAX && s->written == s->cap_sums) {
            int64_t nc = s->cap_sums ? s->cap_sums * 2 : 64;
            uint64_t *ns = realloc(s->sums, (size_t)nc * sizeof *ns);
            if (!ns) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
            s->sums = ns;
            s->cap_sums = nc;
        }
        if (s->written < PL_BATCH_CHECKSUMS_MAX) s->sums[s->written] = pl_hash(data, n);
        s->hist[s->written % s->n_hist] = s->all;
        pl_hash_stream_update(&s->all, data, n);
    }
    s->written++;
    if (s->syncing) {
        pl_sink_sync_publish(&s->sync, o->rows ? s->rows : s->written);
        int e = pl_sink_sync_error(&s->sync);
        if (e && s->sync.failed_call == 0)
            return pl_error_set(err, PL_EIO, "error: sink '%s': fdatasync of '%s' failed: %s",
                                st->name, s->partial, strerror(e));
        if (e)
            return pl_error_set(err, PL_EIO,
                                "error: sink '%s': rewriting the header of '%s' failed: %s",
                                st->name, s->partial, strerror(e));
    }
    return PL_OK;
}

/* True when `fd` is no longer reachable as `name` (removed, or its directory removed). */
static bool pl__gone(int fd, const char *name)
{
    struct stat a, b;
    if (fstat(fd, &a) != 0) return false;
    if (a.st_nlink == 0) return true;
    return stat(name, &b) != 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino;
}

/* The .partial was deleted under the run: copy the `end` bytes still held by `fd` to a new
 * .partial (recreating its directory) and rename that to the final name. */
static pl_status pl__save_again(const pl_stage *st, pl__sink_state *s, uint64_t end, pl_error *err)
{
    char why[2 * PATH_MAX + 320] = "";
    int out = -1;
    pl_error lerr;
    if (pl_sink_mkdirs(s->path) != 0) {
        snprintf(why, sizeof why, "cannot create the directory of '%s': %s", s->path,
                 strerror(errno));
    } else if (pl__open_locked(st, (pl_pos){0}, s->partial, s->path, &out, &lerr) != PL_OK) {
        snprintf(why, sizeof why, "%s", lerr.msg);
    } else {
        char buf[1 << 16];
        for (uint64_t at = 0; at < end && !why[0];) {
            size_t want = end - at < sizeof buf ? (size_t)(end - at) : sizeof buf;
            ssize_t r = pread(s->fd, buf, want, (off_t)at);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0 || pl_sink_write_all(out, buf, (size_t)r, 0, false) != PL_OK)
                snprintf(why, sizeof why, "copying the data failed: %s",
                         r == 0 ? "short read" : strerror(errno));
            else
                at += (uint64_t)r;
        }
        if (!why[0] && rename(s->partial, s->path) != 0)
            snprintf(why, sizeof why, "cannot rename '%s' to '%s': %s", s->partial, s->path,
                     strerror(errno));
        if (why[0]) unlink(s->partial);
        close(out);
    }
    if (why[0])
        return pl_error_set(err, PL_EIO,
                            "error: sink '%s': '%s' was deleted during the run (was its directory "
                            "removed?), and saving the %lld batches written again failed: %s; "
                            "they are lost",
                            st->name, s->partial, (long long)s->written, why);
    return pl_error_set(err, PL_EIO,
                        "error: sink '%s': '%s' was deleted during the run (was its directory "
                        "removed?); the %lld batches written were saved again to '%s'",
                        st->name, s->partial, (long long)s->written, s->path);
}

static pl_status pl__sink_close(const pl_run_env *env, const pl_stage *st, void *state,
                                int64_t completed, bool failed, pl_error *err)
{
    pl__sink_state *s = state;
    pl_status ps = PL_OK;
    if (!s) return PL_OK;
    /* The syncer lets go of the file before close truncates it and sets the header. A failure of
     * its last fdatasync, after the last batch, is this run's error too. */
    int sync_err = 0;
    if (s->syncing) {
        pl_sink_sync_remove(&s->sync);
        sync_err = pl_sink_sync_error(&s->sync);
    }
    s->syncing = false;
    /* A failed run keeps what the whole run completed: batches this sink wrote past that point
     * are taken back (the file is truncated below), so every sink holds the same batches. A
     * stream (FIFO, stdout) cannot take back what it sent. */
    if (failed && !s->stream && completed < s->written && s->written - completed < s->n_hist) {
        if (((const pl__sink_opts *)st->priv)->checksum) s->all = s->hist[completed % s->n_hist];
        s->bytes = s->hist_bytes[completed % s->n_hist];
        s->rows = s->hist_rows[completed % s->n_hist];
        s->written = completed;
    }
    if (s->fd >= 0 && s->stream) {
        if (close(s->fd) != 0)
            ps = pl_error_set(err, PL_EIO, "error: sink '%s': closing '%s' failed: %s", st->name,
                              s->path, strerror(errno));
    } else if (s->fd >= 0) {
        bool gone = pl__gone(s->fd, s->partial);
        if (failed && s->written == 0) {
            /* Nothing to keep: do not replace an older output with an empty one. */
            if (!gone) unlink(s->partial);
            if (s->meta[0]) unlink(s->meta);
            close(s->fd);
        } else {
            const pl__sink_opts *o = st->priv;
            const pl_buffer *b = o->from >= 0 ? pl_kind_rbuf(env->spec, st, o->from) : NULL;
            uint64_t end = s->header_len + s->bytes;
            char h[256];
            size_t hl =
                s->npy ? pl__header(b, o->rows, o->rows ? s->rows : s->written, h, sizeof h) : 0;
            if (ftruncate(s->fd, (off_t)end) != 0 ||
                (s->npy &&
                 (hl != s->header_len || pl_sink_write_all(s->fd, h, hl, 0, true) != PL_OK)))
                ps = pl_error_set(err, PL_EIO,
                                  "error: sink '%s': finishing '%s' failed: %s; the "
                                  "%lld batches written are in '%s' ('pipectl salvage %s' "
                                  "finishes it)",
                                  st->name, s->partial, strerror(errno), (long long)s->written,
                                  s->partial, s->partial);
            else if (gone) {
                ps = pl__save_again(st, s, end, err);
                if (s->meta[0]) unlink(s->meta);
            }
            /* Renamed while the lock is held: a run waiting for it finds a new name. */
            else if (rename(s->partial, s->path) != 0)
                ps = pl_error_set(err, PL_EIO,
                                  "error: sink '%s': cannot rename '%s' to '%s': %s; the %lld "
                                  "batches written are in '%s'",
                                  st->name, s->partial, s->path, strerror(errno),
                                  (long long)s->written, s->partial);
            /* The sidecar goes with the .partial; it stays while a .partial is left to salvage. */
            if (ps == PL_OK && s->meta[0]) unlink(s->meta);
            if (close(s->fd) != 0 && ps == PL_OK)
                ps = pl_error_set(err, PL_EIO, "error: sink '%s': closing '%s' failed: %s",
                                  st->name, s->path, strerror(errno));
        }
    }
    if (ps == PL_OK && sync_err && !failed)
        ps = pl_error_set(err, PL_EIO, "error: sink '%s': %s '%s' failed: %s", st->name,
                          s->sync.failed_call ? "rewriting the header of" : "fdatasync of",
                          s->partial, strerror(sync_err));
    pl__state_free(s);
    return ps;
}

/* What the open sink wrote so far: final path (copied), batches, bytes per batch, checksums
 * (copied). `finalized` is left false: the runtime sets it once close succeeds. */
static pl_status pl__sink_output(const pl_stage *st, void *state, int64_t completed, pl_output *out,
                                 bool *has)
{
    const pl__sink_state *s = state;
    memset(out, 0, sizeof *out);
    *has = true;
    bool back = s && !s->stream && completed < s->written && s->written - completed < s->n_hist;
    snprintf(out->stage, sizeof out->stage, "%s", st->name);
    const pl__sink_opts *o = st->priv;
    out->checksummed = o->checksum;
    if (o->from >= 0) snprintf(out->buffer, sizeof out->buffer, "%s", st->reads[o->from].name);
    if (!s) return PL_OK;
    out->memory = s->io != NULL;
    out->batches = back ? completed : s->written;
    /* Text has no fixed size a batch: the mean of what was written. */
    uint64_t bytes = back ? s->hist_bytes[completed % s->n_hist] : s->bytes;
    out->batch_bytes = s->batch_bytes ? s->batch_bytes
                       : out->batches ? bytes / (uint64_t)out->batches
                                      : 0;
    out->checksum = pl_hash_stream_final(back ? &s->hist[completed % s->n_hist] : &s->all);
    if (s->fd >= 0) {
        out->path = strdup(s->path);
        if (!out->path) return PL_ENOMEM;
    }
    if (s->sums && out->batches) {
        int64_t n = out->batches < PL_BATCH_CHECKSUMS_MAX ? out->batches : PL_BATCH_CHECKSUMS_MAX;
        out->batch_checksums = malloc((size_t)n * sizeof *out->batch_checksums);
        if (!out->batch_checksums) return PL_ENOMEM;
        memcpy(out->batch_checksums, s->sums, (size_t)n * sizeof *s->sums);
        out->n_batch_checksums = n;
    }
    return PL_OK;
}

pl_status pl_sink_memory_stage(const pl_spec *spec, int buffer, bool callback, int *stage,
                               pl_error *err)
{
    *stage = -1;
    for (int i = 0; i < spec->n_stages; i++) {
        const pl_stage *st = &spec->stages[i];
        if (st->kind != &pl_kind_sink) continue;
        const pl__sink_opts *o = st->priv;
        if (o->from < 0 || st->reads[o->from].index != buffer) continue;
        if (!callback && (o->format == PL__FMT_TEXT || o->format == PL__FMT_JSONL))
            return pl_error_set(err, PL_EINPUT,
                                "error: sink '%s' writes buffer '%s' as text lines, whose length "
                                "varies: bind a callback for it (pipectl_bind_output_fn), or "
                                "give the sink format: raw",
                                st->name, spec->buffers[buffer].name);
        *stage = i;
        return PL_OK;
    }
    return PL_OK;
}

const pl_kind pl_kind_sink = {
    .name = "sink",
    .engine = PL_ENGINE_HOST,
    .role = PL_ROLE_OUTPUT,
    .keys = pl__sink_keys,
    .doc = "writes a host buffer's batches in order to a raw or .npy file, or records as text "
           "lines or JSONL, with checksums",
    .bind = pl__sink_bind,
    .validate = pl__sink_validate,
    .check_files = pl__sink_check_files,
    .open = pl__sink_open,
    .close = pl__sink_close,
    .run_host = pl__sink_run,
    .output = pl__sink_output,
    .ordered = true,
};
