/* pl_blas: OpenBLAS behind pl_blas.h; cblas.h is included here only. */
#include "pl_blas.h"

#include <cblas.h>
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

const char *pl_blas_better_core(void)
{
    if (getenv("OPENBLAS_CORETYPE")) return NULL;
    const char *picked = getenv("PIPECTL_BLAS_PICKED");
    if (!picked || !*picked) picked = openblas_get_corename();
    if (!picked) return NULL;
    char lc[32];
    size_t n = 0;
    for (; picked[n] && n + 1 < sizeof lc; n++)
        lc[n] = (char)tolower((unsigned char)picked[n]);
    lc[n] = '\0';
    static const char *const avx512[] = {"skylakex", "cooperlake", "sapphirerapids", NULL};
    static const char *const pre_avx2[] = {
        "prescott",   "core2",      "penryn",    "dunnington", "nehalem",   "atom",   "sandybridge",
        "katmai",     "coppermine", "northwood", "banias",     "barcelona", "bobcat", "bulldozer",
        "piledriver", "opteron",    "athlon",    "generic",    "unknown",   NULL};
    bool is512 = false, old = false;
    for (int i = 0; avx512[i]; i++)
        is512 = is512 || strcmp(lc, avx512[i]) == 0;
    for (int i = 0; pre_avx2[i]; i++)
        old = old || strcmp(lc, pre_avx2[i]) == 0;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") && !is512)
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && old) return "Haswell";
#else
    (void)is512;
    (void)old;
#endif
    return NULL;
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
