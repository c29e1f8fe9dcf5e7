/* pl_lua_view: typed, zero-copy views of buffers for Lua (full userdata "pipectl.view"): 1-based
 * element access, length, and bulk fill/copy/sum and string/table conversion. */
#include "pl_half.h"
#include "pl_lua.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#define PL__VIEW_MT "pipectl.view"

struct pl_lua_view {
    unsigned char *data; /* borrowed */
    pl_dtype dtype;
    size_t esize;
    int rank;
    int64_t shape[PL_MAX_RANK];
    int64_t count;
    bool writable;
    const uint64_t *epoch; /* NULL: always valid */
    uint64_t gen;
    char name[PL_MAX_NAME + 1];
    char stage[PL_MAX_NAME + 1];
};

/* Half precision: runtime/base/pl_half.h, the conversions the ops and the host executor use. */

/* ---- element access ---- */

static double pl__get_num(const pl_lua_view *v, int64_t i)
{
    const unsigned char *p = v->data + (size_t)i * v->esize;
    switch (v->dtype) {
    case PL_U8:
        return *p;
    case PL_I32: {
        int32_t x;
        memcpy(&x, p, 4);
        return x;
    }
    case PL_I64: {
        int64_t x;
        memcpy(&x, p, 8);
        return (double)x;
    }
    case PL_F16: {
        uint16_t x;
        memcpy(&x, p, 2);
        return pl_f16_to_f32(x);
    }
    case PL_BF16: {
        uint16_t x;
        memcpy(&x, p, 2);
        return pl_bf16_to_f32(x);
    }
    case PL_F32: {
        float x;
        memcpy(&x, p, 4);
        return x;
    }
    case PL_F64: {
        double x;
        memcpy(&x, p, 8);
        return x;
    }
    default:
        return 0;
    }
}

static int64_t pl__get_int(const pl_lua_view *v, int64_t i)
{
    const unsigned char *p = v->data + (size_t)i * v->esize;
    switch (v->dtype) {
    case PL_U8:
        return *p;
    case PL_I32: {
        int32_t x;
        memcpy(&x, p, 4);
        return x;
    }
    case PL_I64: {
        int64_t x;
        memcpy(&x, p, 8);
        return x;
    }
    default:
        return 0;
    }
}

static void pl__push_elem(lua_State *L, const pl_lua_view *v, int64_t i)
{
    if (pl_dtype_is_float(v->dtype))
        lua_pushnumber(L, pl__get_num(v, i));
    else
        lua_pushinteger(L, pl__get_int(v, i));
}

static void pl__put_num(pl_lua_view *v, int64_t i, double d)
{
    unsigned char *p = v->data + (size_t)i * v->esize;
    switch (v->dtype) {
    case PL_F16: {
        uint16_t x = pl_f32_to_f16((float)d);
        memcpy(p, &x, 2);
        break;
    }
    case PL_BF16: {
        uint16_t x = pl_f32_to_bf16((float)d);
        memcpy(p, &x, 2);
        break;
    }
    case PL_F32: {
        float x = (float)d;
        memcpy(p, &x, 4);
        break;
    }
    case PL_F64:
        memcpy(p, &d, 8);
        break;
    default:
        break;
    }
}

/* Integer dtypes: the value must be a whole number that fits. */
static void pl__put_int(lua_State *L, pl_lua_view *v, int64_t i, int64_t x)
{
    unsigned char *p = v->data + (size_t)i * v->esize;
    switch (v->dtype) {
    case PL_U8:
        if (x < 0 || x > 255)
            luaL_error(L, "buffer '%s': %I does not fit in a u8 element (0..255)", v->name,
                       (lua_Integer)x);
        *p = (unsigned char)x;
        break;
    case PL_I32: {
        if (x < INT32_MIN || x > INT32_MAX)
            luaL_error(L, "buffer '%s': %I does not fit in an i32 element", v->name,
                       (lua_Integer)x);
        int32_t y = (int32_t)x;
        memcpy(p, &y, 4);
        break;
    }
    case PL_I64:
        memcpy(p, &x, 8);
        break;
    default:
        break;
    }
}

/* Stores the Lua value at idx into element i (0-based). */
static void pl__store(lua_State *L, pl_lua_view *v, int64_t i, int idx)
{
    if (pl_dtype_is_float(v->dtype)) {
        int ok;
        lua_Number d = lua_tonumberx(L, idx, &ok);
        if (!ok || lua_type(L, idx) != LUA_TNUMBER)
            luaL_error(L, "buffer '%s': elements are numbers, got %s", v->name,
                       luaL_typename(L, idx));
        pl__put_num(v, i, d);
        return;
    }
    int ok;
    lua_Integer x = lua_tointegerx(L, idx, &ok);
    if (!ok || lua_type(L, idx) != LUA_TNUMBER) {
        if (lua_type(L, idx) == LUA_TNUMBER)
            luaL_error(L, "buffer '%s': elements of a %s buffer are integers, got %s", v->name,
                       pl_dtype_name(v->dtype), lua_tostring(L, idx));
        luaL_error(L, "buffer '%s': elements are integers, got %s", v->name, luaL_typename(L, idx));
    }
    pl__put_int(L, v, i, x);
}

/* ---- checks ---- */

static pl_lua_view *pl__check(lua_State *L, int idx, bool write)
{
    pl_lua_view *v = luaL_checkudata(L, idx, PL__VIEW_MT);
    if (v->epoch && *v->epoch != v->gen)
        luaL_error(L,
                   "the view of buffer '%s' was used after its batch ended; a view is valid only "
                   "during the call that received it (copy what you need to keep)",
                   v->name);
    if (write && !v->writable)
        luaL_error(L,
                   "stage '%s' cannot write buffer '%s': it is not in the stage's `writes` (add "
                   "it there to modify it)",
                   v->stage, v->name);
    return v;
}

/* The view a metamethod was called for. __index, __newindex and __len are reachable only through
 * a view's own metatable (it is locked by __metatable and the debug library is not loaded), so
 * argument 1 is a view and the registry lookup of luaL_checkudata can be skipped: element access
 * is the hot path of a Lua stage. */
static pl_lua_view *pl__self(lua_State *L, bool write)
{
    pl_lua_view *v = lua_touserdata(L, 1);
    if (!v || (v->epoch && *v->epoch != v->gen) || (write && !v->writable))
        return pl__check(L, 1, write);
    return v;
}

/* A 1-based index argument, returned 0-based, within 0..limit (limit: count, or count+1 for
 * "one past the end" starts). */
static int64_t pl__index(lua_State *L, const pl_lua_view *v, int idx, int64_t lo, int64_t hi)
{
    int ok;
    lua_Integer i = lua_tointegerx(L, idx, &ok);
    if (!ok || lua_type(L, idx) != LUA_TNUMBER)
        luaL_error(L, "buffer '%s': an index must be an integer, got %s", v->name,
                   lua_type(L, idx) == LUA_TNUMBER ? lua_tostring(L, idx) : luaL_typename(L, idx));
    if (i < lo || i > hi)
        luaL_error(L, "buffer '%s': index %I is out of range %I..%I", v->name, i, (lua_Integer)lo,
                   (lua_Integer)hi);
    return (int64_t)i - 1;
}

/* Optional [i [, j]] range (1-based, inclusive) -> [first, end) 0-based. */
static void pl__range(lua_State *L, const pl_lua_view *v, int at, int64_t *first, int64_t *end)
{
    *first = lua_isnoneornil(L, at) ? 0 : pl__index(L, v, at, 1, v->count + 1);
    *end = lua_isnoneornil(L, at + 1) ? v->count : pl__index(L, v, at + 1, 0, v->count) + 1;
    if (*end < *first) *end = *first;
}

/* ---- metamethods and methods ---- */

static int pl__view_index(lua_State *L)
{
    if (lua_type(L, 2) == LUA_TNUMBER) {
        pl_lua_view *v = pl__self(L, false);
        pl__push_elem(L, v, pl__index(L, v, 2, 1, v->count));
        return 1;
    }
    if (lua_type(L, 2) == LUA_TSTRING) {
        lua_pushvalue(L, 2);
        if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL) return 1;
        return luaL_error(L, "a view has no method '%s' (see docs/lua.md)", lua_tostring(L, 2));
    }
    return luaL_error(L, "a view is indexed by element number (1..#v) or method name, not by %s",
                      luaL_typename(L, 2));
}

static int pl__view_newindex(lua_State *L)
{
    pl_lua_view *v = pl__self(L, true);
    if (lua_type(L, 2) != LUA_TNUMBER)
        return luaL_error(L, "buffer '%s': only elements (v[i] = x, i in 1..#v) can be assigned",
                          v->name);
    pl__store(L, v, pl__index(L, v, 2, 1, v->count), 3);
    return 0;
}

static int pl__view_len(lua_State *L)
{
    pl_lua_view *v = pl__self(L, false);
    lua_pushinteger(L, (lua_Integer)v->count);
    return 1;
}

static int pl__view_tostring(lua_State *L)
{
    pl_lua_view *v = luaL_checkudata(L, 1, PL__VIEW_MT);
    char shape[PL_MAX_RANK * 21 + 8];
    size_t n = 0;
    for (int d = 0; d < v->rank; d++)
        n += (size_t)snprintf(shape + n, sizeof shape - n, d ? ", %lld" : "%lld",
                              (long long)v->shape[d]);
    lua_pushfstring(L, "pipectl.view<%s>[%s] '%s'%s", pl_dtype_name(v->dtype), shape, v->name,
                    v->writable ? "" : " (read-only)");
    return 1;
}

static int pl__m_shape(lua_State *L)
{
    pl_lua_view *v = pl__check(L, 1, false);
    lua_createtable(L, v->rank, 0);
    for (int d = 0; d < v->rank; d++) {
        lua_pushinteger(L, (lua_Integer)v->shape[d]);
        lua_rawseti(L, -2, d + 1);
    }
    return 1;
}

static int pl__m_dtype(lua_State *L)
{
    lua_pushstring(L, pl_dtype_name(pl__check(L, 1, false)->dtype));
    return 1;
}

static int pl__m_name(lua_State *L)
{
    lua_pushstring(L, pl__check(L, 1, false)->name);
    return 1;
}

static int pl__m_fill(lua_State *L)
{
    pl_lua_view *v = pl__check(L, 1, true);
    luaL_checkany(L, 2);
    if (v->count == 0) return 0;
    pl__store(L, v, 0, 2);
    for (int64_t i = 1; i < v->count; i++)
        memcpy(v->data + (size_t)i * v->esize, v->data, v->esize);
    return 0;
}

static int pl__m_copy(lua_State *L)
{
    pl_lua_view *dst = pl__check(L, 1, true);
    pl_lua_view *src = pl__check(L, 2, false);
    if (src->count != dst->count)
        return luaL_error(L, "copy: buffer '%s' has %I elements and '%s' has %I; they must match",
                          dst->name, (lua_Integer)dst->count, src->name, (lua_Integer)src->count);
    if (src->dtype == dst->dtype) {
        memmove(dst->data, src->data, (size_t)dst->count * dst->esize);
        return 0;
    }
    bool src_float = pl_dtype_is_float(src->dtype), dst_float = pl_dtype_is_float(dst->dtype);
    for (int64_t i = 0; i < dst->count; i++) {
        if (dst_float) {
            pl__put_num(dst, i, src_float ? pl__get_num(src, i) : (double)pl__get_int(src, i));
        } else if (!src_float) {
            pl__put_int(L, dst, i, pl__get_int(src, i));
        } else {
            double d = pl__get_num(src, i);
            if (!(d == floor(d)) || fabs(d) >= 9.2e18)
                return luaL_error(L,
                                  "copy: element %I of '%s' (%f) is not a whole number; '%s' "
                                  "is %s",
                                  (lua_Integer)i + 1, src->name, d, dst->name,
                                  pl_dtype_name(dst->dtype));
            pl__put_int(L, dst, i, (int64_t)d);
        }
    }
    return 0;
}

static int pl__m_sum(lua_State *L)
{
    pl_lua_view *v = pl__check(L, 1, false);
    int64_t first, end;
    pl__range(L, v, 2, &first, &end);
    if (pl_dtype_is_float(v->dtype)) {
        double s = 0;
        for (int64_t i = first; i < end; i++)
            s += pl__get_num(v, i);
        lua_pushnumber(L, s);
    } else {
        uint64_t s = 0; /* wraps like Lua integers do */
        for (int64_t i = first; i < end; i++)
            s += (uint64_t)pl__get_int(v, i);
        lua_pushinteger(L, (lua_Integer)s);
    }
    return 1;
}

static int pl__m_tostring(lua_State *L)
{
    pl_lua_view *v = pl__check(L, 1, false);
    int64_t first, end;
    pl__range(L, v, 2, &first, &end);
    lua_pushlstring(L, (const char *)v->data + (size_t)first * v->esize,
                    (size_t)(end - first) * v->esize);
    return 1;
}

static int pl__m_fromstring(lua_State *L)
{
    pl_lua_view *v = pl__check(L, 1, true);
    size_t len;
    const char *s = luaL_checklstring(L, 2, &len);
    int64_t first = lua_isnoneornil(L, 3) ? 0 : pl__index(L, v, 3, 1, v->count + 1);
    if (len % v->esize)
        return luaL_error(L,
                          "fromstring: %I bytes is not a whole number of %s elements (%I "
                          "bytes each)",
                          (lua_Integer)len, pl_dtype_name(v->dtype), (lua_Integer)v->esize);
    int64_t n = (int64_t)(len / v->esize);
    if (n > v->count - first)
        return luaL_error(L,
                          "fromstring: %I elements from element %I do not fit in buffer '%s' "
                          "(%I elements)",
                          (lua_Integer)n, (lua_Integer)first + 1, v->name, (lua_Integer)v->count);
    memcpy(v->data + (size_t)first * v->esize, s, len);
    lua_pushinteger(L, (lua_Integer)n);
    return 1;
}

static int pl__m_totable(lua_State *L)
{
    pl_lua_view *v = pl__check(L, 1, false);
    int64_t first, end;
    pl__range(L, v, 2, &first, &end);
    if (end - first > INT32_MAX) return luaL_error(L, "totable: too many elements");
    lua_createtable(L, (int)(end - first), 0);
    for (int64_t i = first; i < end; i++) {
        pl__push_elem(L, v, i);
        lua_rawseti(L, -2, (lua_Integer)(i - first + 1));
    }
    return 1;
}

static int pl__m_fromtable(lua_State *L)
{
    pl_lua_view *v = pl__check(L, 1, true);
    luaL_checktype(L, 2, LUA_TTABLE);
    int64_t first = lua_isnoneornil(L, 3) ? 0 : pl__index(L, v, 3, 1, v->count + 1);
    lua_Integer n = (lua_Integer)lua_rawlen(L, 2);
    if (n > v->count - first)
        return luaL_error(L,
                          "fromtable: %I elements from element %I do not fit in buffer '%s' "
                          "(%I elements)",
                          n, (lua_Integer)first + 1, v->name, (lua_Integer)v->count);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, 2, i);
        pl__store(L, v, first + i - 1, -1);
        lua_pop(L, 1);
    }
    lua_pushinteger(L, n);
    return 1;
}

/* One 1-based index per dimension -> flat 0-based offset. */
static int64_t pl__offset(lua_State *L, const pl_lua_view *v, int at)
{
    int64_t off = 0;
    for (int d = 0; d < v->rank; d++) {
        int ok;
        lua_Integer i = lua_tointegerx(L, at + d, &ok);
        if (!ok)
            luaL_error(L, "buffer '%s' has %d dimensions: give %d integer indices", v->name,
                       v->rank, v->rank);
        if (i < 1 || i > v->shape[d])
            luaL_error(L, "buffer '%s': index %I of dimension %d is out of range 1..%I", v->name, i,
                       d + 1, (lua_Integer)v->shape[d]);
        off = off * v->shape[d] + (i - 1);
    }
    return off;
}

static int pl__m_get(lua_State *L)
{
    pl_lua_view *v = pl__check(L, 1, false);
    pl__push_elem(L, v, pl__offset(L, v, 2));
    return 1;
}

static int pl__m_set(lua_State *L)
{
    pl_lua_view *v = pl__check(L, 1, true);
    if (lua_gettop(L) != v->rank + 2)
        return luaL_error(L, "set: buffer '%s' has %d dimensions: give %d indices and a value",
                          v->name, v->rank, v->rank);
    pl__store(L, v, pl__offset(L, v, 2), v->rank + 2);
    return 0;
}

static const luaL_Reg pl__methods[] = {
    {"shape", pl__m_shape},
    {"dtype", pl__m_dtype},
    {"name", pl__m_name},
    {"fill", pl__m_fill},
    {"copy", pl__m_copy},
    {"sum", pl__m_sum},
    {"tostring", pl__m_tostring},
    {"fromstring", pl__m_fromstring},
    {"totable", pl__m_totable},
    {"fromtable", pl__m_fromtable},
    {"get", pl__m_get},
    {"set", pl__m_set},
    {NULL, NULL},
};

static void pl__view_metatable(lua_State *L)
{
    if (luaL_newmetatable(L, PL__VIEW_MT)) {
        luaL_newlib(L, pl__methods);
        lua_pushcclosure(L, pl__view_index, 1);
        lua_setfield(L, -2, "__index");
        lua_pushcfunction(L, pl__view_newindex);
        lua_setfield(L, -2, "__newindex");
        lua_pushcfunction(L, pl__view_len);
        lua_setfield(L, -2, "__len");
        lua_pushcfunction(L, pl__view_tostring);
        lua_setfield(L, -2, "__tostring");
        lua_pushliteral(L, PL__VIEW_MT);
        lua_setfield(L, -2, "__metatable");
    }
}

pl_lua_view *pl_lua_view_push(lua_State *L, void *data, pl_dtype dtype, int rank,
                              const int64_t *shape, bool writable, const char *name,
                              const char *stage, const uint64_t *epoch)
{
    pl_lua_view *v = lua_newuserdatauv(L, sizeof *v, 1);
    memset(v, 0, sizeof *v);
    v->data = data;
    v->dtype = dtype;
    v->esize = pl_dtype_size(dtype);
    v->rank = rank < 0 ? 0 : rank > PL_MAX_RANK ? PL_MAX_RANK : rank;
    v->count = 1;
    for (int d = 0; d < v->rank; d++) {
        v->shape[d] = shape[d];
        v->count *= shape[d];
    }
    v->writable = writable;
    v->epoch = epoch;
    v->gen = epoch ? *epoch : 0;
    snprintf(v->name, sizeof v->name, "%s", name ? name : "?");
    snprintf(v->stage, sizeof v->stage, "%s", stage ? stage : "?");
    pl__view_metatable(L);
    lua_setmetatable(L, -2);
    return v;
}

/* ---- the bufs table ---- */

#define PL__BUFS_MT "pipectl.bufs"

static int pl__str_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* __index of a bufs table: only reached for a name it does not hold. */
static int pl__bufs_index(lua_State *L)
{
    const char *names[256];
    int n = 0;
    lua_pushnil(L);
    while (lua_next(L, 1) != 0) {
        lua_pop(L, 1);
        if (lua_type(L, -1) == LUA_TSTRING && n < 256) names[n++] = lua_tostring(L, -1);
    }
    qsort(names, (size_t)n, sizeof *names, pl__str_cmp);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (int i = 0; i < n; i++) {
        if (i) luaL_addstring(&b, ", ");
        luaL_addstring(&b, names[i]);
    }
    luaL_pushresult(&b);
    const char *list = lua_tostring(L, -1);
    if (lua_type(L, 2) == LUA_TSTRING)
        return luaL_error(L, "bufs.%s: no such buffer (this stage can use: %s)", lua_tostring(L, 2),
                          n ? list : "none: give it reads or writes");
    return luaL_error(L, "bufs is indexed by buffer name (this stage can use: %s), not by %s",
                      n ? list : "none", luaL_typename(L, 2));
}

void pl_lua_bufs_seal(lua_State *L, int idx)
{
    idx = lua_absindex(L, idx);
    if (luaL_newmetatable(L, PL__BUFS_MT)) {
        lua_pushcfunction(L, pl__bufs_index);
        lua_setfield(L, -2, "__index");
        lua_pushliteral(L, PL__BUFS_MT);
        lua_setfield(L, -2, "__metatable");
    }
    lua_setmetatable(L, idx);
}
