/* pl_hist: a fixed-accuracy histogram of non-negative 64-bit values (stage times in ns), so a
 * run's per-stage statistics take memory that does not grow with its batch count. Log-linear
 * buckets, as HdrHistogram lays them out: values below 128 have a bucket each (exact); above,
 * each power of two [2^e, 2^(e+1)) is cut into 64 equal buckets of width 2^(e-6). A quantile is
 * reported as the middle of its bucket, clamped to the exact min and max, so it is within 1/128
 * (0.79%) of the exact order statistic: two significant digits or better. count, min, max and sum
 * are exact. The buckets are stored densely between the lowest and highest one used (a stage whose
 * times stay within a factor of 10 uses about 220 of them, 1.7 KiB), never more than
 * PL_HIST_BUCKETS (29 KiB) whatever the values. */
#ifndef PL_HIST_H
#define PL_HIST_H

#include <stdbool.h>
#include <stdint.h>

enum {
    PL_HIST_SUB_BITS = 6,                                         /* 64 buckets per power of two */
    PL_HIST_BUCKETS = (64 - PL_HIST_SUB_BITS) << PL_HIST_SUB_BITS /* up to INT64_MAX */
};

typedef struct pl_hist {
    int64_t count;
    int64_t min, max; /* valid when count > 0 */
    int64_t sum;      /* exact (saturates at INT64_MAX: 292 years of stage time) */
    uint64_t *counts; /* [hi - lo]: buckets lo..hi-1; owned */
    int lo, hi;
    bool lossy; /* growing the buckets failed once: later values went to the nearest bucket */
} pl_hist;

void pl_hist_init(pl_hist *h);
void pl_hist_fini(pl_hist *h); /* frees the buckets; safe on a zeroed histogram */
/* Adds one value (negative values count as 0). Never fails: out of memory, the value goes into
 * the nearest bucket held (h->lossy says so); count, min, max and sum stay exact. */
void pl_hist_add(pl_hist *h, int64_t v);
/* The nearest-rank quantile: the value of rank max(1, ceil(q * count)) in sorted order (q = 0.5:
 * the lower median), within the bound above; 0 when empty. */
int64_t pl_hist_quantile(const pl_hist *h, double q);
/* The bucket of v, and the bucket's first value and width (tests; the docs' accuracy claim). */
int pl_hist_bucket(int64_t v);
void pl_hist_bucket_range(int idx, int64_t *low, int64_t *width);

#endif
