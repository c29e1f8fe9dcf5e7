/* search_faiss_none: the FAISS entry points of pl_search.h in a build without FAISS; `index:` is
 * refused at check time before any of these could be reached. */
#ifndef PL_WITH_FAISS
#include "pl_search.h"

#define PL__NO_FAISS                                                                               \
    pl_error_set(err, PL_EINPUT,                                                                   \
                 "error: pipectl was built without FAISS; install libfaiss-dev and rebuild")

bool pl_faiss_available(void)
{
    return false;
}

pl_status pl_faiss_load(const char *path, int64_t nprobe, int64_t ef_search, pl_faiss **out,
                        pl_error *err)
{
    *out = NULL;
    return PL__NO_FAISS;
}

void pl_faiss_free(pl_faiss *index) {}

int64_t pl_faiss_dim(const pl_faiss *index)
{
    return 0;
}

int64_t pl_faiss_ntotal(const pl_faiss *index)
{
    return 0;
}

int pl_faiss_metric(const pl_faiss *index)
{
    return -1;
}

const char *pl_faiss_describe(const pl_faiss *index)
{
    return "";
}

pl_status pl_faiss_search(const pl_faiss *index, pl_pool *pool, int parallel, int64_t nq,
                          const float *queries, int64_t k, int64_t *labels, float *dist,
                          pl_error *err)
{
    return PL__NO_FAISS;
}

pl_status pl_faiss_build(const float *corpus, int64_t n, int64_t d, const char *factory,
                         pl_metric metric, int64_t train, int threads, const char *path,
                         pl_error *err)
{
    return PL__NO_FAISS;
}
#else
typedef int pl__search_faiss_none_unused; /* ISO C wants a declaration in every file */
#endif
