/* pl_stage: the table of stage kinds, typed option access and the generic option check. */
#include "pl_stage.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const pl_key pl_common_stage_keys[] = {
    {"name", PL_KEY_STR, NULL, NULL, "stage name, unique in the pipeline (required)"},
    {"kind", PL_KEY_STR, NULL, NULL, "the stage kind (required): pipectl help kinds lists them"},
    {"reads", PL_KEY_NAMES, NULL, "[]", "buffers the stage reads"},
    {"writes", PL_KEY_NAMES, NULL, "[]", "buffers the stage writes"},
    {"after", PL_KEY_NAMES, NULL, "[]",
     "stages that must finish first (ordering data does not show)"},
    {NULL, 0, NULL, NULL, NULL},
};

const char *pl_key_value_usage(const pl_key_value *v, char *buf, size_t cap)
{
    if (!v->reads || !v->writes)
        snprintf(buf, cap, "any reads/writes, untouched");
    else if (!*v->reads)
        snprintf(buf, cap, "writes: [%s]", v->writes);
    else if (!*v->writes)
        snprintf(buf, cap, "reads: [%s]", v->reads);
    else
        snprintf(buf, cap, "reads: [%s], writes: [%s]", v->reads, v->writes);
    return buf;
}

const char *pl_engine_name(pl_engine e)
{
    static const char *const names[PL_ENGINE_COUNT] = {"host", "h2d", "compute", "d2h"};
    return (unsigned)e < PL_ENGINE_COUNT ? names[e] : "?";
}

/* The table itself lives in pl_kinds.c, the one place that names every kind. */
extern const pl_kind *const pl_kind_table[];

const pl_kind *const *pl_kinds(int *n)
{
    int k = 0;
    while (pl_kind_table[k])
        k++;
    if (n) *n = k;
    return pl_kind_table;
}

const pl_kind *pl_kind_find(const char *name)
{
    for (int i = 0; name && pl_kind_table[i]; i++)
        if (strcmp(name, pl_kind_table[i]->name) == 0) return pl_kind_table[i];
    return NULL;
}

#define PL__MAX_KINDS 64

const char *const *pl_kind_names(int *n)
{
    /* Built once from the table; a benign race writes the same pointers. */
    static const char *names[PL__MAX_KINDS + 1];
    int k = 0;
    for (; pl_kind_table[k] && k < PL__MAX_KINDS; k++)
        names[k] = pl_kind_table[k]->name;
    *n = k;
    return names;
}

const char *pl_kind_list(void)
{
    static char list[PL__MAX_KINDS * (PL_MAX_NAME + 2)];
    if (!list[0]) {
        size_t n = 0;
        for (int k = 0; pl_kind_table[k] && n < sizeof list; k++)
            n += (size_t)snprintf(list + n, sizeof list - n, k ? ", %s" : "%s",
                                  pl_kind_table[k]->name);
    }
    return list;
}

const pl_key *pl_kind_key(const pl_kind *kind, const char *key)
{
    for (const pl_key *k = pl_common_stage_keys; k->name; k++)
        if (strcmp(k->name, key) == 0) return k;
    if (!kind) return NULL;
    for (const pl_key *k = kind->keys; k->name; k++)
        if (strcmp(k->name, key) == 0) return k;
    return NULL;
}

static bool pl__parse_int(const char *s, int64_t *out)
{
    if (!s || !*s) return false;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10); /* decimal, as run: and shape: */
    if (errno || *end) return false;
    *out = v;
    return true;
}

static bool pl__parse_num(const char *s, double *out)
{
    if (!s || !*s) return false;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno == ERANGE || *end || !isfinite(v)) return false;
    *out = v;
    return true;
}

static bool pl__parse_bool(const char *s, bool *out)
{
    if (strcmp(s, "true") == 0) return *out = true, true;
    if (strcmp(s, "false") == 0) return *out = false, true;
    return false;
}

/* Index of `s` in "a|b|c", or -1. */
static int pl__enum_index(const char *values, const char *s)
{
    size_t len = strlen(s);
    int idx = 0;
    for (const char *p = values; p && *p; idx++) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        if (n == len && strncmp(p, s, n) == 0) return idx;
        p = bar ? bar + 1 : NULL;
    }
    return -1;
}

/* "stage 'x': 'k' must be one of a|b|c, got 'v'", with a did-you-mean when one value is close. */
static pl_status pl__bad_enum(const pl_stage *st, const char *key, const char *values,
                              const char *got, pl_pos pos, pl_error *err)
{
    const char *cands[32];
    char words[32][PL_MAX_NAME];
    int n = 0;
    for (const char *p = values; p && *p && n < 32; n++) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len >= PL_MAX_NAME) len = PL_MAX_NAME - 1;
        memcpy(words[n], p, len);
        words[n][len] = '\0';
        cands[n] = words[n];
        p = bar ? bar + 1 : NULL;
    }
    const char *best = got ? pl_closest(got, cands, n) : NULL;
    if (best)
        return pl_error_at(err, PL_EINPUT, pos,
                           "stage '%s': '%s' must be one of %s, got '%s' (did you mean '%s'?)",
                           st->name, key, values, got, best);
    return pl_error_at(err, PL_EINPUT, pos, "stage '%s': '%s' must be one of %s, got '%s'",
                       st->name, key, values, got ? got : "a list");
}

pl_status pl_opt_get_int(const pl_stage *st, const char *key, int64_t def, int64_t min, int64_t max,
                         int64_t *out, pl_error *err)
{
    const pl_opt *o = pl_stage_opt(st, key);
    if (!o) {
        *out = def;
        return PL_OK;
    }
    int64_t v;
    if (!pl__parse_int(o->str, &v))
        return pl_error_at(err, PL_EINPUT, o->val_pos,
                           "stage '%s': '%s' must be an integer, got '%s'", st->name, key,
                           o->str ? o->str : "a list");
    if (v < min || v > max)
        return pl_error_at(err, PL_EINPUT, o->val_pos,
                           "stage '%s': '%s' is %lld; it must be between %lld and %lld", st->name,
                           key, (long long)v, (long long)min, (long long)max);
    *out = v;
    return PL_OK;
}

pl_status pl_opt_get_num(const pl_stage *st, const char *key, double def, double *out,
                         pl_error *err)
{
    const pl_opt *o = pl_stage_opt(st, key);
    if (!o) {
        *out = def;
        return PL_OK;
    }
    if (!pl__parse_num(o->str, out))
        return pl_error_at(err, PL_EINPUT, o->val_pos,
                           "stage '%s': '%s' must be a finite number, got '%s'", st->name, key,
                           o->str ? o->str : "a list");
    return PL_OK;
}

pl_status pl_opt_get_bool(const pl_stage *st, const char *key, bool def, bool *out, pl_error *err)
{
    const pl_opt *o = pl_stage_opt(st, key);
    if (!o) {
        *out = def;
        return PL_OK;
    }
    if (!o->str || !pl__parse_bool(o->str, out))
        return pl_error_at(err, PL_EINPUT, o->val_pos,
                           "stage '%s': '%s' must be true or false, got '%s'", st->name, key,
                           o->str ? o->str : "a list");
    return PL_OK;
}

pl_status pl_opt_get_enum(const pl_stage *st, const char *key, int def, int *out, pl_error *err)
{
    const pl_opt *o = pl_stage_opt(st, key);
    if (!o) {
        *out = def;
        return PL_OK;
    }
    const pl_key *k = pl_kind_key(st->kind, key);
    int idx = (k && o->str) ? pl__enum_index(k->values, o->str) : -1;
    if (idx < 0) return pl__bad_enum(st, key, k ? k->values : "?", o->str, o->val_pos, err);
    *out = idx;
    return PL_OK;
}

const char *pl_opt_get_str(const pl_stage *st, const char *key, const char *def)
{
    const pl_opt *o = pl_stage_opt(st, key);
    return o && o->str ? o->str : def;
}

static const char *pl__type_word(pl_key_type t)
{
    switch (t) {
    case PL_KEY_STR:
        return "a string";
    case PL_KEY_PATH:
        return "a file path";
    case PL_KEY_INT:
        return "an integer";
    case PL_KEY_NUM:
        return "a number";
    case PL_KEY_BOOL:
        return "true or false";
    case PL_KEY_ENUM:
        return "one word";
    case PL_KEY_NAME:
        return "a buffer name";
    case PL_KEY_NAMES:
        return "a list of names";
    case PL_KEY_INTS:
        return "a list of integers";
    case PL_KEY_INT_OR_INTS:
        return "an integer or a list of integers";
    case PL_KEY_SIZE:
        return "a size like 512MiB";
    case PL_KEY_FUNC:
        return "a Lua function";
    case PL_KEY_MAP:
        return "a mapping";
    case PL_KEY_LIST:
        return "a list";
    case PL_KEY_ITEMS:
        return "a list of values";
    }
    return "?";
}

pl_status pl_stage_check_opts(const pl_spec *spec, const pl_stage *st, pl_error *err)
{
    (void)spec;
    const pl_kind *kind = st->kind;
    for (int i = 0; i < st->n_opts; i++) {
        const pl_opt *o = &st->opts[i];
        /* Front ends store name, kind, reads, writes and after directly; opts hold the rest. */
        const pl_key *k = NULL;
        for (const pl_key *c = kind->keys; c->name && !k; c++)
            if (strcmp(c->name, o->key) == 0) k = c;
        if (!k) {
            const char *cands[64];
            int n = 0;
            for (const pl_key *c = pl_common_stage_keys; c->name && n < 64; c++)
                cands[n++] = c->name;
            for (const pl_key *c = kind->keys; c->name && n < 64; c++)
                cands[n++] = c->name;
            const char *best = pl_closest(o->key, cands, n);
            if (best)
                return pl_error_at(err, PL_EINPUT, o->pos,
                                   "unknown key '%s' in %s stage '%s' (did you mean '%s'?)", o->key,
                                   kind->name, st->name, best);
            return pl_error_at(err, PL_EINPUT, o->pos,
                               "unknown key '%s' in %s stage '%s'; 'pipectl help %s' lists its "
                               "keys",
                               o->key, kind->name, st->name, kind->name);
        }
        if (k->type == PL_KEY_FUNC)
            return pl_error_at(err, PL_EINPUT, o->pos,
                               "stage '%s': '%s' takes a Lua function, so it exists only in "
                               "pipeline.lua; in YAML give script: (or code:) and function:",
                               st->name, o->key);
        bool want_list = k->type == PL_KEY_NAMES || k->type == PL_KEY_INTS ||
                         k->type == PL_KEY_LIST || k->type == PL_KEY_ITEMS;
        if (k->type != PL_KEY_INT_OR_INTS && want_list != o->is_list)
            return pl_error_at(err, PL_EINPUT, o->val_pos, "stage '%s': '%s' must be %s, not %s",
                               st->name, o->key, pl__type_word(k->type),
                               o->is_list ? "a list" : "a single value");
        int64_t iv;
        double dv;
        bool bv;
        switch (k->type) {
        case PL_KEY_INT:
            if (!pl__parse_int(o->str, &iv))
                return pl_error_at(err, PL_EINPUT, o->val_pos,
                                   "stage '%s': '%s' must be an integer, got '%s'", st->name,
                                   o->key, o->str);
            break;
        case PL_KEY_NUM:
            if (!pl__parse_num(o->str, &dv))
                return pl_error_at(err, PL_EINPUT, o->val_pos,
                                   "stage '%s': '%s' must be a finite number, got '%s'", st->name,
                                   o->key, o->str);
            break;
        case PL_KEY_BOOL:
            if (!pl__parse_bool(o->str, &bv))
                return pl_error_at(err, PL_EINPUT, o->val_pos,
                                   "stage '%s': '%s' must be true or false, got '%s'", st->name,
                                   o->key, o->str);
            break;
        case PL_KEY_ENUM:
            if (pl__enum_index(k->values, o->str) < 0)
                return pl__bad_enum(st, o->key, k->values, o->str, o->val_pos, err);
            break;
        case PL_KEY_INTS:
            for (int j = 0; j < o->n_items; j++)
                if (!pl__parse_int(o->items[j], &iv))
                    return pl_error_at(err, PL_EINPUT, o->item_pos[j],
                                       "stage '%s': '%s' must be a list of integers, got '%s'",
                                       st->name, o->key, o->items[j]);
            break;
        case PL_KEY_INT_OR_INTS:
            if (!o->is_list && !pl__parse_int(o->str, &iv))
                return pl_error_at(err, PL_EINPUT, o->val_pos,
                                   "stage '%s': '%s' must be an integer or a list of integers "
                                   "like [1, 1, 2, 4], got '%s'",
                                   st->name, o->key, o->str);
            for (int j = 0; o->is_list && j < o->n_items; j++)
                if (!pl__parse_int(o->items[j], &iv))
                    return pl_error_at(err, PL_EINPUT, o->item_pos[j],
                                       "stage '%s': item %d of '%s' is '%s', not an integer; "
                                       "write an integer or a list of integers",
                                       st->name, j + 1, o->key, o->items[j]);
            break;
        case PL_KEY_SIZE: {
            uint64_t sz;
            if (!pl_bytes_parse(o->str, &sz))
                return pl_error_at(err, PL_EINPUT, o->val_pos,
                                   "stage '%s': '%s' must be a size like 4096, 512MiB or 8GiB, got "
                                   "'%s'",
                                   st->name, o->key, o->str);
            break;
        }
        case PL_KEY_STR:
        case PL_KEY_PATH:
        case PL_KEY_NAME:
            if (!*o->str)
                return pl_error_at(err, PL_EINPUT, o->val_pos, "stage '%s': '%s' is empty",
                                   st->name, o->key);
            break;
        case PL_KEY_NAMES:
        case PL_KEY_FUNC:
        case PL_KEY_MAP:
        case PL_KEY_LIST:
        case PL_KEY_ITEMS:
            break;
        }
        for (int j = 0; k->type != PL_KEY_ITEMS && o->item_tags && j < o->n_items; j++)
            if (o->item_tags[j])
                return pl_error_at(err, PL_EINPUT, o->item_pos[j],
                                   "stage '%s': each item of '%s' must be a single value, not a "
                                   "mapping",
                                   st->name, o->key);
        for (int j = 0; j < i; j++)
            if (strcmp(st->opts[j].key, o->key) == 0)
                return pl_error_at(err, PL_EINPUT, o->pos,
                                   "duplicate key '%s' in stage '%s' (first at line %d)", o->key,
                                   st->name, st->opts[j].pos.line);
    }
    return PL_OK;
}
