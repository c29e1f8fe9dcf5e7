/* pl_search: the engines behind the search stage (stages/search/search.c), callable on their own
 * (the benchmark tests/bench/bench_search.c, the tests):
 * - exact top-k (stages/search/search_exact.c): the query batch times corpus tiles through BLAS
 * sgemm, one tile per pool task, then a bounded heap per query; the tiles depend on the corpus
 * shape only, so results never depend on the thread count;
 * - FAISS indexes (stages/search/search_faiss.cpp, when built with FAISS): load, search (IVF-Flat
 * scanned with BLAS by pipectl, others by FAISS), build. */
#ifndef PL_SEARCH_H
#define PL_SEARCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pl_pool.h"
#include "pl_spec.h"

typedef enum pl_metric {
    PL_METRIC_IP,     /* inner product, larger is nearer */
    PL_METRIC_L2,     /* squared Euclidean distance, smaller is nearer */
    PL_METRIC_COSINE, /* q.c / (|q| |c|), larger is nearer; a zero corpus vector scores 0 */
} pl_metric;

/* A corpus as the exact engine reads it (borrowed). */
typedef struct pl_search_corpus {
    const void *data; /* [n, d] row-major, dtype f32, f16 or bf16 */
    pl_dtype dtype;
    int64_t n, d;
    /* Per row, from pl_search_norms: l2: |c|^2, cosine: 1/|c| (0 for a zero row). NULL for ip
     * (not read). */
    const float *norms;
} pl_search_corpus;

/* The per-row values the metric needs (see norms above; ip: |c|^2 too, as the finiteness check
 * needs the sum anyway), summed in double. Returns -1 when every row is finite, else the index
 * of the first row holding a NaN or an infinity (search refuses such a corpus: a NaN would make
 * "nearest" meaningless). out: n floats. */
int64_t pl_search_norms(const void *data, pl_dtype dtype, int64_t n, int64_t d, pl_metric metric,
                        float *out);

/* pl_search_norms with the rows shared over the caller and up to parallel-1 helpers of `pool`
 * (the same values, bit for bit): for a corpus whose norms are computed per batch, a serial pass
 * over n x d would otherwise be the batch's critical path. */
int64_t pl_search_norms_par(pl_pool *pool, int parallel, const void *data, pl_dtype dtype,
                            int64_t n, int64_t d, pl_metric metric, float *out);

/* Before the first search: each of up to `parallel` threads (the caller and helpers of `pool`)
 * makes one sgemm of the shape pl_search_exact gives it for nq queries against an n x d corpus,
 * so OpenBLAS sets up its per-thread work buffers (first-touch page faults under its allocator's
 * lock) now. The tasks wait for each other (20 ms at most) so they land on different threads.
 * Best effort: nothing is reported. */
void pl_search_warm(pl_pool *pool, int parallel, int64_t nq, int64_t n, int64_t d);

/* Exact top-k of each of the nq queries (f32 [nq, d]) against the corpus, nearest first, ties
 * to the smaller index; a NaN score (a NaN in a query) is never near (it ranks as -infinity).
 * ids: i32 [nq, k]; scores (may be NULL): f32 [nq, k], each hit's value of the metric (ip: q.c;
 * l2: |q-c|^2 computed as |q|^2 - 2 q.c + |c|^2, at least 0; cosine: q.c / (|q| |c|)). Runs on the
 * caller and up to parallel-1 helpers of `pool` (NULL: the caller only). 1 <= k <= n. PL_ENOMEM
 * when scratch memory cannot be had; `who` (may be NULL) starts that message. */
pl_status pl_search_exact(pl_pool *pool, int parallel, const float *queries, int64_t nq,
                          const pl_search_corpus *corpus, pl_metric metric, int64_t k, int32_t *ids,
                          float *scores, const char *who, pl_error *err);

/* Where the time of one pl_search_exact call went (pl_search_exact_prof; bench_search prints
 * it). Wall times: setup (scratch), pool (the tiles, from
 * submission until the last task ended), merge (the slots' heaps, on the caller). Per-slot
 * times summed over the slots: gemm (sgemm), convert (f16/bf16 widened), select (metric and
 * heaps); idle = slots x pool - their sum (waiting to join, for the lock, or for the last task). */
typedef struct pl_search_prof {
    double wall_s, setup_s, pool_s, merge_s;
    double gemm_s, convert_s, select_s;
    double busy_max_s, busy_min_s; /* the busiest and least busy slot */
    int64_t tasks, tile;
    int slots;
} pl_search_prof;

/* pl_search_exact that fills *prof (may be NULL: no clock is read). */
pl_status pl_search_exact_prof(pl_pool *pool, int parallel, const float *queries, int64_t nq,
                               const pl_search_corpus *corpus, pl_metric metric, int64_t k,
                               int32_t *ids, float *scores, const char *who, pl_search_prof *prof,
                               pl_error *err);

/* One line: "wall 8.1 ms = setup ... ; 16 slots, ... idle ... ms". */
void pl_search_prof_format(const pl_search_prof *prof, char *buf, size_t cap);

/* Corpus rows per tile for a corpus of n rows of dimension d: about 256 KiB of f32 (the tile,
 * converted to f32 where the corpus is f16 or bf16, stays in a core's L2 cache), cut finer (down
 * to 64 rows) for a small corpus so that its tiles balance over 16 threads. Depends on n and d
 * only, never on the thread count. */
int64_t pl_search_tile_rows(int64_t n, int64_t d);

/* FAISS (search_faiss.cpp). Without FAISS in the build these report PL_EINPUT "pipectl was
 * built without FAISS". */
typedef struct pl_faiss pl_faiss;

/* True when this build has FAISS. */
bool pl_faiss_available(void);

/* pl_intr_pending() (a stop or an abort is raised) for search_faiss.cpp, which cannot include
 * pl_intr.h (C11 atomics). */
bool pl_search_interrupted(void);

/* Loads the index file `path` (read-only), sets nprobe / ef_search where given (> 0) and the
 * index has them. Errors are PL_EINPUT naming the file: unreadable or corrupt. *out is owned
 * by the caller (pl_faiss_free). */
pl_status pl_faiss_load(const char *path, int64_t nprobe, int64_t ef_search, pl_faiss **out,
                        pl_error *err);
void pl_faiss_free(pl_faiss *index);
int64_t pl_faiss_dim(const pl_faiss *index);
int64_t pl_faiss_ntotal(const pl_faiss *index);
/* The index's metric: PL_METRIC_IP or PL_METRIC_L2 (others report -1). */
int pl_faiss_metric(const pl_faiss *index);
/* "IVF4096,Flat"-style description (class name), static or owned by the index. */
const char *pl_faiss_describe(const pl_faiss *index);

/* Top-k of nq queries (f32 [nq, d]) on the caller and up to parallel-1 helpers of `pool`.
 * An IndexIVFFlat with a flat quantizer is scanned by pipectl itself: the coarse step is
 * pl_search_exact over the centroids, then each probed list is one pool task multiplying the
 * queries that probe it by the list's vectors with BLAS (each list read once per batch); ties to
 * the smaller id. Other indexes (HNSW, PQ, ...) run FAISS's own search on query blocks, one
 * FAISS (OpenMP) thread each. labels:
 * nq * k, -1 where the index found fewer than k; dist: nq * k, the metric's value (inner
 * product, or squared distance), may be NULL. Thread-safe: several threads may search one index.
 * Messages carry no "error: " prefix (the caller adds stage and batch). An interrupt (pl_intr)
 * stops it: FAISS's own search through its InterruptCallback (at its block boundaries), pipectl's
 * list scan at each chunk, and the query blocks before they start; then PL_EINTR. */
pl_status pl_faiss_search(const pl_faiss *index, pl_pool *pool, int parallel, int64_t nq,
                          const float *queries, int64_t k, int64_t *labels, float *dist,
                          pl_error *err);

/* Builds an index with FAISS's index_factory(d, factory, metric) over the f32 corpus [n, d]
 * (cosine: rows normalised first, inner-product index), trains it on the corpus (or on its
 * first `train` rows when 0 < train < n), adds every row and writes it to `path`. Uses
 * FAISS's OpenMP threads (`threads`, 0: its default). PL_EINPUT for a bad factory string or an
 * unwritable file. */
pl_status pl_faiss_build(const float *corpus, int64_t n, int64_t d, const char *factory,
                         pl_metric metric, int64_t train, int threads, const char *path,
                         pl_error *err);

#endif
