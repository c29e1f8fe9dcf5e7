/* fuzz_lua: libFuzzer target for the Lua front end (pl_lua_load_string): the input runs as a
 * pipeline script in the sandbox, then what loads is checked and planned. Limits are lowered
 * (PIPECTL_LUA_INSTRUCTIONS / _MEMORY) so endless loops and memory bombs end fast. What counts
 * as a finding: tests/fuzz/pl_fuzz.h. */
#include <stdlib.h>

#include "pl_fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    setenv("PIPECTL_LUA_INSTRUCTIONS", "200000", 1);
    setenv("PIPECTL_LUA_MEMORY", "16777216", 1);
    return 0;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    return pl_fuzz_one(pl_lua_load_string, "fuzz.lua", data, size);
}
