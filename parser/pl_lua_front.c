/* pl_lua_front: the Lua front end. Runs a pipeline script in a sandboxed state (lua/pl_lua.h) and
 * turns what it returns into a value tree shaped like a YAML file's, which the schema walker
 * (parser/pl_schema.c) checks and builds the spec from, with the same rules and messages as for
 * YAML; what is here is only what Lua itself brings (arrays for order, p:buffer/p:stage items,
 * functions). Positions: the script's name, the line of the call that declared the element,
 * column 1. */
#include "pl_parse.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "pl_lua.h"
#include "pl_override.h"
#include "pl_schema.h"

typedef struct pl__front {
    pl_spec *spec;
    pl_error *err;
    pl_status st;
    const char *text;
    size_t len;
    char chunk[PATH_MAX + 2]; /* "@" + name */
    const char *base;         /* the script's file name without directories (for `fn` stages) */
    pl_value *root;           /* the converted pipeline; freed by the caller, also after errors */
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
    return pl_error_set(f->err, PL_ENOMEM, "error: out of memory while reading '%s'",
                        f->spec->file);
}

/* Option text as the YAML front end would store it: integers "%lld", floats the shortest of
 * "%.15g".."%.17g" that reads back exactly (so 0.1 stays "0.1"), booleans true/false. */
static const char *pl__scalar_text(lua_State *L, int idx, char *buf, size_t cap, size_t *len)
{
    const char *s = buf;
    switch (lua_type(L, idx)) {
    case LUA_TSTRING:
        s = lua_tolstring(L, idx, len);
        *len = strlen(s); /* a NUL inside ends the text, as in every C string of the spec */
        return s;
    case LUA_TBOOLEAN:
        s = lua_toboolean(L, idx) ? "true" : "false";
        break;
    default: /* LUA_TNUMBER */
        if (lua_isinteger(L, idx)) {
            snprintf(buf, cap, "%lld", (long long)lua_tointeger(L, idx));
        } else {
            double d = lua_tonumber(L, idx);
            for (int prec = 15; prec <= 17; prec++) {
                snprintf(buf, cap, "%.*g", prec, d);
                if (strtod(buf, NULL) == d) break;
            }
        }
    }
    *len = strlen(s);
    return s;
}

/* A table used as an array: keys exactly 1..#t. */
static bool pl__is_array(lua_State *L, int idx)
{
    idx = lua_absindex(L, idx);
    lua_Integer n = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        n++;
        lua_pop(L, 1);
    }
    return n == (lua_Integer)lua_rawlen(L, idx);
}

static int pl__pair_cmp(const void *a, const void *b)
{
    const pl_value *x = *(pl_value *const *)a, *y = *(pl_value *const *)b;
    return strcmp(x->text, y->text);
}

/* Sorts a mapping's (key, value) pairs by key: a Lua table has no written order, and a stable
 * order makes messages and specs the same on every run. No Lua call happens while `keys` is
 * allocated, so a Lua error cannot leak it. */
static pl_status pl__sort_pairs(pl__front *f, pl_value *m)
{
    int n = m->n / 2;
    if (n < 2) return PL_OK;
    pl_value **keys = malloc((size_t)n * sizeof *keys);
    if (!keys) return pl__oom(f);
    int i = 0;
    for (pl_value *k = m->child; k && k->next; k = k->next->next)
        keys[i++] = k;
    qsort(keys, (size_t)n, sizeof *keys, pl__pair_cmp);
    for (i = 0; i < n; i++)
        keys[i]->next->next = i + 1 < n ? keys[i + 1] : NULL;
    m->child = keys[0];
    m->last = keys[n - 1]->next;
    free(keys);
    return PL_OK;
}

/* Drops the pair `key` from a mapping (a buffer's `name`, which is its key in the tree). */
static void pl__drop_pair(pl_value *m, const char *key)
{
    pl_value **link = &m->child, *prev_value = NULL;
    for (pl_value *k = m->child; k && k->next; k = k->next->next) {
        pl_value *v = k->next;
        if (strcmp(k->text, key) == 0) {
            *link = v->next;
            if (m->last == v) m->last = prev_value;
            v->next = NULL;
            pl_value_free(k);
            m->n -= 2;
            return;
        }
        link = &v->next;
        prev_value = v;
    }
}

/* The line of a declarative element: its pipectl.buffer/stage mark, else `line`. */
static int pl__elem_line(lua_State *L, int idx, int line)
{
    int m = lua_type(L, idx) == LUA_TTABLE ? pl_lua_marked_line(L, idx) : 0;
    return m > 0 ? m : line;
}

/* The Lua value at idx as a new node under `parent` (NULL: *out is a root); every node gets the
 * line of the call that declared its element. */
static pl_status pl__conv(pl__front *f, lua_State *L, int idx, pl_value *parent, int line,
                          int depth, pl_value **out)
{
    idx = lua_absindex(L, idx);
    pl_pos pos = pl__pos(f, line);
    int t = lua_type(L, idx);
    pl_vtype vt = t == LUA_TTABLE      ? (pl__is_array(L, idx) ? PL_VAL_LIST : PL_VAL_MAP)
                  : t == LUA_TFUNCTION ? PL_VAL_FUNC
                  : t == LUA_TSTRING || t == LUA_TNUMBER || t == LUA_TBOOLEAN ? PL_VAL_SCALAR
                                                                              : PL_VAL_OTHER;
    pl_value *v = pl_value_add(parent, vt, pos);
    if (!v) return pl__oom(f);
    if (out) *out = v;
    if (vt == PL_VAL_SCALAR) {
        char buf[64];
        size_t len;
        const char *s = pl__scalar_text(L, idx, buf, sizeof buf, &len);
        return pl_value_set_text(v, s, len) ? PL_OK : pl__oom(f);
    }
    if (vt == PL_VAL_OTHER) {
        const char *s = luaL_typename(L, idx);
        return pl_value_set_text(v, s, strlen(s)) ? PL_OK : pl__oom(f);
    }
    if (vt == PL_VAL_FUNC) return PL_OK;
    if (depth >= PL_MAX_NESTING)
        return pl__fail(f, line,
                        "tables nested deeper than %d levels (PL_MAX_NESTING), or a table that "
                        "contains itself; a pipeline needs at most 4: flatten this value",
                        PL_MAX_NESTING);
    v->table = true;
    luaL_checkstack(L, 4, "a pipeline table");
    if (vt == PL_VAL_LIST) {
        lua_Integer n = (lua_Integer)lua_rawlen(L, idx);
        for (lua_Integer i = 1; i <= n; i++) {
            lua_rawgeti(L, idx, i);
            /* A loop's stages may be pipectl.stage{...} tables, which know their line. */
            PL_CHECK(pl__conv(f, L, -1, v, pl__elem_line(L, -1, line), depth + 1, NULL));
            lua_pop(L, 1);
        }
        return PL_OK;
    }
    v->unordered = true;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        if (lua_type(L, -2) != LUA_TSTRING)
            return pl__fail(f, line,
                            "a table mixes unnamed values (array elements) with named keys; "
                            "write key = value, or only values");
        size_t len;
        const char *k = lua_tolstring(L, -2, &len);
        pl_value *kv = pl_value_add(v, PL_VAL_SCALAR, pos);
        if (!kv || !pl_value_set_text(kv, k, strlen(k))) return pl__oom(f);
        PL_CHECK(pl__conv(f, L, -1, v, line, depth + 1, NULL));
        lua_pop(L, 1);
    }
    return pl__sort_pairs(f, v);
}

/* A key node under the root mapping, and the value node that pl__conv or the caller fills. */
static pl_value *pl__add_key(pl__front *f, pl_value *m, const char *key, int line)
{
    pl_value *k = pl_value_add(m, PL_VAL_SCALAR, pl__pos(f, line));
    if (!k || !pl_value_set_text(k, key, strlen(key))) return NULL;
    return k;
}

/* One buffer: its name becomes its key in the `buffers` mapping, as in YAML. */
static pl_status pl__conv_buffer(pl__front *f, lua_State *L, pl_value *bufs, const char *name,
                                 int t, int line)
{
    pl_value *k = pl__add_key(f, bufs, name, line), *v = NULL;
    if (!k) return pl__oom(f);
    PL_CHECK(pl__conv(f, L, t, bufs, line, 2, &v));
    if (v->type == PL_VAL_MAP) pl__drop_pair(v, "name");
    return PL_OK;
}

/* decl.buffers / decl.stages: arrays (Lua tables do not keep the order of named keys). */
static pl_status pl__conv_decl_list(pl__front *f, lua_State *L, int list, const char *key, int line,
                                    pl_value *into, bool buffers)
{
    if (!pl__is_array(L, list) || lua_type(L, list) != LUA_TTABLE) {
        if (lua_type(L, list) == LUA_TTABLE)
            return pl__fail(f, line,
                            "'%s' must be an array like {{name = 'x', ...}, {name = 'y', ...}}: "
                            "Lua tables do not keep the order of named keys, and the order "
                            "matters",
                            key);
        return pl__fail(f, line, "'%s' must be an array of tables, not a %s", key,
                        luaL_typename(L, list));
    }
    lua_Integer n = (lua_Integer)lua_rawlen(L, list);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, list, i);
        int el = lua_gettop(L);
        int eline = pl__elem_line(L, el, line);
        if (!buffers) {
            PL_CHECK(pl__conv(f, L, el, into, eline, 2, NULL));
        } else {
            if (lua_type(L, el) != LUA_TTABLE)
                return pl__fail(f, eline,
                                "buffer %lld must be a table like {name = 'x', where = 'host', "
                                "dtype = 'f32', shape = {1024}}, not a %s",
                                (long long)i, luaL_typename(L, el));
            if (lua_getfield(L, el, "name") != LUA_TSTRING)
                return pl__fail(f, eline, "buffer %lld has no 'name'; add name = 'x'",
                                (long long)i);
            PL_CHECK(pl__conv_buffer(f, L, into, lua_tostring(L, -1), el, eline));
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
    }
    return PL_OK;
}

/* The returned pipeline (a pipectl.pipeline object or a bare table) as a value tree shaped like
 * a YAML file's: {name, run, buffers: {name: props, ...}, stages: [...]}. */
static pl_status pl__convert(pl__front *f, lua_State *L, int ret)
{
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
    pl_value *root = f->root = pl_value_add(NULL, PL_VAL_MAP, pl__pos(f, line));
    if (!root) return pl__oom(f);
    root->table = root->unordered = true;
    pl_value *bufs = NULL, *stages = NULL;
    lua_pushnil(L);
    while (lua_next(L, decl)) {
        if (lua_type(L, -2) != LUA_TSTRING)
            return pl__fail(f, line,
                            "the pipeline table holds an unnamed value (array element); write "
                            "key = value (name, run, buffers, stages)");
        const char *k = lua_tostring(L, -2);
        if (!pl__add_key(f, root, k, line)) return pl__oom(f);
        bool is_bufs = strcmp(k, "buffers") == 0, is_stages = strcmp(k, "stages") == 0;
        if (is_bufs || is_stages) {
            pl_value **into = is_bufs ? &bufs : &stages;
            *into = pl_value_add(root, is_bufs ? PL_VAL_MAP : PL_VAL_LIST, pl__pos(f, line));
            if (!*into) return pl__oom(f);
            PL_CHECK(pl__conv_decl_list(f, L, lua_gettop(L), k, line, *into, is_bufs));
        } else {
            PL_CHECK(pl__conv(f, L, -1, root, line, 1, NULL));
        }
        lua_pop(L, 1);
    }
    lua_Integer n = items ? (lua_Integer)lua_rawlen(L, items) : 0;
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
        pl_value **into = is_buffer ? &bufs : &stages;
        if (!*into) {
            if (!pl__add_key(f, root, is_buffer ? "buffers" : "stages", line)) return pl__oom(f);
            *into = pl_value_add(root, is_buffer ? PL_VAL_MAP : PL_VAL_LIST, pl__pos(f, line));
            if (!*into) return pl__oom(f);
        }
        if (is_buffer) {
            lua_getfield(L, it, "name");
            if (lua_type(L, -1) != LUA_TSTRING) return pl__fail(f, iline, "p:buffer needs a name");
            PL_CHECK(pl__conv_buffer(f, L, bufs, lua_tostring(L, -1), t, iline));
        } else {
            PL_CHECK(pl__conv(f, L, t, stages, iline, 2, NULL));
        }
        lua_settop(L, it - 1);
    }
    return pl__sort_pairs(f, root);
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
    return pl_lua_load_string_opts(name, text, len, NULL, out, err);
}

pl_status pl_lua_load_string_opts(const char *name, const char *text, size_t len,
                                  const pl_load_opts *opts, pl_spec **out, pl_error *err)
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
    if (st == PL_OK) {
        pl_schema_src src = {.lua = true, .script_base = f.base};
        if (opts && opts->n_sets)
            st = pl_override_apply(spec, &f.root, &src, opts->sets, opts->n_sets, err);
        if (st == PL_OK) st = pl_schema_build(spec, f.root, &src, err);
    }
    pl_value_free(f.root);
    if (st != PL_OK) {
        pl_spec_free(spec);
        return st;
    }
    *out = spec;
    return PL_OK;
}

pl_status pl_lua_load_file(const char *path, pl_spec **out, pl_error *err)
{
    return pl_lua_load_file_opts(path, NULL, out, err);
}

pl_status pl_lua_load_file_opts(const char *path, const pl_load_opts *opts, pl_spec **out,
                                pl_error *err)
{
    *out = NULL;
    char *text = NULL;
    size_t len = 0;
    char msg[PL_ERROR_MSG_MAX];
    pl_status st = pl_lua_read_file(path, &text, &len, msg, sizeof msg);
    if (st != PL_OK) return pl_error_set(err, st, "error: %s", msg);
    st = pl_lua_load_string_opts(path, text, len, opts, out, err);
    free(text);
    return st;
}
