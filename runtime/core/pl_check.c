/* pl_check: resolves and validates a spec: run options, buffers, stages (options, binds, names,
 * engines), then the dependency graph (cycles, hazards, reads of unwritten
 * buffers), and, separately, the files a run will touch (pl_spec_check_files). Without a
 * diagnostics list the first error wins; with one, every independent error of a phase is listed.
 * Every message says where, what and how to fix it. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pl_buffers.h"
#include "pl_diag.h"
#include "pl_graph.h"
#include "pl_loop.h"
#include "pl_spec.h"
#include "pl_stage.h"
#include "pl_str.h"

/* "file:line:col" of pos, for the second position in a message about two places; a file name
 * too long for buf loses its middle, so line and column survive. */
static const char *pl__pos_str(pl_pos pos, char *buf, size_t n)
{
    if (pos.line > 0) {
        const char *f = pos.file ? pos.file : "<input>";
        char cut[448]; /* with ":line:col" it fits the callers' 512 bytes */
        size_t len = strlen(f), keep = (sizeof cut - 8) / 2;
        if (n > 64 && keep > (n - 64) / 2) keep = (n - 64) / 2;
        if (len + 32 > n) {
            pl_str_cut_middle(f, len, keep, keep, cut, sizeof cut);
            f = cut;
        }
        snprintf(buf, n, "%s:%d:%d", f, pos.line, pos.col);
    } else if (pos.line == PL_POS_ARG && pos.file)
        snprintf(buf, n, "%s", pos.file);
    else
        snprintf(buf, n, "an unknown position");
    return buf;
}

/* The messages for run options and shapes match the YAML front end's word for word (it checks
 * them at parse time with the value's position), so Lua and builder specs read the same. */
static pl_status pl__check_run(const pl_spec *spec, pl_error *err)
{
    const pl_run_opts *r = &spec->run;
    if (!r->batches_all && (r->batches < 1 || r->batches > PL_MAX_BATCHES))
        return pl_error_at(err, PL_EINPUT, r->batches_pos,
                           "run: 'batches' is %" PRId64 "; it must be between 1 and %" PRId64
                           " (PL_MAX_BATCHES)",
                           r->batches, (int64_t)PL_MAX_BATCHES);
    if (r->depth < 1 || r->depth > PL_MAX_DEPTH)
        return pl_error_at(err, PL_EINPUT, r->depth_pos,
                           "run: 'depth' is %d; it must be between 1 and %d (PL_MAX_DEPTH)",
                           r->depth, PL_MAX_DEPTH);
    if (r->device < 0)
        return pl_error_at(err, PL_EINPUT, r->device_pos,
                           "run: 'device' is %d; it must be between 0 and 2147483647", r->device);
    return PL_OK;
}

/* `batches: all` needs a stage whose data ends (a source reading a file without wrap). */
static pl_status pl__check_batches_all(const pl_spec *spec, pl_error *err)
{
    if (!spec->run.batches_all) return PL_OK;
    for (int i = 0; i < spec->n_stages; i++) {
        const pl_stage *st = &spec->stages[i];
        int64_t n = -1;
        if (st->kind->count_batches && st->kind->count_batches(spec, st, false, &n, err) == PL_OK &&
            n >= 0)
            return PL_OK;
    }
    return pl_error_at(err, PL_EINPUT, spec->run.batches_pos,
                       "run: 'batches: all' runs until the first source file ends, but no stage "
                       "reads a file that ends; give a source 'file:' (without 'wrap: true'), or "
                       "give 'batches' a number");
}

pl_status pl_spec_resolve_batches(pl_spec *spec, pl_error *err)
{
    if (!spec->run.batches_all) return PL_OK;
    if (!spec->checked)
        return pl_error_set(err, PL_ERUNTIME,
                            "error: pl_spec_resolve_batches needs a checked spec; call "
                            "pl_spec_check first");
    int64_t best = -1;
    int from = -1;
    for (int i = 0; i < spec->n_stages; i++) {
        const pl_stage *st = &spec->stages[i];
        int64_t n = -1;
        if (!st->kind->count_batches) continue;
        PL_CHECK(st->kind->count_batches(spec, st, true, &n, err));
        if (n >= 0 && (best < 0 || n < best)) {
            best = n;
            from = i;
        }
    }
    if (best < 0) return pl__check_batches_all(spec, err);
    spec->run.batches = best > PL_MAX_BATCHES ? PL_MAX_BATCHES : best;
    spec->run.batches_from = from;
    return PL_OK;
}

/* The longest name the file system holding `dir` allows (NAME_MAX where it does not say). */
static long pl__name_max(const char *dir)
{
    errno = 0;
    long n = pathconf(dir, _PC_NAME_MAX);
    return n > 0 ? n : NAME_MAX;
}

/* The system's limits on one path a run opens, `path` as written for key `key` of `who` ("sink
 * 'out'", "buffer 'w'"): open() refuses a path of PATH_MAX bytes or more, or one with a name
 * longer than its folder's file system allows, with only "File name too long", so a run would
 * fail after check said yes. The limits apply to the path as opened: relative paths resolved
 * against the pipeline file's folder (pl_spec_path). Names below the deepest folder that exists
 * are measured against that folder's file system, where they would be created. */
static pl_status pl__check_path(const pl_spec *spec, const char *who, const char *key,
                                const char *path, pl_pos pos, pl_error *err)
{
    if (!path || !*path || strcmp(path, "-") == 0) return PL_OK; /* stdin, stdout */
    bool joined = path[0] != '/' && spec->dir && *spec->dir && strcmp(spec->dir, ".") != 0;
    size_t n = joined ? strlen(spec->dir) + 1 + strlen(path) : strlen(path);
    char *full = malloc(n + 1);
    if (!full) return pl_error_set(err, PL_ENOMEM, "error: out of memory checking paths");
    if (joined)
        snprintf(full, n + 1, "%s/%s", spec->dir, path);
    else
        memcpy(full, path, n + 1);
    char shown[PL_NAME_SHORT_CAP], len[32], lim[32];
    const char *as = joined ? " (resolved against the pipeline file's folder)" : "";
    pl_name_str(full, PL_NAME_SHORT | PL_NAME_QUOTE, shown, sizeof shown);
    pl_status st = PL_OK;
    if (n >= PATH_MAX) {
        st = pl_error_at(err, PL_EINPUT, pos,
                         "%s: %s: %s%s is %s bytes, longer than the %s bytes the system allows "
                         "for a path (PATH_MAX, its terminating NUL included); shorten the "
                         "folders' names, or write the file closer to /",
                         who, key, shown, as, pl_str_count(n, len, sizeof len),
                         pl_str_count(PATH_MAX - 1, lim, sizeof lim));
        goto done;
    }
    /* dir_end: where the deepest folder known to exist ends in full (0: "/" or "."). */
    bool exists = true;
    size_t dir_end = 0;
    long limit = pl__name_max(full[0] == '/' ? "/" : ".");
    for (size_t a = 0; a < n;) {
        while (a < n && full[a] == '/')
            a++;
        size_t b = a;
        while (b < n && full[b] != '/')
            b++;
        if (b == a) break;
        if ((long)(b - a) > limit) {
            char name[PL_NAME_SHORT_CAP], folder[PL_NAME_SHORT_CAP];
            char c = full[b];
            full[b] = '\0';
            pl_name_str(full + a, PL_NAME_SHORT | PL_NAME_QUOTE, name, sizeof name);
            full[b] = c;
            c = full[dir_end];
            full[dir_end] = '\0';
            const char *dir = dir_end ? full : c == '/' ? "/" : ".";
            pl_name_str(dir, PL_NAME_SHORT | PL_NAME_QUOTE, folder, sizeof folder);
            full[dir_end] = c;
            bool whole = a == 0 && b == n; /* the path is that one name: say it once */
            st = pl_error_at(err, PL_EINPUT, pos,
                             "%s: %s: %s%s has a name of %s bytes%s%s, longer than the %s bytes "
                             "the file system of %s allows for one name (NAME_MAX); shorten it",
                             who, key, shown, as, pl_str_count(b - a, len, sizeof len),
                             whole ? "" : ", ", whole ? "" : name,
                             pl_str_count((unsigned long long)limit, lim, sizeof lim), folder);
            goto done;
        }
        if (exists && b < n) {
            char c = full[b];
            struct stat sb;
            full[b] = '\0';
            exists = stat(full, &sb) == 0 && S_ISDIR(sb.st_mode);
            if (exists) {
                limit = pl__name_max(full);
                dir_end = b;
            }
            full[b] = c;
        }
        a = b;
    }
done:
    free(full);
    return st;
}

/* Every path a stage's options name (its kind's PL_KEY_PATH keys) against the system's limits. */
static pl_status pl__check_stage_paths(const pl_spec *spec, const pl_stage *st, pl_error *err)
{
    char who[PL_MAX_NAME + 64];
    snprintf(who, sizeof who, "%s stage '%s'", st->kind->name, st->name);
    for (int i = 0; i < st->n_opts; i++) {
        const pl_opt *o = &st->opts[i];
        const pl_key *k = pl_kind_key(st->kind, o->key);
        if (!k || k->type != PL_KEY_PATH || !o->str) continue;
        PL_CHECK(pl__check_path(spec, who, o->key, o->str, o->pos, err));
    }
    return PL_OK;
}

static pl_status pl__check_buffer(pl_buffer *b, pl_names *names, const pl_spec *spec, pl_error *err)
{
    char p[512];
    if (!pl_name_valid(b->name))
        return pl_error_at(err, PL_EINPUT, b->pos,
                           "buffer name '%.*s' is not valid: use letters, digits and '_', "
                           "starting with a letter or '_', at most %d bytes",
                           PL_MAX_NAME + 8, b->name ? b->name : "", PL_MAX_NAME);
    int first = pl_names_put(names, b->name, b->index);
    if (first >= 0)
        return pl_error_at(err, PL_EINPUT, b->pos,
                           "duplicate buffer name '%s' (first declared at %s); rename one of them",
                           b->name, pl__pos_str(spec->buffers[first].pos, p, sizeof p));
    if (b->rank < 1)
        return pl_error_at(err, PL_EINPUT, b->pos,
                           "buffer '%s': 'shape' has no dimensions; give a list of 1 to %d sizes, "
                           "e.g. shape: [1024]",
                           b->name, PL_MAX_RANK);
    if (b->rank > PL_MAX_RANK)
        return pl_error_at(err, PL_EINPUT, b->shape_pos,
                           "buffer '%s': 'shape' has %d dimensions; at most %d (PL_MAX_RANK) are "
                           "allowed: merge some of them",
                           b->name, b->rank, PL_MAX_RANK);
    for (int i = 0; i < b->rank; i++)
        if (b->shape[i] < 1)
            return pl_error_at(err, PL_EINPUT, b->shape_pos,
                               "buffer '%s': shape dimension %d must be a positive integer, got "
                               "'%" PRId64 "'",
                               b->name, i + 1, b->shape[i]);
    uint64_t count;
    PL_CHECK(pl_buffer_count(b, &count, err));
    b->count = (int64_t)count;
    b->bytes = count * pl_dtype_size(b->dtype);
    if (b->init == PL_INIT_FILE && (!b->init_file || !*b->init_file))
        return pl_error_at(err, PL_EINPUT, b->init_pos,
                           "buffer '%s': init: file needs 'file: PATH' (raw or .npy)", b->name);
    if (b->init == PL_INIT_FILE) {
        char who[PL_MAX_NAME + 16];
        snprintf(who, sizeof who, "buffer '%s'", b->name);
        PL_CHECK(pl__check_path(spec, who, "file", b->init_file, b->init_pos, err));
    }
    return PL_OK;
}

static pl_status pl__check_stage_decl(pl_spec *spec, pl_stage *st, pl_names *names, pl_error *err)
{
    char p[512];
    if (!st->name || !*st->name)
        return pl_error_at(err, PL_EINPUT, st->pos,
                           "stage %d has no name; add name: with a name unique in the pipeline",
                           st->index + 1);
    if (!pl_name_valid(st->name))
        return pl_error_at(err, PL_EINPUT, st->pos,
                           "stage name '%.*s' is not valid: use letters, digits and '_', starting "
                           "with a letter or '_', at most %d bytes",
                           PL_MAX_NAME + 8, st->name, PL_MAX_NAME);
    int first = pl_names_put(names, st->name, st->index);
    if (first >= 0)
        return pl_error_at(err, PL_EINPUT, st->pos,
                           "duplicate stage name '%s' (first declared at %s); rename one of them",
                           st->name, pl__pos_str(spec->stages[first].pos, p, sizeof p));
    const pl_kind *kind = st->kind;
    if (!kind)
        return pl_error_at(err, PL_EINPUT, st->pos, "stage '%s' has no kind; add kind: one of %s",
                           st->name, pl_kind_list());
    PL_CHECK(pl_stage_check_opts(spec, st, err));
    /* Before bind: kinds read some files there (a Lua script, a kernel's source). */
    PL_CHECK(pl__check_stage_paths(spec, st, err));
    if (kind->bind) PL_CHECK(kind->bind(spec, st, err));
    return PL_OK;
}

/* Resolves every ref of one list; `what` is "reads" or "writes". */
static pl_status pl__resolve_buffers(const pl_spec *spec, const pl_stage *st, pl_ref *refs, int n,
                                     const char *what, const pl_names *bufs,
                                     const char *const *bnames, pl_error *err)
{
    for (int i = 0; i < n; i++) {
        pl_ref *r = &refs[i];
        r->index = pl_names_get(bufs, r->name);
        if (r->index >= 0) continue;
        const char *best = pl_closest(r->name, bnames, spec->n_buffers);
        if (best)
            return pl_error_at(err, PL_EINPUT, r->pos,
                               "stage '%s' %s unknown buffer '%s' (did you mean '%s'?)", st->name,
                               what, r->name, best);
        return pl_error_at(err, PL_EINPUT, r->pos,
                           "stage '%s' %s unknown buffer '%s'; declare it under buffers: or fix "
                           "the name",
                           st->name, what, r->name);
    }
    return PL_OK;
}

static pl_status pl__resolve_stage(const pl_spec *spec, pl_stage *st, const pl_names *bufs,
                                   const char *const *bnames, const pl_names *stages,
                                   const char *const *snames, pl_error *err)
{
    PL_CHECK(pl__resolve_buffers(spec, st, st->reads, st->n_reads, "reads", bufs, bnames, err));
    PL_CHECK(pl__resolve_buffers(spec, st, st->writes, st->n_writes, "writes", bufs, bnames, err));
    for (int i = 0; i < st->n_after; i++) {
        pl_ref *r = &st->after[i];
        r->index = pl_names_get(stages, r->name);
        if (r->index < 0) {
            const char *best = pl_closest(r->name, snames, spec->n_stages);
            if (best)
                return pl_error_at(err, PL_EINPUT, r->pos,
                                   "stage '%s': after: names unknown stage '%s' (did you mean "
                                   "'%s'?)",
                                   st->name, r->name, best);
            return pl_error_at(err, PL_EINPUT, r->pos,
                               "stage '%s': after: names unknown stage '%s'; it must name a stage "
                               "of this pipeline",
                               st->name, r->name);
        }
        if (r->index == st->index)
            return pl_error_at(err, PL_EINPUT, r->pos,
                               "stage '%s' names itself in after:; remove it (after: lists the "
                               "stages that must finish before this one)",
                               st->name);
    }
    return PL_OK;
}

/* Rules that hold whatever the kind: the host and the SMs touch the memory they can reach. Copy
 * engines' stages check their own ends (their kinds' validate). */
static pl_status pl__check_engine(const pl_spec *spec, const pl_stage *st, pl_error *err)
{
    if (st->loop) return PL_OK; /* its body's stages are checked themselves */
    const pl_kind *kind = st->kind;
    pl_engine e = kind->engine;
    if (e != PL_ENGINE_HOST && e != PL_ENGINE_COMPUTE) return PL_OK;
    pl_where want = e == PL_ENGINE_HOST ? PL_HOST : PL_DEVICE;
    for (int k = 0; k < 2; k++) {
        const pl_ref *refs = k ? st->writes : st->reads;
        int n = k ? st->n_writes : st->n_reads;
        for (int i = 0; i < n; i++) {
            const pl_buffer *b = &spec->buffers[refs[i].index];
            if (b->where == want) continue;
            if (e == PL_ENGINE_HOST)
                return pl_error_at(
                    err, PL_EINPUT, refs[i].pos,
                    "stage '%s' (%s, runs on the host) %s device buffer '%s'; host stages "
                    "touch only host buffers: %s, or declare '%s' with where: host",
                    st->name, kind->name, k ? "writes" : "reads", b->name,
                    k ? "write a host buffer and copy it to the device with an h2d stage"
                      : "copy it to a host buffer with a d2h stage and read that",
                    b->name);
            return pl_error_at(
                err, PL_EINPUT, refs[i].pos,
                "stage '%s' (%s, runs on the GPU) %s host buffer '%s'; compute stages touch "
                "only device buffers: %s, or declare '%s' with where: device",
                st->name, kind->name, k ? "writes" : "reads", b->name,
                k ? "write a device buffer and copy it back with a d2h stage"
                  : "copy it to a device buffer with an h2d stage and read that",
                b->name);
        }
    }
    return PL_OK;
}

/* `chunks:` (pl_kind_bind_chunks) against the rows the blocks cut, the first dimension of the
 * stage's read st->chunks_read (its first chunk_dims dimensions taken as one): N equal blocks must
 * divide them, a list must add up to them.
 * Then both forms become st->chunk_rows (see pl_stage.chunks): the kinds and the plan read rows
 * only from there. */
static pl_status pl__check_chunks(pl_spec *spec, pl_stage *st, pl_error *err)
{
    /* Kinds without the keys leave chunks and chunk_dims 0; chunk_dims alone is still checked. */
    if (st->chunks <= 1 && !st->chunks_listed && st->chunk_dims <= 1) return PL_OK;
    const pl_buffer *b = &spec->buffers[st->reads[st->chunks_read].index];
    char shape[128], what[64] = "the first dimension";
    pl_dims_str(b->shape, b->rank, shape, sizeof shape);
    int nd = st->chunk_dims > 1 ? st->chunk_dims : 1;
    if (nd > b->rank && nd > 1)
        return pl_error_at(err, PL_EINPUT, pl_stage_opt(st, "chunk_dims")->val_pos, /* given */
                           "%s stage '%s': chunk_dims %d needs a buffer of at least %d dimensions, "
                           "but '%s' is %s; use chunk_dims: %d or less",
                           st->kind->name, st->name, nd, nd, b->name, shape,
                           b->rank > 1 ? b->rank : 1);
    if (st->chunks <= 1 && !st->chunks_listed) return PL_OK; /* [8]: one block, still checked */
    int64_t rows = b->rank > 0 ? 1 : 0;
    for (int i = 0; i < nd && i < b->rank; i++)
        rows *= b->shape[i]; /* no overflow: the buffer's element count fits (pl_spec) */
    if (nd > 1) snprintf(what, sizeof what, "the first %d dimensions", nd);
    if (!st->chunks_listed) {
        if (rows == 0 || rows % st->chunks != 0)
            return pl_error_at(err, PL_EINPUT, st->chunks_pos,
                               "%s stage '%s': chunks %d does not divide the %lld rows of '%s' %s "
                               "(%s); choose a divisor of %lld",
                               st->kind->name, st->name, st->chunks, (long long)rows, b->name,
                               shape, what, (long long)rows);
        int64_t *r = pl_spec_alloc(spec, (size_t)st->chunks * sizeof *r);
        if (!r) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
        for (int j = 0; j < st->chunks; j++)
            r[j] = rows / st->chunks;
        st->chunk_rows = r;
        return PL_OK;
    }
    int64_t sum = 0;
    bool past = false; /* the sum would pass INT64_MAX (entries are >= 1: bind) */
    for (int j = 0; j < st->chunks; j++) {
        if (st->chunk_rows[j] > INT64_MAX - sum)
            past = true;
        else
            sum += st->chunk_rows[j];
    }
    char list[PL_MAX_CHUNKS * 8 + 8];
    pl_dims_str(st->chunk_rows, st->chunks, list, sizeof list);
    if (past || sum != rows)
        return pl_error_at(err, PL_EINPUT, st->chunks_pos,
                           "%s stage '%s': chunks %s sum to %s%lld rows, but '%s' %s has %lld "
                           "(%s); make the blocks add up to %lld",
                           st->kind->name, st->name, list, past ? "more than " : "",
                           (long long)(past ? INT64_MAX : sum), b->name, shape, (long long)rows,
                           what, (long long)rows);
    if (st->chunks <= 1) st->chunk_rows = NULL; /* one block: not chunked */
    return PL_OK;
}

/* The position where stage s touches buffer b (a write if `write`, else a read; falls back to
 * the stage's position). */
static pl_pos pl__access_pos(const pl_stage *st, int b, bool write)
{
    const pl_ref *refs = write ? st->writes : st->reads;
    int n = write ? st->n_writes : st->n_reads;
    for (int i = 0; i < n; i++)
        if (refs[i].index == b) return refs[i].pos;
    return st->pos;
}

static pl_status pl__report_cycle(const pl_spec *spec, const pl_graph *g, pl_error *err)
{
    int *cyc = malloc(((size_t)g->n + 1) * sizeof *cyc);
    if (!cyc) return pl_error_set(err, PL_ENOMEM, "error: out of memory reporting a cycle");
    int len = pl_graph_cycle(g, cyc);
    char path[1024], why[1024];
    size_t pk = 0, wk = 0;
    path[0] = why[0] = '\0';
    for (int i = 0; i <= len && pk < sizeof path; i++)
        pk += (size_t)snprintf(path + pk, sizeof path - pk, "%s%s", i ? " -> " : "",
                               spec->stages[cyc[i % len]].name);
    for (int i = 0; i < len && wk < sizeof why; i++) {
        int u = cyc[i], v = cyc[(i + 1) % len];
        const pl_edge *e = pl_graph_edge(g, u, v);
        if (e && e->why == PL_EDGE_DATA)
            wk += (size_t)snprintf(why + wk, sizeof why - wk, "%s'%s' reads '%s' written by '%s'",
                                   i ? "; " : "", spec->stages[v].name,
                                   spec->buffers[e->buffer].name, spec->stages[u].name);
        else if (e && e->why == PL_EDGE_WAR)
            wk += (size_t)snprintf(why + wk, sizeof why - wk,
                                   "%s'%s' writes '%s' after '%s' (written before it) reads it",
                                   i ? "; " : "", spec->stages[v].name,
                                   spec->buffers[e->buffer].name, spec->stages[u].name);
        else
            wk += (size_t)snprintf(why + wk, sizeof why - wk, "%s'%s' is after '%s'", i ? "; " : "",
                                   spec->stages[v].name, spec->stages[u].name);
    }
    pl_pos pos = len ? spec->stages[cyc[0]].pos : (pl_pos){0};
    free(cyc);
    return pl_error_at(err, PL_EINPUT, pos,
                       "dependency cycle: %s (%s); break it: use separate buffers, drop an "
                       "after: entry, or add after: to order a reader before the writer it "
                       "must not wait for",
                       path, why);
}

/* Loop L's `while` buffer must be written by someone who can change it: a stage before the loop
 * or a stage of its body (L's writes are its body's). */
static pl_status pl__check_while_written(const pl_spec *spec, const pl_graph *g, const pl_stage *L,
                                         pl_error *err)
{
    const pl_loop *l = L->loop;
    int c = l->cond.index;
    for (int k = g->acc_off[c]; k < g->acc_off[c + 1]; k++) {
        int s = g->acc[k];
        if ((g->acc_mode[k] & PL_ACC_WRITE) && (s == L->index || g->pos[s] < g->pos[L->index]))
            return PL_OK;
    }
    return pl_error_at(err, PL_EINPUT, l->cond.pos,
                       "loop '%s': while: no stage writes '%s', neither before the loop nor in "
                       "its body, so the condition never changes (the loop would not run, or "
                       "run to max every batch); write '%s' before the loop (the first test reads "
                       "it) and in the body",
                       L->name, l->cond.name, l->cond.name);
}

/* A read of a per-batch buffer that nothing wrote before it in the batch, by stage r: r's own
 * message, or for a loop the message of its `while` test or of the body stage that reads it. */
static pl_status pl__unwritten_read(const pl_spec *spec, const pl_stage *sr, int b, pl_error *err)
{
    const pl_buffer *buf = &spec->buffers[b];
    if (sr->loop && sr->loop->cond.name && sr->loop->cond.index == b)
        return pl_error_at(err, PL_EINPUT, sr->loop->cond.pos,
                           "loop '%s' tests per-batch buffer '%s' (while:) before its first "
                           "iteration, but no stage writes it before the loop in the batch; write "
                           "it before the loop (a stage ordered before '%s' that writes '%s'), or "
                           "give '%s' an init: (zeros, random or file)",
                           sr->name, buf->name, sr->name, buf->name, buf->name);
    int rb = sr->loop ? pl_loop_reader(spec, sr, b) : -1;
    if (rb >= 0) {
        const pl_stage *bs = &spec->stages[rb];
        return pl_error_at(err, PL_EINPUT, pl__access_pos(bs, b, false),
                           "stage '%s' in loop '%s' reads per-batch buffer '%s', which no stage "
                           "writes before the loop nor earlier in the body (check takes the "
                           "body's first iteration as a batch of its own); write '%s' before the "
                           "loop, or in a body stage ordered before '%s', or give '%s' an init: "
                           "(zeros, random or file)",
                           bs->name, sr->name, buf->name, buf->name, bs->name, buf->name);
    }
    return pl_error_at(err, PL_EINPUT, pl__access_pos(sr, b, false),
                       "stage '%s' reads per-batch buffer '%s', but no stage writes it "
                       "before that in the batch; write it first (a stage ordered before "
                       "'%s' that writes '%s'), or give '%s' an init: (zeros, random or "
                       "file)",
                       sr->name, buf->name, sr->name, buf->name, buf->name);
}

/* The checks of one graph: the top level (part -1) or the body of loop stage `part`, whose
 * reads from before the loop are its loop's (checked at the top level). */
static pl_status pl__check_graph(const pl_spec *spec, const pl_graph *g, int part, pl_error *err)
{
    char p[512];
    if (g->n_order < g->n) return pl__report_cycle(spec, g, err);

    /* Writers of each buffer, as positions in its accessor list: the loops below pair writers
     * with accessors (a buffer read by thousands of stages has few writers). */
    int *wpos = malloc(((size_t)g->n + 1) * sizeof *wpos);
    pl_walk w = {0};
    if (!wpos || pl_walk_init(&w, g->n) != PL_OK) {
        free(wpos);
        return pl_error_set(err, PL_ENOMEM, "error: out of memory checking hazards");
    }

    /* Hazards: two accessors of one buffer, one writing, with no path either way. A writer and a
     * stage that only reads are always ordered (pl_graph_build adds writer -> reader unless
     * after: already puts the reader first), so only writers need a search: they are all
     * ordered when each is reached from the one before it in plan order. Otherwise the pair
     * reported is the first by (later accessor, earlier accessor) in declaration order. */
    for (int b = 0; b < g->n_buffers; b++) {
        int lo = g->acc_off[b], hi = g->acc_off[b + 1], nw = 0, bj = -1, bi = -1;
        for (int k = lo; k < hi; k++)
            if (g->acc_mode[k] & PL_ACC_WRITE) wpos[nw++] = k;
        if (nw < 2) continue;
        /* Writers by plan position (insertion sort: writers of one buffer are few). */
        for (int x = 1; x < nw; x++) {
            int v = wpos[x], y = x - 1;
            while (y >= 0 && g->pos[g->acc[wpos[y]]] > g->pos[g->acc[v]]) {
                wpos[y + 1] = wpos[y];
                y--;
            }
            wpos[y + 1] = v;
        }
        bool chained = true;
        for (int x = 1; x < nw && chained; x++)
            chained = pl_walk_reaches(&w, g->succ_off, g->succ, g->pos, g->acc[wpos[x - 1]],
                                      g->acc[wpos[x]]);
        if (chained) continue;
        for (int x = 0; x < nw; x++) {
            for (int k = lo; k < hi; k++) {
                int i = k < wpos[x] ? k : wpos[x], j = k < wpos[x] ? wpos[x] : k;
                if (i == j || (bj >= 0 && (j > bj || (j == bj && i >= bi)))) continue;
                if (!(g->acc_mode[i] & PL_ACC_WRITE) || !(g->acc_mode[j] & PL_ACC_WRITE)) continue;
                int a = g->acc[i], c = g->acc[j];
                if (pl_walk_reaches(&w, g->succ_off, g->succ, g->pos, a, c) ||
                    pl_walk_reaches(&w, g->succ_off, g->succ, g->pos, c, a))
                    continue;
                bj = j;
                bi = i;
            }
        }
        if (bj < 0) continue;
        bool wi = g->acc_mode[bi] & PL_ACC_WRITE, wj = g->acc_mode[bj] & PL_ACC_WRITE;
        const pl_stage *sa = &spec->stages[g->acc[bi]], *sc = &spec->stages[g->acc[bj]];
        free(wpos);
        pl_walk_fini(&w);
        return pl_error_at(err, PL_EINPUT, pl__access_pos(sc, b, wj),
                           "hazard on buffer '%s': stage '%s' %s it and stage '%s' (at %s) %s it, "
                           "and nothing orders them; add after: [%s] to stage '%s' (or the "
                           "reverse) so one runs first",
                           spec->buffers[b].name, sc->name, wj ? "writes" : "reads", sa->name,
                           pl__pos_str(pl__access_pos(sa, b, wi), p, sizeof p),
                           wi ? "writes" : "reads", sa->name, sc->name);
    }
    pl_walk_fini(&w);

    for (int s = 0; part < 0 && s < spec->n_stages; s++) {
        const pl_stage *L = &spec->stages[s];
        if (!L->loop || !L->loop->cond.name || L->parent >= 0) continue;
        pl_status ws = pl__check_while_written(spec, g, L, err);
        if (ws != PL_OK) {
            free(wpos);
            return ws;
        }
    }

    /* A per-batch buffer without init must be written in the batch before anything reads it. A
     * writer w and a reader r != w are ordered one way or the other, so w precedes r exactly
     * when it comes first in plan order: the two earliest writers answer for every reader. */
    for (int b = 0; part < 0 && b < g->n_buffers; b++) {
        const pl_buffer *buf = &spec->buffers[b];
        if (buf->persistent || buf->init != PL_INIT_NONE) continue;
        int lo = g->acc_off[b], hi = g->acc_off[b + 1], w1 = -1, w2 = -1;
        for (int k = lo; k < hi; k++) {
            if (!(g->acc_mode[k] & PL_ACC_WRITE)) continue;
            int s = g->acc[k];
            if (w1 < 0 || g->pos[s] < g->pos[w1]) {
                w2 = w1;
                w1 = s;
            } else if (w2 < 0 || g->pos[s] < g->pos[w2]) {
                w2 = s;
            }
        }
        for (int j = lo; j < hi; j++) {
            if (!(g->acc_mode[j] & PL_ACC_READ)) continue;
            int r = g->acc[j];
            int first = w1 == r ? w2 : w1;
            if (first >= 0 && g->pos[first] < g->pos[r]) continue;
            free(wpos);
            return pl__unwritten_read(spec, &spec->stages[r], b, err);
        }
    }
    free(wpos);

    /* A per-batch buffer with init that a stage writes: slots would leak writes across batches. */
    static const char *const init_names[] = {"none", "zeros", "random", "file"};
    for (int b = 0; b < g->n_buffers; b++) {
        const pl_buffer *buf = &spec->buffers[b];
        if (buf->persistent || buf->init == PL_INIT_NONE) continue;
        for (int j = g->acc_off[b]; j < g->acc_off[b + 1]; j++) {
            if (!(g->acc_mode[j] & PL_ACC_WRITE)) continue;
            const pl_stage *sw = &spec->stages[g->acc[j]];
            return pl_error_at(err, PL_EINPUT, pl__access_pos(sw, b, true),
                               "stage '%s' writes per-batch buffer '%s', which has init: %s (at "
                               "%s); its slots would carry one batch's writes into a later batch, "
                               "so results would depend on depth: make it persistent, or drop "
                               "init and write it in every batch",
                               sw->name, buf->name, init_names[buf->init],
                               pl__pos_str(buf->init_pos, p, sizeof p));
        }
    }
    return PL_OK;
}

/* A loop's body as a batch of its own: cycles, hazards, writes of buffers with init among its
 * stages; then the loop stage takes its reads and writes from it. */
static pl_status pl__check_body(pl_spec *spec, pl_stage *L, pl_error *err)
{
    pl_graph g = {0};
    pl_status st = pl_graph_build_part(spec, L->index, &g, err);
    if (st == PL_OK) st = pl__check_graph(spec, &g, L->index, err);
    if (st == PL_OK) st = pl_loop_bind_refs(spec, L, &g, err);
    pl_graph_fini(&g);
    return st;
}

/* Records the outcome of one check: a failure goes to the list (when there is one) and, if it is
 * the first, to *err and *first. Returns true when the caller must stop now: no list (the first
 * error wins) or out of memory. With a list every buffer and every stage is checked: a bad buffer
 * keeps only the stages that touch it from their own checks (their rules need its size), a stage
 * whose declaration failed is not resolved, and the whole-pipeline phases (`batches: all`,
 * dependencies) run only when nothing failed, since they rely on every stage. */
static bool pl__note(pl_status s, const pl_error *e, pl_diags *d, pl_error *err, pl_status *first)
{
    if (s == PL_OK) return false;
    if (*first == PL_OK) {
        *first = s;
        if (err) *err = *e;
    }
    pl_diags_add(d, PL_SEV_ERROR, e);
    return !d || s == PL_ENOMEM;
}

/* Whether a resolved stage reads or writes a buffer marked in `bad`. */
static bool pl__touches(const pl_stage *st, const bool *bad)
{
    for (int i = 0; i < st->n_reads; i++)
        if (bad[st->reads[i].index]) return true;
    for (int i = 0; i < st->n_writes; i++)
        if (bad[st->writes[i].index]) return true;
    return false;
}

pl_status pl_spec_check(pl_spec *spec, pl_error *err)
{
    return pl_spec_check_all(spec, NULL, err);
}

pl_status pl_spec_check_all(pl_spec *spec, pl_diags *diags, pl_error *err)
{
    pl_status st = PL_OK, first = PL_OK;
    pl_error e;
    pl_names bufs = {0}, stages = {0};
    const char **bnames = NULL, **snames = NULL;
    bool *bad_buf = NULL, *bad_stage = NULL;
    pl_graph g = {0};
    /* Binds add refs, so a second check would double them: checking a checked spec is a no-op. */
    if (spec->checked) return PL_OK;
    pl_error_clear(&e);

#define PL__NOTE(expr)                                                                             \
    do {                                                                                           \
        pl_error_clear(&e);                                                                        \
        if (pl__note((expr), &e, diags, err, &first)) goto done;                                   \
    } while (0)

    PL__NOTE(pl__check_run(spec, &e));
    if (spec->n_buffers > PL_MAX_BUFFERS || spec->n_stages > PL_MAX_STAGES) {
        PL__NOTE(pl_error_set(&e, PL_EINPUT,
                              "error: %d buffers and %d stages; a pipeline may have at most %d of "
                              "each kind",
                              spec->n_buffers, spec->n_stages, PL_MAX_STAGES));
        goto done;
    }
    if (pl_names_init(&bufs, spec->n_buffers) || pl_names_init(&stages, spec->n_stages)) goto oom;
    bnames = malloc(((size_t)spec->n_buffers + 1) * sizeof *bnames);
    snames = malloc(((size_t)spec->n_stages + 1) * sizeof *snames);
    bad_buf = calloc((size_t)spec->n_buffers + 1, sizeof *bad_buf);
    bad_stage = calloc((size_t)spec->n_stages + 1, sizeof *bad_stage);
    if (!bnames || !snames || !bad_buf || !bad_stage) goto oom;

    for (int i = 0; i < spec->n_buffers; i++) {
        pl_error_clear(&e);
        pl_status bs = pl__check_buffer(&spec->buffers[i], &bufs, spec, &e);
        bad_buf[i] = bs != PL_OK;
        if (pl__note(bs, &e, diags, err, &first)) goto done;
        bnames[i] = spec->buffers[i].name;
    }
    /* One slot must fit run.memory_budget whatever the depth (a fixed depth is checked against it
     * when the plan is compiled, after `--depth` may have replaced it). */
    pl_mem_sizes bufs_only; /* the stages' own memory counts once they are bound (the plan) */
    if (first == PL_OK) {
        pl_spec_mem_sizes(spec, &bufs_only);
        PL__NOTE(pl_budget_check(spec, &bufs_only, 1, &e));
        if (first != PL_OK) goto done; /* sizes the whole pipeline relies on */
    }
    /* Names and binds first: after: may name a stage declared further down. */
    for (int i = 0; i < spec->n_stages; i++) {
        pl_error_clear(&e);
        pl_status ds = pl__check_stage_decl(spec, &spec->stages[i], &stages, &e);
        bad_stage[i] = ds != PL_OK;
        if (pl__note(ds, &e, diags, err, &first)) goto done;
        snames[i] = spec->stages[i].name;
    }
    for (int i = 0; i < spec->n_stages; i++) {
        pl_stage *s = &spec->stages[i];
        if (bad_stage[i]) continue;
        pl_error_clear(&e);
        pl_status rs = pl__resolve_stage(spec, s, &bufs, bnames, &stages, snames, &e);
        if (rs == PL_OK && pl__touches(s, bad_buf)) continue; /* the buffer's error says it */
        /* The generic rules run before the kind's validate, so validators may rely on them
         * (a kernel's operands are on the device, chunk_rows holds the blocks however `chunks:`
         * was written). */
        if (rs == PL_OK) rs = pl__check_engine(spec, s, &e);
        if (rs == PL_OK) rs = pl__check_chunks(spec, s, &e);
        const pl_kind *kind = s->kind;
        if (rs == PL_OK && kind->validate) rs = kind->validate(spec, s, &e);
        if (pl__note(rs, &e, diags, err, &first)) goto done;
    }
    if (first != PL_OK) goto done;

    PL__NOTE(pl__check_batches_all(spec, &e));
    if (first != PL_OK) goto done;

    /* Loops, once every stage is resolved: their rules, their bodies' graphs, then the reads and
     * writes that make a loop one stage of the top level. */
    for (int i = 0; i < spec->n_stages; i++) {
        pl_stage *s = &spec->stages[i];
        if (!s->loop) continue;
        pl_error_clear(&e);
        pl_status ls = pl_loop_check(spec, s, &bufs, bnames, &e);
        if (ls == PL_OK) ls = pl__check_body(spec, s, &e);
        if (pl__note(ls, &e, diags, err, &first)) goto done;
    }
    if (first != PL_OK) goto done;

    PL_CHECK_GOTO(pl_graph_build(spec, &g, &e), st, fail_e);
    PL__NOTE(pl__check_graph(spec, &g, -1, &e));
    if (first != PL_OK) goto done;
    spec->checked = true;
    goto done;
#undef PL__NOTE
oom:
    pl_error_set(&e, PL_ENOMEM, "error: out of memory checking the pipeline");
    st = PL_ENOMEM;
fail_e:
    pl__note(st, &e, diags, err, &first);
done:
    pl_graph_fini(&g);
    pl_names_fini(&bufs);
    pl_names_fini(&stages);
    free(bnames);
    free(snames);
    free(bad_buf);
    free(bad_stage);
    return first;
}

pl_status pl_spec_check_files(const pl_spec *spec, int64_t batches, pl_diags *diags, pl_error *err)
{
    pl_status first = PL_OK;
    pl_error e;
    if (!spec->checked)
        return pl_error_set(err, PL_ERUNTIME,
                            "error: pl_spec_check_files needs a checked spec; call pl_spec_check "
                            "first");
    for (int i = 0; i < spec->n_buffers; i++) {
        const pl_buffer *b = &spec->buffers[i];
        if (b->init != PL_INIT_FILE) continue;
        pl_error_clear(&e);
        if (pl__note(pl_buffer_check_init_file(spec, b, &e), &e, diags, err, &first)) return first;
    }
    for (int i = 0; i < spec->n_stages; i++) {
        const pl_stage *s = &spec->stages[i];
        const pl_kind *kind = s->kind;
        if (!kind->check_files) continue;
        pl_error_clear(&e);
        if (pl__note(kind->check_files(spec, s, batches, &e), &e, diags, err, &first)) return first;
    }
    return first;
}

/* The persistent buffers (all, or only the device's), largest first (ties in declaration order),
 * as "'w' 60.0 GiB (host), ..." with at most four named; *total, *n and *largest (the index of
 * the largest, -1 when none) for the warning. */
static void pl__persistent_list(const pl_spec *spec, bool device_only, char *list, size_t cap,
                                uint64_t *total, int *n, int *largest)
{
    enum { SHOWN = 4 };
    int idx[SHOWN], m = 0;
    *total = 0;
    *n = 0;
    for (int i = 0; i < spec->n_buffers; i++) {
        const pl_buffer *b = &spec->buffers[i];
        if (!b->persistent || (device_only && b->where != PL_DEVICE)) continue;
        *total += b->bytes;
        (*n)++;
        int j = m < SHOWN ? m++ : SHOWN;
        while (j > 0 && spec->buffers[idx[j - 1]].bytes < b->bytes) {
            if (j < SHOWN) idx[j] = idx[j - 1];
            j--;
        }
        if (j < SHOWN) idx[j] = i;
    }
    *largest = m ? idx[0] : -1;
    char sz[32];
    size_t k = 0;
    uint64_t rest = *total;
    list[0] = '\0';
    for (int j = 0; j < m && k < cap; j++) {
        const pl_buffer *b = &spec->buffers[idx[j]];
        rest -= b->bytes;
        k += (size_t)snprintf(list + k, cap - k, "%s'%s' %s (%s)", j ? ", " : "", b->name,
                              pl_bytes_str(b->bytes, sz, sizeof sz), pl_where_name(b->where));
    }
    if (*n > SHOWN && k < cap)
        snprintf(list + k, cap - k, " and %d more (%s)", *n - SHOWN,
                 pl_bytes_str(rest, sz, sizeof sz));
}

int pl_spec_check_memory(const pl_spec *spec, uint64_t host_bytes, pl_diags *diags)
{
    if (!host_bytes || !spec->checked) return 0;
    uint64_t all = 0, on_dev = 0;
    int n = 0, largest = -1;
    char list[4 * (PL_MAX_NAME + 40) + 64], total[32], mem[32];
    pl__persistent_list(spec, true, list, sizeof list, &on_dev, &n, &largest);
    pl__persistent_list(spec, false, list, sizeof list, &all, &n, &largest);
    if (all <= host_bytes) return 0;
    uint64_t on_host = all - on_dev;
    pl_diags_warn(
        diags, PL_ENOMEM, spec->buffers[largest].pos,
        "the persistent buffers alone take %s, more than this machine's physical memory, %s "
        "(sysconf: _SC_PHYS_PAGES x _SC_PAGESIZE): %s; %s: make them smaller, or per-batch "
        "(without persistent: true) where their data can come a batch at a time",
        pl_bytes_str(all, total, sizeof total), pl_bytes_str(host_bytes, mem, sizeof mem), list,
        on_host > host_bytes
            ? "a run cannot allocate them, on either executor"
            : "the host executor keeps device buffers in host memory too, so a run there cannot "
              "allocate them (on the GPU executor their limit is the GPU's memory, checked "
              "where a GPU is present)");
    return 1;
}

uint64_t pl_spec_persistent_device_bytes(const pl_spec *spec)
{
    uint64_t t = 0;
    for (int i = 0; i < spec->n_buffers; i++)
        if (spec->buffers[i].persistent && spec->buffers[i].where == PL_DEVICE)
            t += spec->buffers[i].bytes;
    return t;
}

int pl_spec_check_device_memory(const pl_spec *spec, uint64_t device_bytes, pl_diags *diags)
{
    if (!device_bytes || !spec->checked) return 0;
    uint64_t on_dev = 0;
    int n = 0, largest = -1;
    char list[4 * (PL_MAX_NAME + 40) + 64], total[32], mem[32];
    pl__persistent_list(spec, true, list, sizeof list, &on_dev, &n, &largest);
    if (on_dev <= device_bytes) return 0;
    pl_diags_warn(diags, PL_ENOMEM, spec->buffers[largest].pos,
                  "the persistent device buffers alone take %s, more than GPU %d's memory, %s: %s; "
                  "the GPU executor cannot allocate them (each is one allocation, not one per "
                  "slot: a lower depth does not help): make them smaller, or per-batch (without "
                  "persistent: true) where their data can come a batch at a time",
                  pl_bytes_str(on_dev, total, sizeof total), spec->run.device,
                  pl_bytes_str(device_bytes, mem, sizeof mem), list);
    return 1;
}
