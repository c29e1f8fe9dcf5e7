/* h2d: copies a pinned host buffer to a device buffer on the host-to-device copy engine. On the
 * host executor it is a memcpy. `from` becomes the stage's read, `to` its write; pl_copy_validate
 * checks direction, dtype and size for both copy kinds. */
#include <inttypes.h>
#include <string.h>

#include "pl_kind_util.h"
#ifdef PL_WITH_CUDA
#include "pl_gpu.h"
#endif

static const pl_key pl__h2d_keys[] = {
    {"from", PL_KEY_NAME, NULL, NULL, "host buffer (required)"},
    {"to", PL_KEY_NAME, NULL, NULL, "device buffer of the same dtype and size (required)"},
    PL_KIND_CHUNKS_KEY,
    {NULL, 0, NULL, NULL, NULL},
};

static pl_status pl__h2d_bind(pl_spec *spec, pl_stage *st, pl_error *err)
{
    int r, w;
    PL_CHECK(pl_kind_bind_ref(spec, st, "from", false, true, "the host buffer to copy", &r, err));
    PL_CHECK(pl_kind_bind_ref(spec, st, "to", true, true, "the device buffer to fill", &w, err));
    /* `chunks` splits the copy along the source's first dimension (pl_copy_validate checks that
     * both sides have the same size, pl_check.c the blocks against the source's rows). */
    return pl_kind_bind_chunks(spec, st, r, err);
}

/* Shared with d2h: a copy reads one buffer and writes one, from the memory its engine copies from
 * to the memory it copies to, ends of one dtype and byte size. */
pl_status pl_copy_validate(const pl_spec *spec, const pl_stage *st, pl_error *err);
pl_status pl_copy_validate(const pl_spec *spec, const pl_stage *st, pl_error *err)
{
    const pl_kind *kind = st->kind;
    bool h2d = kind->engine == PL_ENGINE_H2D;
    if (st->n_reads != 1 || st->n_writes != 1)
        return pl_error_at(err, PL_EINPUT, st->pos,
                           "%s stage '%s' must read exactly one buffer and write exactly one "
                           "(from: and to:), but it reads %d and writes %d",
                           kind->name, st->name, st->n_reads, st->n_writes);
    const pl_buffer *src = &spec->buffers[st->reads[0].index];
    const pl_buffer *dst = &spec->buffers[st->writes[0].index];
    pl_where want_src = h2d ? PL_HOST : PL_DEVICE, want_dst = h2d ? PL_DEVICE : PL_HOST;
    if (src->where != want_src)
        return pl_error_at(err, PL_EINPUT, st->reads[0].pos,
                           "%s stage '%s' copies %s, but its source '%s' is a %s buffer; for %s "
                           "use kind: %s",
                           kind->name, st->name, h2d ? "host -> device" : "device -> host",
                           src->name, pl_where_name(src->where),
                           h2d ? "device -> host" : "host -> device", h2d ? "d2h" : "h2d");
    if (dst->where != want_dst)
        return pl_error_at(err, PL_EINPUT, st->writes[0].pos,
                           "%s stage '%s' copies %s, but its destination '%s' is a %s buffer; "
                           "for %s use kind: %s",
                           kind->name, st->name, h2d ? "host -> device" : "device -> host",
                           dst->name, pl_where_name(dst->where),
                           h2d ? "device -> host" : "host -> device", h2d ? "d2h" : "h2d");
    if (src->dtype != dst->dtype || src->bytes != dst->bytes)
        return pl_error_at(err, PL_EINPUT, st->pos,
                           "%s stage '%s' copies '%s' (%s, %" PRIu64 " bytes) to '%s' (%s, %" PRIu64
                           " bytes); both ends need the same dtype and byte size",
                           kind->name, st->name, src->name, pl_dtype_name(src->dtype), src->bytes,
                           dst->name, pl_dtype_name(dst->dtype), dst->bytes);
    return PL_OK;
}

/* Shared with d2h: a copy is one read and one write of equal size (checked). */
pl_status pl_copy_run_host(pl_stage_ctx *ctx, pl_error *err);
pl_status pl_copy_run_host(pl_stage_ctx *ctx, pl_error *err)
{
    (void)err;
    const pl_stage *st = ctx->stage;
    const pl_buffer *src = pl_kind_rbuf(ctx->spec, st, 0);
    memcpy(ctx->bufs[st->writes[0].index], ctx->bufs[src->index], (size_t)src->bytes);
    return PL_OK;
}

/* Shared with d2h: "x -> x_dev" (", 8 chunks"; a list: ", chunks 1+1+2+4"). */
void pl_copy_describe(const pl_spec *spec, const pl_stage *st, char *buf, size_t cap);
void pl_copy_describe(const pl_spec *spec, const pl_stage *st, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "%s -> %s", pl_kind_rbuf(spec, st, 0)->name,
                     pl_kind_wbuf(spec, st, 0)->name);
    if (st->chunks > 1 && n >= 0 && (size_t)n < cap)
        pl_kind_chunks_describe(st, buf + n, cap - (size_t)n);
}

#ifdef PL_WITH_CUDA
/* Shared with d2h: one cudaMemcpyAsync between this slot's host and device copies. */
pl_status pl_copy_record(const pl_dev_ctx *ctx, pl_error *err);
pl_status pl_copy_record(const pl_dev_ctx *ctx, pl_error *err)
{
    const pl_stage *st = ctx->stage;
    int from = st->reads[0].index, to = st->writes[0].index;
    bool to_device = st->kind->engine == PL_ENGINE_H2D;
    char *dst = to_device ? ctx->dev_bufs[to] : ctx->host_bufs[to];
    const char *src = to_device ? ctx->host_bufs[from] : ctx->dev_bufs[from];
    const pl_buffer *b = &ctx->spec->buffers[from];
    if (st->chunks <= 1)
        return pl_gpu_copy_async(dst, src, b->bytes, to_device, ctx->stream, st->name, ctx->batch,
                                 err);
    /* Block j: chunk_rows[j] rows from the prefix sum of the rows before it (checked to add up
     * to the rows of the source's first chunk_dims dimensions; both ends have its size). */
    uint64_t rows = 0, off = 0;
    for (int j = 0; j < st->chunks; j++)
        rows += (uint64_t)st->chunk_rows[j];
    uint64_t row = b->bytes / rows;
    for (int j = 0; j < st->chunks; j++) {
        uint64_t part = (uint64_t)st->chunk_rows[j] * row;
        PL_CHECK(pl_dev_chunk_wait(ctx, j, err));
        PL_CHECK(pl_gpu_copy_async(dst + off, src + off, part, to_device, ctx->stream, st->name,
                                   ctx->batch, err));
        PL_CHECK(pl_dev_chunk_mark(ctx, j, err));
        off += part;
    }
    return PL_OK;
}
#define PL__COPY_RECORD pl_copy_record
#else
#define PL__COPY_RECORD NULL
#endif

const pl_kind pl_kind_h2d = {
    .name = "h2d",
    .engine = PL_ENGINE_H2D,
    .keys = pl__h2d_keys,
    .doc = "host-to-device copy (pinned host buffer to device buffer)",
    .bind = pl__h2d_bind,
    .validate = pl_copy_validate,
    .run_host = pl_copy_run_host,
    .record = PL__COPY_RECORD,
    .describe = pl_copy_describe,
};
