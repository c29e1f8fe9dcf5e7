/* ops_ref: C reference implementations of the kernel ops (semantics in pl_ops.h), one function
 * pl__ref_NAME per row of the op table. Plain loops in a fixed order, so results are deterministic
 * and the GPU tests can compare against them; gemm goes through BLAS (the tests keep a
 * double-precision reference for it). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pl_blas.h"
#include "pl_half.h"
#include "pl_hash.h"
#include "pl_intr.h"
#include "pl_kind_util.h"
#include "pl_ops.h"
#include "pl_pool.h"

/* What an op's reference gets: the stage, its options and this batch's host memory. */
typedef struct pl__ref_call {
    const pl_spec *spec;
    const pl_stage *st;
    const pl_kernel_opts *o;
    void *const *bufs;
    pl_pool *pool;
    int parallel;
} pl__ref_call;

/* Operand i (reads then writes) and its memory. */
static const pl_buffer *pl__arg(const pl__ref_call *c, int i)
{
    return i < c->st->n_reads ? pl_kind_rbuf(c->spec, c->st, i)
                              : pl_kind_wbuf(c->spec, c->st, i - c->st->n_reads);
}

static void *pl__mem(const pl__ref_call *c, int i)
{
    return c->bufs[pl__arg(c, i)->index];
}

/* f32-family element access (f32, f16, bf16). */
static inline float pl__ldf(const void *p, pl_dtype t, int64_t i)
{
    switch (t) {
    case PL_F16:
        return pl_f16_to_f32(((const uint16_t *)p)[i]);
    case PL_BF16:
        return pl_bf16_to_f32(((const uint16_t *)p)[i]);
    default:
        return ((const float *)p)[i];
    }
}

static inline void pl__stf(void *p, pl_dtype t, int64_t i, float v)
{
    switch (t) {
    case PL_F16:
        ((uint16_t *)p)[i] = pl_f32_to_f16(v);
        break;
    case PL_BF16:
        ((uint16_t *)p)[i] = pl_f32_to_bf16(v);
        break;
    default:
        ((float *)p)[i] = v;
        break;
    }
}

/* Any dtype as double (for sum, argmax). */
static inline double pl__ldd(const void *p, pl_dtype t, int64_t i)
{
    switch (t) {
    case PL_U8:
        return ((const uint8_t *)p)[i];
    case PL_I32:
        return ((const int32_t *)p)[i];
    case PL_I64:
        return (double)((const int64_t *)p)[i];
    case PL_F64:
        return ((const double *)p)[i];
    default:
        return pl__ldf(p, t, i);
    }
}

static inline int64_t pl__ldi(const void *p, pl_dtype t, int64_t i)
{
    switch (t) {
    case PL_U8:
        return ((const uint8_t *)p)[i];
    case PL_I32:
        return ((const int32_t *)p)[i];
    default:
        return ((const int64_t *)p)[i];
    }
}

/* Round to nearest even and saturate into an integer dtype. */
static inline void pl__sti_sat(void *p, pl_dtype t, int64_t i, double v)
{
    double lo = t == PL_U8 ? 0 : t == PL_I32 ? -2147483648.0 : -9223372036854775808.0;
    double hi = t == PL_U8 ? 255 : t == PL_I32 ? 2147483647.0 : 9223372036854775807.0;
    v = nearbyint(v);
    if (isnan(v)) v = 0;
    int64_t r;
    if (v <= lo)
        r = (int64_t)lo;
    else if (v >= hi)
        r = t == PL_I64 ? INT64_MAX : (int64_t)hi;
    else
        r = (int64_t)v;
    switch (t) {
    case PL_U8:
        ((uint8_t *)p)[i] = (uint8_t)r;
        break;
    case PL_I32:
        ((int32_t *)p)[i] = (int32_t)r;
        break;
    default:
        ((int64_t *)p)[i] = r;
        break;
    }
}

static inline void pl__sti_wrap(void *p, pl_dtype t, int64_t i, uint64_t v)
{
    switch (t) {
    case PL_U8:
        ((uint8_t *)p)[i] = (uint8_t)v;
        break;
    case PL_I32:
        ((int32_t *)p)[i] = (int32_t)(uint32_t)v;
        break;
    default:
        ((int64_t *)p)[i] = (int64_t)v;
        break;
    }
}

static bool pl__is_f32ish(pl_dtype t)
{
    return t == PL_F32 || t == PL_F16 || t == PL_BF16;
}

/* y = f(x, y') elementwise for fill/scale/saxpy/add. */
static void pl__elementwise(pl_op_id op, const pl_kernel_opts *o, pl_dtype t, int64_t n,
                            const void *x, const void *y, void *z)
{
    if (pl__is_f32ish(t)) {
        float a = (float)o->alpha, v = (float)o->value;
        for (int64_t i = 0; i < n; i++) {
            float r;
            switch (op) {
            case PL_OP_FILL:
                r = v;
                break;
            case PL_OP_SCALE:
                r = a * pl__ldf(x, t, i);
                break;
            case PL_OP_SAXPY:
                r = fmaf(a, pl__ldf(x, t, i), pl__ldf(y, t, i));
                break;
            default:
                r = pl__ldf(x, t, i) + pl__ldf(y, t, i);
                break;
            }
            pl__stf(z, t, i, r);
        }
    } else if (t == PL_F64) {
        const double *xd = x, *yd = y;
        double *zd = z;
        for (int64_t i = 0; i < n; i++) {
            switch (op) {
            case PL_OP_FILL:
                zd[i] = o->value;
                break;
            case PL_OP_SCALE:
                zd[i] = o->alpha * xd[i];
                break;
            case PL_OP_SAXPY:
                zd[i] = fma(o->alpha, xd[i], yd[i]);
                break;
            default:
                zd[i] = xd[i] + yd[i];
                break;
            }
        }
    } else {
        for (int64_t i = 0; i < n; i++) {
            switch (op) {
            case PL_OP_FILL:
                pl__sti_sat(z, t, i, o->value);
                break;
            case PL_OP_SCALE:
                pl__sti_sat(z, t, i, o->alpha * (double)pl__ldi(x, t, i));
                break;
            case PL_OP_SAXPY:
                pl__sti_sat(z, t, i,
                            fma(o->alpha, (double)pl__ldi(x, t, i), (double)pl__ldi(y, t, i)));
                break;
            default:
                pl__sti_wrap(z, t, i, (uint64_t)pl__ldi(x, t, i) + (uint64_t)pl__ldi(y, t, i));
                break;
            }
        }
    }
}

static void pl__argmax(const void *x, pl_dtype t, int64_t rows, int64_t cols, int32_t *y)
{
    for (int64_t r = 0; r < rows; r++) {
        int64_t best = 0, base = r * cols;
        if (t == PL_I64 || t == PL_I32 || t == PL_U8) {
            int64_t bv = pl__ldi(x, t, base);
            for (int64_t c = 1; c < cols; c++) {
                int64_t v = pl__ldi(x, t, base + c);
                if (v > bv) bv = v, best = c;
            }
        } else {
            double bv = pl__ldd(x, t, base);
            for (int64_t c = 1; c < cols; c++) {
                double v = pl__ldd(x, t, base + c);
                if (v > bv || (isnan(bv) && !isnan(v))) bv = v, best = c;
            }
        }
        y[r] = (int32_t)best;
    }
}

/* The most work in one block of a host gemm: 2 GFLOP, 40-100 ms of a core through OpenBLAS. */
#define PL__GEMM_TASK_FLOP 2e9

typedef struct pl__gemm_job {
    int64_t m, k, n, rows; /* rows of C per task */
    float alpha, beta;
    const float *a, *b;
    float *c;
} pl__gemm_job;

static void pl__gemm_task(void *arg, int64_t t, int slot)
{
    pl__gemm_job *g = arg;
    if (pl_intr_pending()) return; /* the caller reports the interrupt */
    int64_t i0 = t * g->rows, m = g->m - i0 < g->rows ? g->m - i0 : g->rows;
    pl_blas_sgemm(false, m, g->n, g->k, g->alpha, g->a + i0 * g->k, g->k, g->b, g->n, g->beta,
                  g->c + i0 * g->n, g->n);
}

/* C = alpha * A B + beta * C through BLAS sgemm (f32 accumulation in BLAS's order), split by rows
 * of C over the pool. f16/bf16 operands are widened to f32 first and C rounded back once. */
static pl_status pl__gemm(const pl_kernel_opts *o, pl_dtype t, int64_t m, int64_t k, int64_t n,
                          const void *A, const void *B, void *C, pl_pool *pool, int parallel,
                          pl_error *err)
{
    PL_CHECK(pl_blas_load(err));
    float *af = NULL, *bf = NULL, *cf = NULL;
    if (t != PL_F32) {
        af = malloc((size_t)(m * k) * sizeof *af);
        bf = malloc((size_t)(k * n) * sizeof *bf);
        cf = malloc((size_t)(m * n) * sizeof *cf);
        if (!af || !bf || !cf) {
            free(af);
            free(bf);
            free(cf);
            return pl_error_set(err, PL_ENOMEM, "error: out of memory in gemm");
        }
        for (int64_t i = 0; i < m * k; i++)
            af[i] = pl__ldf(A, t, i);
        for (int64_t i = 0; i < k * n; i++)
            bf[i] = pl__ldf(B, t, i);
        for (int64_t i = 0; i < m * n; i++)
            cf[i] = o->beta != 0 ? pl__ldf(C, t, i) : 0.0f;
    }
    pl__gemm_job g = {.m = m,
                      .k = k,
                      .n = n,
                      .alpha = (float)o->alpha,
                      .beta = (float)o->beta,
                      .a = af ? af : A,
                      .b = bf ? bf : B,
                      .c = cf ? cf : C};
    /* Blocks of at least 1 MFLOP each, so small products stay on one thread; and of at most
     * PL__GEMM_TASK_FLOP, a multiple of `parallel` of them, so an interrupt is seen between
     * blocks within about 100 ms (blocks of 64 rows or more, where BLAS is still efficient). */
    double flop = 2.0 * (double)m * (double)n * (double)k;
    int64_t tasks = parallel > 1 ? (int64_t)(flop / 1e6) : 1;
    if (tasks > parallel) tasks = parallel;
    if (tasks < 1) tasks = 1;
    int64_t by_size = (int64_t)(flop / PL__GEMM_TASK_FLOP) + 1, most = (m + 63) / 64;
    if (by_size > tasks) tasks = (by_size + tasks - 1) / tasks * tasks;
    if (most < parallel) most = parallel;
    if (tasks > most) tasks = most;
    if (tasks > m) tasks = m;
    if (tasks < 1) tasks = 1;
    g.rows = (m + tasks - 1) / tasks;
    tasks = (m + g.rows - 1) / g.rows;
    pl_pool_run(pool, tasks, parallel, pl__gemm_task, &g);
    if (pl_intr_pending()) {
        free(af);
        free(bf);
        free(cf);
        return pl_intr_error(err, "in a host gemm");
    }
    if (cf)
        for (int64_t i = 0; i < m * n; i++)
            pl__stf(C, t, i, cf[i]);
    free(af);
    free(bf);
    free(cf);
    return PL_OK;
}

/* Sleeps `us`, in slices of at most 50 ms with an interrupt (pl_intr) seen between them: false
 * when one ended the sleep early (a sleep of one slice always completes, as a batch in flight). */
static bool pl__sleep_us(double us)
{
    for (bool first = true; us > 0; first = false) {
        if (!first && pl_intr_pending()) return false;
        double part = us < 50000 ? us : 50000;
        us -= part;
        struct timespec ts;
        ts.tv_sec = (time_t)(part / 1e6);
        ts.tv_nsec = (long)((part - (double)ts.tv_sec * 1e6) * 1e3);
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
    }
    return true;
}

/* fill, scale, saxpy, add: the last operand z, the reads before it. */
static pl_status pl__elementwise_call(const pl__ref_call *c, pl_error *err)
{
    (void)err;
    int nr = c->st->n_reads;
    const pl_buffer *z = pl__arg(c, nr);
    pl__elementwise(c->o->op, c->o, z->dtype, z->count, nr > 0 ? pl__mem(c, 0) : NULL,
                    nr > 1 ? pl__mem(c, 1) : NULL, pl__mem(c, nr));
    return PL_OK;
}

static pl_status pl__ref_fill(const pl__ref_call *c, pl_error *err)
{
    return pl__elementwise_call(c, err);
}

static pl_status pl__ref_scale(const pl__ref_call *c, pl_error *err)
{
    return pl__elementwise_call(c, err);
}

static pl_status pl__ref_saxpy(const pl__ref_call *c, pl_error *err)
{
    return pl__elementwise_call(c, err);
}

static pl_status pl__ref_add(const pl__ref_call *c, pl_error *err)
{
    return pl__elementwise_call(c, err);
}

static pl_status pl__ref_sum(const pl__ref_call *c, pl_error *err)
{
    (void)err;
    const pl_buffer *x = pl__arg(c, 0), *s = pl__arg(c, 1);
    const void *xp = pl__mem(c, 0);
    double acc = 0;
    for (int64_t i = 0; i < x->count; i++)
        acc += pl__ldd(xp, x->dtype, i);
    if (s->dtype == PL_F64)
        ((double *)pl__mem(c, 1))[0] = acc;
    else
        ((float *)pl__mem(c, 1))[0] = (float)acc;
    return PL_OK;
}

static pl_status pl__ref_checksum(const pl__ref_call *c, pl_error *err)
{
    (void)err;
    const pl_buffer *x = pl__arg(c, 0);
    ((int64_t *)pl__mem(c, 1))[0] = (int64_t)pl_hash(pl__mem(c, 0), (size_t)x->bytes);
    return PL_OK;
}

static pl_status pl__ref_argmax(const pl__ref_call *c, pl_error *err)
{
    (void)err;
    const pl_buffer *x = pl__arg(c, 0);
    int64_t cols = x->shape[x->rank - 1];
    pl__argmax(pl__mem(c, 0), x->dtype, x->count / cols, cols, pl__mem(c, 1));
    return PL_OK;
}

static pl_status pl__ref_gemm(const pl__ref_call *c, pl_error *err)
{
    const pl_buffer *a = pl__arg(c, 0), *b = pl__arg(c, 1), *cc = pl__arg(c, 2);
    return pl__gemm(c->o, cc->dtype, a->shape[0], a->shape[1], b->shape[1], pl__mem(c, 0),
                    pl__mem(c, 1), pl__mem(c, 2), c->pool, c->parallel, err);
}

static pl_status pl__ref_busy(const pl__ref_call *c, pl_error *err)
{
    if (!pl__sleep_us(c->o->duration_us)) return pl_intr_error(err, "in a busy op's sleep");
    return PL_OK;
}

/* The references by op, from the op table: an op without its pl__ref_NAME does not compile. */
static pl_status (*const pl__refs[PL_OP_COUNT])(const pl__ref_call *c, pl_error *err) = {
#define PL__OP_REF(id, name, r, w, rule, dt, opts, repro, doc) pl__ref_##name,
    PL_OPS_MAP(PL__OP_REF)
#undef PL__OP_REF
};

pl_status pl_op_run_ref(const pl_spec *spec, const pl_stage *st, void *const *bufs, pl_error *err)
{
    return pl_op_run_host(spec, st, bufs, NULL, 1, err);
}

pl_status pl_op_run_host(const pl_spec *spec, const pl_stage *st, void *const *bufs, pl_pool *pool,
                         int parallel, pl_error *err)
{
    const pl_kernel_opts *o = st->priv;
    if ((unsigned)o->op >= PL_OP_COUNT)
        return pl_error_set(err, PL_ERUNTIME, "error: unknown op %d", (int)o->op);
    pl__ref_call c = {spec, st, o, bufs, pool, parallel};
    return pl__refs[o->op](&c, err);
}
