/* pl_api_io: the API's run driver (pl_api_int.h): the caller's in-memory bindings resolved to
 * the stages they replace and checked against the plan, before anything runs, then the run. */
#include "pl_api_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_sink.h"
#include "pl_source.h"

/* pl_run_io.fn for a binding given as pipectl_batch_fn (long long batch). */
static int pl__call_fn(void *user, const char *buffer, int64_t batch, const void *data, size_t n)
{
    const pl_api_bind *b = user;
    return b->fn(b->user, buffer, (long long)batch, data, n);
}

/* The buffer a binding names: the pipeline's, on the host. */
static pl_status pl__bind_buffer(const pl_spec *spec, const pl_api_bind *b, const char *what,
                                 int *index, pl_error *err)
{
    *index = pl_spec_find_buffer(spec, b->name);
    if (*index < 0) {
        const char **names =
            malloc((size_t)(spec->n_buffers ? spec->n_buffers : 1) * sizeof *names);
        const char *near = NULL;
        if (names) {
            for (int i = 0; i < spec->n_buffers; i++)
                names[i] = spec->buffers[i].name;
            near = pl_closest(b->name, names, spec->n_buffers);
        }
        char hint[PL_MAX_NAME + 32] = "";
        if (near) snprintf(hint, sizeof hint, " (did you mean '%s'?)", near);
        free(names);
        return pl_error_set(err, PL_EINPUT, "error: %s '%s': pipeline '%s' has no buffer '%s'%s",
                            what, b->name, spec->name, b->name, hint);
    }
    const pl_buffer *buf = &spec->buffers[*index];
    if (buf->where != PL_HOST)
        return pl_error_set(err, PL_EINPUT,
                            "error: %s '%s': buffer '%s' is on the device; bind the host buffer "
                            "it is copied %s",
                            what, b->name, buf->name,
                            b->output ? "to (a d2h's 'to')" : "from (an h2d's 'from')");
    if (buf->persistent && b->output)
        return pl_error_set(err, PL_EINPUT,
                            "error: output '%s': buffer '%s' is persistent (one copy for the "
                            "run), not a buffer of each batch: no sink writes its batches",
                            b->name, buf->name);
    return PL_OK;
}

/* Resolves and checks binding b against the plan into *io. */
static pl_status pl__resolve(const pl_plan *plan, const pl_api_bind *b, pl_run_io *io,
                             pl_error *err)
{
    const pl_spec *spec = plan->spec;
    const char *what = b->output ? "output" : "input";
    int bi;
    PL_CHECK(pl__bind_buffer(spec, b, what, &bi, err));
    const pl_buffer *buf = &spec->buffers[bi];
    if (buf->persistent) {
        /* Its contents for the whole run, in place of its `init:`: copied once, before the
         * stages open (they may read it then, as the search stage's index does). */
        if (b->bytes != buf->bytes)
            return pl_error_set(err, PL_EINPUT,
                                "error: input '%s': persistent buffer '%s' is %llu bytes (%s), "
                                "the memory %llu; give exactly its contents",
                                b->name, buf->name, (unsigned long long)buf->bytes,
                                pl_dtype_name(buf->dtype), (unsigned long long)b->bytes);
        *io = (pl_run_io){.buffer = bi, .stage = -1, .data = b->data, .bytes = b->bytes};
        return PL_OK;
    }
    int stage;
    if (b->output)
        PL_CHECK(pl_sink_memory_stage(spec, bi, b->fn != NULL, &stage, err));
    else
        PL_CHECK(pl_source_memory_stage(spec, bi, &stage, err));
    if (stage < 0) {
        /* Say who does write (read) it, so the fix is plain. */
        const char *other = NULL;
        for (int s = 0; s < spec->n_stages && !other; s++) {
            const pl_stage *st = &spec->stages[s];
            const pl_ref *refs = b->output ? st->reads : st->writes;
            int n = b->output ? st->n_reads : st->n_writes;
            for (int k = 0; k < n && !other; k++)
                if (refs[k].index == bi) other = st->name;
        }
        char by[PL_MAX_NAME + 64] = "";
        if (other)
            snprintf(by, sizeof by, " (stage '%s' %s it)", other, b->output ? "reads" : "writes");
        if (b->output)
            return pl_error_set(err, PL_EINPUT,
                                "error: output '%s': no sink writes buffer '%s'%s; add a stage "
                                "{kind: sink, from: %s} (without 'to:' it writes no file)",
                                b->name, buf->name, by, buf->name);
        return pl_error_set(err, PL_EINPUT,
                            "error: input '%s': no source fills buffer '%s'%s; an input stands in "
                            "for a source stage: bind the buffer a source's 'to:' names",
                            b->name, buf->name, by);
    }
    /* A source gives the pipeline's batches by their index (a shard's too); a sink writes the
     * plan's one after the other. */
    int64_t batches = pl_shard_on(&spec->run.shard) ? spec->run.batches : plan->batches;
    if (b->data && b->bytes % buf->bytes)
        return pl_error_set(err, PL_EINPUT,
                            "error: %s '%s': %llu bytes are not a whole number of batches of "
                            "buffer '%s' (%llu bytes each: %s [%lld%s])",
                            what, b->name, (unsigned long long)b->bytes, buf->name,
                            (unsigned long long)buf->bytes, pl_dtype_name(buf->dtype),
                            (long long)buf->shape[0], buf->rank > 1 ? ", ..." : "");
    if (b->data && b->bytes / buf->bytes < (uint64_t)batches)
        return pl_error_set(err, PL_EINPUT,
                            "error: %s '%s': the memory holds %llu batches of buffer '%s', the run "
                            "%s %lld; %s",
                            what, b->name, (unsigned long long)(b->bytes / buf->bytes), buf->name,
                            b->output ? "writes" : "needs", (long long)batches,
                            b->output ? "give room for every batch" : "give more, or run fewer");
    *io = (pl_run_io){.buffer = bi,
                      .stage = stage,
                      .output = b->output,
                      .data = b->data,
                      .bytes = b->bytes,
                      .fn = b->fn ? pl__call_fn : NULL,
                      .user = (void *)b};
    return PL_OK;
}

pl_status pl_api_run(const pl_plan *plan, const pl_run_cfg *cfg, const pl_api_bind *binds, int n,
                     pl_run_result *res, pl_error *err)
{
    if (n <= 0) return pl_run(plan, cfg, res, err);
    memset(res, 0, sizeof *res);
    pl_run_io io[PL_API_MAX_BINDS];
    if (n > PL_API_MAX_BINDS)
        return pl_error_set(err, PL_EINPUT, "error: more than %d in-memory bindings",
                            PL_API_MAX_BINDS);
    for (int i = 0; i < n; i++) {
        PL_CHECK(pl__resolve(plan, &binds[i], &io[i], err));
        for (int j = 0; j < i; j++)
            if (io[j].stage >= 0 && io[j].stage == io[i].stage)
                return pl_error_set(err, PL_EINPUT,
                                    "error: %s '%s' and %s '%s' both stand in for stage '%s'; "
                                    "bind one of them",
                                    io[j].output ? "output" : "input", binds[j].name,
                                    io[i].output ? "output" : "input", binds[i].name,
                                    plan->spec->stages[io[i].stage].name);
    }
    pl_run_cfg c;
    if (cfg)
        c = *cfg;
    else
        pl_run_cfg_init(&c);
    c.io = io;
    c.n_io = n;
    return pl_run(plan, &c, res, err);
}
