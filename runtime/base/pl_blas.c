/* pl_blas: OpenBLAS behind pl_blas.h, loaded with dlopen on first use; cblas.h is included here
 * only (for its types: the functions are looked up, not linked). */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include "pl_blas.h"

#include <cblas.h>
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>

/* OpenBLAS's BUFFER_SIZE on x86-64 (32 << 22): each work buffer is one mapping of this size
 * (strace shows one 134217728-byte mmap per buffer). The slack leaves room for what other
 * threads allocate between the trial mapping and OpenBLAS's own. */
#define PL__BLAS_BUF ((size_t)128 << 20)
#define PL__BLAS_SLACK ((size_t)16 << 20)
/* Above this m * n * k an sgemm surely takes a work buffer (below it OpenBLAS may use its small
 * matrix kernels, which take none). */
#define PL__BLAS_SURE 2000000.0

typedef void (*pl__sgemm_fn)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, blasint,
                             blasint, blasint, float, const float *, blasint, const float *,
                             blasint, float, float *, blasint);
typedef void (*pl__sgemv_fn)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, blasint, blasint, float,
                             const float *, blasint, const float *, blasint, float, float *,
                             blasint);
typedef void (*pl__setn_fn)(int);
typedef char *(*pl__str_fn)(void);

static struct {
    void *h;
    pl__sgemm_fn sgemm;
    pl__sgemv_fn sgemv;
    pl__setn_fn set_num_threads;
    pl__str_fn get_config, get_corename;
    pl_error open_err, load_err; /* status PL_OK once opened / loaded */
    char text[200];
} pl__blas;

/* The buffer count (pl_blas.h): calls in flight, buffers OpenBLAS surely holds, and calls in
 * flight admitted by a trial mapping (each may still map a buffer of its own). */
static pthread_mutex_t pl__mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pl__cv = PTHREAD_COND_INITIALIZER;
static int pl__active, pl__mapped, pl__trial;
/* Under an address-space or data limit (read when OpenBLAS loads). Without one a mapping fails
 * only when the machine is out of memory, and calls skip the count (no lock per call). */
static bool pl__bounded;

static bool pl__limited(int resource)
{
    struct rlimit rl;
    return getrlimit(resource, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY;
}

static bool pl__room(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return false;
    munmap(p, bytes);
    return true;
}

/* Admits one call. maps: it surely takes a work buffer when none is free. Returns 1 when
 * admitted by a trial mapping, 0 when a mapped buffer is free for it, -1 when there is no room
 * for a buffer and none will come free (no call in flight). */
static int pl__enter(bool maps)
{
    int how = 0;
    if (!pl__bounded) return 0;
    pthread_mutex_lock(&pl__mu);
    while (pl__active >= pl__mapped) {
        if (pl__room((size_t)(pl__trial + 1) * (PL__BLAS_BUF + PL__BLAS_SLACK))) {
            how = 1;
            pl__trial++;
            if (maps) pl__mapped++;
            break;
        }
        if (pl__active == 0) {
            pthread_mutex_unlock(&pl__mu);
            return -1;
        }
        pthread_cond_wait(&pl__cv, &pl__mu);
    }
    pl__active++;
    pthread_mutex_unlock(&pl__mu);
    return how;
}

static void pl__leave(int how)
{
    if (!pl__bounded) return;
    pthread_mutex_lock(&pl__mu);
    pl__active--;
    if (how == 1) pl__trial--;
    pthread_cond_broadcast(&pl__cv);
    pthread_mutex_unlock(&pl__mu);
}

static void *pl__dlopen(const char **name, pl_error *err)
{
    static const char *const names[] = {"libopenblas.so.0",
#ifdef PL_OPENBLAS_FILE
                                        PL_OPENBLAS_FILE,
#endif
                                        NULL};
    char why[512] = "not found";
    bool no_room = false;
    for (int i = 0; names[i]; i++) {
        errno = 0;
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (h) {
            *name = names[i];
            return h;
        }
        /* The loader maps the library's segments: under an address-space limit that fails with
         * ENOMEM ("failed to map segment"), which is out of memory, not a missing library. */
        no_room = no_room || errno == ENOMEM;
        const char *e = dlerror();
        snprintf(why, sizeof why, "%s", e ? e : "not found");
        no_room = no_room || strstr(why, "failed to map segment") || strstr(why, "Cannot allocate");
    }
    if (no_room)
        pl_error_set(err, PL_ENOMEM,
                     "out of memory: no address space left to load OpenBLAS (libopenblas.so.0): "
                     "%s; raise the address-space limit (ulimit -v)",
                     why);
    else
        pl_error_set(err, PL_ERUNTIME, "error: cannot load OpenBLAS (libopenblas.so.0): %s", why);
    return NULL;
}

/* dlopen with OPENBLAS_NUM_THREADS=1 (read by OpenBLAS's constructor, which starts its threads),
 * the user's value put back after. */
static pl_status pl__blas_dlopen(pl_error *err)
{
    const char *old = getenv("OPENBLAS_NUM_THREADS");
    char *keep = old ? strdup(old) : NULL;
    if (old && !keep) return pl_error_set(err, PL_ENOMEM, "error: out of memory loading OpenBLAS");
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    const char *name = NULL;
    pl__blas.h = pl__dlopen(&name, err);
    if (keep)
        setenv("OPENBLAS_NUM_THREADS", keep, 1);
    else
        unsetenv("OPENBLAS_NUM_THREADS");
    free(keep);
    if (!pl__blas.h) return err->status;
    pl__blas.sgemm = (pl__sgemm_fn)dlsym(pl__blas.h, "cblas_sgemm");
    pl__blas.sgemv = (pl__sgemv_fn)dlsym(pl__blas.h, "cblas_sgemv");
    pl__blas.set_num_threads = (pl__setn_fn)dlsym(pl__blas.h, "openblas_set_num_threads");
    pl__blas.get_config = (pl__str_fn)dlsym(pl__blas.h, "openblas_get_config");
    pl__blas.get_corename = (pl__str_fn)dlsym(pl__blas.h, "openblas_get_corename");
    if (!pl__blas.sgemm || !pl__blas.sgemv || !pl__blas.set_num_threads || !pl__blas.get_config ||
        !pl__blas.get_corename)
        return pl_error_set(
            err, PL_ERUNTIME,
            "error: %s is not OpenBLAS (no cblas_sgemm, openblas_get_corename, ...)", name);
    /* Already in the process through another door (a program that links OpenBLAS itself): its
     * threads were started as it liked, and only the count for calls can change. */
    pl__blas.set_num_threads(1);
    return PL_OK;
}

static void pl__blas_open(void)
{
    pl_error *err = &pl__blas.open_err;
    pl_error_clear(err);
    /* Loaded by someone else first (linked): it cannot be loaded again with another core. */
    void *other = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_NOLOAD);
    if (other) dlclose(other);
    if (pl__blas_dlopen(err) != PL_OK) return;
    const char *core = other ? NULL : pl_blas_better_core();
    if (core && setenv("OPENBLAS_CORETYPE", core, 1) == 0) {
        dlclose(pl__blas.h);
        if (pl__blas_dlopen(err) != PL_OK) return;
    }
    snprintf(pl__blas.text, sizeof pl__blas.text, "%s (%s kernels)", pl__blas.get_config(),
             pl__blas.get_corename());
}

static pthread_once_t pl__open_once = PTHREAD_ONCE_INIT;
static pthread_once_t pl__load_once = PTHREAD_ONCE_INIT;

static void pl__sgemm_raw(bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                          const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                          float *c, int64_t ldc)
{
    if (m == 1 && trans_b) {
        /* One row against many (an IVF list probed by one query): gemv reads B once, where
         * gemm would first pack it. */
        pl__blas.sgemv(CblasRowMajor, CblasNoTrans, (blasint)n, (blasint)k, alpha, b, (blasint)ldb,
                       a, 1, beta, c, 1);
        return;
    }
    pl__blas.sgemm(CblasRowMajor, CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, (blasint)m,
                   (blasint)n, (blasint)k, alpha, a, (blasint)lda, b, (blasint)ldb, beta, c,
                   (blasint)ldc);
}

/* Maps the first work buffer with one sgemm large enough to take it, so that every later call
 * can at worst wait for a buffer (pl__enter never returns -1 after this). */
static void pl__blas_load(void)
{
    pl_error *err = &pl__blas.load_err;
    pl_error_clear(err);
    pthread_once(&pl__open_once, pl__blas_open);
    if (pl__blas.open_err.status != PL_OK) {
        *err = pl__blas.open_err;
        return;
    }
    pl__bounded = pl__limited(RLIMIT_AS) || pl__limited(RLIMIT_DATA);
    enum { N = 128 };
    float *m = calloc(3 * N * N, sizeof *m);
    int how = m ? pl__enter(true) : -1;
    if (how < 0) {
        struct rlimit rl;
        char lim[64] = "";
        if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
            snprintf(lim, sizeof lim, " (address-space limit %llu MiB)",
                     (unsigned long long)(rl.rlim_cur >> 20));
        else if (getrlimit(RLIMIT_DATA, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
            snprintf(lim, sizeof lim, " (data limit %llu MiB)",
                     (unsigned long long)(rl.rlim_cur >> 20));
        pl_error_set(err, PL_ENOMEM,
                     "error: out of memory: OpenBLAS needs %zu MiB of address space for a work "
                     "buffer%s",
                     (PL__BLAS_BUF + PL__BLAS_SLACK) >> 20, lim);
        free(m);
        return;
    }
    pl__sgemm_raw(false, N, N, N, 1.0f, m, N, m + N * N, N, 0.0f, m + 2 * N * N, N);
    pl__leave(how);
    free(m);
}

pl_status pl_blas_load(pl_error *err)
{
    pthread_once(&pl__load_once, pl__blas_load);
    if (pl__blas.load_err.status == PL_OK) return PL_OK;
    if (err) *err = pl__blas.load_err;
    return pl__blas.load_err.status;
}

static void pl__need_loaded(void)
{
    if (pl_blas_load(NULL) == PL_OK) return;
    fprintf(stderr, "%s (pl_blas_load was not called first)\n", pl__blas.load_err.msg);
    abort();
}

void pl_blas_sgemm(bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                   int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc)
{
    pl__need_loaded();
    if (m <= 0 || n <= 0) return;
    bool maps = !(m == 1 && trans_b) && (double)m * (double)n * (double)k > PL__BLAS_SURE;
    int how = pl__enter(maps); /* >= 0: a buffer is mapped (loaded) */
    pl__sgemm_raw(trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    pl__leave(how);
}

const char *pl_blas_better_core(void)
{
    if (getenv("OPENBLAS_CORETYPE")) return NULL;
    const char *picked = getenv("PIPECTL_BLAS_PICKED");
    if ((!picked || !*picked) && pl__blas.get_corename) picked = pl__blas.get_corename();
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

const char *pl_blas_describe(void)
{
    pthread_once(&pl__open_once, pl__blas_open);
    if (pl__blas.open_err.status != PL_OK) {
        const char *m = pl__blas.open_err.msg;
        snprintf(pl__blas.text, sizeof pl__blas.text, "OpenBLAS not loaded: %.170s",
                 strncmp(m, "error: ", 7) == 0 ? m + 7 : m);
    }
    return pl__blas.text;
}

#ifdef PL_WITH_FAISS
/* FAISS's BLAS and LAPACK calls (Fortran names; every argument a pointer, no hidden string
 * lengths, as FAISS declares them), forwarded to the loaded library through the buffer count.
 * Hidden in the build (-fvisibility=hidden), so they bind FAISS's calls and nothing else. The
 * search stage calls pl_blas_load before FAISS runs. */
#define PL__P6 void *a1, void *a2, void *a3, void *a4, void *a5, void *a6
#define PL__A6 a1, a2, a3, a4, a5, a6
#define PL__P7 PL__P6, void *a7
#define PL__A7 PL__A6, a7
#define PL__P8 PL__P7, void *a8
#define PL__A8 PL__A7, a8
#define PL__P9 PL__P8, void *a9
#define PL__A9 PL__A8, a9
#define PL__P10 PL__P9, void *a10
#define PL__A10 PL__A9, a10
#define PL__P13 PL__P10, void *a11, void *a12, void *a13
#define PL__A13 PL__A10, a11, a12, a13
#define PL__P14 PL__P13, void *a14
#define PL__A14 PL__A13, a14
#define PL__FORWARD(name, n)                                                                       \
    int name(PL__P##n);                                                                            \
    int name(PL__P##n)                                                                             \
    {                                                                                              \
        static void (*fn)(PL__P##n);                                                               \
        pl__need_loaded();                                                                         \
        if (!__atomic_load_n(&fn, __ATOMIC_ACQUIRE)) {                                             \
            void (*f)(PL__P##n);                                                                   \
            *(void **)&f = dlsym(pl__blas.h, #name);                                               \
            if (!f) {                                                                              \
                fprintf(stderr, "error: OpenBLAS has no %s\n", #name);                             \
                abort();                                                                           \
            }                                                                                      \
            __atomic_store_n(&fn, f, __ATOMIC_RELEASE);                                            \
        }                                                                                          \
        int how = pl__enter(false);                                                                \
        fn(PL__A##n);                                                                              \
        pl__leave(how);                                                                            \
        return 0;                                                                                  \
    }
PL__FORWARD(sgemm_, 13)
PL__FORWARD(dgemm_, 13)
PL__FORWARD(ssyrk_, 10)
PL__FORWARD(sgeqrf_, 8)
PL__FORWARD(sorgqr_, 9)
PL__FORWARD(sgesvd_, 14)
PL__FORWARD(dgesvd_, 14)
PL__FORWARD(sgetrf_, 6)
PL__FORWARD(dgetrf_, 6)
PL__FORWARD(sgetri_, 7)
PL__FORWARD(dgetri_, 7)
PL__FORWARD(dsyev_, 9)
PL__FORWARD(sgelsd_, 14)
#endif
