/* pl_lua_test: runs one Lua test script from tests/lua (in a full, trusted Lua state) with a
 * `test` module that reaches into pipectl: views over test memory, fresh sandboxes, the Lua and
 * YAML front ends (as canonical spec dumps) and a small threaded runner for pipelines made of lua
 * stages. Usage: pl_lua_test SCRIPT SOURCE_DIR BUILD_DIR. Exit 0 = pass, 1 = fail, 77 = skipped. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lualib.h>

#include "pl_lua.h"
#include "pl_parse.h"
#include "pl_stage.h"

/* ---- test.view(dtype, shape, writable [, name]) ---- */
static int t_view(lua_State *L)
{
    pl_dtype dt;
    if (!pl_dtype_parse(luaL_checkstring(L, 1), &dt)) return luaL_error(L, "bad dtype");
    luaL_checktype(L, 2, LUA_TTABLE);
    int rank = (int)lua_rawlen(L, 2);
    int64_t shape[PL_MAX_RANK], count = 1;
    for (int d = 0; d < rank && d < PL_MAX_RANK; d++) {
        lua_rawgeti(L, 2, d + 1);
        shape[d] = lua_tointeger(L, -1);
        count *= shape[d];
        lua_pop(L, 1);
    }
    bool writable = lua_isnone(L, 3) || lua_toboolean(L, 3);
    const char *name = luaL_optstring(L, 4, "t");
    size_t bytes = (size_t)count * pl_dtype_size(dt);
    void *mem = lua_newuserdatauv(L, bytes ? bytes : 1, 0);
    memset(mem, 0, bytes);
    int memi = lua_gettop(L);
    pl_lua_view_push(L, mem, dt, rank, shape, writable, name, "test", NULL);
    lua_pushvalue(L, memi);
    lua_setiuservalue(L, -2, 1);
    return 1;
}

/* ---- test.sandbox(code [, {instructions=, memory=, chunk=}]) -> ok, msg ---- */
typedef struct t_sb {
    const char *code;
    size_t len;
    const char *chunk;
} t_sb;

static int t_sb_run(lua_State *L)
{
    t_sb *a = lua_touserdata(L, 1);
    pl_lua_load_text(L, a->code, a->len, a->chunk);
    lua_call(L, 0, 0);
    return 0;
}

static int t_sandbox(lua_State *L)
{
    t_sb a;
    a.code = luaL_checklstring(L, 1, &a.len);
    lua_Integer instr = PL_LUA_DEFAULT_INSTRUCTIONS, mem = (lua_Integer)PL_LUA_DEFAULT_MEMORY;
    a.chunk = "@sandbox.lua";
    if (lua_istable(L, 2)) {
        if (lua_getfield(L, 2, "instructions") == LUA_TNUMBER) instr = lua_tointeger(L, -1);
        if (lua_getfield(L, 2, "memory") == LUA_TNUMBER) mem = lua_tointeger(L, -1);
        if (lua_getfield(L, 2, "chunk") == LUA_TSTRING) a.chunk = lua_tostring(L, -1);
    }
    pl_lua *lx = NULL;
    pl_error err;
    if (pl_lua_new((size_t)mem, NULL, NULL, &lx, &err) != PL_OK)
        return luaL_error(L, "%s", err.msg);
    char msg[PL_ERROR_MSG_MAX];
    pl_status st = pl_lua_call(lx, t_sb_run, &a, instr, false, msg, sizeof msg);
    lua_pushboolean(L, st == PL_OK);
    lua_pushstring(L, st == PL_OK ? "" : msg);
    lua_pushinteger(L, (lua_Integer)pl_lua_memory_used(lx));
    pl_lua_free(lx);
    return 3;
}

/* ---- spec dumps ---- */

static void t_dump(luaL_Buffer *b, const pl_spec *s, bool pos)
{
    char line[512];
#define ADD(...)                                                                                   \
    do {                                                                                           \
        snprintf(line, sizeof line, __VA_ARGS__);                                                  \
        luaL_addstring(b, line);                                                                   \
    } while (0)
    ADD("pipeline %s\nrun batches=%lld depth=%d device=%d seed=%llu\n", s->name,
        (long long)s->run.batches, s->run.depth, s->run.device, (unsigned long long)s->run.seed);
    for (int i = 0; i < s->n_buffers; i++) {
        const pl_buffer *bf = &s->buffers[i];
        ADD("buffer %s where=%s dtype=%s shape=", bf->name, pl_where_name(bf->where),
            pl_dtype_name(bf->dtype));
        for (int d = 0; d < bf->rank; d++)
            ADD(d ? "x%lld" : "%lld", (long long)bf->shape[d]);
        ADD(" persistent=%d init=%d file=%s", bf->persistent, (int)bf->init,
            bf->init_file ? bf->init_file : "-");
        if (pos) ADD(" @%s:%d:%d", bf->pos.file, bf->pos.line, bf->pos.col);
        ADD("\n");
    }
    for (int i = 0; i < s->n_stages; i++) {
        const pl_stage *st = &s->stages[i];
        ADD("stage %s kind=%s", st->name, (st->kind) ? (st->kind)->name : "?");
        if (pos) ADD(" @%s:%d:%d", st->pos.file, st->pos.line, st->pos.col);
        if (st->parent >= 0) ADD(" in=%s", s->stages[st->parent].name);
        if (st->loop)
            ADD(" max=%lld count=%lld while=%s index=%s body=%d", (long long)st->loop->max,
                (long long)st->loop->count, st->loop->cond.name ? st->loop->cond.name : "-",
                st->loop->index.name ? st->loop->index.name : "-", st->loop->n_body);
        const pl_ref *lists[3] = {st->reads, st->writes, st->after};
        int counts[3] = {st->n_reads, st->n_writes, st->n_after};
        const char *names[3] = {"reads", "writes", "after"};
        for (int l = 0; l < 3; l++) {
            if (!counts[l]) continue;
            ADD(" %s=[", names[l]);
            for (int j = 0; j < counts[l]; j++)
                ADD(j ? ",%s" : "%s", lists[l][j].name);
            ADD("]");
        }
        for (int j = 0; j < st->n_opts; j++) {
            const pl_opt *o = &st->opts[j];
            if (!o->is_list) {
                ADD(" %s=%s", o->key, o->str);
                continue;
            }
            ADD(" %s=[", o->key);
            for (int k = 0; k < o->n_items; k++) {
                if (k) ADD(",");
                if (o->item_tags && o->item_tags[k])
                    ADD("{%s:%s}", o->item_tags[k], o->items[k]);
                else
                    ADD("%s", o->items[k]);
            }
            ADD("]");
        }
        ADD("\n");
    }
#undef ADD
}

static int t_load(lua_State *L, bool yaml)
{
    size_t len;
    const char *name = luaL_checkstring(L, 1);
    const char *text = luaL_checklstring(L, 2, &len);
    bool pos = lua_toboolean(L, 3);
    pl_spec *spec = NULL;
    pl_error err;
    pl_status st = yaml ? pl_yaml_load_string(name, text, len, &spec, &err)
                        : pl_lua_load_string(name, text, len, &spec, &err);
    if (st != PL_OK) {
        lua_pushnil(L);
        lua_pushstring(L, err.msg);
        return 2;
    }
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    t_dump(&b, spec, pos);
    pl_spec_free(spec);
    luaL_pushresult(&b);
    return 1;
}

static int t_load_lua(lua_State *L)
{
    return t_load(L, false);
}

static int t_load_yaml(lua_State *L)
{
    return t_load(L, true);
}

/* test.load_file(path) -> dump | nil, err (by extension) */
static int t_load_file(lua_State *L)
{
    pl_spec *spec = NULL;
    pl_error err;
    if (pl_load_file(luaL_checkstring(L, 1), &spec, &err) != PL_OK) {
        lua_pushnil(L);
        lua_pushstring(L, err.msg);
        return 2;
    }
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    t_dump(&b, spec, false);
    pl_spec_free(spec);
    luaL_pushresult(&b);
    return 1;
}

/* test.check(path) -> true | nil, err: pl_load_checked (needs runtime/core/pl_check.c) */
static int t_check(lua_State *L)
{
    pl_spec *spec = NULL;
    pl_error err;
    if (pl_load_checked(luaL_checkstring(L, 1), &spec, &err) != PL_OK) {
        lua_pushnil(L);
        lua_pushstring(L, err.msg);
        return 2;
    }
    pl_spec_free(spec);
    lua_pushboolean(L, 1);
    return 1;
}

/* ---- test.run(path, {workers=, batches=, fail=}) : lua stages only, in declaration order ---- */

typedef struct t_run {
    pl_spec *spec;
    void **states; /* per stage */
    pl_run_env env;
    unsigned char **mem; /* [batch * n_buffers + buffer] */
    int worker_count;
    pl_status *status; /* per worker */
    pl_error *errs;    /* per worker */
} t_run;

typedef struct t_worker {
    t_run *r;
    int w;
} t_worker;

static void *t_worker_main(void *p)
{
    t_worker *tw = p;
    t_run *r = tw->r;
    for (int64_t b = tw->w; b < r->env.batches; b += r->worker_count) {
        for (int s = 0; s < r->spec->n_stages; s++) {
            const pl_stage *st = &r->spec->stages[s];
            pl_stage_ctx ctx = {r->spec,
                                st,
                                &r->env,
                                b,
                                0,
                                tw->w,
                                (void *const *)&r->mem[b * r->spec->n_buffers],
                                r->states[s]};
            pl_status rc = (st->kind)->run_host(&ctx, &r->errs[tw->w]);
            if (rc != PL_OK) {
                r->status[tw->w] = rc;
                return NULL;
            }
        }
    }
    return NULL;
}

static pl_status t_resolve(pl_spec *spec, pl_error *err)
{
    for (int i = 0; i < spec->n_buffers; i++) {
        pl_buffer *b = &spec->buffers[i];
        b->count = 1;
        for (int d = 0; d < b->rank; d++)
            b->count *= b->shape[d];
        b->bytes = (uint64_t)b->count * pl_dtype_size(b->dtype);
    }
    for (int s = 0; s < spec->n_stages; s++) {
        pl_stage *st = &spec->stages[s];
        const pl_kind *k = (st->kind);
        if (st->kind != pl_kind_find("lua"))
            return pl_error_set(err, PL_EINPUT, "test.run: stage '%s' is not a lua stage",
                                st->name);
        PL_CHECK(pl_stage_check_opts(spec, st, err));
        PL_CHECK(k->bind(spec, st, err));
        pl_ref *lists[2] = {st->reads, st->writes};
        int counts[2] = {st->n_reads, st->n_writes};
        for (int l = 0; l < 2; l++)
            for (int j = 0; j < counts[l]; j++) {
                lists[l][j].index = pl_spec_find_buffer(spec, lists[l][j].name);
                if (lists[l][j].index < 0)
                    return pl_error_set(err, PL_EINPUT, "test.run: no buffer '%s'",
                                        lists[l][j].name);
            }
        PL_CHECK(k->validate(spec, st, err));
    }
    return PL_OK;
}

static int t_run_pipeline(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    int workers = 1;
    lua_Integer batches = -1;
    if (lua_istable(L, 2)) {
        if (lua_getfield(L, 2, "workers") == LUA_TNUMBER) workers = (int)lua_tointeger(L, -1);
        if (lua_getfield(L, 2, "batches") == LUA_TNUMBER) batches = lua_tointeger(L, -1);
        lua_pop(L, 2);
    }
    t_run r;
    memset(&r, 0, sizeof r);
    pl_error err;
    pl_status st = pl_load_file(path, &r.spec, &err);
    if (st == PL_OK) st = t_resolve(r.spec, &err);
    if (st != PL_OK) {
        pl_spec_free(r.spec);
        lua_pushnil(L);
        lua_pushstring(L, err.msg);
        return 2;
    }
    pl_spec *spec = r.spec;
    r.env.spec = spec;
    r.env.batches = batches > 0 ? batches : spec->run.batches;
    r.env.depth = (int)r.env.batches;
    r.env.workers = workers;
    r.env.seed = spec->run.seed;
    r.worker_count = workers;
    r.states = calloc((size_t)spec->n_stages, sizeof *r.states);
    r.mem = calloc((size_t)(r.env.batches * spec->n_buffers), sizeof *r.mem);
    r.status = calloc((size_t)workers, sizeof *r.status);
    r.errs = calloc((size_t)workers, sizeof *r.errs);
    for (int64_t b = 0; b < r.env.batches; b++)
        for (int i = 0; i < spec->n_buffers; i++)
            r.mem[b * spec->n_buffers + i] = calloc(1, spec->buffers[i].bytes);
    int opened = 0;
    for (; opened < spec->n_stages && st == PL_OK; opened++)
        st = (spec->stages[opened].kind)
                 ->open(&r.env, &spec->stages[opened], &r.states[opened], &err);
    if (st != PL_OK) opened--;
    if (st == PL_OK) {
        pthread_t *th = calloc((size_t)workers, sizeof *th);
        t_worker *tw = calloc((size_t)workers, sizeof *tw);
        for (int w = 0; w < workers; w++) {
            tw[w] = (t_worker){&r, w};
            pthread_create(&th[w], NULL, t_worker_main, &tw[w]);
        }
        for (int w = 0; w < workers; w++)
            pthread_join(th[w], NULL);
        for (int w = 0; w < workers && st == PL_OK; w++)
            if (r.status[w] != PL_OK) {
                st = r.status[w];
                err = r.errs[w];
            }
        free(th);
        free(tw);
    }
    for (int s = 0; s < opened; s++)
        (spec->stages[s].kind)->close(&r.env, &spec->stages[s], r.states[s], 0, false, NULL);
    if (st == PL_OK) {
        lua_createtable(L, (int)r.env.batches, 0);
        for (int64_t b = 0; b < r.env.batches; b++) {
            lua_createtable(L, 0, spec->n_buffers);
            for (int i = 0; i < spec->n_buffers; i++) {
                lua_pushlstring(L, (const char *)r.mem[b * spec->n_buffers + i],
                                spec->buffers[i].bytes);
                lua_setfield(L, -2, spec->buffers[i].name);
            }
            lua_rawseti(L, -2, b + 1);
        }
    } else {
        lua_pushnil(L);
        lua_pushstring(L, err.msg);
    }
    for (int64_t b = 0; b < r.env.batches * spec->n_buffers; b++)
        free(r.mem[b]);
    free(r.mem);
    free(r.states);
    free(r.status);
    free(r.errs);
    pl_spec_free(spec);
    return st == PL_OK ? 1 : 2;
}

static int t_skip(lua_State *L)
{
    printf("SKIP: %s\n", luaL_checkstring(L, 1));
    fflush(stdout);
    exit(77);
}

static int t_traceback(lua_State *L)
{
    luaL_traceback(L, L, lua_tostring(L, 1), 1);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: pl_lua_test SCRIPT [SOURCE_DIR BUILD_DIR]\n");
        return 2;
    }
    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    static const luaL_Reg fns[] = {
        {"view", t_view},           {"sandbox", t_sandbox},     {"load_lua", t_load_lua},
        {"load_yaml", t_load_yaml}, {"load_file", t_load_file}, {"check", t_check},
        {"run", t_run_pipeline},    {"skip", t_skip},           {NULL, NULL},
    };
    luaL_newlib(L, fns);
    lua_pushstring(L, argc > 2 ? argv[2] : ".");
    lua_setfield(L, -2, "source_dir");
    lua_pushstring(L, argc > 3 ? argv[3] : ".");
    lua_setfield(L, -2, "build_dir");
    lua_setglobal(L, "test");
    lua_pushcfunction(L, t_traceback);
    int rc = luaL_loadfile(L, argv[1]);
    if (rc == LUA_OK) rc = lua_pcall(L, 0, 0, 1);
    if (rc != LUA_OK) {
        fprintf(stderr, "FAIL %s\n%s\n", argv[1], lua_tostring(L, -1));
        lua_close(L);
        return 1;
    }
    printf("ok %s\n", argv[1]);
    lua_close(L);
    return 0;
}
