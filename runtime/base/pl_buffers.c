/* pl_buffers: allocation of per-slot and persistent buffers and their initial contents. */
#include "pl_buffers.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pl_npy.h"
#include "pl_rng.h"
#include "pl_str.h"

uint64_t pl_host_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size : 0;
}

/* Allocations of the default allocator: what pl__oom names when one fails. */
static void *pl__calloc(void *user, const pl_buffer *b, uint64_t bytes, pl_error *err)
{
    (void)user;
    void *p = bytes <= SIZE_MAX ? calloc(1, (size_t)bytes) : NULL;
    if (!p)
        pl_error_set(err, PL_ENOMEM, "error: out of memory allocating buffer '%s' (%llu bytes)",
                     b->name, (unsigned long long)bytes);
    return p;
}

/* The default allocator's failure for buffer b at `depth` slots, with what would help: a
 * persistent buffer has one copy whatever the depth, so only it (its size, or making it
 * per-batch) can change; per-batch buffers have one copy per slot, so the depth and the batch
 * shape can. Every buffer is host memory there (the host executor). */
static void pl__oom(const pl_spec *spec, const pl_buffer *b, int depth, pl_error *err)
{
    char size[32], shape[128], mem[64] = "", slot[32], all[32], one[32];
    pl_mem_sizes m;
    pl_spec_mem_sizes(spec, &m);
    uint64_t per_slot = m.host_per_slot + m.device_per_slot;
    uint64_t persistent = m.host_persistent + m.device_persistent, host = pl_host_memory();
    pl_bytes_str(b->bytes, size, sizeof size);
    pl_dims_str(b->shape, b->rank, shape, sizeof shape);
    if (host) {
        char h[32];
        snprintf(mem, sizeof mem, "; this machine has %s of physical memory",
                 pl_bytes_str(host, h, sizeof h));
    }
    if (b->persistent) {
        pl_error_set(err, PL_ENOMEM,
                     "error: out of memory allocating persistent buffer '%s' (%s, shape %s %s): a "
                     "persistent buffer has one copy whatever the depth, so a lower depth does "
                     "not help; make '%s' smaller, or per-batch (without persistent: true) if its "
                     "data can come a batch at a time (the persistent buffers take %s in all%s)",
                     b->name, size, shape, pl_dtype_name(b->dtype), b->name,
                     pl_bytes_str(persistent, all, sizeof all), mem);
        return;
    }
    pl_bytes_str(per_slot, slot, sizeof slot);
    pl_bytes_str(persistent + (uint64_t)depth * per_slot, all, sizeof all);
    pl_bytes_str(persistent + per_slot, one, sizeof one);
    char help[160];
    if (host && persistent + per_slot > host)
        snprintf(help, sizeof help,
                 "even depth 1 takes %s, more than the machine has: make the batch smaller (the "
                 "shape of '%s' and the other per-batch buffers)",
                 one, b->name);
    else if (host && per_slot)
        snprintf(help, sizeof help,
                 "lower the depth (depth 1 takes %s; at most %llu fit the machine) or the batch "
                 "shape ('%s' and the other per-batch buffers)",
                 one, (unsigned long long)((host - persistent) / per_slot), b->name);
    else
        snprintf(help, sizeof help,
                 "lower the depth (depth 1 takes %s) or the batch shape ('%s' and the other "
                 "per-batch buffers)",
                 one, b->name);
    pl_error_set(err, PL_ENOMEM,
                 "error: out of memory allocating per-batch buffer '%s' (%s, shape %s %s) at depth "
                 "%d: every slot holds a copy of each per-batch buffer, %s a slot, so depth %d "
                 "takes %s with the persistent buffers%s; %s",
                 b->name, size, shape, pl_dtype_name(b->dtype), depth, slot, depth, all, mem, help);
}

/* One copy of buffer b for a ring of `depth` slots. */
static void *pl__alloc_one(pl_buffers *bufs, const pl_buffer *b, int depth, pl_error *err)
{
    void *p = bufs->alloc.alloc(bufs->alloc.user, b, b->bytes, err);
    if (!p && bufs->alloc.alloc == pl__calloc) pl__oom(bufs->spec, b, depth, err);
    return p;
}

static void pl__free(void *user, const pl_buffer *b, void *p)
{
    (void)user;
    (void)b;
    free(p);
}

const char *pl_spec_path(const pl_spec *spec, const char *path, char *buf, size_t cap)
{
    if (path[0] == '/' || !spec->dir || !*spec->dir || strcmp(spec->dir, ".") == 0)
        snprintf(buf, cap, "%s", path);
    else
        snprintf(buf, cap, "%s/%s", spec->dir, path);
    return buf;
}

const char *pl_spec_out_path(const pl_spec *spec, const char *path, char *buf, size_t cap)
{
    if (path[0] == '/' || !spec->out_dir || !*spec->out_dir)
        return pl_spec_path(spec, path, buf, cap);
    if (strcmp(spec->out_dir, ".") == 0)
        snprintf(buf, cap, "%s", path);
    else
        snprintf(buf, cap, "%s/%s", spec->out_dir, path);
    return buf;
}

void pl_buffers_free(pl_buffers *bufs)
{
    if (!bufs) return;
    if (bufs->ptr) {
        /* Persistent buffers appear in every slot: free them from slot 0 only. */
        for (int s = 0; s < bufs->depth; s++)
            for (int b = 0; b < bufs->n_buffers; b++) {
                void *p = bufs->ptr[(size_t)s * bufs->n_buffers + b];
                if (!p) continue;
                bool dup = false;
                for (int s2 = 0; s2 < s && !dup; s2++)
                    dup = bufs->ptr[(size_t)s2 * bufs->n_buffers + b] == p;
                if (!dup) bufs->alloc.free(bufs->alloc.user, &bufs->spec->buffers[b], p);
            }
    }
    free(bufs->ptr);
    free(bufs);
}

/* Opens b's init file and checks it holds exactly the buffer: .npy of the buffer's dtype (C
 * order) and shape, or raw bytes of its size. On success *f is open and *off is where the data
 * starts. */
static pl_status pl__init_file_open(const pl_spec *spec, const pl_buffer *b, FILE **f,
                                    uint64_t *off, char *path, size_t cap, pl_error *err)
{
    pl_spec_path(spec, b->init_file, path, cap);
    char shown[PL_NAME_CAP]; /* the name in messages: escaped inside their quotes */
    const char *nm = pl_name_str(path, PL_NAME_INSIDE, shown, sizeof shown);
    *f = fopen(path, "rb");
    *off = 0;
    if (!*f)
        return pl_error_at(err, PL_EINPUT, b->init_pos,
                           "buffer '%s': cannot open init file '%s': %s", b->name, nm,
                           strerror(errno));
    pl_status st = PL_OK;
    uint64_t avail;
    size_t n = strlen(path);
    if (n >= 4 && strcmp(path + n - 4, ".npy") == 0) {
        pl_npy_info info;
        st = pl_npy_read_header(*f, path, &info, err);
        if (st != PL_OK) {
            pl_npy_error_at(err, b->init_pos, "buffer", b->name);
            goto fail;
        }
        if (!pl_npy_descr_matches(info.descr, b->dtype) || info.fortran_order) {
            st = pl_error_at(err, PL_EINPUT, b->init_pos,
                             "buffer '%s' is %s but '%s' holds '%s'%s; save the array as %s "
                             "(numpy dtype '%s', C order)",
                             b->name, pl_dtype_name(b->dtype), nm, info.descr,
                             info.fortran_order ? " in Fortran order" : "", pl_dtype_name(b->dtype),
                             pl_npy_descr(b->dtype));
            goto fail;
        }
        /* A leading dimension of 1 is the same bytes in the same order: one batch saved by a
         * pipectl sink is (1, ...). */
        int lead = info.rank == b->rank + 1 && info.shape[0] == 1 ? 1 : 0;
        bool same = info.rank == b->rank + lead;
        for (int i = 0; same && i < b->rank; i++)
            same = info.shape[i + lead] == b->shape[i];
        if (!same) {
            char have[160], want[160];
            pl_npy_shape_str(info.rank, info.shape, have, sizeof have);
            pl_dims_str(b->shape, b->rank, want, sizeof want); /* the DSL's spelling: [128, 32] */
            st = pl_error_at(err, PL_EINPUT, b->init_pos,
                             "buffer '%s' has shape %s but '%s' holds an array of shape %s; save "
                             "it with the buffer's shape (a transposed or reshaped array would be "
                             "read in the wrong order)",
                             b->name, want, nm, have);
            goto fail;
        }
        *off = info.data_offset;
        avail = info.data_bytes;
        if (fseek(*f, 0, SEEK_END) == 0) {
            long end = ftell(*f);
            uint64_t size = end > 0 ? (uint64_t)end : 0;
            if (size < info.data_offset + info.data_bytes) {
                st = pl_error_at(
                    err, PL_EINPUT, b->init_pos,
                    "buffer '%s': '%s' is truncated: its header promises %llu bytes "
                    "of data, the file has %llu",
                    b->name, nm, (unsigned long long)info.data_bytes,
                    (unsigned long long)(size > info.data_offset ? size - info.data_offset : 0));
                goto fail;
            }
        }
    } else {
        if (fseek(*f, 0, SEEK_END) != 0) {
            st = pl_error_set(err, PL_EIO, "error: cannot seek in '%s': %s", nm, strerror(errno));
            goto fail;
        }
        long end = ftell(*f);
        avail = end > 0 ? (uint64_t)end : 0;
    }
    if (avail != b->bytes) {
        st = pl_error_at(err, PL_EINPUT, b->init_pos,
                         "buffer '%s' needs %llu bytes but '%s' holds %llu bytes of data; give a "
                         "file of exactly the buffer's size",
                         b->name, (unsigned long long)b->bytes, nm, (unsigned long long)avail);
        goto fail;
    }
    return PL_OK;
fail:
    fclose(*f);
    *f = NULL;
    return st;
}

pl_status pl_buffer_check_init_file(const pl_spec *spec, const pl_buffer *b, pl_error *err)
{
    char path[4096];
    FILE *f;
    uint64_t off;
    PL_CHECK(pl__init_file_open(spec, b, &f, &off, path, sizeof path, err));
    fclose(f);
    return PL_OK;
}

static pl_status pl__init_file(const pl_spec *spec, const pl_buffer *b, void *dst, pl_error *err)
{
    char path[4096];
    FILE *f;
    uint64_t off;
    PL_CHECK(pl__init_file_open(spec, b, &f, &off, path, sizeof path, err));
    pl_status st = PL_OK;
    char shown[PL_NAME_CAP];
    if (fseek(f, (long)off, SEEK_SET) != 0 || fread(dst, 1, (size_t)b->bytes, f) != b->bytes)
        st = pl_error_set(err, PL_EIO, "error: buffer '%s': reading '%s' failed: %s", b->name,
                          pl_name_str(path, PL_NAME_INSIDE, shown, sizeof shown),
                          ferror(f) ? strerror(errno) : "file shorter than its header says");
    fclose(f);
    return st;
}

pl_status pl_buffer_init_contents(const pl_spec *spec, const pl_buffer *b, uint64_t seed, void *dst,
                                  pl_error *err)
{
    switch (b->init) {
    case PL_INIT_NONE:
    case PL_INIT_ZEROS:
        memset(dst, 0, (size_t)b->bytes);
        return PL_OK;
    case PL_INIT_RANDOM: {
        double lo, hi;
        pl_rng_default_range(b->dtype, &lo, &hi);
        pl_rng_fill(dst, b->dtype, b->count, pl_rng_key(seed, PL_RNG_INIT, (uint64_t)b->index, 0),
                    0, lo, hi);
        return PL_OK;
    }
    case PL_INIT_FILE:
        return pl__init_file(spec, b, dst, err);
    }
    return PL_OK;
}

pl_status pl_buffers_new(const pl_spec *spec, int depth, const pl_allocator *alloc, bool init,
                         uint64_t seed, pl_buffers **out, pl_error *err)
{
    *out = NULL;
    pl_status st = PL_OK;
    pl_buffers *bufs = calloc(1, sizeof *bufs);
    if (!bufs) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    bufs->spec = spec;
    bufs->depth = depth;
    bufs->n_buffers = spec->n_buffers;
    bufs->alloc = alloc ? *alloc : (pl_allocator){pl__calloc, pl__free, NULL};
    bufs->ptr =
        calloc((size_t)depth * (size_t)(spec->n_buffers ? spec->n_buffers : 1), sizeof *bufs->ptr);
    if (!bufs->ptr) {
        st = pl_error_set(err, PL_ENOMEM, "error: out of memory");
        goto fail;
    }
    for (int b = 0; b < spec->n_buffers; b++) {
        const pl_buffer *buf = &spec->buffers[b];
        int copies = buf->persistent ? 1 : depth;
        for (int s = 0; s < copies; s++) {
            void *p = pl__alloc_one(bufs, buf, depth, err);
            if (!p) {
                st = err ? err->status : PL_ENOMEM;
                if (st == PL_OK) st = PL_ENOMEM;
                goto fail;
            }
            bufs->bytes_allocated += buf->bytes;
            bufs->ptr[(size_t)s * spec->n_buffers + b] = p;
            /* calloc'd memory is zero already; other allocators' is not. */
            if (init && (buf->init != PL_INIT_NONE || alloc))
                PL_CHECK_GOTO(pl_buffer_init_contents(spec, buf, seed, p, err), st, fail);
        }
        if (buf->persistent)
            for (int s = 1; s < depth; s++)
                bufs->ptr[(size_t)s * spec->n_buffers + b] = bufs->ptr[b];
    }
    *out = bufs;
    return PL_OK;
fail:
    pl_buffers_free(bufs);
    return st;
}

pl_status pl_buffers_grow(pl_buffers *bufs, int depth, bool init, uint64_t seed, pl_error *err)
{
    const pl_spec *spec = bufs->spec;
    int old = bufs->depth, nb = bufs->n_buffers;
    if (depth <= old) return PL_OK;
    size_t row = (size_t)(nb ? nb : 1);
    void **ptr = realloc(bufs->ptr, (size_t)depth * row * sizeof *ptr);
    if (!ptr)
        return pl_error_set(err, PL_ENOMEM, "error: out of memory growing to depth %d", depth);
    bufs->ptr = ptr;
    memset(ptr + (size_t)old * row, 0, (size_t)(depth - old) * row * sizeof *ptr);
    pl_status st = PL_OK;
    int s = old;
    for (; s < depth && st == PL_OK; s++)
        for (int b = 0; b < nb && st == PL_OK; b++) {
            const pl_buffer *buf = &spec->buffers[b];
            if (buf->persistent) {
                ptr[(size_t)s * nb + b] = ptr[b];
                continue;
            }
            void *p = pl__alloc_one(bufs, buf, depth, err);
            if (!p) {
                st = err && err->status != PL_OK ? err->status : PL_ENOMEM;
                break;
            }
            ptr[(size_t)s * nb + b] = p;
            bufs->bytes_allocated += buf->bytes;
            if (init && (buf->init != PL_INIT_NONE || bufs->alloc.alloc != pl__calloc))
                st = pl_buffer_init_contents(spec, buf, seed, p, err);
        }
    if (st == PL_OK) {
        bufs->depth = depth;
        return PL_OK;
    }
    /* Back to the old depth: free what this call allocated (persistent entries are slot 0's). */
    for (int s2 = old; s2 < depth; s2++)
        for (int b = 0; b < nb; b++) {
            void *p = ptr[(size_t)s2 * nb + b];
            if (p && !spec->buffers[b].persistent) {
                bufs->alloc.free(bufs->alloc.user, &spec->buffers[b], p);
                bufs->bytes_allocated -= spec->buffers[b].bytes;
            }
            ptr[(size_t)s2 * nb + b] = NULL;
        }
    return st;
}
