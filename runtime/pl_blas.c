/* pl_blas: OpenBLAS behind pl_blas.h; cblas.h is included here only. */
#include "pl_blas.h"

#include <cblas.h>
#include <pthread.h>
#include <stdio.h>

static pthread_once_t pl__blas_once = PTHREAD_ONCE_INIT;

static void pl__blas_init(void)
{
    openblas_set_num_threads(1);
}

void pl_blas_init(void)
{
    pthread_once(&pl__blas_once, pl__blas_init);
}

void pl_blas_sgemm(bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                   int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc)
{
    pthread_once(&pl__blas_once, pl__blas_init);
    if (m <= 0 || n <= 0) return;
    if (m == 1 && trans_b) {
        /* One row against many (an IVF list probed by one query): gemv reads B once, where
         * gemm would first pack it. */
        cblas_sgemv(CblasRowMajor, CblasNoTrans, (blasint)n, (blasint)k, alpha, b, (blasint)ldb, a,
                    1, beta, c, 1);
        return;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, (blasint)m,
                (blasint)n, (blasint)k, alpha, a, (blasint)lda, b, (blasint)ldb, beta, c,
                (blasint)ldc);
}

static char pl__blas_text[200];

static void pl__blas_describe_init(void)
{
    snprintf(pl__blas_text, sizeof pl__blas_text, "%s (%s kernels)", openblas_get_config(),
             openblas_get_corename());
}

const char *pl_blas_describe(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, pl__blas_describe_init);
    return pl__blas_text;
}
