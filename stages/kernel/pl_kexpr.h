/* pl_kexpr: the integer expressions of a user kernel's grid:, block:, shared: and integer
 * arguments: + - * / % ( ), ceil() floor() min() max(), elements(buf) and bytes(buf) of a
 * declared buffer, and integer literals. Evaluated once, at check time (buffer sizes are static);
 * every error points at the character where the expression goes wrong. */
#ifndef PL_KEXPR_H
#define PL_KEXPR_H

#include <stdint.h>

#include "pl_spec.h"

/* Evaluates `text`, written at `pos` (the column of its first character), in `spec` (its buffers'
 * sizes must be known: pl_spec_check computes them before binding stages). `what` names the
 * expression in messages ("grid", "argument 3"); `stage` is the stage's name. `/` divides exactly
 * (ceil(elements(x) / 256) rounds up); the result must be a whole number. On error: PL_EINPUT
 * with "file:line:col: error: stage 'k': grid: ...". */
pl_status pl_kexpr_eval(const pl_spec *spec, const char *stage, const char *what, const char *text,
                        pl_pos pos, int64_t *out, pl_error *err);

#endif
