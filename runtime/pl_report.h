/* pl_report: the end-of-run summary, from a plan and a pl_run_result, for people (a table) or
 * programs (one JSON object). Shared by both executors' callers (`pipectl run`, bench). */
#ifndef PL_REPORT_H
#define PL_REPORT_H

#include <stdio.h>

#include "pl_exec.h"

/* Per-stage statistics over the spans of completed batches. */
typedef struct pl_stage_stats {
    int64_t count;
    double mean_s, p50_s, p99_s, total_s;
    double busy; /* total_s / wall time */
} pl_stage_stats;

/* Fills stats[plan->n_stages] (indexed by stage). Returns the bound: the largest mean stage time
 * in seconds, and its stage in *bound_stage (-1 when nothing completed). */
double pl_report_stats(const pl_plan *plan, const pl_run_result *res, pl_stage_stats *stats,
                       int *bound_stage);

/* Bytes per batch that enter the pipeline (buffers written by sources) and leave it (buffers that
 * sinks read). */
void pl_report_flow(const pl_spec *spec, uint64_t *in, uint64_t *out);

/* The human summary: what flowed, which executor, wall time and throughput, a per-stage table,
 * the per-batch time against the bound, and the outputs written (after an early stop, what each
 * sink kept). The caller prints pl_report_stopped and the error itself. */
void pl_report_print(FILE *out, const pl_plan *plan, const pl_run_result *res, pl_status status);

/* One line for a run that ended early: "stopped after N of M batches; N batches written to
 * out/x.npy" (each sink with a file), and a newline. */
void pl_report_stopped(FILE *out, const pl_run_result *res);

/* The same as one JSON object (and a newline); `err` (may be NULL) goes into "error". */
void pl_report_json(FILE *out, const pl_plan *plan, const pl_run_result *res, pl_status status,
                    const pl_error *err);

#endif
