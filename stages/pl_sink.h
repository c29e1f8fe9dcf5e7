/* pl_sink: what the runtime may ask a sink's per-run state (stages/sink.c) before closing it. */
#ifndef PL_SINK_H
#define PL_SINK_H

#include "pl_exec.h"

/* Fills `out` from a sink's open state: name, final path (copied), batches written so far,
 * bytes per batch, checksums (copied). `finalized` is left false: the caller sets it once close
 * succeeds. Returns PL_ENOMEM if a copy fails. */
pl_status pl_sink_describe(const pl_stage *st, const void *state, pl_output *out);

#endif
