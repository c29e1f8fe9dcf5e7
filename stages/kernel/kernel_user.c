/* kernel_user: the user-kernel side of the `kernel` kind: CUDA source (`source:` or `code:`)
 * compiled with NVRTC at check time, or a prebuilt `module:`; grid, block, shared memory and
 * arguments from the DSL; the host executor's reference is a Lua function over the stage's
 * buffers (`host:`). The CUDA side (compile, cache, load, launch) is runtime/device/pl_nvrtc.h. */
#include "pl_ukern.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "pl_kexpr.h"
#include "pl_kimage.h"
#include "pl_lua.h"
#ifdef PL_WITH_CUDA
#include "pl_nvrtc.h"
#endif

/* Host references walk whole buffers element by element: a budget far above a lua stage's. */
#define PL__HOST_INSTRUCTIONS (PL_LUA_DEFAULT_INSTRUCTIONS * 100)
#define PL__HOST_MEMORY ((size_t)256 << 20)

int pl_ukern_default_arch(void)
{
    const char *e = getenv("PIPECTL_ARCH");
    if (e && *e) {
        const char *d = strncmp(e, "sm_", 3) == 0 ? e + 3 : e;
        int v = atoi(d);
        if (v >= 50 && v < 1000) return v;
    }
    return 90;
}

size_t pl_uarg_size(pl_uarg_type t)
{
    switch (t) {
    case PL_UARG_I32:
    case PL_UARG_U32:
    case PL_UARG_F32:
        return 4;
    default:
        return 8;
    }
}

const char *pl_uarg_type_name(pl_uarg_type t)
{
    static const char *const n[] = {"buffer", "i32", "u32", "i64", "u64", "f32", "f64"};
    return (unsigned)t < sizeof n / sizeof *n ? n[t] : "?";
}

bool pl_ukern_wanted(const pl_stage *st)
{
    return pl_stage_opt(st, "source") || pl_stage_opt(st, "code") || pl_stage_opt(st, "module");
}

static pl_status pl__oom(pl_error *err)
{
    return pl_error_set(err, PL_ENOMEM, "error: out of memory");
}

/* Path of `rel` against the pipeline's directory, for opening; NULL on OOM. */
static const char *pl__resolve(pl_spec *spec, const char *rel)
{
    if (rel[0] == '/' || strcmp(spec->dir, ".") == 0) return pl_spec_strdup(spec, rel);
    size_t n = strlen(spec->dir) + strlen(rel) + 2;
    char *p = pl_spec_alloc(spec, n);
    if (p) snprintf(p, n, "%s/%s", spec->dir, rel);
    return p;
}

/* Reads a whole file into the arena, NUL-terminated. */
static pl_status pl__read(pl_spec *spec, const pl_stage *st, const char *path, pl_pos pos,
                          const char **text, size_t *len, pl_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return pl_error_at(err, PL_EINPUT, pos, "stage '%s': cannot read '%s': %s", st->name, path,
                           strerror(errno));
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (n < 0 || n > (64L << 20)) {
        fclose(f);
        return pl_error_at(err, PL_EINPUT, pos,
                           "stage '%s': '%s' is not a readable file under 64 MiB", st->name, path);
    }
    char *buf = pl_spec_alloc(spec, (size_t)n + 1);
    if (!buf) {
        fclose(f);
        return pl__oom(err);
    }
    size_t got = fread(buf, 1, (size_t)n, f);
    fclose(f);
    if (got != (size_t)n)
        return pl_error_at(err, PL_EINPUT, pos, "stage '%s': cannot read '%s'", st->name, path);
    *text = buf;
    *len = got;
    return PL_OK;
}

/* Where line 1, column 1 of inline `code:` sits in the pipeline file. For a YAML block scalar
 * (`code: |`) it is the first content line at its indentation; for a one-line value, the value
 * itself (after a quote). Unknown (line 0) otherwise: positions are then relative to the code. */
static pl_pos pl__code_origin(const pl_spec *spec, const pl_opt *o)
{
    pl_pos none = {o->val_pos.file, 0, 0};
    if (!o->val_pos.line || !spec->file) return none;
    size_t flen = strlen(spec->file);
    if (flen > 4 && strcmp(spec->file + flen - 4, ".lua") == 0) return none;
    FILE *f = fopen(spec->file, "r");
    if (!f) return none;
    char line[4096];
    int ln = 0;
    pl_pos at = none;
    bool block = false;
    while (fgets(line, sizeof line, f)) {
        ln++;
        if (ln == o->val_pos.line) {
            int c = o->val_pos.col - 1;
            if (c >= 0 && (size_t)c < strlen(line)) {
                if (line[c] == '|' || line[c] == '>') {
                    block = true;
                    continue;
                }
                if (!strchr(o->str, '\n')) {
                    at = o->val_pos;
                    if (line[c] == '"' || line[c] == '\'') at.col++;
                }
            }
            break;
        }
        if (block && ln > o->val_pos.line) {
            int ind = 0;
            while (line[ind] == ' ')
                ind++;
            if (line[ind] == '\n' || !line[ind]) continue; /* leading blank lines are kept */
            /* The block's first line is the code's first line (blank lines before it count). */
            at = (pl_pos){o->val_pos.file, o->val_pos.line + 1, ind + 1};
            break;
        }
    }
    fclose(f);
    return at;
}

/* ---- options ---- */

/* A {tag: value} item where only plain values belong (grid, block, options, include). */
static pl_status pl__no_tags(const pl_stage *st, const pl_opt *o, pl_error *err)
{
    for (int i = 0; o->is_list && o->item_tags && i < o->n_items; i++)
        if (o->item_tags[i])
            return pl_error_at(err, PL_EINPUT, o->item_pos[i],
                               "stage '%s': '%s' takes plain values; {%s: ...} is only for args:",
                               st->name, o->key, o->item_tags[i]);
    return PL_OK;
}

/* The items of a grid/block option: its list (or one scalar, from an embedder's spec). */
static int pl__items(const pl_opt *o, const char **items, pl_pos *pos, int cap)
{
    if (!o->is_list) {
        items[0] = o->str;
        pos[0] = o->val_pos;
        return 1;
    }
    int n = o->n_items < cap ? o->n_items : cap + 1;
    for (int i = 0; i < n && i < cap; i++) {
        items[i] = o->items[i];
        pos[i] = o->item_pos[i];
    }
    return n;
}

static pl_status pl__dims(const pl_spec *spec, const pl_stage *st, const char *key, unsigned out[3],
                          pl_error *err)
{
    out[0] = out[1] = out[2] = 1;
    const pl_opt *o = pl_stage_opt(st, key);
    if (!o)
        return pl_error_at(err, PL_EINPUT, st->pos,
                           "kernel stage '%s' needs '%s:' (1 to 3 integers or expressions, e.g. "
                           "%s)",
                           st->name, key,
                           strcmp(key, "grid") == 0 ? "grid: [ceil(elements(x) / 256)]"
                                                    : "block: [256]");
    PL_CHECK(pl__no_tags(st, o, err));
    const char *items[3];
    pl_pos pos[3];
    int n = pl__items(o, items, pos, 3);
    if (n < 1 || n > 3)
        return pl_error_at(err, PL_EINPUT, o->val_pos,
                           "stage '%s': '%s' has %s%d dimensions; give 1 to 3", st->name, key,
                           n > 3 ? "more than " : "", n > 3 ? 3 : n);
    static const uint64_t grid_max[3] = {2147483647u, 65535, 65535};
    static const uint64_t block_max[3] = {1024, 1024, 64};
    bool grid = strcmp(key, "grid") == 0;
    uint64_t prod = 1;
    for (int i = 0; i < n; i++) {
        char what[32];
        snprintf(what, sizeof what, n > 1 ? "%s[%d]" : "%s", key, i);
        int64_t v;
        PL_CHECK(pl_kexpr_eval(spec, st->name, what, items[i], pos[i], &v, err));
        uint64_t max = grid ? grid_max[i] : block_max[i];
        if (v < 1 || (uint64_t)v > max)
            return pl_error_at(err, PL_EINPUT, pos[i],
                               "stage '%s': %s is %lld; CUDA allows 1 to %llu in this dimension",
                               st->name, what, (long long)v, (unsigned long long)max);
        out[i] = (unsigned)v;
        prod *= (uint64_t)v;
    }
    if (!grid && prod > 1024)
        return pl_error_at(err, PL_EINPUT, o->val_pos,
                           "stage '%s': a block of %llu threads; CUDA allows at most 1024",
                           st->name, (unsigned long long)prod);
    return PL_OK;
}

static bool pl__in_refs(const pl_ref *refs, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(refs[i].name, name) == 0) return true;
    return false;
}

static bool pl__is_ident(const char *s)
{
    if (!isalpha((unsigned char)*s) && *s != '_') return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-' && *s != '.') return false;
    return true;
}

/* One `args:` item: a buffer name, "type:value" (the map {type: value} of the YAML and Lua front
 * ends is stored as this text), or an integer expression (passed as u64). */
static pl_status pl__arg(pl_spec *spec, const pl_stage *st, int i, const char *tag,
                         const char *value, pl_pos pos, pl_uarg *a, pl_error *err)
{
    /* {f32: 1.5} arrives as tag "f32" and value "1.5"; it is handled as the text "f32: 1.5". */
    const char *text = value;
    if (tag) {
        size_t n = strlen(tag) + strlen(value) + 3;
        char *t = pl_spec_alloc(spec, n);
        if (!t) return pl__oom(err);
        snprintf(t, n, "%s: %s", tag, value);
        text = t;
    }
    /* {ptr: x_dev}: a buffer, said explicitly. */
    if (tag && strcmp(tag, "ptr") == 0) {
        text = value;
        if (!pl__is_ident(value))
            return pl_error_at(err, PL_EINPUT, pos,
                               "stage '%s': argument %d: {ptr: ...} takes a buffer name, not '%s'",
                               st->name, i + 1, value);
    }
    a->text = text;
    a->pos = pos;
    a->buffer = -1;
    char what[32];
    snprintf(what, sizeof what, "argument %d", i + 1);
    const char *colon = strchr(text, ':');
    if (!colon && pl__is_ident(text) && !strchr(text, '(')) {
        int b = pl_spec_find_buffer(spec, text);
        if (b < 0) {
            const char *cands[256];
            int n = 0;
            for (int k = 0; k < spec->n_buffers && n < 256; k++)
                cands[n++] = spec->buffers[k].name;
            const char *best = pl_closest(text, cands, n);
            if (best)
                return pl_error_at(err, PL_EINPUT, pos,
                                   "stage '%s': argument %d: unknown buffer '%s' (did you mean "
                                   "'%s'?)",
                                   st->name, i + 1, text, best);
            return pl_error_at(err, PL_EINPUT, pos,
                               "stage '%s': argument %d: unknown buffer '%s'; an argument is a "
                               "buffer name, a typed scalar like {f32: 1.5}, or elements(buf) / "
                               "bytes(buf)",
                               st->name, i + 1, text);
        }
        if (!pl__in_refs(st->reads, st->n_reads, text) &&
            !pl__in_refs(st->writes, st->n_writes, text))
            return pl_error_at(err, PL_EINPUT, pos,
                               "stage '%s': argument %d: buffer '%s' is not in reads: or writes:; "
                               "list it there (that is how the stage is ordered against the "
                               "others)",
                               st->name, i + 1, text);
        a->type = PL_UARG_BUF;
        a->buffer = b;
        return PL_OK;
    }
    if (!colon) {
        int64_t v;
        PL_CHECK(pl_kexpr_eval(spec, st->name, what, text, pos, &v, err));
        a->type = PL_UARG_U64;
        a->v.u64 = (uint64_t)v;
        return PL_OK;
    }
    static const char *const types[] = {"i32", "u32", "i64", "u64", "f32", "f64"};
    char ty[16];
    size_t tl = (size_t)(colon - text);
    while (tl && text[tl - 1] == ' ')
        tl--;
    snprintf(ty, sizeof ty, "%.*s", (int)(tl < 15 ? tl : 15), text);
    int t = -1;
    for (int k = 0; k < 6; k++)
        if (strcmp(ty, types[k]) == 0) t = k;
    if (t < 0) {
        const char *best = pl_closest(ty, types, 6);
        char hint[48] = "";
        if (best) snprintf(hint, sizeof hint, " (did you mean '%s'?)", best);
        return pl_error_at(err, PL_EINPUT, pos,
                           "stage '%s': argument %d: unknown scalar type '%s'%s; use i32, u32, "
                           "i64, u64, f32 or f64 (or ptr for a buffer)",
                           st->name, i + 1, ty, hint);
    }
    a->type = (pl_uarg_type)(t + 1);
    const char *val = colon + 1;
    int skip = 0;
    while (val[skip] == ' ')
        skip++;
    pl_pos vpos = pos;
    /* The text form "f32:1.5" is one scalar: point at the value inside it. A {tag: value}
     * item's position is the item's. */
    if (vpos.line && !tag) vpos.col += (int)(val + skip - text);
    val += skip;
    if (a->type == PL_UARG_F32 || a->type == PL_UARG_F64) {
        char *end;
        errno = 0;
        double d = strtod(val, &end);
        while (*end == ' ')
            end++;
        if (!*val || *end || errno == ERANGE)
            return pl_error_at(err, PL_EINPUT, vpos,
                               "stage '%s': argument %d: %s needs a number, got '%s'", st->name,
                               i + 1, ty, val);
        if (a->type == PL_UARG_F32)
            a->v.f32 = (float)d;
        else
            a->v.f64 = d;
        return PL_OK;
    }
    int64_t v;
    if (strpbrk(val, ".eE") && strtod(val, NULL) != 0 && !strchr(val, '('))
        return pl_error_at(err, PL_EINPUT, vpos,
                           "stage '%s': argument %d: %s needs an integer, got '%s' (use f32: or "
                           "f64: for a floating-point parameter)",
                           st->name, i + 1, ty, val);
    PL_CHECK(pl_kexpr_eval(spec, st->name, what, val, vpos, &v, err));
    static const int64_t lo[] = {INT32_MIN, 0, INT64_MIN, 0};
    static const int64_t hi[] = {INT32_MAX, UINT32_MAX, INT64_MAX, INT64_MAX};
    if (v < lo[t] || v > hi[t])
        return pl_error_at(err, PL_EINPUT, vpos, "stage '%s': argument %d: %lld does not fit in %s",
                           st->name, i + 1, (long long)v, ty);
    switch (a->type) {
    case PL_UARG_I32:
        a->v.i32 = (int32_t)v;
        break;
    case PL_UARG_U32:
        a->v.u32 = (uint32_t)v;
        break;
    case PL_UARG_I64:
        a->v.i64 = v;
        break;
    default:
        a->v.u64 = (uint64_t)v;
        break;
    }
    return PL_OK;
}

static pl_status pl__strs(pl_spec *spec, const pl_stage *st, const char *key, bool paths,
                          const char ***out, int *n, pl_error *err)
{
    *out = NULL;
    *n = 0;
    const pl_opt *o = pl_stage_opt(st, key);
    if (!o) return PL_OK;
    PL_CHECK(pl__no_tags(st, o, err));
    const char **v = pl_spec_alloc(spec, (size_t)(o->n_items + 1) * sizeof *v);
    if (!v) return pl__oom(err);
    for (int i = 0; i < o->n_items; i++) {
        v[i] = paths ? pl__resolve(spec, o->items[i]) : o->items[i];
        if (!v[i]) return pl__oom(err);
    }
    *out = v;
    *n = o->n_items;
    return PL_OK;
}

/* ---- the host reference ---- */

static int pl__host_syntax(lua_State *L)
{
    const pl_ukern *uk = lua_touserdata(L, 1);
    pl_lua_load_text(L, uk->lua_text, uk->lua_len, uk->lua_chunk);
    return 0;
}

static pl_status pl__bind_host(pl_spec *spec, const pl_stage *st, pl_ukern *uk, pl_error *err)
{
    const pl_opt *host = pl_stage_opt(st, "host"), *lua = pl_stage_opt(st, "lua");
    if (lua && !host)
        return pl_error_at(err, PL_EINPUT, lua->pos,
                           "stage '%s': 'lua:' names the script of the host reference; give "
                           "'host:' too (the function's name in it)",
                           st->name);
    if (!host) return PL_OK;
    uk->host_pos = host->val_pos;
    if (lua) {
        const char *path = pl__resolve(spec, lua->str);
        if (!path) return pl__oom(err);
        PL_CHECK(pl__read(spec, st, path, lua->val_pos, &uk->lua_text, &uk->lua_len, err));
        size_t n = strlen(lua->str) + 2;
        char *chunk = pl_spec_alloc(spec, n);
        if (!chunk) return pl__oom(err);
        snprintf(chunk, n, "@%s", lua->str);
        uk->lua_chunk = chunk;
        if (!pl__is_ident(host->str) || strchr(host->str, '-') || strchr(host->str, '.'))
            return pl_error_at(err, PL_EINPUT, host->val_pos,
                               "stage '%s': with 'lua:', 'host:' is the name of a function in "
                               "the script, not '%s'",
                               st->name, host->str);
        uk->host_fn = host->str;
    } else {
        /* Inline: an expression giving the function, `function(batch, opts, bufs) ... end`. */
        size_t n = strlen(host->str) + 8;
        char *text = pl_spec_alloc(spec, n);
        if (!text) return pl__oom(err);
        snprintf(text, n, "return %s", host->str);
        uk->lua_text = text;
        uk->lua_len = strlen(text);
        uk->lua_chunk = "=host";
        uk->host_fn = "";
    }
    pl_lua *lx = NULL;
    char msg[PL_ERROR_MSG_MAX - 128];
    PL_CHECK(pl_lua_new(PL__HOST_MEMORY, NULL, NULL, &lx, err));
    pl_status s =
        pl_lua_call(lx, pl__host_syntax, uk, PL_LUA_DEFAULT_INSTRUCTIONS, false, msg, sizeof msg);
    pl_lua_free(lx);
    if (s != PL_OK)
        return pl_error_at(err, PL_EINPUT, lua ? lua->val_pos : host->val_pos,
                           "stage '%s': host reference: %s", st->name, msg);
    return PL_OK;
}

/* ---- compiling at check time ---- */

#ifdef PL_WITH_CUDA
/* "kernels/my.cu(12): error: text" + source line + caret line -> "file:12:5: error: text" with
 * the two context lines, mapped through the code's origin for inline code. */
static void pl__diagnostics(const pl_ukern *uk, const char *log, bool errors, char *out, size_t cap,
                            int *n_found, pl_pos *first)
{
    size_t n = 0;
    *n_found = 0;
    out[0] = '\0';
    const char *p = log;
    while (p && *p) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        const char *paren = NULL;
        for (const char *q = p; q < p + len; q++)
            if (*q == '(' && isdigit((unsigned char)q[1])) paren = q;
        long line = 0;
        const char *rest = NULL;
        if (paren) {
            char *end;
            line = strtol(paren + 1, &end, 10);
            if (end[0] == ')' && end[1] == ':' && end[2] == ' ') rest = end + 3;
        }
        const char *next = eol ? eol + 1 : NULL;
        if (rest && rest < p + len) {
            size_t rl = (size_t)(p + len - rest);
            bool is_err = strncmp(rest, "error", 5) == 0 || strncmp(rest, "catastrophic", 12) == 0;
            bool is_warn = strncmp(rest, "warning", 7) == 0;
            const char *colon = memchr(rest, ':', rl);
            if ((is_err && errors) || (is_warn && !errors)) {
                /* Context: the next line is the source (indented 2), then the caret line. */
                const char *src = next, *caret = NULL;
                size_t sl = 0, cl = 0;
                int col = 1;
                if (src) {
                    const char *e2 = strchr(src, '\n');
                    sl = e2 ? (size_t)(e2 - src) : strlen(src);
                    caret = e2 ? e2 + 1 : NULL;
                    if (caret) {
                        const char *e3 = strchr(caret, '\n');
                        cl = e3 ? (size_t)(e3 - caret) : strlen(caret);
                        const char *hat = memchr(caret, '^', cl);
                        if (hat && strspn(caret, " ") == (size_t)(hat - caret)) {
                            col = (int)(hat - caret) - 1;
                            next = e3 ? e3 + 1 : NULL;
                        } else {
                            caret = NULL;
                        }
                    }
                }
                if (col < 1) col = 1;
                const char *file = uk->path ? uk->path : uk->src_pos.file;
                long fl = line;
                int fc = col;
                if (!uk->path && uk->code_origin.line) {
                    fl = uk->code_origin.line + line - 1;
                    fc = uk->code_origin.col + col - 1;
                } else if (!uk->path) {
                    file = "code";
                }
                const char *kind = is_err ? "error" : "warning";
                const char *text = colon ? colon + 2 : rest;
                size_t tl = (size_t)(p + len - text);
                /* "warning #177-D: x" keeps the number: "warning: x [#177-D]". */
                const char *hash = memchr(rest, '#', (size_t)(colon ? colon - rest : 0));
                size_t hl = hash ? (size_t)(colon - hash) : 0;
                if (n < cap)
                    n += (size_t)snprintf(out + n, cap - n, "%s%s:%ld:%d: %s: %.*s%s%.*s%s",
                                          n ? "\n" : "", file ? file : "code", fl, fc, kind,
                                          (int)tl, text, hl ? " [" : "", (int)hl, hash ? hash : "",
                                          hl ? "]" : "");
                if (caret && n < cap)
                    n += (size_t)snprintf(out + n, cap - n, "\n%.*s\n%.*s", (int)sl, src, (int)cl,
                                          caret);
                if (first && !*n_found) *first = (pl_pos){file, (int)fl, fc};
                (*n_found)++;
            }
        }
        p = next;
    }
    if (n >= cap && cap > 4) memcpy(out + cap - 4, "...", 4);
}

/* Compiles uk for `arch` (or takes it from the cache), or fills err with the positioned
 * diagnostics. Used at check time and, when the device's arch differs, at load. */
static pl_status pl__compile(const pl_stage *st, const pl_ukern *uk, int arch, pl_nvrtc_out *out,
                             char *warn, size_t wcap, char *info, size_t icap, pl_error *err)
{
    const char *incs[65];
    int ni = 0;
    incs[ni++] = uk->srcdir;
    for (int i = 0; i < uk->n_includes && ni < 65; i++)
        incs[ni++] = uk->includes[i];
    pl_nvrtc_in in = {
        .src = uk->text,
        .len = uk->len,
        .name = uk->path ? uk->path : "code",
        .function = uk->function,
        .options = uk->options,
        .n_options = uk->n_options,
        .includes = incs,
        .n_includes = ni,
        .arch = arch,
    };
    pl_error e;
    pl_status s = pl_nvrtc_compile(&in, out, &e);
    if (s == PL_OK) {
        int nw = 0;
        if (out->log) pl__diagnostics(uk, out->log, false, warn, wcap, &nw, NULL);
        if (!nw) warn[0] = '\0';
        char dir[1024];
        pl_nvrtc_cache_dir(dir, sizeof dir);
        snprintf(info, icap, "pipectl: stage '%s': %s for sm_%d %s (%.0f ms, %s/%s.cubin)",
                 st->name, uk->path ? uk->path : "code", arch,
                 out->cached ? "found in the cache, nothing compiled" : "compiled with NVRTC",
                 out->ms, dir, out->key);
        return PL_OK;
    }
    if (out->compile_failed && out->log) {
        char diag[PL_ERROR_MSG_MAX - 256];
        int nd;
        pl_pos first = {0};
        pl__diagnostics(uk, out->log, true, diag, sizeof diag, &nd, &first);
        if (nd) {
            char where[160] = "";
            if (uk->src_pos.line)
                snprintf(where, sizeof where, "%s:%d:%d: ", uk->src_pos.file, uk->src_pos.line,
                         uk->src_pos.col);
            pl_error_set(err, PL_EINPUT, "%s\n%snote: in kernel stage '%s'", diag, where, st->name);
            /* The record's position is the compiler's first error (in the .cu, or the YAML line
             * inside code:), as the message's first line says. */
            if (err && first.line) {
                snprintf(err->file, sizeof err->file, "%s", first.file ? first.file : "");
                err->line = first.line;
                err->col = first.col;
            }
            return pl_error_tag(err, st->name, -1);
        }
        return pl_error_at(err, PL_EINPUT, uk->src_pos, "stage '%s': NVRTC: %s", st->name,
                           out->log);
    }
    if (out->no_function)
        return pl_error_at(err, PL_EINPUT, uk->function_pos,
                           "stage '%s': %s has no kernel '%s'; it has: %s", st->name,
                           uk->path ? uk->path : "the code", uk->function,
                           out->entries && *out->entries ? out->entries : "no kernels");
    return pl_error_at(err, s, uk->src_pos, "stage '%s': %s", st->name,
                       strncmp(e.msg, "error: ", 7) == 0 ? e.msg + 7 : e.msg);
}
#endif

/* args: against the kernel's parameters (count, then each size). */
static pl_status pl__check_params(const pl_stage *st, const pl_ukern *uk, const size_t *sizes,
                                  int np, pl_error *err)
{
    if (np != uk->n_args)
        return pl_error_at(err, PL_EINPUT, uk->args_pos,
                           "stage '%s': kernel '%s' takes %d parameter%s, but args: gives %d",
                           st->name, uk->function, np, np == 1 ? "" : "s", uk->n_args);
    for (int i = 0; i < np; i++) {
        size_t want = pl_uarg_size(uk->args[i].type);
        if (sizes[i] != want)
            return pl_error_at(err, PL_EINPUT, uk->args[i].pos,
                               "stage '%s': argument %d '%s' is %s (%zu bytes), but parameter %d "
                               "of kernel '%s' is %zu bytes",
                               st->name, i + 1, uk->args[i].text,
                               pl_uarg_type_name(uk->args[i].type), want, i + 1, uk->function,
                               sizes[i]);
    }
    return PL_OK;
}

/* Which of source:, code: and module: the stage gives (one, which pl_kernel checks is there):
 * its index in given[], or an error at the second one. */
static pl_status pl__one_source(const pl_stage *st, const pl_opt *const given[3], int *first,
                                pl_error *err)
{
    static const char *const names[3] = {"source", "code", "module"};
    *first = -1;
    for (int i = 0; i < 3; i++) {
        if (!given[i]) continue;
        if (*first >= 0)
            return pl_error_at(err, PL_EINPUT, given[i]->pos,
                               "kernel stage '%s': give one of 'source:', 'code:' or 'module:', "
                               "not both '%s:' and '%s:'",
                               st->name, names[*first], names[i]);
        *first = i;
    }
    return PL_OK;
}

/* The kernel's text: code: as written, or the file of source: or module: (read now; a module's
 * format from its name). so: the option given. */
static pl_status pl__bind_text(pl_spec *spec, const pl_stage *st, const pl_opt *so, bool is_src,
                               bool is_code, pl_ukern *uk, pl_error *err)
{
    if (is_code) {
        uk->format = PL_UMOD_SOURCE;
        uk->text = so->str;
        uk->len = strlen(so->str);
        uk->name = "code";
        uk->code_origin = pl__code_origin(spec, so);
        return PL_OK;
    }
    uk->name = so->str;
    uk->path = pl__resolve(spec, so->str);
    if (!uk->path) return pl__oom(err);
    const char *slash = strrchr(uk->path, '/');
    uk->srcdir = slash ? pl_spec_strndup(spec, uk->path, (size_t)(slash - uk->path)) : ".";
    if (!uk->srcdir) return pl__oom(err);
    if (is_src) {
        uk->format = PL_UMOD_SOURCE;
    } else {
        const char *dot = strrchr(so->str, '.');
        if (dot && strcmp(dot, ".ptx") == 0)
            uk->format = PL_UMOD_PTX;
        else if (dot && strcmp(dot, ".cubin") == 0)
            uk->format = PL_UMOD_CUBIN;
        else if (dot && strcmp(dot, ".fatbin") == 0)
            uk->format = PL_UMOD_FATBIN;
        else
            return pl_error_at(err, PL_EINPUT, so->val_pos,
                               "kernel stage '%s': module '%s' must end in .ptx, .cubin or "
                               ".fatbin (CUDA source goes in 'source:')",
                               st->name, so->str);
    }
    PL_CHECK(pl__read(spec, st, uk->path, so->val_pos, &uk->text, &uk->len, err));
    if (uk->len == 0)
        return pl_error_at(err, PL_EINPUT, so->val_pos, "kernel stage '%s': '%s' is empty",
                           st->name, so->str);
    return PL_OK;
}

/* The launch: grid, block, shared memory and args:. */
static pl_status pl__bind_launch(pl_spec *spec, pl_stage *st, pl_ukern *uk, pl_error *err)
{
    PL_CHECK(pl__dims(spec, st, "grid", uk->grid, err));
    PL_CHECK(pl__dims(spec, st, "block", uk->block, err));
    const pl_opt *sh = pl_stage_opt(st, "shared");
    if (sh) {
        int64_t v;
        PL_CHECK(pl_kexpr_eval(spec, st->name, "shared", sh->str, sh->val_pos, &v, err));
        if (v < 0 || v > (int64_t)(228u << 10))
            return pl_error_at(err, PL_EINPUT, sh->val_pos,
                               "stage '%s': shared is %lld bytes; the most any GPU gives a block "
                               "is 232448 (227 KiB, sm_90)",
                               st->name, (long long)v);
        uk->shared = (unsigned)v;
        uk->shared_pos = sh->val_pos;
    }
    const pl_opt *ao = pl_stage_opt(st, "args");
    if (!ao) {
        uk->args_pos = st->pos;
        return PL_OK;
    }
    uk->args_pos = ao->val_pos;
    if (ao->n_items > PL_UKERN_MAX_ARGS)
        return pl_error_at(err, PL_EINPUT, ao->val_pos,
                           "stage '%s': %d arguments; a kernel stage takes at most %d", st->name,
                           ao->n_items, PL_UKERN_MAX_ARGS);
    uk->n_args = ao->n_items;
    uk->args = pl_spec_alloc(spec, (size_t)(ao->n_items + 1) * sizeof *uk->args);
    if (!uk->args) return pl__oom(err);
    for (int i = 0; i < ao->n_items; i++)
        PL_CHECK(pl__arg(spec, st, i, ao->item_tags ? ao->item_tags[i] : NULL, ao->items[i],
                         ao->item_pos[i], &uk->args[i], err));
    return PL_OK;
}

/* NVRTC's options: and include:, for CUDA source only. */
static pl_status pl__bind_nvrtc_opts(pl_spec *spec, pl_stage *st, pl_ukern *uk, pl_error *err)
{
    PL_CHECK(pl__strs(spec, st, "options", false, &uk->options, &uk->n_options, err));
    PL_CHECK(pl__strs(spec, st, "include", true, &uk->includes, &uk->n_includes, err));
    if (uk->format != PL_UMOD_SOURCE && (uk->n_options || uk->n_includes)) {
        const pl_opt *o = pl_stage_opt(st, uk->n_options ? "options" : "include");
        return pl_error_at(err, PL_EINPUT, o->pos,
                           "kernel stage '%s': '%s:' is for CUDA source (NVRTC); a prebuilt "
                           "module is not compiled",
                           st->name, o->key);
    }
    return PL_OK;
}

/* A PTX module: the kernel is one of its entries, and args: match its parameters. */
static pl_status pl__check_ptx(const pl_stage *st, const pl_ukern *uk, pl_error *err)
{
    char list[1024];
    if (!pl_kimage_ptx_entries(uk->text, uk->function, list, sizeof list))
        return pl_error_at(err, PL_EINPUT, uk->function_pos,
                           "stage '%s': %s has no kernel '%s'; it has: %s", st->name, uk->name,
                           uk->function, list[0] ? list : "no .entry at all");
    size_t sizes[PL_UKERN_MAX_ARGS + 1];
    int np = 0;
    if (pl_kimage_ptx_params(uk->text, uk->function, sizes, PL_UKERN_MAX_ARGS + 1, &np))
        PL_CHECK(pl__check_params(st, uk, sizes, np, err));
    return PL_OK;
}

/* The image to load: a module as given (a PTX with its NUL), CUDA source compiled with NVRTC now
 * (none in a build without CUDA). */
static pl_status pl__bind_image(pl_spec *spec, pl_stage *st, pl_ukern *uk, pl_error *err)
{
    uk->image = uk->text;
    uk->image_size = uk->len + (uk->format == PL_UMOD_PTX ? 1 : 0);
    if (uk->format != PL_UMOD_SOURCE) return PL_OK;
#ifdef PL_WITH_CUDA
    pl_nvrtc_out o;
    uk->arch = pl_ukern_default_arch();
    char warn[PL_ERROR_MSG_MAX], info[PL_ERROR_MSG_MAX];
    pl_status s = pl__compile(st, uk, uk->arch, &o, warn, sizeof warn, info, sizeof info, err);
    if (s == PL_OK) {
        uk->warnings = warn[0] ? pl_spec_strdup(spec, warn) : NULL;
        uk->info = pl_spec_strdup(spec, info);
        void *img = pl_spec_alloc(spec, o.size);
        uk->lowered = pl_spec_strdup(spec, o.lowered);
        if (!img || !uk->lowered) s = pl__oom(err);
        if (img) memcpy(img, o.image, o.size);
        uk->image = img;
        uk->image_size = o.size;
    }
    pl_nvrtc_out_fini(&o);
    return s;
#else
    (void)spec;
    (void)st;
    (void)err;
    uk->image = NULL; /* no NVRTC in this build */
    return PL_OK;
#endif
}

/* A cubin (compiled here, or given) lists its kernels' parameters: args: are checked now, not
 * only at load on a device. */
static pl_status pl__check_cubin(const pl_stage *st, const pl_ukern *uk, pl_error *err)
{
    if (!uk->image || (uk->format != PL_UMOD_SOURCE && uk->format != PL_UMOD_CUBIN)) return PL_OK;
    size_t sizes[PL_UKERN_MAX_ARGS + 1] = {0};
    int np = 0;
    if (pl_kimage_cubin_params(uk->image, uk->image_size, uk->lowered, sizes, PL_UKERN_MAX_ARGS + 1,
                               &np))
        PL_CHECK(pl__check_params(st, uk, sizes, np, err));
    return PL_OK;
}

pl_status pl_ukern_bind(pl_spec *spec, pl_stage *st, pl_ukern **out, pl_error *err)
{
    const pl_opt *src = pl_stage_opt(st, "source"), *code = pl_stage_opt(st, "code"),
                 *mod = pl_stage_opt(st, "module");
    const pl_opt *const given[3] = {src, code, mod};
    int first;
    PL_CHECK(pl__one_source(st, given, &first, err));
    pl_ukern *uk = pl_spec_alloc(spec, sizeof *uk);
    if (!uk) return pl__oom(err);
    const pl_opt *fo = pl_stage_opt(st, "function");
    if (!fo)
        return pl_error_at(err, PL_EINPUT, st->pos,
                           "kernel stage '%s' needs 'function:' (the kernel's name; a name "
                           "expression like scale<float> for a template)",
                           st->name);
    uk->function = fo->str;
    uk->function_pos = fo->val_pos;
    uk->lowered = fo->str;
    const pl_opt *so = given[first];
    uk->src_pos = so->val_pos;
    uk->srcdir = spec->dir;
    PL_CHECK(pl__bind_text(spec, st, so, src != NULL, code != NULL, uk, err));
    PL_CHECK(pl__bind_launch(spec, st, uk, err));
    PL_CHECK(pl__bind_nvrtc_opts(spec, st, uk, err));
    PL_CHECK(pl__bind_host(spec, st, uk, err));
    if (uk->format == PL_UMOD_PTX) PL_CHECK(pl__check_ptx(st, uk, err));
    PL_CHECK(pl__bind_image(spec, st, uk, err));
    PL_CHECK(pl__check_cubin(st, uk, err));
    *out = uk;
    return PL_OK;
}

pl_status pl_ukern_validate(const pl_spec *spec, const pl_stage *st, const pl_ukern *uk,
                            pl_error *err)
{
    (void)spec;
    (void)st;
    (void)uk;
    (void)err;
    return PL_OK; /* everything is checked at bind: buffer sizes are known by then */
}

void pl_ukern_notes(const pl_ukern *uk, bool verbose, char *buf, size_t cap)
{
    const char *w = uk->warnings, *i = verbose ? uk->info : NULL;
    snprintf(buf, cap, "%s%s%s", w ? w : "", w && i ? "\n" : "", i ? i : "");
}

void pl_ukern_describe(const pl_ukern *uk, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s %s grid [%u, %u, %u] block [%u, %u, %u]%s", uk->function, uk->name,
             uk->grid[0], uk->grid[1], uk->grid[2], uk->block[0], uk->block[1], uk->block[2],
             uk->host_fn ? "" : " (no host reference)");
}

/* ---- run time ---- */

typedef struct pl__uk_worker {
    pl_lua *lx;
    int fn_ref;
    uint64_t epoch;
} pl__uk_worker;

/* Per-run state: the Lua states of the host reference (host executor) or the loaded module
 * (GPU executor). */
typedef struct pl__uk_run {
    const pl_spec *spec;
    const pl_stage *st;
    const pl_ukern *uk;
    int64_t batches;
    uint64_t seed;
    int n_workers;
    pl__uk_worker *workers;
#ifdef PL_WITH_CUDA
    pl_umod *mod;
#endif
} pl__uk_run;

typedef struct pl__load_arg {
    const pl__uk_run *r;
    pl__uk_worker *w;
} pl__load_arg;

/* Loads the host reference in a worker's state and keeps the function in the registry. */
static int pl__host_load(lua_State *L)
{
    pl__load_arg *a = lua_touserdata(L, 1);
    const pl_ukern *uk = a->r->uk;
    pl_lua_load_text(L, uk->lua_text, uk->lua_len, uk->lua_chunk);
    lua_call(L, 0, 1);
    if (*uk->host_fn) lua_getglobal(L, uk->host_fn);
    if (lua_type(L, -1) != LUA_TFUNCTION)
        return luaL_error(L, "the host reference '%s' is not a function (it is %s)",
                          *uk->host_fn ? uk->host_fn : "host:", luaL_typename(L, -1));
    a->w->fn_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    return 0;
}

pl_status pl_ukern_close(const pl_run_env *env, const pl_stage *st, const pl_ukern *uk, void *state)
{
    (void)env;
    (void)st;
    (void)uk;
    pl__uk_run *r = state;
    if (!r) return PL_OK;
    for (int w = 0; r->workers && w < r->n_workers; w++)
        pl_lua_free(r->workers[w].lx);
    free(r->workers);
#ifdef PL_WITH_CUDA
    pl_umod_free(r->mod);
#endif
    free(r);
    return PL_OK;
}

#ifdef PL_WITH_CUDA
/* Loads the module on the device and checks args: against the kernel's parameters. */
static pl_status pl__open_gpu(const pl_run_env *env, const pl_stage *st, pl__uk_run *r,
                              pl_error *err)
{
    const pl_ukern *uk = r->uk;
    const void *image = uk->image;
    size_t size = uk->image_size;
    const char *symbol = uk->lowered;
    pl_nvrtc_out o = {0};
    pl_status s = PL_OK;
    if (uk->format == PL_UMOD_SOURCE) {
        int arch = 0;
        PL_CHECK(pl_umod_device_arch(env->spec->run.device, &arch, err));
        if (arch != uk->arch) {
            /* Checked for another arch (--arch, PIPECTL_ARCH or the default): this device's. */
            char warn[PL_ERROR_MSG_MAX], info[PL_ERROR_MSG_MAX];
            PL_CHECK(pl__compile(st, uk, arch, &o, warn, sizeof warn, info, sizeof info, err));
            image = o.image;
            size = o.size;
            symbol = o.lowered;
        }
    }
    pl_error e;
    s = pl_umod_load(image, size, symbol, uk->function, &r->mod, &e);
    if (s != PL_OK) {
        const char *m = strncmp(e.msg, "error: ", 7) == 0 ? e.msg + 7 : e.msg;
        s = pl_error_at(err, s, s == PL_EINPUT ? uk->function_pos : uk->src_pos, "stage '%s': %s",
                        st->name, m);
        goto done;
    }
    int np = 0;
    const pl_umod_param *p = pl_umod_params(r->mod, &np);
    size_t sizes[256];
    for (int i = 0; i < np && i < 256; i++)
        sizes[i] = p[i].size;
    PL_CHECK_GOTO(pl__check_params(st, uk, sizes, np < 256 ? np : 256, err), s, done);
    if (uk->shared) {
        pl_error e2;
        if (pl_umod_set_shared(r->mod, uk->shared, &e2) != PL_OK)
            s = pl_error_at(err, PL_EINPUT, uk->shared_pos, "stage '%s': %s", st->name,
                            e2.msg + (strncmp(e2.msg, "error: ", 7) == 0 ? 7 : 0));
    }
done:
    pl_nvrtc_out_fini(&o);
    return s;
}
#endif

pl_status pl_ukern_open(const pl_run_env *env, const pl_stage *st, const pl_ukern *uk, void **state,
                        pl_error *err)
{
    *state = NULL;
    pl__uk_run *r = calloc(1, sizeof *r);
    if (!r) return pl__oom(err);
    r->spec = env->spec;
    r->st = st;
    r->uk = uk;
    r->batches = env->batches;
    r->seed = env->seed;
    pl_status s = PL_OK;
    if (env->on_gpu) {
#ifdef PL_WITH_CUDA
        PL_CHECK_GOTO(pl__open_gpu(env, st, r, err), s, fail);
#endif
        *state = r;
        return PL_OK;
    }
    if (!uk->host_fn) {
        s = pl_error_at(err, PL_EINPUT, st->pos,
                        "kernel stage '%s' is a user kernel without a host reference, so the host "
                        "executor cannot run it; add 'host:' (a Lua function computing the same "
                        "result on the stage's buffers) or run it on a GPU (--executor gpu)",
                        st->name);
        goto fail;
    }
    r->n_workers = env->workers > 0 ? env->workers : 1;
    r->workers = calloc((size_t)r->n_workers, sizeof *r->workers);
    if (!r->workers) {
        s = pl__oom(err);
        goto fail;
    }
    for (int w = 0; w < r->n_workers; w++) {
        pl__uk_worker *wk = &r->workers[w];
        wk->fn_ref = LUA_NOREF;
        PL_CHECK_GOTO(pl_lua_new(PL__HOST_MEMORY, "the host reference ran too long",
                                 "the host reference uses too much memory", &wk->lx, err),
                      s, fail);
        char msg[PL_ERROR_MSG_MAX - 128];
        pl__load_arg la = {r, wk};
        if (pl_lua_call(wk->lx, pl__host_load, &la, PL__HOST_INSTRUCTIONS, true, msg, sizeof msg) !=
            PL_OK) {
            s = pl_error_set(err, PL_ELUA, "stage '%s': loading the host reference: %s", st->name,
                             msg);
            goto fail;
        }
    }
    *state = r;
    return PL_OK;
fail:
    pl_ukern_close(env, st, uk, r);
    return s;
}

typedef struct pl__host_arg {
    pl__uk_run *r;
    pl__uk_worker *w;
    const pl_stage_ctx *ctx;
} pl__host_arg;

static void pl__push_view(lua_State *L, const pl__host_arg *a, int b, bool writable)
{
    const pl_buffer *buf = &a->r->spec->buffers[b];
    pl_lua_view_push(L, a->ctx->bufs[b], buf->dtype, buf->rank, buf->shape, writable, buf->name,
                     a->r->st->name, &a->w->epoch);
}

static int pl__host_batch(lua_State *L)
{
    pl__host_arg *a = lua_touserdata(L, 1);
    const pl_stage *st = a->r->st;
    const pl_ukern *uk = a->r->uk;
    luaL_checkstack(L, 8, NULL);
    lua_getfield(L, LUA_REGISTRYINDEX, PL_LUA_RANDOMSEED);
    lua_pushinteger(
        L, (lua_Integer)(a->r->seed ^ ((uint64_t)st->index * UINT64_C(0x9e3779b97f4a7c15))));
    lua_pushinteger(L, (lua_Integer)a->ctx->batch);
    lua_call(L, 2, 0);
    lua_rawgeti(L, LUA_REGISTRYINDEX, a->w->fn_ref);
    lua_pushinteger(L, (lua_Integer)a->ctx->batch);
    /* opts: name, batches, seed, grid, block and the resolved args (buffers by name). */
    lua_createtable(L, 0, 6);
    lua_pushstring(L, st->name);
    lua_setfield(L, -2, "name");
    lua_pushinteger(L, (lua_Integer)a->r->batches);
    lua_setfield(L, -2, "batches");
    lua_pushinteger(L, (lua_Integer)a->r->seed);
    lua_setfield(L, -2, "seed");
    const unsigned *dims[2] = {uk->grid, uk->block};
    const char *dn[2] = {"grid", "block"};
    for (int d = 0; d < 2; d++) {
        lua_createtable(L, 3, 0);
        for (int i = 0; i < 3; i++) {
            lua_pushinteger(L, (lua_Integer)dims[d][i]);
            lua_rawseti(L, -2, i + 1);
        }
        lua_setfield(L, -2, dn[d]);
    }
    lua_createtable(L, uk->n_args, 0);
    for (int i = 0; i < uk->n_args; i++) {
        const pl_uarg *g = &uk->args[i];
        switch (g->type) {
        case PL_UARG_BUF:
            lua_pushstring(L, a->r->spec->buffers[g->buffer].name);
            break;
        case PL_UARG_I32:
            lua_pushinteger(L, g->v.i32);
            break;
        case PL_UARG_U32:
            lua_pushinteger(L, (lua_Integer)g->v.u32);
            break;
        case PL_UARG_I64:
            lua_pushinteger(L, (lua_Integer)g->v.i64);
            break;
        case PL_UARG_U64:
            lua_pushinteger(L, (lua_Integer)g->v.u64);
            break;
        case PL_UARG_F32:
            lua_pushnumber(L, g->v.f32);
            break;
        case PL_UARG_F64:
            lua_pushnumber(L, g->v.f64);
            break;
        }
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "args");
    /* bufs: views of the reads (read-only) and writes (writable), by name. */
    lua_createtable(L, 0, st->n_reads + st->n_writes);
    for (int i = 0; i < st->n_reads; i++) {
        bool w = pl__in_refs(st->writes, st->n_writes, st->reads[i].name);
        pl__push_view(L, a, st->reads[i].index, w);
        lua_setfield(L, -2, st->reads[i].name);
    }
    for (int i = 0; i < st->n_writes; i++) {
        pl__push_view(L, a, st->writes[i].index, true);
        lua_setfield(L, -2, st->writes[i].name);
    }
    lua_call(L, 3, 0);
    return 0;
}

pl_status pl_ukern_run_host(pl_stage_ctx *ctx, const pl_ukern *uk, pl_error *err)
{
    (void)uk;
    pl__uk_run *r = ctx->state;
    if (!r || !r->workers || ctx->worker < 0 || ctx->worker >= r->n_workers)
        return pl_error_set(err, PL_ERUNTIME,
                            "stage '%s', batch %lld: the host reference is not open for worker %d",
                            ctx->stage->name, (long long)ctx->batch, ctx->worker);
    pl__uk_worker *w = &r->workers[ctx->worker];
    pl__host_arg a = {r, w, ctx};
    char msg[PL_ERROR_MSG_MAX - 128];
    pl_status s =
        pl_lua_call(w->lx, pl__host_batch, &a, PL__HOST_INSTRUCTIONS, true, msg, sizeof msg);
    w->epoch++;
    if (s != PL_OK)
        return pl_error_set(err, PL_ELUA, "stage '%s', batch %lld: host reference: %s",
                            ctx->stage->name, (long long)ctx->batch, msg);
    return PL_OK;
}

pl_status pl_ukern_record(const pl_dev_ctx *ctx, const pl_ukern *uk, pl_error *err)
{
#ifdef PL_WITH_CUDA
    const pl__uk_run *r = ctx->state;
    if (!r || !r->mod)
        return pl_error_set(err, PL_ERUNTIME, "stage '%s': the kernel's module is not loaded",
                            ctx->stage->name);
    /* Arguments resolved for this slot: buffers are this slot's device pointers. */
    void *ptrs[PL_UKERN_MAX_ARGS];
    union {
        int32_t i32;
        uint32_t u32;
        int64_t i64;
        uint64_t u64;
        float f32;
        double f64;
    } vals[PL_UKERN_MAX_ARGS];
    void *params[PL_UKERN_MAX_ARGS];
    for (int i = 0; i < uk->n_args; i++) {
        const pl_uarg *g = &uk->args[i];
        if (g->type == PL_UARG_BUF) {
            ptrs[i] = ctx->dev_bufs[g->buffer];
            params[i] = &ptrs[i];
        } else {
            memcpy(&vals[i], &g->v, sizeof vals[i]);
            params[i] = &vals[i];
        }
    }
    return pl_umod_launch(r->mod, uk->grid, uk->block, uk->shared, ctx->stream, params,
                          ctx->stage->name, ctx->batch, err);
#else
    (void)uk;
    return pl_error_set(err, PL_ERUNTIME, "stage '%s': built without CUDA", ctx->stage->name);
#endif
}
