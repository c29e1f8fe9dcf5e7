/* pl_spec: the spec's arena, builders used by the front ends, lookups and dtype tables. */
#include "pl_spec.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A simple bump arena: blocks chained, freed all at once with the spec. */
typedef struct pl_block {
    struct pl_block *next;
    size_t used, cap;
    max_align_t data[];
} pl_block;

struct pl_arena {
    pl_block *head;
};

void *pl_spec_alloc(pl_spec *spec, size_t bytes)
{
    pl_arena *a = spec->arena;
    size_t need = (bytes + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    if (need < bytes) return NULL;
    if (!a->head || a->head->cap - a->head->used < need) {
        size_t cap = need > 65536 ? need : 65536;
        pl_block *b = malloc(sizeof *b + cap);
        if (!b) return NULL;
        b->next = a->head;
        b->used = 0;
        b->cap = cap;
        a->head = b;
    }
    void *p = (char *)a->head->data + a->head->used;
    a->head->used += need;
    memset(p, 0, bytes);
    return p;
}

const char *pl_spec_strndup(pl_spec *spec, const char *s, size_t n)
{
    char *p = pl_spec_alloc(spec, n + 1);
    if (!p) return NULL;
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

const char *pl_spec_strdup(pl_spec *spec, const char *s)
{
    return s ? pl_spec_strndup(spec, s, strlen(s)) : NULL;
}

/* Grows an arena array: old contents are copied, the old block is simply abandoned in the arena
 * (specs are small next to the buffers they describe). */
static void *pl__grow(pl_spec *spec, void *arr, int n, int *cap, size_t elem)
{
    if (n < *cap) return arr;
    int ncap = *cap ? *cap * 2 : 8;
    void *p = pl_spec_alloc(spec, (size_t)ncap * elem);
    if (!p) return NULL;
    if (arr) memcpy(p, arr, (size_t)n * elem);
    *cap = ncap;
    return p;
}

pl_status pl_spec_new(const char *file, pl_spec **out, pl_error *err)
{
    *out = NULL;
    pl_spec *s = calloc(1, sizeof *s);
    pl_arena *a = calloc(1, sizeof *a);
    if (!s || !a) {
        free(s);
        free(a);
        return pl_error_set(err, PL_ENOMEM, "error: out of memory creating the pipeline spec");
    }
    s->arena = a;
    s->run.batches = 16;
    s->run.batches_from = -1;
    s->run.depth = 4; /* measured best with per-slot graphs: docs/perf.md */
    s->run.device = 0;
    s->run.seed = 0;
    const char *f = file ? file : "<input>";
    s->file = pl_spec_strdup(s, f);
    const char *slash = strrchr(f, '/');
    s->dir = slash ? pl_spec_strndup(s, f, (size_t)(slash - f)) : pl_spec_strdup(s, ".");
    const char *base = slash ? slash + 1 : f;
    const char *dot = strrchr(base, '.');
    s->name = dot && dot != base ? pl_spec_strndup(s, base, (size_t)(dot - base))
                                 : pl_spec_strdup(s, base);
    if (!s->file || !s->dir || !s->name) {
        pl_spec_free(s);
        return pl_error_set(err, PL_ENOMEM, "error: out of memory creating the pipeline spec");
    }
    *out = s;
    return PL_OK;
}

void pl_spec_free(pl_spec *spec)
{
    if (!spec) return;
    pl_block *b = spec->arena ? spec->arena->head : NULL;
    while (b) {
        pl_block *n = b->next;
        free(b);
        b = n;
    }
    free(spec->arena);
    free(spec);
}

pl_buffer *pl_spec_add_buffer(pl_spec *spec, const char *name, pl_pos pos)
{
    pl_buffer *arr =
        pl__grow(spec, spec->buffers, spec->n_buffers, &spec->cap_buffers, sizeof *arr);
    if (!arr) return NULL;
    spec->buffers = arr;
    pl_buffer *b = &arr[spec->n_buffers];
    memset(b, 0, sizeof *b);
    b->name = pl_spec_strdup(spec, name);
    if (!b->name) return NULL;
    b->pos = pos;
    b->index = spec->n_buffers++;
    b->where = PL_HOST;
    b->dtype = PL_F32;
    return b;
}

pl_stage *pl_spec_add_stage(pl_spec *spec, const char *name, pl_pos pos)
{
    pl_stage *arr = pl__grow(spec, spec->stages, spec->n_stages, &spec->cap_stages, sizeof *arr);
    if (!arr) return NULL;
    spec->stages = arr;
    pl_stage *st = &arr[spec->n_stages];
    memset(st, 0, sizeof *st);
    st->name = name ? pl_spec_strdup(spec, name) : NULL;
    if (name && !st->name) return NULL;
    st->pos = pos;
    st->index = spec->n_stages++;
    st->kind = NULL; /* "not given" until the front end sets it */
    st->parent = -1;
    return st;
}

pl_loop *pl_stage_make_loop(pl_spec *spec, pl_stage *st, pl_pos pos)
{
    st->loop = pl_spec_alloc(spec, sizeof *st->loop);
    if (!st->loop) return NULL;
    st->loop->pos = pos;
    st->loop->first = st->index + 1;
    st->loop->cond.index = st->loop->index.index = -1;
    return st->loop;
}

pl_opt *pl_stage_add_opt(pl_spec *spec, pl_stage *st, const char *key, pl_pos pos)
{
    pl_opt *arr = pl__grow(spec, st->opts, st->n_opts, &st->cap_opts, sizeof *arr);
    if (!arr) return NULL;
    st->opts = arr;
    pl_opt *o = &arr[st->n_opts++];
    memset(o, 0, sizeof *o);
    o->key = pl_spec_strdup(spec, key);
    o->pos = pos;
    return o->key ? o : NULL;
}

pl_status pl_opt_add_tagged_item(pl_spec *spec, pl_opt *opt, const char *tag, const char *text,
                                 pl_pos pos)
{
    if ((opt->n_items & (opt->n_items - 1)) == 0) { /* powers of two: grow */
        int cap = opt->n_items ? opt->n_items * 2 : 4;
        const char **items = pl_spec_alloc(spec, (size_t)cap * sizeof *items);
        const char **tags = pl_spec_alloc(spec, (size_t)cap * sizeof *tags);
        pl_pos *ipos = pl_spec_alloc(spec, (size_t)cap * sizeof *ipos);
        if (!items || !tags || !ipos) return PL_ENOMEM;
        if (opt->n_items) {
            memcpy(items, opt->items, (size_t)opt->n_items * sizeof *items);
            memcpy(tags, opt->item_tags, (size_t)opt->n_items * sizeof *tags);
            memcpy(ipos, opt->item_pos, (size_t)opt->n_items * sizeof *ipos);
        }
        opt->items = items;
        opt->item_tags = tags;
        opt->item_pos = ipos;
    }
    const char *t = pl_spec_strdup(spec, text);
    const char *g = tag ? pl_spec_strdup(spec, tag) : NULL;
    if (!t || (tag && !g)) return PL_ENOMEM;
    opt->items[opt->n_items] = t;
    opt->item_tags[opt->n_items] = g;
    opt->item_pos[opt->n_items] = pos;
    opt->n_items++;
    return PL_OK;
}

pl_status pl_opt_add_item(pl_spec *spec, pl_opt *opt, const char *text, pl_pos pos)
{
    return pl_opt_add_tagged_item(spec, opt, NULL, text, pos);
}

static pl_ref *pl__add_ref(pl_spec *spec, pl_ref **arr, int *n, int *cap, const char *name,
                           pl_pos pos)
{
    pl_ref *a = pl__grow(spec, *arr, *n, cap, sizeof *a);
    if (!a) return NULL;
    *arr = a;
    pl_ref *r = &a[(*n)++];
    r->name = pl_spec_strdup(spec, name);
    r->pos = pos;
    r->index = -1;
    return r->name ? r : NULL;
}

pl_ref *pl_stage_add_read(pl_spec *spec, pl_stage *st, const char *name, pl_pos pos)
{
    return pl__add_ref(spec, &st->reads, &st->n_reads, &st->cap_reads, name, pos);
}

pl_ref *pl_stage_add_write(pl_spec *spec, pl_stage *st, const char *name, pl_pos pos)
{
    return pl__add_ref(spec, &st->writes, &st->n_writes, &st->cap_writes, name, pos);
}

pl_ref *pl_stage_add_after(pl_spec *spec, pl_stage *st, const char *name, pl_pos pos)
{
    return pl__add_ref(spec, &st->after, &st->n_after, &st->cap_after, name, pos);
}

pl_status pl_buffer_count(const pl_buffer *b, uint64_t *count, pl_error *err)
{
    uint64_t esize = pl_dtype_size(b->dtype), n = 1;
    for (int i = 0; i < b->rank; i++) {
        uint64_t d = (uint64_t)b->shape[i];
        if (n > (uint64_t)INT64_MAX / d)
            return pl_error_at(err, PL_EINPUT, b->shape_pos,
                               "buffer '%s': the shape has more than 2^63-1 elements; a buffer "
                               "holds at most %" PRIu64 " bytes (64 GiB, PL_MAX_BUFFER_BYTES): "
                               "make it smaller",
                               b->name, (uint64_t)PL_MAX_BUFFER_BYTES);
        n *= d;
    }
    if (n > PL_MAX_BUFFER_BYTES / esize)
        return pl_error_at(
            err, PL_EINPUT, b->shape_pos,
            "buffer '%s': %" PRIu64 " elements of %s is more than %" PRIu64
            " bytes (64 GiB, PL_MAX_BUFFER_BYTES) per buffer: make the shape smaller",
            b->name, n, pl_dtype_name(b->dtype), (uint64_t)PL_MAX_BUFFER_BYTES);
    *count = n;
    return PL_OK;
}

int pl_spec_find_buffer(const pl_spec *spec, const char *name)
{
    for (int i = 0; i < spec->n_buffers; i++)
        if (strcmp(spec->buffers[i].name, name) == 0) return i;
    return -1;
}

int pl_spec_find_stage(const pl_spec *spec, const char *name)
{
    for (int i = 0; i < spec->n_stages; i++)
        if (spec->stages[i].name && strcmp(spec->stages[i].name, name) == 0) return i;
    return -1;
}

const char *pl_dims_str(const int64_t *v, int n, char *buf, size_t cap)
{
    if (cap == 0) return buf;
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < n && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, i ? ", %lld" : "%lld", (long long)v[i]);
    if (k + 1 < cap)
        snprintf(buf + k, cap - k, "]");
    else if (cap >= 5)
        snprintf(buf + cap - 5, 5, "...]");
    return buf;
}

const char *pl_stage_chunks_str(const pl_stage *st, char *buf, size_t cap)
{
    if (!st->chunks_listed || !st->chunk_rows) {
        snprintf(buf, cap, "%d", st->chunks > 1 ? st->chunks : 1);
        return buf;
    }
    size_t n = 0;
    buf[0] = '\0';
    for (int j = 0; j < st->chunks && n < cap; j++)
        n += (size_t)snprintf(buf + n, cap - n, j ? "+%lld" : "%lld", (long long)st->chunk_rows[j]);
    return buf;
}

const pl_opt *pl_stage_opt(const pl_stage *st, const char *key)
{
    for (int i = 0; i < st->n_opts; i++)
        if (strcmp(st->opts[i].key, key) == 0) return &st->opts[i];
    return NULL;
}

static const struct {
    const char *name;
    size_t size;
    bool is_float;
} pl__dtypes[PL_DTYPE_COUNT] = {
    [PL_U8] = {"u8", 1, false},  [PL_I32] = {"i32", 4, false},  [PL_I64] = {"i64", 8, false},
    [PL_F16] = {"f16", 2, true}, [PL_BF16] = {"bf16", 2, true}, [PL_F32] = {"f32", 4, true},
    [PL_F64] = {"f64", 8, true},
};

size_t pl_dtype_size(pl_dtype t)
{
    return (unsigned)t < PL_DTYPE_COUNT ? pl__dtypes[t].size : 0;
}

const char *pl_dtype_name(pl_dtype t)
{
    return (unsigned)t < PL_DTYPE_COUNT ? pl__dtypes[t].name : "?";
}

bool pl_dtype_is_float(pl_dtype t)
{
    return (unsigned)t < PL_DTYPE_COUNT && pl__dtypes[t].is_float;
}

bool pl_dtype_parse(const char *s, pl_dtype *out)
{
    for (int i = 0; i < PL_DTYPE_COUNT; i++)
        if (strcmp(s, pl__dtypes[i].name) == 0) {
            *out = (pl_dtype)i;
            return true;
        }
    return false;
}

const char *pl_where_name(pl_where w)
{
    return w == PL_DEVICE ? "device" : "host";
}

/* Optimal string alignment distance: insertions, deletions, substitutions and swaps of two
 * neighbouring letters each cost 1, so "nmae" is one edit from "name". */
static int pl__edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64) return 1000;
    int d[65][65];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[la][lb];
}

const char *pl_clip(const char *s, char buf[72])
{
    size_t n = 0;
    while (s[n] && s[n] != '\n' && s[n] != '\r' && n < 60)
        n++;
    memcpy(buf, s, n);
    if (s[n])
        memcpy(buf + n, "...", 4);
    else
        buf[n] = '\0';
    return buf;
}

const char *pl_closest(const char *word, const char *const *candidates, int n)
{
    const char *best = NULL;
    int best_d = 3;
    int len = (int)strlen(word);
    for (int i = 0; i < n; i++) {
        int d = pl__edit_distance(word, candidates[i]);
        if (d < best_d && d * 2 < (len > 1 ? len : 2)) {
            best = candidates[i];
            best_d = d;
        }
    }
    return best;
}

/* ---- sizes and the memory budget ----------------------------------------------------------- */

bool pl_bytes_parse(const char *s, uint64_t *out)
{
    static const struct {
        const char *unit;
        double mult;
    } units[] = {{"B", 1},
                 {"KiB", 1024.0},
                 {"MiB", 1048576.0},
                 {"GiB", 1073741824.0},
                 {"TiB", 1099511627776.0},
                 {"kB", 1e3},
                 {"KB", 1e3},
                 {"MB", 1e6},
                 {"GB", 1e9},
                 {"TB", 1e12}};
    if (!s) return false;
    const char *p = s;
    uint64_t whole = 0;
    bool digits = false;
    for (; *p >= '0' && *p <= '9'; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (whole > (UINT64_MAX - d) / 10) return false;
        whole = whole * 10 + d;
        digits = true;
    }
    double frac = 0, scale = 1;
    bool has_frac = *p == '.';
    if (has_frac)
        for (p++; *p >= '0' && *p <= '9'; p++) {
            scale /= 10;
            frac += (*p - '0') * scale;
            digits = true;
        }
    if (!digits) return false;
    while (*p == ' ')
        p++;
    if (!*p) { /* bytes: a whole number */
        if (has_frac || p[-1] == ' ') return false;
        *out = whole;
        return true;
    }
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(p, units[i].unit) != 0) continue;
        double v = ((double)whole + frac) * units[i].mult;
        if (v >= 18446744073709551615.0) return false;
        *out = (uint64_t)(v + 0.5);
        return true;
    }
    return false;
}

const char *pl_bytes_str(uint64_t bytes, char *buf, size_t cap)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes < 1024) {
        snprintf(buf, cap, "%" PRIu64 " B", bytes);
        return buf;
    }
    double v = (double)bytes / 1024.0;
    int u = 0;
    while (v >= 1024.0 && u < 5) {
        v /= 1024.0;
        u++;
    }
    snprintf(buf, cap, "%.1f %s", v, units[u]);
    return buf;
}

void pl_spec_mem_sizes(const pl_spec *spec, pl_mem_sizes *m)
{
    memset(m, 0, sizeof *m);
    for (int b = 0; b < spec->n_buffers; b++) {
        const pl_buffer *buf = &spec->buffers[b];
        uint64_t *slot = buf->where == PL_HOST
                             ? (buf->persistent ? &m->host_persistent : &m->host_per_slot)
                             : (buf->persistent ? &m->device_persistent : &m->device_per_slot);
        *slot += buf->bytes;
    }
}

/* Slots that fit `budget` (0: no limit) on one side, at most PL_MAX_DEPTH. */
static int pl__fit(uint64_t budget, uint64_t per_slot, uint64_t persistent)
{
    if (budget == 0) return PL_MAX_DEPTH;
    if (persistent > budget) return 0;
    if (per_slot == 0) return PL_MAX_DEPTH;
    uint64_t n = (budget - persistent) / per_slot;
    return n > PL_MAX_DEPTH ? PL_MAX_DEPTH : (int)n;
}

int pl_budget_max_depth(const pl_spec *spec, const pl_mem_sizes *m, const char **side)
{
    const pl_budget *b = &spec->run.budget;
    if (side) *side = NULL;
    if (!b->set) return PL_MAX_DEPTH;
    int d = pl__fit(b->device, m->device_per_slot, m->device_persistent);
    int h = pl__fit(b->host_pinned, m->host_per_slot, m->host_persistent);
    int n = d < h ? d : h;
    if (side && n < PL_MAX_DEPTH) *side = d <= h ? "device" : "host_pinned";
    return n;
}

pl_status pl_budget_check(const pl_spec *spec, const pl_mem_sizes *sizes, int depth, pl_error *err)
{
    const pl_budget *b = &spec->run.budget;
    if (!b->set) return PL_OK;
    const pl_mem_sizes m = *sizes;
    for (int side = 0; side < 2; side++) {
        uint64_t budget = side ? b->host_pinned : b->device;
        uint64_t per = side ? m.host_per_slot : m.device_per_slot;
        uint64_t pers = side ? m.host_persistent : m.device_persistent;
        const char *name = side ? "host_pinned" : "device";
        const char *what = side ? "pinned host" : "device";
        if (budget == 0) continue;
        /* In 128-bit-free arithmetic: depth <= 64 and sizes < 2^36 per buffer keep this exact
         * unless a pipeline has tens of thousands of huge buffers; saturate then. */
        uint64_t need =
            per > (UINT64_MAX - pers) / (uint64_t)depth ? UINT64_MAX : per * (uint64_t)depth + pers;
        if (need <= budget) continue;
        char h1[32], h2[32], h3[32], h4[32];
        pl_pos pos = side ? b->host_pos : b->device_pos;
        if (pos.line <= 0) pos = b->pos;
        int fit = pl__fit(budget, per, pers);
        /* What the per-slot figure holds: the stages' own memory is device memory. */
        const char *own = !side && (m.stage_per_slot || m.stage_persistent)
                              ? "buffers and stage memory (a model's activations; its weights "
                                "are persistent)"
                              : "buffers";
        if (depth == 1 || fit == 0)
            return pl_error_at(err, PL_EINPUT, pos,
                               "run: memory_budget: '%s' is %s (%" PRIu64
                               " bytes), but one slot needs %s (%" PRIu64
                               " bytes) of %s memory: %s of per-batch %s + %s persistent; "
                               "raise memory_budget.%s to at least %s, or make the %s buffers "
                               "smaller",
                               name, pl_bytes_str(budget, h1, sizeof h1), budget,
                               pl_bytes_str(per + pers, h2, sizeof h2), per + pers, what,
                               pl_bytes_str(per, h3, sizeof h3), own,
                               pl_bytes_str(pers, h4, sizeof h4), name,
                               pl_bytes_str(per + pers, h2, sizeof h2), what);
        return pl_error_at(err, PL_EINPUT, pos,
                           "run: memory_budget: '%s' is %s (%" PRIu64
                           " bytes), but depth %d needs %s of %s memory (%d slots x %s + %s "
                           "persistent); use depth %d (what the budget allows) or depth: auto, "
                           "or raise memory_budget.%s to at least %s",
                           name, pl_bytes_str(budget, h1, sizeof h1), budget, depth,
                           pl_bytes_str(need, h2, sizeof h2), what, depth,
                           pl_bytes_str(per, h3, sizeof h3), pl_bytes_str(pers, h4, sizeof h4), fit,
                           name, pl_bytes_str(need, h2, sizeof h2));
    }
    return PL_OK;
}
