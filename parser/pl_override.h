/* pl_override: `--set KEY=VALUE` applied to a loaded document (parser-internal). Both front ends
 * call pl_override_apply on the value tree they built, before the schema walker (pl_schema.h)
 * sees it, so a --set is checked by the same rules and messages as the file's own keys. */
#ifndef PL_OVERRIDE_H
#define PL_OVERRIDE_H

#include "pl_schema.h"
#include "pl_value.h"

/* Applies sets[0..n) ("KEY=VALUE" each) in order to *root (NULL: an empty file; a new mapping is
 * made). KEY is a path of keys joined by '.':
 *   pipeline, run.K, run.memory_budget.K   the file's top level and `run:` (any depth)
 *   buffers.NAME.K                         buffer NAME's key K (a buffer not in the file is added)
 *   stages.NAME.K, or NAME.K               stage NAME's key K (NAME: its `name:`; a stage must be
 *                                          in the file: a --set changes stages, it adds none; a
 *                                          loop's stages are found too, and a loop's bound is
 *                                          NAME.loop.max)
 * A key the file has gets VALUE in place of its value; one it does not have is added. Errors
 * (PL_EINPUT, "--set KEY=VALUE: error: ...") are about the path only: whether the key exists and
 * what VALUE must be is the schema's to say. A root that is not a mapping is left alone (the
 * walker reports it). */
pl_status pl_override_apply(pl_spec *spec, pl_value **root, const pl_schema_src *src,
                            const char *const *sets, int n, pl_error *err);

#endif
