/* lua: a user's Lua function called once per batch with typed views of its buffers. */
#include "pl_stage.h"

static const pl_key pl__lua_keys[] = {
    {"script", PL_KEY_PATH, NULL, NULL, "Lua file defining the function (or give `code`)"},
    {"code", PL_KEY_STR, NULL, NULL, "inline Lua code defining the function"},
    {"function", PL_KEY_STR, NULL, "run", "name of the global function to call per batch"},
    {"instructions", PL_KEY_INT, NULL, "100000000", "instruction budget per call"},
    {"memory", PL_KEY_INT, NULL, "67108864", "memory cap of the stage's Lua state, bytes"},
    {NULL, 0, NULL, NULL, NULL},
};

const pl_kind pl_kind_lua = {
    .name = "lua",
    .engine = PL_ENGINE_HOST,
    .keys = pl__lua_keys,
    .doc = "a Lua function over the batch's host buffers",
};
