/* test_ops_ref: the kernel ops' C references against hand-computed values, the f16/bf16
 * conversions (round to nearest even, subnormals, overflow, NaN), and the kernel kind's tables
 * against the op table. Specs are built with the builder API; priv is set directly, so this does
 * not depend on the checker. */
#include <math.h>
#include <stdint.h>

#include "pl_half.h"
#include "pl_hash.h"
#include "pl_ops.h"
#include "pl_pool.h"
#include "pl_stage.h"
#include "pl_test.h"

static pl_spec *spec;

static int buf(const char *name, pl_dtype t, int rank, const int64_t *shape)
{
    pl_pos p = {0};
    pl_buffer *b = pl_spec_add_buffer(spec, name, p);
    b->dtype = t;
    b->rank = rank;
    b->count = 1;
    for (int i = 0; i < rank; i++) {
        b->shape[i] = shape[i];
        b->count *= shape[i];
    }
    b->bytes = (uint64_t)b->count * pl_dtype_size(t);
    b->index = spec->n_buffers - 1;
    return b->index;
}

/* A kernel stage over buffers named in r/w (NULL-terminated), resolved by hand. */
static pl_stage *kstage(pl_op_id op, const char *const *r, const char *const *w)
{
    pl_pos p = {0};
    char name[32];
    snprintf(name, sizeof name, "k%d", spec->n_stages);
    pl_stage *st = pl_spec_add_stage(spec, name, p);
    st->kind = pl_kind_find("kernel");
    for (int i = 0; r && r[i]; i++)
        pl_stage_add_read(spec, st, r[i], p)->index = pl_spec_find_buffer(spec, r[i]);
    for (int i = 0; w && w[i]; i++)
        pl_stage_add_write(spec, st, w[i], p)->index = pl_spec_find_buffer(spec, w[i]);
    pl_kernel_opts *o = pl_spec_alloc(spec, sizeof *o);
    o->op = op;
    o->alpha = 1;
    st->priv = o;
    return st;
}

static void test_half(void)
{
    CHECK(pl_f32_to_f16(1.0f) == 0x3c00);
    CHECK(pl_f32_to_f16(-2.0f) == 0xc000);
    CHECK(pl_f32_to_f16(65504.0f) == 0x7bff);
    CHECK(pl_f32_to_f16(65520.0f) == 0x7c00); /* rounds to infinity */
    CHECK(pl_f32_to_f16(65519.0f) == 0x7bff);
    CHECK(pl_f32_to_f16(0x1p-24f) == 0x0001);          /* smallest subnormal */
    CHECK(pl_f32_to_f16(0x1p-25f) == 0x0000);          /* tie to even: 0 */
    CHECK(pl_f32_to_f16(0x1.8p-24f) == 0x0002);        /* 1.5 steps: tie to even: 2 */
    CHECK(pl_f32_to_f16(0x1p-14f) == 0x0400);          /* smallest normal */
    CHECK(pl_f32_to_f16(1.0f + 0x1p-11f) == 0x3c00);   /* tie, even mantissa stays */
    CHECK(pl_f32_to_f16(1.0f + 0x1.8p-10f) == 0x3c02); /* 1.5 ulp: tie to even (up) */
    CHECK((pl_f32_to_f16(NAN) & 0x7e00) == 0x7e00);
    CHECK(pl_f32_to_f16(INFINITY) == 0x7c00);
    CHECK(pl_f16_to_f32(0x3c00) == 1.0f);
    CHECK(pl_f16_to_f32(0x0001) == 0x1p-24f);
    CHECK(pl_f16_to_f32(0x03ff) == 0x1.ff8p-15f);
    CHECK(pl_f16_to_f32(0xfbff) == -65504.0f);
    CHECK(isinf(pl_f16_to_f32(0x7c00)));
    CHECK(isnan(pl_f16_to_f32(0x7e00)));
    /* Every f16 survives f16 -> f32 -> f16. */
    int bad = 0;
    for (uint32_t h = 0; h < 0x10000; h++) {
        uint16_t back = pl_f32_to_f16(pl_f16_to_f32((uint16_t)h));
        bool nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
        if (!nan && back != h) bad++;
    }
    CHECK_EQ_INT(bad, 0);
    CHECK(pl_f32_to_bf16(1.0f) == 0x3f80);
    CHECK(pl_f32_to_bf16(1.0f + 0x1p-8f) == 0x3f80);   /* tie: even stays */
    CHECK(pl_f32_to_bf16(1.0f + 0x1.8p-7f) == 0x3f82); /* 1.5 ulp: tie to even (up) */
    CHECK(pl_f32_to_bf16(1.0f + 0x1.2p-8f) == 0x3f81); /* above the tie: up */
    CHECK(pl_bf16_to_f32(0xc040) == -3.0f);
    CHECK((pl_f32_to_bf16(NAN) & 0x7fc0) == 0x7fc0);
}

static void test_ops(void)
{
    pl_spec_new(NULL, &spec, NULL);
    int64_t s4[] = {4}, s1[] = {1}, s23[] = {2, 3}, s2[] = {2}, s32[] = {3, 2}, s22[] = {2, 2};
    buf("x", PL_F32, 1, s4);
    buf("y", PL_F32, 1, s4);
    buf("z", PL_F32, 1, s4);
    buf("s", PL_F64, 1, s1);
    buf("c", PL_I64, 1, s1);
    buf("m", PL_F32, 2, s23);
    buf("am", PL_I32, 1, s2);
    buf("A", PL_F32, 2, s23);
    buf("B", PL_F32, 2, s32);
    buf("C", PL_F32, 2, s22);
    buf("xi", PL_I32, 1, s4);
    buf("yi", PL_I32, 1, s4);
    buf("zi", PL_I32, 1, s4);
    buf("xh", PL_F16, 1, s4);
    buf("zh", PL_F16, 1, s4);
    float x[4] = {1, -2, 3.5f, 0.25f}, y[4] = {10, 20, 30, 40}, z[4];
    double s = 0;
    int64_t c = 0;
    float m[6] = {1, 5, 5, 7, -1, 7}, A[6] = {1, 2, 3, 4, 5, 6}, B[6] = {7, 8, 9, 10, 11, 12}, C[4];
    int32_t am[2], xi[4] = {2147483000, -5, 7, 0}, yi[4] = {1000, 5, -9, 3}, zi[4];
    uint16_t xh[4], zh[4];
    for (int i = 0; i < 4; i++)
        xh[i] = pl_f32_to_f16(x[i]);
    void *bufs[] = {x, y, z, &s, &c, m, am, A, B, C, xi, yi, zi, xh, zh};
    pl_error err;
    const char *X[] = {"x", NULL}, *XY[] = {"x", "y", NULL}, *Z[] = {"z", NULL};

    pl_stage *st = kstage(PL_OP_FILL, NULL, Z);
    ((pl_kernel_opts *)st->priv)->value = 2.5;
    CHECK(pl_op_run_ref(spec, st, bufs, &err) == PL_OK);
    for (int i = 0; i < 4; i++)
        CHECK(z[i] == 2.5f);

    st = kstage(PL_OP_SCALE, X, Z);
    ((pl_kernel_opts *)st->priv)->alpha = -2;
    pl_op_run_ref(spec, st, bufs, &err);
    CHECK(z[0] == -2 && z[1] == 4 && z[2] == -7 && z[3] == -0.5f);

    st = kstage(PL_OP_SAXPY, XY, Z);
    ((pl_kernel_opts *)st->priv)->alpha = 3;
    pl_op_run_ref(spec, st, bufs, &err);
    CHECK(z[0] == 13 && z[1] == 14 && z[2] == 40.5f && z[3] == 40.75f);

    st = kstage(PL_OP_ADD, XY, Z);
    pl_op_run_ref(spec, st, bufs, &err);
    CHECK(z[0] == 11 && z[1] == 18 && z[2] == 33.5f && z[3] == 40.25f);

    const char *S[] = {"s", NULL}, *Cs[] = {"c", NULL};
    st = kstage(PL_OP_SUM, X, S);
    pl_op_run_ref(spec, st, bufs, &err);
    CHECK(s == 2.75);

    st = kstage(PL_OP_CHECKSUM, X, Cs);
    pl_op_run_ref(spec, st, bufs, &err);
    CHECK((uint64_t)c == pl_hash(x, sizeof x));

    const char *M[] = {"m", NULL}, *AM[] = {"am", NULL};
    st = kstage(PL_OP_ARGMAX, M, AM);
    pl_op_run_ref(spec, st, bufs, &err);
    CHECK(am[0] == 1 &&
          am[1] == 0); /* first index on ties: row0 [1,5,5] -> 1; row1 [7,-1,7] -> 0 */

    /* [[1,2,3],[4,5,6]] x [[7,8],[9,10],[11,12]] = [[58,64],[139,154]]. */
    const char *AB[] = {"A", "B", NULL}, *CC[] = {"C", NULL};
    st = kstage(PL_OP_GEMM, AB, CC);
    pl_op_run_ref(spec, st, bufs, &err);
    CHECK(C[0] == 58 && C[1] == 64 && C[2] == 139 && C[3] == 154);
    ((pl_kernel_opts *)st->priv)->alpha = 0.5;
    ((pl_kernel_opts *)st->priv)->beta = 1;
    pl_op_run_ref(spec, st, bufs, &err); /* C = 0.5 AB + C */
    CHECK(C[0] == 87 && C[1] == 96 && C[2] == 208.5f && C[3] == 231);

    /* Integers: add wraps, scale rounds to nearest even and saturates. */
    const char *XIY[] = {"xi", "yi", NULL}, *XI[] = {"xi", NULL}, *ZI[] = {"zi", NULL};
    st = kstage(PL_OP_ADD, XIY, ZI);
    pl_op_run_ref(spec, st, bufs, &err);
    CHECK(zi[0] == (int32_t)(2147483000u + 1000u) && zi[1] == 0 && zi[2] == -2 && zi[3] == 3);
    st = kstage(PL_OP_SCALE, XI, ZI);
    ((pl_kernel_opts *)st->priv)->alpha = 0.5;
    pl_op_run_ref(spec, st, bufs, &err);
    CHECK(zi[0] == 1073741500 && zi[1] == -2 && zi[2] == 4 &&
          zi[3] == 0); /* -2.5 -> -2, 3.5 -> 4 */
    ((pl_kernel_opts *)st->priv)->alpha = 4;
    pl_op_run_ref(spec, st, bufs, &err);
    CHECK(zi[0] == INT32_MAX && zi[1] == -20);

    /* f16: computed in f32, rounded once. */
    const char *XH[] = {"xh", NULL}, *ZH[] = {"zh", NULL};
    st = kstage(PL_OP_SCALE, XH, ZH);
    ((pl_kernel_opts *)st->priv)->alpha = 3;
    pl_op_run_ref(spec, st, bufs, &err);
    CHECK(pl_f16_to_f32(zh[0]) == 3 && pl_f16_to_f32(zh[2]) == 10.5f &&
          pl_f16_to_f32(zh[3]) == 0.75f);

    CHECK_STR(pl_op_name(PL_OP_GEMM), "gemm");
    pl_op_id id;
    CHECK(pl_op_parse("argmax", &id) && id == PL_OP_ARGMAX);
    CHECK(!pl_op_parse("nope", &id));
    pl_spec_free(spec);
}

/* gemm (BLAS, parallel over the pool) against a double-precision reference on the same rounded
 * inputs: ||C - ref|| / ||ref|| within f32 accumulation (f32) or one rounding of C (f16, bf16),
 * with beta reading C, shapes that do not divide into the row blocks, serial and pooled alike. */
static void test_gemm_ref(void)
{
    pl_pool *pool = NULL;
    pl_error err;
    CHECK(pl_pool_new(3, &pool, &err) == PL_OK);
    const int64_t shapes[][3] = {{1, 1, 1}, {37, 53, 29}, {130, 70, 250}, {257, 64, 96}};
    const pl_dtype types[] = {PL_F32, PL_F16, PL_BF16};
    uint64_t r = 99;
    for (int si = 0; si < 4; si++)
        for (int ti = 0; ti < 3; ti++)
            for (int par = 1; par <= 4; par += 3) {
                int64_t m = shapes[si][0], k = shapes[si][1], n = shapes[si][2];
                pl_spec_new(NULL, &spec, NULL);
                int64_t sa[] = {m, k}, sb[] = {k, n}, sc[] = {m, n};
                pl_dtype t = types[ti];
                buf("A", t, 2, sa);
                buf("B", t, 2, sb);
                buf("C", t, 2, sc);
                const char *AB[] = {"A", "B", NULL}, *CC[] = {"C", NULL};
                pl_stage *st = kstage(PL_OP_GEMM, AB, CC);
                ((pl_kernel_opts *)st->priv)->alpha = 0.75;
                ((pl_kernel_opts *)st->priv)->beta = -0.5;
                size_t es = pl_dtype_size(t);
                void *mem[3];
                double *dv[3];
                int64_t cnt[3] = {m * k, k * n, m * n};
                for (int b = 0; b < 3; b++) {
                    mem[b] = malloc((size_t)cnt[b] * es);
                    dv[b] = malloc((size_t)cnt[b] * sizeof(double));
                    for (int64_t i = 0; i < cnt[b]; i++) {
                        r = r * 6364136223846793005ull + 1442695040888963407ull;
                        float v = (float)((double)(r >> 11) * 0x1p-53 * 2 - 1);
                        if (t == PL_F32) {
                            ((float *)mem[b])[i] = v;
                            dv[b][i] = v;
                        } else if (t == PL_F16) {
                            ((uint16_t *)mem[b])[i] = pl_f32_to_f16(v);
                            dv[b][i] = pl_f16_to_f32(((uint16_t *)mem[b])[i]);
                        } else {
                            ((uint16_t *)mem[b])[i] = pl_f32_to_bf16(v);
                            dv[b][i] = pl_bf16_to_f32(((uint16_t *)mem[b])[i]);
                        }
                    }
                }
                CHECK(pl_op_run_host(spec, st, mem, pool, par, &err) == PL_OK);
                double num = 0, den = 0;
                for (int64_t i = 0; i < m; i++)
                    for (int64_t j = 0; j < n; j++) {
                        double acc = 0;
                        for (int64_t p = 0; p < k; p++)
                            acc += dv[0][i * k + p] * dv[1][p * n + j];
                        double want = 0.75 * acc - 0.5 * dv[2][i * n + j];
                        double got = t == PL_F32 ? ((float *)mem[2])[i * n + j]
                                     : t == PL_F16
                                         ? pl_f16_to_f32(((uint16_t *)mem[2])[i * n + j])
                                         : pl_bf16_to_f32(((uint16_t *)mem[2])[i * n + j]);
                        num += (got - want) * (got - want);
                        den += want * want;
                    }
                double rel = sqrt(num / (den > 0 ? den : 1));
                double tol = t == PL_F32 ? 1e-6 : t == PL_F16 ? 1e-3 : 8e-3;
                if (rel > tol)
                    fprintf(stderr, "gemm %lldx%lldx%lld dtype %d par %d: rel error %g > %g\n",
                            (long long)m, (long long)k, (long long)n, ti, par, rel, tol);
                CHECK(rel <= tol);
                for (int b = 0; b < 3; b++) {
                    free(mem[b]);
                    free(dv[b]);
                }
                pl_spec_free(spec);
            }
    pl_pool_free(pool);
}

/* What the kernel kind shows of the ops comes from the op table: `op:` values and documented
 * values in table order, and the docs of the option keys name exactly the ops that read them. */
static void test_op_table(void)
{
    const pl_kind *k = pl_kind_find("kernel");
    const pl_key *op = pl_kind_key(k, "op");
    CHECK(op && op->type == PL_KEY_ENUM);
    char want[512] = "";
    for (int i = 0; i < PL_OP_COUNT; i++) {
        CHECK_EQ_INT(pl_ops[i].id, i);
        CHECK_STR(pl_op_name((pl_op_id)i), pl_ops[i].name);
        CHECK(pl_ops[i].rule != NULL);
        CHECK_STR(k->values[i].name, pl_ops[i].name);
        CHECK_STR(k->values[i].doc, pl_ops[i].doc);
        strcat(want, i ? "|" : "");
        strcat(want, pl_ops[i].name);
    }
    CHECK(k->values[PL_OP_COUNT].name == NULL);
    CHECK_STR(k->values_key, "op");
    if (op) CHECK_STR(op->values, want);
    static const struct {
        const char *key;
        unsigned bit;
    } opts[] = {{"value", PL_OPT_VALUE},
                {"alpha", PL_OPT_ALPHA},
                {"beta", PL_OPT_BETA},
                {"duration_us", PL_OPT_DURATION}};
    for (size_t j = 0; j < sizeof opts / sizeof opts[0]; j++) {
        const pl_key *key = pl_kind_key(k, opts[j].key);
        CHECK(key != NULL);
        if (!key) continue;
        char ops[256] = "";
        for (int i = 0; i < PL_OP_COUNT; i++)
            if (pl_ops[i].opts & opts[j].bit) {
                strcat(ops, *ops ? ", " : "");
                strcat(ops, pl_ops[i].name);
            }
        strcat(ops, ":");
        if (strncmp(key->doc, ops, strlen(ops)) != 0)
            fprintf(stderr, "kernel key '%s': doc '%s' should start with '%s'\n", opts[j].key,
                    key->doc, ops);
        CHECK(strncmp(key->doc, ops, strlen(ops)) == 0);
    }
    char usage[128];
    CHECK_STR(pl_op_usage(&pl_ops[PL_OP_FILL], usage, sizeof usage), "writes: [y]");
    CHECK_STR(pl_op_usage(&pl_ops[PL_OP_GEMM], usage, sizeof usage), "reads: [A, B], writes: [C]");
    CHECK_EQ_INT(pl_op_operands(pl_ops[PL_OP_SAXPY].reads), 2);
    CHECK_EQ_INT(pl_op_operands(pl_ops[PL_OP_FILL].reads), 0);
    CHECK_EQ_INT(pl_op_operands(pl_ops[PL_OP_BUSY].reads), -1);
}

int main(void)
{
    test_op_table();
    test_half();
    test_ops();
    test_gemm_ref();
    PL_TEST_DONE();
}
