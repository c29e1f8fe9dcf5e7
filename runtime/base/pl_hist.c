/* pl_hist: log-linear histogram (HdrHistogram's layout with 64 sub-buckets), dense between the
 * lowest and highest bucket used. */
#include "pl_hist.h"

#include <stdlib.h>
#include <string.h>

enum { PL__SUB = 1 << PL_HIST_SUB_BITS };

void pl_hist_init(pl_hist *h)
{
    memset(h, 0, sizeof *h);
}

void pl_hist_fini(pl_hist *h)
{
    if (!h) return;
    free(h->counts);
    h->counts = NULL;
    h->lo = h->hi = 0;
}

int pl_hist_bucket(int64_t v)
{
    if (v < 2 * PL__SUB) return v < 0 ? 0 : (int)v;
    int e = 63 - __builtin_clzll((unsigned long long)v); /* >= SUB_BITS + 1 */
    int shift = e - PL_HIST_SUB_BITS;
    return ((e - PL_HIST_SUB_BITS + 1) << PL_HIST_SUB_BITS) + (int)((v >> shift) - PL__SUB);
}

void pl_hist_bucket_range(int idx, int64_t *low, int64_t *width)
{
    if (idx < 2 * PL__SUB) {
        *low = idx;
        *width = 1;
        return;
    }
    int shift = (idx >> PL_HIST_SUB_BITS) - 1; /* e - SUB_BITS */
    int64_t m = (idx & (PL__SUB - 1)) + PL__SUB;
    *low = m << shift;
    *width = (int64_t)1 << shift;
}

/* Makes bucket idx part of [lo, hi), with some room on the side it grew so a slowly drifting
 * stage does not reallocate per value. False when out of memory. */
static bool pl__reach(pl_hist *h, int idx)
{
    if (h->counts && idx >= h->lo && idx < h->hi) return true;
    int lo = h->counts ? h->lo : idx, hi = h->counts ? h->hi : idx + 1;
    if (idx < lo) lo = idx - 8 < 0 ? 0 : idx - 8;
    if (idx >= hi) hi = idx + 9 > PL_HIST_BUCKETS ? PL_HIST_BUCKETS : idx + 9;
    uint64_t *c = calloc((size_t)(hi - lo), sizeof *c);
    if (!c) return false;
    if (h->counts) memcpy(c + (h->lo - lo), h->counts, (size_t)(h->hi - h->lo) * sizeof *c);
    free(h->counts);
    h->counts = c;
    h->lo = lo;
    h->hi = hi;
    return true;
}

void pl_hist_add(pl_hist *h, int64_t v)
{
    if (v < 0) v = 0;
    if (h->count == 0 || v < h->min) h->min = v;
    if (h->count == 0 || v > h->max) h->max = v;
    h->count++;
    h->sum = h->sum > INT64_MAX - v ? INT64_MAX : h->sum + v;
    int idx = pl_hist_bucket(v);
    if (!pl__reach(h, idx)) {
        h->lossy = true;
        if (!h->counts) return; /* quantiles fall back to min/max */
        idx = idx < h->lo ? h->lo : h->hi - 1;
    }
    h->counts[idx - h->lo]++;
}

int64_t pl_hist_quantile(const pl_hist *h, double q)
{
    if (h->count == 0) return 0;
    /* rank as the exact report computed it: ceil(q * count), with a margin for float error */
    int64_t rank = (int64_t)((double)h->count * q + 0.999999);
    if (rank < 1) rank = 1;
    if (rank > h->count) rank = h->count;
    if (rank == 1) return h->min;
    if (rank == h->count) return h->max;
    if (!h->counts) return rank * 2 <= h->count ? h->min : h->max;
    int64_t seen = 0;
    for (int i = 0; i < h->hi - h->lo; i++) {
        seen += (int64_t)h->counts[i];
        if (seen >= rank) {
            int64_t low, width;
            pl_hist_bucket_range(h->lo + i, &low, &width);
            int64_t mid = low + (width - 1) / 2;
            return mid < h->min ? h->min : mid > h->max ? h->max : mid;
        }
    }
    return h->max;
}
