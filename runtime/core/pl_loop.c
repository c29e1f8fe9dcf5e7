/* pl_loop: loop stages in check: their kinds, the rules of a loop and its body, and the reads and
 * writes a loop stage takes from its body (pl_loop.h). pl_check.c calls these and checks the
 * body's graph. */
#include "pl_loop.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_graph.h"

static const pl_key pl__loop_keys[] = {{NULL, 0, NULL, NULL, NULL}};

/* "up to 255 times while 'active_dev' != 0, index 'step_dev'" */
static void pl__loop_describe(const pl_spec *spec, const pl_stage *st, char *buf, size_t cap)
{
    const pl_loop *l = st->loop;
    size_t n = 0;
    (void)spec;
#define PL__PUT(...)                                                                               \
    do {                                                                                           \
        if (n < cap) n += (size_t)snprintf(buf + n, cap - n, __VA_ARGS__);                         \
    } while (0)
    if (l->count)
        PL__PUT("%" PRId64 " times (max %" PRId64 ")", l->count, l->max);
    else
        PL__PUT("up to %" PRId64 " times", l->max);
    if (l->cond.name) PL__PUT(" while '%s' != 0", l->cond.name);
    if (l->index.name) PL__PUT(", index '%s'", l->index.name);
    if (l->stream)
        PL__PUT(", streaming '%s' every %" PRId64 " to '%s'", l->stream->from.name,
                l->stream->every, l->stream->to);
#undef PL__PUT
}

/* A loop writes what its body writes: as reproducible as its least reproducible body stage. */
static pl_repro pl__loop_repro(const pl_spec *spec, const pl_stage *st, double *tol)
{
    pl_repro r = PL_REPRO_EXACT;
    *tol = 0;
    for (int i = 0; i < st->loop->n_body; i++) {
        const pl_stage *b = &spec->stages[st->loop->first + i];
        double t = 0;
        if (!b->kind->repro || b->kind->repro(spec, b, &t) == PL_REPRO_EXACT) continue;
        r = PL_REPRO_SAME_GPU;
        if (t > *tol) *tol = t;
    }
    return r;
}

const pl_kind pl_kind_loop_device = {
    .name = "loop",
    .engine = PL_ENGINE_COMPUTE,
    .keys = pl__loop_keys,
    .doc = "a loop of device stages: a conditional WHILE node in the slot's graph",
    .describe = pl__loop_describe,
    .repro = pl__loop_repro,
    .validate = pl_loop_stream_validate,
    .check_files = pl_loop_stream_check_files,
    .open = pl_loop_stream_open,
    .close = pl_loop_stream_close,
    .output = pl_loop_stream_output,
};

const pl_kind pl_kind_loop_host = {
    .name = "loop",
    .engine = PL_ENGINE_HOST,
    .keys = pl__loop_keys,
    .doc = "a loop run from the host: a body of host stages, or of device stages launched once "
           "per iteration (run.loop: host)",
    .describe = pl__loop_describe,
    .repro = pl__loop_repro,
    .validate = pl_loop_stream_validate,
    .check_files = pl_loop_stream_check_files,
    .open = pl_loop_stream_open,
    .close = pl_loop_stream_close,
    .output = pl_loop_stream_output,
};

static bool pl__is_dev(pl_engine e)
{
    return e == PL_ENGINE_H2D || e == PL_ENGINE_COMPUTE || e == PL_ENGINE_D2H;
}

bool pl_loop_on_device(const pl_spec *spec, const pl_stage *L)
{
    return L->loop->n_body > 0 && pl__is_dev(spec->stages[L->loop->first].kind->engine);
}

bool pl_stage_ordered(const pl_spec *spec, const pl_stage *st)
{
    if (!st->loop) return st->kind && st->kind->ordered && !st->unordered;
    for (int i = 0; i < st->loop->n_body; i++)
        if (pl_stage_ordered(spec, &spec->stages[st->loop->first + i])) return true;
    return false;
}

/* `while` or `index` (key) of loop L: resolved, i32 [1], where the body runs. */
static pl_status pl__loop_buffer(const pl_spec *spec, const pl_stage *L, pl_ref *r, const char *key,
                                 bool on_dev, const pl_names *bufs, const char *const *bnames,
                                 pl_error *err)
{
    if (!r->name) return PL_OK;
    r->index = pl_names_get(bufs, r->name);
    if (r->index < 0) {
        const char *best = pl_closest(r->name, bnames, spec->n_buffers);
        if (best)
            return pl_error_at(err, PL_EINPUT, r->pos,
                               "loop '%s': %s: unknown buffer '%s' (did you mean '%s'?)", L->name,
                               key, r->name, best);
        return pl_error_at(err, PL_EINPUT, r->pos,
                           "loop '%s': %s: unknown buffer '%s'; declare it under buffers: or fix "
                           "the name",
                           L->name, key, r->name);
    }
    const pl_buffer *b = &spec->buffers[r->index];
    if (b->dtype != PL_I32 || b->count != 1) {
        char shape[128];
        return pl_error_at(err, PL_EINPUT, r->pos,
                           "loop '%s': %s: buffer '%s' is %s %s; the loop's %s is one i32: "
                           "declare '%s' with dtype: i32, shape: [1]",
                           L->name, key, b->name, pl_dtype_name(b->dtype),
                           pl_dims_str(b->shape, b->rank, shape, sizeof shape),
                           strcmp(key, "while") == 0 ? "condition" : "index", b->name);
    }
    if ((b->where == PL_DEVICE) != on_dev)
        return pl_error_at(
            err, PL_EINPUT, r->pos,
            "loop '%s': %s: '%s' is a %s buffer, but the loop's body runs on the "
            "%s, where the loop %s it: declare '%s' with where: %s",
            L->name, key, b->name, pl_where_name(b->where), on_dev ? "device" : "host",
            strcmp(key, "while") == 0 ? "tests" : "writes", b->name, on_dev ? "device" : "host");
    return PL_OK;
}

static bool pl__ends_with(const char *s, const char *ext)
{
    size_t n = strlen(s), e = strlen(ext);
    return n >= e && strcmp(s + n - e, ext) == 0;
}

/* A stream's buffer (`from` or `finished`): resolved, where the body runs. */
static pl_status pl__stream_buffer(const pl_spec *spec, const pl_stage *L, pl_ref *r,
                                   const char *key, bool on_dev, const pl_names *bufs,
                                   const char *const *bnames, pl_error *err)
{
    r->index = pl_names_get(bufs, r->name);
    if (r->index < 0) {
        const char *best = pl_closest(r->name, bnames, spec->n_buffers);
        if (best)
            return pl_error_at(err, PL_EINPUT, r->pos,
                               "loop '%s': stream: %s: unknown buffer '%s' (did you mean '%s'?)",
                               L->name, key, r->name, best);
        return pl_error_at(err, PL_EINPUT, r->pos,
                           "loop '%s': stream: %s: unknown buffer '%s'; declare it under buffers: "
                           "or fix the name",
                           L->name, key, r->name);
    }
    const pl_buffer *b = &spec->buffers[r->index];
    if ((b->where == PL_DEVICE) != on_dev)
        return pl_error_at(err, PL_EINPUT, r->pos,
                           "loop '%s': stream: %s: '%s' is a %s buffer, but the loop's body runs "
                           "on the %s, where the stream takes it from: stream the %s buffer the "
                           "body writes",
                           L->name, key, b->name, pl_where_name(b->where),
                           on_dev ? "device" : "host", on_dev ? "device" : "host");
    return PL_OK;
}

/* Refuses `key` of the stream (given at pos) unless `ok`: it only applies `when`. */
static pl_status pl__stream_only(const pl_stage *L, bool given, pl_pos pos, bool ok,
                                 const char *key, const char *when, pl_error *err)
{
    if (!given || ok) return PL_OK;
    return pl_error_at(err, PL_EINPUT, pos, "loop '%s': stream: '%s' only applies %s; drop it",
                       L->name, key, when);
}

/* The stream's rules: `from` a buffer [B, N, ...] of the body's side that a body stage writes,
 * `start` within its N columns, `finished` an i32 [B] there, the format (auto resolved by the
 * name) and the keys that go with it. */
static pl_status pl__stream_check(pl_spec *spec, pl_stage *L, bool on_dev, const pl_names *bufs,
                                  const char *const *bnames, pl_error *err)
{
    pl_loop *l = L->loop;
    pl_loop_stream *s = l->stream;
    char sh[128];
    PL_CHECK(pl__stream_buffer(spec, L, &s->from, "from", on_dev, bufs, bnames, err));
    const pl_buffer *fb = &spec->buffers[s->from.index];
    if (fb->rank < 2)
        return pl_error_at(err, PL_EINPUT, s->from.pos,
                           "loop '%s': stream: from: '%s' is %s %s, which has no step axis; a "
                           "stream takes the columns of its second dimension, one an iteration "
                           "(tokens [B, N]: row b's token c): stream a buffer [B, N, ...]",
                           L->name, fb->name, pl_dtype_name(fb->dtype),
                           pl_dims_str(fb->shape, fb->rank, sh, sizeof sh));
    bool written = false;
    for (int i = 0; i < l->n_body && !written; i++) {
        const pl_stage *b = &spec->stages[l->first + i];
        for (int k = 0; k < b->n_writes && !written; k++)
            written = b->writes[k].index == s->from.index;
    }
    if (!written)
        return pl_error_at(err, PL_EINPUT, s->from.pos,
                           "loop '%s': stream: from: no stage of the loop's body writes '%s', so "
                           "an iteration adds nothing to stream; stream the buffer a body stage "
                           "writes a column of each iteration (a sample stage's tokens)",
                           L->name, fb->name);
    if (s->start > fb->shape[1])
        return pl_error_at(err, PL_EINPUT, s->start_pos,
                           "loop '%s': stream: start is %lld, but '%s' %s has %lld columns; give "
                           "the column iteration 0 writes, from 0 to %lld",
                           L->name, (long long)s->start, fb->name,
                           pl_dims_str(fb->shape, fb->rank, sh, sizeof sh), (long long)fb->shape[1],
                           (long long)fb->shape[1]);
    if (s->to[0] == '\0')
        return pl_error_at(err, PL_EINPUT, s->to_pos,
                           "loop '%s': stream: 'to' is empty; give a file, a FIFO or - (stdout)",
                           L->name);
    if (s->format == PL_STREAM_AUTO) {
        if (pl__ends_with(s->to, ".npy"))
            return pl_error_at(err, PL_EINPUT, s->to_pos,
                               "loop '%s': stream: to: '%s' is a .npy name, but a stream writes "
                               "JSONL or raw records: name it .jsonl, or give format: raw",
                               L->name, s->to);
        s->format = pl__ends_with(s->to, ".jsonl") || pl__ends_with(s->to, ".ndjson")
                        ? PL_STREAM_JSONL
                        : PL_STREAM_RAW;
    }
    bool jsonl = s->format == PL_STREAM_JSONL;
    PL_CHECK(pl__stream_only(L, s->finished.name != NULL, s->finished.pos, jsonl, "finished",
                             "with format: jsonl (a raw record holds every row)", err));
    PL_CHECK(pl__stream_only(L, s->vocab != NULL, s->vocab_pos, jsonl, "vocab",
                             "with format: jsonl", err));
    PL_CHECK(pl__stream_only(L, s->skip_special_pos.line > 0, s->skip_special_pos, s->vocab != NULL,
                             "skip_special", "with vocab:", err));
    if (s->vocab && (fb->dtype != PL_I32 || fb->rank != 2))
        return pl_error_at(err, PL_EINPUT, s->vocab_pos,
                           "loop '%s': stream: vocab: detokenizing needs token ids, i32 [B, N], "
                           "but from: '%s' is %s %s; drop vocab: to stream the values",
                           L->name, fb->name, pl_dtype_name(fb->dtype),
                           pl_dims_str(fb->shape, fb->rank, sh, sizeof sh));
    if (s->finished.name) {
        PL_CHECK(pl__stream_buffer(spec, L, &s->finished, "finished", on_dev, bufs, bnames, err));
        const pl_buffer *b = &spec->buffers[s->finished.index];
        if (b->dtype != PL_I32 || b->rank != 1 || b->shape[0] != fb->shape[0])
            return pl_error_at(err, PL_EINPUT, s->finished.pos,
                               "loop '%s': stream: finished: '%s' is %s %s; it must be i32 [%lld], "
                               "a flag per row of '%s'",
                               L->name, b->name, pl_dtype_name(b->dtype),
                               pl_dims_str(b->shape, b->rank, sh, sizeof sh),
                               (long long)fb->shape[0], fb->name);
    }
    return PL_OK;
}

pl_status pl_loop_check(pl_spec *spec, pl_stage *L, const pl_names *bufs, const char *const *bnames,
                        pl_error *err)
{
    pl_loop *l = L->loop;
    char p[512];
    if (l->max < 1 || l->max > PL_MAX_LOOP) {
        if (l->max == 0 && l->max_pos.line == 0)
            return pl_error_at(err, PL_EINPUT, l->pos,
                               "loop '%s' has no 'max'; add max: N, the most iterations a batch "
                               "may run (a loop always has a bound)",
                               L->name);
        return pl_error_at(err, PL_EINPUT, l->max_pos,
                           "loop '%s': 'max' is %" PRId64 "; it must be between 1 and %d "
                           "(PL_MAX_LOOP)",
                           L->name, l->max, PL_MAX_LOOP);
    }
    if (l->count < 0 || l->count > l->max)
        return pl_error_at(err, PL_EINPUT, l->count_pos,
                           "loop '%s': 'count' is %" PRId64 ", %s 'max' (%" PRId64
                           "); give a count from 1 to max, or raise max",
                           L->name, l->count, l->count < 0 ? "below 1 and" : "more than", l->max);
    if (l->n_body < 1)
        return pl_error_at(
            err, PL_EINPUT, l->pos,
            "loop '%s' has no stages; list the stages it repeats under stages:", L->name);
    const pl_stage *first = NULL;
    for (int i = 0; i < l->n_body; i++) {
        int bi = l->first + i;
        if (bi >= spec->n_stages || spec->stages[bi].parent != L->index)
            return pl_error_at(err, PL_EINPUT, l->pos,
                               "loop '%s': its body must be the %d stages right after it, with "
                               "the loop as their parent (pl_stage.parent); the pipeline was "
                               "built otherwise",
                               L->name, l->n_body);
        const pl_stage *b = &spec->stages[bi];
        if (b->loop)
            return pl_error_at(err, PL_EINPUT, b->pos,
                               "loop '%s' is inside the body of loop '%s'; a loop's body cannot "
                               "hold a loop: move '%s' before or after '%s', or merge the two "
                               "bodies",
                               b->name, L->name, b->name, L->name);
        if (b->kind->role & PL_ROLE_OUTPUT)
            return pl_error_at(err, PL_EINPUT, b->pos,
                               "stage '%s' (%s) is in the body of loop '%s'; it writes a batch "
                               "once and the loop runs its body several times a batch: move it "
                               "after the loop",
                               b->name, b->kind->name, L->name);
        if (b->kind->role & PL_ROLE_INPUT)
            return pl_error_at(err, PL_EINPUT, b->pos,
                               "stage '%s' (%s) is in the body of loop '%s'; it fills a batch "
                               "once and the loop runs its body several times a batch: move it "
                               "before the loop",
                               b->name, b->kind->name, L->name);
        if (!first) {
            first = b;
        } else if (pl__is_dev(b->kind->engine) != pl__is_dev(first->kind->engine)) {
            bool dev = pl__is_dev(first->kind->engine);
            const pl_stage *h = dev ? b : first, *d = dev ? first : b;
            return pl_error_at(
                err, PL_EINPUT, b->pos,
                "loop '%s' mixes host and device stages: '%s' (%s) runs on the host and '%s' "
                "(%s) on the device; a body runs on one side (on the GPU a device body is one "
                "graph the host does not step through): make two loops, or move the host stages "
                "out of the body",
                L->name, h->name, h->kind->name, d->name, d->kind->name);
        }
        for (int k = 0; k < b->n_after; k++)
            if (b->after[k].index == L->index)
                return pl_error_at(err, PL_EINPUT, b->after[k].pos,
                                   "stage '%s': after: names '%s', the loop it is in; a body "
                                   "stage runs inside its loop: remove it",
                                   b->name, L->name);
    }
    for (int k = 0; k < L->n_after; k++) {
        const pl_stage *a = &spec->stages[L->after[k].index];
        if (a->parent == L->index)
            return pl_error_at(err, PL_EINPUT, L->after[k].pos,
                               "loop '%s': after: names '%s', a stage of its own body; remove it "
                               "(the body runs inside the loop)",
                               L->name, a->name);
    }
    bool on_dev = pl_loop_on_device(spec, L);
    PL_CHECK(pl__loop_buffer(spec, L, &l->cond, "while", on_dev, bufs, bnames, err));
    PL_CHECK(pl__loop_buffer(spec, L, &l->index, "index", on_dev, bufs, bnames, err));
    if (l->cond.name && l->index.name && l->cond.index == l->index.index)
        return pl_error_at(err, PL_EINPUT, l->index.pos,
                           "loop '%s': 'while' and 'index' are both '%s'; the loop writes its "
                           "index itself, so the condition would be the iteration number: give "
                           "them separate buffers",
                           L->name, l->index.name);
    for (int i = 0; l->index.name && i < l->n_body; i++) {
        const pl_stage *b = &spec->stages[l->first + i];
        for (int k = 0; k < b->n_writes; k++)
            if (b->writes[k].index == l->index.index) {
                const char *f = l->index.pos.file ? l->index.pos.file : "<input>";
                snprintf(p, sizeof p, "%s:%d:%d", f, l->index.pos.line, l->index.pos.col);
                return pl_error_at(err, PL_EINPUT, b->writes[k].pos,
                                   "stage '%s' writes '%s', the index of loop '%s' (at %s); the "
                                   "loop writes its index itself before every iteration: read "
                                   "it in the body, and write another buffer",
                                   b->name, l->index.name, L->name, p);
            }
    }
    if (l->stream) PL_CHECK(pl__stream_check(spec, L, on_dev, bufs, bnames, err));
    L->kind =
        on_dev && spec->run.loop_mode == PL_LOOP_DEVICE ? &pl_kind_loop_device : &pl_kind_loop_host;
    return PL_OK;
}

/* Adds buffer b to L's reads or writes unless it is there already. */
static pl_status pl__add_once(pl_spec *spec, pl_stage *L, bool write, int b, pl_pos pos,
                              pl_error *err)
{
    pl_ref *refs = write ? L->writes : L->reads;
    int n = write ? L->n_writes : L->n_reads;
    for (int i = 0; i < n; i++)
        if (refs[i].index == b) return PL_OK;
    pl_ref *r =
        (write ? pl_stage_add_write : pl_stage_add_read)(spec, L, spec->buffers[b].name, pos);
    if (!r) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    r->index = b;
    return PL_OK;
}

pl_status pl_loop_bind_refs(pl_spec *spec, pl_stage *L, const pl_graph *body, pl_error *err)
{
    pl_loop *l = L->loop;
    char *written = calloc((size_t)spec->n_buffers + 1, 1);
    if (!written) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    pl_status st = PL_OK;
    if (l->cond.name) st = pl__add_once(spec, L, false, l->cond.index, l->cond.pos, err);
    if (l->index.name) written[l->index.index] = 1; /* the loop writes it before the body */
    /* The body's stages in the order an iteration runs them (a body graph orders its members
     * first): a read no earlier stage wrote comes from before the loop. */
    for (int k = 0; k < body->n_members && st == PL_OK; k++) {
        int bi = body->order[k];
        /* Re-fetched each time: adding refs to L does not move the stages array. */
        const pl_stage *b = &spec->stages[bi];
        for (int i = 0; i < b->n_reads && st == PL_OK; i++)
            if (!written[b->reads[i].index])
                st = pl__add_once(spec, L, false, b->reads[i].index, b->reads[i].pos, err);
        for (int i = 0; i < b->n_writes; i++)
            written[b->writes[i].index] = 1;
    }
    for (int i = 0; i < l->n_body && st == PL_OK; i++) {
        const pl_stage *b = &spec->stages[l->first + i];
        for (int k = 0; k < b->n_writes && st == PL_OK; k++)
            st = pl__add_once(spec, L, true, b->writes[k].index, b->writes[k].pos, err);
    }
    if (st == PL_OK && l->index.name)
        st = pl__add_once(spec, L, true, l->index.index, l->index.pos, err);
    free(written);
    return st;
}

static bool pl__same_pos(pl_pos a, pl_pos b)
{
    return a.line == b.line && a.col == b.col &&
           (a.file == b.file || (a.file && b.file && strcmp(a.file, b.file) == 0));
}

int pl_loop_reader(const pl_spec *spec, const pl_stage *L, int b)
{
    const pl_loop *l = L->loop;
    pl_pos at = L->pos;
    bool found = false;
    for (int i = 0; i < L->n_reads && !found; i++)
        if (L->reads[i].index == b) {
            at = L->reads[i].pos;
            found = true;
        }
    if (!found || (l->cond.name && l->cond.index == b)) return -1;
    for (int i = 0; i < l->n_body; i++) {
        const pl_stage *s = &spec->stages[l->first + i];
        for (int k = 0; k < s->n_reads; k++)
            if (s->reads[k].index == b && pl__same_pos(s->reads[k].pos, at)) return s->index;
    }
    return -1;
}
