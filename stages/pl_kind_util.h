/* pl_kind_util: small helpers the built-in kinds share (operand buffers, shape text, option refs).
 */
/* Layer stages: owns the stage kinds, one file (source.c, sink.c, h2d.c, d2h.c, lua.c) or folder
 * (kernel/, gpt2/, search/) each, their table (pl_kinds.c), and their CUDA side (*_gpu.c, .cu).
 * May include runtime/base, lua, runtime/device and runtime/core. Layers above run a stage through
 * pl_stage.h's hooks and include a kind's own header only for its engines (the kernel kind's GPU
 * context and op launchers, the search index). */
#ifndef PL_KIND_UTIL_H
#define PL_KIND_UTIL_H

#include <stdio.h>
#include <stdlib.h>
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
    return pl_dims_str(b->shape, b->rank, buf, cap);
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

/* `chunks:` (the kinds whose key tables list PL_KIND_CHUNKS_KEY): an integer N (N equal blocks) or
 * a list of the rows of each block, in order; `chunk_dims:` the leading dimensions a row spans.
 * Two key-table entries. */
#define PL_KIND_CHUNKS_KEY                                                                         \
    {"chunks", PL_KEY_INT_OR_INTS, NULL, "1",                                                      \
     "GPU: issue the batch as row blocks (first dimension): this many equal ones, or one per "     \
     "entry of a list with that many rows ([1, 1, 2, 4]); a consumer with the same blocks starts " \
     "on block j once it is done (e.g. a download behind each block of a forward)"},               \
    {                                                                                              \
        "chunk_dims", PL_KEY_INT, NULL, "1",                                                       \
            "GPU: the leading dimensions a chunks row spans: 1 counts rows of the first "          \
            "dimension, 2 of the first two taken as one (positions of [B, T]: a block may be "     \
            "part of a sequence)"                                                                  \
    }
/* Into st->chunks (and, for a list, st->chunk_rows as written); `read` is the index in st->reads
 * of the buffer whose first dimension the blocks cut. pl_spec_check checks the blocks against
 * that buffer's rows once sizes are known and normalises chunk_rows (pl_check.c). */
static inline pl_status pl_kind_bind_chunks(pl_spec *spec, pl_stage *st, int read, pl_error *err)
{
    const pl_opt *o = pl_stage_opt(st, "chunks");
    st->chunks_pos = o ? o->val_pos : st->pos;
    st->chunks_read = read;
    int64_t dims;
    PL_CHECK(pl_opt_get_int(st, "chunk_dims", 1, 1, PL_MAX_RANK, &dims, err));
    st->chunk_dims = (int)dims;
    if (!o || !o->is_list) {
        int64_t n;
        PL_CHECK(pl_opt_get_int(st, "chunks", 1, 1, PL_MAX_CHUNKS, &n, err));
        st->chunks = (int)n;
        return PL_OK;
    }
    const char *k = st->kind->name;
    if (o->n_items == 0)
        return pl_error_at(
            err, PL_EINPUT, o->val_pos,
            "%s stage '%s': chunks [] lists no blocks; give the rows of each block "
            "in order (chunks: [1, 1, 2, 4]) or a number of equal blocks (chunks: 4)",
            k, st->name);
    if (o->n_items > PL_MAX_CHUNKS)
        return pl_error_at(err, PL_EINPUT, o->val_pos,
                           "%s stage '%s': chunks lists %d blocks, but a stage may have at most %d "
                           "(PL_MAX_CHUNKS); merge some of them",
                           k, st->name, o->n_items, PL_MAX_CHUNKS);
    int64_t *rows = pl_spec_alloc(spec, (size_t)o->n_items * sizeof *rows);
    if (!rows) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    for (int j = 0; j < o->n_items; j++) {
        rows[j] = strtoll(o->items[j], NULL, 10); /* an integer: pl_stage_check_opts */
        if (rows[j] < 1)
            return pl_error_at(err, PL_EINPUT, o->item_pos[j],
                               "%s stage '%s': chunks entry %d is %lld; each entry is the rows of "
                               "one block, at least 1 (drop the entry or make it positive)",
                               k, st->name, j + 1, (long long)rows[j]);
    }
    st->chunks = o->n_items;
    st->chunk_rows = rows;
    st->chunks_listed = true;
    return PL_OK;
}

/* `parallel:` (the kinds whose key tables list PL_KIND_PARALLEL_KEY: their run_host may run for
 * several batches at once, each on its own host worker). */
#define PL_KIND_PARALLEL_KEY                                                                       \
    {                                                                                              \
        "parallel", PL_KEY_INT, NULL, "1",                                                         \
            "host: batches of this stage that may run at once, each on its own host worker (at "   \
            "most the run's depth and workers); later stages still see them in batch order"        \
    }
/* Into st->parallel (1..PL_MAX_PARALLEL). */
static inline pl_status pl_kind_bind_parallel(pl_stage *st, pl_error *err)
{
    int64_t n;
    PL_CHECK(pl_opt_get_int(st, "parallel", 1, 1, PL_MAX_PARALLEL, &n, err));
    st->parallel = (int)n;
    return PL_OK;
}

/* ", 8 chunks" (chunks: 8) or ", chunks 1+1+2+4" (a list) into buf: the kinds' describe strings. */
static inline void pl_kind_chunks_describe(const pl_stage *st, char *buf, size_t cap)
{
    char s[PL_MAX_CHUNKS * 21];
    int n = st->chunks_listed
                ? snprintf(buf, cap, ", chunks %s", pl_stage_chunks_str(st, s, sizeof s))
                : snprintf(buf, cap, ", %d chunks", st->chunks);
    if (st->chunk_dims > 1 && n >= 0 && (size_t)n < cap)
        snprintf(buf + n, cap - (size_t)n, " of the first %d dimensions", st->chunk_dims);
}

/* A source's padded batch: `batch` holds `rows` real rows (pl_run_rows). Called by padding
 * sources when they know it (at open for a file, when the data ends for a stream). */
static inline void pl_run_rows_pad(const pl_run_env *env, int64_t batch, int64_t rows)
{
    if (!env->rows) return;
    int64_t cur = __atomic_load_n(&env->rows->rows, __ATOMIC_ACQUIRE);
    while (rows < cur && !__atomic_compare_exchange_n(&env->rows->rows, &cur, rows, false,
                                                      __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        ;
    __atomic_store_n(&env->rows->batch, batch, __ATOMIC_RELEASE);
}
/* The real rows of `batch` out of `full` (a sink writing rows): fewer only for a padded batch. */
static inline int64_t pl_run_rows_of(const pl_run_env *env, int64_t batch, int64_t full)
{
    if (!env->rows || __atomic_load_n(&env->rows->batch, __ATOMIC_ACQUIRE) != batch) return full;
    int64_t r = __atomic_load_n(&env->rows->rows, __ATOMIC_ACQUIRE);
    return r < full ? r : full;
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
