/* pl_shard: the batch mapping of a shard and the names of its parts (pl_shard.h). */
#include "pl_shard.h"

#include <stdio.h>
#include <string.h>

/* Range mode: shard K starts at floor(K * total / count); the blocks differ by at most one batch.
 * total <= 2^40 and count < 2^31 keep the product inside int64. */
static int64_t pl__range_start(const pl_shard *sh, int64_t total, int64_t k)
{
    return k * total / sh->count;
}

int64_t pl_shard_batches(const pl_shard *sh, int64_t total)
{
    if (!pl_shard_on(sh) || total <= 0) return total;
    if (sh->mode == PL_SHARD_RANGE)
        return pl__range_start(sh, total, sh->index + 1) - pl__range_start(sh, total, sh->index);
    return sh->index < total ? (total - sh->index + sh->count - 1) / sh->count : 0;
}

int64_t pl_shard_global(const pl_shard *sh, int64_t total, int64_t i)
{
    if (!pl_shard_on(sh)) return i;
    if (sh->mode == PL_SHARD_RANGE) return pl__range_start(sh, total, sh->index) + i;
    return i * sh->count + sh->index;
}

int64_t pl_shard_local(const pl_shard *sh, int64_t total, int64_t b)
{
    if (!pl_shard_on(sh)) return b;
    if (b < 0 || b >= total) return -1;
    if (sh->mode == PL_SHARD_RANGE) {
        int64_t lo = pl__range_start(sh, total, sh->index);
        int64_t hi = pl__range_start(sh, total, sh->index + 1);
        return b >= lo && b < hi ? b - lo : -1;
    }
    return b % sh->count == sh->index ? b / sh->count : -1;
}

const char *pl_shard_mode_name(pl_shard_mode m)
{
    return m == PL_SHARD_RANGE ? "range" : "stride";
}

bool pl_shard_part_path(const char *path, int index, int count, char *out, size_t cap)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    const char *dot = strrchr(base, '.');
    /* ".hidden" is a name, not an extension */
    size_t stem = dot && dot > base ? (size_t)(dot - path) : strlen(path);
    int n = snprintf(out, cap, "%.*s.part-%d-of-%d%s", (int)stem, path, index, count, path + stem);
    return n >= 0 && (size_t)n < cap;
}
