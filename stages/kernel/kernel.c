/* kernel: a built-in op (the op table, stages/kernel/pl_ops.h) on device buffers; operands are
 * reads then writes. On the host executor each op runs its C reference (ops_ref.c); `busy` sleeps
 * for duration_us. Or a user kernel (source:, code: or module:), handled by
 * stages/kernel/kernel_user.c. Nothing here names an op: the key table's `op:` values, the checks,
 * the description, the reproducibility and the documented values come from the op table. */
#include "pl_blas.h"
#include "pl_kind_util.h"
#include "pl_ops.h"
#include "pl_ukern.h"
#ifdef PL_WITH_CUDA
#include "kernel_gpu.h"
#endif

/* "|fill|scale|...": the `op:` values follow the bar. */
static const char pl__op_bars[] = ""
#define PL__OP_BAR(id, name, r, w, rule, dt, opts, repro, doc) "|" #name
    PL_OPS_MAP(PL__OP_BAR)
#undef PL__OP_BAR
    ;

/* The ops as the documented values of `op`. */
static const pl_key_value pl__op_docs[] = {
#define PL__OP_DOC(id, name, r, w, rule, dt, opts, repro, doc) {#name, r, w, doc},
    PL_OPS_MAP(PL__OP_DOC)
#undef PL__OP_DOC
        {NULL, NULL, NULL, NULL},
};

/* The docs of value, alpha, beta and duration_us start with the ops that read them (a test
 * compares them with the table's opts column). */
static const pl_key pl__kernel_keys[] = {
    {"op", PL_KEY_ENUM, pl__op_bars + 1, NULL,
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

/* "fill, scale, ...": the ops, for messages. */
static const char *pl__op_list(char *buf, size_t cap)
{
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i < PL_OP_COUNT && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%s", i ? ", " : "", pl_ops[i].name);
    return buf;
}

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
    if (!op) {
        char ops[256];
        return pl_error_at(err, PL_EINPUT, st->pos,
                           "kernel stage '%s' needs 'op:' (one of %s), or a user kernel: "
                           "'source:', 'code:' or 'module:'",
                           st->name, pl__op_list(ops, sizeof ops));
    }
    int idx;
    PL_CHECK(pl_opt_get_enum(st, "op", 0, &idx, err));
    o->op = (pl_op_id)idx;
    PL_CHECK(pl_opt_get_num(st, "value", 0, &o->value, err));
    PL_CHECK(pl_opt_get_num(st, "alpha", 1, &o->alpha, err));
    PL_CHECK(pl_opt_get_num(st, "beta", 0, &o->beta, err));
    PL_CHECK(pl_opt_get_num(st, "duration_us", 0, &o->duration_us, err));
    st->priv = o;
    return PL_OK;
}

static pl_status pl__kernel_validate(const pl_spec *spec, const pl_stage *st, pl_error *err)
{
    const pl_kernel_opts *o = st->priv;
    if (o->user) return pl_ukern_validate(spec, st, o->user, err);
    return pl_op_check(spec, st, err);
}

static pl_status pl__kernel_run(pl_stage_ctx *ctx, pl_error *err)
{
    const pl_kernel_opts *o = ctx->stage->priv;
    if (o->user) return pl_ukern_run_host(ctx, o->user, err);
    return pl_op_run_host(ctx->spec, ctx->stage, ctx->bufs, ctx->env->pool, ctx->env->workers, err);
}

/* Built-in ops keep no per-run state; user kernels keep their module or Lua states. The host
 * gemm loads BLAS here, on the thread that opens the run, not in its first batch on a worker:
 * loading may set OPENBLAS_CORETYPE (pl_blas.h), and setenv must not race the workers. */
static pl_status pl__kernel_open(const pl_run_env *env, const pl_stage *st, void **state,
                                 pl_error *err)
{
    const pl_kernel_opts *o = st->priv;
    *state = NULL;
    if (o && !o->user && o->op == PL_OP_GEMM && !env->on_gpu) PL_CHECK(pl_blas_load(err));
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
    pl_op_describe(o, buf, cap);
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
 * tests' tolerances across executors. The op table gives each op's class. */
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
    switch (o ? pl_ops[o->op].repro : PL_OP_BLAS) {
    case PL_OP_EXACT:
        return PL_REPRO_EXACT;
    case PL_OP_REDUCE:
        *tol = out == PL_F64 ? 1e-12 : 1e-6;
        return PL_REPRO_SAME_GPU;
    case PL_OP_BLAS:
        break;
    }
    *tol = out == PL_F32 || out == PL_F64 ? 1e-5 : 1e-2;
    return PL_REPRO_SAME_GPU;
}

/* pl_kind.host_flops: a gemm's 2 m k n through BLAS; the elementwise ops and reductions are a few
 * operations an element, too few to count; a user kernel does not run on the host. */
static double pl__kernel_host_flops(const pl_spec *spec, const pl_stage *st, bool *blas)
{
    const pl_kernel_opts *o = st->priv;
    *blas = true;
    if (!o || o->user || o->op != PL_OP_GEMM) return 0;
    const pl_buffer *a = pl_kind_rbuf(spec, st, 0), *b = pl_kind_rbuf(spec, st, 1);
    return 2.0 * (double)a->shape[0] * (double)a->shape[1] * (double)b->shape[1];
}

const pl_kind pl_kind_kernel = {
    .name = "kernel",
    .engine = PL_ENGINE_COMPUTE,
    .keys = pl__kernel_keys,
    .doc = "a built-in op on device buffers (op:), or a user kernel: CUDA source compiled with "
           "NVRTC, or a PTX/cubin module",
    .bind = pl__kernel_bind,
    .validate = pl__kernel_validate,
    .open = pl__kernel_open,
    .close = pl__kernel_close,
    .run_host = pl__kernel_run,
    .record = PL__KERNEL_RECORD,
    .describe = pl__kernel_describe,
    .notes = pl__kernel_notes,
    .repro = pl__kernel_repro,
    .host_flops = pl__kernel_host_flops,
    .values_key = "op",
    .values = pl__op_docs,
};
