/* pl_override: `--set KEY=VALUE` on a loaded document (see pl_override.h). The new nodes carry the
 * argument as their position (PL_POS_ARG), so whatever a later phase says about them (the schema,
 * check, plan, the run) reads "--set KEY=VALUE: error: ..." instead of pointing into the file. */
#include "pl_override.h"
#include "pl_yaml_tree.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct pl__set {
    pl_spec *spec;
    const pl_schema_src *src;
    pl_pos pos; /* the argument: every node it brings, and its errors */
    pl_error *err;
} pl__set;

static pl_status pl__oom(pl__set *s)
{
    return pl_error_set(s->err, PL_ENOMEM, "error: out of memory while applying --set");
}

/* The value node of `key` in mapping m (its key node in *kn), or NULL. */
static pl_value *pl__get(const pl_value *m, const char *key, pl_value **kn)
{
    for (pl_value *k = m->child; k && k->next; k = k->next->next)
        if (k->type == PL_VAL_SCALAR && strcmp(k->text, key) == 0) {
            if (kn) *kn = k;
            return k->next;
        }
    return NULL;
}

/* An empty Lua table stands for an empty mapping too. */
static bool pl__is_map(const pl_value *v)
{
    return v->type == PL_VAL_MAP || (v->type == PL_VAL_LIST && v->n == 0 && v->table);
}

/* Links the detached pair k, v into m: at the end, or in key order in a Lua table's mapping
 * (whose pairs the Lua front end sorted: the walker relies on it for a stable spec). */
static void pl__insert(pl_value *m, pl_value *k, pl_value *v)
{
    pl_value **link = &m->child;
    while (*link && (*link)->next && (!m->unordered || strcmp((*link)->text, k->text) < 0))
        link = &(*link)->next->next;
    k->next = v;
    v->next = *link;
    *link = k;
    if (!v->next) m->last = v;
    if (m->type == PL_VAL_LIST) m->type = PL_VAL_MAP; /* an empty Lua table, now a mapping */
    m->n += 2;
}

/* A detached scalar key node with the argument's position. */
static pl_value *pl__key(pl__set *s, const char *text)
{
    pl_value *k = pl_value_add(NULL, PL_VAL_SCALAR, s->pos);
    if (!k || !pl_value_set_text(k, text, strlen(text))) {
        pl_value_free(k);
        return NULL;
    }
    k->plain = true;
    return k;
}

/* Sets m's `key` to v (owned from here on): in place of the value it has, else as a new pair. */
static pl_status pl__set_key(pl__set *s, pl_value *m, const char *key, pl_value *v)
{
    pl_value *kn = NULL, *old = pl__get(m, key, &kn);
    if (old) {
        v->next = old->next;
        kn->next = v;
        kn->pos = s->pos; /* the pair comes from the argument now */
        if (m->last == old) m->last = v;
        old->next = NULL;
        pl_value_free(old);
        return PL_OK;
    }
    pl_value *k = pl__key(s, key);
    if (!k) {
        pl_value_free(v);
        return pl__oom(s);
    }
    pl__insert(m, k, v);
    return PL_OK;
}

/* m's mapping under `key`, made (empty) when m has no such key; `next` is the key wanted in it
 * and `path` names m so far, for messages. */
static pl_status pl__child_map(pl__set *s, pl_value *m, const char *key, const char *next,
                               const char *path, pl_value **out)
{
    char what[32], cb[72];
    pl_value *v = pl__get(m, key, NULL);
    if (v && !pl__is_map(v))
        return pl_error_at(s->err, PL_EINPUT, s->pos,
                           "'%s%s%s' is %s, not a mapping, so it has no key '%s'", path,
                           *path ? "." : "", key, pl_value_what(v, what), pl_clip(next, cb));
    if (v) {
        *out = v;
        return PL_OK;
    }
    v = pl_value_add(NULL, PL_VAL_MAP, s->pos);
    if (!v) return pl__oom(s);
    v->table = v->unordered = s->src->lua;
    PL_CHECK(pl__set_key(s, m, key, v));
    *out = v;
    return PL_OK;
}

/* The stage called `name` in the stages list (its mapping), also in a loop's `stages:`, or NULL;
 * *list gets the list that holds it. */
static pl_value *pl__find_stage(pl_value *stages, const char *name, pl_value **list)
{
    for (pl_value *it = stages ? stages->child : NULL; it; it = it->next) {
        if (!pl__is_map(it)) continue;
        const pl_value *n = pl__get(it, "name", NULL);
        if (n && n->type == PL_VAL_SCALAR && strcmp(n->text, name) == 0) {
            *list = stages;
            return it;
        }
        pl_value *body = pl__get(it, "stages", NULL);
        pl_value *in = body && body->type == PL_VAL_LIST ? pl__find_stage(body, name, list) : NULL;
        if (in) return in;
    }
    return NULL;
}

/* "a, b, c" of the stages' names into buf, and their names in names[0..*n). */
static const char *pl__stage_names(const pl_value *stages, const char **names, int cap, int *n,
                                   char *buf, size_t bcap)
{
    size_t k = 0;
    *n = 0;
    buf[0] = '\0';
    for (const pl_value *it = stages ? stages->child : NULL; it; it = it->next) {
        const pl_value *nm = pl__is_map(it) ? pl__get(it, "name", NULL) : NULL;
        if (!nm || nm->type != PL_VAL_SCALAR) continue;
        if (*n < cap) names[(*n)++] = nm->text;
        if (k + strlen(nm->text) + 8 < bcap)
            k += (size_t)snprintf(buf + k, bcap - k, "%s%s", k ? ", " : "", nm->text);
        else if (k + 4 < bcap && strcmp(buf + k - 3, "...") != 0)
            k += (size_t)snprintf(buf + k, bcap - k, ", ...");
    }
    return *n ? buf : "none";
}

#define PL__MAX_NAMES 64

/* `stages.NAME` or `NAME` names no stage: say which do, or that NAME is a buffer. */
static pl_status pl__no_stage(pl__set *s, const pl_value *root, const pl_value *stages,
                              const char *name, const char *rest, bool prefixed)
{
    char cb[72], list[256];
    const char *names[PL__MAX_NAMES + 4];
    int n;
    pl__stage_names(stages, names, PL__MAX_NAMES, &n, list, sizeof list);
    const pl_value *bufs = pl__get(root, "buffers", NULL);
    if (bufs && pl__is_map(bufs) && pl__get(bufs, name, NULL))
        return pl_error_at(s->err, PL_EINPUT, s->pos,
                           "'%s' is a buffer, not a stage: write --set buffers.%s.%s=...",
                           pl_clip(name, cb), name, rest);
    if (!prefixed) { /* the top-level keys are candidates too */
        for (const pl_field *f = pl_schema_top.fields; f->key.name && n < PL__MAX_NAMES + 4; f++)
            names[n++] = s->src->lua && f->lua_name ? f->lua_name : f->key.name;
    }
    const char *best = pl_closest(name, names, n);
    char dym[96] = "";
    if (best) snprintf(dym, sizeof dym, " (did you mean '%s'?)", best);
    if (prefixed)
        return pl_error_at(s->err, PL_EINPUT, s->pos,
                           "no stage '%s'%s; a --set changes the keys of the file's stages and "
                           "adds none: the stages are %s",
                           pl_clip(name, cb), dym, list);
    return pl_error_at(s->err, PL_EINPUT, s->pos,
                       "unknown key '%s'%s; a --set key starts with %s, run, buffers, stages or a "
                       "stage's name (the stages are %s)",
                       pl_clip(name, cb), dym, s->src->lua ? "name" : "pipeline", list);
}

/* Splits key at '.' into segs (pointing into key, which is modified). */
static pl_status pl__split(pl__set *s, char *key, char **segs, int *n)
{
    *n = 0;
    for (char *p = key;;) {
        char *dot = strchr(p, '.');
        if (dot) *dot = '\0';
        if (!*p)
            return pl_error_at(s->err, PL_EINPUT, s->pos,
                               "the key has an empty part; write keys joined by '.', like "
                               "run.batches or forward.weights");
        if (*n == PL_MAX_NESTING)
            return pl_error_at(s->err, PL_EINPUT, s->pos,
                               "the key has more than %d parts (PL_MAX_NESTING)", PL_MAX_NESTING);
        segs[(*n)++] = p;
        if (!dot) return PL_OK;
        p = dot + 1;
    }
}

/* One --set: finds (or makes) the mapping the key's last part belongs to and sets it to v. */
static pl_status pl__apply_one(pl__set *s, pl_value *root, char *key, pl_value *v)
{
    char *segs[PL_MAX_NESTING];
    int n, i = 0;
    pl_status st = pl__split(s, key, segs, &n);
    if (st != PL_OK) goto fail;
    /* Lua's spelling of the top level's `pipeline` is `name`; either is taken there. */
    if (s->src->lua && strcmp(segs[0], "pipeline") == 0) segs[0] = "name";
    bool top = false;
    for (const pl_field *f = pl_schema_top.fields; f->key.name && !top; f++)
        top = strcmp(segs[0], s->src->lua && f->lua_name ? f->lua_name : f->key.name) == 0;
    pl_value *m = root;
    char path[256] = "";
    if (n > 1 && (!top || strcmp(segs[0], "stages") == 0)) {
        /* A stage: `stages.NAME...` or `NAME...`. */
        bool prefixed = top;
        pl_value *stages = pl__get(root, "stages", NULL);
        if (prefixed) i = 1;
        const char *name = segs[i];
        pl_value *list = NULL;
        pl_value *stage =
            stages && stages->type == PL_VAL_LIST ? pl__find_stage(stages, name, &list) : NULL;
        if (!stage) {
            st = pl__no_stage(s, root, stages && stages->type == PL_VAL_LIST ? stages : NULL, name,
                              i + 1 < n ? segs[i + 1] : "KEY", prefixed);
            goto fail;
        }
        if (i + 1 == n) { /* stages.NAME=VALUE: the whole stage */
            pl_value **link = &list->child;
            while (*link != stage)
                link = &(*link)->next;
            v->next = stage->next;
            *link = v;
            if (list->last == stage) list->last = v;
            stage->next = NULL;
            pl_value_free(stage);
            return PL_OK;
        }
        m = stage;
        snprintf(path, sizeof path, "%s", name);
        i++;
    }
    for (; i + 1 < n; i++) {
        st = pl__child_map(s, m, segs[i], segs[i + 1], path, &m);
        if (st != PL_OK) goto fail;
        size_t len = strlen(path);
        snprintf(path + len, sizeof path - len, "%s%s", len ? "." : "", segs[i]);
    }
    return pl__set_key(s, m, segs[n - 1], v);
fail:
    pl_value_free(v);
    return st;
}

pl_status pl_override_apply(pl_spec *spec, pl_value **root, const pl_schema_src *src,
                            const char *const *sets, int n, pl_error *err)
{
    if (!*root) {
        pl_pos start = {spec->file, 1, 1};
        *root = pl_value_add(NULL, PL_VAL_MAP, start);
        if (!*root) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
        (*root)->table = (*root)->unordered = src->lua;
    }
    if (!pl__is_map(*root)) return PL_OK;
    for (int i = 0; i < n; i++) {
        char cb[72], label[96];
        snprintf(label, sizeof label, "--set %s", pl_clip(sets[i], cb));
        pl__set s = {spec, src, {pl_spec_strdup(spec, label), PL_POS_ARG, 0}, err};
        if (!s.pos.file) return pl__oom(&s);
        const char *eq = strchr(sets[i], '=');
        if (!eq || eq == sets[i])
            return pl_error_at(err, PL_EINPUT, s.pos,
                               "expected KEY=VALUE, like --set run.batches=4 or --set "
                               "forward.weights=/models/gpt2");
        size_t klen = (size_t)(eq - sets[i]);
        char *key = malloc(klen + 1);
        if (!key) return pl__oom(&s);
        memcpy(key, sets[i], klen);
        key[klen] = '\0';
        pl_value *v = NULL;
        pl_status st = pl_yaml_read_value(s.pos.file, eq + 1, strlen(eq + 1), &v, err);
        if (st == PL_OK) st = pl__apply_one(&s, *root, key, v);
        free(key);
        PL_CHECK(st);
    }
    return PL_OK;
}
