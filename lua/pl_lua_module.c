/* pl_lua_module: the `pipectl` Lua module. It only records what a pipeline script declares, in
 * declaration order and with the line of each declaring call; parser/pl_lua_front.c turns the
 * record into a spec, and stages/lua.c finds stage functions in it. */
#include "pl_lua.h"

#include <lauxlib.h>

#define PL__PIPE_MT "pipectl.pipeline"
#define PL__MARKS "pipectl.marks" /* weak-keyed: table made by pipectl.buffer/stage -> line */

#ifndef PL_VERSION
#define PL_VERSION "0"
#endif

/* The line of the Lua code that called the running C function (0 when unknown). */
static int pl__caller_line(lua_State *L)
{
    lua_Debug ar;
    if (lua_getstack(L, 1, &ar) && lua_getinfo(L, "l", &ar) && ar.currentline > 0)
        return ar.currentline;
    return 0;
}

bool pl_lua_is_pipeline(lua_State *L, int idx)
{
    if (!lua_getmetatable(L, idx)) return false;
    luaL_getmetatable(L, PL__PIPE_MT);
    bool same = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
    return same;
}

int pl_lua_marked_line(lua_State *L, int idx)
{
    idx = lua_absindex(L, idx);
    if (lua_getfield(L, LUA_REGISTRYINDEX, PL__MARKS) != LUA_TTABLE) {
        lua_pop(L, 1);
        return 0;
    }
    lua_pushvalue(L, idx);
    lua_rawget(L, -2);
    int line = lua_isinteger(L, -1) ? (int)lua_tointeger(L, -1) : 0;
    lua_pop(L, 2);
    return line;
}

static void pl__check_self(lua_State *L, const char *method)
{
    if (lua_type(L, 1) != LUA_TTABLE || !pl_lua_is_pipeline(L, 1))
        luaL_error(L,
                   "%s must be called on a pipeline with a colon: p:%s{...} where p = "
                   "pipectl.pipeline{...}",
                   method, method);
}

/* Appends {what=, line=, name=, t=} to P._items. Stack: the item table on top (popped). */
static void pl__append_item(lua_State *L)
{
    lua_getfield(L, 1, "_items");
    if (lua_type(L, -1) != LUA_TTABLE) luaL_error(L, "this pipeline object was modified (_items)");
    lua_pushvalue(L, -2);
    lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
    lua_pop(L, 2);
}

/* p:buffer(name, props) or p:buffer{name = ..., ...}: returns the name. */
static int pl__p_buffer(lua_State *L)
{
    pl__check_self(L, "buffer");
    int line = pl__caller_line(L);
    int props;
    if (lua_type(L, 2) == LUA_TSTRING) {
        if (lua_type(L, 3) != LUA_TTABLE)
            return luaL_error(L,
                              "p:buffer('%s', props): props must be a table like {where = "
                              "'host', dtype = 'f32', shape = {1024}}",
                              lua_tostring(L, 2));
        props = 3;
        lua_pushvalue(L, 2);
    } else if (lua_type(L, 2) == LUA_TTABLE) {
        props = 2;
        if (lua_getfield(L, 2, "name") != LUA_TSTRING)
            return luaL_error(L, "p:buffer{...} needs name = 'a buffer name'");
    } else {
        return luaL_error(L,
                          "p:buffer takes a name and a table, or one table with name = ...; got "
                          "%s",
                          luaL_typename(L, 2));
    }
    int name = lua_gettop(L);
    lua_createtable(L, 0, 4);
    lua_pushliteral(L, "buffer");
    lua_setfield(L, -2, "what");
    lua_pushinteger(L, line);
    lua_setfield(L, -2, "line");
    lua_pushvalue(L, name);
    lua_setfield(L, -2, "name");
    lua_pushvalue(L, props);
    lua_setfield(L, -2, "t");
    pl__append_item(L);
    lua_pushvalue(L, name);
    return 1;
}

/* p:stage{name = ..., kind = ..., ...}: returns the name. */
static int pl__p_stage(lua_State *L)
{
    pl__check_self(L, "stage");
    int line = pl__caller_line(L);
    if (lua_type(L, 2) != LUA_TTABLE)
        return luaL_error(L,
                          "p:stage takes one table like {name = 'up', kind = 'h2d', from = "
                          "'x', to = 'y'}; got %s",
                          luaL_typename(L, 2));
    lua_createtable(L, 0, 3);
    lua_pushliteral(L, "stage");
    lua_setfield(L, -2, "what");
    lua_pushinteger(L, line);
    lua_setfield(L, -2, "line");
    lua_pushvalue(L, 2);
    lua_setfield(L, -2, "t");
    pl__append_item(L);
    lua_getfield(L, 2, "name");
    return 1;
}

/* pipectl.pipeline{name = ..., run = {...}, buffers = {...}, stages = {...}}: a builder. */
static int pl__pipeline(lua_State *L)
{
    int line = pl__caller_line(L);
    if (!lua_isnoneornil(L, 1) && lua_type(L, 1) != LUA_TTABLE)
        return luaL_error(L,
                          "pipectl.pipeline takes a table like {name = 'demo', run = {batches "
                          "= 16}}; got %s",
                          luaL_typename(L, 1));
    lua_createtable(L, 0, 3);
    if (lua_type(L, 1) == LUA_TTABLE)
        lua_pushvalue(L, 1);
    else
        lua_newtable(L);
    lua_setfield(L, -2, "_decl");
    lua_pushinteger(L, line);
    lua_setfield(L, -2, "_line");
    lua_newtable(L);
    lua_setfield(L, -2, "_items");
    luaL_setmetatable(L, PL__PIPE_MT);
    return 1;
}

/* pipectl.buffer{...} / pipectl.stage{...}: the table itself, remembered with its line so the
 * declarative form reports exact lines too. */
static int pl__mark(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    int line = pl__caller_line(L);
    lua_getfield(L, LUA_REGISTRYINDEX, PL__MARKS);
    lua_pushvalue(L, 1);
    lua_pushinteger(L, line);
    lua_rawset(L, -3);
    lua_pop(L, 1);
    lua_settop(L, 1);
    return 1;
}

void pl_lua_open_module(lua_State *L)
{
    luaL_newmetatable(L, PL__PIPE_MT);
    lua_newtable(L);
    lua_pushcfunction(L, pl__p_buffer);
    lua_setfield(L, -2, "buffer");
    lua_pushcfunction(L, pl__p_stage);
    lua_setfield(L, -2, "stage");
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);

    lua_newtable(L); /* marks, weak keys */
    lua_createtable(L, 0, 1);
    lua_pushliteral(L, "k");
    lua_setfield(L, -2, "__mode");
    lua_setmetatable(L, -2);
    lua_setfield(L, LUA_REGISTRYINDEX, PL__MARKS);

    lua_createtable(L, 0, 4);
    lua_pushcfunction(L, pl__pipeline);
    lua_setfield(L, -2, "pipeline");
    lua_pushcfunction(L, pl__mark);
    lua_setfield(L, -2, "buffer");
    lua_pushcfunction(L, pl__mark);
    lua_setfield(L, -2, "stage");
    lua_pushliteral(L, PL_VERSION);
    lua_setfield(L, -2, "version");
    lua_setglobal(L, "pipectl");
}
