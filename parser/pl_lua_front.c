/* pl_lua_front: the Lua front end. Runs a pipeline script in a sandboxed state (lua/pl_lua.h) and
 * fills the spec from what it returns, through the same builders and with the same checks as the
 * YAML front end, so both give identical specs. Positions: the script's name, the line of the
 * call that declared the element, column 1. */
#include "pl_parse.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "pl_lua.h"
#include "pl_stage.h"

typedef struct pl__front {
    pl_spec *spec;
    pl_error *err;
    pl_status st;
    const char *text;
    size_t len;
    char chunk[PATH_MAX + 2]; /* "@" + name */
    const char *base;         /* the script's file name without directories (for `fn` stages) */
} pl__front;

static pl_pos pl__pos(const pl__front *f, int line)
{
    pl_pos p = {f->spec->file, line > 0 ? line : 1, 1};
    return p;
}

static pl_status pl__fail(pl__front *f, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static pl_status pl__fail(pl__front *f, int line, const char *fmt, ...)
{
    char msg[PL_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return pl_error_at(f->err, PL_EINPUT, pl__pos(f, line), "%s", msg);
}

static pl_status pl__oom(pl__front *f)
{
    return pl_error_set(f->err, PL_ENOMEM, "error: out of memory building the spec of '%s'",
                        f->spec->file);
}

static int pl__index_of(const char *s, const char *const *words, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(s, words[i]) == 0) return i;
    return -1;
}

static void pl__join(char *out, size_t cap, const char *const *words, int n)
{
    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        strncat(out, words[i], cap - strlen(out) - 1);
        if (i + 1 < n) strncat(out, ", ", cap - strlen(out) - 1);
    }
}

/* Number of entries of the table at idx (all keys). */
static lua_Integer pl__count(lua_State *L, int idx)
{
    idx = lua_absindex(L, idx);
    lua_Integer n = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        n++;
        lua_pop(L, 1);
    }
    return n;
}

/* A table used as an array: keys exactly 1..#t. */
static bool pl__is_array(lua_State *L, int idx)
{
    return lua_type(L, idx) == LUA_TTABLE && pl__count(L, idx) == (lua_Integer)lua_rawlen(L, idx);
}

/* Reports the first (by name, so the report is stable) key of the table at idx that is not in
 * `keys`; non-string keys are reported first. */
static pl_status pl__check_keys(pl__front *f, lua_State *L, int idx, const char *where,
                                const char *const *keys, int n, int line)
{
    idx = lua_absindex(L, idx);
    char bad[128] = "";
    bool have_bad = false;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TSTRING) {
            lua_pop(L, 1);
            return pl__fail(f, line,
                            "%san unnamed value (array element) where only named keys belong; "
                            "write key = value (the keys here are: %s)",
                            where, keys[0]);
        }
        const char *k = lua_tostring(L, -1);
        if (pl__index_of(k, keys, n) < 0 && (!have_bad || strcmp(k, bad) < 0)) {
            snprintf(bad, sizeof bad, "%s", k);
            have_bad = true;
        }
    }
    if (!have_bad) return PL_OK;
    const char *best = pl_closest(bad, keys, n);
    if (best) return pl__fail(f, line, "%sunknown key '%s' (did you mean '%s'?)", where, bad, best);
    char list[256];
    pl__join(list, sizeof list, keys, n);
    return pl__fail(f, line, "%sunknown key '%s'; the keys here are: %s", where, bad, list);
}

/* Whole number in [min, max] at idx. */
static pl_status pl__want_int(pl__front *f, lua_State *L, int idx, const char *where,
                              const char *key, int64_t min, int64_t max, int line, int64_t *out)
{
    int ok = 0;
    lua_Integer v = lua_type(L, idx) == LUA_TNUMBER ? lua_tointegerx(L, idx, &ok) : 0;
    if (!ok) {
        if (lua_type(L, idx) == LUA_TNUMBER)
            return pl__fail(f, line, "%s'%s' must be a whole number, got %s", where, key,
                            lua_tostring(L, idx));
        return pl__fail(f, line, "%s'%s' must be a whole number, not a %s", where, key,
                        luaL_typename(L, idx));
    }
    if (v < min || v > max)
        return pl__fail(f, line, "%s'%s' is %lld; it must be between %lld and %lld", where, key,
                        (long long)v, (long long)min, (long long)max);
    *out = v;
    return PL_OK;
}

/* One of `words` at idx. */
static pl_status pl__want_word(pl__front *f, lua_State *L, int idx, const char *where,
                               const char *key, const char *const *words, int n, int line, int *out)
{
    char list[256];
    pl__join(list, sizeof list, words, n);
    if (lua_type(L, idx) != LUA_TSTRING)
        return pl__fail(f, line, "%s'%s' must be one of: %s (a string), not a %s", where, key, list,
                        luaL_typename(L, idx));
    const char *s = lua_tostring(L, idx);
    *out = pl__index_of(s, words, n);
    if (*out >= 0) return PL_OK;
    const char *best = pl_closest(s, words, n);
    if (best)
        return pl__fail(f, line, "%s'%s' is '%.64s' (did you mean '%s'?); it must be one of: %s",
                        where, key, s, best, list);
    return pl__fail(f, line, "%s'%s' is '%.64s'; it must be one of: %s", where, key, s, list);
}

/* Option text as the YAML front end would store it: integers "%lld", floats the shortest of
 * "%.15g".."%.17g" that reads back exactly (so 0.1 stays "0.1"), booleans true/false. NULL when
 * the value is not a scalar. */
static const char *pl__scalar_text(lua_State *L, int idx, char *buf, size_t cap)
{
    switch (lua_type(L, idx)) {
    case LUA_TSTRING:
        return lua_tostring(L, idx);
    case LUA_TBOOLEAN:
        return lua_toboolean(L, idx) ? "true" : "false";
    case LUA_TNUMBER:
        if (lua_isinteger(L, idx)) {
            snprintf(buf, cap, "%lld", (long long)lua_tointeger(L, idx));
        } else {
            double d = lua_tonumber(L, idx);
            for (int prec = 15; prec <= 17; prec++) {
                snprintf(buf, cap, "%.*g", prec, d);
                if (strtod(buf, NULL) == d) break;
            }
        }
        return buf;
    default:
        return NULL;
    }
}

/* ---- run ---- */

static pl_status pl__run(pl__front *f, lua_State *L, int idx, int line)
{
    static const char *const keys[] = {"batches", "depth", "device", "seed"};
    const char *where = "run: ";
    if (lua_type(L, idx) != LUA_TTABLE)
        return pl__fail(f, line, "'run' must be a table like {batches = 16, depth = 3}, not a %s",
                        luaL_typename(L, idx));
    PL_CHECK(pl__check_keys(f, L, idx, where, keys, 4, line));
    pl_run_opts *r = &f->spec->run;
    pl_pos pos = pl__pos(f, line);
    int64_t v;
    if (lua_getfield(L, idx, "batches") != LUA_TNIL) {
        PL_CHECK(pl__want_int(f, L, -1, where, "batches", 1, PL_MAX_BATCHES, line, &v));
        r->batches = v;
        r->batches_pos = pos;
    }
    lua_pop(L, 1);
    if (lua_getfield(L, idx, "depth") != LUA_TNIL) {
        PL_CHECK(pl__want_int(f, L, -1, where, "depth", 1, PL_MAX_DEPTH, line, &v));
        r->depth = (int)v;
        r->depth_pos = pos;
    }
    lua_pop(L, 1);
    if (lua_getfield(L, idx, "device") != LUA_TNIL) {
        PL_CHECK(pl__want_int(f, L, -1, where, "device", 0, INT_MAX, line, &v));
        r->device = (int)v;
        r->device_pos = pos;
    }
    lua_pop(L, 1);
    if (lua_getfield(L, idx, "seed") != LUA_TNIL) {
        /* Lua integers stop at 2^63-1; larger seeds can be written as a decimal string. */
        if (lua_type(L, -1) == LUA_TSTRING) {
            const char *s = lua_tostring(L, -1);
            char *end;
            errno = 0;
            unsigned long long u = strtoull(s, &end, 10);
            if (errno || !*s || *end || *s == '-')
                return pl__fail(f, line,
                                "run: 'seed' must be a whole number from 0 to "
                                "18446744073709551615, got '%.64s'",
                                s);
            r->seed = u;
        } else {
            PL_CHECK(pl__want_int(f, L, -1, where, "seed", 0, INT64_MAX, line, &v));
            r->seed = (uint64_t)v;
        }
        r->seed_pos = pos;
    }
    lua_pop(L, 1);
    return PL_OK;
}

/* ---- buffers ---- */

static pl_status pl__shape(pl__front *f, lua_State *L, int idx, const char *where, int line,
                           pl_buffer *b)
{
    if (lua_type(L, idx) == LUA_TNUMBER) { /* shape = 1024: one dimension */
        int64_t d;
        PL_CHECK(pl__want_int(f, L, idx, where, "shape", 1, INT64_MAX, line, &d));
        b->rank = 1;
        b->shape[0] = d;
        b->shape_pos = pl__pos(f, line);
        return PL_OK;
    }
    if (!pl__is_array(L, idx))
        return pl__fail(f, line,
                        "%s'shape' must be a list of positive integers like {1024} or {64, 256}, "
                        "not a %s",
                        where, luaL_typename(L, idx));
    lua_Integer n = (lua_Integer)lua_rawlen(L, idx);
    if (n == 0)
        return pl__fail(f, line, "%s'shape' is empty; give at least one dimension, like {1024}",
                        where);
    if (n > PL_MAX_RANK)
        return pl__fail(f, line,
                        "%s'shape' has %lld dimensions; at most %d (PL_MAX_RANK) are allowed: "
                        "merge some of them",
                        where, (long long)n, PL_MAX_RANK);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, idx, i);
        int ok = 0;
        lua_Integer d = lua_type(L, -1) == LUA_TNUMBER ? lua_tointegerx(L, -1, &ok) : 0;
        if (!ok || d < 1) {
            char cb[64];
            const char *t = pl__scalar_text(L, -1, cb, sizeof cb);
            return pl__fail(
                f, line, "%sshape dimension %lld must be a positive integer, got %s%.64s%s", where,
                (long long)i, t ? "'" : "a ", t ? t : luaL_typename(L, -1), t ? "'" : "");
        }
        b->shape[i - 1] = d;
        lua_pop(L, 1);
    }
    b->rank = (int)n;
    b->shape_pos = pl__pos(f, line);
    return PL_OK;
}

static pl_status pl__check_size(pl__front *f, const char *where, int line, const pl_buffer *b)
{
    uint64_t count = 1, esize = pl_dtype_size(b->dtype);
    for (int d = 0; d < b->rank; d++) {
        uint64_t dim = (uint64_t)b->shape[d];
        if (count > (uint64_t)INT64_MAX / dim)
            return pl__fail(f, line,
                            "%sthe shape has more than 2^63-1 elements; a buffer holds at most "
                            "%llu bytes (PL_MAX_BUFFER_BYTES): make it smaller",
                            where, (unsigned long long)PL_MAX_BUFFER_BYTES);
        count *= dim;
    }
    if (count > PL_MAX_BUFFER_BYTES / esize)
        return pl__fail(f, line,
                        "%s%llu elements of %s is more than %llu bytes (64 GiB, "
                        "PL_MAX_BUFFER_BYTES) per buffer: make the shape smaller",
                        where, (unsigned long long)count, pl_dtype_name(b->dtype),
                        (unsigned long long)PL_MAX_BUFFER_BYTES);
    return PL_OK;
}

/* The buffer `name` with properties in the table at idx (which may also hold name = ...). */
static pl_status pl__buffer(pl__front *f, lua_State *L, const char *name, int idx, int line)
{
    static const char *const keys[] = {"name",       "where", "dtype", "shape",
                                       "persistent", "init",  "file"};
    static const char *const wheres[] = {"host", "device"};
    static const char *const inits[] = {"zeros", "random", "file"};
    idx = lua_absindex(L, idx);
    char where[128];
    snprintf(where, sizeof where, "buffer '%.64s': ", name);
    if (!*name) return pl__fail(f, line, "a buffer name must not be empty");
    PL_CHECK(pl__check_keys(f, L, idx, where, keys, 7, line));
    pl_buffer *b = pl_spec_add_buffer(f->spec, name, pl__pos(f, line));
    if (!b) return pl__oom(f);
    pl_pos pos = pl__pos(f, line);
    const char *dtypes[PL_DTYPE_COUNT];
    for (int i = 0; i < PL_DTYPE_COUNT; i++)
        dtypes[i] = pl_dtype_name((pl_dtype)i);
    int w = 0;
    if (lua_getfield(L, idx, "where") != LUA_TNIL) {
        PL_CHECK(pl__want_word(f, L, -1, where, "where", wheres, 2, line, &w));
        b->where = w ? PL_DEVICE : PL_HOST;
        b->where_pos = pos;
    }
    lua_pop(L, 1);
    if (lua_getfield(L, idx, "dtype") != LUA_TNIL) {
        PL_CHECK(pl__want_word(f, L, -1, where, "dtype", dtypes, PL_DTYPE_COUNT, line, &w));
        b->dtype = (pl_dtype)w;
        b->dtype_pos = pos;
    }
    lua_pop(L, 1);
    if (lua_getfield(L, idx, "shape") != LUA_TNIL) PL_CHECK(pl__shape(f, L, -1, where, line, b));
    lua_pop(L, 1);
    if (lua_getfield(L, idx, "persistent") != LUA_TNIL) {
        if (lua_type(L, -1) != LUA_TBOOLEAN)
            return pl__fail(f, line, "%s'persistent' must be true or false, not a %s", where,
                            luaL_typename(L, -1));
        b->persistent = lua_toboolean(L, -1);
        b->persistent_pos = pos;
    }
    lua_pop(L, 1);
    bool has_init = false, has_file = false;
    if (lua_getfield(L, idx, "init") != LUA_TNIL) {
        PL_CHECK(pl__want_word(f, L, -1, where, "init", inits, 3, line, &w));
        b->init = w == 0 ? PL_INIT_ZEROS : w == 1 ? PL_INIT_RANDOM : PL_INIT_FILE;
        b->init_pos = pos;
        has_init = true;
    }
    lua_pop(L, 1);
    if (lua_getfield(L, idx, "file") != LUA_TNIL) {
        if (lua_type(L, -1) != LUA_TSTRING || !*lua_tostring(L, -1))
            return pl__fail(f, line, "%s'file' must be a file path like 'data.npy'", where);
        b->init_file = pl_spec_strdup(f->spec, lua_tostring(L, -1));
        if (!b->init_file) return pl__oom(f);
        has_file = true;
    }
    lua_pop(L, 1);
    if (b->rank == 0)
        return pl__fail(f, line, "%sno 'shape'; add shape = {N} (a list of positive integers)",
                        where);
    if (has_init && b->init == PL_INIT_FILE && !b->init_file)
        return pl__fail(f, line, "%sinit = 'file' needs file = 'PATH' (raw or .npy)", where);
    if (has_file && b->init != PL_INIT_FILE)
        return pl__fail(f, line,
                        "%s'file' is only used with init = 'file'; add init = 'file' or remove "
                        "'file'",
                        where);
    return pl__check_size(f, where, line, b);
}

/* ---- stages ---- */

typedef pl_ref *(*pl__add_ref_fn)(pl_spec *, pl_stage *, const char *, pl_pos);

/* reads / writes / after: a list of names (a single string is a list of one). */
static pl_status pl__refs(pl__front *f, lua_State *L, int idx, const char *where, const char *key,
                          int line, pl_stage **st, int si, pl__add_ref_fn add)
{
    pl_pos pos = pl__pos(f, line);
    if (lua_type(L, idx) == LUA_TSTRING) {
        *st = &f->spec->stages[si];
        if (!add(f->spec, *st, lua_tostring(L, idx), pos)) return pl__oom(f);
        return PL_OK;
    }
    if (!pl__is_array(L, idx))
        return pl__fail(f, line, "%s'%s' must be a list of names like {'a', 'b'}, not a %s", where,
                        key, luaL_typename(L, idx));
    lua_Integer n = (lua_Integer)lua_rawlen(L, idx);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, idx, i);
        if (lua_type(L, -1) != LUA_TSTRING || !*lua_tostring(L, -1))
            return pl__fail(f, line, "%seach item of '%s' must be a name, not %s", where, key,
                            lua_type(L, -1) == LUA_TSTRING ? "an empty string"
                                                           : luaL_typename(L, -1));
        *st = &f->spec->stages[si];
        if (!add(f->spec, *st, lua_tostring(L, -1), pos)) return pl__oom(f);
        lua_pop(L, 1);
    }
    return PL_OK;
}

/* A stage option: a scalar or a list of scalars, stored as text. */
static pl_status pl__opt(pl__front *f, lua_State *L, int idx, const char *where, const char *key,
                         int line, int si)
{
    char buf[64];
    pl_pos pos = pl__pos(f, line);
    int t = lua_type(L, idx);
    if (t == LUA_TFUNCTION)
        return pl__fail(f, line, "%s'%s' is a function; only `fn` of a lua stage takes a function",
                        where, key);
    if (t != LUA_TTABLE && !pl__scalar_text(L, idx, buf, sizeof buf))
        return pl__fail(f, line, "%s'%s' must be a string, number, boolean or list, not a %s",
                        where, key, luaL_typename(L, idx));
    if (t == LUA_TTABLE && !pl__is_array(L, idx))
        return pl__fail(f, line,
                        "%s'%s' is a table with named keys; stage options are single values or "
                        "lists of values like {1, 2}",
                        where, key);
    pl_opt *o = pl_stage_add_opt(f->spec, &f->spec->stages[si], key, pos);
    if (!o) return pl__oom(f);
    o->val_pos = pos;
    if (t != LUA_TTABLE) {
        o->str = pl_spec_strdup(f->spec, pl__scalar_text(L, idx, buf, sizeof buf));
        return o->str ? PL_OK : pl__oom(f);
    }
    o->is_list = true;
    lua_Integer n = (lua_Integer)lua_rawlen(L, idx);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, idx, i);
        const char *s = pl__scalar_text(L, -1, buf, sizeof buf);
        /* A one-key table item ({f32 = 1.5}: a user kernel's typed argument) is kept as the text
         * "f32:1.5", as the YAML front end keeps {f32: 1.5}. */
        char pair[128];
        if (!s && lua_type(L, -1) == LUA_TTABLE) {
            lua_pushnil(L);
            if (lua_next(L, -2)) {
                char vb[64];
                const char *v = pl__scalar_text(L, -1, vb, sizeof vb);
                bool one = lua_type(L, -2) == LUA_TSTRING && v;
                if (one) snprintf(pair, sizeof pair, "%s:%s", lua_tostring(L, -2), v);
                lua_pop(L, 1);
                if (lua_next(L, -2)) {
                    lua_pop(L, 2); /* a second key: not a typed argument */
                    one = false;
                }
                if (one) s = pair;
            }
        }
        if (!s)
            return pl__fail(f, line, "%seach item of '%s' must be a single value, not a %s", where,
                            key, luaL_typename(L, -1));
        if (pl_opt_add_item(f->spec, o, s, pos) != PL_OK) return pl__oom(f);
        lua_pop(L, 1);
    }
    return PL_OK;
}

static int pl__cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static pl_status pl__stage(pl__front *f, lua_State *L, int idx, int number, int line)
{
    static const char *const common[] = {"name", "kind", "reads", "writes", "after"};
    idx = lua_absindex(L, idx);
    char where[128];
    snprintf(where, sizeof where, "stage %d: ", number);
    if (lua_type(L, idx) != LUA_TTABLE)
        return pl__fail(f, line,
                        "each stage must be a table like {name = 'up', kind = 'h2d', from = 'x', "
                        "to = 'y'}, not a %s",
                        luaL_typename(L, idx));
    if (lua_getfield(L, idx, "name") != LUA_TSTRING || !*lua_tostring(L, -1))
        return pl__fail(f, line, "stage %d has no 'name'; add name = '<a unique stage name>'",
                        number);
    const char *name = lua_tostring(L, -1); /* kept on the stack while used */
    snprintf(where, sizeof where, "stage '%.64s': ", name);
    int n_kinds;
    const char *const *kinds = pl_kind_names(&n_kinds);
    if (lua_getfield(L, idx, "kind") == LUA_TNIL)
        return pl__fail(f, line, "stage '%.64s' has no 'kind'; add kind = one of %s", name,
                        pl_kind_list());
    int kind_idx;
    PL_CHECK(pl__want_word(f, L, -1, where, "kind", kinds, n_kinds, line, &kind_idx));
    lua_pop(L, 1);
    const pl_kind *kind = pl_kind_find(kinds[kind_idx]);
    if (!kind) return pl__oom(f);

    pl_stage *st = pl_spec_add_stage(f->spec, name, pl__pos(f, line));
    if (!st) return pl__oom(f);
    int si = st->index;
    st->kind = kind;
    st->kind_pos = pl__pos(f, line);

    static const char *const refkeys[] = {"reads", "writes", "after"};
    pl__add_ref_fn adds[] = {pl_stage_add_read, pl_stage_add_write, pl_stage_add_after};
    for (int r = 0; r < 3; r++) {
        if (lua_getfield(L, idx, refkeys[r]) != LUA_TNIL)
            PL_CHECK(pl__refs(f, L, -1, where, refkeys[r], line, &st, si, adds[r]));
        lua_pop(L, 1);
    }

    /* fn: the stage's function, found again in each worker state (stages/lua.c). */
    bool has_fn = lua_getfield(L, idx, "fn") != LUA_TNIL;
    if (has_fn) {
        const pl_key *fk = pl_kind_key(kind, "fn");
        if (!fk || fk->type != PL_KEY_FUNC)
            return pl__fail(f, line, "%s'fn' is only for lua stages (this one is %s)", where,
                            kind->name);
        if (lua_type(L, -1) != LUA_TFUNCTION)
            return pl__fail(f, line, "%s'fn' must be a function(batch, opts, bufs), not a %s",
                            where, luaL_typename(L, -1));
        lua_getfield(L, idx, "script");
        lua_getfield(L, idx, "code");
        bool other = !lua_isnil(L, -1) || !lua_isnil(L, -2);
        lua_pop(L, 2);
        if (other)
            return pl__fail(f, line, "%sgive either 'fn' or 'script'/'code', not both", where);
    }
    lua_pop(L, 1);

    /* Kind keys in the kind's table order (Lua tables have no written order), then the rest
     * sorted by name, so the spec is the same on every run. */
    for (const pl_key *k = kind->keys; k->name; k++) {
        if (k->type == PL_KEY_FUNC) continue; /* handled above */
        if (has_fn && strcmp(k->name, "script") == 0) {
            pl_opt *o = pl_stage_add_opt(f->spec, &f->spec->stages[si], "script", pl__pos(f, line));
            if (!o) return pl__oom(f);
            o->val_pos = pl__pos(f, line);
            o->str = pl_spec_strdup(f->spec, f->base);
            if (!o->str) return pl__oom(f);
            continue;
        }
        if (lua_getfield(L, idx, k->name) != LUA_TNIL)
            PL_CHECK(pl__opt(f, L, lua_gettop(L), where, k->name, line, si));
        lua_pop(L, 1);
    }
    const char *extra[64];
    int n_extra = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TSTRING) {
            lua_pop(L, 1);
            return pl__fail(f, line,
                            "%san unnamed value (array element) in a stage table; write key = "
                            "value",
                            where);
        }
        const char *k = lua_tostring(L, -1);
        if (pl__index_of(k, common, 5) >= 0 || strcmp(k, "fn") == 0 || pl_kind_key(kind, k) != NULL)
            continue;
        if (n_extra == 64) continue; /* the first 64 are plenty to report */
        extra[n_extra] = pl_spec_strdup(f->spec, k);
        if (!extra[n_extra++]) return pl__oom(f);
    }
    qsort(extra, (size_t)n_extra, sizeof extra[0], pl__cmp_str);
    for (int i = 0; i < n_extra; i++) { /* pl_stage_check_opts reports them, with "did you mean" */
        lua_getfield(L, idx, extra[i]);
        PL_CHECK(pl__opt(f, L, lua_gettop(L), where, extra[i], line, si));
        lua_pop(L, 1);
    }
    lua_pop(L, 1); /* name */
    return PL_OK;
}

/* ---- the returned pipeline ---- */

/* The line of a declarative element: its pipectl.buffer/stage mark, else `line`. */
static int pl__elem_line(lua_State *L, int idx, int line)
{
    int m = lua_type(L, idx) == LUA_TTABLE ? pl_lua_marked_line(L, idx) : 0;
    return m > 0 ? m : line;
}

static pl_status pl__decl_list(pl__front *f, lua_State *L, int decl, const char *key, int line,
                               bool buffers)
{
    if (lua_getfield(L, decl, key) == LUA_TNIL) {
        lua_pop(L, 1);
        return PL_OK;
    }
    int t = lua_gettop(L);
    if (!pl__is_array(L, t)) {
        if (lua_type(L, t) == LUA_TTABLE)
            return pl__fail(f, line,
                            "'%s' must be an array like {{name = 'x', ...}, {name = 'y', ...}}: "
                            "Lua tables do not keep the order of named keys, and the order "
                            "matters",
                            key);
        return pl__fail(f, line, "'%s' must be an array of tables, not a %s", key,
                        luaL_typename(L, t));
    }
    lua_Integer n = (lua_Integer)lua_rawlen(L, t);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, t, i);
        int el = lua_gettop(L);
        int eline = pl__elem_line(L, el, line);
        if (buffers) {
            if (lua_type(L, el) != LUA_TTABLE)
                return pl__fail(f, eline,
                                "buffer %lld must be a table like {name = 'x', where = 'host', "
                                "dtype = 'f32', shape = {1024}}, not a %s",
                                (long long)i, luaL_typename(L, el));
            if (lua_getfield(L, el, "name") != LUA_TSTRING)
                return pl__fail(f, eline, "buffer %lld has no 'name'; add name = 'x'",
                                (long long)i);
            PL_CHECK(pl__buffer(f, L, lua_tostring(L, -1), el, eline));
            lua_pop(L, 1);
        } else {
            PL_CHECK(pl__stage(f, L, el, f->spec->n_stages + 1, eline));
        }
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return PL_OK;
}

static pl_status pl__convert(pl__front *f, lua_State *L, int ret)
{
    static const char *const keys[] = {"name", "run", "buffers", "stages"};
    int decl, items = 0, line;
    if (lua_type(L, ret) == LUA_TTABLE && pl_lua_is_pipeline(L, ret)) {
        lua_getfield(L, ret, "_decl");
        decl = lua_gettop(L);
        lua_getfield(L, ret, "_line");
        line = lua_isinteger(L, -1) ? (int)lua_tointeger(L, -1) : 1;
        lua_getfield(L, ret, "_items");
        items = lua_gettop(L);
        if (lua_type(L, decl) != LUA_TTABLE || lua_type(L, items) != LUA_TTABLE)
            return pl__fail(f, line, "the pipeline object was modified (_decl/_items)");
    } else if (lua_type(L, ret) == LUA_TTABLE) {
        decl = ret;
        line = pl__elem_line(L, ret, 1); /* a bare table has no lines of its own */
    } else {
        return pl_error_set(f->err, PL_EINPUT,
                            "%s: error: the script must return its pipeline: end it with `return "
                            "p` (p = pipectl.pipeline{...}), or return a table {buffers = {...}, "
                            "stages = {...}}; it returned %s",
                            f->spec->file, luaL_typename(L, ret));
    }
    PL_CHECK(pl__check_keys(f, L, decl, "", keys, 4, line));
    if (lua_getfield(L, decl, "name") != LUA_TNIL) {
        if (lua_type(L, -1) != LUA_TSTRING || !*lua_tostring(L, -1))
            return pl__fail(f, line, "'name' must be a non-empty string, not a %s",
                            luaL_typename(L, -1));
        f->spec->name = pl_spec_strdup(f->spec, lua_tostring(L, -1));
        if (!f->spec->name) return pl__oom(f);
    }
    lua_pop(L, 1);
    if (lua_getfield(L, decl, "run") != LUA_TNIL) PL_CHECK(pl__run(f, L, lua_gettop(L), line));
    lua_pop(L, 1);
    PL_CHECK(pl__decl_list(f, L, decl, "buffers", line, true));
    PL_CHECK(pl__decl_list(f, L, decl, "stages", line, false));
    if (items) {
        lua_Integer n = (lua_Integer)lua_rawlen(L, items);
        for (lua_Integer i = 1; i <= n; i++) {
            lua_rawgeti(L, items, i);
            int it = lua_gettop(L);
            lua_getfield(L, it, "line");
            int iline = lua_isinteger(L, -1) ? (int)lua_tointeger(L, -1) : line;
            lua_getfield(L, it, "what");
            bool is_buffer =
                lua_type(L, -1) == LUA_TSTRING && strcmp(lua_tostring(L, -1), "buffer") == 0;
            lua_getfield(L, it, "t");
            int t = lua_gettop(L);
            if (is_buffer) {
                lua_getfield(L, it, "name");
                if (lua_type(L, -1) != LUA_TSTRING)
                    return pl__fail(f, iline, "p:buffer needs a name");
                const char *bname = lua_tostring(L, -1);
                if (lua_type(L, t) != LUA_TTABLE)
                    return pl__fail(f, iline, "buffer '%.64s': properties must be a table", bname);
                PL_CHECK(pl__buffer(f, L, bname, t, iline));
            } else {
                PL_CHECK(pl__stage(f, L, t, f->spec->n_stages + 1, iline));
            }
            lua_settop(L, it - 1);
        }
    }
    if (f->spec->n_stages == 0)
        return pl__fail(f, line,
                        "the pipeline has no stages; add some with p:stage{name = 'gen', kind = "
                        "'source', to = 'x_host'}");
    if (f->spec->n_stages > PL_MAX_STAGES || f->spec->n_buffers > PL_MAX_BUFFERS)
        return pl__fail(f, line, "the pipeline has more than %d stages or buffers", PL_MAX_STAGES);
    return PL_OK;
}

static int pl__front_run(lua_State *L)
{
    pl__front *f = lua_touserdata(L, 1);
    luaL_checkstack(L, 40, "the pipeline script");
    pl_lua_load_text(L, f->text, f->len, f->chunk);
    lua_call(L, 0, 1);
    f->st = pl__convert(f, L, lua_gettop(L));
    return 0;
}

/* Limits from the environment (documented in docs/lua.md). */
static pl_status pl__env_limit(const char *var, int64_t def, int64_t min, int64_t *out,
                               pl_error *err)
{
    const char *s = getenv(var);
    *out = def;
    if (!s || !*s) return PL_OK;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < min)
        return pl_error_set(err, PL_EINPUT, "error: %s='%s': give a whole number >= %lld", var, s,
                            (long long)min);
    *out = v;
    return PL_OK;
}

/* "name:12: message" (Lua's form) -> "name:12:1: error: message". */
static pl_status pl__lua_error(pl__front *f, const char *msg)
{
    char id[LUA_IDSIZE];
    pl_lua_chunkid(id, sizeof id, f->chunk);
    size_t n = strlen(id);
    if (strncmp(msg, id, n) == 0 && msg[n] == ':') {
        char *end;
        long line = strtol(msg + n + 1, &end, 10);
        if (end != msg + n + 1 && *end == ':' && line > 0 && line < INT_MAX) {
            const char *rest = end + 1;
            while (*rest == ' ')
                rest++;
            return pl__fail(f, (int)line, "%s", rest);
        }
    }
    return pl_error_set(f->err, PL_EINPUT, "%s: error: %s", f->spec->file, msg);
}

pl_status pl_lua_load_string(const char *name, const char *text, size_t len, pl_spec **out,
                             pl_error *err)
{
    *out = NULL;
    int64_t instr, mem;
    PL_CHECK(pl__env_limit("PIPECTL_LUA_INSTRUCTIONS", PL_LUA_FRONT_INSTRUCTIONS, 1, &instr, err));
    PL_CHECK(pl__env_limit("PIPECTL_LUA_MEMORY", (int64_t)PL_LUA_FRONT_MEMORY,
                           (int64_t)PL_LUA_MIN_MEMORY, &mem, err));
    pl_spec *spec = NULL;
    PL_CHECK(pl_spec_new(name, &spec, err));
    pl__front f = {.spec = spec, .err = err, .st = PL_OK, .text = text, .len = len};
    snprintf(f.chunk, sizeof f.chunk, "@%s", spec->file);
    const char *slash = strrchr(spec->file, '/');
    f.base = slash ? slash + 1 : spec->file;
    pl_lua *lx = NULL;
    pl_status st = pl_lua_new((size_t)mem, "set PIPECTL_LUA_INSTRUCTIONS to raise it",
                              "set PIPECTL_LUA_MEMORY to raise it", &lx, err);
    if (st == PL_OK) {
        char msg[PL_ERROR_MSG_MAX];
        if (pl_lua_call(lx, pl__front_run, &f, instr, false, msg, sizeof msg) != PL_OK)
            st = pl__lua_error(&f, msg);
        else
            st = f.st;
    }
    pl_lua_free(lx);
    if (st != PL_OK) {
        pl_spec_free(spec);
        return st;
    }
    *out = spec;
    return PL_OK;
}

pl_status pl_lua_load_file(const char *path, pl_spec **out, pl_error *err)
{
    *out = NULL;
    char *text = NULL;
    size_t len = 0;
    char msg[PL_ERROR_MSG_MAX];
    pl_status st = pl_lua_read_file(path, &text, &len, msg, sizeof msg);
    if (st != PL_OK) return pl_error_set(err, st, "error: %s", msg);
    st = pl_lua_load_string(path, text, len, out, err);
    free(text);
    return st;
}
