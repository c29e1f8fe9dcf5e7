/* sink: writes a host buffer's batches, in batch order, to a raw or .npy file, and checksums
 * them. Nothing completed is ever lost and nothing half-written appears under the final name:
 * batches go to "<to>.partial", written through (write(2)) per batch; close() always finalizes:
 * truncates to the batches written, fixes the .npy header's first dimension to that count and
 * renames the file to its final name, after an error or Ctrl-C too. Only when a run fails before
 * its first batch is the partial file removed, leaving an older output of that name untouched. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pl_buffers.h"
#include "pl_hash.h"
#include "pl_kind_util.h"
#include "pl_npy.h"

extern const pl_kind pl_kind_sink; /* defined below; sinks compare notes with each other */

static const pl_key pl__sink_keys[] = {
    {"from", PL_KEY_NAME, NULL, NULL, "the host buffer to write (required)"},
    {"to", PL_KEY_PATH, NULL, NULL, "output file; none: checksums only"},
    {"format", PL_KEY_ENUM, "auto|raw|npy", "auto", "auto: .npy by extension, else raw"},
    {"checksum", PL_KEY_BOOL, NULL, "true", "compute a checksum per batch (reported, bundled)"},
    {NULL, 0, NULL, NULL, NULL},
};

enum { PL__FMT_AUTO, PL__FMT_RAW, PL__FMT_NPY };

typedef struct pl__sink_opts {
    int from;       /* index in reads */
    const char *to; /* as written, or NULL */
    pl_pos to_pos;
    int format;
    bool checksum;
} pl__sink_opts;

typedef struct pl__sink_state {
    int fd;
    bool npy;
    char path[4096];    /* final name */
    char partial[4112]; /* path + ".partial" */
    size_t header_len;
    uint64_t batch_bytes;
    int64_t written;
    uint64_t *sums; /* per-batch checksums */
    int64_t cap_sums;
    pl_hash_stream all;
    /* The running hash before each of the last n_hist batches ([b % n_hist]), so close can take
     * back batches another stage's failure left uncommitted (at most depth of them: the
     * scheduler runs a sink's batch only once every non-output stage finished it). */
    pl_hash_stream *hist;
    int n_hist;
} pl__sink_state;

static pl_status pl__sink_bind(pl_spec *spec, pl_stage *st, pl_error *err)
{
    pl__sink_opts *o = pl_spec_alloc(spec, sizeof *o);
    if (!o) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    PL_CHECK(
        pl_kind_bind_ref(spec, st, "from", false, true, "the host buffer to write", &o->from, err));
    const pl_opt *to = pl_stage_opt(st, "to");
    if (to) {
        o->to = to->str;
        o->to_pos = to->val_pos;
    }
    PL_CHECK(pl_opt_get_enum(st, "format", PL__FMT_AUTO, &o->format, err));
    PL_CHECK(pl_opt_get_bool(st, "checksum", true, &o->checksum, err));
    if (!o->to && o->format != PL__FMT_AUTO) {
        const pl_opt *fo = pl_stage_opt(st, "format");
        return pl_error_at(err, PL_EINPUT, fo->pos,
                           "sink '%s' has a 'format' but no 'to' file; add 'to: out/%s.npy' or "
                           "drop 'format'",
                           st->name, st->name);
    }
    st->priv = o;
    return PL_OK;
}

/* Two sinks writing one file would clobber each other: refuse it. */
static pl_status pl__sink_validate(const pl_spec *spec, const pl_stage *st, pl_error *err)
{
    const pl__sink_opts *o = st->priv;
    if (!o->to) return PL_OK;
    for (int i = 0; i < st->index; i++) {
        const pl_stage *other = &spec->stages[i];
        const pl__sink_opts *oo = other->priv;
        if (other->kind == &pl_kind_sink && oo && oo->to && strcmp(oo->to, o->to) == 0)
            return pl_error_at(err, PL_EINPUT, o->to_pos,
                               "sinks '%s' and '%s' both write '%s' (line %d); give each sink its "
                               "own file",
                               other->name, st->name, o->to, oo->to_pos.line);
    }
    return PL_OK;
}

/* mkdir -p of the directory part of `path`. */
static int pl__mkdirs(const char *path)
{
    char tmp[4096];
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

static pl_status pl__write_all(int fd, const void *p, size_t n, off_t at, bool positioned)
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

static size_t pl__header(const pl_buffer *b, int64_t first, char *buf, size_t cap)
{
    return pl_npy_format_header(buf, cap, b->dtype, first, b->rank, b->shape);
}

static pl_status pl__sink_open(const pl_run_env *env, const pl_stage *st, void **state,
                               pl_error *err)
{
    *state = NULL;
    const pl__sink_opts *o = st->priv;
    const pl_buffer *b = pl_kind_rbuf(env->spec, st, o->from);
    pl__sink_state *s = calloc(1, sizeof *s);
    if (!s) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    s->fd = -1;
    s->batch_bytes = b->bytes;
    s->n_hist = env->depth + 2;
    s->hist = calloc((size_t)s->n_hist, sizeof *s->hist);
    if (!s->hist) {
        free(s);
        return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    }
    if (o->to) {
        pl_spec_path(env->spec, o->to, s->path, sizeof s->path);
        size_t n = strlen(s->path);
        s->npy = o->format == PL__FMT_NPY ||
                 (o->format == PL__FMT_AUTO && n >= 4 && strcmp(s->path + n - 4, ".npy") == 0);
        snprintf(s->partial, sizeof s->partial, "%s.partial", s->path);
        if (pl__mkdirs(s->path) != 0) {
            pl_status ps = pl_error_at(err, PL_EIO, o->to_pos,
                                       "sink '%s': cannot create the directory of '%s': %s",
                                       st->name, s->path, strerror(errno));
            free(s->hist);
            free(s);
            return ps;
        }
        s->fd = open(s->partial, O_WRONLY | O_CREAT | O_TRUNC, 0666);
        if (s->fd < 0) {
            pl_status ps = pl_error_at(err, PL_EIO, o->to_pos, "sink '%s': cannot create '%s': %s",
                                       st->name, s->partial, strerror(errno));
            free(s->hist);
            free(s);
            return ps;
        }
        if (s->npy) {
            char h[256];
            s->header_len = pl__header(b, env->batches, h, sizeof h);
            if (!s->header_len || pl__write_all(s->fd, h, s->header_len, 0, false) != PL_OK) {
                pl_status ps = pl_error_set(err, PL_EIO, "error: sink '%s': cannot write '%s': %s",
                                            st->name, s->partial, strerror(errno));
                close(s->fd);
                unlink(s->partial);
                free(s->hist);
                free(s);
                return ps;
            }
        }
    }
    *state = s;
    return PL_OK;
}

static pl_status pl__sink_run(pl_stage_ctx *ctx, pl_error *err)
{
    const pl_stage *st = ctx->stage;
    const pl__sink_opts *o = st->priv;
    pl__sink_state *s = ctx->state;
    const void *data = ctx->bufs[st->reads[o->from].index];
    if (ctx->batch != s->written)
        return pl_error_set(err, PL_ERUNTIME,
                            "error: sink got batch %lld out of order (expected %lld): an executor "
                            "bug, please report it",
                            (long long)ctx->batch, (long long)s->written);
    if (s->fd >= 0 && pl__write_all(s->fd, data, (size_t)s->batch_bytes, 0, false) != PL_OK)
        return pl_error_set(err, PL_EIO, "error: writing '%s' failed: %s", s->partial,
                            strerror(errno));
    if (o->checksum) {
        if (s->written == s->cap_sums) {
            int64_t nc = s->cap_sums ? s->cap_sums * 2 : 64;
            uint64_t *ns = realloc(s->sums, (size_t)nc * sizeof *ns);
            if (!ns) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
            s->sums = ns;
            s->cap_sums = nc;
        }
        s->sums[s->written] = pl_hash(data, (size_t)s->batch_bytes);
        s->hist[s->written % s->n_hist] = s->all;
        pl_hash_stream_update(&s->all, data, (size_t)s->batch_bytes);
    }
    s->written++;
    return PL_OK;
}

static pl_status pl__sink_close(const pl_run_env *env, const pl_stage *st, void *state,
                                int64_t completed, bool failed, pl_error *err)
{
    pl__sink_state *s = state;
    pl_status ps = PL_OK;
    if (!s) return PL_OK;
    /* A failed run keeps what the whole run completed: batches this sink wrote past that point
     * are taken back (the file is truncated below), so every sink holds the same batches. */
    if (failed && completed < s->written && s->written - completed < s->n_hist) {
        if (((const pl__sink_opts *)st->priv)->checksum) s->all = s->hist[completed % s->n_hist];
        s->written = completed;
    }
    if (s->fd >= 0) {
        if (failed && s->written == 0) {
            /* Nothing to keep: do not replace an older output with an empty one. */
            close(s->fd);
            unlink(s->partial);
        } else {
            const pl__sink_opts *o = st->priv;
            const pl_buffer *b = pl_kind_rbuf(env->spec, st, o->from);
            uint64_t end = s->header_len + (uint64_t)s->written * s->batch_bytes;
            char h[256];
            size_t hl = s->npy ? pl__header(b, s->written, h, sizeof h) : 0;
            if (ftruncate(s->fd, (off_t)end) != 0 ||
                (s->npy && (hl != s->header_len || pl__write_all(s->fd, h, hl, 0, true) != PL_OK)))
                ps = pl_error_set(err, PL_EIO,
                                  "error: sink '%s': finishing '%s' failed: %s; the "
                                  "%lld batches written are in '%s'",
                                  st->name, s->partial, strerror(errno), (long long)s->written,
                                  s->partial);
            if (close(s->fd) != 0 && ps == PL_OK)
                ps = pl_error_set(err, PL_EIO, "error: sink '%s': closing '%s' failed: %s",
                                  st->name, s->partial, strerror(errno));
            if (ps == PL_OK && rename(s->partial, s->path) != 0)
                ps = pl_error_set(err, PL_EIO,
                                  "error: sink '%s': cannot rename '%s' to '%s': %s; the %lld "
                                  "batches written are in '%s'",
                                  st->name, s->partial, s->path, strerror(errno),
                                  (long long)s->written, s->partial);
        }
    }
    free(s->sums);
    free(s->hist);
    free(s);
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
    bool back = s && completed < s->written && s->written - completed < s->n_hist;
    snprintf(out->stage, sizeof out->stage, "%s", st->name);
    if (!s) return PL_OK;
    out->batches = back ? completed : s->written;
    out->batch_bytes = s->batch_bytes;
    out->checksum = pl_hash_stream_final(back ? &s->hist[completed % s->n_hist] : &s->all);
    if (s->fd >= 0) {
        out->path = strdup(s->path);
        if (!out->path) return PL_ENOMEM;
    }
    if (s->sums && out->batches) {
        out->batch_checksums = malloc((size_t)out->batches * sizeof *out->batch_checksums);
        if (!out->batch_checksums) return PL_ENOMEM;
        memcpy(out->batch_checksums, s->sums, (size_t)out->batches * sizeof *s->sums);
    }
    return PL_OK;
}

const pl_kind pl_kind_sink = {
    .name = "sink",
    .engine = PL_ENGINE_HOST,
    .role = PL_ROLE_OUTPUT,
    .keys = pl__sink_keys,
    .doc = "writes a host buffer's batches in order to a raw or .npy file, with checksums",
    .bind = pl__sink_bind,
    .validate = pl__sink_validate,
    .open = pl__sink_open,
    .close = pl__sink_close,
    .run_host = pl__sink_run,
    .output = pl__sink_output,
    .ordered = true,
};
