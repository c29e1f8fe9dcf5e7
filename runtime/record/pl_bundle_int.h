/* pl_bundle_int: what the bundle files (pl_bundle.c, pl_bundle_capture.c, pl_bundle_replay.c)
 * share and nothing else includes. */
#ifndef PL_BUNDLE_INT_H
#define PL_BUNDLE_INT_H

#include <stdio.h>
#include <sys/types.h>

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

/* A bundle is closed: every file in it is a regular file under its folder, and nothing opens one
 * through a symlink, a device, a FIFO or a path out of it. pl__bundle_openat is the one way
 * capture, replay and diff open a bundle's files: rel is walked from the folder's descriptor
 * `root` one component at a time, each looked at (fstatat, not followed) before it is opened
 * with O_NOFOLLOW; a symlink (named with its target), anything but a folder on the way or a
 * regular file at the end, an absolute path or one with '..' is refused (PL_EINPUT) before
 * anything is opened there. `dir` names the folder in messages. PL__BUNDLE_CHECK opens nothing
 * at the end (*fd stays -1); PL__BUNDLE_FOLDER wants a folder (for fdopendir). A missing file is
 * PL_EIO with *missing set (missing may be NULL). openat2's RESOLVE_NO_SYMLINKS would refuse the
 * same paths, but could not say which component is a link, nor where it leads. */
typedef enum pl__bundle_mode {
    PL__BUNDLE_FILE,
    PL__BUNDLE_FOLDER,
    PL__BUNDLE_CHECK
} pl__bundle_mode;
pl_status pl__bundle_openat(int root, const char *dir, const char *rel, pl__bundle_mode mode,
                            int *fd, bool *missing, pl_error *err);
/* pl__bundle_openat's refusal of rel (PL_EINPUT, into *err), looked at without opening anything;
 * PL_OK for a file that is missing or cannot be read: those are reported where they are read. */
pl_status pl__bundle_check_closed(int root, const char *dir, const char *rel, pl_error *err);
/* Why rel cannot name a file inside a bundle ("is an absolute path", "climbs out of the bundle",
 * ...: static), or NULL when it can. */
const char *pl__bundle_rel_refusal(const char *rel);
/* Opens the folder dir (followed: the bundle is the folder the user named) as the root of
 * pl__bundle_openat. PL_EINPUT: "DIR is not a bundle folder (...)". */
pl_status pl__bundle_root(const char *dir, int *fd, pl_error *err);
/* "a FIFO", "a symlink", "a character device", ... (static) */
const char *pl__bundle_file_type(mode_t mode);

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
