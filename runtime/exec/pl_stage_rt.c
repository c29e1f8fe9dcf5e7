/* pl_stage_rt: open/run/close of every stage's per-run state, for both executors. */
#include "pl_stage_rt.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pl_intr.h"
#include "pl_nvtx.h"
#include "pl_pool.h"
#include "pl_stream.h"

int pl_default_workers(const pl_plan *plan)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int w = cpus > 0 ? (int)cpus : 1;
    if (plan && plan->n_streams > w) w = plan->n_streams;
    return w > 64 ? 64 : w;
}

/* rt->io: the run's bindings, and on the host executor the inputs in place (their buffer's only
 * writer is the source they replace, so nothing writes into the caller's memory) with a buffer
 * table per worker for them. -1 when out of memory. */
static int pl__io_copy(pl_stage_rt *rt, const pl_run_cfg *cfg, bool host)
{
    int n = cfg ? cfg->n_io : 0;
    if (n <= 0) return 0;
    rt->io = malloc((size_t)n * sizeof *rt->io);
    if (!rt->io) return -1;
    memcpy(rt->io, cfg->io, (size_t)n * sizeof *rt->io);
    rt->env.io = rt->io;
    rt->env.n_io = n;
    const pl_spec *spec = rt->env.spec;
    for (int i = 0; host && i < n; i++) {
        pl_run_io *io = &rt->io[i];
        if (io->output || io->stage < 0) continue;
        bool alone = true;
        for (int s = 0; s < spec->n_stages && alone; s++)
            for (int w = 0; w < spec->stages[s].n_writes && alone; w++)
                alone = s == io->stage || spec->stages[s].writes[w].index != io->buffer;
        io->in_place = alone;
        rt->n_host_in_place += alone;
    }
    if (rt->n_host_in_place) {
        size_t nb = (size_t)(spec->n_buffers > 0 ? spec->n_buffers : 1);
        rt->tables = malloc((size_t)rt->env.workers * nb * sizeof *rt->tables);
        if (!rt->tables) return -1;
    }
    return 0;
}

pl_status pl_stage_rt_open(pl_stage_rt *rt, const pl_plan *plan, const pl_run_cfg *cfg, int workers,
                           void *const *open_bufs, struct pl_gpu_ctx *gpu, pl_error *err)
{
    memset(rt, 0, sizeof *rt);
    const pl_spec *spec = plan->spec;
    /* NVTX's first range initializes it (the domain, the tool's hooks): here, before the run's
     * clock, rather than in the run's first stage. */
    pl_nvtx_push("setup", -1);
    pl_nvtx_pop();
    rt->plan = plan;
    rt->env.spec = spec;
    /* A shard's plan runs a part of the batches; the kinds see the pipeline's count (a source
     * checks its file against it, Lua reads it), as in a single run. */
    rt->env.batches = pl_shard_on(&spec->run.shard) ? spec->run.batches : plan->batches;
    /* depth: auto grows the ring up to depth_cap after its calibration: kinds size their
     * per-slot state for every slot the run may use. */
    rt->env.depth =
        plan->depth_auto && plan->depth_cap > plan->depth ? plan->depth_cap : plan->depth;
    rt->env.workers = workers > 0 ? workers : 1;
    rt->env.seed = spec->run.seed;
    rt->env.on_gpu = gpu != NULL;
    rt->env.gpu = gpu;
    rt->env.open_bufs = open_bufs;
    rt->n_stages = spec->n_stages;
    rt->env.rows = malloc(sizeof *rt->env.rows);
    if (rt->env.rows) *rt->env.rows = (pl_run_rows){.batch = -1, .rows = INT64_MAX};
    rt->state = calloc((size_t)(spec->n_stages > 0 ? spec->n_stages : 1), sizeof *rt->state);
    rt->opened = calloc((size_t)(spec->n_stages > 0 ? spec->n_stages : 1), sizeof *rt->opened);
    if (!rt->state || !rt->opened || !rt->env.rows || pl__io_copy(rt, cfg, gpu == NULL) != 0) {
        pl_stage_rt_close(rt, NULL, true, NULL, NULL);
        return pl_error_set(err, PL_ENOMEM, "error: out of memory opening stages");
    }
    /* One pool for the whole run: a kind's parallel host work never starts threads per batch. */
    pl_status pst = pl_pool_new(rt->env.workers - 1, &rt->env.pool, err);
    if (pst != PL_OK) {
        pl_stage_rt_close(rt, NULL, true, NULL, NULL);
        return pst;
    }
    /* A persistent buffer bound to the caller's memory (pl_run_io with no stage) takes its
     * contents now, in place of its init, so the stages find them at open. */
    for (int i = 0; i < rt->env.n_io && open_bufs; i++) {
        const pl_run_io *io = &rt->env.io[i];
        if (io->stage < 0 && !io->output && open_bufs[io->buffer])
            memcpy(open_bufs[io->buffer], io->data, (size_t)io->bytes);
    }
    for (int i = 0; i < plan->n_stages; i++) {
        int s = plan->order[i];
        const pl_stage *st = &spec->stages[s];
        const pl_kind *kind = st->kind;
        if (!kind->open) {
            rt->opened[s] = kind->close != NULL;
            continue;
        }
        pl_status ps = kind->open(&rt->env, st, &rt->state[s], err);
        if (ps != PL_OK) {
            pl_error_tag(err, st->name, -1); /* open's messages name the stage or the key */
            pl_stage_rt_close(rt, NULL, true, NULL, NULL);
            return ps;
        }
        rt->opened[s] = true;
    }
    rt->env.open_bufs = NULL; /* valid during open() only */
    return PL_OK;
}

pl_status pl_stage_rt_run_host(const pl_stage_rt *rt, const pl_run_cfg *cfg, int stage,
                               int64_t batch, int worker, void *const *bufs, pl_error *err)
{
    const pl_spec *spec = rt->plan->spec;
    const pl_stage *st = &spec->stages[stage];
    const pl_kind *kind = st->kind;
    /* The executors count this process's batches; the kinds get the pipeline's index of it. */
    int64_t local = batch;
    batch = pl_shard_global(&spec->run.shard, spec->run.batches, local);
    if (cfg && cfg->fail_stage == stage && cfg->fail_batch == local) {
        pl_error_set(err, PL_ERUNTIME, "error: injected failure (test hook fail_stage/fail_batch)");
        return pl_error_stage(err, st->name, batch);
    }
    if (st->loop) {
        pl_nvtx_push(st->name, batch);
        pl_status ls = rt->run_loop
                           ? rt->run_loop(rt->loop_user, rt, cfg, stage, local, worker, bufs, err)
                           : pl_stage_rt_run_loop(rt, cfg, stage, local, worker, bufs, err);
        pl_nvtx_pop();
        /* A body stage's failure names that stage already. */
        if (ls != PL_OK) pl_error_stage(err, st->name, batch);
        return ls;
    }
    if (!kind->run_host) {
        pl_error_set(err, PL_ERUNTIME,
                     "error: kind '%s' cannot run on the host executor yet; use --executor gpu",
                     kind->name);
        return pl_error_stage(err, st->name, -1);
    }
    if (rt->n_host_in_place) {
        /* This worker's table: the slot's, with the inputs in place at the caller's batch. */
        size_t nb = (size_t)spec->n_buffers;
        void **t = rt->tables + (size_t)worker * nb;
        memcpy(t, bufs, nb * sizeof *t);
        for (int i = 0; i < rt->env.n_io; i++) {
            const pl_run_io *io = &rt->io[i];
            if (io->in_place)
                t[io->buffer] =
                    (char *)io->data + (uint64_t)batch * spec->buffers[io->buffer].bytes;
        }
        bufs = t;
    }
    pl_stage_ctx ctx = {
        .spec = spec,
        .stage = st,
        .env = &rt->env,
        .batch = batch,
        .slot = (int)(local % rt->plan->depth),
        .worker = worker,
        .bufs = bufs,
        .state = rt->state[stage],
    };
    pl_nvtx_push(st->name, batch);
    pl_status ps = kind->run_host(&ctx, err);
    pl_nvtx_pop();
    /* The hook says what failed; the record (and, unless the hook named it, the message) says
     * where, the same on both executors. */
    if (ps != PL_OK) pl_error_stage(err, st->name, batch);
    return ps;
}

pl_status pl_stage_rt_run_loop(const pl_stage_rt *rt, const pl_run_cfg *cfg, int stage,
                               int64_t batch, int worker, void *const *bufs, pl_error *err)
{
    const pl_stage *st = &rt->plan->spec->stages[stage];
    const pl_loop *l = st->loop;
    const pl_plan_loop *lp = pl_plan_loop_of(rt->plan, stage);
    int64_t limit = l->count ? l->count : l->max;
    const int32_t *cond = l->cond.name ? bufs[l->cond.index] : NULL;
    int32_t *index = l->index.name ? bufs[l->index.index] : NULL;
    /* A stream takes the columns written so far at the test, before the body runs again. */
    pl_stream_shape sh;
    pl_stream *stream = pl_stream_shape_of(rt->plan->spec, st, &sh) ? rt->state[stage] : NULL;
    int64_t global =
        pl_shard_global(&rt->plan->spec->run.shard, rt->plan->spec->run.batches, batch);
    int64_t lo = 0;
    for (int64_t it = 0;; it++) {
        if (index) *index = (int32_t)it;
        bool done = it >= limit || (cond && *cond == 0);
        if (stream && pl_stream_due(&sh, it, done)) {
            int64_t hi = pl_stream_cols(&sh, it);
            PL_CHECK(pl_stream_put(stream, batch, global, it, lo, hi, bufs[sh.from],
                                   sh.finished >= 0 ? bufs[sh.finished] : NULL, done, err));
            lo = hi;
        }
        if (done) return PL_OK;
        /* The second signal drops the batches in flight: this one stops between iterations. */
        if (it > 0 && pl_intr_level() == PL_INTR_ABORT)
            return pl_intr_error(err, "repeating a loop");
        for (int i = 0; i < lp->n_body; i++)
            PL_CHECK(pl_stage_rt_run_host(rt, cfg, lp->body[i], batch, worker, bufs, err));
    }
}

pl_status pl_stage_rt_close(pl_stage_rt *rt, const int64_t *completed, bool failed,
                            pl_run_result *res, pl_error *err)
{
    pl_status first = PL_OK;
    if (rt->plan && rt->opened) {
        const pl_spec *spec = rt->plan->spec;
        int n_sinks = 0;
        for (int s = 0; s < rt->n_stages; s++)
            n_sinks += rt->opened[s] && spec->stages[s].kind->output != NULL;
        int *out_of = calloc((size_t)(rt->n_stages > 0 ? rt->n_stages : 1), sizeof *out_of);
        if (res && n_sinks && out_of) {
            free(res->outputs);
            res->outputs = calloc((size_t)n_sinks, sizeof *res->outputs);
            res->n_outputs = 0;
        }
        /* After a failure or a stop every stage closes with what the whole run completed, so a
         * sink that ran ahead of another lane's failure keeps no batch the others lack. */
        int64_t run_done = -1;
        for (int s = 0; failed && completed && s < rt->n_stages; s++)
            if (run_done < 0 || completed[s] < run_done) run_done = completed[s];
        /* Describe the outputs (in stage order) while their states are still open. */
        for (int s = 0; s < rt->n_stages && out_of; s++) {
            out_of[s] = -1;
            const pl_kind *kind = spec->stages[s].kind;
            if (!rt->opened[s] || !kind->output || !res || !res->outputs) continue;
            bool has = false;
            pl_output *o = &res->outputs[res->n_outputs];
            int64_t c = !completed                                 ? 0
                        : run_done >= 0 && run_done < completed[s] ? run_done
                                                                   : completed[s];
            if (kind->output(&spec->stages[s], rt->state[s], c, o, &has) != PL_OK) {
                if (first == PL_OK) first = pl_error_set(err, PL_ENOMEM, "error: out of memory");
                has = true; /* keep what it filled, so it is freed */
            }
            if (has) out_of[s] = res->n_outputs++;
        }
        /* Close in reverse plan order: consumers before producers. */
        for (int i = rt->plan->n_stages - 1; i >= 0; i--) {
            int s = rt->plan->order[i];
            if (!rt->opened[s]) continue;
            const pl_stage *st = &spec->stages[s];
            const pl_kind *kind = st->kind;
            pl_error cerr;
            pl_error_clear(&cerr);
            pl_status cs =
                kind->close ? kind->close(&rt->env, st, rt->state[s],
                                          !completed                                 ? 0
                                          : run_done >= 0 && run_done < completed[s] ? run_done
                                                                                     : completed[s],
                                          failed, &cerr)
                            : PL_OK;
            if (cs != PL_OK && first == PL_OK) {
                first = cs;
                pl_error_tag(&cerr, st->name, -1);
                if (err) *err = cerr;
            }
            if (out_of && out_of[s] >= 0) {
                pl_output *o = &res->outputs[out_of[s]];
                o->finalized = cs == PL_OK;
                /* A sink whose close failed may have lost its file (its directory was removed):
                 * never report a file that is not there; the close error says what happened. */
                if (cs != PL_OK && o->path && strcmp(o->path, "-") != 0 &&
                    access(o->path, F_OK) != 0) {
                    free(o->path);
                    o->path = NULL;
                }
            }
            rt->opened[s] = false;
        }
        free(out_of);
    }
    pl_pool_free(rt->env.pool); /* after every close: a close may still use it */
    rt->env.pool = NULL;
    free(rt->state);
    free(rt->opened);
    free(rt->env.rows);
    rt->env.rows = NULL;
    free(rt->io);
    free(rt->tables);
    rt->io = NULL;
    rt->tables = NULL;
    rt->env.io = NULL;
    rt->env.n_io = 0;
    rt->n_host_in_place = 0;
    rt->state = NULL;
    rt->opened = NULL;
    return first;
}
