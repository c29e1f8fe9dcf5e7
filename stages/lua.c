/* lua: a user's Lua function called once per batch with typed views of its buffers. One sandboxed
 * lua_State per host worker (Lua states are not thread-safe); the script is loaded in each. A
 * pipeline.lua stage's `fn` is found again by running the pipeline script in each worker state:
 * the pipectl module only records there, and the stage's function is looked up by stage name. */
#include "pl_kind_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "pl_lua.h"

static const pl_key pl__lua_keys[] = {
    {"script", PL_KEY_PATH, NULL, NULL, "Lua file defining the function (or give `code`)"},
    {"code", PL_KEY_STR, NULL, NULL, "inline Lua code defining the function"},
    {"function", PL_KEY_STR, NULL, "run", "name of the global function to call per batch"},
    {"instructions", PL_KEY_INT, NULL, "100000000", "instruction budget per call"},
    {"memory", PL_KEY_INT, NULL, "67108864", "memory cap of the stage's Lua state, bytes"},
    {"time_limit_ms", PL_KEY_INT, NULL, "10000",
     "wall-clock limit per call, milliseconds (0: none); C calls count too"},
    {"args", PL_KEY_STR, NULL, NULL, "free text handed to the function as opts.args"},
    {"fn", PL_KEY_FUNC, "script|code", NULL,
     "pipeline.lua only: the function itself, instead of script/code and function"},
    PL_KIND_PARALLEL_KEY,
    {NULL, 0, NULL, NULL, NULL},
};

/* Parsed options (st->priv, spec arena). */
typedef struct pl__lua_opts {
    const char *path; /* script resolved against spec->dir, or NULL for `code` */
    const char *text; /* the script or code (arena) */
    size_t len;
    const char *chunk;    /* "@script as written" or "=code" */
    const char *function; /* given explicitly, or NULL */
    int64_t instructions;
    int64_t memory;
    int64_t time_limit_ms;
} pl__lua_opts;

typedef struct pl__lua_view_decl {
    int buffer;
    bool writable;
} pl__lua_view_decl;

typedef struct pl__lua_worker {
    pl_lua *lx;
    int fn_ref;
    uint64_t epoch; /* bumped after each call: older views stop working */
} pl__lua_worker;

/* Per-run state (open/close). */
typedef struct pl__lua_run {
    const pl_spec *spec;
    const pl_stage *st;
    const pl__lua_opts *o;
    int64_t batches;
    uint64_t seed;
    int n_workers;
    pl__lua_worker *workers;
    int n_views;
    pl__lua_view_decl *views;
} pl__lua_run;

/* ---- check time ---- */

static int pl__syntax_check(lua_State *L)
{
    const pl__lua_opts *o = lua_touserdata(L, 1);
    pl_lua_load_text(L, o->text, o->len, o->chunk);
    return 0;
}

static pl_status pl__lua_bind(pl_spec *spec, pl_stage *st, pl_error *err)
{
    PL_CHECK(pl_kind_bind_parallel(st, err));
    const pl_opt *script = pl_stage_opt(st, "script"), *code = pl_stage_opt(st, "code");
    if (script && code)
        return pl_error_at(err, PL_EINPUT, code->pos,
                           "stage '%s': give either `script` or `code`, not both", st->name);
    if (!script && !code)
        return pl_error_at(err, PL_EINPUT, st->pos,
                           "stage '%s': a lua stage needs `script: file.lua` or `code: \"function "
                           "run(batch, opts, bufs) ... end\"`",
                           st->name);
    pl__lua_opts *o = pl_spec_alloc(spec, sizeof *o);
    if (!o) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    PL_CHECK(pl_opt_get_int(st, "instructions", PL_LUA_DEFAULT_INSTRUCTIONS, 1, INT64_MAX,
                            &o->instructions, err));
    PL_CHECK(pl_opt_get_int(st, "memory", (int64_t)PL_LUA_DEFAULT_MEMORY,
                            (int64_t)PL_LUA_MIN_MEMORY, INT64_C(1) << 40, &o->memory, err));
    PL_CHECK(pl_opt_get_int(st, "time_limit_ms", PL_LUA_DEFAULT_TIME_LIMIT_MS, 0, INT64_C(1) << 40,
                            &o->time_limit_ms, err));
    o->function = pl_opt_get_str(st, "function", NULL);
    char msg[PL_ERROR_MSG_MAX - 128];
    if (script) {
        const char *s = script->str;
        size_t n = strlen(spec->dir) + strlen(s) + 2;
        char *path = pl_spec_alloc(spec, n);
        char *chunk = pl_spec_alloc(spec, strlen(s) + 2);
        if (!path || !chunk) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
        if (s[0] == '/')
            snprintf(path, n, "%s", s);
        else
            snprintf(path, n, "%s/%s", spec->dir, s);
        snprintf(chunk, strlen(s) + 2, "@%s", s);
        o->path = path;
        o->chunk = chunk;
        char *text = NULL;
        size_t len = 0;
        if (pl_lua_read_file(path, &text, &len, msg, sizeof msg) != PL_OK)
            return pl_error_at(err, PL_EINPUT, script->val_pos, "stage '%s': %s", st->name, msg);
        o->text = pl_spec_strndup(spec, text, len);
        o->len = len;
        free(text);
        if (!o->text) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    } else {
        o->text = code->str;
        o->len = strlen(code->str);
        o->chunk = "=code";
    }
    st->priv = o;

    /* Syntax errors (and binary chunks) now, at `pipectl check`, not at batch 0. */
    pl_lua *lx = NULL;
    PL_CHECK(pl_lua_new((size_t)o->memory, NULL, NULL, &lx, err));
    pl_status s = pl_lua_call(lx, pl__syntax_check, o, o->instructions, false, msg, sizeof msg);
    pl_lua_free(lx);
    if (s != PL_OK)
        return pl_error_at(err, PL_EINPUT, script ? script->val_pos : code->val_pos,
                           "stage '%s': %s", st->name, msg);
    return PL_OK;
}

static pl_status pl__lua_validate(const pl_spec *spec, const pl_stage *st, pl_error *err)
{
    const pl_ref *lists[2] = {st->reads, st->writes};
    int counts[2] = {st->n_reads, st->n_writes};
    for (int l = 0; l < 2; l++)
        for (int i = 0; i < counts[l]; i++) {
            const pl_ref *r = &lists[l][i];
            if (r->index < 0) continue;
            const pl_buffer *b = &spec->buffers[r->index];
            if (b->where != PL_HOST)
                return pl_error_at(err, PL_EINPUT, r->pos,
                                   "stage '%s': buffer '%s' is on the device; a lua stage sees "
                                   "only host buffers (copy it to a host buffer with a d2h stage "
                                   "first)",
                                   st->name, b->name);
        }
    return PL_OK;
}

/* ---- run time ---- */

/* Pushes the stage function found in a pipeline (P or a declarative table) for `stage`, or
 * nothing; returns whether it pushed. */
static bool pl__find_in_list(lua_State *L, int list, const char *stage, bool items)
{
    lua_Integer n = lua_type(L, list) == LUA_TTABLE ? (lua_Integer)lua_rawlen(L, list) : 0;
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, list, i);
        if (items && lua_type(L, -1) == LUA_TTABLE) {
            lua_getfield(L, -1, "t");
            lua_remove(L, -2);
        }
        if (lua_type(L, -1) == LUA_TTABLE) {
            lua_getfield(L, -1, "name");
            bool match = lua_type(L, -1) == LUA_TSTRING && strcmp(lua_tostring(L, -1), stage) == 0;
            lua_pop(L, 1);
            if (match && lua_getfield(L, -1, "fn") == LUA_TFUNCTION) {
                lua_remove(L, -2);
                return true;
            }
            if (match) lua_pop(L, 1);
        }
        lua_pop(L, 1);
    }
    return false;
}

static bool pl__find_stage_fn(lua_State *L, int r, const char *stage)
{
    if (lua_type(L, r) != LUA_TTABLE) return false;
    int top = lua_gettop(L);
    if (pl_lua_is_pipeline(L, r)) {
        lua_getfield(L, r, "_items");
        if (pl__find_in_list(L, top + 1, stage, true)) {
            lua_remove(L, -2);
            return true;
        }
        lua_settop(L, top);
        lua_getfield(L, r, "_decl");
        r = top + 1;
    }
    if (lua_type(L, r) == LUA_TTABLE) {
        lua_getfield(L, r, "stages");
        if (pl__find_in_list(L, lua_gettop(L), stage, false)) {
            lua_replace(L, top + 1);
            lua_settop(L, top + 1);
            return true;
        }
    }
    lua_settop(L, top);
    return false;
}

typedef struct pl__load_arg {
    const pl__lua_run *run;
    pl__lua_worker *w;
} pl__load_arg;

/* Loads the script in a worker state and keeps the stage function in the registry. */
static int pl__load_fn(lua_State *L)
{
    pl__load_arg *a = lua_touserdata(L, 1);
    const pl__lua_opts *o = a->run->o;
    const char *stage = a->run->st->name;
    pl_lua_load_text(L, o->text, o->len, o->chunk);
    lua_call(L, 0, 1);
    int r = lua_gettop(L);
    const char *what = o->function ? o->function : "run";
    if (o->function) {
        lua_getglobal(L, o->function);
    } else if (lua_type(L, r) == LUA_TFUNCTION) {
        lua_pushvalue(L, r);
    } else if (!pl__find_stage_fn(L, r, stage)) {
        lua_getglobal(L, "run");
    }
    if (lua_type(L, -1) != LUA_TFUNCTION)
        return luaL_error(L,
                          "%s defines no function '%s' for the stage: define `function %s(batch, "
                          "opts, bufs) ... end`%s",
                          o->chunk + 1, what, what,
                          o->function ? "" : ", return a function, or set `function:`");
    a->w->fn_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    return 0;
}

static pl_status pl__lua_close(const pl_run_env *env, const pl_stage *st, void *state,
                               int64_t completed, bool failed, pl_error *err);

static pl_status pl__lua_open(const pl_run_env *env, const pl_stage *st, void **state,
                              pl_error *err)
{
    *state = NULL;
    const pl__lua_opts *o = st->priv;
    if (!o)
        return pl_error_set(err, PL_ERUNTIME, "stage '%s': not checked (bind not run)", st->name);
    pl__lua_run *r = calloc(1, sizeof *r);
    if (!r) return pl_error_set(err, PL_ENOMEM, "stage '%s': out of memory", st->name);
    r->spec = env->spec;
    r->st = st;
    r->o = o;
    r->batches = env->batches;
    r->seed = env->seed;
    r->n_workers = env->workers > 0 ? env->workers : 1;
    r->workers = calloc((size_t)r->n_workers, sizeof *r->workers);
    r->views = calloc((size_t)(st->n_reads + st->n_writes) + 1, sizeof *r->views);
    pl_status s = PL_OK;
    if (!r->workers || !r->views) {
        s = pl_error_set(err, PL_ENOMEM, "stage '%s': out of memory", st->name);
        goto fail;
    }
    /* One view per buffer, reads first, writable when the stage writes it. */
    const pl_ref *lists[2] = {st->reads, st->writes};
    int counts[2] = {st->n_reads, st->n_writes};
    for (int l = 0; l < 2; l++)
        for (int i = 0; i < counts[l]; i++) {
            int b = lists[l][i].index;
            if (b < 0) continue;
            int v = 0;
            while (v < r->n_views && r->views[v].buffer != b)
                v++;
            if (v == r->n_views) r->views[r->n_views++].buffer = b;
            if (l == 1) r->views[v].writable = true;
        }
    for (int w = 0; w < r->n_workers; w++)
        r->workers[w].fn_ref = LUA_NOREF;
    for (int w = 0; w < r->n_workers; w++) {
        PL_CHECK_GOTO(pl_lua_new((size_t)o->memory, "raise `instructions`", "raise `memory`",
                                 &r->workers[w].lx, err),
                      s, fail);
        PL_CHECK_GOTO(
            pl_lua_watch(r->workers[w].lx, o->time_limit_ms, "raise `time_limit_ms`", err), s,
            fail);
        pl__load_arg a = {r, &r->workers[w]};
        char msg[PL_ERROR_MSG_MAX - 128];
        if (pl_lua_call(r->workers[w].lx, pl__load_fn, &a, o->instructions, true, msg,
                        sizeof msg) != PL_OK) {
            s = pl_error_set(err, PL_ELUA, "stage '%s': loading the script: %s", st->name, msg);
            goto fail;
        }
    }
    *state = r;
    return PL_OK;
fail:
    pl__lua_close(env, st, r, 0, true, NULL);
    return s;
}

static pl_status pl__lua_close(const pl_run_env *env, const pl_stage *st, void *state,
                               int64_t completed, bool failed, pl_error *err)
{
    pl__lua_run *r = state;
    if (!r) return PL_OK;
    for (int w = 0; r->workers && w < r->n_workers; w++)
        pl_lua_free(r->workers[w].lx);
    free(r->workers);
    free(r->views);
    free(r);
    return PL_OK;
}

typedef struct pl__batch_arg {
    const pl__lua_run *run;
    pl__lua_worker *w;
    const pl_stage_ctx *ctx;
} pl__batch_arg;

/* opts: the stage's options, typed by the key table, plus name, batches and seed. */
static void pl__push_opts(lua_State *L, const pl__lua_run *r)
{
    const pl_stage *st = r->st;
    lua_createtable(L, 0, st->n_opts + 3);
    lua_pushstring(L, st->name);
    lua_setfield(L, -2, "name");
    lua_pushinteger(L, (lua_Integer)r->batches);
    lua_setfield(L, -2, "batches");
    lua_pushinteger(L, (lua_Integer)r->seed);
    lua_setfield(L, -2, "seed");
    for (int i = 0; i < st->n_opts; i++) {
        const pl_opt *o = &st->opts[i];
        const pl_key *k = pl_kind_key(st->kind, o->key);
        if (o->is_list) {
            lua_createtable(L, o->n_items, 0);
            for (int j = 0; j < o->n_items; j++) {
                lua_pushstring(L, o->items[j]);
                lua_rawseti(L, -2, j + 1);
            }
        } else if (k && (k->type == PL_KEY_INT || k->type == PL_KEY_INT_OR_INTS)) {
            lua_pushinteger(L, (lua_Integer)strtoll(o->str, NULL, 0));
        } else if (k && k->type == PL_KEY_NUM) {
            lua_pushnumber(L, strtod(o->str, NULL));
        } else if (k && k->type == PL_KEY_BOOL) {
            lua_pushboolean(L, strcmp(o->str, "true") == 0);
        } else {
            lua_pushstring(L, o->str);
        }
        lua_setfield(L, -2, o->key);
    }
}

static int pl__batch(lua_State *L)
{
    pl__batch_arg *a = lua_touserdata(L, 1);
    const pl__lua_run *r = a->run;
    const pl_stage_ctx *ctx = a->ctx;
    luaL_checkstack(L, 8, NULL);
    /* math.random: seeded from the run seed, the stage and the batch, never from the worker. */
    lua_getfield(L, LUA_REGISTRYINDEX, PL_LUA_RANDOMSEED);
    lua_pushinteger(
        L, (lua_Integer)(r->seed ^ ((uint64_t)r->st->index * UINT64_C(0x9e3779b97f4a7c15))));
    lua_pushinteger(L, (lua_Integer)ctx->batch);
    lua_call(L, 2, 0);
    lua_rawgeti(L, LUA_REGISTRYINDEX, a->w->fn_ref);
    lua_pushinteger(L, (lua_Integer)ctx->batch);
    pl__push_opts(L, r);
    lua_createtable(L, 0, r->n_views);
    for (int v = 0; v < r->n_views; v++) {
        const pl_buffer *b = &r->spec->buffers[r->views[v].buffer];
        void *data = ctx->bufs ? ctx->bufs[b->index] : NULL;
        if (!data) return luaL_error(L, "buffer '%s' has no host memory here", b->name);
        pl_lua_view_push(L, data, b->dtype, b->rank, b->shape, r->views[v].writable, b->name,
                         r->st->name, &a->w->epoch);
        lua_setfield(L, -2, b->name);
    }
    pl_lua_bufs_seal(L, -1);
    lua_call(L, 3, 0);
    return 0;
}

static pl_status pl__lua_run_host(pl_stage_ctx *ctx, pl_error *err)
{
    pl__lua_run *r = ctx->state;
    if (!r || ctx->worker < 0 || ctx->worker >= r->n_workers)
        return pl_error_set(err, PL_ERUNTIME, "error: worker %d has no Lua state (%d were opened)",
                            ctx->worker, r ? r->n_workers : 0);
    pl__lua_worker *w = &r->workers[ctx->worker];
    pl__batch_arg a = {r, w, ctx};
    char msg[PL_ERROR_MSG_MAX - 128];
    pl_status s = pl_lua_call(w->lx, pl__batch, &a, r->o->instructions, true, msg, sizeof msg);
    w->epoch++;
    /* A stop signal, not a failure of the script: the run ends as interrupted (the executor
     * names the stage and the batch). */
    if (s == PL_EINTR)
        return pl_error_set(err, PL_EINTR, "error: interrupted while in Lua: %s", msg);
    if (s != PL_OK) {
        /* Named here, not by the executor: the message is the Lua one, with no "error: ". */
        pl_error_set(err, PL_ELUA, "stage '%s', batch %lld: %s", ctx->stage->name,
                     (long long)ctx->batch, msg);
        return pl_error_tag(err, ctx->stage->name, ctx->batch);
    }
    return PL_OK;
}

const pl_kind pl_kind_lua = {
    .name = "lua",
    .engine = PL_ENGINE_HOST,
    .keys = pl__lua_keys,
    .doc = "a Lua function over the batch's host buffers",
    .bind = pl__lua_bind,
    .validate = pl__lua_validate,
    .open = pl__lua_open,
    .close = pl__lua_close,
    .run_host = pl__lua_run_host,
};
