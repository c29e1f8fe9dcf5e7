/* test_ops_gpu: every GPU kernel op (pl_gpu_op_record) against the C reference on random inputs:
 * exact where the semantics are exact (fill, scale, saxpy, add on every dtype, checksum, argmax),
 * stated tolerances where the order of a reduction differs (sum, gemm). Outputs are poisoned
 * before each run (two different poisons, direct and captured into a CUDA graph), so an element
 * the GPU never wrote cannot match. Skips (exit 77) without a CUDA device. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>

#include "kernel_gpu.h"
#include "pl_half.h"
#include "pl_hash.h"
#include "pl_ops.h"
#include "pl_stage.h"
#include "pl_spec.h"
#include "../unit/pl_test.h"

/* ---- random inputs (never zeros) ---- */

static uint64_t rng_state = 0x243F6A8885A308D3ull;

static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

/* Uniform in +-[0.25, 4): no zeros, no tiny values. */
static double rnd_val(void)
{
    double u = (double)(rnd() >> 11) / 9007199254740992.0;
    double v = 0.25 + 3.75 * u;
    return (rnd() & 1) ? v : -v;
}

/* ---- element access by dtype, as the reference sees elements ---- */

static double get(pl_dtype t, const void *p, int64_t i)
{
    switch (t) {
    case PL_U8:
        return ((const uint8_t *)p)[i];
    case PL_I32:
        return ((const int32_t *)p)[i];
    case PL_I64:
        return (double)((const int64_t *)p)[i];
    case PL_F16:
        return pl_f16_to_f32(((const uint16_t *)p)[i]);
    case PL_BF16:
        return pl_bf16_to_f32(((const uint16_t *)p)[i]);
    case PL_F32:
        return ((const float *)p)[i];
    case PL_F64:
        return ((const double *)p)[i];
    default:
        return NAN;
    }
}

/* Integers: round to nearest even, saturate (pl_ops.h). */
static double sat(double v, double lo, double hi)
{
    if (v != v) return 0;
    v = nearbyint(v);
    return v < lo ? lo : v > hi ? hi : v;
}

static void put(pl_dtype t, void *p, int64_t i, double v)
{
    switch (t) {
    case PL_U8:
        ((uint8_t *)p)[i] = (uint8_t)sat(v, 0, 255);
        break;
    case PL_I32:
        ((int32_t *)p)[i] = (int32_t)sat(v, INT32_MIN, INT32_MAX);
        break;
    case PL_I64:
        if (v != v)
            ((int64_t *)p)[i] = 0;
        else if (nearbyint(v) >= 9223372036854775808.0)
            ((int64_t *)p)[i] = INT64_MAX;
        else if (nearbyint(v) <= -9223372036854775808.0)
            ((int64_t *)p)[i] = INT64_MIN;
        else
            ((int64_t *)p)[i] = (int64_t)nearbyint(v);
        break;
    case PL_F16:
        ((uint16_t *)p)[i] = pl_f32_to_f16((float)v);
        break;
    case PL_BF16:
        ((uint16_t *)p)[i] = pl_f32_to_bf16((float)v);
        break;
    case PL_F32:
        ((float *)p)[i] = (float)v;
        break;
    case PL_F64:
        ((double *)p)[i] = v;
        break;
    default:
        break;
    }
}

static bool is_int(pl_dtype t)
{
    return t == PL_U8 || t == PL_I32 || t == PL_I64;
}

/* Random contents: floats from rnd_val (rounded to the dtype), integers nonzero and small enough
 * that scale/saxpy stay exact in double. */
static void fill_random(pl_dtype t, void *p, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        if (t == PL_U8)
            put(t, p, i, 1 + (double)(rnd() % 100));
        else if (is_int(t)) {
            double v = (double)((int64_t)(rnd() % 2000001) - 1000000);
            put(t, p, i, v != 0 ? v : 1);
        } else
            put(t, p, i, rnd_val());
    }
}

/* ---- building a one-stage spec by hand (no parser, no check: the test owns every field) ---- */

typedef struct tcase {
    pl_spec *spec;
    pl_stage *st;
    void *host[4]; /* inputs as given; outputs: the GPU's result */
    void *dev[4];
    int nbuf;
} tcase;

static int add_buf(tcase *tc, const char *name, pl_dtype t, int rank, const int64_t *shape)
{
    pl_pos pos = {"test", 1, 1};
    pl_buffer *b = pl_spec_add_buffer(tc->spec, name, pos);
    if (!b) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    b->where = PL_DEVICE;
    b->dtype = t;
    b->rank = rank;
    b->count = 1;
    for (int i = 0; i < rank; i++) {
        b->shape[i] = shape[i];
        b->count *= shape[i];
    }
    b->bytes = (uint64_t)b->count * pl_dtype_size(t);
    tc->host[tc->nbuf] = malloc(b->bytes);
    if (!tc->host[tc->nbuf]) exit(1);
    return tc->nbuf++;
}

static void tcase_new(tcase *tc)
{
    memset(tc, 0, sizeof *tc);
    pl_error err;
    if (pl_spec_new(NULL, &tc->spec, &err) != PL_OK) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
}

/* Adds the kernel stage; reads/writes are buffer indices. */
static void tcase_stage(tcase *tc, pl_kernel_opts o, int nr, const int *reads, int nw,
                        const int *writes)
{
    pl_pos pos = {"test", 2, 3};
    tc->st = pl_spec_add_stage(tc->spec, "k", pos);
    tc->st->kind = pl_kind_find("kernel");
    for (int i = 0; i < nr; i++) {
        pl_ref *r = pl_stage_add_read(tc->spec, tc->st, tc->spec->buffers[reads[i]].name, pos);
        r->index = reads[i];
    }
    for (int i = 0; i < nw; i++) {
        pl_ref *r = pl_stage_add_write(tc->spec, tc->st, tc->spec->buffers[writes[i]].name, pos);
        r->index = writes[i];
    }
    pl_kernel_opts *p = pl_spec_alloc(tc->spec, sizeof *p);
    *p = o;
    tc->st->priv = p;
}

static void tcase_free(tcase *tc)
{
    for (int i = 0; i < tc->nbuf; i++) {
        free(tc->host[i]);
        cudaFree(tc->dev[i]);
    }
    pl_spec_free(tc->spec);
}

static bool is_write(const tcase *tc, int b)
{
    for (int i = 0; i < tc->st->n_writes; i++)
        if (tc->st->writes[i].index == b) return true;
    return false;
}

/* Runs the stage on the GPU: inputs uploaded, outputs poisoned with byte `poison` (unless
 * `keep_outputs`: gemm with beta != 0 reads C), recorded directly or captured into a graph and
 * replayed, results downloaded into got[b] (output buffers). Returns false on a failure. */
static bool run_gpu(pl_gpu_ctx *ctx, tcase *tc, int poison, bool capture, bool keep_outputs,
                    void **got)
{
    pl_error err;
    cudaStream_t s;
    bool ok = true;
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) return false;
    for (int b = 0; b < tc->nbuf; b++) {
        const pl_buffer *buf = &tc->spec->buffers[b];
        if (!tc->dev[b] && cudaMalloc(&tc->dev[b], buf->bytes) != cudaSuccess) return false;
        if (is_write(tc, b) && !keep_outputs)
            cudaMemset(tc->dev[b], poison, buf->bytes);
        else
            cudaMemcpy(tc->dev[b], tc->host[b], buf->bytes, cudaMemcpyHostToDevice);
    }
    /* cudaMemset and cudaMemcpy from pageable memory may still be in flight when they return,
     * on the legacy stream, which a non-blocking stream does not wait for. */
    if (cudaDeviceSynchronize() != cudaSuccess) return false;
    cudaGraph_t g = NULL;
    cudaGraphExec_t ge = NULL;
    if (capture) cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
    pl_status st = pl_gpu_op_record(ctx, tc->spec, tc->st, tc->dev, s, 5, &err);
    if (capture) {
        cudaError_t e = cudaStreamEndCapture(s, &g);
        if (st == PL_OK && e == cudaSuccess) e = cudaGraphInstantiate(&ge, g, 0);
        if (st == PL_OK && e == cudaSuccess) e = cudaGraphLaunch(ge, s);
        if (st == PL_OK && e != cudaSuccess) {
            fprintf(stderr, "capture of op %s failed: %s\n",
                    pl_op_name(((pl_kernel_opts *)tc->st->priv)->op), cudaGetErrorString(e));
            ok = false;
        }
    }
    if (st != PL_OK) {
        fprintf(stderr, "pl_gpu_op_record: %s\n", err.msg);
        ok = false;
    }
    cudaError_t e = cudaStreamSynchronize(s);
    if (e != cudaSuccess) {
        fprintf(stderr, "op ran into: %s\n", cudaGetErrorString(e));
        ok = false;
    }
    for (int b = 0; b < tc->nbuf; b++)
        if (is_write(tc, b))
            cudaMemcpy(got[b], tc->dev[b], tc->spec->buffers[b].bytes, cudaMemcpyDeviceToHost);
    if (ge) cudaGraphExecDestroy(ge);
    if (g) cudaGraphDestroy(g);
    cudaStreamDestroy(s);
    return ok;
}

/* Exact comparison, element by element (bytes). */
static int cmp_exact(const char *what, pl_dtype t, const void *got, const void *want, int64_t n)
{
    size_t es = pl_dtype_size(t);
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < n; i++)
        if (memcmp((const char *)got + i * es, (const char *)want + i * es, es) != 0) {
            if (first < 0) first = i;
            bad++;
        }
    if (bad) {
        fprintf(stderr, "%s: %lld of %lld elements differ; first at %lld: got %.9g want %.9g\n",
                what, (long long)bad, (long long)n, (long long)first, get(t, got, first),
                get(t, want, first));
        return 1;
    }
    return 0;
}

/* The C reference (pl_op_run_ref, stages/kernel/ops_ref.c) on the host copies: inputs as uploaded,
 * outputs into want[b], poisoned first so the reference too must write every element. */
static void run_ref(tcase *tc, void **want)
{
    void *bufs[4];
    for (int b = 0; b < tc->nbuf; b++) {
        bufs[b] = tc->host[b];
        if (is_write(tc, b)) {
            memcpy(want[b], tc->host[b], tc->spec->buffers[b].bytes); /* gemm's beta reads C */
            bufs[b] = want[b];
        }
    }
    pl_error err;
    if (pl_op_run_ref(tc->spec, tc->st, bufs, &err) != PL_OK) {
        fprintf(stderr, "pl_op_run_ref: %s\n", err.msg);
        pl_test_failures++;
    }
}

static const pl_dtype all_dtypes[] = {PL_F32, PL_F64, PL_F16, PL_BF16, PL_I32, PL_I64, PL_U8};
#define N_DTYPES ((int)(sizeof all_dtypes / sizeof all_dtypes[0]))

/* fill, scale, saxpy, add: exact on every dtype, at sizes that exercise the vector path, its
 * tail and the scalar path, direct and captured. */
static void test_elementwise(pl_gpu_ctx *ctx)
{
    static const int64_t sizes[] = {1000003, 5, 4096};
    const pl_op_id ops[] = {PL_OP_FILL, PL_OP_SCALE, PL_OP_SAXPY, PL_OP_ADD};
    int cases = 0;
    for (int oi = 0; oi < 4; oi++)
        for (int di = 0; di < N_DTYPES; di++)
            for (int si = 0; si < 3; si++) {
                pl_dtype t = all_dtypes[di];
                int64_t n = sizes[si];
                tcase tc;
                tcase_new(&tc);
                pl_kernel_opts o = {.op = ops[oi], .value = -3.3, .alpha = 2.5, .beta = 0};
                if (t == PL_U8) o.value = 200.5; /* rounds to 200 (nearest even) */
                int x = add_buf(&tc, "x", t, 1, &n);
                int y = add_buf(&tc, "y", t, 1, &n);
                int z = add_buf(&tc, "z", t, 1, &n);
                fill_random(t, tc.host[x], n);
                fill_random(t, tc.host[y], n);
                int reads[2] = {x, y};
                int nr = ops[oi] == PL_OP_FILL ? 0 : ops[oi] == PL_OP_SCALE ? 1 : 2;
                tcase_stage(&tc, o, nr, reads, 1, &z);
                size_t bytes = tc.spec->buffers[z].bytes;
                void *want = malloc(bytes), *got1 = malloc(bytes), *got2 = malloc(bytes);
                void *wants[4] = {0}, *gots1[4] = {0}, *gots2[4] = {0};
                memset(tc.host[z], 0xff, bytes);
                wants[z] = want;
                run_ref(&tc, wants);
                gots1[z] = got1;
                gots2[z] = got2;
                char what[96];
                snprintf(what, sizeof what, "%s %s n=%lld", pl_op_name(ops[oi]), pl_dtype_name(t),
                         (long long)n);
                CHECK(run_gpu(ctx, &tc, 0xff, false, false, gots1));
                CHECK(cmp_exact(what, t, got1, want, n) == 0);
                CHECK(run_gpu(ctx, &tc, 0x5a, true, false, gots2));
                CHECK(cmp_exact(what, t, got2, want, n) == 0);
                cases++;
                free(want);
                free(got1);
                free(got2);
                tcase_free(&tc);
            }
    /* Unaligned views (an operand that starts 1 element into an allocation) take the scalar
     * path: same results. */
    for (int di = 0; di < 4; di++) {
        pl_dtype t = all_dtypes[di];
        int64_t n = 100001;
        tcase tc;
        tcase_new(&tc);
        pl_kernel_opts o = {.op = PL_OP_SAXPY, .alpha = -1.75};
        int64_t n1 = n + 1;
        int x = add_buf(&tc, "x", t, 1, &n1);
        int y = add_buf(&tc, "y", t, 1, &n1);
        int z = add_buf(&tc, "z", t, 1, &n1);
        fill_random(t, tc.host[x], n1);
        fill_random(t, tc.host[y], n1);
        /* Shrink the declared shapes to n so the op sees n elements at offset 1. */
        for (int b = 0; b < 3; b++) {
            tc.spec->buffers[b].shape[0] = n;
            tc.spec->buffers[b].count = n;
        }
        int reads[2] = {x, y};
        tcase_stage(&tc, o, 2, reads, 1, &z);
        size_t es = pl_dtype_size(t);
        for (int b = 0; b < 3; b++)
            cudaMalloc(&tc.dev[b], (size_t)n1 * es);
        cudaMemcpy(tc.dev[x], tc.host[x], (size_t)n1 * es, cudaMemcpyHostToDevice);
        cudaMemcpy(tc.dev[y], tc.host[y], (size_t)n1 * es, cudaMemcpyHostToDevice);
        cudaMemset(tc.dev[z], 0xff, (size_t)n1 * es);
        void *shifted[3];
        for (int b = 0; b < 3; b++)
            shifted[b] = (char *)tc.dev[b] + es;
        pl_error err;
        void *want = malloc((size_t)n * es), *got = malloc((size_t)n * es);
        void *hshift[3] = {(char *)tc.host[x] + es, (char *)tc.host[y] + es, want};
        CHECK(pl_op_run_ref(tc.spec, tc.st, hshift, &err) == PL_OK);
        CHECK(pl_gpu_op_record(ctx, tc.spec, tc.st, shifted, NULL, 0, &err) == PL_OK);
        CHECK(cudaDeviceSynchronize() == cudaSuccess);
        cudaMemcpy(got, shifted[z], (size_t)n * es, cudaMemcpyDeviceToHost);
        char what[64];
        snprintf(what, sizeof what, "unaligned saxpy %s", pl_dtype_name(t));
        CHECK(cmp_exact(what, t, got, want, n) == 0);
        cases++;
        free(want);
        free(got);
        tcase_free(&tc);
    }
    printf("elementwise: %d cases, exact\n", cases);
}

/* sum: f64 accumulation in a different (tree) order than the host's index order. Tolerance:
 * |gpu - ref| <= 1e-12 * sum |x| (f64 rounding in either order is far below that), plus one f32
 * ulp of the result for an f32 output (both round the f64 sum once). Deterministic: the direct
 * and the captured run give the same bits. */
static void test_sum(pl_gpu_ctx *ctx)
{
    static const pl_dtype ins[] = {PL_F32, PL_F64, PL_F16, PL_BF16, PL_I32, PL_I64, PL_U8};
    static const int64_t sizes[] = {3000017, 7};
    int cases = 0;
    double worst = 0;
    for (int ii = 0; ii < 7; ii++)
        for (int oi = 0; oi < 2; oi++)
            for (int si = 0; si < 2; si++) {
                pl_dtype t = ins[ii], to = oi ? PL_F64 : PL_F32;
                int64_t n = sizes[si], one = 1;
                tcase tc;
                tcase_new(&tc);
                int x = add_buf(&tc, "x", t, 1, &n);
                int s = add_buf(&tc, "s", to, 1, &one);
                fill_random(t, tc.host[x], n);
                pl_kernel_opts o = {.op = PL_OP_SUM};
                tcase_stage(&tc, o, 1, &x, 1, &s);
                double mag = 0;
                for (int64_t i = 0; i < n; i++)
                    mag += fabs(get(t, tc.host[x], i));
                char bref[8];
                void *wants[4] = {0};
                memset(tc.host[s], 0xff, pl_dtype_size(to));
                wants[s] = bref;
                run_ref(&tc, wants);
                double got1 = 0;
                char b1[8], b2[8];
                void *g1[4] = {0}, *g2[4] = {0};
                g1[s] = b1;
                g2[s] = b2;
                CHECK(run_gpu(ctx, &tc, 0xff, false, false, g1));
                CHECK(run_gpu(ctx, &tc, 0x5a, true, false, g2));
                got1 = get(to, b1, 0);
                double want = get(to, bref, 0);
                double tol = 1e-12 * mag + (to == PL_F32 ? fabs(want) * 0x1p-23 : 0);
                if (!(fabs(got1 - want) <= tol))
                    fprintf(stderr, "sum %s->%s n=%lld: got %.17g want %.17g (tol %.3g)\n",
                            pl_dtype_name(t), pl_dtype_name(to), (long long)n, got1, want, tol);
                CHECK(fabs(got1 - want) <= tol);
                CHECK(memcmp(b1, b2, pl_dtype_size(to)) == 0);
                if (mag > 0 && fabs(got1 - want) / mag > worst) worst = fabs(got1 - want) / mag;
                cases++;
                tcase_free(&tc);
            }
    printf("sum: %d cases, worst |gpu - ref| / sum|x| = %.3g\n", cases, worst);
}

/* checksum: bit-identical to pl_hash on the host, for lengths that are and are not multiples of
 * 8 and 16 bytes, and for an unaligned view. */
static void test_checksum(pl_gpu_ctx *ctx)
{
    static const int64_t lens[] = {1, 7, 8, 13, 16, 4097, 1000003, 16777216};
    int cases = 0;
    for (int li = 0; li < 8; li++) {
        int64_t n = lens[li], one = 1;
        tcase tc;
        tcase_new(&tc);
        int x = add_buf(&tc, "x", PL_U8, 1, &n);
        int s = add_buf(&tc, "s", PL_I64, 1, &one);
        for (int64_t i = 0; i < n; i++)
            ((uint8_t *)tc.host[x])[i] = (uint8_t)(rnd() >> 56);
        pl_kernel_opts o = {.op = PL_OP_CHECKSUM};
        tcase_stage(&tc, o, 1, &x, 1, &s);
        uint64_t want = 0, got1 = 0, got2 = 0;
        void *wants[4] = {0};
        wants[s] = &want;
        run_ref(&tc, wants);
        CHECK(want == pl_hash(tc.host[x], (size_t)n));
        void *g1[4] = {0}, *g2[4] = {0};
        g1[s] = &got1;
        g2[s] = &got2;
        CHECK(run_gpu(ctx, &tc, 0xff, false, false, g1));
        CHECK(run_gpu(ctx, &tc, 0x5a, true, false, g2));
        if (got1 != want || got2 != want)
            fprintf(stderr, "checksum n=%lld: got %016llx / %016llx want %016llx\n", (long long)n,
                    (unsigned long long)got1, (unsigned long long)got2, (unsigned long long)want);
        CHECK(got1 == want);
        CHECK(got2 == want);
        cases++;
        if (n > 16) { /* the same bytes seen through a view 3 bytes in */
            pl_error err;
            void *shifted[2] = {(char *)tc.dev[x] + 3, tc.dev[s]};
            tc.spec->buffers[x].shape[0] = n - 3;
            tc.spec->buffers[x].count = n - 3;
            CHECK(pl_gpu_op_record(ctx, tc.spec, tc.st, shifted, NULL, 0, &err) == PL_OK);
            CHECK(cudaDeviceSynchronize() == cudaSuccess);
            cudaMemcpy(&got1, tc.dev[s], 8, cudaMemcpyDeviceToHost);
            CHECK(got1 == pl_hash((char *)tc.host[x] + 3, (size_t)n - 3));
            cases++;
        }
        tcase_free(&tc);
    }
    /* An f32 buffer hashes its bytes. */
    {
        int64_t shape[2] = {333, 1001}, one = 1;
        tcase tc;
        tcase_new(&tc);
        int x = add_buf(&tc, "x", PL_F32, 2, shape);
        int s = add_buf(&tc, "s", PL_I64, 1, &one);
        fill_random(PL_F32, tc.host[x], shape[0] * shape[1]);
        pl_kernel_opts o = {.op = PL_OP_CHECKSUM};
        tcase_stage(&tc, o, 1, &x, 1, &s);
        uint64_t got = 0;
        void *g[4] = {0};
        g[s] = &got;
        CHECK(run_gpu(ctx, &tc, 0xff, false, false, g));
        CHECK(got == pl_hash(tc.host[x], tc.spec->buffers[x].bytes));
        cases++;
        tcase_free(&tc);
    }
    printf("checksum: %d cases, bit-identical to pl_hash\n", cases);
}

/* argmax: exact, with planted ties (first index wins) and NaNs (never win), on short rows (a
 * warp per row) and long rows (a block per row). */
static void test_argmax(pl_gpu_ctx *ctx)
{
    static const int64_t shapes[][2] = {{1000, 77}, {37, 5000}, {3, 1}, {1, 100003}};
    static const pl_dtype types[] = {PL_F32, PL_F64, PL_F16, PL_BF16, PL_I32, PL_I64};
    int cases = 0;
    for (int si = 0; si < 4; si++)
        for (int ti = 0; ti < 6; ti++) {
            pl_dtype t = types[ti];
            int64_t rows = shapes[si][0], cols = shapes[si][1];
            tcase tc;
            tcase_new(&tc);
            int x = add_buf(&tc, "x", t, 2, shapes[si]);
            int y = add_buf(&tc, "y", PL_I32, 1, &rows);
            fill_random(t, tc.host[x], rows * cols);
            for (int64_t r = 0; r < rows && cols > 2; r++) {
                /* Ties: the row's max copied to a later column; NaNs planted early. */
                int64_t a = (int64_t)(rnd() % (uint64_t)cols),
                        b = (int64_t)(rnd() % (uint64_t)cols);
                put(t, tc.host[x], r * cols + a, 1e6);
                put(t, tc.host[x], r * cols + b, 1e6);
                if (!is_int(t) && r % 3 == 0)
                    put(t, tc.host[x], r * cols + (r % 5 == 0 ? 0 : 1), NAN);
            }
            if (t == PL_I64) /* values that doubles would not tell apart */
                for (int64_t r = 0; r < rows && cols > 2; r++) {
                    ((int64_t *)tc.host[x])[r * cols + cols - 1] = INT64_MAX;
                    ((int64_t *)tc.host[x])[r * cols + cols / 2] = INT64_MAX - 1;
                }
            pl_kernel_opts o = {.op = PL_OP_ARGMAX};
            tcase_stage(&tc, o, 1, &x, 1, &y);
            int32_t *want = malloc((size_t)rows * 4), *got1 = malloc((size_t)rows * 4),
                    *got2 = malloc((size_t)rows * 4);
            void *wants[4] = {0};
            memset(tc.host[y], 0xff, (size_t)rows * 4);
            wants[y] = want;
            run_ref(&tc, wants);
            void *g1[4] = {0}, *g2[4] = {0};
            g1[y] = got1;
            g2[y] = got2;
            char what[64];
            snprintf(what, sizeof what, "argmax %s [%lld, %lld]", pl_dtype_name(t), (long long)rows,
                     (long long)cols);
            CHECK(run_gpu(ctx, &tc, 0xff, false, false, g1));
            CHECK(cmp_exact(what, PL_I32, got1, want, rows) == 0);
            CHECK(run_gpu(ctx, &tc, 0x5a, true, false, g2));
            CHECK(cmp_exact(what, PL_I32, got2, want, rows) == 0);
            cases++;
            free(want);
            free(got1);
            free(got2);
            tcase_free(&tc);
        }
    printf("argmax: %d cases, exact\n", cases);
}

/* gemm through cuBLAS: ||gpu - ref|| / ||ref|| (Frobenius) against a double-precision reference
 * on the same (already rounded) inputs (pl_op_run_ref's f32 result must meet the same bound): <=
 * 1e-5 for f32 (full f32, no TF32), <= 1e-2 for f16 and bf16 (one output rounding of 2^-11 / 2^-8
 * dominates). beta = 0 must ignore C's contents (NaN poison), beta != 0 reads them. */
static void test_gemm(pl_gpu_ctx *ctx)
{
    static const int64_t dims[][3] = {{123, 257, 77}, {256, 512, 128}, {1, 9, 1}};
    static const pl_dtype types[] = {PL_F32, PL_F16, PL_BF16};
    int cases = 0;
    double worst[3] = {0, 0, 0};
    for (int di = 0; di < 3; di++)
        for (int ti = 0; ti < 3; ti++)
            for (int bi = 0; bi < 2; bi++) {
                pl_dtype t = types[ti];
                int64_t m = dims[di][0], k = dims[di][1], n = dims[di][2];
                int64_t sa[2] = {m, k}, sb[2] = {k, n}, sc[2] = {m, n};
                tcase tc;
                tcase_new(&tc);
                int a = add_buf(&tc, "a", t, 2, sa);
                int b = add_buf(&tc, "b", t, 2, sb);
                int c = add_buf(&tc, "c", t, 2, sc);
                fill_random(t, tc.host[a], m * k);
                fill_random(t, tc.host[b], k * n);
                fill_random(t, tc.host[c], m * n);
                pl_kernel_opts o = {.op = PL_OP_GEMM, .alpha = 0.75, .beta = bi ? -0.5 : 0};
                int reads[2] = {a, b};
                tcase_stage(&tc, o, 2, reads, 1, &c);
                double *want = malloc((size_t)(m * n) * sizeof *want);
                for (int64_t i = 0; i < m; i++)
                    for (int64_t j = 0; j < n; j++) {
                        double acc = 0;
                        for (int64_t l = 0; l < k; l++)
                            acc += get(t, tc.host[a], i * k + l) * get(t, tc.host[b], l * n + j);
                        want[i * n + j] = o.alpha * acc + o.beta * get(t, tc.host[c], i * n + j);
                    }
                void *got = malloc(tc.spec->buffers[c].bytes);
                void *cref = malloc(tc.spec->buffers[c].bytes);
                void *wants[4] = {0};
                wants[c] = cref;
                run_ref(&tc, wants); /* the C reference (f32 accumulation), for the same bound */
                double rnum = 0, rden = 0;
                for (int64_t i = 0; i < m * n; i++) {
                    double d = get(t, cref, i) - want[i];
                    rnum += d * d;
                    rden += want[i] * want[i];
                }
                CHECK(sqrt(rnum / rden) <= (t == PL_F32 ? 1e-5 : 1e-2));
                for (int cap = 0; cap < 2; cap++) {
                    void *g[4] = {0};
                    g[c] = got;
                    CHECK(run_gpu(ctx, &tc, cap ? 0x5a : 0xff, cap == 1, bi == 1, g));
                    double num = 0, den = 0;
                    int64_t nan = 0;
                    for (int64_t i = 0; i < m * n; i++) {
                        double v = get(t, got, i);
                        if (v != v) nan++;
                        num += (v - want[i]) * (v - want[i]);
                        den += want[i] * want[i];
                    }
                    double rel = sqrt(num / den), tol = t == PL_F32 ? 1e-5 : 1e-2;
                    if (nan || !(rel <= tol))
                        fprintf(
                            stderr,
                            "gemm %s %lldx%lldx%lld beta=%g: rel error %.3g (tol %g), %lld NaN\n",
                            pl_dtype_name(t), (long long)m, (long long)k, (long long)n, o.beta, rel,
                            tol, (long long)nan);
                    CHECK(nan == 0);
                    CHECK(rel <= tol);
                    if (rel > worst[ti]) worst[ti] = rel;
                    cases++;
                }
                free(cref);
                free(got);
                free(want);
                tcase_free(&tc);
            }
    printf("gemm: %d cases, worst relative error f32 %.3g, f16 %.3g, bf16 %.3g\n", cases, worst[0],
           worst[1], worst[2]);
}

/* The executor captures before anything ran: a chain of ops captured cold into one graph (lazy
 * module loading, cuBLAS's first calls and scratch allocation all happen inside the capture),
 * replayed twice, against the reference. */
static void test_cold_capture(pl_gpu_ctx *ctx)
{
    pl_spec *spec = NULL;
    pl_error err;
    CHECK(pl_spec_new(NULL, &spec, &err) == PL_OK);
    struct {
        const char *name;
        pl_dtype t;
        int rank;
        int64_t shape[2];
    } bufs[] = {
        {"x", PL_F32, 2, {300, 1000}}, {"y", PL_F32, 2, {300, 1000}}, {"s", PL_F64, 1, {1, 0}},
        {"w", PL_F32, 2, {1000, 64}},  {"c", PL_F32, 2, {300, 64}},   {"h", PL_I64, 1, {1, 0}},
        {"am", PL_I32, 1, {300, 0}},   {"a16", PL_BF16, 2, {64, 96}}, {"b16", PL_BF16, 2, {96, 32}},
        {"c16", PL_BF16, 2, {64, 32}},
    };
    enum { X, Y, S, W, C, H, AM, A16, B16, C16, NB };
    void *host[NB], *dev[NB], *got[NB], *want[NB];
    pl_pos pos = {"test", 9, 1};
    for (int i = 0; i < NB; i++) {
        pl_buffer *b = pl_spec_add_buffer(spec, bufs[i].name, pos);
        b->where = PL_DEVICE;
        b->dtype = bufs[i].t;
        b->rank = bufs[i].rank;
        b->count = 1;
        for (int d = 0; d < b->rank; d++)
            b->count *= (b->shape[d] = bufs[i].shape[d]);
        b->bytes = (uint64_t)b->count * pl_dtype_size(b->dtype);
        host[i] = malloc(b->bytes);
        got[i] = malloc(b->bytes);
        want[i] = malloc(b->bytes);
        memset(host[i], 0xff, b->bytes);
        CHECK(cudaMalloc(&dev[i], b->bytes) == cudaSuccess);
    }
    fill_random(PL_F32, host[X], 300 * 1000);
    fill_random(PL_F32, host[W], 1000 * 64);
    fill_random(PL_BF16, host[A16], 64 * 96);
    fill_random(PL_BF16, host[B16], 96 * 32);
    struct {
        pl_kernel_opts o;
        int nr, r[2], w;
    } stages[] = {
        {{.op = PL_OP_SCALE, .alpha = -1.5}, 1, {X, 0}, Y},
        {{.op = PL_OP_SUM}, 1, {Y, 0}, S},
        {{.op = PL_OP_GEMM, .alpha = 1, .beta = 0}, 2, {Y, W}, C},
        {{.op = PL_OP_CHECKSUM}, 1, {C, 0}, H},
        {{.op = PL_OP_ARGMAX}, 1, {Y, 0}, AM},
        {{.op = PL_OP_GEMM, .alpha = 2, .beta = 0}, 2, {A16, B16}, C16},
    };
    int ns = (int)(sizeof stages / sizeof stages[0]);
    for (int i = 0; i < ns; i++) {
        pl_stage *st = pl_spec_add_stage(spec, pl_op_name(stages[i].o.op), pos);
        st->kind = pl_kind_find("kernel");
        for (int r = 0; r < stages[i].nr; r++)
            pl_stage_add_read(spec, st, bufs[stages[i].r[r]].name, pos)->index = stages[i].r[r];
        pl_stage_add_write(spec, st, bufs[stages[i].w].name, pos)->index = stages[i].w;
        pl_kernel_opts *o = pl_spec_alloc(spec, sizeof *o);
        *o = stages[i].o;
        st->priv = o;
    }
    for (int i = 0; i < NB; i++)
        cudaMemcpy(dev[i], host[i], spec->buffers[i].bytes, cudaMemcpyHostToDevice);
    cudaStream_t s;
    cudaGraph_t g = NULL;
    cudaGraphExec_t ge = NULL;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    CHECK(cudaDeviceSynchronize() == cudaSuccess); /* the uploads above, see run_gpu */
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess);
    for (int i = 0; i < ns; i++) {
        pl_status st = pl_gpu_op_record(ctx, spec, &spec->stages[i], dev, s, 0, &err);
        if (st != PL_OK) fprintf(stderr, "cold capture: %s\n", err.msg);
        CHECK(st == PL_OK);
    }
    CHECK(cudaStreamEndCapture(s, &g) == cudaSuccess);
    CHECK(g && cudaGraphInstantiate(&ge, g, 0) == cudaSuccess);
    for (int rep = 0; rep < 2 && ge; rep++)
        CHECK(cudaGraphLaunch(ge, s) == cudaSuccess);
    CHECK(cudaStreamSynchronize(s) == cudaSuccess);
    for (int i = 0; i < NB; i++)
        cudaMemcpy(got[i], dev[i], spec->buffers[i].bytes, cudaMemcpyDeviceToHost);
    /* The reference, stage by stage on the host copies. */
    void *hb[NB];
    for (int i = 0; i < NB; i++) {
        memcpy(want[i], host[i], spec->buffers[i].bytes);
        hb[i] = want[i];
    }
    for (int i = 0; i < ns; i++)
        CHECK(pl_op_run_ref(spec, &spec->stages[i], hb, &err) == PL_OK);
    CHECK(cmp_exact("cold scale", PL_F32, got[Y], want[Y], 300 * 1000) == 0);
    CHECK(cmp_exact("cold argmax", PL_I32, got[AM], want[AM], 300) == 0);
    double sg = *(double *)got[S], sw = *(double *)want[S], mag = 0;
    for (int64_t i = 0; i < 300 * 1000; i++)
        mag += fabs(((float *)want[Y])[i]);
    CHECK(fabs(sg - sw) <= 1e-12 * mag);
    double num = 0, den = 0;
    for (int64_t i = 0; i < 300 * 64; i++) {
        double d = (double)((float *)got[C])[i] - ((float *)want[C])[i];
        num += d * d;
        den += (double)((float *)want[C])[i] * ((float *)want[C])[i];
    }
    CHECK(sqrt(num / den) <= 1e-5);
    CHECK(*(uint64_t *)got[H] == pl_hash(got[C], spec->buffers[C].bytes));
    num = den = 0;
    for (int64_t i = 0; i < 64 * 32; i++) {
        double d = get(PL_BF16, got[C16], i) - get(PL_BF16, want[C16], i);
        num += d * d;
        den += get(PL_BF16, want[C16], i) * get(PL_BF16, want[C16], i);
    }
    CHECK(sqrt(num / den) <= 1e-2);
    printf("cold capture: %d ops in one graph, replayed twice, match the reference\n", ns);
    if (ge) cudaGraphExecDestroy(ge);
    if (g) cudaGraphDestroy(g);
    cudaStreamDestroy(s);
    for (int i = 0; i < NB; i++) {
        cudaFree(dev[i]);
        free(host[i]);
        free(got[i]);
        free(want[i]);
    }
    pl_spec_free(spec);
}

/* busy: spins at least the time asked (a correctness bound, not a speed test). */
static void test_busy(pl_gpu_ctx *ctx)
{
    tcase tc;
    tcase_new(&tc);
    pl_kernel_opts o = {.op = PL_OP_BUSY, .duration_us = 500};
    tcase_stage(&tc, o, 0, NULL, 0, NULL);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    pl_error err;
    CHECK(pl_gpu_op_record(ctx, tc.spec, tc.st, tc.dev, NULL, 0, &err) == PL_OK); /* warm up */
    cudaEventRecord(e0, NULL);
    CHECK(pl_gpu_op_record(ctx, tc.spec, tc.st, tc.dev, NULL, 0, &err) == PL_OK);
    cudaEventRecord(e1, NULL);
    CHECK(cudaEventSynchronize(e1) == cudaSuccess);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    printf("busy: asked 500 us, took %.1f us\n", ms * 1e3);
    CHECK(ms * 1e3 >= 499.0);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    tcase_free(&tc);
}

/* Errors name the stage and say what to do. */
static void test_errors(pl_gpu_ctx *ctx)
{
    pl_error err;
    int64_t sh[2] = {4, 4};
    tcase tc;
    tcase_new(&tc);
    int a = add_buf(&tc, "a", PL_I32, 2, sh);
    int b = add_buf(&tc, "b", PL_I32, 2, sh);
    int c = add_buf(&tc, "c", PL_I32, 2, sh);
    pl_kernel_opts o = {.op = PL_OP_GEMM, .alpha = 1};
    int reads[2] = {a, b};
    tcase_stage(&tc, o, 2, reads, 1, &c);
    for (int i = 0; i < 3; i++)
        cudaMalloc(&tc.dev[i], 64);
    CHECK(pl_gpu_op_record(ctx, tc.spec, tc.st, tc.dev, NULL, 3, &err) == PL_EINPUT);
    CHECK_STR(err.msg,
              "test:2:3: error: stage 'k': gemm supports f32, f16 and bf16, not i32 ('a'); "
              "convert the operands or use another op");
    tc.st->priv = NULL;
    CHECK(pl_gpu_op_record(ctx, tc.spec, tc.st, tc.dev, NULL, 3, &err) == PL_ERUNTIME);
    CHECK_STR(err.msg, "stage 'k': kernel options are not parsed; run pl_spec_check first");
    tcase_free(&tc);
}

int main(void)
{
    /* The message format of pl_cuda_check needs no device. */
    pl_error err;
    CHECK(pl_cuda_check(0, "cudaMemcpyAsync(a, b)", "up", 7, &err) == PL_OK);
    CHECK(pl_cuda_check((int)cudaErrorInvalidValue, "cudaMemcpyAsync(a, b, n, k, s)", "up", 7,
                        &err) == PL_ECUDA);
    CHECK_STR(
        err.msg,
        "stage 'up', batch 7: cudaMemcpyAsync failed: invalid argument (cudaErrorInvalidValue)");
    pl_cuda_check((int)cudaErrorInvalidValue, "cudaMalloc(&p, n)", NULL, -1, &err);
    CHECK_STR(err.msg, "cudaMalloc failed: invalid argument (cudaErrorInvalidValue)");

    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0) {
        if (pl_test_failures) PL_TEST_DONE();
        char why[256];
        snprintf(why, sizeof why, "no CUDA device (%s)",
                 e != cudaSuccess ? cudaGetErrorString(e) : "none found");
        PL_TEST_SKIP(why);
    }
    pl_gpu_ctx *ctx = NULL;
    if (pl_gpu_ctx_new(0, &ctx, &err) != PL_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    test_cold_capture(ctx); /* first: nothing has run on the GPU yet */
    test_elementwise(ctx);
    test_sum(ctx);
    test_checksum(ctx);
    test_argmax(ctx);
    test_gemm(ctx);
    test_busy(ctx);
    test_errors(ctx);
    pl_gpu_ctx_free(ctx);
    PL_TEST_DONE();
}
