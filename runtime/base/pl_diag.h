/* pl_diag: a list of diagnostics (every error a check found, not only the first), for
 * `pipectl check` and embedders that show them all. Each entry is a pl_error record (status,
 * message with its position, and whatever structured fields pl_error carries) with a severity.
 * The single-error APIs stay as they are: they return the first error, which is always the
 * list's first entry. */
#ifndef PL_DIAG_H
#define PL_DIAG_H

#include <stdbool.h>

#include "pl_status.h"

typedef enum pl_severity { PL_SEV_ERROR, PL_SEV_WARNING } pl_severity;

typedef struct pl_diag {
    pl_severity severity;
    pl_error err; /* a copy */
} pl_diag;

/* Owned by the caller (usually on its stack); entries are malloc'd by pl_diags_add. */
typedef struct pl_diags {
    pl_diag *items;
    int n, cap;
    int limit;   /* entries kept; later ones are only counted */
    int dropped; /* entries past `limit`, or not stored for lack of memory */
} pl_diags;

/* limit < 1 means 1. */
void pl_diags_init(pl_diags *d, int limit);
void pl_diags_fini(pl_diags *d); /* zeroed or initialised; idempotent */
/* Appends a copy of `e` (d may be NULL: then nothing happens). Never fails: an entry that does
 * not fit is counted in `dropped`. */
void pl_diags_add(pl_diags *d, pl_severity sev, const pl_error *e);
/* Errors recorded, kept or not. */
int pl_diags_errors(const pl_diags *d);
/* Adds a warning: a record like pl_error_at's, status `st` (what a run would meet: PL_ENOMEM for
 * memory it cannot have), whose message reads "file:line:col: warning: <fmt>" ("warning: <fmt>"
 * with pos.line == 0). d may be NULL: then nothing happens. */
void pl_diags_warn(pl_diags *d, pl_status st, pl_pos pos, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
