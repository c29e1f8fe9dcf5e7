/* kernel: a built-in op (stages/kernel/pl_ops.h) on device buffers; operands are reads then writes.
 * On the host executor each op runs its C reference (ops_ref.c); `busy` sleeps for duration_us. Or
 * a user kernel (source:, code: or module:), handled by stages/kernel/kernel_user.c. */
#include "pl_kind_util.h"
#include "pl_ops.h"
#include "pl_ukern.h"
#ifdef PL_WITH_CUDA
#include "kernel_gpu.h"
#endif

static const pl_key pl__kernel_keys[] = {
    {"op", PL_KEY_ENUM, "fill|scale|saxpy|add|sum|checksum|argmax|gemm|busy", NULL,
     "the built-in op (or a user kernel: source, code or module)"},
    {"value", PL_KEY_NUM, NULL, "0", "fill: the value"},
    {"alpha", PL_KEY_NUM, NULL, "1", "scale, saxpy, gemm: the factor"},
    {"beta", PL_KEY_NUM, NULL, "0", "gemm: factor of C's previous contents"},
    {"duration_us", PL_KEY_NUM, NULL, NULL, "busy: how long to spin, microseconds (required)"},
    /* User kernels (stages/kernel/kernel_user.c). */
    {"source", PL_KEY_PATH, NULL, NULL, "user kernel: CUDA source file, compiled with NVRTC"},
    {"code", PL_KEY_STR, NULL, NULL, "user kernel: inline CUDA source"},
    {"module", PL_KEY_PATH, NULL, NULL, "user kernel: a prebuilt .ptx, .cubin or .fatbin"},
    {"function", PL_KEY_STR, NULL, NULL,
     "user kernel: the kernel's name, or a name expression like scale<float> (required)"},
    {"grid", PL_KEY_ITEMS, NULL, NULL, "user kernel: 1-3 blocks-per-grid expressions (required)"},
    {"block", PL_KEY_ITEMS, NULL, NULL,
     "user kernel: 1-3 threads-per-block expressions (required)"},
    {"shared", PL_KEY_STR, NULL, "0", "user kernel: dynamic shared memory, bytes (an expression)"},
    {"args", PL_KEY_ITEMS, NULL, "[]",
     "user kernel: the arguments in order: buffers, {f32: 1.5}-style scalars, elements(b), "
     "bytes(b)"},
    {"options", PL_KEY_ITEMS, NULL, "[]", "user kernel: NVRTC flags (-use_fast_math, -DN=4)"},
    {"include", PL_KEY_ITEMS, NULL, "[]", "user kernel: header folders (-I)"},
    {"host", PL_KEY_STR, NULL, NULL,
     "user kernel: the host reference, a Lua function(batch, opts, bufs), or its name in `lua`"},
    {"lua", PL_KEY_PATH, NULL, NULL, "user kernel: Lua script defining the `host` function"},
    {NULL, 0, NULL, NULL, NULL},
};

/* Keys that belong to one side only: a stage with `op:` may not use the user-kernel keys, and
 * back. */
static const char *const pl__user_only[] = {"function", "grid",    "block", "shared", "args",
                                            "options",  "include", "host",  "lua",    NULL};
static const char *const pl__op_only[] = {"value", "alpha", "beta", "duration_us", NULL};

static const int pl__op_reads[PL_OP_COUNT] = {
#define PL__OP_R(id, name, r, w, doc) r,
    PL_OPS_MAP(PL__OP_R)
#undef PL__OP_R
};
static const int pl__op_writes[PL_OP_COUNT] = {
#define PL__OP_W(id, name, r, w, doc) w,
    PL_OPS_MAP(PL__OP_W)
#undef PL__OP_W
};

static pl_status pl__kernel_bind(pl_spec *spec, pl_stage *st, pl_error *err)
{
    pl_kernel_opts *o = pl_spec_alloc(spec, sizeof *o);
    if (!o) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    const pl_opt *op = pl_stage_opt(st, "op");
    bool user = pl_ukern_wanted(st);
    if (op && user) {
        const pl_opt *u = pl_stage_opt(st, "source");
        if (!u) u = pl_stage_opt(st, "code");
        if (!u) u = pl_stage_opt(st, "module");
        return pl_error_at(err, PL_EINPUT, u->pos,
                           "kernel stage '%s': give either 'op:' (a built-in op) or '%s:' (a user "
                           "kernel), not both",
                           st->name, u->key);
    }
    const char *const *wrong = user ? pl__op_only : pl__user_only;
    for (int i = 0; wrong[i]; i++) {
        const pl_opt *w = pl_stage_opt(st, wrong[i]);
        if (w)
            return pl_error_at(err, PL_EINPUT, w->pos,
                               user ? "kernel stage '%s': '%s:' is an option of the built-in ops; "
                                      "a user kernel takes its values through 'args:'"
                                    : "kernel stage '%s': '%s:' is for user kernels (source:, "
                                      "code: or module:), not for 'op:'",
                               st->name, wrong[i]);
    }
    if (user) {
        pl_ukern *uk = NULL;
        PL_CHECK(pl_ukern_bind(spec, st, &uk, err));
        o->user = uk;
        st->priv = o;
        return PL_OK;
    }
    if (!op)
        return pl_error_at(err, PL_EINPUT, st->pos,
                           "kernel stage '%s' needs 'op:' (one of fill, scale, saxpy, add, sum, "
                           "checksum, argmax, gemm, busy), or a user kernel: 'source:', 'code:' "
                           "or 'module:'",
                           st->name);
    int idx;
    PL_CHECK(pl_opt_get_enum(st, "op", 0, &idx, err));
    o->op = (pl_op_id)idx;
    PL_CHECK(pl_opt_get_num(st, "value", 0, &o->value, err));
    PL_CHECK(pl_opt_get_num(st, "alpha", 1, &o->alpha, err));
    PL_CHECK(pl_opt_get_num(st, "beta", 0, &o->beta, err));
    PL_CHECK(pl_opt_get_num(st, "duration_us", 0, &o->duration_us, err));
    if (o->op == PL_OP_BUSY && !(o->duration_us > 0)) {
        const pl_opt *d = pl_stage_opt(st, "duration_us");
        return pl_error_at(err, PL_EINPUT, d ? d->val_pos : op->val_pos,
                           "kernel stage '%s': op busy needs 'duration_us:' greater than 0 (how "
                           "long to spin, microseconds)",
                           st->name);
    }
    st->priv = o;
    return PL_OK;
}

static pl_pos pl__wpos(const pl_stage *st, int i)
{
    return i < st->n_writes ? st->writes[i].pos : st->pos;
}

static pl_status pl__kernel_validate(const pl_spec *spec, const pl_stage *st, pl_error *err)
{
    const pl_kernel_opts *o = st->priv;
    if (o->user) return pl_ukern_validate(spec, st, o->user, err);
    const char *op = pl_op_name(o->op);
    char s1[96], s2[96];
    if (o->op != PL_OP_BUSY &&
        (st->n_reads != pl__op_reads[o->op] || st->n_writes != pl__op_writes[o->op])) {
        static const char *const usage[PL_OP_COUNT] = {
            "writes: [y]",
            "reads: [x], writes: [y]",
            "reads: [x, y], writes: [z]",
            "reads: [x, y], writes: [z]",
            "reads: [x], writes: [s]",
            "reads: [x], writes: [s]",
            "reads: [x], writes: [y]",
            "reads: [A, B], writes: [C]",
            "",
        };
        return pl_error_at(err, PL_EINPUT, st->pos,
                           "kernel stage '%s': op %s takes %d read(s) and %d write(s), got %d and "
                           "%d; write it as %s",
                           st->name, op, pl__op_reads[o->op], pl__op_writes[o->op], st->n_reads,
                           st->n_writes, usage[o->op]);
    }
    switch (o->op) {
    case PL_OP_FILL:
        return PL_OK;
    case PL_OP_SCALE:
    case PL_OP_SAXPY:
    case PL_OP_ADD: {
        const pl_buffer *z = pl_kind_wbuf(spec, st, 0);
        for (int i = 0; i < st->n_reads; i++) {
            const pl_buffer *x = pl_kind_rbuf(spec, st, i);
            if (x->dtype != z->dtype || !pl_kind_same_shape(x, z))
                return pl_error_at(err, PL_EINPUT, st->reads[i].pos,
                                   "kernel stage '%s': op %s is elementwise: '%s' is %s %s but "
                                   "'%s' is %s %s; give all operands one dtype and shape",
                                   st->name, op, x->name, pl_dtype_name(x->dtype),
                                   pl_kind_shape(x, s1, sizeof s1), z->name,
                                   pl_dtype_name(z->dtype), pl_kind_shape(z, s2, sizeof s2));
        }
        return PL_OK;
    }
    case PL_OP_SUM:
    case PL_OP_CHECKSUM: {
        const pl_buffer *s = pl_kind_wbuf(spec, st, 0);
        bool ok_type =
            o->op == PL_OP_SUM ? (s->dtype == PL_F32 || s->dtype == PL_F64) : s->dtype == PL_I64;
        if (!ok_type || s->count != 1 || s->rank != 1)
            return pl_error_at(err, PL_EINPUT, pl__wpos(st, 0),
                               "kernel stage '%s': op %s writes one value: '%s' must be %s with "
                               "shape [1], not %s %s",
                               st->name, op, s->name, o->op == PL_OP_SUM ? "f32 or f64" : "i64",
                               pl_dtype_name(s->dtype), pl_kind_shape(s, s1, sizeof s1));
        return PL_OK;
    }
    case PL_OP_ARGMAX: {
        const pl_buffer *x = pl_kind_rbuf(spec, st, 0), *y = pl_kind_wbuf(spec, st, 0);
        bool ok = y->dtype == PL_I32;
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
                               "kernel stage '%s': argmax of '%s' %s gives one index per row: "
                               "'%s' must be i32 %s, not %s %s",
                               st->name, x->name, pl_kind_shape(x, s1, sizeof s1), y->name,
                               pl_kind_shape(&tmp, want, sizeof want), pl_dtype_name(y->dtype),
                               pl_kind_shape(y, s2, sizeof s2));
        }
        if (x->shape[x->rank - 1] > INT32_MAX)
            return pl_error_at(err, PL_EINPUT, st->reads[0].pos,
                               "kernel stage '%s': argmax rows of '%s' are longer than an i32 "
                               "index can count",
                               st->name, x->name);
        return PL_OK;
    }
    case PL_OP_GEMM: {
        const pl_buffer *a = pl_kind_rbuf(spec, st, 0), *b = pl_kind_rbuf(spec, st, 1);
        const pl_buffer *c = pl_kind_wbuf(spec, st, 0);
        if (c->dtype != PL_F32 && c->dtype != PL_F16 && c->dtype != PL_BF16)
            return pl_error_at(err, PL_EINPUT, pl__wpos(st, 0),
                               "kernel stage '%s': gemm works on f32, f16 or bf16; '%s' is %s",
                               st->name, c->name, pl_dtype_name(c->dtype));
        if (a->dtype != c->dtype || b->dtype != c->dtype)
            return pl_error_at(err, PL_EINPUT, st->pos,
                               "kernel stage '%s': gemm operands must share one dtype: A '%s' "
                               "is %s, B '%s' is %s, C '%s' is %s",
                               st->name, a->name, pl_dtype_name(a->dtype), b->name,
                               pl_dtype_name(b->dtype), c->name, pl_dtype_name(c->dtype));
        char s3[96];
        if (a->rank != 2 || b->rank != 2 || c->rank != 2 || a->shape[1] != b->shape[0] ||
            c->shape[0] != a->shape[0] || c->shape[1] != b->shape[1])
            return pl_error_at(err, PL_EINPUT, st->pos,
                               "kernel stage '%s': gemm needs A [m, k], B [k, n] and C [m, n]; "
                               "got A '%s' %s, B '%s' %s, C '%s' %s",
                               st->name, a->name, pl_kind_shape(a, s1, sizeof s1), b->name,
                               pl_kind_shape(b, s2, sizeof s2), c->name,
                               pl_kind_shape(c, s3, sizeof s3));
        if (o->beta != 0 && !c->persistent) {
            const pl_opt *bo = pl_stage_opt(st, "beta");
            return pl_error_at(err, PL_EINPUT, bo ? bo->val_pos : st->pos,
                               "kernel stage '%s': beta %g reads C's previous contents, but '%s' "
                               "is per-batch (one copy per slot, so the result would depend on "
                               "depth); make '%s' persistent, or set beta: 0",
                               st->name, o->beta, c->name, c->name);
        }
        return PL_OK;
    }
    case PL_OP_BUSY:
    case PL_OP_COUNT:
        return PL_OK;
    }
    return PL_OK;
}

static pl_status pl__kernel_run(pl_stage_ctx *ctx, pl_error *err)
{
    const pl_kernel_opts *o = ctx->stage->priv;
    if (o->user) return pl_ukern_run_host(ctx, o->user, err);
    return pl_op_run_host(ctx->spec, ctx->stage, ctx->bufs, ctx->env->pool, ctx->env->workers, err);
}

/* Built-in ops keep no per-run state; user kernels keep their module or Lua states. */
static pl_status pl__kernel_open(const pl_run_env *env, const pl_stage *st, void **state,
                                 pl_error *err)
{
    const pl_kernel_opts *o = st->priv;
    *state = NULL;
    return o && o->user ? pl_ukern_open(env, st, o->user, state, err) : PL_OK;
}

static pl_status pl__kernel_close(const pl_run_env *env, const pl_stage *st, void *state,
                                  int64_t completed, bool failed, pl_error *err)
{
    (void)completed;
    (void)failed;
    (void)err;
    const pl_kernel_opts *o = st->priv;
    return o && o->user ? pl_ukern_close(env, st, o->user, state) : PL_OK;
}

static void pl__kernel_describe(const pl_spec *spec, const pl_stage *st, char *buf, size_t cap)
{
    (void)spec;
    const pl_kernel_opts *o = st->priv;
    if (o->user) {
        pl_ukern_describe(o->user, buf, cap);
        return;
    }
    switch (o->op) {
    case PL_OP_FILL:
        snprintf(buf, cap, "fill value=%g", o->value);
        break;
    case PL_OP_SCALE:
    case PL_OP_SAXPY:
        snprintf(buf, cap, "%s alpha=%g", pl_op_name(o->op), o->alpha);
        break;
    case PL_OP_GEMM:
        snprintf(buf, cap, "gemm alpha=%g beta=%g", o->alpha, o->beta);
        break;
    case PL_OP_BUSY:
        snprintf(buf, cap, "busy %g us", o->duration_us);
        break;
    default:
        snprintf(buf, cap, "%s", pl_op_name(o->op));
        break;
    }
}

static void pl__kernel_notes(const pl_stage *st, bool verbose, char *buf, size_t cap)
{
    const pl_kernel_opts *o = st->priv;
    if (o && o->user)
        pl_ukern_notes(o->user, verbose, buf, cap);
    else if (cap)
        buf[0] = '\0';
}

#ifdef PL_WITH_CUDA
static pl_status pl__kernel_record(const pl_dev_ctx *ctx, pl_error *err)
{
    const pl_kernel_opts *o = ctx->stage->priv;
    if (o->user) return pl_ukern_record(ctx, o->user, err);
    return pl_gpu_op_record(ctx->env->gpu, ctx->spec, ctx->stage, ctx->dev_bufs, ctx->stream,
                            ctx->batch, err);
}
#define PL__KERNEL_RECORD pl__kernel_record
#else
#define PL__KERNEL_RECORD NULL
#endif

/* Reproducibility per op (docs/bundles.md): elementwise ops, checksum (integer atomics, any order
 * gives the same sum) and argmax (first index on ties) give the host's bits on the GPU. sum
 * reduces in another order on the GPU than the reference's index order, gemm through cuBLAS: both
 * are deterministic on one GPU (fixed tree, pinned workspace and algorithm) and within the GPU
 * tests' tolerances across executors. An op not listed here is treated like gemm. */
static pl_repro pl__kernel_repro(const pl_spec *spec, const pl_stage *st, double *tol)
{
    const pl_kernel_opts *o = st->priv;
    pl_dtype out = st->n_writes > 0 && st->writes[0].index >= 0
                       ? spec->buffers[st->writes[0].index].dtype
                       : PL_F32;
    if (o && o->user) { /* the user's own code: exact on one GPU, not across executors */
        *tol = out == PL_F32 || out == PL_F64 ? 1e-5 : 1e-2;
        return PL_REPRO_SAME_GPU;
    }
    switch (o ? o->op : PL_OP_COUNT) {
    case PL_OP_FILL:
    case PL_OP_SCALE:
    case PL_OP_SAXPY:
    case PL_OP_ADD:
    case PL_OP_CHECKSUM:
    case PL_OP_ARGMAX:
    case PL_OP_BUSY:
        return PL_REPRO_EXACT;
    case PL_OP_SUM:
        *tol = out == PL_F64 ? 1e-12 : 1e-6;
        return PL_REPRO_SAME_GPU;
    default:
        *tol = out == PL_F32 || out == PL_F64 ? 1e-5 : 1e-2;
        return PL_REPRO_SAME_GPU;
    }
}

const pl_kind pl_kind_kernel = {
    .name = "kernel",
    .engine = PL_ENGINE_COMPUTE,
    .keys = pl__kernel_keys,
    .doc = "a built-in op on device buffers (fill, scale, saxpy, add, sum, checksum, argmax, "
           "gemm, busy), or a user kernel: CUDA source compiled with NVRTC, or a PTX/cubin module",
    .bind = pl__kernel_bind,
    .validate = pl__kernel_validate,
    .open = pl__kernel_open,
    .close = pl__kernel_close,
    .run_host = pl__kernel_run,
    .record = PL__KERNEL_RECORD,
    .describe = pl__kernel_describe,
    .notes = pl__kernel_notes,
    .repro = pl__kernel_repro,
};
