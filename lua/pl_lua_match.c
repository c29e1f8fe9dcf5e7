/* pl_lua_match: string.find, string.match, string.gmatch and string.gsub for the sandbox, with
 * Lua 5.4's pattern language and results, over a matcher that charges its steps to the running
 * call (the meter pl_lua_open_patterns is given: pl_lua_charge). Lua's own functions match in C
 * without a hook, so a pattern that backtracks ((".-b") over a long subject: quadratic; nested
 * captures: worse) would run past the instruction budget, the time limit and Ctrl-C. The matcher
 * follows the algorithm the Lua 5.4 reference manual (section 6.4.1) describes and lstrlib.c
 * implements (backtracking over the pattern text, a depth limit of 200, at most 32 captures), and
 * gives the same error messages. */
#include "pl_lua_match.h"

#include <ctype.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include <lauxlib.h>
#include <lualib.h>

/* Steps between two charges: a charge reads the clock, a step is a few nanoseconds. */
#define PL__CHUNK 4096
#define PL__MAXDEPTH 200   /* lstrlib's MAXCCALLS */
#define PL__MAXCAPTURES 32 /* lstrlib's LUA_MAXCAPTURES */
#define PL__CAP_OPEN (-1)
#define PL__CAP_POS (-2)
#define PL__SPECIALS "^$*+?.([%-"

typedef struct pl__ms {
    const char *src, *src_end, *pat_end;
    lua_State *L;
    pl_lua_charge_fn charge; /* the state's meter (pl_lua_open_patterns) */
    int depth;               /* recursion left */
    int level;               /* captures open or closed */
    int steps;               /* steps since the last charge */
    struct {
        const char *init;
        ptrdiff_t len; /* or PL__CAP_OPEN / PL__CAP_POS */
    } cap[PL__MAXCAPTURES];
} pl__ms;

static void pl__step(pl__ms *ms, int n)
{
    ms->steps += n;
    if (ms->steps >= PL__CHUNK) {
        int64_t s = ms->steps;
        ms->steps = 0;
        ms->charge(ms->L, s);
    }
}

static void pl__flush(pl__ms *ms)
{
    if (ms->steps) ms->charge(ms->L, ms->steps);
    ms->steps = 0;
}

static const char *pl__match(pl__ms *ms, const char *s, const char *p);

static bool pl__class(int c, int cl)
{
    bool r;
    switch (tolower(cl)) {
    case 'a':
        r = isalpha(c);
        break;
    case 'c':
        r = iscntrl(c);
        break;
    case 'd':
        r = isdigit(c);
        break;
    case 'g':
        r = isgraph(c);
        break;
    case 'l':
        r = islower(c);
        break;
    case 'p':
        r = ispunct(c);
        break;
    case 's':
        r = isspace(c);
        break;
    case 'u':
        r = isupper(c);
        break;
    case 'w':
        r = isalnum(c);
        break;
    case 'x':
        r = isxdigit(c);
        break;
    case 'z': /* deprecated in Lua 5.2, still matched by 5.4 */
        r = c == 0;
        break;
    default:
        return cl == c;
    }
    return isupper(cl) ? !r : r;
}

/* The end of the single-character class at p: past "%x", "[...]" or one character. */
static const char *pl__class_end(pl__ms *ms, const char *p)
{
    char c = *p++;
    if (c == '%') {
        if (p == ms->pat_end) luaL_error(ms->L, "malformed pattern (ends with '%%')");
        return p + 1;
    }
    if (c == '[') {
        if (*p == '^') p++;
        do { /* the first character is never the closing ']' */
            if (p == ms->pat_end) luaL_error(ms->L, "malformed pattern (missing ']')");
            if (*(p++) == '%' && p < ms->pat_end) p++;
        } while (*p != ']');
        return p + 1;
    }
    return p;
}

/* c against the set [p .. ec], p at '[' and ec at its ']'. */
static bool pl__in_set(int c, const char *p, const char *ec)
{
    bool yes = true;
    if (*(p + 1) == '^') {
        yes = false;
        p++;
    }
    while (++p < ec) {
        if (*p == '%') {
            p++;
            if (pl__class(c, (unsigned char)*p)) return yes;
        } else if (*(p + 1) == '-' && p + 2 < ec) {
            p += 2;
            if ((unsigned char)*(p - 2) <= c && c <= (unsigned char)*p) return yes;
        } else if ((unsigned char)*p == c) {
            return yes;
        }
    }
    return !yes;
}

static bool pl__single(pl__ms *ms, const char *s, const char *p, const char *ep)
{
    if (s >= ms->src_end) return false;
    int c = (unsigned char)*s;
    switch (*p) {
    case '.':
        return true;
    case '%':
        return pl__class(c, (unsigned char)*(p + 1));
    case '[':
        return pl__in_set(c, p, ep - 1);
    default:
        return (unsigned char)*p == c;
    }
}

static const char *pl__balance(pl__ms *ms, const char *s, const char *p)
{
    if (p >= ms->pat_end - 1) luaL_error(ms->L, "malformed pattern (missing arguments to '%%b')");
    if (s >= ms->src_end || *s != *p) return NULL;
    char open = *p, close = *(p + 1);
    int depth = 1;
    while (++s < ms->src_end) {
        pl__step(ms, 1);
        if (*s == close) {
            if (--depth == 0) return s + 1;
        } else if (*s == open) {
            depth++;
        }
    }
    return NULL;
}

static const char *pl__max_expand(pl__ms *ms, const char *s, const char *p, const char *ep)
{
    ptrdiff_t i = 0;
    while (pl__single(ms, s + i, p, ep)) {
        i++;
        pl__step(ms, 1);
    }
    for (; i >= 0; i--) { /* the longest repetition that lets the rest match */
        const char *r = pl__match(ms, s + i, ep + 1);
        if (r) return r;
    }
    return NULL;
}

static const char *pl__min_expand(pl__ms *ms, const char *s, const char *p, const char *ep)
{
    for (;;) {
        const char *r = pl__match(ms, s, ep + 1);
        if (r) return r;
        if (!pl__single(ms, s, p, ep)) return NULL;
        s++;
    }
}

static const char *pl__open(pl__ms *ms, const char *s, const char *p, ptrdiff_t what)
{
    if (ms->level >= PL__MAXCAPTURES) luaL_error(ms->L, "too many captures");
    ms->cap[ms->level].init = s;
    ms->cap[ms->level].len = what;
    ms->level++;
    const char *r = pl__match(ms, s, p);
    if (!r) ms->level--;
    return r;
}

static const char *pl__close(pl__ms *ms, const char *s, const char *p)
{
    int l = ms->level - 1;
    while (l >= 0 && ms->cap[l].len != PL__CAP_OPEN)
        l--;
    if (l < 0) luaL_error(ms->L, "invalid pattern capture");
    ms->cap[l].len = s - ms->cap[l].init;
    const char *r = pl__match(ms, s, p);
    if (!r) ms->cap[l].len = PL__CAP_OPEN;
    return r;
}

static const char *pl__backref(pl__ms *ms, const char *s, int digit)
{
    int l = digit - '1';
    if (l < 0 || l >= ms->level || ms->cap[l].len == PL__CAP_OPEN)
        luaL_error(ms->L, "invalid capture index %%%d", l + 1);
    size_t len = (size_t)ms->cap[l].len;
    pl__step(ms, (int)(len / 64) + 1);
    if ((size_t)(ms->src_end - s) >= len && memcmp(ms->cap[l].init, s, len) == 0) return s + len;
    return NULL;
}

/* The end of a match of pattern p (up to pat_end) at s, or NULL. Tail positions loop instead of
 * recursing, as in lstrlib; each visit is one step. */
static const char *pl__match(pl__ms *ms, const char *s, const char *p)
{
    if (ms->depth-- == 0) luaL_error(ms->L, "pattern too complex");
    for (;;) {
        pl__step(ms, 1);
        if (p == ms->pat_end) break;
        if (*p == '(') {
            s = p[1] == ')' ? pl__open(ms, s, p + 2, PL__CAP_POS)
                            : pl__open(ms, s, p + 1, PL__CAP_OPEN);
            break;
        }
        if (*p == ')') {
            s = pl__close(ms, s, p + 1);
            break;
        }
        if (*p == '$' && p + 1 == ms->pat_end) {
            if (s != ms->src_end) s = NULL;
            break;
        }
        if (*p == '%' && p[1] == 'b') {
            s = pl__balance(ms, s, p + 2);
            if (!s) break;
            p += 4;
            continue;
        }
        if (*p == '%' && p[1] == 'f') {
            p += 2;
            if (*p != '[') luaL_error(ms->L, "missing '[' after '%%f' in pattern");
            const char *ep = pl__class_end(ms, p);
            int prev = s == ms->src ? '\0' : (unsigned char)*(s - 1);
            int cur = s < ms->src_end ? (unsigned char)*s : '\0';
            if (!pl__in_set(prev, p, ep - 1) && pl__in_set(cur, p, ep - 1)) {
                p = ep;
                continue;
            }
            s = NULL;
            break;
        }
        if (*p == '%' && isdigit((unsigned char)p[1])) {
            s = pl__backref(ms, s, (unsigned char)p[1]);
            if (!s) break;
            p += 2;
            continue;
        }
        const char *ep = pl__class_end(ms, p);
        if (!pl__single(ms, s, p, ep)) {
            if (*ep == '*' || *ep == '?' || *ep == '-') { /* zero repetitions are fine */
                p = ep + 1;
                continue;
            }
            s = NULL;
            break;
        }
        if (*ep == '?') {
            const char *r = pl__match(ms, s + 1, ep + 1);
            if (r) {
                s = r;
                break;
            }
            p = ep + 1;
            continue;
        }
        if (*ep == '+') {
            s = pl__max_expand(ms, s + 1, p, ep);
            break;
        }
        if (*ep == '*') {
            s = pl__max_expand(ms, s, p, ep);
            break;
        }
        if (*ep == '-') {
            s = pl__min_expand(ms, s, p, ep);
            break;
        }
        s++;
        p = ep;
    }
    ms->depth++;
    return s;
}

/* Where each state keeps its meter: the registry, under this address. */
static const char pl__meter_key = 0;

static void pl__prep(pl__ms *ms, lua_State *L, const char *s, size_t ls, const char *p, size_t lp)
{
    ms->L = L;
    lua_rawgetp(L, LUA_REGISTRYINDEX, &pl__meter_key);
    ms->charge = ((const pl_lua_meter *)lua_touserdata(L, -1))->charge;
    lua_pop(L, 1);
    ms->src = s;
    ms->src_end = s + ls;
    ms->pat_end = p + lp;
    ms->steps = 0;
}

static void pl__reprep(pl__ms *ms)
{
    ms->level = 0;
    ms->depth = PL__MAXDEPTH;
}

/* Pushes capture i of the match [s, e) (the whole match when there are none and i == 0). */
static void pl__push_capture(pl__ms *ms, int i, const char *s, const char *e)
{
    if (i >= ms->level) {
        if (i != 0) luaL_error(ms->L, "invalid capture index %%%d", i + 1);
        lua_pushlstring(ms->L, s, (size_t)(e - s));
        return;
    }
    ptrdiff_t len = ms->cap[i].len;
    if (len == PL__CAP_OPEN) luaL_error(ms->L, "unfinished capture");
    if (len == PL__CAP_POS)
        lua_pushinteger(ms->L, (ms->cap[i].init - ms->src) + 1);
    else
        lua_pushlstring(ms->L, ms->cap[i].init, (size_t)len);
}

static int pl__push_captures(pl__ms *ms, const char *s, const char *e)
{
    int n = ms->level == 0 && s ? 1 : ms->level;
    luaL_checkstack(ms->L, n, "too many captures");
    for (int i = 0; i < n; i++)
        pl__push_capture(ms, i, s, e);
    return n;
}

static bool pl__no_specials(const char *p, size_t lp)
{
    size_t at = 0;
    do { /* strpbrk stops at an embedded NUL: look past each one */
        if (strpbrk(p + at, PL__SPECIALS)) return false;
        at += strlen(p + at) + 1;
    } while (at <= lp);
    return true;
}

/* Plain search (memchr for the first byte, then compare): charged per candidate, since a subject
 * of many near-misses makes it quadratic. */
static const char *pl__memfind(pl__ms *ms, const char *s1, size_t l1, const char *s2, size_t l2)
{
    if (l2 == 0) return s1;
    if (l2 > l1) return NULL;
    l2--;
    l1 -= l2;
    const char *at;
    while (l1 > 0 && (at = memchr(s1, *s2, l1)) != NULL) {
        at++;
        pl__step(ms, (int)(l2 / 64) + 1);
        if (memcmp(at, s2 + 1, l2) == 0) return at - 1;
        l1 -= (size_t)(at - s1);
        s1 = at;
    }
    return NULL;
}

static size_t pl__posrel(lua_Integer pos, size_t len)
{
    if (pos > 0) return (size_t)pos;
    if (pos == 0) return 1;
    if (pos < -(lua_Integer)len) return 1;
    return len + (size_t)pos + 1;
}

static int pl__find_aux(lua_State *L, bool find)
{
    size_t ls, lp;
    const char *s = luaL_checklstring(L, 1, &ls);
    const char *p = luaL_checklstring(L, 2, &lp);
    size_t init = pl__posrel(luaL_optinteger(L, 3, 1), ls) - 1;
    if (init > ls) {
        luaL_pushfail(L);
        return 1;
    }
    pl__ms ms;
    pl__prep(&ms, L, s, ls, p, lp);
    if (find && (lua_toboolean(L, 4) || pl__no_specials(p, lp))) {
        const char *f = pl__memfind(&ms, s + init, ls - init, p, lp);
        pl__flush(&ms);
        if (f) {
            lua_pushinteger(L, (f - s) + 1);
            lua_pushinteger(L, (lua_Integer)((size_t)(f - s) + lp));
            return 2;
        }
        luaL_pushfail(L);
        return 1;
    }
    const char *s1 = s + init;
    bool anchor = *p == '^';
    if (anchor) {
        p++;
        lp--;
        ms.pat_end = p + lp;
    }
    do {
        pl__reprep(&ms);
        const char *e = pl__match(&ms, s1, p);
        if (e) {
            pl__flush(&ms);
            if (find) {
                lua_pushinteger(L, (s1 - s) + 1);
                lua_pushinteger(L, e - s);
                return pl__push_captures(&ms, NULL, 0) + 2;
            }
            return pl__push_captures(&ms, s1, e);
        }
    } while (s1++ < ms.src_end && !anchor);
    pl__flush(&ms);
    luaL_pushfail(L);
    return 1;
}

static int pl__find(lua_State *L)
{
    return pl__find_aux(L, true);
}

static int pl__str_match(lua_State *L)
{
    return pl__find_aux(L, false);
}

/* gmatch's state, a userdata upvalue of the iterator (with the subject and the pattern, which
 * keep the pointers valid). */
typedef struct pl__gm {
    const char *at, *pat, *last;
    pl__ms ms;
} pl__gm;

static int pl__gmatch_next(lua_State *L)
{
    pl__gm *gm = lua_touserdata(L, lua_upvalueindex(3));
    gm->ms.L = L;
    for (const char *s = gm->at; s <= gm->ms.src_end; s++) {
        pl__reprep(&gm->ms);
        const char *e = pl__match(&gm->ms, s, gm->pat);
        if (e && e != gm->last) {
            gm->at = gm->last = e;
            pl__flush(&gm->ms);
            return pl__push_captures(&gm->ms, s, e);
        }
    }
    pl__flush(&gm->ms);
    return 0;
}

static int pl__gmatch(lua_State *L)
{
    size_t ls, lp;
    const char *s = luaL_checklstring(L, 1, &ls);
    const char *p = luaL_checklstring(L, 2, &lp);
    size_t init = pl__posrel(luaL_optinteger(L, 3, 1), ls) - 1;
    if (init > ls) init = ls + 1; /* no match even of the empty string */
    lua_settop(L, 2);
    pl__gm *gm = lua_newuserdatauv(L, sizeof *gm, 0);
    pl__prep(&gm->ms, L, s, ls, p, lp);
    gm->at = s + init;
    gm->pat = p;
    gm->last = NULL;
    lua_pushcclosure(L, pl__gmatch_next, 3);
    return 1;
}

static void pl__add_repl_string(pl__ms *ms, luaL_Buffer *b, const char *s, const char *e)
{
    lua_State *L = ms->L;
    size_t l;
    const char *news = lua_tolstring(L, 3, &l);
    const char *p;
    while ((p = memchr(news, '%', l)) != NULL) {
        luaL_addlstring(b, news, (size_t)(p - news));
        p++;
        if (*p == '%') {
            luaL_addchar(b, '%');
        } else if (*p == '0') {
            luaL_addlstring(b, s, (size_t)(e - s));
        } else if (isdigit((unsigned char)*p)) {
            pl__push_capture(ms, *p - '1', s, e);
            luaL_addvalue(b); /* a position capture as its number */
        } else {
            luaL_error(L, "invalid use of '%c' in replacement string", '%');
        }
        l -= (size_t)(p + 1 - news);
        news = p + 1;
    }
    luaL_addlstring(b, news, l);
}

/* Adds the replacement of the match [s, e); returns whether the text changed. */
static bool pl__add_value(pl__ms *ms, luaL_Buffer *b, const char *s, const char *e, int tr)
{
    lua_State *L = ms->L;
    if (tr == LUA_TFUNCTION) {
        lua_pushvalue(L, 3);
        int n = pl__push_captures(ms, s, e);
        lua_call(L, n, 1);
    } else if (tr == LUA_TTABLE) {
        pl__push_capture(ms, 0, s, e);
        lua_gettable(L, 3);
    } else {
        pl__add_repl_string(ms, b, s, e);
        return true;
    }
    if (!lua_toboolean(L, -1)) { /* nil or false: keep the original */
        lua_pop(L, 1);
        luaL_addlstring(b, s, (size_t)(e - s));
        return false;
    }
    if (!lua_isstring(L, -1))
        luaL_error(L, "invalid replacement value (a %s)", luaL_typename(L, -1));
    luaL_addvalue(b);
    return true;
}

static int pl__gsub(lua_State *L)
{
    size_t srcl, lp;
    const char *src = luaL_checklstring(L, 1, &srcl);
    const char *p = luaL_checklstring(L, 2, &lp);
    const char *last = NULL;
    int tr = lua_type(L, 3);
    lua_Integer max_s = luaL_optinteger(L, 4, (lua_Integer)srcl + 1);
    bool anchor = *p == '^';
    lua_Integer n = 0;
    bool changed = false;
    luaL_argexpected(
        L, tr == LUA_TNUMBER || tr == LUA_TSTRING || tr == LUA_TFUNCTION || tr == LUA_TTABLE, 3,
        "string/function/table");
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    if (anchor) {
        p++;
        lp--;
    }
    pl__ms ms;
    pl__prep(&ms, L, src, srcl, p, lp);
    while (n < max_s) {
        pl__reprep(&ms);
        const char *e = pl__match(&ms, src, p);
        if (e && e != last) {
            n++;
            pl__flush(&ms); /* the replacement may call Lua, which counts for itself */
            changed = pl__add_value(&ms, &b, src, e, tr) || changed;
            src = last = e;
        } else if (src < ms.src_end) {
            luaL_addchar(&b, *src++);
        } else {
            break;
        }
        if (anchor) break;
    }
    pl__flush(&ms);
    if (!changed) {
        lua_pushvalue(L, 1);
    } else {
        luaL_addlstring(&b, src, (size_t)(ms.src_end - src));
        luaL_pushresult(&b);
    }
    lua_pushinteger(L, n);
    return 2;
}

void pl_lua_open_patterns(lua_State *L, const pl_lua_meter *meter)
{
    lua_pushlightuserdata(L, (void *)meter);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &pl__meter_key);
    static const luaL_Reg fns[] = {{"find", pl__find},
                                   {"match", pl__str_match},
                                   {"gmatch", pl__gmatch},
                                   {"gsub", pl__gsub},
                                   {NULL, NULL}};
    lua_getglobal(L, LUA_STRLIBNAME);
    luaL_setfuncs(L, fns, 0);
    lua_pop(L, 1);
}
