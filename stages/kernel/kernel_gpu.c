/* kernel_gpu: the kernel kind's GPU side: the per-device op context (cuBLAS handle, per-stage
 * scratch) and pl_gpu_op_record, which enqueues one kernel stage's op on a stream, inside capture
 * or not, through the op's pl__gpu_NAME (one per row of the op table, stages/kernel/pl_ops.h). */
#include "kernel_gpu.h"
#include "pl_cudalibs.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "ops_gpu.h"
#include "pl_ops.h"

/* cuBLAS's recommended workspace on Hopper. */
#define PL__GEMM_WORKSPACE (32u << 20)

/* Device memory an op needs besides its operands (sum partials, a gemm workspace). One per
 * (stage, output address): a slot's graphs run concurrently with other slots', so each slot needs
 * its own; a persistent output has one address, and writes to it are ordered across batches by
 * the plan, so sharing its scratch is safe. */
typedef struct pl__scratch {
    int stage;
    const void *key;
    void *ptr;
    size_t bytes;
} pl__scratch;

struct pl_gpu_ctx {
    int device;
    int sms;
    cublasHandle_t blas;
    /* Held while recording: cuBLAS handle state (stream, workspace) and the scratch table are
     * shared by every thread that records. */
    pthread_mutex_t mu;
    pl__scratch *scratch;
    int n_scratch, cap_scratch;
};

static const char *pl__cublas_text(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_NOT_INITIALIZED:
        return "cuBLAS not initialized (CUBLAS_STATUS_NOT_INITIALIZED)";
    case CUBLAS_STATUS_ALLOC_FAILED:
        return "out of device memory (CUBLAS_STATUS_ALLOC_FAILED)";
    case CUBLAS_STATUS_INVALID_VALUE:
        return "invalid value (CUBLAS_STATUS_INVALID_VALUE)";
    case CUBLAS_STATUS_ARCH_MISMATCH:
        return "not supported by this GPU (CUBLAS_STATUS_ARCH_MISMATCH)";
    case CUBLAS_STATUS_EXECUTION_FAILED:
        return "kernel failed to launch (CUBLAS_STATUS_EXECUTION_FAILED)";
    case CUBLAS_STATUS_INTERNAL_ERROR:
        return "internal error (CUBLAS_STATUS_INTERNAL_ERROR)";
    case CUBLAS_STATUS_NOT_SUPPORTED:
        return "not supported (CUBLAS_STATUS_NOT_SUPPORTED)";
    default:
        return "cuBLAS error";
    }
}

static pl_status pl__cublas_check(cublasStatus_t s, const char *call, const char *stage,
                                  int64_t batch, pl_error *err)
{
    if (s == CUBLAS_STATUS_SUCCESS) return PL_OK;
    if (stage && batch >= 0)
        pl_error_set(err, PL_ECUDA, "stage '%s', batch %lld: %s failed: %s", stage,
                     (long long)batch, call, pl__cublas_text(s));
    else if (stage)
        pl_error_set(err, PL_ECUDA, "stage '%s': %s failed: %s", stage, call, pl__cublas_text(s));
    else
        return pl_error_set(err, PL_ECUDA, "%s failed: %s", call, pl__cublas_text(s));
    pl_error_tag(err, stage, batch);
    return PL_ECUDA;
}

/* One tiny gemm per dtype, outside any capture, so cuBLAS's one-time setup (its internal
 * handles, device queries, first module loads) is done before the executor captures. */
static pl_status pl__gemm_warm_up(pl_gpu_ctx *ctx, pl_error *err)
{
    static const cudaDataType_t types[] = {CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF};
    pl_status st = PL_OK;
    void *m = NULL;
    float one = 1, zero = 0;
    PL_CHECK(PL_CUDA(cudaMalloc(&m, 3 * 64 * sizeof(float)), NULL, -1, err));
    PL_CHECK_GOTO(PL_CUDA(cudaMemset(m, 0, 3 * 64 * sizeof(float)), NULL, -1, err), st, done);
    for (int i = 0; i < 3; i++) {
        char *p = m;
        PL_CHECK_GOTO(
            pl__cublas_check(cublasGemmEx(ctx->blas, CUBLAS_OP_N, CUBLAS_OP_N, 8, 8, 8, &one, p,
                                          types[i], 8, p + 256, types[i], 8, &zero, p + 512,
                                          types[i], 8, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                             "cublasGemmEx (warm-up)", NULL, -1, err),
            st, done);
    }
    PL_CHECK_GOTO(PL_CUDA(cudaDeviceSynchronize(), NULL, -1, err), st, done);
done:
    cudaFree(m);
    return st;
}

pl_status pl_gpu_ctx_new(int device, pl_gpu_ctx **out, pl_error *err)
{
    pl_status st = PL_OK;
    *out = NULL;
    pl_gpu_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return pl_error_set(err, PL_ENOMEM, "out of memory creating the GPU op context");
    ctx->device = device;
    pthread_mutex_init(&ctx->mu, NULL);
    PL_CHECK_GOTO(PL_CUDA(cudaSetDevice(device), NULL, -1, err), st, fail);
    PL_CHECK_GOTO(PL_CUDA(cudaDeviceGetAttribute(&ctx->sms, cudaDevAttrMultiProcessorCount, device),
                          NULL, -1, err),
                  st, fail);
    PL_CHECK_GOTO(pl_cudalib_load(PL_CUDALIB_CUBLAS, err), st, fail);
    PL_CHECK_GOTO(pl__cublas_check(cublasCreate(&ctx->blas), "cublasCreate", NULL, -1, err), st,
                  fail);
    PL_CHECK_GOTO(pl__gemm_warm_up(ctx, err), st, fail);
    *out = ctx;
    return PL_OK;
fail:
    pl_gpu_ctx_free(ctx);
    return st;
}

void pl_gpu_ctx_free(pl_gpu_ctx *ctx)
{
    if (!ctx) return;
    for (int i = 0; i < ctx->n_scratch; i++)
        cudaFree(ctx->scratch[i].ptr);
    free(ctx->scratch);
    if (ctx->blas) cublasDestroy(ctx->blas);
    pthread_mutex_destroy(&ctx->mu);
    free(ctx);
}

/* Finds or allocates the scratch of (stage, key). Allocation may happen while the calling thread
 * captures a stream: cudaMalloc is no stream operation, so the thread's capture mode is relaxed
 * around it (the push/pop that cudaThreadExchangeStreamCaptureMode documents); the memory is
 * allocated once and lives until pl_gpu_ctx_free, so captured graphs may bake its address in.
 * Called with ctx->mu held. */
static pl_status pl__scratch_get(pl_gpu_ctx *ctx, const pl_stage *st, const void *key, size_t bytes,
                                 void **out, pl_error *err)
{
    for (int i = 0; i < ctx->n_scratch; i++) {
        pl__scratch *s = &ctx->scratch[i];
        if (s->stage == st->index && s->key == key && s->bytes >= bytes) {
            *out = s->ptr;
            return PL_OK;
        }
    }
    if (ctx->n_scratch == ctx->cap_scratch) {
        int cap = ctx->cap_scratch ? 2 * ctx->cap_scratch : 16;
        pl__scratch *grown = realloc(ctx->scratch, (size_t)cap * sizeof *grown);
        if (!grown)
            return pl_error_set(err, PL_ENOMEM, "stage '%s': out of host memory for GPU scratch",
                                st->name);
        ctx->scratch = grown;
        ctx->cap_scratch = cap;
    }
    void *ptr = NULL;
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    cudaThreadExchangeStreamCaptureMode(&mode);
    cudaError_t e = cudaMalloc(&ptr, bytes);
    cudaThreadExchangeStreamCaptureMode(&mode);
    if (e != cudaSuccess)
        return pl_error_set(err, PL_ECUDA,
                            "stage '%s': cudaMalloc of %zu bytes of op scratch failed: %s (%s)",
                            st->name, bytes, cudaGetErrorString(e), cudaGetErrorName(e));
    ctx->scratch[ctx->n_scratch++] = (pl__scratch){st->index, key, ptr, bytes};
    *out = ptr;
    return PL_OK;
}

/* Elements of a buffer: its product of dims (pl_spec_check also stores it in ->count). */
static int64_t pl__elems(const pl_buffer *b)
{
    int64_t n = 1;
    for (int i = 0; i < b->rank; i++)
        n *= b->shape[i];
    return b->rank > 0 ? n : b->count;
}

static pl_status pl__same_dtype(const pl_stage *st, const pl_buffer *const *ops, int n,
                                pl_error *err)
{
    for (int i = 1; i < n; i++)
        if (ops[i]->dtype != ops[0]->dtype || pl__elems(ops[i]) != pl__elems(ops[0]))
            return pl_error_at(err, PL_EINPUT, st->pos,
                               "stage '%s': op %s needs operands of one dtype and shape; '%s' is "
                               "%s[%lld] and '%s' is %s[%lld]",
                               st->name, pl_op_name(((const pl_kernel_opts *)st->priv)->op),
                               ops[0]->name, pl_dtype_name(ops[0]->dtype),
                               (long long)pl__elems(ops[0]), ops[i]->name,
                               pl_dtype_name(ops[i]->dtype), (long long)pl__elems(ops[i]));
    return PL_OK;
}

/* What an op's GPU function gets: operands are reads then writes (at most 3), ops[i] their
 * buffers and ptr[i] this slot's device addresses. Called with ctx->mu held. It returns a
 * launcher's cudaError_t in *rc (pl__record_locked names it) or a pl_status of its own. */
typedef struct pl__gpu_call {
    pl_gpu_ctx *ctx;
    const pl_stage *st;
    const pl_kernel_opts *o;
    const pl_buffer *const *ops;
    void *const *ptr;
    void *stream;
    int64_t batch;
    int *rc;
} pl__gpu_call;

static pl_status pl__gpu_fill(const pl__gpu_call *c, pl_error *err)
{
    (void)err;
    *c->rc = pl_gpu_launch_fill((int)c->ops[0]->dtype, c->ptr[0], pl__elems(c->ops[0]), c->o->value,
                                c->ctx->sms, c->stream);
    return PL_OK;
}

static pl_status pl__gpu_scale(const pl__gpu_call *c, pl_error *err)
{
    PL_CHECK(pl__same_dtype(c->st, c->ops, 2, err));
    *c->rc = pl_gpu_launch_scale((int)c->ops[0]->dtype, c->ptr[1], c->ptr[0], pl__elems(c->ops[0]),
                                 c->o->alpha, c->ctx->sms, c->stream);
    return PL_OK;
}

static pl_status pl__gpu_saxpy(const pl__gpu_call *c, pl_error *err)
{
    PL_CHECK(pl__same_dtype(c->st, c->ops, 3, err));
    *c->rc = pl_gpu_launch_saxpy((int)c->ops[0]->dtype, c->ptr[2], c->ptr[0], c->ptr[1],
                                 pl__elems(c->ops[0]), c->o->alpha, c->ctx->sms, c->stream);
    return PL_OK;
}

static pl_status pl__gpu_add(const pl__gpu_call *c, pl_error *err)
{
    PL_CHECK(pl__same_dtype(c->st, c->ops, 3, err));
    *c->rc = pl_gpu_launch_add((int)c->ops[0]->dtype, c->ptr[2], c->ptr[0], c->ptr[1],
                               pl__elems(c->ops[0]), c->ctx->sms, c->stream);
    return PL_OK;
}

static pl_status pl__gpu_sum(const pl__gpu_call *c, pl_error *err)
{
    int64_t n = pl__elems(c->ops[0]);
    void *partials = NULL;
    PL_CHECK(pl__scratch_get(c->ctx, c->st, c->ptr[1],
                             (size_t)pl_gpu_sum_blocks(n, c->ctx->sms) * sizeof(double), &partials,
                             err));
    *c->rc = pl_gpu_launch_sum((int)c->ops[0]->dtype, c->ptr[0], n, (int)c->ops[1]->dtype,
                               c->ptr[1], partials, c->ctx->sms, c->stream);
    return PL_OK;
}

static pl_status pl__gpu_checksum(const pl__gpu_call *c, pl_error *err)
{
    (void)err;
    *c->rc = pl_gpu_launch_checksum(
        c->ptr[0], (uint64_t)pl__elems(c->ops[0]) * pl_dtype_size(c->ops[0]->dtype), c->ptr[1],
        c->ctx->sms, c->stream);
    return PL_OK;
}

static pl_status pl__gpu_argmax(const pl__gpu_call *c, pl_error *err)
{
    (void)err;
    const pl_buffer *x = c->ops[0];
    int64_t cols = x->rank > 0 ? x->shape[x->rank - 1] : pl__elems(x);
    int64_t rows = cols > 0 ? pl__elems(x) / cols : 0;
    *c->rc = pl_gpu_launch_argmax((int)x->dtype, c->ptr[0], rows, cols, c->ptr[1], c->ctx->sms,
                                  c->stream);
    return PL_OK;
}

static pl_status pl__gpu_gemm(const pl__gpu_call *c, pl_error *err)
{
    const pl_stage *st = c->st;
    const pl_buffer *a = c->ops[0], *b = c->ops[1], *cc = c->ops[2];
    cudaDataType_t type;
    switch (a->dtype) {
    case PL_F32:
        type = CUDA_R_32F;
        break;
    case PL_F16:
        type = CUDA_R_16F;
        break;
    case PL_BF16:
        type = CUDA_R_16BF;
        break;
    default:
        return pl_error_at(err, PL_EINPUT, st->pos,
                           "stage '%s': gemm supports f32, f16 and bf16, not %s ('%s'); convert "
                           "the operands or use another op",
                           st->name, pl_dtype_name(a->dtype), a->name);
    }
    if (a->rank != 2 || b->rank != 2 || cc->rank != 2 || b->dtype != a->dtype ||
        cc->dtype != a->dtype || a->shape[1] != b->shape[0] || cc->shape[0] != a->shape[0] ||
        cc->shape[1] != b->shape[1])
        return pl_error_at(err, PL_EINPUT, st->pos,
                           "stage '%s': gemm needs A[m,k], B[k,n], C[m,n] of one dtype", st->name);
    int64_t m = a->shape[0], k = a->shape[1], n = b->shape[1];
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX)
        return pl_error_at(err, PL_EINPUT, st->pos,
                           "stage '%s': gemm dimensions above %d are not supported by cuBLAS's "
                           "32-bit interface; split the product",
                           st->name, INT_MAX);
    pl_gpu_ctx *ctx = c->ctx;
    void *ws = NULL;
    PL_CHECK(pl__scratch_get(ctx, st, c->ptr[2], PL__GEMM_WORKSPACE, &ws, err));
    PL_CHECK(pl__cublas_check(cublasSetStream(ctx->blas, (cudaStream_t)c->stream),
                              "cublasSetStream", st->name, c->batch, err));
    /* A per-output workspace: cuBLAS never allocates inside capture, and gemms of different
     * slots running at once never share one. */
    PL_CHECK(pl__cublas_check(cublasSetWorkspace(ctx->blas, ws, PL__GEMM_WORKSPACE),
                              "cublasSetWorkspace", st->name, c->batch, err));
    /* Row-major C = A B is column-major C^T = B^T A^T: swap the operands, no transposes. */
    float alpha = (float)c->o->alpha, beta = (float)c->o->beta;
    return pl__cublas_check(cublasGemmEx(ctx->blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)n, (int)m,
                                         (int)k, &alpha, c->ptr[1], type, (int)n, c->ptr[0], type,
                                         (int)k, &beta, c->ptr[2], type, (int)n, CUBLAS_COMPUTE_32F,
                                         CUBLAS_GEMM_DEFAULT),
                            "cublasGemmEx", st->name, c->batch, err);
}

static pl_status pl__gpu_busy(const pl__gpu_call *c, pl_error *err)
{
    (void)err;
    *c->rc = pl_gpu_launch_busy(c->o->duration_us, c->stream);
    return PL_OK;
}

/* The GPU functions by op, from the op table: an op without its pl__gpu_NAME does not compile. */
static pl_status (*const pl__gpus[PL_OP_COUNT])(const pl__gpu_call *c, pl_error *err) = {
#define PL__OP_GPU(id, name, r, w, rule, dt, opts, repro, doc) pl__gpu_##name,
    PL_OPS_MAP(PL__OP_GPU)
#undef PL__OP_GPU
};

static pl_status pl__record_locked(pl_gpu_ctx *ctx, const pl_stage *st, const pl_kernel_opts *o,
                                   const pl_buffer *const *ops, void *const *ptr, void *stream,
                                   int64_t batch, pl_error *err)
{
    int rc = 0;
    const char *what = pl_op_name(o->op);
    pl__gpu_call c = {ctx, st, o, ops, ptr, stream, batch, &rc};
    PL_CHECK(pl__gpus[o->op](&c, err));
    if (rc == (int)cudaErrorInvalidValue)
        return pl_error_at(
            err, PL_EINPUT, st->pos, "stage '%s': op %s does not support dtype %s ('%s')", st->name,
            what, ops[0] ? pl_dtype_name(ops[0]->dtype) : "-", ops[0] ? ops[0]->name : "-");
    if (rc != 0) {
        char call[64];
        snprintf(call, sizeof call, "%s kernel launch", what);
        return pl_cuda_check(rc, call, st->name, batch, err);
    }
    return PL_OK;
}

pl_status pl_gpu_op_record(pl_gpu_ctx *ctx, const pl_spec *spec, const pl_stage *st,
                           void *const *dev_bufs, void *stream, int64_t batch, pl_error *err)
{
    const pl_kernel_opts *o = st->priv;
    if (!o)
        return pl_error_set(err, PL_ERUNTIME,
                            "stage '%s': kernel options are not parsed; run pl_spec_check first",
                            st->name);
    if ((unsigned)o->op >= PL_OP_COUNT)
        return pl_error_set(err, PL_ERUNTIME, "stage '%s': unknown op %d", st->name, (int)o->op);
    /* Operands: reads then writes, as written (pl_ops.h). An op that takes any (busy) touches
     * none. */
    const pl_op_desc *d = &pl_ops[o->op];
    int want_reads = pl_op_operands(d->reads), want_writes = pl_op_operands(d->writes);
    const pl_buffer *ops[3] = {NULL, NULL, NULL};
    void *ptr[3] = {NULL, NULL, NULL};
    if (want_reads >= 0 && want_writes >= 0) {
        if (st->n_reads != want_reads || st->n_writes != want_writes ||
            want_reads + want_writes > 3)
            return pl_error_at(err, PL_EINPUT, st->pos,
                               "stage '%s': op %s takes %d read(s) and %d write(s), not %d and %d",
                               st->name, d->name, want_reads, want_writes, st->n_reads,
                               st->n_writes);
        for (int i = 0; i < st->n_reads + st->n_writes; i++) {
            const pl_ref *r = i < st->n_reads ? &st->reads[i] : &st->writes[i - st->n_reads];
            if (r->index < 0 || r->index >= spec->n_buffers)
                return pl_error_set(err, PL_ERUNTIME,
                                    "stage '%s': buffer '%s' is not resolved; run pl_spec_check "
                                    "first",
                                    st->name, r->name);
            ops[i] = &spec->buffers[r->index];
            ptr[i] = dev_bufs[r->index];
            if (!ptr[i])
                return pl_error_set(err, PL_ERUNTIME,
                                    "stage '%s', batch %lld: buffer '%s' has no device memory",
                                    st->name, (long long)batch, r->name);
        }
    }
    pthread_mutex_lock(&ctx->mu);
    pl_status s = PL_OK;
    int cur = -1;
    if (cudaGetDevice(&cur) != cudaSuccess || cur != ctx->device)
        s = PL_CUDA(cudaSetDevice(ctx->device), st->name, batch, err);
    if (s == PL_OK) s = pl__record_locked(ctx, st, o, ops, ptr, stream, batch, err);
    pthread_mutex_unlock(&ctx->mu);
    return s;
}
