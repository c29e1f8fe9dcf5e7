/* pl_bundle_int: what the bundle files (pl_bundle.c, pl_bundle_capture.c, pl_bundle_replay.c)
 * share and nothing else includes. */
#ifndef PL_BUNDLE_INT_H
#define PL_BUNDLE_INT_H

#include <stdio.h>

#include "pl_bundle.h"

#define PL__PATH 4096

/* snprintf that may cut (a path longer than PL__PATH is cut, then fails to open, named). */
void pl__bundle_fmt(char *buf, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
const char *pl__bundle_base(const char *path); /* the part after the last '/' (borrowed) */
pl_status pl__bundle_mkdir(const char *path, pl_error *err);   /* an existing folder is fine */
pl_status pl__bundle_mkdir_p(const char *path, pl_error *err); /* with its parents */
pl_status pl__bundle_copy_file(const char *from, const char *to, pl_error *err);
/* Writes fn(plan, file) to path. */
pl_status pl__bundle_write_text(const char *path, void (*fn)(const pl_plan *, FILE *),
                                const pl_plan *plan, pl_error *err);

/* A run's sinks as the manifest's "outputs" array (checksums, reproducibility, where written). */
json_t *pl__bundle_outputs_json(const pl_plan *plan, const pl_run_result *res);
/* A run's per-stage statistics (count, mean, p50, p99), in plan order. */
json_t *pl__bundle_stats_json(const pl_plan *plan, const pl_run_result *res);
/* The manifest's "stages": medians over n runs' statistics and the noise (the reps' p50 spread). */
json_t *pl__bundle_stages_over_reps(json_t *const *reps, int n);

/* Appends {path: rel, sha256, bytes} of dir/rel to files. */
pl_status pl__bundle_file_entry(const char *dir, const char *rel, json_t *files, pl_error *err);
/* Lists dir/graphs (into files, sorted), counts the DOT files and digests the .topo files:
 * *out = {dot: [...], topology_digest} or JSON null when there are none. */
pl_status pl__bundle_graphs(const char *dir, json_t *files, json_t **out, int *n_graphs,
                            pl_error *err);

#endif
