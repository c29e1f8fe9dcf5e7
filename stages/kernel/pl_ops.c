/* pl_ops: the op table (pl_ops[], from PL_OPS_MAP in pl_ops.h), the checks a kernel stage's
 * operands get from it (counts, then the op's rule), and what `describe` says of an op. */
#include "pl_ops.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "pl_kind_util.h"

const pl_op_desc pl_ops[PL_OP_COUNT] = {
#define PL__OP_DESC(id, nm, r, w, rule, dt, opts, repro, doc)                                      \
    {PL_OP_##id, #nm, r, w, pl_op_rule_##rule, dt, opts, repro, doc},
    PL_OPS_MAP(PL__OP_DESC)
#undef PL__OP_DESC
};

const char *pl_op_name(pl_op_id op)
{
    return (unsigned)op < PL_OP_COUNT ? pl_ops[op].name : "?";
}

bool pl_op_parse(const char *name, pl_op_id *out)
{
    for (int i = 0; i < PL_OP_COUNT; i++)
        if (strcmp(name, pl_ops[i].name) == 0) {
            *out = (pl_op_id)i;
            return true;
        }
    return false;
}

int pl_op_operands(const char *names)
{
    if (!names) return -1;
    if (!*names) return 0;
    int n = 1;
    for (const char *p = names; *p; p++)
        n += *p == ',';
    return n;
}

const char *pl_op_usage(const pl_op_desc *d, char *buf, size_t cap)
{
    pl_key_value v = {d->name, d->reads, d->writes, d->doc};
    return pl_key_value_usage(&v, buf, cap);
}

/* The dtypes of a mask as text: "i64", "f32 or f64", "f16, bf16 or f32". */
static const char *pl__dtypes(unsigned mask, char *buf, size_t cap)
{
    int n = 0, total = 0;
    for (int t = 0; t < PL_DTYPE_COUNT; t++)
        total += (mask >> t) & 1;
    size_t k = 0;
    buf[0] = '\0';
    for (int t = 0; t < PL_DTYPE_COUNT && k < cap; t++) {
        if (!((mask >> t) & 1)) continue;
        const char *sep = n == 0 ? "" : n + 1 == total ? " or " : ", ";
        k += (size_t)snprintf(buf + k, cap - k, "%s%s", sep, pl_dtype_name((pl_dtype)t));
        n++;
    }
    return buf;
}

static bool pl__allows(const pl_op_desc *d, pl_dtype t)
{
    return !d->dtypes || ((d->dtypes >> t) & 1);
}

static pl_pos pl__wpos(const pl_stage *st, int i)
{
    return i < st->n_writes ? st->writes[i].pos : st->pos;
}

/* Elementwise: every operand has the write's dtype and shape. */
pl_status pl_op_rule_same(const pl_spec *spec, const pl_stage *st, const pl_op_desc *d,
                          pl_error *err)
{
    char s1[96], s2[96];
    const pl_buffer *z = pl_kind_wbuf(spec, st, 0);
    if (!pl__allows(d, z->dtype))
        return pl_error_at(err, PL_EINPUT, pl__wpos(st, 0),
                           "kernel stage '%s': op %s works on %s; '%s' is %s", st->name, d->name,
                           pl__dtypes(d->dtypes, s1, sizeof s1), z->name, pl_dtype_name(z->dtype));
    for (int i = 0; i < st->n_reads; i++) {
        const pl_buffer *x = pl_kind_rbuf(spec, st, i);
        if (x->dtype != z->dtype || !pl_kind_same_shape(x, z))
            return pl_error_at(err, PL_EINPUT, st->reads[i].pos,
                               "kernel stage '%s': op %s is elementwise: '%s' is %s %s but "
                               "'%s' is %s %s; give all operands one dtype and shape",
                               st->name, d->name, x->name, pl_dtype_name(x->dtype),
                               pl_kind_shape(x, s1, sizeof s1), z->name, pl_dtype_name(z->dtype),
                               pl_kind_shape(z, s2, sizeof s2));
    }
    return PL_OK;
}

/* A reduction to one value: the write is [1] of an allowed dtype. */
pl_status pl_op_rule_one_value(const pl_spec *spec, const pl_stage *st, const pl_op_desc *d,
                               pl_error *err)
{
    char s1[96], types[96];
    const pl_buffer *s = pl_kind_wbuf(spec, st, 0);
    if (!pl__allows(d, s->dtype) || s->count != 1 || s->rank != 1)
        return pl_error_at(err, PL_EINPUT, pl__wpos(st, 0),
                           "kernel stage '%s': op %s writes one value: '%s' must be %s with "
                           "shape [1], not %s %s",
                           st->name, d->name, s->name, pl__dtypes(d->dtypes, types, sizeof types),
                           pl_dtype_name(s->dtype), pl_kind_shape(s, s1, sizeof s1));
    return PL_OK;
}

/* One result per row of the read (its last dimension): the write has the read's shape without
 * that dimension ([1] for a vector), an allowed dtype, and rows an i32 index can count. */
pl_status pl_op_rule_rows(const pl_spec *spec, const pl_stage *st, const pl_op_desc *d,
                          pl_error *err)
{
    char s1[96], s2[96], types[96];
    const pl_buffer *x = pl_kind_rbuf(spec, st, 0), *y = pl_kind_wbuf(spec, st, 0);
    bool ok = pl__allows(d, y->dtype);
    if (x->rank == 1)
        ok = ok && y->rank == 1 && y->shape[0] == 1;
    else {
        ok = ok && y->rank == x->rank - 1;
        for (int i = 0; ok && i < y->rank; i++)
            ok = y->shape[i] == x->shape[i];
    }
    if (!ok) {
        char want[96];
        pl_buffer tmp = *x;
        tmp.rank = x->rank > 1 ? x->rank - 1 : 1;
        if (x->rank == 1) tmp.shape[0] = 1;
        return pl_error_at(err, PL_EINPUT, pl__wpos(st, 0),
                           "kernel stage '%s': %s of '%s' %s gives one index per row: '%s' must "
                           "be %s %s, not %s %s",
                           st->name, d->name, x->name, pl_kind_shape(x, s1, sizeof s1), y->name,
                           pl__dtypes(d->dtypes, types, sizeof types),
                           pl_kind_shape(&tmp, want, sizeof want), pl_dtype_name(y->dtype),
                           pl_kind_shape(y, s2, sizeof s2));
    }
    if (x->shape[x->rank - 1] > INT32_MAX)
        return pl_error_at(err, PL_EINPUT, st->reads[0].pos,
                           "kernel stage '%s': %s rows of '%s' are longer than an i32 index can "
                           "count",
                           st->name, d->name, x->name);
    return PL_OK;
}

/* A matrix product: A [m, k], B [k, n], C [m, n] of one allowed dtype; beta != 0 reads C, which
 * must then be persistent. */
pl_status pl_op_rule_matmul(const pl_spec *spec, const pl_stage *st, const pl_op_desc *d,
                            pl_error *err)
{
    char s1[96], s2[96], s3[96];
    const pl_kernel_opts *o = st->priv;
    const pl_buffer *a = pl_kind_rbuf(spec, st, 0), *b = pl_kind_rbuf(spec, st, 1);
    const pl_buffer *c = pl_kind_wbuf(spec, st, 0);
    if (!pl__allows(d, c->dtype))
        return pl_error_at(err, PL_EINPUT, pl__wpos(st, 0),
                           "kernel stage '%s': %s works on %s; '%s' is %s", st->name, d->name,
                           pl__dtypes(d->dtypes, s1, sizeof s1), c->name, pl_dtype_name(c->dtype));
    if (a->dtype != c->dtype || b->dtype != c->dtype)
        return pl_error_at(err, PL_EINPUT, st->pos,
                           "kernel stage '%s': %s operands must share one dtype: A '%s' is %s, "
                           "B '%s' is %s, C '%s' is %s",
                           st->name, d->name, a->name, pl_dtype_name(a->dtype), b->name,
                           pl_dtype_name(b->dtype), c->name, pl_dtype_name(c->dtype));
    if (a->rank != 2 || b->rank != 2 || c->rank != 2 || a->shape[1] != b->shape[0] ||
        c->shape[0] != a->shape[0] || c->shape[1] != b->shape[1])
        return pl_error_at(err, PL_EINPUT, st->pos,
                           "kernel stage '%s': %s needs A [m, k], B [k, n] and C [m, n]; got A "
                           "'%s' %s, B '%s' %s, C '%s' %s",
                           st->name, d->name, a->name, pl_kind_shape(a, s1, sizeof s1), b->name,
                           pl_kind_shape(b, s2, sizeof s2), c->name,
                           pl_kind_shape(c, s3, sizeof s3));
    if (o->beta != 0 && !c->persistent) {
        const pl_opt *bo = pl_stage_opt(st, "beta");
        return pl_error_at(err, PL_EINPUT, bo ? bo->val_pos : st->pos,
                           "kernel stage '%s': beta %g reads C's previous contents, but '%s' is "
                           "per-batch (one copy per slot, so the result would depend on depth); "
                           "make '%s' persistent, or set beta: 0",
                           st->name, o->beta, c->name, c->name);
    }
    return PL_OK;
}

/* A timed spin: it touches no operand and needs a duration. */
pl_status pl_op_rule_spin(const pl_spec *spec, const pl_stage *st, const pl_op_desc *d,
                          pl_error *err)
{
    (void)spec;
    const pl_kernel_opts *o = st->priv;
    if (o->duration_us > 0) return PL_OK;
    const pl_opt *du = pl_stage_opt(st, "duration_us");
    const pl_opt *op = pl_stage_opt(st, "op");
    return pl_error_at(err, PL_EINPUT,
                       du   ? du->val_pos
                       : op ? op->val_pos
                            : st->pos,
                       "kernel stage '%s': op %s needs 'duration_us:' greater than 0 (how long "
                       "to spin, microseconds)",
                       st->name, d->name);
}

pl_status pl_op_check(const pl_spec *spec, const pl_stage *st, pl_error *err)
{
    const pl_kernel_opts *o = st->priv;
    const pl_op_desc *d = &pl_ops[o->op];
    int nr = pl_op_operands(d->reads), nw = pl_op_operands(d->writes);
    if (nr >= 0 && nw >= 0 && (st->n_reads != nr || st->n_writes != nw)) {
        char usage[128];
        return pl_error_at(err, PL_EINPUT, st->pos,
                           "kernel stage '%s': op %s takes %d read(s) and %d write(s), got %d and "
                           "%d; write it as %s",
                           st->name, d->name, nr, nw, st->n_reads, st->n_writes,
                           pl_op_usage(d, usage, sizeof usage));
    }
    return d->rule(spec, st, d, err);
}

void pl_op_describe(const pl_kernel_opts *o, char *buf, size_t cap)
{
    const pl_op_desc *d = &pl_ops[o->op];
    int n = snprintf(buf, cap, "%s", d->name);
    if (d->opts & PL_OPT_VALUE && n >= 0 && (size_t)n < cap)
        n += snprintf(buf + n, cap - (size_t)n, " value=%g", o->value);
    if (d->opts & PL_OPT_ALPHA && n >= 0 && (size_t)n < cap)
        n += snprintf(buf + n, cap - (size_t)n, " alpha=%g", o->alpha);
    if (d->opts & PL_OPT_BETA && n >= 0 && (size_t)n < cap)
        n += snprintf(buf + n, cap - (size_t)n, " beta=%g", o->beta);
    if (d->opts & PL_OPT_DURATION && n >= 0 && (size_t)n < cap)
        snprintf(buf + n, cap - (size_t)n, " %g us", o->duration_us);
}
