/* pl_progress: the progress line of `pipectl run` on stderr: a bar, batches done, rate
 * (batches/s and bytes/s), ETA, fitted to the terminal's width (re-read on every redraw, so a
 * resize is followed) and never wider, so it redraws in place instead of scrolling. */
#ifndef PL_PROGRESS_H
#define PL_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum pl_progress_mode {
    PL_PROGRESS_AUTO,   /* when `out` is a terminal and the run is not quiet */
    PL_PROGRESS_ALWAYS, /* also on a pipe or file: a new line every second instead of redraws */
    PL_PROGRESS_NEVER,
} pl_progress_mode;

typedef struct pl_progress {
    bool on, tty;
    FILE *out; /* borrowed */
    uint64_t bytes_per_batch;
    int64_t t0_ns, last_ns;
    int last_len;   /* columns of the line on screen, to clear it */
    double est_s;   /* the run's estimated time (pl_progress_estimate), 0: none */
    bool may_force; /* `auto` and not quiet: pl_progress_estimate may turn the line on */
} pl_progress;

/* quiet: --quiet or --json, which switch `auto` off. bytes_per_batch: what a batch moves
 * (pipectl run: the sources' input, else the sinks' output), for bytes/s; 0 leaves it out. */
void pl_progress_init(pl_progress *p, pl_progress_mode mode, bool quiet, uint64_t bytes_per_batch,
                      FILE *out);
/* pl_run_cfg.on_batch: user is the pl_progress. Redraws at most 10 times a second, and for the
 * last batch. */
void pl_progress_update(void *user, int64_t done, int64_t total);
/* A long run (the host executor's estimate, pl_host_cost.h, of `seconds` for `total` batches):
 * the ETA reads "ETA ~H:MM:SS (estimate)" until the first batch ends (then it is measured), and
 * in `auto` mode the line is on even when `out` is not a terminal (a line per batch, at most one a
 * second). Draws the line at once. */
void pl_progress_estimate(pl_progress *p, double seconds, int64_t total);
/* Removes the line (terminal) before the summary is printed. */
void pl_progress_clear(pl_progress *p);
/* The line itself, at most width - 1 columns (the last column would make some terminals wrap):
 * what does not fit is left out, least useful first (bytes/s, then batches/s, then the bar, then
 * the ETA). Returns its length. Exposed for tests. */
size_t pl_progress_format(char *buf, size_t cap, int width, int64_t done, int64_t total,
                          double elapsed_s, uint64_t bytes_per_batch);
/* The same with an estimate of the whole run (`est_s` > 0), used for the ETA while no batch is
 * done: the estimate less the time elapsed. */
size_t pl_progress_format_est(char *buf, size_t cap, int width, int64_t done, int64_t total,
                              double elapsed_s, uint64_t bytes_per_batch, double est_s);

#endif
