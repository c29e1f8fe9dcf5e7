/* pl_trace: writes a run's timeline as Chrome trace JSON (`pipectl run --trace FILE`), which
 * Perfetto (ui.perfetto.dev) and chrome://tracing open: one row per plan stream (and one more per
 * level of overlap where a stream's slices overlap, e.g. kernels of batches in flight at once),
 * one slice per stage and batch, a flow arrow along each cross-stream edge of a batch, counters of
 * bytes in flight per engine and of slots in use, so copy/compute overlap can be seen rather than
 * inferred. tests/e2e/check_trace.py validates it against the Trace Event Format. */
#ifndef PL_TRACE_H
#define PL_TRACE_H

#include "pl_run.h"

/* What to ask the run to keep (pl_run_cfg.trace_batches) for a trace of `plan`: every batch, or
 * as many of the first ones as PL_TRACE_MAX_SPANS spans hold (a timeline of a long run is its
 * start; the statistics of the summary cover every batch whatever this is). */
int64_t pl_trace_batches_for(const pl_plan *plan);
/* Batches the trace of `res` shows: its completed batches the span log holds. */
int64_t pl_trace_batches(const pl_run_result *res);

/* Writes `path` (through `path.partial`, renamed when complete). Spans of completed batches in the
 * log (pl_trace_batches; the title says "first N of M batches" when that is fewer than completed);
 * device stages the GPU executor did not time (sampled timing) are left out. PL_EIO on failure. */
pl_status pl_trace_write(const char *path, const pl_plan *plan, const pl_run_result *res,
                         pl_error *err);

#endif
