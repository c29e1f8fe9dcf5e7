/* loop_stream: a loop's `stream:` (docs/pipeline-yaml.md, "loop.stream"): the loop kinds' check,
 * open, close and output hooks (pl_loop.h) and the writer the executors hand parts to
 * (pl_stream.h). The file is a sink's (stages/sink.c): `<to>.partial` under a lock, renamed to
 * `to` when the run ends however it ends, or written through to a FIFO, a character device or
 * stdout; a JSONL stream's .partial has the sidecar `pipectl salvage` reads (a batch of one line
 * for it: it keeps every whole record).
 *
 * Records:
 * - jsonl: one line per row of a part, {"batch":b,"row":r,"step":i,"col":c,"tokens":[...]} (b the
 *   pipeline's batch, i the iterations done, c the part's first column; "values" for a float
 *   buffer, nested arrays for [B, N, ...]); with vocab "text" holds the part's text, a character
 *   cut between two parts going with the later one, so a row's texts join into its detokenized
 *   row; "end": true on the last part of the batch, and with `finished` on a row's part in which
 *   it ended (the row has no later records).
 * - raw: per part a header of six native int64 (batch, step, col, cols, end, rows), then rows x
 *   cols columns of `from`, row after row, each column its col_bytes. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pl_bpe.h"
#include "pl_buffers.h"
#include "pl_hash.h"
#include "pl_json.h"
#include "pl_loop.h"
#include "pl_sink.h"
#include "pl_stream.h"

/* A batch whose parts are coming in. */
typedef struct pl__sbatch {
    int64_t local, batch;
    bool ended;           /* its last part came */
    pl_sink_buf held;     /* parts not written yet: a batch before it is still being written */
    unsigned char *done;  /* [rows]: the row ended in an earlier part (finished) */
    unsigned char *carry; /* [rows * 4]: text: the bytes of a character cut at a part's end */
    unsigned char *n_carry;
    pl_hash_stream hash; /* of the batch's bytes, parts in order */
    struct pl__sbatch *next;
} pl__sbatch;

struct pl_stream {
    const pl_spec *spec;
    const pl_stage *L;
    const pl_loop_stream *cfg;
    pl_stream_shape sh;
    pl_dtype dtype;
    char who[PL_MAX_NAME + 24]; /* "loop 'generate': stream" */
    pthread_mutex_t mu;
    int fd;
    bool through; /* a FIFO, character device or stdout: no .partial */
    char path[PATH_MAX];
    char partial[PATH_MAX + 16];
    char meta[PATH_MAX + 24]; /* "" when none */
    pl_bpe *bpe;
    int64_t next;     /* the batch whose parts are written as they come */
    pl__sbatch *open; /* by local, ascending */
    int64_t batches;  /* whole batches written */
    uint64_t bytes;
    pl_hash_stream all;
    uint64_t *sums; /* the first PL_BATCH_CHECKSUMS_MAX batches' checksums */
    int64_t cap_sums;
    pl_status failed; /* the first failure, kept */
    pl_error err;
    pl_sink_buf out;      /* the part being formatted */
    pl_bpe_text raw, txt; /* text: a row's decoded bytes, its text */
    pl_sink_buf joined;   /* text: the cut character, then the decoded bytes */
};

bool pl_stream_shape_of(const pl_spec *spec, const pl_stage *L, pl_stream_shape *out)
{
    memset(out, 0, sizeof *out);
    if (!L->loop || !L->loop->stream) return false;
    const pl_loop_stream *c = L->loop->stream;
    const pl_buffer *b = &spec->buffers[c->from.index];
    out->rows = b->shape[0];
    out->cols = b->shape[1];
    out->col_bytes = b->bytes / (uint64_t)(b->shape[0] * b->shape[1]);
    out->every = c->every;
    out->start = c->start;
    out->limit = L->loop->count ? L->loop->count : L->loop->max;
    out->from = c->from.index;
    out->finished = c->finished.name ? c->finished.index : -1;
    return true;
}

static void pl__who(const pl_stage *L, char *buf, size_t cap)
{
    snprintf(buf, cap, "loop '%s': stream", L->name);
}

pl_status pl_loop_stream_validate(const pl_spec *spec, const pl_stage *L, pl_error *err)
{
    const pl_loop_stream *c = L->loop ? L->loop->stream : NULL;
    if (!c) return PL_OK;
    /* One file, one writer: a sink, or another loop's stream, writing it would interleave. */
    char who[PL_MAX_NAME + 24], canon[PATH_MAX], other[PATH_MAX];
    pl__who(L, who, sizeof who);
    pl_sink_canon(spec, c->to, canon, sizeof canon);
    for (int i = 0; i < spec->n_stages; i++) {
        const pl_stage *x = &spec->stages[i];
        const char *oc = pl_sink_canon_of(x);
        if (!oc && x->loop && x->loop->stream && i < L->index) {
            pl_sink_canon(spec, x->loop->stream->to, other, sizeof other);
            oc = other;
        }
        if (!oc || strcmp(oc, canon) != 0) continue;
        return pl_error_at(err, PL_EINPUT, c->to_pos,
                           "%s: '%s' is also written by %s '%s' (line %d); give each its own file",
                           who, c->to, x->loop ? "the stream of loop" : "sink", x->name,
                           x->pos.line);
    }
    return PL_OK;
}

pl_status pl_loop_stream_check_files(const pl_spec *spec, const pl_stage *L, int64_t batches,
                                     pl_error *err)
{
    (void)batches;
    const pl_loop_stream *c = L->loop ? L->loop->stream : NULL;
    if (!c) return PL_OK;
    char who[PL_MAX_NAME + 24], example[PL_MAX_NAME + 8];
    pl__who(L, who, sizeof who);
    snprintf(example, sizeof example, "%s.jsonl", L->name);
    pl_sink_target t;
    PL_CHECK(
        pl_sink_target_resolve(spec, who, "stream", c->to, c->to_pos, false, example, &t, err));
    if (c->vocab) {
        char path[4096];
        pl_spec_path(spec, c->vocab, path, sizeof path);
        pl_error e;
        pl_error_clear(&e);
        if (pl_bpe_check_path(path, &e) != PL_OK) {
            const char *m = strncmp(e.msg, "error: ", 7) == 0 ? e.msg + 7 : e.msg;
            return pl_error_at(err, e.status, c->vocab_pos, "%s: vocab: %s", who, m);
        }
    }
    return PL_OK;
}

/* The sidecar of a JSONL stream's .partial: a "batch" of one line, so `pipectl salvage` keeps
 * every whole record. */
static pl_status pl__meta(const pl_run_env *env, pl_stream *s, pl_error *err)
{
    snprintf(s->meta, sizeof s->meta, "%s.meta", s->partial);
    json_t *j = json_pack(
        "{s:i, s:o, s:o, s:o, s:s, s:s, s:i, s:i, s:i, s:i, s:I, s:b, s:[i, i], s:b}",
        "pipectl_partial", 1, "pipeline", pl_json_str(env->spec->name), "stage",
        pl_json_str(s->L->name), "final", pl_json_str(s->path), "format", "jsonl", "layout", "rows",
        "header_bytes", 0, "batch_bytes", 0, "row_bytes", 0, "rows_per_batch", 1, "batches",
        (json_int_t)env->batches, "checksum", 0, "short_batch", -1, 0, "stream", 1);
    char *txt = j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(j);
    if (!txt) {
        s->meta[0] = '\0';
        return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    }
    pl_status ps = PL_OK;
    int fd = open(s->meta, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0 || pl_sink_write_all(fd, txt, strlen(txt), 0, false) != PL_OK ||
        pl_sink_write_all(fd, "\n", 1, 0, false) != PL_OK) {
        ps = pl_error_set(err, PL_EIO, "error: %s: cannot write '%s': %s", s->who, s->meta,
                          strerror(errno));
    }
    if (fd >= 0 && close(fd) != 0 && ps == PL_OK)
        ps = pl_error_set(err, PL_EIO, "error: %s: cannot write '%s': %s", s->who, s->meta,
                          strerror(errno));
    if (ps != PL_OK) {
        unlink(s->meta);
        s->meta[0] = '\0';
    }
    free(txt);
    return ps;
}

static void pl__sbatch_free(pl__sbatch *b)
{
    if (!b) return;
    free(b->held.p);
    free(b->done);
    free(b->carry);
    free(b->n_carry);
    free(b);
}

static void pl__free(pl_stream *s)
{
    while (s->open) {
        pl__sbatch *b = s->open;
        s->open = b->next;
        pl__sbatch_free(b);
    }
    pl_bpe_free(s->bpe);
    free(s->sums);
    free(s->out.p);
    pl_bpe_text_free(&s->raw);
    pl_bpe_text_free(&s->txt);
    free(s->joined.p);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

pl_status pl_loop_stream_open(const pl_run_env *env, const pl_stage *L, void **state, pl_error *err)
{
    *state = NULL;
    const pl_loop_stream *c = L->loop ? L->loop->stream : NULL;
    if (!c) return PL_OK;
    pl_stream *s = calloc(1, sizeof *s);
    if (!s) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    if (pthread_mutex_init(&s->mu, NULL) != 0) {
        free(s);
        return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    }
    s->spec = env->spec;
    s->L = L;
    s->cfg = c;
    s->fd = -1;
    pl_stream_shape_of(env->spec, L, &s->sh);
    s->dtype = env->spec->buffers[c->from.index].dtype;
    pl__who(L, s->who, sizeof s->who);
    pl_status ps = PL_OK;
    if (c->vocab) {
        char path[4096];
        pl_spec_path(env->spec, c->vocab, path, sizeof path);
        pl_error e;
        pl_error_clear(&e);
        if (pl_bpe_load(path, &s->bpe, &e) != PL_OK) {
            const char *m = strncmp(e.msg, "error: ", 7) == 0 ? e.msg + 7 : e.msg;
            ps = pl_error_at(err, e.status, c->vocab_pos, "%s: vocab: %s", s->who, m);
            goto fail;
        }
    }
    char example[PL_MAX_NAME + 8];
    snprintf(example, sizeof example, "%s.jsonl", L->name);
    pl_sink_target t;
    ps = pl_sink_target_resolve(env->spec, s->who, "stream", c->to, c->to_pos, false, example, &t,
                                err);
    if (ps == PL_EINPUT) {
        /* The same words as at check time, but now it is the run that cannot write: I/O. */
        if (err) err->status = PL_EIO;
        ps = PL_EIO;
    }
    if (ps != PL_OK) goto fail;
    snprintf(s->path, sizeof s->path, "%s", t.path);
    s->through = t.stream;
    if (t.stream) {
        /* A FIFO's open waits for a reader, as a sink's does. */
        s->fd = t.is_stdout ? fcntl(1, F_DUPFD_CLOEXEC, 3) : open(t.path, O_WRONLY | O_CLOEXEC);
        if (s->fd < 0) {
            ps = pl_error_at(err, PL_EIO, c->to_pos, "%s: cannot open '%s': %s", s->who, t.path,
                             strerror(errno));
            goto fail;
        }
        *state = s;
        return PL_OK;
    }
    snprintf(s->partial, sizeof s->partial, "%s.partial", s->path);
    if (pl_sink_mkdirs(s->path) != 0) {
        ps = pl_error_at(err, PL_EIO, c->to_pos, "%s: cannot create the directory of '%s': %s",
                         s->who, s->path, strerror(errno));
        goto fail;
    }
    PL_CHECK_GOTO(
        pl_sink_open_locked(s->who, "stream", c->to_pos, s->partial, s->path, &s->fd, err), ps,
        fail);
    if (c->format == PL_STREAM_JSONL && (ps = pl__meta(env, s, err)) != PL_OK) {
        close(s->fd);
        unlink(s->partial);
        s->fd = -1;
        goto fail;
    }
    *state = s;
    return PL_OK;
fail:
    pl__free(s);
    return ps;
}

/* The batch record for `local`, made on its first part. NULL: out of memory. */
static pl__sbatch *pl__batch(pl_stream *s, int64_t local, int64_t batch)
{
    pl__sbatch **at = &s->open;
    while (*at && (*at)->local < local)
        at = &(*at)->next;
    if (*at && (*at)->local == local) return *at;
    pl__sbatch *b = calloc(1, sizeof *b);
    size_t rows = (size_t)s->sh.rows;
    if (!b || !(b->done = calloc(rows, 1)) || !(b->carry = calloc(rows * 4, 1)) ||
        !(b->n_carry = calloc(rows, 1))) {
        pl__sbatch_free(b);
        return NULL;
    }
    b->local = local;
    b->batch = batch;
    b->next = *at;
    *at = b;
    return b;
}

static pl_status pl__fail(pl_stream *s, pl_status st, const pl_error *e, pl_error *err)
{
    if (s->failed == PL_OK) {
        s->failed = st;
        s->err = *e;
    }
    if (err && err != e) *err = *e;
    return st;
}

/* Writes n bytes of the file. */
static pl_status pl__write(pl_stream *s, const char *p, size_t n, pl_error *err)
{
    if (!n) return PL_OK;
    if (pl_sink_write_all(s->fd, p, n, 0, false) != PL_OK) {
        pl_error e;
        pl_error_set(&e, PL_EIO, "error: %s: writing '%s' failed: %s", s->who,
                     s->through ? s->path : s->partial, strerror(errno));
        return pl__fail(s, PL_EIO, &e, err);
    }
    s->bytes += n;
    pl_hash_stream_update(&s->all, p, n);
    return PL_OK;
}

/* The batch being written has ended: its checksum, and the next batch is written as it comes. */
static pl_status pl__finish_batch(pl_stream *s, pl__sbatch *b, pl_error *err)
{
    if (s->batches < PL_BATCH_CHECKSUMS_MAX && s->batches == s->cap_sums) {
        int64_t nc = s->cap_sums ? 2 * s->cap_sums : 64;
        uint64_t *ns = realloc(s->sums, (size_t)nc * sizeof *ns);
        if (!ns) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
        s->sums = ns;
        s->cap_sums = nc;
    }
    if (s->batches < PL_BATCH_CHECKSUMS_MAX) s->sums[s->batches] = pl_hash_stream_final(&b->hash);
    s->batches++;
    s->next = b->local + 1;
    s->open = b->next; /* b is the first open batch: the one being written */
    pl__sbatch_free(b);
    return PL_OK;
}

/* Writes what the batches after an ended one hold, while they have ended too. */
static pl_status pl__advance(pl_stream *s, pl_error *err)
{
    while (s->open && s->open->local == s->next) {
        pl__sbatch *b = s->open;
        PL_CHECK(pl__write(s, b->held.p, b->held.n, err));
        b->held.n = 0;
        if (!b->ended) return PL_OK; /* it is written as it comes from now on */
        PL_CHECK(pl__finish_batch(s, b, err));
    }
    return PL_OK;
}

static pl_status pl__puts(pl_sink_buf *o, const char *t, pl_error *err)
{
    return pl_sink_buf_put(o, t, strlen(t), err);
}

/* The length of the tail of t[0..n) that starts a character the next part completes: a first byte
 * in the last three bytes with fewer continuation bytes after it than it needs (0: none). */
static size_t pl__cut_tail(const unsigned char *t, size_t n)
{
    for (size_t k = 1; k <= 3 && k <= n; k++) {
        unsigned char c = t[n - k];
        if ((c & 0xC0) == 0x80) continue; /* a continuation byte: look further back */
        size_t need = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
        return need > k ? k : 0;
    }
    return 0;
}

/* Row r's text for n ids, after the character cut at its last part's end; `last`: the row has no
 * later part, so a character cut now is taken as it is (U+FFFD). Into s->txt. */
static pl_status pl__row_text(pl_stream *s, pl__sbatch *b, int64_t r, const int32_t *ids, int64_t n,
                              bool last, pl_error *err)
{
    unsigned char *carry = b->carry + 4 * r;
    s->raw.n = s->txt.n = 0;
    s->joined.n = 0;
    PL_CHECK(pl_bpe_decode(s->bpe, ids, n, s->cfg->skip_special, &s->raw, err));
    PL_CHECK(pl_sink_buf_put(&s->joined, (const char *)carry, b->n_carry[r], err));
    PL_CHECK(pl_sink_buf_put(&s->joined, s->raw.v ? s->raw.v : "", (size_t)s->raw.n, err));
    size_t len = s->joined.n;
    size_t cut = last ? 0 : pl__cut_tail((const unsigned char *)s->joined.p, len);
    memcpy(carry, s->joined.p + len - cut, cut);
    b->n_carry[r] = (unsigned char)cut;
    return pl_bpe_utf8_replace(s->joined.p, len - cut, &s->txt, err);
}

/* One part's JSONL records into s->out. */
static pl_status pl__format_jsonl(pl_stream *s, pl__sbatch *b, int64_t step, int64_t lo, int64_t hi,
                                  const char *from, const int32_t *finished, bool end,
                                  pl_error *err)
{
    const pl_stream_shape *sh = &s->sh;
    const pl_buffer *fb = &s->spec->buffers[sh->from];
    bool ints = s->dtype == PL_U8 || s->dtype == PL_I32 || s->dtype == PL_I64;
    int64_t dims[PL_MAX_RANK];
    dims[0] = hi - lo;
    for (int i = 2; i < fb->rank; i++)
        dims[i - 1] = fb->shape[i];
    char head[160];
    for (int64_t r = 0; r < sh->rows; r++) {
        if (b->done[r]) continue;
        bool row_end = end || (finished && finished[r] != 0);
        snprintf(head, sizeof head, "{\"batch\":%lld,\"row\":%lld,\"step\":%lld,\"col\":%lld,",
                 (long long)b->batch, (long long)r, (long long)step, (long long)lo);
        PL_CHECK(pl__puts(&s->out, head, err));
        const char *row = from + ((uint64_t)r * (uint64_t)sh->cols + (uint64_t)lo) * sh->col_bytes;
        if (s->bpe) {
            pl_status ps = pl__row_text(s, b, r, (const int32_t *)row, hi - lo, row_end, err);
            if (ps != PL_OK) {
                char m[sizeof err->msg];
                snprintf(m, sizeof m, "%s",
                         strncmp(err->msg, "error: ", 7) ? err->msg : err->msg + 7);
                return pl_error_set(err, ps, "error: %s: batch %lld, row %lld: %s", s->who,
                                    (long long)b->batch, (long long)r, m);
            }
            PL_CHECK(pl__puts(&s->out, "\"text\":", err));
            PL_CHECK(
                pl_sink_buf_json_str(&s->out, s->txt.v ? s->txt.v : "", (size_t)s->txt.n, err));
        } else {
            PL_CHECK(pl__puts(&s->out, ints ? "\"tokens\":" : "\"values\":", err));
            int64_t j = 0;
            PL_CHECK(pl_sink_buf_json_values(&s->out, row, s->dtype, dims, fb->rank - 1, &j, err));
        }
        PL_CHECK(pl__puts(&s->out, row_end ? ",\"end\":true}\n" : "}\n", err));
        if (row_end) b->done[r] = 1;
    }
    return PL_OK;
}

/* One part's raw record into s->out. */
static pl_status pl__format_raw(pl_stream *s, pl__sbatch *b, int64_t step, int64_t lo, int64_t hi,
                                const char *from, bool end, pl_error *err)
{
    const pl_stream_shape *sh = &s->sh;
    int64_t head[6] = {b->batch, step, lo, hi - lo, end, sh->rows};
    PL_CHECK(pl_sink_buf_put(&s->out, (const char *)head, sizeof head, err));
    size_t n = (size_t)((uint64_t)(hi - lo) * sh->col_bytes);
    for (int64_t r = 0; r < sh->rows && n; r++)
        PL_CHECK(pl_sink_buf_put(
            &s->out, from + ((uint64_t)r * (uint64_t)sh->cols + (uint64_t)lo) * sh->col_bytes, n,
            err));
    return PL_OK;
}

pl_status pl_stream_put(pl_stream *s, int64_t local, int64_t batch, int64_t step, int64_t lo,
                        int64_t hi, const void *from, const int32_t *finished, bool end,
                        pl_error *err)
{
    pl_error scratch;
    if (!err) err = &scratch;
    pthread_mutex_lock(&s->mu);
    pl_status ps = PL_OK;
    if (s->failed != PL_OK) { /* the first failure ends the stream */
        *err = s->err;
        ps = s->failed;
        goto done;
    }
    if (local < s->next || lo < 0 || hi < lo || hi > s->sh.cols) {
        ps = pl_error_set(err, PL_ERUNTIME,
                          "error: %s: batch %lld handed over columns [%lld, %lld) out of order: "
                          "an executor bug, please report it",
                          s->who, (long long)batch, (long long)lo, (long long)hi);
        goto done;
    }
    pl__sbatch *b = pl__batch(s, local, batch);
    if (!b) {
        ps = pl_error_set(err, PL_ENOMEM, "error: out of memory");
        goto done;
    }
    s->out.n = 0;
    ps = s->cfg->format == PL_STREAM_JSONL
             ? pl__format_jsonl(s, b, step, lo, hi, from, finished, end, err)
             : pl__format_raw(s, b, step, lo, hi, from, end, err);
    if (ps != PL_OK) {
        pl__fail(s, ps, err, err);
        goto done;
    }
    pl_hash_stream_update(&b->hash, s->out.p, s->out.n);
    b->ended = end;
    if (local == s->next) {
        ps = pl__write(s, s->out.p, s->out.n, err);
        if (ps == PL_OK && end) ps = pl__finish_batch(s, b, err);
        if (ps == PL_OK && end) ps = pl__advance(s, err);
    } else {
        ps = pl_sink_buf_put(&b->held, s->out.p, s->out.n, err);
    }
done:
    pthread_mutex_unlock(&s->mu);
    return ps;
}

pl_status pl_loop_stream_close(const pl_run_env *env, const pl_stage *L, void *state,
                               int64_t completed, bool failed, pl_error *err)
{
    (void)env, (void)completed;
    pl_stream *s = state;
    if (!s) return PL_OK;
    pl_error e;
    pl_error_clear(&e);
    pl_status ps = s->failed;
    if (ps != PL_OK) e = s->err;
    /* What batches still hold, in batch order: a stop or an error leaves batches unfinished. */
    while (ps == PL_OK && s->open) {
        pl__sbatch *b = s->open;
        ps = pl__write(s, b->held.p, b->held.n, &e);
        if (ps == PL_OK && b->ended) {
            ps = pl__finish_batch(s, b, &e);
        } else {
            s->open = b->next;
            pl__sbatch_free(b);
        }
    }
    pl_status cs = PL_OK;
    if (s->fd >= 0 && s->through) {
        if (close(s->fd) != 0)
            cs = pl_error_set(&e, PL_EIO, "error: %s: closing '%s' failed: %s", s->who, s->path,
                              strerror(errno));
    } else if (s->fd >= 0) {
        if (failed && s->bytes == 0) {
            /* Nothing streamed: an older file of that name stays as it was. */
            unlink(s->partial);
            if (s->meta[0]) unlink(s->meta);
            close(s->fd);
        } else {
            if (ftruncate(s->fd, (off_t)s->bytes) != 0)
                cs = pl_error_set(&e, PL_EIO,
                                  "error: %s: finishing '%s' failed: %s; what was streamed is in "
                                  "'%s'",
                                  s->who, s->partial, strerror(errno), s->partial);
            else if (rename(s->partial, s->path) != 0)
                cs = pl_error_set(&e, PL_EIO,
                                  "error: %s: cannot rename '%s' to '%s': %s; what was streamed "
                                  "is in '%s'",
                                  s->who, s->partial, s->path, strerror(errno), s->partial);
            if (cs == PL_OK && s->meta[0]) unlink(s->meta);
            if (close(s->fd) != 0 && cs == PL_OK)
                cs = pl_error_set(&e, PL_EIO, "error: %s: closing '%s' failed: %s", s->who, s->path,
                                  strerror(errno));
        }
    }
    s->fd = -1;
    if (ps == PL_OK) ps = cs;
    if (ps != PL_OK && err) *err = e;
    pl__free(s);
    return ps;
}

pl_status pl_loop_stream_output(const pl_stage *L, void *state, int64_t completed, pl_output *out,
                                bool *has)
{
    (void)completed;
    memset(out, 0, sizeof *out);
    const pl_stream *s = state;
    *has = s != NULL;
    if (!s) return PL_OK;
    snprintf(out->stage, sizeof out->stage, "%s", L->name);
    snprintf(out->buffer, sizeof out->buffer, "%s", s->cfg->from.name);
    out->checksummed = true;
    /* The batches whose last part is written; what a batch in flight streamed is in the file
     * (and the checksum of all its bytes) too. */
    out->batches = s->batches;
    out->batch_bytes = s->batches ? s->bytes / (uint64_t)s->batches : 0;
    out->checksum = pl_hash_stream_final(&s->all);
    if (s->fd >= 0) {
        out->path = strdup(s->path);
        if (!out->path) return PL_ENOMEM;
    }
    int64_t n = s->batches < PL_BATCH_CHECKSUMS_MAX ? s->batches : PL_BATCH_CHECKSUMS_MAX;
    if (n > 0) {
        out->batch_checksums = malloc((size_t)n * sizeof *out->batch_checksums);
        if (!out->batch_checksums) return PL_ENOMEM;
        memcpy(out->batch_checksums, s->sums, (size_t)n * sizeof *s->sums);
        out->n_batch_checksums = n;
    }
    return PL_OK;
}
