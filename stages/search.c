/* search: top-k nearest corpus vectors of each query (inner product or L2) on a CPU thread pool,
 * then gathers the hits' payload rows: the retrieval step of RAG. */
#include "pl_stage.h"

static const pl_key pl__search_keys[] = {
    {"queries", PL_KEY_NAME, NULL, NULL, "host f32 buffer [q, d] (required)"},
    {"corpus", PL_KEY_NAME, NULL, NULL, "host f32 buffer [n, d], usually persistent (required)"},
    {"k", PL_KEY_INT, NULL, NULL, "hits per query, 1..n (required)"},
    {"metric", PL_KEY_ENUM, "ip|l2", "ip", "inner product (larger is nearer) or squared L2"},
    {"ids", PL_KEY_NAME, NULL, NULL, "host i32 buffer [q, k]: hit indices, nearest first (required)"},
    {"payload", PL_KEY_NAME, NULL, NULL, "host buffer [n, p] of per-document data (token ids)"},
    {"hits", PL_KEY_NAME, NULL, NULL, "host buffer [q, k, p], payload's dtype: gathered rows"},
    {"threads", PL_KEY_INT, NULL, "0 (the run's host workers)", "threads to search with"},
    {NULL, 0, NULL, NULL, NULL},
};

const pl_kind pl_kind_search = {
    .name = "search",
    .engine = PL_ENGINE_HOST,
    .keys = pl__search_keys,
    .doc = "top-k vector search over a corpus, then gathers the hits' payload",
};
