/* pl_trace: writes a run's timeline as Chrome trace JSON (`pipectl run --trace FILE`), which
 * Perfetto (ui.perfetto.dev) and chrome://tracing open: one row per plan stream (and one more per
 * level of overlap where a stream's slices overlap, e.g. kernels of batches in flight at once),
 * one slice per stage and batch, a flow arrow along each cross-stream edge of a batch, counters of
 * bytes in flight per engine and of slots in use, so copy/compute overlap can be seen rather than
 * inferred. tests/e2e/check_trace.py validates it against the Trace Event Format. */
#ifndef PL_TRACE_H
#define PL_TRACE_H

#include "pl_exec.h"

/* Writes `path` (through `path.partial`, renamed when complete). Spans of completed batches only;
 * device stages the GPU executor did not time (sampled timing) are left out. PL_EIO on failure. */
pl_status pl_trace_write(const char *path, const pl_plan *plan, const pl_run_result *res,
                         pl_error *err);

#endif
