/* pl_rng: counter-based random numbers, so generated data depends only on (seed, what, batch,
 * element) and never on thread timing, depth or executor. A GPU can compute element i directly.
 *
 * Exact definition (mix64 and the golden constant G = 0x9E3779B97F4A7C15 are in pl_hash.h):
 *   key(seed, domain, id, batch) = mix64(mix64(mix64(seed + domain * G) ^ (id + G)) ^ (batch + G))
 *   u64(key, i)                  = mix64(key + (i + 1) * G)          (SplitMix64 at step i + 1)
 * Domains: PL_RNG_SOURCE (id = the source stage's index), PL_RNG_INIT (id = the buffer's index,
 * batch = 0; every slot of a per-batch buffer gets the same contents).
 * Values: floats: r = (u >> 11) * 2^-53 in [0, 1), v = min + (max - min) * r computed in double,
 * then rounded to the dtype (f32/f16/bf16: to f32 first, then to nearest even); a result equal to
 * max is replaced by min. Integers: v = min + (u mod (max - min)), for max > min (else min). */
#ifndef PL_RNG_H
#define PL_RNG_H

#include <stddef.h>
#include <stdint.h>

#include "pl_hash.h"
#include "pl_spec.h"

enum { PL_RNG_SOURCE = 1, PL_RNG_INIT = 2 };

static inline uint64_t pl_rng_key(uint64_t seed, uint64_t domain, uint64_t id, uint64_t batch)
{
    uint64_t k = pl_mix64(seed + domain * PL_HASH_GOLDEN);
    k = pl_mix64(k ^ (id + PL_HASH_GOLDEN));
    return pl_mix64(k ^ (batch + PL_HASH_GOLDEN));
}

static inline uint64_t pl_rng_u64(uint64_t key, uint64_t i)
{
    return pl_mix64(key + (i + 1) * PL_HASH_GOLDEN);
}

/* Default bounds for a dtype: [-1, 1) for floats, [0, 100) for integers. */
void pl_rng_default_range(pl_dtype t, double *min, double *max);

/* Fills `count` elements of dtype `t` at `dst` with u64(key, first + j) mapped into [min, max). */
void pl_rng_fill(void *dst, pl_dtype t, int64_t count, uint64_t key, uint64_t first, double min,
                 double max);

#endif
