/* test_progress: the progress line at terminal widths from 120 down to 2 columns: never wider
 * than width - 1 (so it redraws in place), what is left out first when narrow, rate and ETA. */
#include "pl_progress.h"
#include "pl_test.h"

int main(void)
{
    char buf[512];
    const uint64_t mib = 1 << 20;
    /* 16 of 64 batches in 2 s: 8 batches/s, 8 MiB/s with 1 MiB a batch, 48 left: 6 s. */
    size_t n = pl_progress_format(buf, sizeof buf, 120, 16, 64, 2.0, mib);
    CHECK_STR(buf, "[##########..............................] 16/64 batches  8.0 batches/s  "
                   "8.0 MiB/s  ETA 0:06");
    CHECK_EQ_INT(n, strlen(buf));
    /* 80 columns: the bar shrinks, everything else stays. */
    pl_progress_format(buf, sizeof buf, 80, 16, 64, 2.0, mib);
    CHECK_STR(buf, "[######.....................] 16/64 batches  8.0 batches/s  8.0 MiB/s  "
                   "ETA 0:06");
    /* 40 columns: bytes/s and batches/s go, the bar and the ETA stay. */
    pl_progress_format(buf, sizeof buf, 40, 16, 64, 2.0, mib);
    CHECK_STR(buf, "[###..........] 16/64 batches  ETA 0:06");
    /* 30: no room for a bar of 8. */
    pl_progress_format(buf, sizeof buf, 30, 16, 64, 2.0, mib);
    CHECK_STR(buf, "16/64 batches  ETA 0:06");
    /* Nothing measured yet: no rate, ETA unknown. */
    pl_progress_format(buf, sizeof buf, 120, 0, 64, 0.0, mib);
    CHECK_STR(buf, "[........................................] 0/64 batches  ETA -");
    /* A run the host executor estimated (5000 s, 200 s of it gone): the ETA is the estimate's
     * rest until the first batch is done, then measured. */
    pl_progress_format_est(buf, sizeof buf, 120, 0, 64, 200.0, mib, 5000.0);
    CHECK_STR(buf, "[........................................] 0/64 batches  ETA ~1:20:00 "
                   "(estimate)");
    pl_progress_format_est(buf, sizeof buf, 120, 16, 64, 2.0, mib, 5000.0);
    CHECK(strstr(buf, "ETA 0:06") != NULL);
    /* Long runs: hours in the ETA; no bytes/s without a byte count. */
    pl_progress_format(buf, sizeof buf, 120, 1, 10000, 1.0, 0);
    CHECK_STR(buf, "[........................................] 1/10000 batches  1.0 batches/s  "
                   "ETA 2:46:39");
    /* Every width: never wider than width - 1, the count always there while it fits. */
    for (int w = 2; w <= 200; w++) {
        n = pl_progress_format(buf, sizeof buf, w, 12345, 99999, 3.5, 3 * mib);
        CHECK((int)n <= w - 1);
        if (w > 22) CHECK(strstr(buf, "12345/99999 batches") != NULL);
    }
    PL_TEST_DONE();
}
