/* pl_schema: the tables of the pipeline file's top level, `run:` and buffers, and the one walker
 * that checks a value tree against them (and against the kinds' key tables) and builds the spec.
 * Both front ends end here, so every message below is the same for YAML and for Lua. */
#include "pl_schema.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_diag.h"
#include "pl_loop.h"

typedef struct pl_walk {
    pl_spec *spec;
    pl_error *err;
    const pl_schema_src *src;
    pl_status failed; /* with src->diags: the first buffer or stage that failed */
    char where[96];   /* the loop whose `loop:` mapping is being taken: "loop 'decode': " */
} pl_walk;

/* Walks one buffer or stage. With a diags list, a bad-input failure is listed and the walk goes
 * on (PL_OK); the first one stays in w->err. */
static pl_status pl__item(pl_walk *w,
                          pl_status (*walk)(pl_walk *, const pl_value *, const pl_value *, int),
                          const pl_value *a, const pl_value *b, int n)
{
    if (!w->src->diags) return walk(w, a, b, n);
    pl_error *keep = w->err, e;
    pl_error_clear(&e);
    w->err = &e;
    pl_status st = walk(w, a, b, n);
    w->err = keep;
    if (st == PL_OK) return PL_OK;
    if (w->failed == PL_OK && keep) *keep = e;
    if (st != PL_EINPUT) return st;
    pl_diags_add(w->src->diags, PL_SEV_ERROR, &e);
    if (w->failed == PL_OK) w->failed = st;
    return PL_OK;
}

#define PL__MAX_WORDS 64

static pl_status pl__oom(pl_walk *w)
{
    return pl_error_set(w->err, PL_ENOMEM, "error: out of memory while reading '%s'",
                        w->spec->file);
}

static int pl__index_of(const char *s, const char *const *words, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(s, words[i]) == 0) return i;
    return -1;
}

static const char *pl__join(const char *const *words, int n, char *buf, size_t cap)
{
    buf[0] = '\0';
    for (int i = 0; i < n; i++) {
        strncat(buf, words[i], cap - strlen(buf) - 1);
        if (i + 1 < n) strncat(buf, ", ", cap - strlen(buf) - 1);
    }
    return buf;
}

const char *pl_schema_join(const char *values, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
    for (const char *p = values; p && *p && n + 1 < cap; p++) {
        if (*p == '|') {
            n += (size_t)snprintf(buf + n, cap - n, ", ");
            if (n >= cap) n = cap - 1;
        } else {
            buf[n++] = *p;
            buf[n] = '\0';
        }
    }
    return buf;
}

/* "a|b|c" -> words (pointing into `store`); the count. */
static int pl__split(const char *values, char store[PL__MAX_WORDS][PL_MAX_NAME],
                     const char *words[PL__MAX_WORDS])
{
    int n = 0;
    for (const char *p = values; p && *p && n < PL__MAX_WORDS; n++) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len >= PL_MAX_NAME) len = PL_MAX_NAME - 1;
        memcpy(store[n], p, len);
        store[n][len] = '\0';
        words[n] = store[n];
        p = bar ? bar + 1 : NULL;
    }
    return n;
}

const char *pl_key_type_name(pl_key_type t)
{
    switch (t) {
    case PL_KEY_STR:
        return "text";
    case PL_KEY_PATH:
        return "path";
    case PL_KEY_INT:
        return "integer";
    case PL_KEY_NUM:
        return "number";
    case PL_KEY_BOOL:
        return "true/false";
    case PL_KEY_ENUM:
        return "one of";
    case PL_KEY_NAME:
        return "buffer name";
    case PL_KEY_NAMES:
        return "list of names";
    case PL_KEY_INTS:
        return "list of integers";
    case PL_KEY_INT_OR_INTS:
        return "integer or list of integers";
    case PL_KEY_SIZE:
        return "size";
    case PL_KEY_FUNC:
        return "Lua function";
    case PL_KEY_MAP:
        return "mapping";
    case PL_KEY_LIST:
        return "list";
    case PL_KEY_ITEMS:
        return "list of values";
    }
    return "?";
}

/* ---- Shapes of values ------------------------------------------------------------------- */

/* An empty Lua table is both an empty list and an empty mapping. */
static bool pl__is_map(const pl_value *v)
{
    return v->type == PL_VAL_MAP || (v->type == PL_VAL_LIST && v->n == 0 && v->table);
}

static bool pl__is_value(const pl_value *v)
{
    return v->type == PL_VAL_SCALAR && !pl_value_is_null(v);
}

/* The key's name as this front end spells it. */
static const char *pl__fname(const pl_walk *w, const pl_field *f)
{
    return w->src->lua && f->lua_name ? f->lua_name : f->key.name;
}

static int pl__field_index(const pl_walk *w, const pl_field *fields, const char *name)
{
    for (int i = 0; fields[i].key.name; i++)
        if (strcmp(pl__fname(w, &fields[i]), name) == 0) return i;
    return -1;
}

/* The items of a list value; in pipeline.lua a single value stands for a list of one. */
static bool pl__list_items(const pl_walk *w, const pl_value *v, const pl_value **first, int *n)
{
    if (v->type == PL_VAL_LIST) {
        *first = v->child;
        *n = v->n;
        return true;
    }
    if (w->src->lua && pl__is_value(v)) {
        *first = v;
        *n = 1;
        return true;
    }
    return false;
}

typedef struct pl__keyref {
    const pl_value *key;
    int ordinal; /* position in the mapping */
} pl__keyref;

static int pl__keyref_cmp(const void *a, const void *b)
{
    const pl__keyref *x = a, *y = b;
    int c = strcmp(x->key->text, y->key->text);
    return c ? c : (x->ordinal > y->ordinal) - (x->ordinal < y->ordinal);
}

/* A mapping's keys must be single values, given once. Reports the first problem in document
 * order: the earliest key that repeats an earlier one. Sorting keeps a mapping with a million keys
 * from taking quadratic time. */
static pl_status pl__check_keys(pl_walk *w, const pl_value *map, const char *where)
{
    char cb[72], wb[32];
    int n = 0;
    for (const pl_value *k = map->child; k && k->next; k = k->next->next, n++)
        if (k->type != PL_VAL_SCALAR)
            return pl_error_at(w->err, PL_EINPUT, k->pos,
                               "%sa key must be a single word, not %s; write 'key: value'", where,
                               pl_value_what(k, wb));
    if (n < 2 || map->unordered) return PL_OK; /* a Lua table has no duplicate keys */
    pl__keyref *refs = malloc((size_t)n * sizeof *refs);
    if (!refs) return pl__oom(w);
    int i = 0;
    for (const pl_value *k = map->child; k && k->next; k = k->next->next, i++)
        refs[i] = (pl__keyref){k, i};
    qsort(refs, (size_t)n, sizeof *refs, pl__keyref_cmp);
    const pl_value *dup = NULL, *first = NULL;
    int dup_ordinal = n;
    for (int g = 0; g < n;) { /* groups of equal keys, in ordinal order inside each group */
        int e = g + 1;
        while (e < n && strcmp(refs[e].key->text, refs[g].key->text) == 0)
            e++;
        if (e - g > 1 && refs[g + 1].ordinal < dup_ordinal) {
            dup = refs[g + 1].key;
            first = refs[g].key;
            dup_ordinal = refs[g + 1].ordinal;
        }
        g = e;
    }
    free(refs);
    if (dup)
        return pl_error_at(
            w->err, PL_EINPUT, dup->pos,
            "%sduplicate key '%s' (first given at line %d, column %d); keep only one", where,
            pl_clip(dup->text, cb), first->pos.line, first->pos.col);
    return PL_OK;
}

static pl_status pl__unknown_key(pl_walk *w, const pl_value *k, const char *where,
                                 const char *const *keys, int n)
{
    char cb[72], list[256];
    if (k->len == 0)
        return pl_error_at(w->err, PL_EINPUT, k->pos, "%sempty key; write 'key: value'", where);
    const char *best = pl_closest(k->text, keys, n);
    if (best)
        return pl_error_at(w->err, PL_EINPUT, k->pos, "%sunknown key '%s' (did you mean '%s'?)",
                           where, pl_clip(k->text, cb), best);
    return pl_error_at(w->err, PL_EINPUT, k->pos, "%sunknown key '%s'; the keys here are: %s",
                       where, pl_clip(k->text, cb), pl__join(keys, n, list, sizeof list));
}

/* `where` is the owner of the key, for messages: "run: ", "buffer 'x': ", "stage 'y': ". */
static pl_status pl__want_scalar(pl_walk *w, const char *where, const char *key, const pl_value *v,
                                 const char *example)
{
    char wb[32];
    if (pl__is_value(v)) return PL_OK;
    if (v->type == PL_VAL_SCALAR)
        return pl_error_at(w->err, PL_EINPUT, v->pos, "%s'%s' has no value; write %s: %s", where,
                           key, key, example);
    return pl_error_at(w->err, PL_EINPUT, v->pos,
                       "%s'%s' must be a single value like %s: %s, not %s", where, key, key,
                       example, pl_value_what(v, wb));
}

/* A scalar that must be one of `words`: its index, or an error with "did you mean". */
static pl_status pl__want_word(pl_walk *w, const char *where, const char *key, const pl_value *v,
                               const char *const *words, int n, int *out)
{
    char cb[72], list[256];
    PL_CHECK(pl__want_scalar(w, where, key, v, words[0]));
    *out = pl__index_of(v->text, words, n);
    if (*out >= 0) return PL_OK;
    pl__join(words, n, list, sizeof list);
    const char *best = pl_closest(v->text, words, n);
    if (best)
        return pl_error_at(w->err, PL_EINPUT, v->pos,
                           "%s'%s' is '%s' (did you mean '%s'?); it must be one of: %s", where, key,
                           pl_clip(v->text, cb), best, list);
    return pl_error_at(w->err, PL_EINPUT, v->pos, "%s'%s' is '%s'; it must be one of: %s", where,
                       key, pl_clip(v->text, cb), list);
}

/* One of the field's values ("a|b|c"; booleans are "false|true"). */
static pl_status pl__want_enum(pl_walk *w, const char *where, const pl_field *f, const pl_value *v,
                               int *out)
{
    char store[PL__MAX_WORDS][PL_MAX_NAME];
    const char *words[PL__MAX_WORDS];
    int n = pl__split(f->key.type == PL_KEY_BOOL ? "false|true" : f->key.values, store, words);
    return pl__want_word(w, where, pl__fname(w, f), v, words, n, out);
}

/* Parses a decimal integer (optional sign). false on anything else or on overflow. */
static bool pl__parse_i64(const char *s, int64_t *out)
{
    bool neg = *s == '-';
    if (*s == '-' || *s == '+') s++;
    if (!*s) return false;
    uint64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return false;
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_C(1) << 63) / 10 || v * 10 > (UINT64_C(1) << 63) - d) return false;
        v = v * 10 + d;
    }
    if (!neg && v > (uint64_t)INT64_MAX) return false;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return true;
}

static bool pl__parse_u64(const char *s, uint64_t *out)
{
    if (*s == '+') s++;
    if (!*s) return false;
    uint64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return false;
        unsigned d = (unsigned)(*s - '0');
        if (v > UINT64_MAX / 10 || v * 10 > UINT64_MAX - d) return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

/* A whole number in the field's range. */
static pl_status pl__want_int(pl_walk *w, const char *where, const pl_field *f, const pl_value *v,
                              int64_t *out)
{
    char cb[72], ex[32], cap[48] = "";
    const char *key = pl__fname(w, f);
    snprintf(ex, sizeof ex, "%lld", (long long)f->min);
    PL_CHECK(pl__want_scalar(w, where, key, v, f->example ? f->example : ex));
    if (!pl__parse_i64(v->text, out))
        return pl_error_at(w->err, PL_EINPUT, v->pos,
                           "%s'%s' must be a whole number%s%s%s, got '%s'", where, key,
                           f->key.values ? " or '" : "", f->key.values ? f->key.values : "",
                           f->key.values ? "'" : "", pl_clip(v->text, cb));
    if (f->cap) snprintf(cap, sizeof cap, " (%s)", f->cap);
    if (f->min < f->max && (*out < f->min || *out > f->max))
        return pl_error_at(w->err, PL_EINPUT, v->pos,
                           "%s'%s' is %lld; it must be between %lld and %lld%s", where, key,
                           (long long)*out, (long long)f->min, (long long)f->max, cap);
    return PL_OK;
}

/* Checks the keys of a section's mapping (single words, once each, known) and finds each field's
 * key and value (NULL when not given). */
static pl_status pl__match(pl_walk *w, const pl_section *sec, const pl_value *map,
                           const char *where, const pl_value **keys, const pl_value **vals)
{
    const char *names[PL__MAX_WORDS];
    int n = 0;
    for (; sec->fields[n].key.name && n < PL__MAX_WORDS; n++) {
        names[n] = pl__fname(w, &sec->fields[n]);
        keys[n] = vals[n] = NULL;
    }
    PL_CHECK(pl__check_keys(w, map, where));
    for (const pl_value *k = map->child; k && k->next; k = k->next->next) {
        int i = pl__index_of(k->text, names, n);
        if (i < 0) return pl__unknown_key(w, k, where, names, n);
        keys[i] = k;
        vals[i] = k->next;
    }
    return PL_OK;
}

/* Takes the fields pl__match found, in written order (in table order when asked, or when the
 * mapping has none). */
static pl_status pl__take_section(pl_walk *w, const pl_section *sec, const pl_value *map, void *obj,
                                  const pl_value **vals, bool table_order)
{
    if (table_order || map->unordered) {
        for (int i = 0; sec->fields[i].key.name; i++)
            if (vals[i]) PL_CHECK(sec->fields[i].take(w, &sec->fields[i], vals[i], obj));
        return PL_OK;
    }
    for (const pl_value *k = map->child; k && k->next; k = k->next->next) {
        int i = pl__field_index(w, sec->fields, k->text);
        PL_CHECK(sec->fields[i].take(w, &sec->fields[i], k->next, obj));
    }
    return PL_OK;
}

/* ---- run ---------------------------------------------------------------------------------- */

static pl_status pl__take_batches(pl_walk *w, const pl_field *f, const pl_value *v, void *obj)
{
    pl_run_opts *r = obj;
    r->batches_pos = v->pos;
    /* `all`: until the first source file ends (counted by pl_spec_resolve_batches) */
    r->batches_all = v->type == PL_VAL_SCALAR && v->text && strcmp(v->text, "all") == 0;
    if (r->batches_all) {
        r->batches = 0;
        return PL_OK;
    }
    return pl__want_int(w, "run: ", f, v, &r->batches);
}

static pl_status pl__take_depth(pl_walk *w, const pl_field *f, const pl_value *v, void *obj)
{
    pl_run_opts *r = obj;
    int64_t i;
    r->depth_pos = v->pos;
    if (pl__is_value(v) && strcmp(v->text, f->key.values) == 0) {
        r->depth_auto = true;
        return PL_OK;
    }
    /* A word that is not "auto" (a number that is not whole keeps pl__want_int's message) */
    if (pl__is_value(v) && !pl__parse_i64(v->text, &i) && strspn(v->text, "+-.0123456789eE") == 0) {
        char cb[72];
        return pl_error_at(
            w->err, PL_EINPUT, v->pos,
            "run: 'depth' must be a whole number from %lld to %lld (%s) or '%s', got "
            "'%s'",
            (long long)f->min, (long long)f->max, f->cap, f->key.values, pl_clip(v->text, cb));
    }
    PL_CHECK(pl__want_int(w, "run: ", f, v, &i));
    r->depth = (int)i;
    r->depth_auto = false;
    return PL_OK;
}

/* memory_budget: {device: 8GiB, host_pinned: 4GiB} */
static pl_status pl__take_size(pl_walk *w, const pl_field *f, const pl_value *v, uint64_t *out)
{
    char cb[72];
    const char *key = pl__fname(w, f);
    PL_CHECK(pl__want_scalar(w, "run: memory_budget: ", key, v, f->example));
    if (!pl_bytes_parse(v->text, out))
        return pl_error_at(
            w->err, PL_EINPUT, v->pos,
            "run: memory_budget: '%s' must be a size like 8GiB, 512MiB or 4096 (bytes), "
            "got '%s'",
            key, pl_clip(v->text, cb));
    if (*out == 0)
        return pl_error_at(
            w->err, PL_EINPUT, v->pos,
            "run: memory_budget: '%s' is 0; give a size like %s, or leave the key out "
            "for no limit on that side",
            key, f->example);
    return PL_OK;
}

static pl_status pl__take_budget_device(pl_walk *w, const pl_field *f, const pl_value *v, void *obj)
{
    pl_budget *b = obj;
    b->device_pos = v->pos;
    return pl__take_size(w, f, v, &b->device);
}

static pl_status pl__take_budget_host(pl_walk *w, const pl_field *f, const pl_value *v, void *obj)
{
    pl_budget *b = obj;
    b->host_pos = v->pos;
    return pl__take_size(w, f, v, &b->host_pinned);
}

static const pl_field pl__budget_fields[] = {
    {.key = {"device", PL_KEY_SIZE, NULL, "no limit",
             "device memory the plan's device buffers may take: every slot and the persistent "
             "ones"},
     .example = "8GiB",
     .take = pl__take_budget_device},
    {.key = {"host_pinned", PL_KEY_SIZE, NULL, "no limit",
             "pinned host memory the plan's host buffers may take: every slot and the persistent "
             "ones"},
     .example = "4GiB",
     .take = pl__take_budget_host},
    {.key = {NULL, 0, NULL, NULL, NULL}},
};

const pl_section pl_schema_budget = {"memory_budget", "### `run.memory_budget`",
                                     "the most memory the plan's buffers may take on each side",
                                     pl__budget_fields};

static pl_status pl__take_budget(pl_walk *w, const pl_field *f, const pl_value *v, void *obj)
{
    pl_run_opts *r = obj;
    char what[32];
    const pl_value *keys[PL__MAX_WORDS], *vals[PL__MAX_WORDS];
    if (pl_value_is_null(v)) return PL_OK;
    if (!pl__is_map(v))
        return pl_error_at(w->err, PL_EINPUT, v->pos,
                           "run: '%s' must be a mapping like %s: %s, not %s", f->key.name,
                           f->key.name, f->example, pl_value_what(v, what));
    PL_CHECK(pl__match(w, &pl_schema_budget, v, "run: memory_budget: ", keys, vals));
    if (!vals[0] && !vals[1])
        return pl_error_at(w->err, PL_EINPUT, v->pos,
                           "run: 'memory_budget' is empty; give device, host_pinned or both, like "
                           "%s: %s",
                           f->key.name, f->example);
    r->budget.set = true;
    r->budget.pos = v->pos;
    return pl__take_section(w, &pl_schema_budget, v, &r->budget, vals, false);
}

static pl_status pl__take_device(pl_walk *w, const pl_field *f, const pl_value *v, void *obj)
{
    pl_run_opts *r = obj;
    int64_t i;
    PL_CHECK(pl__want_int(w, "run: ", f, v, &i));
    r->device = (int)i;
    r->device_pos = v->pos;
    return PL_OK;
}

static pl_status pl__take_seed(pl_walk *w, const pl_field *f, const pl_value *v, void *obj)
{
    pl_run_opts *r = obj;
    char cb[72];
    PL_CHECK(pl__want_scalar(w, "run: ", f->key.name, v, f->example));
    if (!pl__parse_u64(v->text, &r->seed))
        return pl_error_at(w->err, PL_EINPUT, v->pos,
                           "run: 'seed' must be a whole number from 0 to 18446744073709551615, got "
                           "'%s'",
                           pl_clip(v->text, cb));
    r->seed_pos = v->pos;
    return PL_OK;
}

static pl_status pl__take_fault_marks(pl_walk *w, const pl_field *f, const pl_value *v, void *obj)
{
    pl_run_opts *r = obj;
    int idx;
    PL_CHECK(pl__want_enum(w, "run: ", f, v, &idx));
    r->fault_marks = idx == 1;
    return PL_OK;
}

static pl_status pl__take_gpu_wait(pl_walk *w, const pl_field *f, const pl_value *v, void *obj)
{
    pl_run_opts *r = obj;
    int idx;
    PL_CHECK(pl__want_enum(w, "run: ", f, v, &idx));
    r->gpu_wait = idx == 1 ? PL_GPU_WAIT_SLEEP : PL_GPU_WAIT_POLL;
    return PL_OK;
}

static pl_status pl__take_loop_mode(pl_walk *w, const pl_field *f, const pl_value *v, void *obj)
{
    pl_run_opts *r = obj;
    int idx;
    PL_CHECK(pl__want_enum(w, "run: ", f, v, &idx));
    r->loop_mode = idx == 1 ? PL_LOOP_HOST : PL_LOOP_DEVICE;
    return PL_OK;
}

static pl_status pl__take_confine(pl_walk *w, const pl_field *f, const pl_value *v, void *obj)
{
    pl_run_opts *r = obj;
    int idx;
    PL_CHECK(pl__want_enum(w, "run: ", f, v, &idx));
    r->confine = idx == 1;
    r->confine_pos = v->pos;
    return PL_OK;
}

static pl_status pl__take_shard_mode(pl_walk *w, const pl_field *f, const pl_value *v, void *obj)
{
    pl_run_opts *r = obj;
    int idx;
    PL_CHECK(pl__want_enum(w, "run: ", f, v, &idx));
    r->shard.mode = idx == 1 ? PL_SHARD_RANGE : PL_SHARD_STRIDE;
    return PL_OK;
}

static const pl_field pl__run_fields[] = {
    {.key = {"batches", PL_KEY_INT, "all", "16",
             "how many batches to run, or all: until the first source file ends"},
     .example = "1",
     .min = 1,
     .max = PL_MAX_BATCHES,
     .cap = "PL_MAX_BATCHES",
     .take = pl__take_batches},
    {.key = {"depth", PL_KEY_INT, "auto", "4",
             "slots in flight: how many batches can be in the pipeline at once; auto: the "
             "smallest that reaches the bound, measured on the first batches, within "
             "memory_budget"},
     .example = "1",
     .min = 1,
     .max = PL_MAX_DEPTH,
     .cap = "PL_MAX_DEPTH",
     .take = pl__take_depth},
    {.key = {"device", PL_KEY_INT, NULL, "0", "CUDA device ordinal the GPU executor uses"},
     .example = "0",
     .min = 0,
     .max = INT_MAX,
     .take = pl__take_device},
    /* 0 to 2^64-1: min == max, so pl__take_seed checks it */
    {.key = {"seed", PL_KEY_INT, NULL, "0",
             "seed of everything random (init: random, source generators), 0 to 2^64-1"},
     .example = "42",
     .take = pl__take_seed},
    {.key = {"memory_budget", PL_KEY_MAP, NULL, "none",
             "the most memory the plan's buffers may take, on the device and in pinned host "
             "memory (every slot and the persistent buffers together)"},
     .example = "{device: 8GiB, host_pinned: 4GiB}",
     .sub = &pl_schema_budget,
     .take = pl__take_budget},
    {.key = {"fault_marks", PL_KEY_BOOL, NULL, "false",
             "gpu: per-stage completion marks in the graphs, so a device fault names its stage "
             "for certain (slower: the marks cost copy/compute overlap); pipectl run "
             "--fault-marks sets it"},
     .example = "true",
     .take = pl__take_fault_marks},
    {.key = {"gpu_wait", PL_KEY_ENUM, "poll|sleep", "poll",
             "gpu: while host stages gate a launch, the issue loop polls the device every 20 us "
             "(poll) or sleeps until a device completion wakes it (sleep: frees a CPU core; "
             "measured no faster)"},
     .example = "sleep",
     .take = pl__take_gpu_wait},
    {.key = {"confine", PL_KEY_BOOL, NULL, "false",
             "every file path the pipeline names (sources, sinks, init files, scripts, kernel "
             "sources, indexes) must resolve inside the pipeline's folder or --out-dir, symlinks "
             "followed; pipectl run --confine sets it"},
     .example = "true",
     .take = pl__take_confine},
    {.key = {"shard_mode", PL_KEY_ENUM, "stride|range", "stride",
             "which batches shard K of N runs (pipectl run --shard K/N, --mpi): stride (b mod N "
             "== K) or range (one contiguous block each); docs/scale.md"},
     .example = "range",
     .take = pl__take_shard_mode},
    {.key = {"loop", PL_KEY_ENUM, "device|host", "device",
             "gpu: a loop of device stages is a conditional WHILE node in the slot's graph, no "
             "host round trip per iteration (device), or its body's graph launched from a host "
             "worker once per iteration (host)"},
     .example = "host",
     .take = pl__take_loop_mode},
    {.key = {NULL, 0, NULL, NULL, NULL}},
};

const pl_section pl_schema_run = {"run", "## `run`",
                                  "run options (pipectl run flags override them)", pl__run_fields};

/* ---- buffers ------------------------------------------------------------------------------ */

static const char *pl__buf_where(const char *name, char buf[96])
{
    char cb[72];
    snprintf(buf, 96, "buffer '%s': ", pl_clip(name, cb));
    return buf;
}

static pl_status pl__take_where(pl_walk *w, const pl_field *f, const pl_value *v, void *obj)
{
    pl_buffer *b = obj;
    char wb[96];
    int idx;
    PL_CHECK(pl__want_enum(w, pl__buf_where(b->name, wb), f, v, &idx));
    b->where = idx ? PL_DEVICE : PL_HOST;
    b->where_pos = v->pos;
    return PL_OK;
}

static pl_status pl__take_dtype(pl_walk *w, const pl_field *f, const pl_value *v, void *obj)
{
    pl_buffer *b = obj;
    char wb[96];
    int idx;
    PL_CHECK(pl__want_enum(w, pl__buf_where(b->name, wb), f, v, &idx));
    if (!pl_dtype_parse(v->text, &b->dtype)) return pl__oom(w); /* the table is inconsistent */
    b->dtype_pos = v->pos;
    return PL_OK;
}

static pl_status pl__take_shape(pl_walk *w, const pl_field *f, const pl_value *v, void *obj)
{
    pl_buffer *b = obj;
    char wb[96], cb[72], what[32];
    const char *where = pl__buf_where(b->name, wb);
    (void)f;
    const pl_value *first;
    int n;
    if (!pl__list_items(w, v, &first, &n)) {
        if (pl__is_value(v))
            return pl_error_at(w->err, PL_EINPUT, v->pos,
                               "%s'shape' must be a list of positive integers like [%s], not a "
                               "single value",
                               where, pl_clip(v->text, cb));
        return pl_error_at(
            w->err, PL_EINPUT, v->pos,
            "%s'shape' must be a list of positive integers like [1024] or [64, 256], "
            "not %s",
            where, pl_value_what(v, what));
    }
    if (n == 0)
        return pl_error_at(w->err, PL_EINPUT, v->pos,
                           "%s'shape' is empty; give at least one dimension, like [1024]", where);
    if (n > PL_MAX_RANK)
        return pl_error_at(w->err, PL_EINPUT, v->pos,
                           "%s'shape' has %d dimensions; at most %d (PL_MAX_RANK) are allowed: "
                           "merge some of them",
                           where, n, PL_MAX_RANK);
    const pl_value *it = first;
    for (int d = 0; d < n; d++, it = it->next) {
        int64_t dim;
        if (!pl__is_value(it))
            return pl_error_at(w->err, PL_EINPUT, it->pos,
                               "%sshape dimension %d must be a positive integer, not %s", where,
                               d + 1, pl_value_what(it, what));
        if (!pl__parse_i64(it->text, &dim) || dim < 1)
            return pl_error_at(w->err, PL_EINPUT, it->pos,
                               "%sshape dimension %d must be a positive integer, got '%s'", where,
                               d + 1, pl_clip(it->text, cb));
        b->shape[d] = dim;
    }
    b->rank = n;
    b->shape_pos = v->pos;
    return PL_OK;
}

static pl_status pl__take_persistent(pl_walk *w, const pl_field *f, const pl_value *v, void *obj)
{
    pl_buffer *b = obj;
    char wb[96];
    int idx;
    PL_CHECK(pl__want_enum(w, pl__buf_where(b->name, wb), f, v, &idx));
    b->persistent = idx == 1;
    b->persistent_pos = v->pos;
    return PL_OK;
}

static pl_status pl__take_init(pl_walk *w, const pl_field *f, const pl_value *v, void *obj)
{
    pl_buffer *b = obj;
    char wb[96];
    int idx;
    PL_CHECK(pl__want_enum(w, pl__buf_where(b->name, wb), f, v, &idx));
    b->init = idx == 0 ? PL_INIT_ZEROS : idx == 1 ? PL_INIT_RANDOM : PL_INIT_FILE;
    b->init_pos = v->pos;
    return PL_OK;
}

static pl_status pl__take_file(pl_walk *w, const pl_field *f, const pl_value *v, void *obj)
{
    pl_buffer *b = obj;
    char wb[96];
    PL_CHECK(pl__want_scalar(w, pl__buf_where(b->name, wb), f->key.name, v, f->example));
    b->init_file = pl_spec_strdup(w->spec, v->text);
    return b->init_file ? PL_OK : pl__oom(w);
}

static const pl_field pl__buffer_fields[] = {
    {.key = {"where", PL_KEY_ENUM, "host|device", "host",
             "host memory (pinned when the GPU executor runs) or GPU memory"},
     .example = "host",
     .take = pl__take_where},
    /* The values are pl_dtype_name's, in pl_dtype order (tests/parser/test_yaml.c checks). */
    {.key = {"dtype", PL_KEY_ENUM, "u8|i32|i64|f16|bf16|f32|f64", "f32", "element type"},
     .example = "f32",
     .take = pl__take_dtype},
    {.key = {"shape", PL_KEY_INTS, NULL, NULL,
             "dimensions, outermost first, at most 8 (PL_MAX_RANK), each >= 1 (required)"},
     .example = "[1024]",
     .min = 1,
     .max = INT64_MAX,
     .take = pl__take_shape},
    {.key = {"persistent", PL_KEY_BOOL, NULL, "false",
             "one copy for the whole run (weights, a corpus), not one per slot"},
     .example = "false",
     .take = pl__take_persistent},
    {.key = {"init", PL_KEY_ENUM, "zeros|random|file", NULL,
             "how the buffer starts out (random: seeded by run.seed and the buffer's index)"},
     .example = "zeros",
     .take = pl__take_init},
    {.key = {"file", PL_KEY_PATH, NULL, NULL,
             "with init: file: a raw or .npy file of exactly the buffer's size"},
     .example = "data.npy",
     .take = pl__take_file},
    {.key = {NULL, 0, NULL, NULL, NULL}},
};

const pl_section pl_schema_buffer = {"buffer", "## `buffers`",
                                     "a buffer: where it lives, its element type and shape",
                                     pl__buffer_fields};

static pl_status pl__walk_buffer(pl_walk *w, const pl_value *k, const pl_value *v)
{
    char where[96], what[32];
    if (!pl__is_value(k))
        return pl_error_at(
            w->err, PL_EINPUT, k->pos,
            "a buffer name must be a single word, not %s; write 'name: {shape: [N]}'",
            pl_value_what(k, what));
    pl__buf_where(k->text, where);
    if (!pl__is_map(v))
        return pl_error_at(w->err, PL_EINPUT, v->pos,
                           "%sexpected a mapping like {where: host, dtype: f32, shape: [1024]}, "
                           "not %s",
                           where, pl_value_what(v, what));
    const pl_value *keys[PL__MAX_WORDS], *vals[PL__MAX_WORDS];
    PL_CHECK(pl__match(w, &pl_schema_buffer, v, where, keys, vals));
    pl_buffer *b = pl_spec_add_buffer(w->spec, k->text, k->pos);
    if (!b) return pl__oom(w);
    PL_CHECK(pl__take_section(w, &pl_schema_buffer, v, b, vals, false));
    int init = pl__field_index(w, pl__buffer_fields, "init");
    int file = pl__field_index(w, pl__buffer_fields, "file");
    if (b->rank == 0)
        return pl_error_at(w->err, PL_EINPUT, k->pos,
                           "%sno 'shape'; add shape: [N] (a list of positive integers)", where);
    if (vals[init] && b->init == PL_INIT_FILE && !b->init_file)
        return pl_error_at(w->err, PL_EINPUT, vals[init]->pos,
                           "%sinit: file needs 'file: PATH' (raw or .npy)", where);
    if (keys[file] && b->init != PL_INIT_FILE)
        return pl_error_at(w->err, PL_EINPUT, keys[file]->pos,
                           "%s'file' is only used with init: file; add init: file or remove 'file'",
                           where);
    uint64_t count;
    return pl_buffer_count(b, &count, w->err);
}

/* ---- loops -------------------------------------------------------------------------------- */

static pl_status pl__take_loop_int(pl_walk *w, const pl_field *f, const pl_value *v, int64_t *out,
                                   pl_pos *pos)
{
    PL_CHECK(pl__want_int(w, w->where, f, v, out));
    *pos = v->pos;
    return PL_OK;
}

static pl_status pl__take_loop_max(pl_walk *w, const pl_field *f, const pl_value *v, void *obj)
{
    pl_loop *l = obj;
    return pl__take_loop_int(w, f, v, &l->max, &l->max_pos);
}

static pl_status pl__take_loop_count(pl_walk *w, const pl_field *f, const pl_value *v, void *obj)
{
    pl_loop *l = obj;
    return pl__take_loop_int(w, f, v, &l->count, &l->count_pos);
}

static pl_status pl__take_loop_ref(pl_walk *w, const pl_field *f, const pl_value *v, pl_ref *r)
{
    PL_CHECK(pl__want_scalar(w, w->where, f->key.name, v, f->example));
    r->name = pl_spec_strdup(w->spec, v->text);
    r->pos = v->pos;
    return r->name ? PL_OK : pl__oom(w);
}

static pl_status pl__take_loop_while(pl_walk *w, const pl_field *f, const pl_value *v, void *obj)
{
    pl_loop *l = obj;
    return pl__take_loop_ref(w, f, v, &l->cond);
}

static pl_status pl__take_loop_index(pl_walk *w, const pl_field *f, const pl_value *v, void *obj)
{
    pl_loop *l = obj;
    return pl__take_loop_ref(w, f, v, &l->index);
}

/* ---- a loop's stream: ---------------------------------------------------------------------- */

static pl_status pl__take_stream_every(pl_walk *w, const pl_field *f, const pl_value *v, void *obj)
{
    pl_loop_stream *s = obj;
    return pl__take_loop_int(w, f, v, &s->every, &s->every_pos);
}

static pl_status pl__take_stream_start(pl_walk *w, const pl_field *f, const pl_value *v, void *obj)
{
    pl_loop_stream *s = obj;
    return pl__take_loop_int(w, f, v, &s->start, &s->start_pos);
}

static pl_status pl__take_stream_from(pl_walk *w, const pl_field *f, const pl_value *v, void *obj)
{
    pl_loop_stream *s = obj;
    return pl__take_loop_ref(w, f, v, &s->from);
}

static pl_status pl__take_stream_finished(pl_walk *w, const pl_field *f, const pl_value *v,
                                          void *obj)
{
    pl_loop_stream *s = obj;
    return pl__take_loop_ref(w, f, v, &s->finished);
}

/* A path: `to` (an output) or `vocab` (an input). */
static pl_status pl__take_stream_path(pl_walk *w, const pl_field *f, const pl_value *v,
                                      const char **out, pl_pos *pos)
{
    PL_CHECK(pl__want_scalar(w, w->where, pl__fname(w, f), v, f->example));
    *out = pl_spec_strdup(w->spec, v->text);
    *pos = v->pos;
    return *out ? PL_OK : pl__oom(w);
}

static pl_status pl__take_stream_to(pl_walk *w, const pl_field *f, const pl_value *v, void *obj)
{
    pl_loop_stream *s = obj;
    return pl__take_stream_path(w, f, v, &s->to, &s->to_pos);
}

static pl_status pl__take_stream_vocab(pl_walk *w, const pl_field *f, const pl_value *v, void *obj)
{
    pl_loop_stream *s = obj;
    return pl__take_stream_path(w, f, v, &s->vocab, &s->vocab_pos);
}

static pl_status pl__take_stream_format(pl_walk *w, const pl_field *f, const pl_value *v, void *obj)
{
    pl_loop_stream *s = obj;
    int idx;
    PL_CHECK(pl__want_enum(w, w->where, f, v, &idx));
    s->format = idx == 1 ? PL_STREAM_JSONL : idx == 2 ? PL_STREAM_RAW : PL_STREAM_AUTO;
    s->format_pos = v->pos;
    return PL_OK;
}

static pl_status pl__take_stream_skip(pl_walk *w, const pl_field *f, const pl_value *v, void *obj)
{
    pl_loop_stream *s = obj;
    int idx;
    PL_CHECK(pl__want_enum(w, w->where, f, v, &idx));
    s->skip_special = idx == 1;
    s->skip_special_pos = v->pos;
    return PL_OK;
}

static const pl_field pl__stream_fields[] = {
    {.key = {"every", PL_KEY_INT, NULL, NULL,
             "deliver after every this many iterations, and after the last (required)"},
     .example = "8",
     .min = 1,
     .max = PL_MAX_LOOP,
     .cap = "PL_MAX_LOOP",
     .take = pl__take_stream_every},
    {.key = {"from", PL_KEY_NAME, NULL, NULL,
             "a buffer [B, N, ...] a body stage writes, where the body runs: its second dimension "
             "is the step axis (required)"},
     .example = "tokens_dev",
     .take = pl__take_stream_from},
    {.key = {"to", PL_KEY_PATH, NULL, NULL,
             "output file (.partial, then renamed, as a sink's), FIFO, character device or - "
             "(stdout) (required)"},
     .example = "out/stream.jsonl",
     .take = pl__take_stream_to},
    {.key = {"format", PL_KEY_ENUM, "auto|jsonl|raw", "auto",
             "auto: jsonl for a .jsonl or .ndjson name, else raw"},
     .example = "jsonl",
     .take = pl__take_stream_format},
    {.key = {"start", PL_KEY_INT, NULL, "1",
             "the column iteration 0 writes (iteration i writes start + i); the columns before it "
             "are written before the loop and go with the first delivery"},
     .example = "1",
     .min = 0,
     .max = PL_MAX_LOOP,
     .cap = "PL_MAX_LOOP",
     .take = pl__take_stream_start},
    {.key = {"finished", PL_KEY_NAME, NULL, "none",
             "jsonl: an i32 [B] buffer, 1 once a row has ended (the sample's finished): a row's "
             "record in the delivery where it ends says \"end\": true, and it has no later ones"},
     .example = "done",
     .take = pl__take_stream_finished},
    {.key = {"vocab", PL_KEY_PATH, NULL, "none",
             "jsonl, i32 ids [B, N]: a GPT-2 tokenizer (as detokenize's vocab); records hold "
             "\"text\" instead of \"tokens\""},
     .example = "../gpt2",
     .take = pl__take_stream_vocab},
    {.key = {"skip_special", PL_KEY_BOOL, NULL, "false",
             "with vocab: <|endoftext|> (the padding after a row's end) gives no text"},
     .example = "true",
     .take = pl__take_stream_skip},
    {.key = {NULL, 0, NULL, NULL, NULL}},
};

const pl_section pl_schema_loop_stream = {
    "stream", "### `loop.stream`",
    "a loop's stream: the newly written columns of a buffer, delivered every few iterations while "
    "the batch runs",
    pl__stream_fields};

static pl_status pl__take_loop_stream(pl_walk *w, const pl_field *f, const pl_value *v, void *obj)
{
    pl_loop *l = obj;
    char what[32], keep[sizeof w->where];
    const pl_value *keys[PL__MAX_WORDS], *vals[PL__MAX_WORDS];
    if (!pl__is_map(v))
        return pl_error_at(w->err, PL_EINPUT, v->pos,
                           "%s'%s' must be a mapping like %s: %s, not %s", w->where, f->key.name,
                           f->key.name, f->example, pl_value_what(v, what));
    memcpy(keep, w->where, sizeof keep);
    size_t wl = strlen(w->where); /* "loop 'x': " is short: the name is clipped to 72 bytes */
    if (wl + sizeof "stream: " <= sizeof w->where)
        memcpy(w->where + wl, "stream: ", sizeof "stream: ");
    pl_status st = pl__match(w, &pl_schema_loop_stream, v, w->where, keys, vals);
    pl_loop_stream *s = NULL;
    if (st == PL_OK && !(s = pl_spec_alloc(w->spec, sizeof *s))) st = pl__oom(w);
    if (s) {
        s->pos = v->pos;
        s->start = 1;
        s->from.index = s->finished.index = -1;
        l->stream = s;
        st = pl__take_section(w, &pl_schema_loop_stream, v, s, vals, false);
    }
    static const char *const need[] = {"every", "from", "to"};
    for (int i = 0; st == PL_OK && i < 3; i++)
        if (!vals[pl__field_index(w, pl__stream_fields, need[i])])
            st = pl_error_at(w->err, PL_EINPUT, v->pos,
                             "%sno '%s'; a stream needs every: (iterations between deliveries), "
                             "from: (the buffer a body stage writes) and to: (where the records "
                             "go), like %s: %s",
                             w->where, need[i], f->key.name, f->example);
    memcpy(w->where, keep, sizeof keep);
    return st;
}

static const pl_field pl__loop_fields[] = {
    {.key = {"max", PL_KEY_INT, NULL, NULL,
             "the most iterations a batch runs: every loop has a bound (required)"},
     .example = "16",
     .min = 1,
     .max = PL_MAX_LOOP,
     .cap = "PL_MAX_LOOP",
     .take = pl__take_loop_max},
    {.key = {"count", PL_KEY_INT, NULL, "none", "a fixed number of iterations, at most max"},
     .example = "4",
     .min = 1,
     .max = PL_MAX_LOOP,
     .cap = "PL_MAX_LOOP",
     .take = pl__take_loop_count},
    {.key = {"while", PL_KEY_NAME, NULL, "none",
             "an i32 [1] buffer, on the side the body runs: the loop runs while it is nonzero, "
             "tested before every iteration (the first one too)"},
     .example = "active_dev",
     .take = pl__take_loop_while},
    {.key = {"index", PL_KEY_NAME, NULL, "none",
             "an i32 [1] buffer the loop writes before every test with the iterations done: in "
             "the body the iteration's number from 0, after the loop how many ran"},
     .example = "step_dev",
     .take = pl__take_loop_index},
    {.key = {"stream", PL_KEY_MAP, NULL, "none",
             "deliver a buffer's new columns every few iterations while the batch runs (see "
             "loop.stream)"},
     .example = "{every: 8, from: tokens_dev, to: out/stream.jsonl}",
     .sub = &pl_schema_loop_stream,
     .take = pl__take_loop_stream},
    {.key = {NULL, 0, NULL, NULL, NULL}},
};

const pl_section pl_schema_loop = {"loop", "### `loop`",
                                   "a loop: the stages under stages: run again and again in one "
                                   "batch, up to max times",
                                   pl__loop_fields};

/* The keys of a loop's own mapping, besides `loop:` (the table above). */
static const char *const pl__loop_stage_keys[] = {"name", "loop", "stages", "after"};

/* ---- stages ------------------------------------------------------------------------------- */

/* reads / writes / after: a list of names. */
static pl_status pl__walk_refs(pl_walk *w, const char *where, const char *key, const pl_value *v,
                               int si, pl_ref *(*add)(pl_spec *, pl_stage *, const char *, pl_pos))
{
    char cb[72], what[32];
    const pl_value *it;
    int n;
    if (!pl__list_items(w, v, &it, &n)) {
        if (pl__is_value(v))
            return pl_error_at(w->err, PL_EINPUT, v->pos,
                               "%s'%s' must be a list of names like [%s], not a single value",
                               where, key, pl_clip(v->text, cb));
        return pl_error_at(w->err, PL_EINPUT, v->pos,
                           "%s'%s' must be a list of names like [a, b], not %s", where, key,
                           pl_value_what(v, what));
    }
    for (int i = 0; i < n; i++, it = it->next) {
        if (!pl__is_value(it) || it->len == 0)
            return pl_error_at(w->err, PL_EINPUT, it->pos,
                               "%seach item of '%s' must be a name, not %s", where, key,
                               it->type == PL_VAL_SCALAR && it->len == 0 ? "an empty string"
                                                                         : pl_value_what(it, what));
        if (!add(w->spec, &w->spec->stages[si], it->text, it->pos)) return pl__oom(w);
    }
    return PL_OK;
}

/* A list item of a PL_KEY_ITEMS key may be a one-entry mapping {tag: value} (kernel args:
 * {f32: 1.5}); its key becomes the item's tag. */
static bool pl__tagged_item(const pl_value *it)
{
    return it->type == PL_VAL_MAP && it->n == 2 && pl__is_value(it->child) && it->child->len > 0 &&
           pl__is_value(it->child->next);
}

/* A kind's option: a scalar or a list of scalars, stored as text and typed later against the
 * kind's key table by pl_stage_check_opts (so both front ends give identical options). */
static pl_status pl__walk_opt(pl_walk *w, const char *where, const pl_value *k, const pl_value *v,
                              int si, const pl_key *def)
{
    char what[32];
    if (k->len == 0)
        return pl_error_at(w->err, PL_EINPUT, k->pos, "%sempty key; write 'key: value'", where);
    if (v->type == PL_VAL_MAP)
        return pl_error_at(
            w->err, PL_EINPUT, v->pos,
            "%s'%s' is a mapping; stage options are single values or lists of values", where,
            k->text);
    if (pl_value_is_null(v))
        return pl_error_at(w->err, PL_EINPUT, v->pos,
                           "%s'%s' has no value; give it a value or remove the key", where,
                           k->text);
    if (v->type != PL_VAL_SCALAR && v->type != PL_VAL_LIST)
        return pl_error_at(w->err, PL_EINPUT, v->pos,
                           "%s'%s' must be a single value or a list, not %s", where, k->text,
                           pl_value_what(v, what));
    pl_opt *o = pl_stage_add_opt(w->spec, &w->spec->stages[si], k->text, k->pos);
    if (!o) return pl__oom(w);
    o->val_pos = v->pos;
    if (v->type == PL_VAL_SCALAR) {
        o->str = pl_spec_strdup(w->spec, v->text);
        return o->str ? PL_OK : pl__oom(w);
    }
    o->is_list = true;
    for (const pl_value *it = v->child; it; it = it->next) {
        pl_status st;
        if (def && def->type == PL_KEY_ITEMS && pl__tagged_item(it))
            st =
                pl_opt_add_tagged_item(w->spec, o, it->child->text, it->child->next->text, it->pos);
        else if (pl__is_value(it))
            st = pl_opt_add_item(w->spec, o, it->text, it->pos);
        else if (def && def->type == PL_KEY_ITEMS)
            return pl_error_at(w->err, PL_EINPUT, it->pos,
                               "%seach item of '%s' must be a single value or a one-entry mapping "
                               "like {f32: 1.5}, not %s",
                               where, k->text, pl_value_what(it, what));
        else
            return pl_error_at(w->err, PL_EINPUT, it->pos,
                               "%seach item of '%s' must be a single value, not %s", where, k->text,
                               pl_value_what(it, what));
        if (st != PL_OK) return pl__oom(w);
    }
    return PL_OK;
}

static const pl_value *pl__map_get(const pl_value *m, const char *key)
{
    for (const pl_value *k = m->child; k && k->next; k = k->next->next)
        if (k->type == PL_VAL_SCALAR && strcmp(k->text, key) == 0) return k->next;
    return NULL;
}

/* A function value (pipeline.lua) for a PL_KEY_FUNC key: the runtime finds the function again by
 * stage name in the script, so the spec records the script as the key's stand-in, the first of
 * its `values` ("script|code": stored as `script`, and neither may be given as well). */
static pl_status pl__walk_func(pl_walk *w, const char *where, const pl_value *m, const pl_value *k,
                               const pl_value *v, int si, const pl_key *def)
{
    char store[PL__MAX_WORDS][PL_MAX_NAME], what[32], alts[256] = "";
    const char *words[PL__MAX_WORDS];
    int n = pl__split(def->values, store, words);
    if (v->type != PL_VAL_FUNC)
        return pl_error_at(w->err, PL_EINPUT, v->pos,
                           "%s'%s' must be a Lua function (pipeline.lua only; in YAML give script: "
                           "or code:), not %s",
                           where, k->text, pl_value_what(v, what));
    for (int i = 0; i < n; i++) {
        size_t len = strlen(alts);
        snprintf(alts + len, sizeof alts - len, i ? "/'%s'" : "'%s'", words[i]);
    }
    for (int i = 0; i < n; i++)
        if (pl__map_get(m, words[i]))
            return pl_error_at(w->err, PL_EINPUT, k->pos, "%sgive either '%s' or %s, not both",
                               where, k->text, alts);
    if (n == 0 || !w->src->script_base) return pl__oom(w); /* the table is inconsistent */
    pl_opt *o = pl_stage_add_opt(w->spec, &w->spec->stages[si], words[0], k->pos);
    if (!o) return pl__oom(w);
    o->val_pos = v->pos;
    o->str = pl_spec_strdup(w->spec, w->src->script_base);
    return o->str ? PL_OK : pl__oom(w);
}

/* A function where the kind takes none: say which kinds' key it belongs to. */
static pl_status pl__misplaced_func(pl_walk *w, const char *where, const pl_value *k,
                                    const pl_kind *kind)
{
    int n;
    const pl_kind *const *kinds = pl_kinds(&n);
    for (int i = 0; i < n; i++) {
        const pl_key *d = pl_kind_key(kinds[i], k->text);
        if (d && d->type == PL_KEY_FUNC)
            return pl_error_at(w->err, PL_EINPUT, k->pos,
                               "%s'%s' is only for %s stages (this one is %s)", where, k->text,
                               kinds[i]->name, kind->name);
    }
    for (int i = 0; i < n; i++)
        for (const pl_key *d = kinds[i]->keys; d->name; d++)
            if (d->type == PL_KEY_FUNC)
                return pl_error_at(w->err, PL_EINPUT, k->pos,
                                   "%s'%s' is a function; only `%s` of a %s stage takes a function",
                                   where, k->text, d->name, kinds[i]->name);
    return pl_error_at(w->err, PL_EINPUT, k->pos, "%s'%s' is a function; no key takes one", where,
                       k->text);
}

static pl_status pl__walk_stage_key(pl_walk *w, const char *where, const pl_value *m,
                                    const pl_value *k, int si, const pl_kind *kind)
{
    const pl_value *v = k->next;
    const pl_key *def = NULL;
    for (const pl_key *d = kind->keys; d->name && !def; d++)
        if (strcmp(d->name, k->text) == 0) def = d;
    if (def && def->type == PL_KEY_FUNC) return pl__walk_func(w, where, m, k, v, si, def);
    if (v->type == PL_VAL_FUNC) return pl__misplaced_func(w, where, k, kind);
    /* Unknown keys are reported by pl_stage_check_opts, with the kind's keys to suggest. */
    return pl__walk_opt(w, where, k, v, si, def);
}

/* When `name` or `kind` is missing, a misspelling of it is the likelier story: say so. The other
 * unknown keys of a stage are reported by pl_stage_check_opts, which knows the kind's keys. */
static pl_status pl__misspelled(pl_walk *w, const pl_value *m, const char *where,
                                const char *missing)
{
    const char *common[PL__MAX_WORDS];
    int n = 0;
    char cb[72];
    for (const pl_key *c = pl_common_stage_keys; c->name && n < PL__MAX_WORDS; c++)
        common[n++] = c->name;
    for (const pl_value *k = m->child; k && k->next; k = k->next->next) {
        if (pl__index_of(k->text, common, n) >= 0) continue;
        const char *best = pl_closest(k->text, common, n);
        if (best && strcmp(best, missing) == 0)
            return pl_error_at(w->err, PL_EINPUT, k->pos, "%sunknown key '%s' (did you mean '%s'?)",
                               where, pl_clip(k->text, cb), missing);
    }
    return PL_OK;
}

typedef pl_ref *(*pl__add_ref_fn)(pl_spec *, pl_stage *, const char *, pl_pos);

static pl_status pl__walk_loop(pl_walk *w, const pl_value *m, const pl_value *name,
                               const pl_value *loop);

/* One stage (a loop's body stage when `in_loop` names the loop, else NULL). */
static pl_status pl__walk_stage(pl_walk *w, const pl_value *m, int number, const char *in_loop)
{
    char where[128], cb[72], what[32], of[96] = "";
    if (in_loop) snprintf(of, sizeof of, " of loop '%s'", in_loop);
    snprintf(where, sizeof where, "stage %d%s: ", number, of);
    const pl_value *name = pl__is_map(m) ? pl__map_get(m, "name") : NULL;
    if (name && pl__is_value(name)) /* the stage's name, for messages, as early as possible */
        snprintf(where, sizeof where, "stage '%s': ", pl_clip(name->text, cb));
    if (!pl__is_map(m))
        return pl_error_at(
            w->err, PL_EINPUT, m->pos,
            "each stage must be a mapping like {name: up, kind: h2d, from: x, to: y}, "
            "not %s",
            pl_value_what(m, what));
    PL_CHECK(pl__check_keys(w, m, where));
    const pl_value *kind = pl__map_get(m, "kind"), *loop = pl__map_get(m, "loop");
    if (!name) {
        PL_CHECK(pl__misspelled(w, m, where, "name"));
        return pl_error_at(w->err, PL_EINPUT, m->pos,
                           "stage %d%s has no 'name'; add name: <a unique stage name>", number, of);
    }
    PL_CHECK(pl__want_scalar(w, where, "name", name, "up"));
    snprintf(where, sizeof where, "stage '%s': ", pl_clip(name->text, cb));
    if (loop && kind)
        return pl_error_at(w->err, PL_EINPUT, kind->pos,
                           "%sgive either 'kind' (a stage) or 'loop' with 'stages' (a loop), not "
                           "both",
                           where);
    if (loop && in_loop)
        return pl_error_at(w->err, PL_EINPUT, loop->pos,
                           "loop '%s' is inside the body of loop '%s'; a loop's body cannot hold "
                           "a loop: move '%s' before or after '%s', or merge the two bodies",
                           pl_clip(name->text, cb), in_loop, pl_clip(name->text, cb), in_loop);
    if (loop) return pl__walk_loop(w, m, name, loop);
    if (!kind) {
        PL_CHECK(pl__misspelled(w, m, where, "kind"));
        return pl_error_at(w->err, PL_EINPUT, name->pos,
                           "stage '%s' has no 'kind'; add kind: one of %s", pl_clip(name->text, cb),
                           pl_kind_list());
    }
    int n_kinds, kind_idx;
    const char *const *kinds = pl_kind_names(&n_kinds);
    PL_CHECK(pl__want_word(w, where, "kind", kind, kinds, n_kinds, &kind_idx));
    const pl_kind *kd = pl_kind_find(kinds[kind_idx]);
    if (!kd) return pl__oom(w); /* the table is inconsistent */

    pl_stage *st = pl_spec_add_stage(w->spec, name->text, name->pos);
    if (!st) return pl__oom(w);
    int si = st->index;
    st->kind = kd;
    st->kind_pos = kind->pos;
    static const char *const refkeys[] = {"reads", "writes", "after"};
    static const pl__add_ref_fn adds[] = {pl_stage_add_read, pl_stage_add_write,
                                          pl_stage_add_after};
    for (const pl_value *k = m->child; k && k->next; k = k->next->next) {
        int r = pl__index_of(k->text, refkeys, 3);
        if (r >= 0)
            PL_CHECK(pl__walk_refs(w, where, refkeys[r], k->next, si, adds[r]));
        else if (!m->unordered && k->next != name && k->next != kind)
            PL_CHECK(pl__walk_stage_key(w, where, m, k, si, kd));
    }
    if (!m->unordered) return PL_OK;
    /* Written order unknown (a Lua table): the kind's keys in table order (a function key where
     * its stand-in goes), then the other keys by name, so the spec is the same on every run. */
    for (const pl_key *d = kd->keys; d->name; d++) {
        if (d->type == PL_KEY_FUNC) continue;
        const pl_value *k = NULL;
        for (const pl_key *f = kd->keys; f->name && !k; f++) { /* a function standing in for d */
            size_t n = f->values ? strcspn(f->values, "|") : 0;
            if (f->type != PL_KEY_FUNC || n != strlen(d->name) || strncmp(f->values, d->name, n))
                continue;
            for (const pl_value *c = m->child; c && c->next && !k; c = c->next->next)
                if (strcmp(c->text, f->name) == 0) k = c;
        }
        for (const pl_value *c = m->child; c && c->next && !k; c = c->next->next)
            if (strcmp(c->text, d->name) == 0) k = c;
        if (k) PL_CHECK(pl__walk_stage_key(w, where, m, k, si, kd));
    }
    for (const pl_value *k = m->child; k && k->next; k = k->next->next)
        if (!pl_kind_key(kd, k->text)) PL_CHECK(pl__walk_stage_key(w, where, m, k, si, kd));
    return PL_OK;
}

/* ---- top level ---------------------------------------------------------------------------- */

/* A loop: {name, loop: {max, count, while, index}, stages: [...], after}. The loop stage, then
 * its body's stages right after it. */
static pl_status pl__walk_loop(pl_walk *w, const pl_value *m, const pl_value *name,
                               const pl_value *loop)
{
    char cb[72], what[32], lname[72];
    const int nk = (int)(sizeof pl__loop_stage_keys / sizeof *pl__loop_stage_keys);
    pl_clip(name->text, lname);
    snprintf(w->where, sizeof w->where, "loop '%s': ", lname);
    for (const pl_value *k = m->child; k && k->next; k = k->next->next) {
        if (pl__index_of(k->text, pl__loop_stage_keys, nk) >= 0) continue;
        if (strcmp(k->text, "reads") == 0 || strcmp(k->text, "writes") == 0)
            return pl_error_at(w->err, PL_EINPUT, k->pos,
                               "%sa loop has no '%s': what it reads and writes is its stages' "
                               "(give them to the stages under stages:)",
                               w->where, k->text);
        return pl__unknown_key(w, k, w->where, pl__loop_stage_keys, nk);
    }
    if (!pl__is_map(loop))
        return pl_error_at(w->err, PL_EINPUT, loop->pos,
                           "%s'loop' must be a mapping like {max: 16, while: active}, not %s",
                           w->where, pl_value_what(loop, what));
    const pl_value *keys[PL__MAX_WORDS], *vals[PL__MAX_WORDS];
    PL_CHECK(pl__match(w, &pl_schema_loop, loop, w->where, keys, vals));
    const pl_value *body = pl__map_get(m, "stages");
    pl_stage *st = pl_spec_add_stage(w->spec, name->text, name->pos);
    if (!st) return pl__oom(w);
    int si = st->index;
    st->kind = &pl_kind_loop_host; /* check picks the one that runs it */
    st->kind_pos = loop->pos;
    pl_loop *l = pl_stage_make_loop(w->spec, st, loop->pos);
    if (!l) return pl__oom(w);
    PL_CHECK(pl__take_section(w, &pl_schema_loop, loop, l, vals, false));
    if (!vals[pl__field_index(w, pl__loop_fields, "max")])
        return pl_error_at(w->err, PL_EINPUT, loop->pos,
                           "loop '%s' has no 'max'; add max: N, the most iterations a batch may "
                           "run (a loop always has a bound)",
                           lname);
    if (l->count > l->max)
        return pl_error_at(w->err, PL_EINPUT, l->count_pos,
                           "loop '%s': 'count' is %lld, more than 'max' (%lld); give a count from "
                           "1 to max, or raise max",
                           lname, (long long)l->count, (long long)l->max);
    for (const pl_value *k = m->child; k && k->next; k = k->next->next)
        if (strcmp(k->text, "after") == 0)
            PL_CHECK(pl__walk_refs(w, w->where, "after", k->next, si, pl_stage_add_after));
    if (!body)
        return pl_error_at(w->err, PL_EINPUT, name->pos,
                           "loop '%s' has no 'stages'; list the stages it repeats, like stages: "
                           "[{name: step, kind: kernel, op: add, reads: [x, y], writes: [x]}]",
                           lname);
    if (body->type != PL_VAL_LIST && !pl__is_map(body))
        return pl_error_at(w->err, PL_EINPUT, body->pos,
                           "%s'stages' must be a list of stages, each like '- {name: step, kind: "
                           "kernel, ...}', not %s",
                           w->where, pl_value_what(body, what));
    if (body->type != PL_VAL_LIST || body->n == 0)
        return pl_error_at(
            w->err, PL_EINPUT, body->pos,
            "loop '%s' has no stages; list the stages it repeats under stages:", lname);
    int i = 1;
    for (const pl_value *s = body->child; s; s = s->next, i++) {
        if (w->spec->n_stages >= PL_MAX_STAGES)
            return pl_error_at(
                w->err, PL_EINPUT, s->pos,
                "more than %d stages (PL_MAX_STAGES); split the pipeline into several",
                PL_MAX_STAGES);
        PL_CHECK(pl__walk_stage(w, s, i, lname));
        w->spec->stages[w->spec->n_stages - 1].parent = si;
        w->spec->stages[si].loop->n_body++;
    }
    (void)cb;
    return PL_OK;
}

static pl_status pl__take_name(pl_walk *w, const pl_field *f, const pl_value *v, void *obj)
{
    pl_spec *spec = obj;
    const char *key = pl__fname(w, f);
    PL_CHECK(pl__want_scalar(w, "", key, v, f->example));
    if (v->len == 0)
        return pl_error_at(w->err, PL_EINPUT, v->pos,
                           "'%s' is empty; write %s: %s, or remove the key to use the file's base "
                           "name",
                           key, key, f->example);
    spec->name = pl_spec_strdup(spec, v->text);
    return spec->name ? PL_OK : pl__oom(w);
}

static pl_status pl__take_run(pl_walk *w, const pl_field *f, const pl_value *v, void *obj)
{
    pl_spec *spec = obj;
    char what[32];
    const pl_value *keys[PL__MAX_WORDS], *vals[PL__MAX_WORDS];
    if (pl_value_is_null(v)) return PL_OK;
    if (!pl__is_map(v))
        return pl_error_at(w->err, PL_EINPUT, v->pos, "'%s' must be a mapping like %s, not %s",
                           f->key.name, f->example, pl_value_what(v, what));
    PL_CHECK(pl__match(w, &pl_schema_run, v, "run: ", keys, vals));
    return pl__take_section(w, &pl_schema_run, v, &spec->run, vals, false);
}

static pl_status pl__walk_buffer_item(pl_walk *w, const pl_value *k, const pl_value *v, int n)
{
    (void)n;
    return pl__walk_buffer(w, k, v);
}

static pl_status pl__walk_stage_item(pl_walk *w, const pl_value *m, const pl_value *unused, int n)
{
    (void)unused;
    return pl__walk_stage(w, m, n, NULL);
}

static pl_status pl__take_buffers(pl_walk *w, const pl_field *f, const pl_value *v, void *obj)
{
    char what[32];
    (void)f, (void)obj;
    if (pl_value_is_null(v)) return PL_OK;
    if (!pl__is_map(v))
        return pl_error_at(w->err, PL_EINPUT, v->pos,
                           "'buffers' must be a mapping of buffer names to properties, like "
                           "'x: {where: host, dtype: f32, shape: [1024]}' on the next line, not %s",
                           pl_value_what(v, what));
    /* Duplicate buffer names are left to pl_spec_check (one message for all front ends). */
    int n = 0;
    for (const pl_value *k = v->child; k && k->next; k = k->next->next) {
        if (++n > PL_MAX_BUFFERS)
            return pl_error_at(w->err, PL_EINPUT, k->pos,
                               "more than %d buffers (PL_MAX_BUFFERS); split the pipeline into "
                               "several",
                               PL_MAX_BUFFERS);
        PL_CHECK(pl__item(w, pl__walk_buffer_item, k, k->next, 0));
    }
    return PL_OK;
}

static pl_status pl__take_stages(pl_walk *w, const pl_field *f, const pl_value *v, void *obj)
{
    char what[32];
    (void)f, (void)obj;
    if (pl_value_is_null(v)) return PL_OK;
    if (v->type != PL_VAL_LIST)
        return pl_error_at(w->err, PL_EINPUT, v->pos,
                           "'stages' must be a list of stages, each on its own line like "
                           "'- {name: up, kind: h2d, from: x_host, to: x_dev}', not %s",
                           pl_value_what(v, what));
    int i = 1;
    for (const pl_value *s = v->child; s; s = s->next, i++) {
        if (i > PL_MAX_STAGES)
            return pl_error_at(
                w->err, PL_EINPUT, s->pos,
                "more than %d stages (PL_MAX_STAGES); split the pipeline into several",
                PL_MAX_STAGES);
        PL_CHECK(pl__item(w, pl__walk_stage_item, s, NULL, i));
    }
    return PL_OK;
}

static const pl_field pl__top_fields[] = {
    {.key = {"pipeline", PL_KEY_STR, NULL, "the file's base name",
             "the pipeline's name, used in reports, traces and bundles"},
     .lua_name = "name",
     .example = "my_pipeline",
     .take = pl__take_name},
    {.key = {"run", PL_KEY_MAP, NULL, "see below", "run options"},
     .example = "{batches: 16, depth: 3}",
     .take = pl__take_run},
    {.key = {"buffers", PL_KEY_MAP, NULL, "none",
             "the buffers (name -> properties), in declaration order"},
     .take = pl__take_buffers},
    {.key = {"stages", PL_KEY_LIST, NULL, NULL,
             "the stages; the order written breaks ties in the plan's order (required)"},
     .take = pl__take_stages},
    {.key = {NULL, 0, NULL, NULL, NULL}},
};

const pl_section pl_schema_top = {"top", "## Top level", "a pipectl pipeline file", pl__top_fields};

static pl_status pl__walk_root(pl_walk *w, const pl_value *root)
{
    char what[32], list[256];
    pl_pos start = {w->spec->file, 1, 1};
    if (!root || pl_value_is_null(root))
        return pl_error_at(w->err, PL_EINPUT, start,
                           "the file is empty; a pipeline needs at least 'stages:' (see "
                           "docs/pipeline-yaml.md)");
    if (!pl__is_map(root)) {
        size_t n = 0;
        list[0] = '\0';
        for (int i = 0; pl__top_fields[i].key.name && n < sizeof list; i++)
            n += (size_t)snprintf(list + n, sizeof list - n, "%s%s",
                                  i == 0                           ? ""
                                  : pl__top_fields[i + 1].key.name ? ", "
                                                                   : " and ",
                                  pl__fname(w, &pl__top_fields[i]));
        return pl_error_at(w->err, PL_EINPUT, root->pos,
                           "the document must be a mapping with the keys %s, not %s", list,
                           pl_value_what(root, what));
    }
    const pl_value *keys[PL__MAX_WORDS], *vals[PL__MAX_WORDS];
    PL_CHECK(pl__match(w, &pl_schema_top, root, "", keys, vals));
    int stages = pl__field_index(w, pl__top_fields, "stages");
    /* Stages last: a file without them is reported once the rest is known to be good. */
    vals[stages] = NULL;
    PL_CHECK(pl__take_section(w, &pl_schema_top, root, w->spec, vals, true));
    const pl_value *sv = pl__map_get(root, pl__fname(w, &pl__top_fields[stages]));
    if (!sv)
        return pl_error_at(w->err, PL_EINPUT, root->pos,
                           "the pipeline has no 'stages:'; add a list of stages, each like "
                           "'- {name: gen, kind: source, to: x_host}'");
    return pl__top_fields[stages].take(w, &pl__top_fields[stages], sv, w->spec);
}

pl_status pl_schema_build(pl_spec *spec, const pl_value *root, const pl_schema_src *src,
                          pl_error *err)
{
    pl_walk w = {.spec = spec, .err = err, .src = src, .failed = PL_OK};
    pl_status st = pl__walk_root(&w, root);
    if (w.failed == PL_OK) return st;
    /* A later error outside the buffers and stages joins the list; err keeps the first. */
    if (st != PL_OK) {
        pl_diags_add(src->diags, PL_SEV_ERROR, err);
        if (src->diags->n > 0 && err) *err = src->diags->items[0].err;
    }
    return w.failed;
}
