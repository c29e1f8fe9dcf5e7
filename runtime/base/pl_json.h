/* pl_json: pipectl's one JSON layer, over jansson. Bundles (runtime/record/pl_bundle.c) read and
 * write through it, and every --json output (check, plan, the run summary, errors) and the trace.
 * What it adds to jansson: strings from any bytes (invalid UTF-8 is replaced, never an error),
 * files written whole or not at all, and typed getters whose failures are error records naming the
 * file and the key. */
#ifndef PL_JSON_H
#define PL_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "pl_status.h"

/* A JSON string from `len` bytes of any content: valid UTF-8 is kept as it is; each byte of an
 * invalid sequence becomes U+FFFD (the replacement character), so the same bytes always give the
 * same string. NUL bytes become U+0000 escapes (jansson keeps the length). New reference; NULL only
 * on OOM. */
json_t *pl_json_strn(const char *s, size_t len);
/* The same for a NUL-terminated string; NULL gives JSON null. */
json_t *pl_json_str(const char *s);
/* "0x%016" PRIx64, the way `pipectl run` prints checksums. */
json_t *pl_json_hex64(uint64_t v);
/* Parses "0x" followed by 1 to 16 hex digits; false otherwise. */
bool pl_json_parse_hex64(const char *s, uint64_t *out);

/* Sets obj[key] to v, stealing the reference (v may be NULL after an OOM: then PL_ENOMEM). */
pl_status pl_json_set(json_t *obj, const char *key, json_t *v, pl_error *err);
/* Appends v to arr, stealing the reference. */
pl_status pl_json_append(json_t *arr, json_t *v, pl_error *err);

/* Writes `v` to `path` (indented, keys in insertion order, a final newline) through
 * "path.partial", renamed when complete. PL_EIO names the file. */
pl_status pl_json_write_file(const char *path, const json_t *v, pl_error *err);
/* Reads and parses `path`. PL_EIO when it cannot be read, PL_EINPUT when it is not JSON:
 * "path:line:col: error: WHAT: not valid JSON: ..." (what may be NULL). *out is a new reference. */
pl_status pl_json_read_file(const char *path, const char *what, json_t **out, pl_error *err);

/* Typed access. `what` names the file in messages ("corrupt bundle manifest b/manifest.json"). A
 * missing key or a value of another type is PL_EINPUT: "error: WHAT: 'key' is missing (expected
 * a string)". The results are borrowed from obj. */
pl_status pl_json_get_str(const json_t *obj, const char *key, const char *what, const char **out,
                          pl_error *err);
pl_status pl_json_get_int(const json_t *obj, const char *key, const char *what, int64_t *out,
                          pl_error *err);
pl_status pl_json_get_num(const json_t *obj, const char *key, const char *what, double *out,
                          pl_error *err);
pl_status pl_json_get_obj(const json_t *obj, const char *key, const char *what, json_t **out,
                          pl_error *err);
pl_status pl_json_get_arr(const json_t *obj, const char *key, const char *what, json_t **out,
                          pl_error *err);
/* obj[key] as a string, or `def` when missing or not a string. Borrowed. */
const char *pl_json_str_or(const json_t *obj, const char *key, const char *def);

/* ---- what the commands print with --json (docs/json.md describes every field) ---- */

/* "schema_version" of every --json output: raised when a field changes meaning or goes away
 * (adding a field does not raise it). */
#define PL_JSON_SCHEMA_VERSION 1

/* Writes v on one line and a newline ("{"a": 1, "b": [2]}", keys in insertion order) and
 * flushes. Returns 0, or -1 when it could not be written. */
int pl_json_print(FILE *out, const json_t *v);
/* One diagnostic: {"severity", "file", "line", "column", "stage", "batch", "status", "message",
 * "hint"} from an error record; severity is "error" or "warning". New reference, NULL on OOM. */
json_t *pl_json_diag(const pl_error *e, const char *severity);
/* The object a command prints with --json when it fails before it has anything else to say:
 * {"schema_version", "command", "status", "exit_code", "error", "diagnostics": [e]}. New
 * reference, NULL on OOM. */
json_t *pl_json_error_obj(const char *command, const pl_error *e);
/* Prints pl_json_error_obj and returns e's exit code (the --json twin of pl_cli_fail). */
int pl_json_print_error(FILE *out, const char *command, const pl_error *e);

#endif
