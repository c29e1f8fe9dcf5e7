/* pl_stream: a loop's stream while the run goes on (stages/loop_stream.c): what the executors
 * hand it after every `every` iterations of a batch's loop, and after its last, and how it lays
 * those parts out. The loop kinds' open hook makes the state (pl_loop_stream_open, pl_loop.h);
 * close finishes the file as a sink's (.partial, then renamed), however the run ends.
 *
 * Records go out per batch in batch order (the executors' count), each batch's parts in the
 * order they came: the parts of a batch that runs ahead of the one being written are held in
 * memory and written once the batches before it have ended, so the file is the same at every
 * depth and on both executors. A part is written with one write(2) of whole records. Every part
 * handed over is kept: after an error or a stop the parts held are written too, in order. */
#ifndef PL_STREAM_H
#define PL_STREAM_H

#include "pl_kind_util.h"

typedef struct pl_stream pl_stream;

/* What a loop's stream takes from `from` [B, N, rest...]: B rows, N columns, each column of a row
 * `col_bytes` bytes (rest elements of the dtype). For a stage whose loop has a stream. */
typedef struct pl_stream_shape {
    int64_t rows, cols;
    uint64_t col_bytes;
    int64_t every, start, limit; /* limit: count, else max */
    int from, finished;          /* buffer indices (finished -1: none) */
} pl_stream_shape;

/* The shape of loop L's stream; false when L has none. */
bool pl_stream_shape_of(const pl_spec *spec, const pl_stage *L, pl_stream_shape *out);

/* Whether the loop, having run `it` iterations of a batch, delivers now: after its last
 * (`done`: the test ends it), and after every `every` iterations before that. Every executor
 * delivers at these points, so the parts are the same everywhere. */
static inline bool pl_stream_due(const pl_stream_shape *sh, int64_t it, bool done)
{
    return done || (it > 0 && it % sh->every == 0);
}

/* The columns written after `it` iterations: start + it, at most N. */
static inline int64_t pl_stream_cols(const pl_stream_shape *sh, int64_t it)
{
    int64_t c = sh->start + it;
    return c < sh->cols ? c : sh->cols;
}

/* Hands over one part of batch `local` (the executor's count; `batch` the pipeline's index of
 * it): columns [lo, hi) of every row, taken after `step` iterations, `end` when the loop ended.
 * `from` is the whole buffer as laid out [B, N, rest...] (only those columns are read);
 * `finished` its rows' finished flags at that point, or NULL. Thread-safe: several batches' loops
 * may hand over parts at once, each batch's in order. A failure (a write, an id the tokenizer
 * does not have) is returned and kept: later parts are dropped and close returns it again. */
pl_status pl_stream_put(pl_stream *s, int64_t local, int64_t batch, int64_t step, int64_t lo,
                        int64_t hi, const void *from, const int32_t *finished, bool end,
                        pl_error *err);

#endif
