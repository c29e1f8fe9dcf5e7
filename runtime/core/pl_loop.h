/* pl_loop: loop stages (pl_stage.loop) in check and plan: the two kinds a loop stage has, the
 * rules of a loop and its body, and the reads and writes the loop stage takes from its body, so
 * that at the top level of the pipeline a loop is one stage like any other (pl_graph_build_part).
 *
 * What the top level sees of a loop stage L:
 * - reads: the `while` buffer (tested before the first iteration), and every buffer a body stage
 *   reads that no earlier stage of the body writes (the body's first iteration reads it from
 *   before the loop: check treats that iteration as a batch of its own);
 * - writes: every buffer the body writes, and the `index` buffer (the loop itself writes it).
 * Body stages run one after another, in the body's topological order (ties by declaration), and
 * every body stage is on the same side: all host stages, or all device stages (kernel, gpt2 and
 * copies: a conditional node's body may hold kernels and memory copies). Sources and sinks are
 * not in bodies: they read or write a batch once. */
#ifndef PL_LOOP_H
#define PL_LOOP_H

#include "pl_stage.h"

struct pl_graph;
struct pl_names;

/* The kinds of loop stages: not in the kind table (a loop is written `loop:`, not `kind:`).
 * pl_loop_check gives a loop stage the one whose engine runs it: compute for a device body
 * captured into the slot's graph as a conditional WHILE node, host for a host body, or for a
 * device body the host launches once per iteration (run.loop: host). The front ends set
 * pl_kind_loop_host until then. */
extern const pl_kind pl_kind_loop_device, pl_kind_loop_host;

/* Is st a loop stage? */
static inline bool pl_stage_is_loop(const pl_stage *st)
{
    return st->loop != NULL;
}

/* Does loop stage L's body run on the device (its stages' engines are copy or compute engines)?
 * Valid once pl_loop_check passed. */
bool pl_loop_on_device(const pl_spec *spec, const pl_stage *L);

/* The rules of loop stage L once every stage is resolved: max and count in range, its body (one
 * or more stages, right after it, none of them a loop, a source or a sink, all on one side), the
 * `while` and `index` buffers (i32 [1] where the body runs, not the same buffer, `index` written
 * by no body stage), after: entries between the loop and its own body; then sets L's kind.
 * Errors are PL_EINPUT at the position of the key or stage at fault. */
pl_status pl_loop_check(pl_spec *spec, pl_stage *L, const struct pl_names *bufs,
                        const char *const *bnames, pl_error *err);

/* Gives loop stage L its reads and writes (above) from its body's graph (pl_graph_build_part of
 * L, acyclic), each buffer once, at the position of the body's first access. */
pl_status pl_loop_bind_refs(pl_spec *spec, pl_stage *L, const struct pl_graph *body, pl_error *err);

/* The body stage of L whose read of buffer b is L's read of it (the first one, in declaration
 * order, that reads b at the position L's read has), or -1 (b is L's `while` buffer). */
int pl_loop_reader(const pl_spec *spec, const pl_stage *L, int b);

/* Is stage st ordered (its batches in batch order: pl_kind.ordered, unless the user unordered
 * it)? A loop stage is when a stage of its body is. */
bool pl_stage_ordered(const pl_spec *spec, const pl_stage *st);

/* A loop's stream (pl_loop.stream) is written by the loop kinds' validate (no other sink or
 * stream writes its file), check_files, open, close and output hooks, which are these: declared
 * here, defined above this layer in stages/loop_stream.c (as the kind table is: pl_kinds.c),
 * because the stream's file and its text are the sink's and the tokenizer's. A loop without a
 * stream checks nothing, has no state and lists no output. The executors deliver to the state
 * through stages/pl_stream.h. */
pl_status pl_loop_stream_validate(const pl_spec *spec, const pl_stage *L, pl_error *err);
pl_status pl_loop_stream_check_files(const pl_spec *spec, const pl_stage *L, int64_t batches,
                                     pl_error *err);
pl_status pl_loop_stream_open(const pl_run_env *env, const pl_stage *L, void **state,
                              pl_error *err);
pl_status pl_loop_stream_close(const pl_run_env *env, const pl_stage *L, void *state,
                               int64_t completed, bool failed, pl_error *err);
pl_status pl_loop_stream_output(const pl_stage *L, void *state, int64_t completed, pl_output *out,
                                bool *has);

#endif
