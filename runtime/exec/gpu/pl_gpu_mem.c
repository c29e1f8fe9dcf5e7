/* pl_gpu_mem: the GPU executor's memory: pinned host and device buffers, allocated once per run
 * (captured copy nodes bake addresses in, so buffers never move), and their initial contents. */
#include <stdlib.h>
#include <string.h>

#include "pl_gx.h"

static void *pl__pinned_alloc(void *user, const pl_buffer *b, uint64_t bytes, pl_error *err)
{
    (void)user;
    if (b->where != PL_HOST) return (void *)1; /* placeholder, replaced by NULL below */
    void *p = NULL;
    if (PL_CUDA(cudaHostAlloc(&p, bytes, cudaHostAllocDefault), NULL, -1, err) != PL_OK) {
        pl_error_prefix(err, "buffer '%s' (%llu bytes of pinned host memory)", b->name,
                        (unsigned long long)bytes);
        return NULL;
    }
    return p;
}

static void pl__pinned_free(void *user, const pl_buffer *b, void *p)
{
    (void)user;
    if (b->where == PL_HOST && p) cudaFreeHost(p);
}

static void *pl__device_alloc(void *user, const pl_buffer *b, uint64_t bytes, pl_error *err)
{
    (void)user;
    if (b->where != PL_DEVICE) return (void *)1;
    void *p = NULL;
    if (PL_CUDA(cudaMalloc(&p, bytes), NULL, -1, err) != PL_OK) {
        pl_error_prefix(err, "buffer '%s' (%llu bytes of device memory)", b->name,
                        (unsigned long long)bytes);
        return NULL;
    }
    return p;
}

static void pl__device_free(void *user, const pl_buffer *b, void *p)
{
    (void)user;
    if (b->where == PL_DEVICE && p) cudaFree(p);
}

static pl_status pl__init_slots(pl_gx *gx, int s0, int s1, pl_error *err);

/* Allocates every buffer once for the whole run (captured copy nodes bake addresses in, so
 * buffers never move) and writes their initial contents; pageable memory is used only here, for
 * the staging copy of device buffers' initial contents. */
pl_status pl_gx_alloc_buffers(pl_gx *gx, pl_error *err)
{
    const pl_spec *spec = gx->spec;
    pl_allocator ha = {pl__pinned_alloc, pl__pinned_free, NULL};
    pl_allocator da = {pl__device_alloc, pl__device_free, NULL};
    pl_status st = pl_buffers_new(spec, gx->depth, &ha, false, 0, &gx->hbufs, err);
    if (st != PL_OK) return st;
    st = pl_buffers_new(spec, gx->depth, &da, false, 0, &gx->dbufs, err);
    if (st != PL_OK) return st;
    return pl__init_slots(gx, 0, gx->depth, err);
}

/* Slots s0..s1-1 of both tables: the allocators' placeholders for the other side's buffers become
 * NULL (stages see NULL for device buffers: pl_stage_ctx contract; frees skip them), and buffers
 * get their initial contents (persistent ones only with slot 0: they are one copy). */
static pl_status pl__init_slots(pl_gx *gx, int s0, int s1, pl_error *err)
{
    const pl_spec *spec = gx->spec;
    pl_status st = PL_OK;
    for (int s = s0; s < s1; s++)
        for (int i = 0; i < gx->nbuf; i++) {
            size_t k = (size_t)s * (size_t)gx->nbuf + (size_t)i;
            if (spec->buffers[i].where == PL_HOST)
                gx->dbufs->ptr[k] = NULL;
            else
                gx->hbufs->ptr[k] = NULL;
        }
    void *staging = NULL;
    uint64_t staging_bytes = 0;
    for (int i = 0; i < gx->nbuf && st == PL_OK; i++) {
        const pl_buffer *b = &spec->buffers[i];
        int a = s0, z = s1;
        if (b->persistent) {
            if (s0 > 0) continue;
            z = 1;
        }
        if (b->where == PL_HOST) {
            for (int s = a; s < z && st == PL_OK; s++)
                st = pl_buffer_init_contents(spec, b, spec->run.seed,
                                             gx->hbufs->ptr[(size_t)s * gx->nbuf + i], err);
            continue;
        }
        if (b->init == PL_INIT_NONE || b->init == PL_INIT_ZEROS) {
            for (int s = a; s < z && st == PL_OK; s++)
                st = PL_CUDA(cudaMemset(gx->dbufs->ptr[(size_t)s * gx->nbuf + i], 0, b->bytes),
                             NULL, -1, err);
            continue;
        }
        if (b->bytes > staging_bytes) {
            free(staging);
            staging = malloc(b->bytes);
            staging_bytes = staging ? b->bytes : 0;
            if (!staging) {
                st = pl_error_set(err, PL_ENOMEM, "error: out of memory initialising buffer '%s'",
                                  b->name);
                break;
            }
        }
        st = pl_buffer_init_contents(spec, b, spec->run.seed, staging, err);
        for (int s = a; s < z && st == PL_OK; s++)
            st = PL_CUDA(cudaMemcpy(gx->dbufs->ptr[(size_t)s * gx->nbuf + i], staging, b->bytes,
                                    cudaMemcpyHostToDevice),
                         NULL, -1, err);
    }
    free(staging);
    if (st == PL_OK) st = PL_CUDA(cudaDeviceSynchronize(), NULL, -1, err); /* setup only */
    return st;
}

/* depth: auto grows the ring after its calibration batches: new slots only, so the buffers the
 * calibration's graphs baked in stay where they are. */
pl_status pl_gx_grow_buffers(pl_gx *gx, int depth, pl_error *err)
{
    int old = gx->depth;
    PL_CHECK(pl_buffers_grow(gx->hbufs, depth, false, 0, err));
    pl_status st = pl_buffers_grow(gx->dbufs, depth, false, 0, err);
    if (st != PL_OK) return st; /* hbufs keeps its extra slots until teardown: harmless */
    return pl__init_slots(gx, old, depth, err);
}

pl_status pl_gx_in_place(pl_gx *gx, pl_error *err)
{
    pl_stage_rt *rt = &gx->rt;
    if (gx->graphs || rt->env.n_io == 0) return PL_OK; /* segment graphs bake the slot's address */
    const pl_spec *spec = gx->spec;
    for (int i = 0; i < rt->env.n_io; i++) {
        pl_run_io *io = &rt->io[i];
        if (io->output || io->stage < 0) continue;
        const pl_buffer *b = &spec->buffers[io->buffer];
        bool uploads_only = b->bytes >= PL_GRAPHS_STAGE_MIN_COPY;
        for (int s = 0; s < spec->n_stages && uploads_only; s++)
            for (int r = 0; r < spec->stages[s].n_reads && uploads_only; r++)
                uploads_only = spec->stages[s].reads[r].index != io->buffer ||
                               gx->plan->stages[s].engine == PL_ENGINE_H2D;
        if (!uploads_only) continue;
        if (!gx->registered) {
            gx->registered = calloc((size_t)rt->env.n_io, sizeof *gx->registered);
            gx->in_place_table = calloc((size_t)(gx->nbuf > 0 ? gx->nbuf : 1), sizeof(void *));
            if (!gx->registered || !gx->in_place_table)
                return pl_error_set(err, PL_ENOMEM, "error: out of memory");
        }
        /* Read-only memory (a numpy array that is not writable) registers read-only. */
        cudaError_t ce = cudaHostRegister(io->data, (size_t)io->bytes, cudaHostRegisterDefault);
        if (ce != cudaSuccess) {
            cudaGetLastError();
            ce = cudaHostRegister(io->data, (size_t)io->bytes, cudaHostRegisterReadOnly);
        }
        if (ce != cudaSuccess) {
            cudaGetLastError(); /* not pinnable (already registered, a limit): copied instead */
            continue;
        }
        gx->registered[gx->n_registered++] = io->data;
        io->in_place = true;
    }
    return PL_OK;
}

void pl_gx_in_place_fini(pl_gx *gx)
{
    for (int i = 0; i < gx->n_registered; i++)
        cudaHostUnregister(gx->registered[i]);
    free(gx->registered);
    free(gx->in_place_table);
    gx->registered = NULL;
    gx->in_place_table = NULL;
    gx->n_registered = 0;
}

void *const *pl_gx_host_table(pl_gx *gx, int slot, int64_t batch)
{
    void *const *hb = pl_buffers_slot(gx->hbufs, slot);
    if (gx->n_registered == 0 || batch < 0) return hb;
    const pl_spec *spec = gx->spec;
    int64_t global = pl_shard_global(&spec->run.shard, spec->run.batches, batch);
    memcpy(gx->in_place_table, hb, (size_t)gx->nbuf * sizeof *gx->in_place_table);
    for (int i = 0; i < gx->rt.env.n_io; i++) {
        const pl_run_io *io = &gx->rt.io[i];
        if (io->in_place)
            gx->in_place_table[io->buffer] =
                (char *)io->data + (uint64_t)global * spec->buffers[io->buffer].bytes;
    }
    return gx->in_place_table;
}
