/* pl_buffers: the memory of a run: one allocation per (slot, per-batch buffer) and one per
 * persistent buffer, addressed as a table bufs[slot][buffer], plus buffers' initial contents
 * (`init: zeros | random | file`). Both executors use it: the host executor with the default
 * allocator (plain host memory for every buffer), the GPU executor with its own (pinned host,
 * cudaMalloc device) and pl_buffer_init_contents to fill a staging copy of device buffers. */
#ifndef PL_BUFFERS_H
#define PL_BUFFERS_H

#include <stdbool.h>

#include "pl_spec.h"

/* How memory is obtained. alloc returns `bytes` of memory for buffer b (NULL on failure, with a
 * message in err); free releases it. NULL allocator = calloc/free for every buffer. */
typedef struct pl_allocator {
    void *(*alloc)(void *user, const pl_buffer *b, uint64_t bytes, pl_error *err);
    void (*free)(void *user, const pl_buffer *b, void *p);
    void *user;
} pl_allocator;

typedef struct pl_buffers {
    const pl_spec *spec; /* borrowed */
    int depth, n_buffers;
    /* ptr[slot * n_buffers + b]; a persistent buffer has the same pointer in every slot. */
    void **ptr;
    pl_allocator alloc;
    uint64_t bytes_allocated;
} pl_buffers;

/* Allocates every buffer of a checked spec for `depth` slots. With `init`, fills buffers that have
 * an `init:` (every slot of a per-batch buffer gets the same contents; random uses `seed`), and
 * zeroes the rest (the default allocator's memory is zeroed already), so results never depend on
 * leftover memory. Without `init` the caller fills them (GPU executor). On failure everything
 * allocated is freed. Owns the memory: release with pl_buffers_free. */
pl_status pl_buffers_new(const pl_spec *spec, int depth, const pl_allocator *alloc, bool init,
                         uint64_t seed, pl_buffers **out, pl_error *err);
void pl_buffers_free(pl_buffers *bufs); /* NULL is fine */
/* Adds slots bufs->depth..depth-1 (depth: auto growing its ring between batches): their per-batch
 * buffers are allocated with bufs' allocator (and, with `init`, given their initial contents as
 * pl_buffers_new gives them); persistent buffers and the existing slots do not move. On failure
 * the new slots are freed and bufs is as it was. depth <= bufs->depth: nothing to do. */
pl_status pl_buffers_grow(pl_buffers *bufs, int depth, bool init, uint64_t seed, pl_error *err);

/* The table row of one slot: bufs[b] is buffer b's memory in that slot. Borrowed. */
static inline void *const *pl_buffers_slot(const pl_buffers *bufs, int slot)
{
    return bufs->ptr + (size_t)slot * (size_t)bufs->n_buffers;
}

/* Writes buffer b's initial contents (b->bytes bytes) to host memory `dst`: zeros, seeded random
 * (pl_rng.h: domain PL_RNG_INIT, id = b->index, batch 0, the dtype's default range) or the file
 * (raw bytes or .npy, exactly the buffer's size and, for .npy, its dtype; relative to spec->dir).
 * PL_INIT_NONE writes zeros. Errors name the buffer and the file. */
/* Check time (pl_spec_check_files): b's `init: file` can be opened and holds exactly the buffer
 * (.npy of its dtype and shape in C order, or raw bytes of its size). Reads the header only. */
pl_status pl_buffer_check_init_file(const pl_spec *spec, const pl_buffer *b, pl_error *err);
pl_status pl_buffer_init_contents(const pl_spec *spec, const pl_buffer *b, uint64_t seed, void *dst,
                                  pl_error *err);

/* This machine's physical memory in bytes (sysconf: _SC_PHYS_PAGES x _SC_PAGESIZE), 0 when the
 * system does not say. Total, not what is free now: what no run can exceed. */
uint64_t pl_host_memory(void);

/* Resolves a path from the pipeline file against spec->dir into buf (absolute paths unchanged). */
const char *pl_spec_path(const pl_spec *spec, const char *path, char *buf, size_t cap);
/* The same for a path a stage writes (a sink's `to`): against spec->out_dir when the command line
 * gave one (--out-dir), else as pl_spec_path. */
const char *pl_spec_out_path(const pl_spec *spec, const char *path, char *buf, size_t cap);

#endif
