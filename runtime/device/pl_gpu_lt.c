/* pl_gpu_lt: device memory for kinds with their own device state, and cuBLASLt matmuls whose
 * algorithm is fixed when they are created (pl_gpu.h). The gpt2 kind's GEMMs run through here,
 * with bias, GELU and the residual add fused into cuBLASLt's epilogue. */
#include "pl_gpu.h"
#include "pl_cudalibs.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <stdlib.h>

static pl_status pl__where(const char *stage, pl_error *err)
{
    if (stage) pl_error_tag(err, stage, -1);
    return err ? err->status : PL_ECUDA;
}

pl_status pl_gpu_alloc(size_t bytes, void **out, const char *stage, pl_error *err)
{
    *out = NULL;
    cudaError_t e = cudaMalloc(out, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        *out = NULL;
        pl_error_set(err, PL_ECUDA, "error: %s%s%scudaMalloc of %zu bytes failed: %s (%s)",
                     stage ? "stage '" : "", stage ? stage : "", stage ? "': " : "", bytes,
                     cudaGetErrorString(e), cudaGetErrorName(e));
        return pl__where(stage, err);
    }
    return PL_OK;
}

void pl_gpu_free(void *p)
{
    if (p) cudaFree(p);
}

pl_status pl_gpu_upload(void *dst, const void *src, size_t bytes, const char *stage, pl_error *err)
{
    return PL_CUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), stage, -1, err);
}

pl_status pl_gpu_download(void *dst, const void *src, size_t bytes, const char *stage,
                          pl_error *err)
{
    return PL_CUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), stage, -1, err);
}

pl_status pl_gpu_sync(const char *stage, pl_error *err)
{
    return PL_CUDA(cudaDeviceSynchronize(), stage, -1, err);
}

int pl_gpu_sm_count(void)
{
    int dev = 0, sms = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return 1;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) return 1;
    return sms > 0 ? sms : 1;
}

struct pl_gpu_lt {
    cublasLtHandle_t h;
};

#define PL__MM_CANDIDATES 8
#define PL__TUNE_MARGIN 0.1f /* pl_gpu_mm_tune: how much faster another candidate must be */

struct pl_gpu_mm {
    pl_gpu_lt *lt;
    pl_gpu_mm_shape s;
    size_t workspace;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t a, b, d;
    cublasLtMatmulAlgo_t algo;
    /* The heuristic's candidates, fastest-first by its estimate; pl_gpu_mm_tune times them. */
    cublasLtMatmulAlgo_t cand[PL__MM_CANDIDATES];
    int n_cand;
};

static pl_status pl__lt(cublasStatus_t s, const char *call, const char *stage, int64_t batch,
                        pl_error *err)
{
    if (s == CUBLAS_STATUS_SUCCESS) return PL_OK;
    const char *name = cublasLtGetStatusName(s), *text = cublasLtGetStatusString(s);
    if (stage && batch >= 0)
        return pl_error_set(err, PL_ECUDA, "error: stage '%s', batch %lld: %s failed: %s (%s)",
                            stage, (long long)batch, call, text, name);
    if (stage)
        return pl_error_set(err, PL_ECUDA, "error: stage '%s': %s failed: %s (%s)", stage, call,
                            text, name);
    return pl_error_set(err, PL_ECUDA, "error: %s failed: %s (%s)", call, text, name);
}

pl_status pl_gpu_lt_new(pl_gpu_lt **out, pl_error *err)
{
    *out = NULL;
    pl_gpu_lt *lt = calloc(1, sizeof *lt);
    if (!lt) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    pl_status st = pl_cudalib_load(PL_CUDALIB_CUBLASLT, err);
    if (st == PL_OK) st = pl__lt(cublasLtCreate(&lt->h), "cublasLtCreate", NULL, -1, err);
    if (st != PL_OK) {
        free(lt);
        return st;
    }
    *out = lt;
    return PL_OK;
}

void pl_gpu_lt_free(pl_gpu_lt *lt)
{
    if (!lt) return;
    cublasLtDestroy(lt->h);
    free(lt);
}

static cudaDataType_t pl__cuda_type(pl_dtype t)
{
    return t == PL_F16 ? CUDA_R_16F : t == PL_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

void pl_gpu_mm_free(pl_gpu_mm *mm)
{
    if (!mm) return;
    if (mm->d) cublasLtMatrixLayoutDestroy(mm->d);
    if (mm->b) cublasLtMatrixLayoutDestroy(mm->b);
    if (mm->a) cublasLtMatrixLayoutDestroy(mm->a);
    if (mm->op) cublasLtMatmulDescDestroy(mm->op);
    free(mm);
}

pl_status pl_gpu_mm_new(pl_gpu_lt *lt, const pl_gpu_mm_shape *s, size_t workspace, pl_gpu_mm **out,
                        const char *stage, pl_error *err)
{
    pl_status st = PL_OK;
    cublasLtMatmulPreference_t pref = NULL;
    *out = NULL;
    pl_gpu_mm *mm = calloc(1, sizeof *mm);
    if (!mm) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    mm->lt = lt;
    mm->s = *s;
    mm->workspace = workspace;
    cudaDataType_t ab = pl__cuda_type(s->ab), dt = pl__cuda_type(s->d);
    /* The row-major product seen column-major: A = W stored
     * [m, k] row-major = k x m column-major, used transposed; B = X stored [n, k] row-major =
     * k x n column-major; D = Y stored [n, m] row-major = m x n column-major. */
    PL_CHECK_GOTO(pl__lt(cublasLtMatmulDescCreate(&mm->op, CUBLAS_COMPUTE_32F, CUDA_R_32F),
                         "cublasLtMatmulDescCreate", stage, -1, err),
                  st, fail);
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    PL_CHECK_GOTO(
        pl__lt(cublasLtMatmulDescSetAttribute(mm->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta),
               "cublasLtMatmulDescSetAttribute(TRANSA)", stage, -1, err),
        st, fail);
    PL_CHECK_GOTO(
        pl__lt(cublasLtMatmulDescSetAttribute(mm->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb),
               "cublasLtMatmulDescSetAttribute(TRANSB)", stage, -1, err),
        st, fail);
    if (s->epilogue != PL_GPU_EPI_NONE) {
        cublasLtEpilogue_t epi = s->epilogue == PL_GPU_EPI_GELU_BIAS ? CUBLASLT_EPILOGUE_GELU_BIAS
                                                                     : CUBLASLT_EPILOGUE_BIAS;
        PL_CHECK_GOTO(pl__lt(cublasLtMatmulDescSetAttribute(mm->op, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                            &epi, sizeof epi),
                             "cublasLtMatmulDescSetAttribute(EPILOGUE)", stage, -1, err),
                      st, fail);
        PL_CHECK_GOTO(
            pl__lt(cublasLtMatmulDescSetAttribute(mm->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                  &s->bias, sizeof s->bias),
                   "cublasLtMatmulDescSetAttribute(BIAS_POINTER)", stage, -1, err),
            st, fail);
        PL_CHECK_GOTO(pl__lt(cublasLtMatmulDescSetAttribute(
                                 mm->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &dt, sizeof dt),
                             "cublasLtMatmulDescSetAttribute(BIAS_DATA_TYPE)", stage, -1, err),
                      st, fail);
    }
    PL_CHECK_GOTO(
        pl__lt(cublasLtMatrixLayoutCreate(&mm->a, ab, (uint64_t)s->k, (uint64_t)s->m, s->k),
               "cublasLtMatrixLayoutCreate(A)", stage, -1, err),
        st, fail);
    PL_CHECK_GOTO(
        pl__lt(cublasLtMatrixLayoutCreate(&mm->b, ab, (uint64_t)s->k, (uint64_t)s->n, s->k),
               "cublasLtMatrixLayoutCreate(B)", stage, -1, err),
        st, fail);
    PL_CHECK_GOTO(pl__lt(cublasLtMatrixLayoutCreate(&mm->d, dt, (uint64_t)s->m, (uint64_t)s->n,
                                                    s->ldd > s->m ? s->ldd : s->m),
                         "cublasLtMatrixLayoutCreate(D)", stage, -1, err),
                  st, fail);
    PL_CHECK_GOTO(pl__lt(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate",
                         stage, -1, err),
                  st, fail);
    uint64_t ws = workspace;
    PL_CHECK_GOTO(pl__lt(cublasLtMatmulPreferenceSetAttribute(
                             pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws),
                         "cublasLtMatmulPreferenceSetAttribute", stage, -1, err),
                  st, fail);
    cublasLtMatmulHeuristicResult_t res[PL__MM_CANDIDATES];
    int found = 0;
    cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(lt->h, mm->op, mm->a, mm->b, mm->d, mm->d,
                                                       pref, PL__MM_CANDIDATES, res, &found);
    if (hs != CUBLAS_STATUS_SUCCESS || found < 1) {
        st = pl_error_set(err, PL_ECUDA,
                          "error: %s%s%scuBLASLt has no algorithm for Y[%d, %d] = X[%d, %d] W[%d, "
                          "%d]^T (%s x %s -> %s, epilogue %d%s): %s",
                          stage ? "stage '" : "", stage ? stage : "", stage ? "': " : "", s->n,
                          s->m, s->n, s->k, s->m, s->k, pl_dtype_name(s->ab), pl_dtype_name(s->ab),
                          pl_dtype_name(s->d), (int)s->epilogue,
                          s->accumulate ? ", accumulate" : "", cublasLtGetStatusString(hs));
        goto fail;
    }
    mm->algo = res[0].algo;
    for (int i = 0; i < found; i++)
        if (res[i].state == CUBLAS_STATUS_SUCCESS) mm->cand[mm->n_cand++] = res[i].algo;
    cublasLtMatmulPreferenceDestroy(pref);
    *out = mm;
    return PL_OK;
fail:
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    pl_gpu_mm_free(mm);
    return st;
}

pl_status pl_gpu_mm_run(const pl_gpu_mm *mm, const void *W, const void *X, void *Y, void *workspace,
                        void *stream, const char *stage, int64_t batch, pl_error *err)
{
    float alpha = 1.0f, beta = mm->s.accumulate ? 1.0f : 0.0f;
    return pl__lt(cublasLtMatmul(mm->lt->h, mm->op, &alpha, W, mm->a, X, mm->b, &beta, Y, mm->d, Y,
                                 mm->d, &mm->algo, workspace, mm->workspace, (cudaStream_t)stream),
                  "cublasLtMatmul", stage, batch, err);
}

pl_status pl_gpu_mm_tune(pl_gpu_mm *mm, const void *W, const void *X, void *Y, void *workspace,
                         const char *stage, double *best_us, pl_error *err)
{
    pl_status st = PL_OK;
    cudaStream_t s = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    float alpha = 1.0f, beta = mm->s.accumulate ? 1.0f : 0.0f;
    float best = -1;
    PL_CHECK(PL_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), stage, -1, err));
    PL_CHECK_GOTO(PL_CUDA(cudaEventCreate(&e0), stage, -1, err), st, done);
    PL_CHECK_GOTO(PL_CUDA(cudaEventCreate(&e1), stage, -1, err), st, done);
    /* The choice decides the result's bits (another tile shape or split sums in another order),
     * and runs must give the same bits (bundles replay them). So a candidate replaces the
     * heuristic's first choice only when it is clearly faster, by PL__TUNE_MARGIN on the best of
     * three trials: near-equal candidates, whose order timing noise can swap from one run to the
     * next, leave the first choice in place. (The tiny GPT-2 test caught a flip at vocabulary
     * 500, depth 1 against depth 3, when the fastest candidate was simply taken.) */
    float first = -1;
    int pick = -1;
    for (int i = 0; i < mm->n_cand; i++) {
        /* A candidate that fails to run is skipped: the heuristic's own first choice stays. */
        bool ok = true;
        for (int r = 0; r < 2 && ok; r++)
            ok = cublasLtMatmul(mm->lt->h, mm->op, &alpha, W, mm->a, X, mm->b, &beta, Y, mm->d, Y,
                                mm->d, &mm->cand[i], workspace, mm->workspace,
                                s) == CUBLAS_STATUS_SUCCESS;
        if (!ok) continue;
        float t = -1;
        for (int trial = 0; trial < 3; trial++) {
            PL_CHECK_GOTO(PL_CUDA(cudaEventRecord(e0, s), stage, -1, err), st, done);
            for (int r = 0; r < 5; r++)
                cublasLtMatmul(mm->lt->h, mm->op, &alpha, W, mm->a, X, mm->b, &beta, Y, mm->d, Y,
                               mm->d, &mm->cand[i], workspace, mm->workspace, s);
            PL_CHECK_GOTO(PL_CUDA(cudaEventRecord(e1, s), stage, -1, err), st, done);
            PL_CHECK_GOTO(PL_CUDA(cudaEventSynchronize(e1), stage, -1, err), st, done);
            float ms = 0;
            PL_CHECK_GOTO(PL_CUDA(cudaEventElapsedTime(&ms, e0, e1), stage, -1, err), st, done);
            if (t < 0 || ms < t) t = ms;
        }
        if (first < 0) {
            first = best = t;
            pick = i;
        } else if (t < best && t < first * (1.0f - PL__TUNE_MARGIN)) {
            best = t;
            pick = i;
        }
    }
    if (pick >= 0) mm->algo = mm->cand[pick];
    /* A candidate that failed mid-way may leave an error behind; the run must not see it. */
    (void)cudaGetLastError();
    if (best_us) *best_us = best < 0 ? -1 : best * 1e3 / 5;
done:
    if (e1) cudaEventDestroy(e1);
    if (e0) cudaEventDestroy(e0);
    cudaStreamSynchronize(s);
    cudaStreamDestroy(s);
    return st;
}

void pl_gpu_mm_copy_algo(pl_gpu_mm *dst, const pl_gpu_mm *src)
{
    dst->algo = src->algo;
}
