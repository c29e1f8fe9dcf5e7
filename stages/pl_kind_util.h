/* pl_kind_util: small helpers the built-in kinds share (operand buffers, shape text, option refs).
 */
#ifndef PL_KIND_UTIL_H
#define PL_KIND_UTIL_H

#include <stdio.h>
#include <string.h>

#include "pl_stage.h"

/* The buffer behind read/write ref i of a checked stage. */
static inline const pl_buffer *pl_kind_rbuf(const pl_spec *spec, const pl_stage *st, int i)
{
    return &spec->buffers[st->reads[i].index];
}
static inline const pl_buffer *pl_kind_wbuf(const pl_spec *spec, const pl_stage *st, int i)
{
    return &spec->buffers[st->writes[i].index];
}

/* "[4, 1024]" into buf. */
static inline const char *pl_kind_shape(const pl_buffer *b, char *buf, size_t cap)
{
    size_t n = 0;
    n += (size_t)snprintf(buf + n, cap - n, "[");
    for (int i = 0; i < b->rank && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, i ? ", %lld" : "%lld", (long long)b->shape[i]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
    return buf;
}

static inline bool pl_kind_same_shape(const pl_buffer *a, const pl_buffer *b)
{
    if (a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}

/* Adds the buffer named by option `key` as a read (or write) and returns its index in the stage's
 * reads (writes), -1 when the option is absent. Required options missing fail with a message. */
static inline pl_status pl_kind_bind_ref(pl_spec *spec, pl_stage *st, const char *key, bool write,
                                         bool required, const char *what, int *out, pl_error *err)
{
    *out = -1;
    const pl_opt *o = pl_stage_opt(st, key);
    if (!o) {
        if (!required) return PL_OK;
        return pl_error_at(err, PL_EINPUT, st->pos, "%s stage '%s' needs '%s:' (%s)",
                           st->kind->name, st->name, key, what);
    }
    pl_ref *r = write ? pl_stage_add_write(spec, st, o->str, o->val_pos)
                      : pl_stage_add_read(spec, st, o->str, o->val_pos);
    if (!r) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    *out = write ? st->n_writes - 1 : st->n_reads - 1;
    return PL_OK;
}

/* `chunks:` (the kinds whose key tables list PL_KIND_CHUNKS_KEY): into st->chunks. */
#define PL_KIND_CHUNKS_KEY                                                                         \
    {                                                                                              \
        "chunks", PL_KEY_INT, NULL, "1",                                                           \
            "GPU: issue the batch as this many row blocks (first dimension); a consumer with the " \
            "same "                                                                                \
            "chunks starts on block j once it is done (e.g. a download behind each block of a "    \
            "forward)"                                                                             \
    }
static inline pl_status pl_kind_bind_chunks(pl_stage *st, pl_error *err)
{
    int64_t n;
    PL_CHECK(pl_opt_get_int(st, "chunks", 1, 1, PL_MAX_CHUNKS, &n, err));
    const pl_opt *o = pl_stage_opt(st, "chunks");
    st->chunks = (int)n;
    st->chunks_pos = o ? o->val_pos : st->pos;
    return PL_OK;
}

/* A chunked stage's rows (the first dimension of buffer b) must split evenly. */
static inline pl_status pl_kind_check_chunks(const pl_stage *st, const pl_buffer *b, pl_error *err)
{
    if (st->chunks <= 1 || (b->rank > 0 && b->shape[0] % st->chunks == 0)) return PL_OK;
    char s1[96];
    return pl_error_at(err, PL_EINPUT, st->chunks_pos,
                       "%s stage '%s': chunks %d does not divide the %lld rows of '%s' %s (the "
                       "first dimension); choose a divisor of %lld",
                       st->kind->name, st->name, st->chunks, (long long)(b->rank ? b->shape[0] : 0),
                       b->name, pl_kind_shape(b, s1, sizeof s1),
                       (long long)(b->rank ? b->shape[0] : 0));
}

/* Inside a chunked stage's record: chunk j's work is enqueued (mark) / about to be (wait). No-ops
 * where the executor connects nothing (bench, a stage nobody chunk-reads). */
static inline pl_status pl_dev_chunk_mark(const pl_dev_ctx *ctx, int j, pl_error *err)
{
    return ctx->chunk_mark ? ctx->chunk_mark(ctx, j, err) : PL_OK;
}
static inline pl_status pl_dev_chunk_wait(const pl_dev_ctx *ctx, int j, pl_error *err)
{
    return ctx->chunk_wait ? ctx->chunk_wait(ctx, j, err) : PL_OK;
}

#endif
