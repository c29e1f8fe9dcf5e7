/* test_stats: the fixed-size run statistics (pl_hist, pl_timing): quantiles within the documented
 * 1/128 of the exact order statistic, exact count/min/max/mean, the busy union exact when spans
 * arrive out of order, a stage running ahead of the ring, and memory that does not grow with the
 * number of values. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pl_plan.h"
#include "pl_test.h"
#include "pl_test_plan.h"
#include "pl_timing.h"

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t rng = 0x9E3779B97F4A7C15u;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* The exact nearest-rank quantile, as the report computed it from a sorted array. */
static int64_t exact_q(const int64_t *d, int64_t k, double q)
{
    int64_t i = (int64_t)((double)k * q + 0.999999) - 1;
    return d[i < 0 ? 0 : i >= k ? k - 1 : i];
}

static void test_buckets(void)
{
    /* every bucket's values map back to it, buckets are contiguous, widths keep the bound */
    int64_t prev_end = 0;
    for (int i = 0; i < PL_HIST_BUCKETS; i++) {
        int64_t low, w;
        pl_hist_bucket_range(i, &low, &w);
        CHECK(low == prev_end);
        CHECK_EQ_INT(pl_hist_bucket(low), i);
        CHECK_EQ_INT(pl_hist_bucket(low + (w - 1)), i);
        CHECK(w == 1 || (double)(w / 2) / (double)low <= 1.0 / 128);
        if (low > INT64_MAX - w) break; /* the last bucket ends at 2^63 */
        prev_end = low + w;
    }
    CHECK_EQ_INT(pl_hist_bucket(INT64_MAX), PL_HIST_BUCKETS - 1);
    CHECK_EQ_INT(pl_hist_bucket(-5), 0);
}

static void test_quantiles(void)
{
    /* Log-uniform times from 1 us to 100 ms, and a bimodal set: p50, p99 within 1/128. */
    enum { N = 200000 };
    int64_t *d = malloc(N * sizeof *d);
    for (int shape = 0; shape < 3; shape++) {
        pl_hist h;
        pl_hist_init(&h);
        int64_t sum = 0;
        for (int i = 0; i < N; i++) {
            double u = (double)(next() >> 11) / 9007199254740992.0;
            d[i] = shape == 0   ? (int64_t)(1000.0 * pow(1e5, u))
                   : shape == 1 ? (i % 10 == 0 ? 5000000 : 20000) + (int64_t)(next() % 1000)
                                : (int64_t)(next() % 100); /* small: exact buckets */
            sum += d[i];
            pl_hist_add(&h, d[i]);
        }
        qsort(d, N, sizeof *d, cmp_i64);
        CHECK_EQ_INT(h.count, N);
        CHECK_EQ_INT(h.min, d[0]);
        CHECK_EQ_INT(h.max, d[N - 1]);
        CHECK_EQ_INT(h.sum, sum);
        CHECK(!h.lossy);
        const double qs[] = {0.01, 0.25, 0.5, 0.9, 0.99, 0.999, 1.0};
        for (size_t k = 0; k < sizeof qs / sizeof *qs; k++) {
            int64_t want = exact_q(d, N, qs[k]), got = pl_hist_quantile(&h, qs[k]);
            double rel = want ? fabs((double)(got - want)) / (double)want : (double)got;
            if (shape == 2) CHECK_EQ_INT(got, want);
            CHECK(rel <= 1.0 / 128);
        }
        /* fixed size: the buckets span the values' range, never more than PL_HIST_BUCKETS */
        CHECK(h.hi - h.lo <= PL_HIST_BUCKETS);
        if (shape == 0) CHECK(h.hi - h.lo < 64 * 18 + 20); /* 5 decades = 16.6 octaves */
        pl_hist_fini(&h);
    }
    free(d);
    /* one value, and equal values: exact */
    pl_hist h;
    pl_hist_init(&h);
    CHECK_EQ_INT(pl_hist_quantile(&h, 0.5), 0);
    pl_hist_add(&h, 123456789);
    CHECK_EQ_INT(pl_hist_quantile(&h, 0.5), 123456789);
    CHECK_EQ_INT(pl_hist_quantile(&h, 0.99), 123456789);
    for (int i = 0; i < 1000; i++)
        pl_hist_add(&h, 123456789);
    CHECK_EQ_INT(pl_hist_quantile(&h, 0.5), 123456789);
    /* memory does not grow with the count */
    int width = h.hi - h.lo;
    for (int i = 0; i < 1000000; i++)
        pl_hist_add(&h, 123456789 + (int64_t)(i % 7));
    CHECK_EQ_INT(h.hi - h.lo, width);
    CHECK_EQ_INT(h.count, 1001001);
    pl_hist_fini(&h);
}

/* quickstart: gen (host0), up (h2d), double (compute), down (d2h), save (host1). */
static void test_timing(const pl_plan *plan)
{
    const pl_spec *spec = plan->spec;
    int ns = plan->n_stages, dbl = pl_spec_find_stage(spec, "double"),
        gen = pl_spec_find_stage(spec, "gen");
    pl_error err;
    pl_timing *t = NULL;
    CHECK(pl_timing_new(plan, 4, 2, &t, &err) == PL_OK);
    int rc = -1;
    for (int r = 0; r < t->n_res; r++)
        if (t->res[r].engine == PL_ENGINE_COMPUTE) rc = r;
    CHECK(rc >= 0);
    /* 1000 batches, reported out of order within 3 in flight; the kernel of batch b runs
     * [b*1000, b*1000 + 2500): three overlap at a time, so the SMs are busy 999*1000 + 2500 ns. */
    for (int64_t base = 0; base < 1000; base += 3)
        for (int s = ns - 1; s >= 0; s--)
            for (int64_t b = base + 2; b >= base; b--) {
                if (b >= 1000) continue;
                pl_span sp = s == dbl ? (pl_span){b * 1000 + 1, b * 1000 + 2501}
                                      : (pl_span){b * 1000 + 1, b * 1000 + 11 + s};
                pl_timing_record(t, s, b, sp);
            }
    CHECK_EQ_INT(t->folded, 1000);
    CHECK_EQ_INT(t->hist[dbl].count, 1000);
    CHECK_EQ_INT(pl_hist_quantile(&t->hist[dbl], 0.5), 2500);
    CHECK_EQ_INT(t->res[rc].timed, 1000);
    CHECK_EQ_INT(pl_timing_busy_ns(t, rc), 999 * 1000 + 2500);
    CHECK(pl_timing_span(t, 1, dbl) && pl_timing_span(t, 1, dbl)->start_ns == 1001);
    CHECK(pl_timing_span(t, 2, dbl) == NULL); /* beyond the log */
    CHECK(t->res[rc].busy.n <= 2);
    pl_timing_free(t);

    /* A stage runs far ahead (10 batches) of the others: rows are taken over, the early batches'
     * spans that come late go straight in; counts and the union stay exact. A batch that never
     * completes (the last) is not counted. */
    CHECK(pl_timing_new(plan, 4, 0, &t, &err) == PL_OK);
    for (int64_t b = 0; b < 20; b++)
        pl_timing_record(t, gen, b, (pl_span){b * 100 + 1, b * 100 + 51});
    for (int64_t b = 0; b < 20; b++)
        for (int s = 0; s < ns; s++)
            if (s != gen && !(b == 19 && s == dbl))
                pl_timing_record(t, s, b, (pl_span){b * 100 + 1, b * 100 + 21});
    CHECK_EQ_INT(t->hist[gen].count, 19); /* batch 19 never completes: its gen not counted */
    CHECK_EQ_INT(t->hist[dbl].count, 19);
    for (int r = 0; r < t->n_res; r++)
        if (t->res[r].engine == PL_ENGINE_HOST && t->res[r].stream == plan->stages[gen].stream)
            CHECK_EQ_INT(pl_timing_busy_ns(t, r), 19 * 50);
    CHECK_EQ_INT(pl_timing_busy_ns(t, rc), 19 * 20);
    pl_timing_free(t);

    /* More disjoint intervals than the union keeps open: still exact in time order. */
    CHECK(pl_timing_new(plan, 4, 0, &t, &err) == PL_OK);
    for (int64_t b = 0; b < 5000; b++)
        for (int s = 0; s < ns; s++)
            pl_timing_record(t, s, b, (pl_span){b * 100 + 1, b * 100 + 11});
    CHECK_EQ_INT(pl_timing_busy_ns(t, rc), 5000 * 10);
    CHECK(t->res[rc].busy.n <= PL_BUSY_OPEN);
    pl_timing_free(t);
}

int main(void)
{
    test_buckets();
    test_quantiles();
    pl_spec *spec;
    pl_plan *plan;
    if (!t_load_plan("pipelines/quickstart.yaml", &spec, &plan)) return 1;
    test_timing(plan);
    pl_plan_free(plan);
    pl_spec_free(spec);
    PL_TEST_DONE();
}
