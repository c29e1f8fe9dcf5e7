/* pl_lua: sandboxed Lua states (allow-listed libraries, text chunks only), the memory-capped
 * allocator, the instruction-budget hook and protected calls that report the Lua line. The
 * sandbox follows Redis scripting (script_lua.c) and lua.c: every call into Lua is a lua_pcall
 * with a message handler, and budget or memory errors cannot be caught by the script. */
#include "pl_lua.h"
#include "pl_intr.h"
#include "pl_lua_match.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <lauxlib.h>
#include <lualib.h>

/* The count hook runs every PL__STEP instructions: cheap (one C call per 10000 instructions) and
 * the budget is still exact, since the last step is shortened to what is left. */
#define PL__STEP 10000
/* The largest block Lua's stack can be ((LUAI_MAXSTACK + EXTRA_STACK) * sizeof(StackValue), with
 * margin). See pl__peek_where. */
#define PL__MAX_STACK_BYTES ((size_t)24 << 20)

struct pl_lua {
    lua_State *L;
    size_t used; /* bytes Lua holds now */
    size_t cap;  /* the `memory` cap */
    size_t hard; /* cap plus a little slack used while the cap error is being raised */
    int64_t budget, counted;
    int step;    /* the count the hook is set to now */
    int in_call; /* inside pl_lua_call: the hook and the allocator may act */
    int over;    /* an allocation went past the cap: the hook raises at the next instruction */
    int fatal;   /* a budget or memory error was raised: pcall wrappers re-raise it */
    /* The last refused allocation, to recognise Lua's retry after its emergency collection. */
    const void *ref_ptr;
    size_t ref_osize, ref_nsize;
    size_t refused; /* size of a refused allocation that may end the call (0: none) */
    const char *hint_instr, *hint_mem;
    char where[160];     /* "chunk:line" of a refused allocation, when known */
    char fatal_msg[384]; /* the message of the budget or memory error */
    /* Wall-clock limit (pl_lua_watch). The watchdog thread reads `active`, `deadline` and
     * `thread` while the owner runs a call: hence atomics. */
    int64_t limit_ns;         /* per call; 0: none */
    const char *hint_time;    /* "raise `time_limit_ms`" */
    _Atomic int64_t deadline; /* monotonic ns when the current call must end; 0: none */
    _Atomic int active;       /* inside a watched call */
    _Atomic int kicking;      /* the watchdog is signalling the thread: it must not exit yet */
    _Atomic pthread_t thread; /* the thread running it */
    bool watched;             /* registered with the watchdog */
    int stopped;              /* 1: interrupted (pl_lua_interrupt), 2: over its time limit */
};

/* pl_lua_interrupt is the process's interrupt (pl_intr.h): set from signal handlers, read by the
 * hook and the watchdog on other threads. */
#define PL__INTERRUPTED() pl_intr_level()

/* The state the calling thread is running a call of, for the kick signal's handler. */
static _Thread_local pl_lua *pl__current;

static int64_t pl__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static pl_lua *pl__lx(lua_State *L)
{
    void *ud = NULL;
    lua_getallocf(L, &ud);
    return ud;
}

/* ------------------------------------------------------------------------------------------ */
/* Memory cap                                                                                  */

/* Where the refused allocation happened, for the message. Safe while the stack is not being
 * moved: Lua <= 5.4.4 allocates a new stack before touching the old one, but 5.4.5+ turns stack
 * pointers into offsets before reallocating, so there we only look when the block is too big to
 * be a stack. lua_getstack/lua_getinfo("Sl") only read. */
static void pl__peek_where(pl_lua *lx, size_t nsize)
{
#if LUA_VERSION_RELEASE_NUM > 50404
    if (nsize <= PL__MAX_STACK_BYTES) return;
#else
    (void)nsize;
#endif
    if (!lx->L || !lx->in_call) return;
    lua_Debug ar;
    for (int level = 0; lua_getstack(lx->L, level, &ar); level++) {
        if (!lua_getinfo(lx->L, "Sl", &ar)) break;
        if (ar.currentline > 0) {
            snprintf(lx->where, sizeof lx->where, "%s:%d", ar.short_src, ar.currentline);
            return;
        }
    }
}

static void pl__hook(lua_State *L, lua_Debug *ar);

/* The cap: a growth past it is refused once (Lua then runs an emergency collection, which calls no
 * finalizers, and retries); if the retry is still past the cap it is allowed within the slack and
 * the hook raises a normal error at the next instruction, with its line. Past the slack, or when
 * Lua does not retry, the allocation fails and Lua raises LUA_ERRMEM. */
static void *pl__alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    pl_lua *lx = ud;
    size_t old = ptr ? osize : 0;
    if (nsize == 0) {
        free(ptr);
        lx->used -= old;
        return NULL;
    }
    if (nsize > old && lx->used + (nsize - old) > lx->cap) {
        bool retry = ptr == lx->ref_ptr && osize == lx->ref_osize && nsize == lx->ref_nsize;
        if (!retry || lx->used + (nsize - old) > lx->hard || !lx->in_call) {
            lx->ref_ptr = ptr;
            lx->ref_osize = osize;
            lx->ref_nsize = nsize;
            lx->refused = nsize;
            if (retry || !lx->where[0]) pl__peek_where(lx, nsize);
            return NULL;
        }
        lx->ref_ptr = NULL;
        lx->ref_nsize = 0;
        lx->over = 1;
        lx->step = 1;
        lua_sethook(lx->L, pl__hook, LUA_MASKCOUNT,
                    1); /* async-safe: lua.c calls it from signals */
    }
    void *p = realloc(ptr, nsize);
    if (!p) return NULL;
    lx->used = lx->used - old + nsize;
    return p;
}

/* ------------------------------------------------------------------------------------------ */
/* Instruction budget                                                                          */

static void pl__set_step(pl_lua *lx)
{
    int64_t left = lx->budget - lx->counted;
    lx->step = left > PL__STEP ? PL__STEP : left < 1 ? 1 : (int)left;
    lua_sethook(lx->L, pl__hook, LUA_MASKCOUNT, lx->step);
}

static void pl__raise_fatal(lua_State *L, pl_lua *lx)
{
    lx->step = 1000; /* a handler that loops after the error is stopped again soon */
    lua_sethook(L, pl__hook, LUA_MASKCOUNT, lx->step);
    lua_pushstring(L, lx->fatal_msg);
    lua_error(L);
}

/* Stops that do not depend on instructions: a signal, or the wall clock (a loop of C calls runs
 * few instructions but may take long). `ar` describes the code to blame (its "Sl" filled in
 * here when a stop is due). */
static void pl__check_clock(lua_State *L, pl_lua *lx, lua_Debug *ar, bool fill)
{
    int64_t dl = atomic_load_explicit(&lx->deadline, memory_order_relaxed);
    int intr = PL__INTERRUPTED();
    if (intr || (dl && pl__now_ns() >= dl)) {
        if (fill) lua_getinfo(L, "Sl", ar);
        lx->stopped = intr ? 1 : 2;
        if (lx->stopped == 1)
            snprintf(lx->fatal_msg, sizeof lx->fatal_msg, "%s:%d: interrupted", ar->short_src,
                     ar->currentline);
        else
            snprintf(lx->fatal_msg, sizeof lx->fatal_msg,
                     "%s:%d: time limit of %lld ms exceeded (%s)", ar->short_src, ar->currentline,
                     (long long)(lx->limit_ns / 1000000), lx->hint_time);
        lx->fatal = 1;
        pl__raise_fatal(L, lx);
    }
}

static void pl__check_budget(lua_State *L, pl_lua *lx, lua_Debug *ar, bool fill)
{
    if (lx->counted >= lx->budget) {
        if (fill) lua_getinfo(L, "Sl", ar);
        snprintf(lx->fatal_msg, sizeof lx->fatal_msg,
                 "%s:%d: instruction budget of %lld exceeded (%s)", ar->short_src, ar->currentline,
                 (long long)lx->budget, lx->hint_instr);
        lx->fatal = 1;
        pl__raise_fatal(L, lx);
    }
}

static void pl__hook(lua_State *L, lua_Debug *ar)
{
    pl_lua *lx = pl__lx(L);
    if (lx->fatal) pl__raise_fatal(L, lx);
    lx->counted += lx->step;
    /* The watchdog makes this hook run at the next instruction when a stop is due. */
    pl__check_clock(L, lx, ar, true);
    if (lx->over) {
        lx->over = 0;
        if (lx->used > lx->cap) {
            lua_getinfo(L, "Sl", ar);
            snprintf(lx->fatal_msg, sizeof lx->fatal_msg,
                     "%s:%d: memory cap of %zu bytes exceeded (%s)", ar->short_src, ar->currentline,
                     lx->cap, lx->hint_mem);
            lx->fatal = 1;
            pl__raise_fatal(L, lx);
        }
    }
    pl__check_budget(L, lx, ar, true);
    pl__set_step(lx);
}

void pl_lua_charge(lua_State *L, int64_t steps)
{
    pl_lua *lx = pl__lx(L);
    if (!lx->in_call) return;
    if (lx->fatal) pl__raise_fatal(L, lx);
    lx->counted += steps;
    int64_t dl = atomic_load_explicit(&lx->deadline, memory_order_relaxed);
    if (lx->counted < lx->budget && !PL__INTERRUPTED() && !(dl && pl__now_ns() >= dl)) return;
    /* Blame the nearest Lua code: level 0 is the C function itself. */
    lua_Debug ar;
    bool found = false;
    for (int level = 1; !found && lua_getstack(L, level, &ar); level++)
        found = lua_getinfo(L, "Sl", &ar) && ar.currentline > 0;
    if (!found) {
        snprintf(ar.short_src, sizeof ar.short_src, "?");
        ar.currentline = 0;
    }
    pl__check_clock(L, lx, &ar, false);
    pl__check_budget(L, lx, &ar, false);
}

static void pl__format_refused(pl_lua *lx)
{
    if (lx->where[0])
        snprintf(lx->fatal_msg, sizeof lx->fatal_msg,
                 "%s: memory cap of %zu bytes exceeded: an allocation of %zu bytes was refused "
                 "(%s)",
                 lx->where, lx->cap, lx->refused, lx->hint_mem);
    else
        snprintf(lx->fatal_msg, sizeof lx->fatal_msg,
                 "memory cap of %zu bytes exceeded: an allocation of %zu bytes was refused (%s)",
                 lx->cap, lx->refused, lx->hint_mem);
}

/* A refused allocation that the script caught (pcall(string.rep, ...)) still ends the call. */
static void pl__check_fatal_after_catch(lua_State *L, pl_lua *lx, bool failed)
{
    if (!lx->fatal && failed && lx->refused) {
        pl__format_refused(lx);
        lx->fatal = 1;
    }
    if (lx->fatal) pl__raise_fatal(L, lx);
    if (!failed) {
        lx->refused = 0;
        lx->where[0] = '\0';
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Sandbox                                                                                      */

/* pcall / xpcall: the original, then re-raise budget and memory errors. */
static int pl__sb_pcall(lua_State *L)
{
    pl_lua *lx = pl__lx(L);
    int n = lua_gettop(L);
    luaL_checkstack(L, 2, NULL);
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, n, LUA_MULTRET);
    pl__check_fatal_after_catch(L, lx, !lua_toboolean(L, 1));
    return lua_gettop(L);
}

/* xpcall's handler is skipped for budget and memory errors: those are raised from the hook, where
 * Lua runs handlers with hooks off, so a looping handler could never be stopped. */
static int pl__sb_xpcall_handler(lua_State *L)
{
    if (pl__lx(L)->fatal) return 1;
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, 1);
    return 1;
}

static int pl__sb_xpcall(lua_State *L)
{
    luaL_checktype(L, 2, LUA_TFUNCTION);
    lua_pushvalue(L, 2);
    lua_pushcclosure(L, pl__sb_xpcall_handler, 1);
    lua_replace(L, 2);
    return pl__sb_pcall(L);
}

/* setmetatable: no __gc. Lua runs finalizers with hooks off, so the budget could not stop one. */
static int pl__sb_setmetatable(lua_State *L)
{
    if (lua_type(L, 2) == LUA_TTABLE) {
        lua_pushliteral(L, "__gc");
        if (lua_rawget(L, 2) != LUA_TNIL)
            return luaL_error(L, "__gc metamethods are not allowed in the pipectl sandbox (Lua "
                                 "runs finalizers outside the instruction budget)");
        lua_pop(L, 1);
    }
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, 1);
    return 1;
}

/* load: text chunks only, whatever mode the caller asks for. */
static int pl__sb_load(lua_State *L)
{
    pl_lua *lx = pl__lx(L);
    int n = lua_gettop(L);
    if (lua_type(L, 1) == LUA_TSTRING) {
        size_t len;
        const char *s = lua_tolstring(L, 1, &len);
        if (len > 0 && s[0] == LUA_SIGNATURE[0])
            return luaL_error(L, "load: binary (precompiled) chunks are not allowed in the pipectl "
                                 "sandbox; pass Lua source text");
    }
    luaL_checkstack(L, 5, NULL);
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_pushvalue(L, 1);
    if (n >= 2)
        lua_pushvalue(L, 2);
    else
        lua_pushnil(L);
    lua_pushliteral(L, "t");
    if (n >= 4) lua_pushvalue(L, 4);
    lua_call(L, n >= 4 ? 4 : 3, 2);
    pl__check_fatal_after_catch(L, lx, lua_isnil(L, -2));
    if (lua_isnil(L, -2) && lua_type(L, -1) == LUA_TSTRING &&
        strstr(lua_tostring(L, -1), "attempt to load a binary chunk"))
        return luaL_error(L, "load: binary (precompiled) chunks are not allowed in the pipectl "
                             "sandbox; pass Lua source text");
    return 2;
}

static int pl__sb_print(lua_State *L)
{
    int n = lua_gettop(L);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (int i = 1; i <= n; i++) {
        size_t len;
        const char *s = luaL_tolstring(L, i, &len);
        if (i > 1) luaL_addchar(&b, '\t');
        luaL_addvalue(&b);
        (void)s;
    }
    luaL_addchar(&b, '\n');
    luaL_pushresult(&b);
    size_t len;
    const char *s = lua_tolstring(L, -1, &len);
    fwrite(s, 1, len, stderr); /* stdout carries `pipectl plan` and friends */
    return 0;
}

static int pl__sb_denied(lua_State *L)
{
    return luaL_error(L, "%s is not available in the pipectl sandbox (%s)",
                      lua_tostring(L, lua_upvalueindex(1)), lua_tostring(L, lua_upvalueindex(2)));
}

/* __index of a guarded library table (io, os, debug, package): name the missing function. */
static int pl__sb_guard_index(lua_State *L)
{
    const char *lib = lua_tostring(L, lua_upvalueindex(1));
    const char *why = lua_tostring(L, lua_upvalueindex(2));
    if (lua_type(L, 2) != LUA_TSTRING) return 0;
    return luaL_error(L, "%s.%s is not available in the pipectl sandbox (%s)", lib,
                      lua_tostring(L, 2), why);
}

static int pl__sb_require(lua_State *L)
{
    const char *name = luaL_checkstring(L, 1);
    if (strcmp(name, "pipectl") == 0) {
        lua_getglobal(L, "pipectl");
        return 1;
    }
    return luaL_error(L,
                      "require '%s': modules cannot be loaded in the pipectl sandbox (only "
                      "'pipectl' is available; put helper code in the same script)",
                      name);
}

static void pl__denied(lua_State *L, const char *table, const char *name, const char *why)
{
    if (table) {
        lua_getglobal(L, table);
        lua_pushfstring(L, "%s.%s", table, name);
    } else {
        lua_pushstring(L, name);
    }
    lua_pushstring(L, why);
    lua_pushcclosure(L, pl__sb_denied, 2);
    if (table) {
        lua_setfield(L, -2, name);
        lua_pop(L, 1);
    } else {
        lua_setglobal(L, name);
    }
}

static void pl__guard_table(lua_State *L, const char *lib, const char *why)
{
    lua_getglobal(L, lib);
    if (!lua_istable(L, -1)) {
        lua_pop(L, 1);
        lua_newtable(L);
        lua_pushvalue(L, -1);
        lua_setglobal(L, lib);
    }
    lua_newtable(L); /* metatable */
    lua_pushstring(L, lib);
    lua_pushstring(L, why);
    lua_pushcclosure(L, pl__sb_guard_index, 2);
    lua_setfield(L, -2, "__index");
    lua_pushliteral(L, "locked");
    lua_setfield(L, -2, "__metatable");
    lua_setmetatable(L, -2);
    lua_pop(L, 1);
}

static void pl__wrap(lua_State *L, const char *name, lua_CFunction fn)
{
    lua_getglobal(L, name);
    lua_pushcclosure(L, fn, 1);
    lua_setglobal(L, name);
}

static int pl__setup(lua_State *L)
{
    static const luaL_Reg libs[] = {
        {LUA_GNAME, luaopen_base},       {LUA_STRLIBNAME, luaopen_string},
        {LUA_TABLIBNAME, luaopen_table}, {LUA_MATHLIBNAME, luaopen_math},
        {LUA_UTF8LIBNAME, luaopen_utf8}, {NULL, NULL},
    };
    for (const luaL_Reg *l = libs; l->func; l++) {
        luaL_requiref(L, l->name, l->func, 1);
        lua_pop(L, 1);
    }
    /* os: only the clock and the time; the rest of the library is dropped. */
    luaL_requiref(L, LUA_OSLIBNAME, luaopen_os, 0);
    lua_newtable(L);
    lua_getfield(L, -2, "clock");
    lua_setfield(L, -2, "clock");
    lua_getfield(L, -2, "time");
    lua_setfield(L, -2, "time");
    lua_setglobal(L, "os");
    lua_pop(L, 1);
    lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    lua_pushnil(L);
    lua_setfield(L, -2, LUA_OSLIBNAME);
    lua_pop(L, 1);

    pl__wrap(L, "pcall", pl__sb_pcall);
    pl__wrap(L, "xpcall", pl__sb_xpcall);
    pl__wrap(L, "setmetatable", pl__sb_setmetatable);
    pl__wrap(L, "load", pl__sb_load);
    lua_pushcfunction(L, pl__sb_print);
    lua_setglobal(L, "print");
    lua_pushcfunction(L, pl__sb_require);
    lua_setglobal(L, "require");
    const char *nofiles = "Lua code cannot read files; put the code in the script";
    pl__denied(L, NULL, "dofile", nofiles);
    pl__denied(L, NULL, "loadfile", nofiles);
    pl__denied(L, "string", "dump", "binary chunks cannot be loaded back");
    pl__guard_table(L, "os", "only os.clock and os.time are");
    pl__guard_table(L, "io", "Lua code reads and writes only the buffers its stage declares");
    pl__guard_table(L, "debug", "the debug library would break the sandbox");
    pl__guard_table(L, "package", "modules cannot be loaded; only require 'pipectl' works");
    pl__guard_table(L, "coroutine", "the sandbox keeps one thread of Lua per state");
    static const pl_lua_meter meter = {pl_lua_charge};
    pl_lua_open_patterns(L, &meter);
    pl_lua_open_module(L);
    /* math.random starts from a fixed seed (stages reseed it per batch: stages/lua.c), so a
     * script gives the same pipeline, and a stage the same results, on every run. */
    lua_getglobal(L, LUA_MATHLIBNAME);
    lua_getfield(L, -1, "randomseed");
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, PL_LUA_RANDOMSEED);
    lua_pushinteger(L, 0);
    lua_call(L, 1, 0);
    lua_pop(L, 1);
    return 0;
}

static int pl__msgh_common(lua_State *L, bool traceback)
{
    const char *msg = lua_tostring(L, 1);
    if (!msg) {
        if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
            msg = lua_tostring(L, -1);
        else
            msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    }
    if (traceback)
        luaL_traceback(L, L, msg, 1);
    else
        lua_pushstring(L, msg);
    return 1;
}

static int pl__msgh(lua_State *L)
{
    return pl__msgh_common(L, false);
}

static int pl__msgh_tb(lua_State *L)
{
    return pl__msgh_common(L, true);
}

pl_status pl_lua_new(size_t memory, const char *hint_instr, const char *hint_mem, pl_lua **out,
                     pl_error *err)
{
    *out = NULL;
    if (memory < PL_LUA_MIN_MEMORY) memory = PL_LUA_MIN_MEMORY;
    pl_lua *lx = calloc(1, sizeof *lx);
    if (!lx) return pl_error_set(err, PL_ENOMEM, "error: out of memory creating a Lua state");
    lx->cap = memory;
    size_t slack = memory / 8 > ((size_t)256 << 10) ? memory / 8 : ((size_t)256 << 10);
    lx->hard = memory + slack;
    lx->hint_instr = hint_instr ? hint_instr : "raise `instructions`";
    lx->hint_mem = hint_mem ? hint_mem : "raise `memory`";
    lx->budget = INT64_C(100000000);
    lx->L = lua_newstate(pl__alloc, lx);
    if (!lx->L) {
        free(lx);
        return pl_error_set(err, PL_ENOMEM, "error: out of memory creating a Lua state");
    }
    char msg[512];
    if (pl_lua_call(lx, pl__setup, NULL, PL_LUA_DEFAULT_INSTRUCTIONS, false, msg, sizeof msg) !=
        PL_OK) {
        pl_lua_free(lx);
        return pl_error_set(err, PL_ELUA, "error: cannot set up a Lua state: %s", msg);
    }
    *out = lx;
    return PL_OK;
}

static void pl__unwatch(pl_lua *lx);

void pl_lua_free(pl_lua *lx)
{
    if (!lx) return;
    if (lx->watched) pl__unwatch(lx);
    if (lx->L) {
        /* Finalizers run at close: give them a fresh budget (their errors become warnings). */
        lx->fatal = 0;
        lx->budget = INT64_C(10000000);
        lx->counted = 0;
        pl__set_step(lx);
        lua_close(lx->L);
    }
    free(lx);
}

lua_State *pl_lua_state(pl_lua *lx)
{
    return lx->L;
}

size_t pl_lua_memory_used(const pl_lua *lx)
{
    return lx->used;
}

pl_status pl_lua_call(pl_lua *lx, lua_CFunction fn, void *arg, int64_t instructions, bool traceback,
                      char *msg, size_t msg_cap)
{
    lua_State *L = lx->L;
    int base = lua_gettop(L);
    lx->fatal = 0;
    lx->over = 0;
    lx->refused = 0;
    lx->where[0] = '\0';
    lx->fatal_msg[0] = '\0';
    lx->budget = instructions > 0 ? instructions : 1;
    lx->counted = 0;
    pl__set_step(lx);
    if (lx->used > lx->cap) lua_gc(L, LUA_GCCOLLECT, 0);
    if (lx->used > lx->cap) {
        snprintf(msg, msg_cap,
                 "the Lua state holds %zu bytes, more than its memory cap of %zu "
                 "(%s)",
                 lx->used, lx->cap, lx->hint_mem);
        return PL_ELUA;
    }
    if (!lua_checkstack(L, 4)) {
        snprintf(msg, msg_cap, "not enough memory for the Lua stack (%s)", lx->hint_mem);
        return PL_ELUA;
    }
    lx->stopped = 0;
    if (lx->watched) {
        if (PL__INTERRUPTED()) {
            snprintf(msg, msg_cap, "interrupted");
            return PL_EINTR;
        }
        pl__current = lx;
        atomic_store_explicit(&lx->thread, pthread_self(), memory_order_relaxed);
        atomic_store_explicit(&lx->deadline, lx->limit_ns ? pl__now_ns() + lx->limit_ns : 0,
                              memory_order_relaxed);
        atomic_store_explicit(&lx->active, 1, memory_order_release);
    }
    lx->in_call = 1;
    lua_pushcfunction(L, traceback ? pl__msgh_tb : pl__msgh);
    lua_pushcfunction(L, fn);
    lua_pushlightuserdata(L, arg);
    int rc = lua_pcall(L, 1, 0, base + 1);
    lx->in_call = 0;
    if (lx->watched) {
        /* Dekker-style with the watchdog (both seq_cst): either it sees the call ended, or we
         * see its kick in progress and wait, so the thread it signals is alive until then. */
        atomic_store(&lx->active, 0);
        while (atomic_load(&lx->kicking))
            ;
        atomic_store_explicit(&lx->deadline, 0, memory_order_relaxed);
        pl__current = NULL;
    }
    pl_status st = PL_OK;
    if (rc != LUA_OK) {
        st = lx->fatal && lx->stopped == 1 ? PL_EINTR : PL_ELUA;
        const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
        if (!lx->fatal && lx->refused && rc == LUA_ERRMEM) {
            pl__format_refused(lx);
            lx->fatal = 1;
        }
        if (lx->fatal) {
            size_t fl = strlen(lx->fatal_msg);
            if (s && strncmp(s, lx->fatal_msg, fl) == 0)
                snprintf(msg, msg_cap, "%s", s);
            else
                snprintf(msg, msg_cap, "%s", lx->fatal_msg);
        } else if (rc == LUA_ERRMEM) {
            snprintf(msg, msg_cap, "not enough memory (the system refused an allocation)");
        } else {
            snprintf(msg, msg_cap, "%s", s ? s : "unknown Lua error");
        }
    }
    lua_settop(L, base);
    lx->fatal = 0;
    lx->over = 0;
    if (rc != LUA_OK) lua_gc(L, LUA_GCCOLLECT, 0); /* give back what the failed call held */
    return st;
}

/* ------------------------------------------------------------------------------------------ */
/* Wall-clock limit and interrupts: one watchdog thread for the process                        */

/* The watchdog sleeps on a condition variable until the earliest deadline of a call in progress,
 * or at most the shortest time limit of the watched states (a call that starts while it sleeps is
 * due no earlier than that), and is woken early by an interrupt (an pl_intr watcher), a state
 * watched or a limit changed. Without time limits and interrupts it sleeps until woken: an idle
 * run pays no wake-ups. For each watched state inside a call that is past its deadline or
 * interrupted, it sends the calling thread PL__KICK_SIGNAL; its handler sets the count hook to
 * fire at the next instruction (lua_sethook is async-signal-safe: lua.c stops scripts on Ctrl-C
 * the same way), and the hook raises. While a call is due the kick is repeated every
 * PL__WD_PERIOD_NS until the call ends, so a kick that lands while the hook resets its step is
 * not lost. A call pays one clock read and a few atomic operations; nothing is done per
 * instruction. */
#define PL__WD_PERIOD_NS 10000000 /* 10 ms */
#define PL__KICK_SIGNAL SIGURG    /* ignored by default: a stray kick does nothing */

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC; set up by pl__install_kick */
    pl_lua **list;
    int n, cap;
    unsigned gen; /* a thread runs while gen == the value it started with */
    bool running;
    pthread_t th;
} pl__wd = {.mu = PTHREAD_MUTEX_INITIALIZER};

static pthread_once_t pl__kick_once = PTHREAD_ONCE_INIT;
static pl_intr_watch pl__wd_intr;      /* wakes the watchdog on an interrupt; added once */
static pl_status pl__wd_setup = PL_OK; /* what pl__install_kick achieved */
static bool pl__wd_told; /* interrupts wake it (else it looks every PL__WD_PERIOD_NS) */

static void pl__on_kick(int sig)
{
    (void)sig;
    pl_lua *lx = pl__current;
    if (lx && lx->in_call && lx->L) {
        lx->step = 1;
        lua_sethook(lx->L, pl__hook, LUA_MASKCOUNT, 1);
    }
}

/* An interrupt was raised (on the relay thread): the watchdog looks again. */
static void pl__wd_wake(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&pl__wd.mu);
    pthread_cond_signal(&pl__wd.cv);
    pthread_mutex_unlock(&pl__wd.mu);
}

static void pl__install_kick(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = pl__on_kick;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(PL__KICK_SIGNAL, &sa, NULL);
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) != 0 || pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0 ||
        pthread_cond_init(&pl__wd.cv, &ca) != 0) {
        pl__wd_setup = PL_ERUNTIME;
        return;
    }
    pthread_condattr_destroy(&ca);
    pl__wd_intr.fn = pl__wd_wake;
    pl__wd_told = pl_intr_watch_add(&pl__wd_intr, NULL) == PL_OK;
}

static void *pl__watchdog(void *arg)
{
    unsigned gen = (unsigned)(uintptr_t)arg;
    pthread_mutex_lock(&pl__wd.mu);
    while (pl__wd.gen == gen) {
        int64_t now = pl__now_ns(), next = INT64_MAX;
        bool intr = PL__INTERRUPTED() != 0, due = false;
        for (int i = 0; i < pl__wd.n; i++) {
            pl_lua *lx = pl__wd.list[i];
            if (lx->limit_ns > 0 && now + lx->limit_ns < next) next = now + lx->limit_ns;
            if (!atomic_load_explicit(&lx->active, memory_order_acquire)) continue;
            int64_t dl = atomic_load_explicit(&lx->deadline, memory_order_relaxed);
            if (!intr && !(dl && now >= dl)) {
                if (dl && dl < next) next = dl;
                continue;
            }
            due = true;
            atomic_store(&lx->kicking, 1);
            if (atomic_load(&lx->active))
                pthread_kill(atomic_load_explicit(&lx->thread, memory_order_relaxed),
                             PL__KICK_SIGNAL);
            atomic_store(&lx->kicking, 0);
        }
        /* Interrupted: a call that started just before it may not be marked active yet. No
         * relay to say so: look every period. */
        if ((due || intr || !pl__wd_told) && now + PL__WD_PERIOD_NS < next)
            next = now + PL__WD_PERIOD_NS;
        if (next == INT64_MAX) {
            pthread_cond_wait(&pl__wd.cv, &pl__wd.mu);
        } else {
            struct timespec until = {(time_t)(next / 1000000000), (long)(next % 1000000000)};
            pthread_cond_timedwait(&pl__wd.cv, &pl__wd.mu, &until);
        }
    }
    pthread_mutex_unlock(&pl__wd.mu);
    return NULL;
}

pl_status pl_lua_watch(pl_lua *lx, int64_t time_limit_ms, const char *hint, pl_error *err)
{
    pthread_once(&pl__kick_once, pl__install_kick);
    if (pl__wd_setup != PL_OK)
        return pl_error_set(err, PL_ERUNTIME,
                            "error: cannot set up the Lua watchdog's condition variable");
    pthread_mutex_lock(&pl__wd.mu);
    lx->limit_ns = time_limit_ms > 0 ? time_limit_ms * 1000000 : 0;
    lx->hint_time = hint ? hint : "raise `time_limit_ms`";
    pthread_cond_signal(&pl__wd.cv); /* a shorter limit: the watchdog's sleep shortens */
    if (lx->watched) {
        pthread_mutex_unlock(&pl__wd.mu);
        return PL_OK;
    }
    pl_status st = PL_OK;
    if (pl__wd.n == pl__wd.cap) {
        int cap = pl__wd.cap ? pl__wd.cap * 2 : 16;
        pl_lua **l = realloc(pl__wd.list, (size_t)cap * sizeof *l);
        if (!l) {
            pthread_mutex_unlock(&pl__wd.mu);
            return pl_error_set(err, PL_ENOMEM, "error: out of memory watching a Lua state");
        }
        pl__wd.list = l;
        pl__wd.cap = cap;
    }
    pl__wd.list[pl__wd.n++] = lx;
    lx->watched = true;
    if (!pl__wd.running) {
        unsigned gen = ++pl__wd.gen;
        if (pthread_create(&pl__wd.th, NULL, pl__watchdog, (void *)(uintptr_t)gen) != 0) {
            pl__wd.n--;
            lx->watched = false;
            st = pl_error_set(err, PL_ERUNTIME, "error: cannot start the Lua watchdog thread: %s",
                              strerror(errno));
        } else {
            pl__wd.running = true;
        }
    }
    pthread_mutex_unlock(&pl__wd.mu);
    return st;
}

/* The last watched state gone: the thread stops (joined here, outside the lock). */
static void pl__unwatch(pl_lua *lx)
{
    pthread_t th;
    bool join = false;
    pthread_mutex_lock(&pl__wd.mu);
    for (int i = 0; i < pl__wd.n; i++)
        if (pl__wd.list[i] == lx) {
            pl__wd.list[i] = pl__wd.list[--pl__wd.n];
            break;
        }
    lx->watched = false;
    if (pl__wd.n == 0 && pl__wd.running) {
        pl__wd.gen++;
        pl__wd.running = false;
        pthread_cond_signal(&pl__wd.cv);
        th = pl__wd.th;
        join = true;
    }
    if (pl__wd.n == 0) {
        free(pl__wd.list);
        pl__wd.list = NULL;
        pl__wd.cap = 0;
    }
    pthread_mutex_unlock(&pl__wd.mu);
    if (join) pthread_join(th, NULL);
}

void pl_lua_interrupt(void)
{
    pl_intr_raise(PL_INTR_STOP);
}

void pl_lua_interrupt_clear(void)
{
    pl_intr_clear();
}

bool pl_lua_interrupted(void)
{
    return PL__INTERRUPTED() != 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Chunks and files                                                                            */

void pl_lua_load_text(lua_State *L, const char *text, size_t len, const char *chunkname)
{
    if (len > 0 && text[0] == LUA_SIGNATURE[0]) {
        char id[LUA_IDSIZE];
        pl_lua_chunkid(id, sizeof id, chunkname);
        luaL_error(L, "%s: binary (precompiled) chunks are not allowed; give Lua source text", id);
        return;
    }
    if (luaL_loadbufferx(L, text, len, chunkname, "t") != LUA_OK) lua_error(L);
}

void pl_lua_chunkid(char *out, size_t cap, const char *source)
{
    /* luaO_chunkid of Lua 5.4 for '=' and '@' sources; LUA_IDSIZE includes the NUL. */
    size_t bufflen = LUA_IDSIZE < cap ? LUA_IDSIZE : cap;
    size_t srclen = strlen(source);
    if (bufflen == 0) return;
    if (*source == '=') {
        size_t n = srclen - 1 <= bufflen - 1 ? srclen - 1 : bufflen - 1;
        memcpy(out, source + 1, n);
        out[n] = '\0';
    } else if (*source == '@') {
        if (srclen - 1 <= bufflen - 1) {
            memcpy(out, source + 1, srclen);
        } else {
            size_t keep = bufflen - 1 - 3;
            memcpy(out, "...", 3);
            memcpy(out + 3, source + 1 + srclen - 1 - keep, keep);
            out[3 + keep] = '\0';
        }
    } else {
        snprintf(out, bufflen, "[string \"%.*s\"]", (int)(bufflen > 15 ? bufflen - 15 : 0), source);
    }
}

pl_status pl_lua_read_file(const char *path, char **out, size_t *len, char *msg, size_t msg_cap)
{
    *out = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(msg, msg_cap, "cannot read '%s': %s", path, strerror(errno));
        return PL_EINPUT;
    }
    /* Only regular files: a FIFO or a device (/dev/stdin, /dev/zero) would block or never end. */
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        snprintf(msg, msg_cap, "cannot read '%s': not a regular file", path);
        fclose(f);
        return PL_EINPUT;
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    pl_status st = PL_OK;
    while (buf) {
        if (n + 1 >= cap) {
            if (cap >= ((size_t)64 << 20)) {
                snprintf(msg, msg_cap, "cannot read '%s': larger than 64 MiB", path);
                st = PL_EINPUT;
                break;
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb) break;
            buf = nb;
            cap *= 2;
        }
        errno = 0;
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) break;
    }
    if (!buf || (st == PL_OK && n + 1 >= cap)) {
        snprintf(msg, msg_cap, "out of memory reading '%s'", path);
        st = PL_ENOMEM;
    } else if (st == PL_OK && ferror(f)) {
        snprintf(msg, msg_cap, "cannot read '%s': %s", path, strerror(errno ? errno : EIO));
        st = PL_EINPUT;
    }
    fclose(f);
    if (st != PL_OK) {
        free(buf);
        return st;
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return PL_OK;
}
