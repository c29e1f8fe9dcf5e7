/* pl_timing: a run's stage times, folded as batches complete into statistics whose size does not
 * depend on the batch count (item "memory grows with the batch count"): per stage a pl_hist
 * (exact count, min, max, mean; p50/p99 within 0.79%), per resource (a device engine, a host
 * stream) the batches timed on it and the length of the union of its spans (overlapping work
 * counted once). Spans wait in a small ring of rows, one row per batch in flight, and a row is
 * folded once every stage of its batch reported, so the statistics describe completed batches
 * only, as the whole-run arrays they replace did. The first `keep` batches' spans are also kept
 * as they were, for the timeline (`--trace`) and tests: a bounded log, not the whole run.
 *
 * Both executors record into one: the host scheduler for host stages, the GPU executor's
 * read-back for device stages (a span {0, 0} says "ran, not timed": sampled device timing). */
#ifndef PL_TIMING_H
#define PL_TIMING_H

#include <pthread.h>

#include "pl_hist.h"
#include "pl_plan.h"

/* Timing of one stage on one batch, nanoseconds on the run's clock (0 = run start). Device stages
 * on the GPU executor are timed with events and placed on the same clock. {0, 0}: not timed. */
typedef struct pl_span {
    int64_t start_ns, end_ns;
} pl_span;

/* The union of a resource's spans, in bounded memory: the disjoint intervals seen lately (sorted,
 * at most PL_BUSY_OPEN of them); when there are more, the earliest is closed (its length added to
 * closed_ns) and nothing before its end is counted again. Exact as long as a span never starts
 * before the end of the PL_BUSY_OPEN-th latest disjoint interval, which batches in flight (a few
 * slots) cannot reach. */
enum { PL_BUSY_OPEN = 256 };
typedef struct pl_busy {
    pl_span *iv; /* [n], sorted by start, disjoint; owned */
    int n, cap;
    int64_t closed_ns; /* length of the closed intervals */
    int64_t frontier;  /* end of the last closed interval */
} pl_busy;

/* A resource over the run, in the order the report lists them: the device engines that have
 * stages (pl_engine order), then the host streams (stream order). */
typedef struct pl_timing_res {
    pl_engine engine;
    int stream;     /* host streams: index in plan->streams; device engines: -1 */
    int n_stages;   /* plan stages on it */
    int64_t timed;  /* completed batches with at least one timed span on it */
    int64_t last_b; /* the batch last counted in `timed` */
    pl_busy busy;
} pl_timing_res;

typedef struct pl_timing {
    int n_stages;
    pthread_mutex_t mu; /* pl_timing_record may be called from any thread */
    pl_hist *hist;      /* [stage]: durations of its timed spans, completed batches */
    int *res_of;        /* [stage]: its resource */
    pl_timing_res *res; /* [n_res] */
    int n_res;
    /* The ring: row r holds batch row_b[r] (-1: none yet) with row_n[r] stages reported. */
    int window;
    pl_span *rows; /* [window * n_stages] */
    int64_t *row_b;
    int *row_n;
    int64_t folded; /* batches folded */
    /* The log: spans of batches < keep, [batch * n_stages + stage]. */
    int64_t keep;
    pl_span *kept;
    /* Loops: the body stages of loop stage s are body[body_off[s] .. body_off[s + 1]). */
    int *body_off, *body;
} pl_timing;

/* A collector for a run of `plan`: `window` rows (batches in flight at once; more is handled, a
 * little less exactly: see pl_timing.c), and the spans of the first `keep` batches logged.
 * Returns PL_ENOMEM (with a message) when out of memory. */
pl_status pl_timing_new(const pl_plan *plan, int window, int64_t keep, pl_timing **out,
                        pl_error *err);
void pl_timing_free(pl_timing *t); /* accepts NULL */
/* Stage `stage` of batch `batch` ran from sp.start_ns to sp.end_ns ({0, 0}: not timed). Every
 * stage of a batch reports exactly once; a failed stage run reports nothing (its batch is not
 * completed). A loop stage reports for its body stages too: they ran inside it, and are not
 * timed one by one (a conditional node's body holds no event nodes). Thread-safe. */
void pl_timing_record(pl_timing *t, int stage, int64_t batch, pl_span sp);
/* The logged span of (batch, stage), or NULL when batch is not in the log. */
const pl_span *pl_timing_span(const pl_timing *t, int64_t batch, int stage);
/* Busy time of resource r: the length of the union of its spans. */
int64_t pl_timing_busy_ns(const pl_timing *t, int r);

#endif
