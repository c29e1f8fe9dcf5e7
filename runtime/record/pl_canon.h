/* pl_canon: the canonical YAML of a pipeline: what a bundle keeps as `pipeline.yaml`. Written from
 * a loaded (unchecked) spec with libyaml's emitter: every buffer with every key, every stage with
 * its kind's keys including the defaults the key tables state, and the run options; loading it
 * gives the same plan as the original (tests/e2e/test_bundle.sh compares `pipectl plan` of both).
 * Replay reads the file a bundle holds and checks its recorded hash; it never writes it again, so
 * bundles written before a change of this format replay as they are. */
#ifndef PL_CANON_H
#define PL_CANON_H

#include <stdio.h>

#include "pl_spec.h"

/* Maps a path as written (a stage's PL_KEY_PATH option, or a buffer's init file when st is NULL,
 * key "file") to what the canonical file says. Returns a string that must live until the write
 * returns, or NULL to keep the path as written. */
typedef const char *(*pl_canon_path_fn)(void *user, const pl_stage *st, const char *key,
                                        const char *path);

/* Says whether to leave out the default of `key` for stage st (a kind that refuses it next to
 * the keys given, as a source given `file` refuses `generator`); it is then written as a comment.
 * NULL: write every default. */
typedef bool (*pl_canon_omit_fn)(void *user, const pl_stage *st, const char *key);

/* Writes spec (loaded, not necessarily checked: reads/writes are written as the front end stored
 * them, before the kinds add the ones their options imply) as YAML to out. Defaults are written
 * for integer, number, boolean and enum keys whose table default is a literal of that type
 * (text defaults are not: a kind may treat "given" differently from "left out", as the lua kind
 * does with `function`). */
pl_status pl_canon_write(const pl_spec *spec, FILE *out, pl_canon_path_fn map,
                         pl_canon_omit_fn omit, void *user, pl_error *err);

#endif
