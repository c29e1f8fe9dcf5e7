/* sink_text: the sink kind's text and JSONL records: one line per row of a batch (pl_sink.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_half.h"
#include "pl_json.h"
#include "pl_sink.h"

static pl_status pl__refuse(const pl_stage *st, const char *key, const char *why, pl_error *err)
{
    const pl_opt *o = pl_stage_opt(st, key);
    if (!o) return PL_OK;
    return pl_error_at(err, PL_EINPUT, o->pos, "sink '%s': '%s' only applies %s; drop it", st->name,
                       key, why);
}

pl_status pl_sink_text_bind(pl_spec *spec, pl_stage *st, bool jsonl, pl_sink_text *t, pl_error *err)
{
    t->jsonl = jsonl;
    t->lengths = -1;
    if (!jsonl) {
        PL_CHECK(pl__refuse(st, "fields", "with format: jsonl", err));
        PL_CHECK(pl__refuse(st, "row_field", "with format: jsonl", err));
        return pl_kind_bind_ref(spec, st, "lengths", false, false, "", &t->lengths, err);
    }
    PL_CHECK(pl__refuse(st, "lengths", "with format: text", err));
    const pl_opt *f = pl_stage_opt(st, "fields");
    if (!f || f->n_items == 0)
        return pl_error_at(err, PL_EINPUT, f ? f->val_pos : st->pos,
                           "sink '%s' writes JSONL records but has no fields; list them with "
                           "the buffers they come from: fields: [{prompt: prompts}, {tokens: "
                           "n_tokens}]",
                           st->name);
    t->row_field = pl_opt_get_str(st, "row_field", NULL);
    t->n_fields = f->n_items;
    t->fields = pl_spec_alloc(spec, (size_t)f->n_items * sizeof *t->fields);
    if (!t->fields) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    for (int i = 0; i < f->n_items; i++) {
        pl_sink_field *fd = &t->fields[i];
        fd->name = f->item_tags && f->item_tags[i] ? f->item_tags[i] : f->items[i];
        fd->pos = f->item_pos[i];
        const char *dup = t->row_field && strcmp(t->row_field, fd->name) == 0 ? "row_field" : NULL;
        for (int j = 0; j < i && !dup; j++)
            if (strcmp(t->fields[j].name, fd->name) == 0) dup = "an earlier entry";
        if (dup)
            return pl_error_at(err, PL_EINPUT, fd->pos,
                               "sink '%s': field '%s' is also %s; give each field its own name",
                               st->name, fd->name, dup);
        if (!pl_stage_add_read(spec, st, f->items[i], f->item_pos[i]))
            return pl_error_set(err, PL_ENOMEM, "error: out of memory");
        fd->read = st->n_reads - 1;
    }
    return PL_OK;
}

static const pl_buffer *pl__rbuf(const pl_spec *spec, const pl_stage *st, int read)
{
    return pl_kind_rbuf(spec, st, read);
}

int64_t pl_sink_text_rows(const pl_spec *spec, const pl_stage *st, const pl_sink_text *t)
{
    return pl__rbuf(spec, st, t->jsonl ? t->fields[0].read : t->from)->shape[0];
}

pl_status pl_sink_text_validate(const pl_spec *spec, const pl_stage *st, const pl_sink_text *t,
                                pl_error *err)
{
    char sh[96];
    if (!t->jsonl) {
        const pl_buffer *b = pl__rbuf(spec, st, t->from);
        const pl_opt *fo = pl_stage_opt(st, "from");
        if (b->dtype != PL_U8 || b->rank != 2)
            return pl_error_at(err, PL_EINPUT, fo ? fo->val_pos : st->pos,
                               "sink '%s' writes text rows of buffer '%s' (%s %s), which must be "
                               "u8 [B, L]: B records a batch, each in a row of L bytes",
                               st->name, b->name, pl_dtype_name(b->dtype),
                               pl_kind_shape(b, sh, sizeof sh));
        if (t->lengths >= 0) {
            const pl_buffer *l = pl__rbuf(spec, st, t->lengths);
            if (l->dtype != PL_I32 || l->rank != 1 || l->shape[0] != b->shape[0])
                return pl_error_at(err, PL_EINPUT, pl_stage_opt(st, "lengths")->val_pos,
                                   "sink '%s': lengths buffer '%s' is %s %s; it must be i32 [%lld] "
                                   "(one length per row of '%s')",
                                   st->name, l->name, pl_dtype_name(l->dtype),
                                   pl_kind_shape(l, sh, sizeof sh), (long long)b->shape[0],
                                   b->name);
        }
        return PL_OK;
    }
    const pl_buffer *first = pl__rbuf(spec, st, t->fields[0].read);
    for (int i = 0; i < t->n_fields; i++) {
        const pl_buffer *b = pl__rbuf(spec, st, t->fields[i].read);
        if (b->where != PL_HOST)
            return pl_error_at(err, PL_EINPUT, t->fields[i].pos,
                               "sink '%s': field '%s' comes from device buffer '%s'; a sink reads "
                               "host buffers: download it with a d2h stage first",
                               st->name, t->fields[i].name, b->name);
        if (b->shape[0] != first->shape[0])
            return pl_error_at(err, PL_EINPUT, t->fields[i].pos,
                               "sink '%s': field '%s' comes from '%s' %s, but field '%s' from "
                               "'%s' %s: a record is one row of each, so their first dimensions "
                               "must agree",
                               st->name, t->fields[i].name, b->name,
                               pl_kind_shape(b, sh, sizeof sh), t->fields[0].name, first->name,
                               pl_dims_str(first->shape, first->rank, (char[96]){0}, 96));
    }
    return PL_OK;
}

pl_status pl_sink_buf_put(pl_sink_buf *o, const char *s, size_t n, pl_error *err)
{
    if (o->n + n + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : 4096;
        while (cap < o->n + n + 1)
            cap *= 2;
        char *p = realloc(o->p, cap);
        if (!p) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
        o->p = p;
        o->cap = cap;
    }
    memcpy(o->p + o->n, s, n);
    o->n += n;
    return PL_OK;
}

static pl_status pl__puts(pl_sink_buf *o, const char *s, pl_error *err)
{
    return pl_sink_buf_put(o, s, strlen(s), err);
}

pl_status pl_sink_buf_json_str(pl_sink_buf *o, const char *s, size_t n, pl_error *err)
{
    json_t *j = pl_json_strn(s, n);
    char *d = j ? json_dumps(j, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
    json_decref(j);
    if (!d) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    pl_status ps = pl__puts(o, d, err);
    free(d);
    return ps;
}

/* The fewest significant digits that read back as the same value (of a float for `single`). */
static void pl__shortest(double v, bool single, char *buf, size_t cap)
{
    for (int p = single ? 6 : 15; p <= 17; p++) {
        snprintf(buf, cap, "%.*g", p, v);
        if (single ? strtof(buf, NULL) == (float)v : strtod(buf, NULL) == v) break;
    }
    if (!strpbrk(buf, ".e")) snprintf(buf + strlen(buf), cap - strlen(buf), ".0");
}

static pl_status pl__put_elem(pl_sink_buf *o, const void *p, pl_dtype t, int64_t j, pl_error *err)
{
    char buf[48];
    double v = 0;
    switch (t) {
    case PL_U8:
        snprintf(buf, sizeof buf, "%u", ((const uint8_t *)p)[j]);
        return pl__puts(o, buf, err);
    case PL_I32:
        snprintf(buf, sizeof buf, "%d", ((const int32_t *)p)[j]);
        return pl__puts(o, buf, err);
    case PL_I64:
        snprintf(buf, sizeof buf, "%lld", (long long)((const int64_t *)p)[j]);
        return pl__puts(o, buf, err);
    case PL_F16:
        v = pl_f16_to_f32(((const uint16_t *)p)[j]);
        break;
    case PL_BF16:
        v = pl_bf16_to_f32(((const uint16_t *)p)[j]);
        break;
    case PL_F32:
        v = ((const float *)p)[j];
        break;
    case PL_F64:
        v = ((const double *)p)[j];
        break;
    case PL_DTYPE_COUNT:
        break;
    }
    if (!isfinite(v)) return pl__puts(o, "null", err);
    pl__shortest(v, t != PL_F64, buf, sizeof buf);
    return pl__puts(o, buf, err);
}

pl_status pl_sink_buf_json_values(pl_sink_buf *o, const void *p, pl_dtype t, const int64_t *dims,
                                  int rank, int64_t *j, pl_error *err)
{
    if (rank == 0) return pl__put_elem(o, p, t, (*j)++, err);
    PL_CHECK(pl_sink_buf_put(o, "[", 1, err));
    for (int64_t i = 0; i < dims[0]; i++) {
        if (i) PL_CHECK(pl_sink_buf_put(o, ",", 1, err));
        PL_CHECK(pl_sink_buf_json_values(o, p, t, dims + 1, rank - 1, j, err));
    }
    return pl_sink_buf_put(o, "]", 1, err);
}

/* Row r of a u8 [B, L] buffer: its bytes to the first NUL (or len when len >= 0). */
static size_t pl__row_len(const uint8_t *row, int64_t L, int64_t len)
{
    if (len >= 0) return (size_t)(len < L ? len : L);
    const void *z = memchr(row, 0, (size_t)L);
    return z ? (size_t)((const uint8_t *)z - row) : (size_t)L;
}

pl_status pl_sink_text_format(const pl_spec *spec, const pl_stage *st, const pl_sink_text *t,
                              void *const *bufs, int64_t batch, int64_t rows, pl_sink_buf *out,
                              pl_error *err)
{
    if (!t->jsonl) {
        const pl_buffer *b = pl__rbuf(spec, st, t->from);
        const int32_t *lens = t->lengths >= 0 ? bufs[pl__rbuf(spec, st, t->lengths)->index] : NULL;
        const uint8_t *m = bufs[b->index];
        int64_t L = b->shape[1];
        for (int64_t r = 0; r < rows; r++) {
            const uint8_t *row = m + r * L;
            size_t n = pl__row_len(row, L, lens ? (lens[r] < 0 ? 0 : lens[r]) : -1);
            if (memchr(row, '\n', n))
                return pl_error_set(err, PL_EINPUT,
                                    "error: row %lld of buffer '%s' holds a line break, and a text "
                                    "sink writes one record per line; write it with format: "
                                    "jsonl, which escapes it",
                                    (long long)r, b->name);
            PL_CHECK(pl_sink_buf_put(out, (const char *)row, n, err));
            PL_CHECK(pl_sink_buf_put(out, "\n", 1, err));
        }
        return PL_OK;
    }
    char num[32];
    for (int64_t r = 0; r < rows; r++) {
        PL_CHECK(pl_sink_buf_put(out, "{", 1, err));
        if (t->row_field) {
            PL_CHECK(pl_sink_buf_json_str(out, t->row_field, strlen(t->row_field), err));
            snprintf(num, sizeof num, ":%lld,",
                     (long long)(batch * pl_sink_text_rows(spec, st, t) + r));
            PL_CHECK(pl__puts(out, num, err));
        }
        for (int i = 0; i < t->n_fields; i++) {
            const pl_buffer *b = pl__rbuf(spec, st, t->fields[i].read);
            const char *m = bufs[b->index];
            int64_t per = b->count / b->shape[0];
            if (i) PL_CHECK(pl_sink_buf_put(out, ",", 1, err));
            PL_CHECK(pl_sink_buf_json_str(out, t->fields[i].name, strlen(t->fields[i].name), err));
            PL_CHECK(pl_sink_buf_put(out, ":", 1, err));
            if (b->dtype == PL_U8 && b->rank == 2) {
                const uint8_t *row = (const uint8_t *)m + r * per;
                PL_CHECK(
                    pl_sink_buf_json_str(out, (const char *)row, pl__row_len(row, per, -1), err));
            } else {
                int64_t j = r * per;
                PL_CHECK(
                    pl_sink_buf_json_values(out, m, b->dtype, b->shape + 1, b->rank - 1, &j, err));
            }
        }
        PL_CHECK(pl_sink_buf_put(out, "}\n", 2, err));
    }
    return PL_OK;
}
