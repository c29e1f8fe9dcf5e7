/* pl_lua: the embedded Lua 5.4 binding: sandboxed states (safe libraries only, text chunks only,
 * a memory cap per state, an instruction budget per call), protected calls that turn any Lua
 * failure into a message with the Lua line, buffer views, and the `pipectl` module that pipeline
 * scripts build their pipeline with. docs/lua.md is the user-facing description.
 *
 * Threads: a pl_lua (and its lua_State) is used by one thread at a time. Different pl_lua objects
 * are independent and may run on different threads at once. */
/* Layer lua: owns the embedded Lua binding (sandboxed states, protected calls, buffer views, the
 * `pipectl` module) that the lua stage kind and the Lua front end run on. May include runtime/base
 * and the Lua 5.4 headers; it knows no stage kind, plan or executor. */
#ifndef PL_LUA_H
#define PL_LUA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <lua.h>

#include "pl_spec.h"

/* Defaults of a `lua` stage (the `instructions` and `memory` keys of stages/lua.c). */
#define PL_LUA_DEFAULT_INSTRUCTIONS INT64_C(100000000)
#define PL_LUA_DEFAULT_MEMORY ((size_t)64 << 20)
#define PL_LUA_MIN_MEMORY ((size_t)256 << 10) /* below this the standard libraries do not fit */
#define PL_LUA_DEFAULT_TIME_LIMIT_MS INT64_C(10000) /* wall clock per call (`time_limit_ms`) */
/* Defaults of the pipeline.lua front end (environment: PIPECTL_LUA_INSTRUCTIONS, _MEMORY). */
#define PL_LUA_FRONT_INSTRUCTIONS INT64_C(1000000000)
#define PL_LUA_FRONT_MEMORY ((size_t)256 << 20)

typedef struct pl_lua pl_lua;

/* Registry field holding the original math.randomseed (scripts may replace the global). */
#define PL_LUA_RANDOMSEED "pipectl.randomseed"

/* Creates a sandboxed state capped at `memory` bytes (>= PL_LUA_MIN_MEMORY). `hint_instr` and
 * `hint_mem` finish the budget and cap messages, e.g. "raise `instructions`"; borrowed, they must
 * outlive the state (string literals). The `pipectl` module is loaded (global and require). */
pl_status pl_lua_new(size_t memory, const char *hint_instr, const char *hint_mem, pl_lua **out,
                     pl_error *err);
void pl_lua_free(pl_lua *lx); /* NULL is fine */
lua_State *pl_lua_state(pl_lua *lx);
size_t pl_lua_memory_used(const pl_lua *lx);

/* Calls fn(lightuserdata arg) protected, with a budget of `instructions` Lua instructions (>= 1)
 * counted across everything it runs. On a Lua error returns PL_ELUA and writes the message into
 * msg ("chunk:line: what", then a stack traceback when `traceback`): runtime errors, errors raised
 * by C functions, the budget ("instruction budget of N exceeded (<hint>)") and the cap ("memory
 * cap of N bytes exceeded (<hint>)"); a user's pcall cannot catch the last two. The stack is left
 * as it was. */
pl_status pl_lua_call(pl_lua *lx, lua_CFunction fn, void *arg, int64_t instructions, bool traceback,
                      char *msg, size_t msg_cap);

/* Watches the state's calls: each pl_lua_call then ends with "chunk:line: time limit of N ms
 * exceeded (<hint>)" (PL_ELUA) once it has run `time_limit_ms` of wall-clock time (0: no limit),
 * and with "chunk:line: interrupted" (PL_EINTR) soon after pl_lua_interrupt(). Checked by the
 * count hook, and made to happen at the next Lua instruction by one process-wide watchdog thread
 * (started with the first watched state, stopped with the last; it sleeps until the next deadline
 * or interrupt and sends SIGURG, whose handler this installs, to a thread whose call is due). A
 * single C call (one string.rep or gsub of a huge string) finishes before the stop. `hint` is
 * borrowed (a literal). May be called again to change the limit. pl_lua_free stops watching. */
pl_status pl_lua_watch(pl_lua *lx, int64_t time_limit_ms, const char *hint, pl_error *err);

/* Charges `steps` units of work done inside a C function (the pattern functions' matcher) to the
 * running pl_lua_call's instruction budget, one instruction each, and raises as the count hook
 * does when the budget, the time limit or pl_lua_interrupt ends the call: with the line of the
 * Lua code that called the function. Does nothing outside pl_lua_call. */
void pl_lua_charge(lua_State *L, int64_t steps);

/* Asks every Lua call to stop: pl_intr_raise(PL_INTR_STOP), the process's interrupt (pl_intr.h),
 * which any raise of it does as well (async-signal-safe). Watched calls end with PL_EINTR within
 * ~10 ms; new watched calls return PL_EINTR at once, until pl_lua_interrupt_clear() (which is
 * pl_intr_clear()). */
void pl_lua_interrupt(void);
void pl_lua_interrupt_clear(void);
bool pl_lua_interrupted(void);

/* Inside a protected call: loads `text` as a text chunk (never binary) named `chunkname` ("@file"
 * or "=name") and pushes the function; a syntax error or a binary chunk raises. */
void pl_lua_load_text(lua_State *L, const char *text, size_t len, const char *chunkname);

/* The short source name Lua shows for `chunkname` in messages ("pipeline.lua", or "...tail" for
 * long paths), as luaO_chunkid makes it. */
void pl_lua_chunkid(char *out, size_t cap, const char *chunkname);

/* Reads a whole text file into malloc'd memory (NUL-terminated; *len without the NUL). Returns
 * PL_EINPUT with "cannot read 'path': reason" in msg when it cannot. The caller frees *out. */
pl_status pl_lua_read_file(const char *path, char **out, size_t *len, char *msg, size_t msg_cap);

/* ---- Buffer views: full userdata "pipectl.view" over memory the caller owns. ---- */

typedef struct pl_lua_view pl_lua_view;

/* Pushes a view of `data` (borrowed; must stay valid while the view is valid). Indexing is 1-based
 * and flat (row-major); get/set take one 1-based index per dimension. A view whose `epoch` is
 * non-NULL is valid only while *epoch == the value it had when the view was made: the stage bumps
 * it after each call, so a view kept in a global raises instead of touching another batch's
 * memory. `stage` and `name` are copied (for messages). */
pl_lua_view *pl_lua_view_push(lua_State *L, void *data, pl_dtype dtype, int rank,
                              const int64_t *shape, bool writable, const char *name,
                              const char *stage, const uint64_t *epoch);

/* Gives the table at idx (a lua stage's `bufs`: buffer name -> view) a metatable under which
 * reading a name it does not hold raises "bufs.NAME: no such buffer (this stage can use: a, b)"
 * instead of giving nil, so a typo fails at the line that made it. */
void pl_lua_bufs_seal(lua_State *L, int idx);

/* ---- The pipectl module (lua/pl_lua_module.c) ---- */

/* Registers `pipectl` (global, and `require "pipectl"`) and the pipeline builder metatable. Called
 * by pl_lua_new. */
void pl_lua_open_module(lua_State *L);
/* True when the value at idx is a pipeline made by pipectl.pipeline{}. */
bool pl_lua_is_pipeline(lua_State *L, int idx);
/* The line recorded for a table made by pipectl.buffer{} / pipectl.stage{}, or 0. */
int pl_lua_marked_line(lua_State *L, int idx);

/* Builder objects keep their contents in plain fields, read by the front end and the lua stage:
 *   P._decl  the table given to pipectl.pipeline (or an empty table)
 *   P._line  the line of the pipectl.pipeline call
 *   P._items array of {what = "buffer"|"stage", line = N, name = NAME|nil, t = PROPS} in call
 *            order. */

#endif
