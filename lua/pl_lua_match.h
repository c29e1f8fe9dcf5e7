/* pl_lua_match: the sandbox's pattern functions (string.find, match, gmatch, gsub) over a matcher
 * that charges its steps to a meter, so a backtracking pattern cannot outrun the budget. */
#ifndef PL_LUA_MATCH_H
#define PL_LUA_MATCH_H

#include <stdint.h>

#include <lua.h>

/* Charges `steps` units of work to the running call; raises (a Lua error) when that ends it. */
typedef void (*pl_lua_charge_fn)(lua_State *L, int64_t steps);
typedef struct pl_lua_meter {
    pl_lua_charge_fn charge;
} pl_lua_meter;

/* Replaces string.find, match, gmatch and gsub (the `string` global) with the same functions
 * over a matcher that charges its steps to `meter` (borrowed: static, outlives the state). */
void pl_lua_open_patterns(lua_State *L, const pl_lua_meter *meter);

#endif
