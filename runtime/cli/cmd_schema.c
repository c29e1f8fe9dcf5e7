/* cmd_schema: `pipectl schema` prints a JSON Schema (draft 2020-12) of pipeline.yaml, generated
 * from the tables the parser checks files against (parser/pl_schema.h, the kinds' key tables), so
 * editors complete and validate the same keys `pipectl check` accepts. Built as a jansson tree
 * (runtime/base/pl_json.h), keys in insertion order, printed indented. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_cli.h"
#include "pl_json.h"
#include "pl_schema.h"

/* The builders below run with one flag that says whether every allocation succeeded: a NULL from
 * jansson makes it false, and the caller reports out of memory once at the end. */
static json_t *pl__put(json_t *obj, const char *key, json_t *v, bool *ok)
{
    if (!obj || !v || json_object_set_new(obj, key, v) != 0) *ok = false;
    return obj;
}

static json_t *pl__push(json_t *arr, json_t *v, bool *ok)
{
    if (!arr || !v || json_array_append_new(arr, v) != 0) *ok = false;
    return arr;
}

/* {"type": "NAME"} */
static json_t *pl__type(const char *name, bool *ok)
{
    return pl__put(json_object(), "type", json_string(name), ok);
}

/* ["a", "b"] from strings, NULL-terminated. */
static json_t *pl__strs(const char *const *words, bool *ok)
{
    json_t *a = json_array();
    for (int i = 0; words[i]; i++)
        pl__push(a, pl_json_str(words[i]), ok);
    if (!a) *ok = false;
    return a;
}

static bool pl__is_int(const char *s)
{
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    (void)strtoll(s, &end, 10);
    return !errno && !*end;
}

static bool pl__is_num(const char *s)
{
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    double d = strtod(s, &end);
    return !errno && !*end && isfinite(d);
}

/* The enum values "a|b|c" as a JSON array. */
static json_t *pl__enum(const char *values, bool *ok)
{
    json_t *a = json_array();
    for (const char *p = values; p && *p;) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        pl__push(a, pl_json_strn(p, n), ok);
        p = bar ? bar + 1 : NULL;
    }
    if (!a) *ok = false;
    return a;
}

/* The default as a JSON value of the key's type; NULL when the table's text is prose ("the run's
 * seed") rather than a value. */
static json_t *pl__default(const pl_key *k, bool *ok)
{
    const char *d = k->def;
    json_t *v = NULL;
    if (!d) return NULL;
    switch (k->type) {
    case PL_KEY_INT:
    case PL_KEY_INT_OR_INTS:
        if (pl__is_int(d)) v = json_integer(strtoll(d, NULL, 10));
        break;
    case PL_KEY_NUM:
        if (pl__is_int(d))
            v = json_integer(strtoll(d, NULL, 10));
        else if (pl__is_num(d))
            v = json_real(strtod(d, NULL));
        break;
    case PL_KEY_BOOL:
        if (strcmp(d, "true") == 0 || strcmp(d, "false") == 0) v = json_boolean(d[0] == 't');
        break;
    case PL_KEY_NAMES:
    case PL_KEY_INTS:
    case PL_KEY_ITEMS:
        if (strcmp(d, "[]") == 0) v = json_array();
        break;
    case PL_KEY_STR:
    case PL_KEY_PATH:
    case PL_KEY_ENUM:
    case PL_KEY_NAME:
        if (!strchr(d, ' ')) v = pl_json_str(d); /* not prose: "the file's base name" */
        break;
    default:
        return NULL;
    }
    return v;
}

static json_t *pl__fields(json_t *obj, const pl_section *sec, bool *ok);

/* pipectl reads every value as text, so a quoted number ("2") is a number too. */
static json_t *pl__int_text(bool *ok)
{
    return pl__put(pl__type("string", ok), "pattern", json_string("^[-+]?[0-9]+$"), ok);
}

static json_t *pl__num_text(bool *ok)
{
    return pl__put(pl__type("string", ok), "pattern",
                   json_string("^[-+]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][-+]?[0-9]+)?$"), ok);
}

/* A YAML scalar: text, a number or a boolean. */
static json_t *pl__scalar(bool *ok)
{
    static const char *const types[] = {"string", "number", "boolean", NULL};
    return pl__put(json_object(), "type", pl__strs(types, ok), ok);
}

/* {"anyOf": [a, b, ...]} from a NULL-terminated list (the references are stolen). */
static json_t *pl__any_of(json_t *const *alts, bool *ok)
{
    json_t *a = json_array();
    for (int i = 0; alts[i]; i++)
        pl__push(a, alts[i], ok);
    return pl__put(json_object(), "anyOf", a, ok);
}

/* One key's schema: type, range, enum, default, description. `f` (NULL for kind keys) adds the
 * range of the file's own sections; `vals` (or NULL) documents the values of an enum key, in its
 * description. */
static json_t *pl__key(const pl_key *k, const pl_field *f, const pl_key_value *vals, bool *ok)
{
    json_t *o = NULL;
    switch (k->type) {
    case PL_KEY_STR:
        o = pl__scalar(ok);
        break;
    case PL_KEY_PATH:
    case PL_KEY_NAME:
        o = pl__put(pl__type("string", ok), "minLength", json_integer(1), ok);
        break;
    case PL_KEY_INT: {
        json_t *n = pl__type("integer", ok);
        if (f && f->min < f->max) {
            pl__put(n, "minimum", json_integer(f->min), ok);
            pl__put(n, "maximum", json_integer(f->max), ok);
        }
        /* words it takes besides a number (run.batches: all, depth: auto) */
        json_t *words =
            k->values ? pl__put(json_object(), "enum", pl__enum(k->values, ok), ok) : NULL;
        o = pl__any_of((json_t *[]){n, pl__int_text(ok), words, NULL}, ok);
        break;
    }
    case PL_KEY_SIZE: {
        json_t *n = pl__put(pl__type("integer", ok), "minimum", json_integer(0), ok);
        json_t *t =
            pl__put(pl__type("string", ok), "pattern",
                    json_string("^[0-9]+([.][0-9]*)? ?(B|KiB|MiB|GiB|TiB|kB|KB|MB|GB|TB)?$"), ok);
        o = pl__any_of((json_t *[]){n, t, NULL}, ok);
        break;
    }
    case PL_KEY_NUM:
        o = pl__any_of((json_t *[]){pl__type("number", ok), pl__num_text(ok), NULL}, ok);
        break;
    case PL_KEY_BOOL: {
        static const char *const words[] = {"true", "false", NULL};
        json_t *t = pl__put(json_object(), "enum", pl__strs(words, ok), ok);
        o = pl__any_of((json_t *[]){pl__type("boolean", ok), t, NULL}, ok);
        break;
    }
    case PL_KEY_ENUM:
        o = pl__put(json_object(), "enum", pl__enum(k->values, ok), ok);
        break;
    case PL_KEY_NAMES: {
        json_t *item = pl__put(pl__type("string", ok), "minLength", json_integer(1), ok);
        o = pl__put(pl__type("array", ok), "items", item, ok);
        break;
    }
    case PL_KEY_INT_OR_INTS: { /* chunks: 4 or [1, 1, 2, 4] */
        json_t *item =
            pl__any_of((json_t *[]){pl__type("integer", ok), pl__int_text(ok), NULL}, ok);
        json_t *list = pl__put(pl__type("array", ok), "items", item, ok);
        o = pl__any_of((json_t *[]){pl__type("integer", ok), pl__int_text(ok), list, NULL}, ok);
        break;
    }
    case PL_KEY_INTS: {
        json_t *item = pl__type("integer", ok);
        if (f && f->min < f->max) pl__put(item, "minimum", json_integer(f->min), ok);
        o = pl__put(pl__type("array", ok), "items", item, ok);
        if (f && f->min >= 1) {
            pl__put(o, "minItems", json_integer(1), ok);
            pl__put(o, "maxItems", json_integer(PL_MAX_RANK), ok);
        }
        break;
    }
    case PL_KEY_ITEMS: {
        json_t *tagged = pl__put(pl__type("object", ok), "minProperties", json_integer(1), ok);
        pl__put(tagged, "maxProperties", json_integer(1), ok);
        pl__put(tagged, "additionalProperties", pl__scalar(ok), ok);
        json_t *item = pl__any_of((json_t *[]){pl__scalar(ok), tagged, NULL}, ok);
        o = pl__put(pl__type("array", ok), "items", item, ok);
        break;
    }
    case PL_KEY_MAP:
        o = json_object();
        if (f && f->sub) {
            static const char *const types[] = {"object", "null", NULL};
            pl__put(o, "type", pl__strs(types, ok), ok);
            pl__fields(o, f->sub, ok);
        }
        break;
    case PL_KEY_LIST:
    case PL_KEY_FUNC:
        o = json_object();
        break;
    }
    json_t *def = pl__default(k, ok);
    char doc[2048];
    if (def) pl__put(o, "default", def, ok);
    if (!def && k->def)
        snprintf(doc, sizeof doc, "%s (default: %s)", k->doc, k->def);
    else
        snprintf(doc, sizeof doc, "%s", k->doc);
    for (size_t n = strlen(doc); vals && vals->name && n < sizeof doc; vals++) {
        char usage[160];
        n += (size_t)snprintf(doc + n, sizeof doc - n, "%s%s (%s): %s", n ? "; " : "", vals->name,
                              pl_key_value_usage(vals, usage, sizeof usage), vals->doc);
    }
    /* A mapping's section has a description of its own; the key's says what it is for here. */
    return pl__put(o, "description", pl_json_str(doc), ok);
}

/* The description, properties and required keys of a section of the file (run, a buffer). */
static json_t *pl__fields(json_t *obj, const pl_section *sec, bool *ok)
{
    pl__put(obj, "description", pl_json_str(sec->doc), ok);
    json_t *props = json_object(), *req = json_array();
    for (int i = 0; sec->fields[i].key.name; i++) {
        const pl_key *k = &sec->fields[i].key;
        pl__put(props, k->name, pl__key(k, &sec->fields[i], NULL, ok), ok);
        if (!k->def && strstr(k->doc, "(required)")) pl__push(req, pl_json_str(k->name), ok);
    }
    pl__put(obj, "properties", props, ok);
    pl__put(obj, "required", req, ok);
    return pl__put(obj, "additionalProperties", json_false(), ok);
}

/* Stage keys: the common ones, then (kind != NULL) the kind's; a function key has no YAML form. */
static json_t *pl__stage_keys(const pl_kind *kind, bool *ok)
{
    json_t *props = json_object();
    for (const pl_key *k = pl_common_stage_keys; k->name; k++) {
        json_t *o;
        if (strcmp(k->name, "kind") == 0) {
            int n_kinds;
            const char *const *names = pl_kind_names(&n_kinds);
            json_t *e = json_array();
            for (int i = 0; i < n_kinds; i++)
                pl__push(e, pl_json_str(names[i]), ok);
            o = pl__put(json_object(), "enum", e, ok);
            pl__put(o, "description", pl_json_str(k->doc), ok);
        } else if (strcmp(k->name, "name") == 0) {
            o = pl__put(pl__type("string", ok), "pattern", json_string("^[A-Za-z_][A-Za-z0-9_]*$"),
                        ok);
            pl__put(o, "maxLength", json_integer(PL_MAX_NAME), ok);
            pl__put(o, "description", pl_json_str(k->doc), ok);
        } else {
            o = pl__key(k, NULL, NULL, ok);
        }
        pl__put(props, k->name, o, ok);
    }
    for (const pl_key *k = kind ? kind->keys : NULL; k && k->name; k++) {
        if (k->type == PL_KEY_FUNC) continue;
        bool documented = kind->values_key && strcmp(k->name, kind->values_key) == 0;
        pl__put(props, k->name, pl__key(k, NULL, documented ? kind->values : NULL, ok), ok);
    }
    return props;
}

/* The top level's keys: the sections by reference to $defs, the rest from their table rows. */
static json_t *pl__top(bool *ok)
{
    const pl_field *top = pl_schema_top.fields;
    json_t *props = json_object();
    for (int i = 0; top[i].key.name; i++) {
        const pl_key *k = &top[i].key;
        json_t *o;
        if (strcmp(k->name, "run") == 0) {
            json_t *ref = pl__put(json_object(), "$ref", json_string("#/$defs/run"), ok);
            o = pl__any_of((json_t *[]){pl__type("null", ok), ref, NULL}, ok);
        } else if (strcmp(k->name, "buffers") == 0) {
            static const char *const types[] = {"object", "null", NULL};
            o = pl__put(json_object(), "type", pl__strs(types, ok), ok);
            json_t *names =
                pl__put(json_object(), "pattern", json_string("^[A-Za-z_][A-Za-z0-9_]*$"), ok);
            pl__put(names, "maxLength", json_integer(PL_MAX_NAME), ok);
            pl__put(o, "propertyNames", names, ok);
            pl__put(o, "additionalProperties",
                    pl__put(json_object(), "$ref", json_string("#/$defs/buffer"), ok), ok);
        } else if (strcmp(k->name, "stages") == 0) {
            static const char *const types[] = {"array", "null", NULL};
            o = pl__put(json_object(), "type", pl__strs(types, ok), ok);
            pl__put(o, "items", pl__put(json_object(), "$ref", json_string("#/$defs/stage"), ok),
                    ok);
        } else {
            pl__put(props, k->name, pl__key(k, &top[i], NULL, ok), ok);
            continue;
        }
        pl__put(props, k->name, pl__put(o, "description", pl_json_str(k->doc), ok), ok);
    }
    return props;
}

/* The whole schema; NULL when an allocation failed. */
static json_t *pl__schema(void)
{
    bool ok = true;
    int n_kinds;
    const pl_kind *const *kinds = pl_kinds(&n_kinds);
    json_t *root = json_object();
    pl__put(root, "$schema", json_string("https://json-schema.org/draft/2020-12/schema"), &ok);
    pl__put(root, "title", json_string("pipectl pipeline file"), &ok);
    pl__put(root, "description",
            json_string("Generated by `pipectl schema` from the tables pipectl checks files "
                        "against; `pipectl check` checks the rest (names, sizes, hazards). See "
                        "docs/pipeline-yaml.md."),
            &ok);
    pl__put(root, "type", json_string("object"), &ok);
    pl__put(root, "properties", pl__top(&ok), &ok);
    static const char *const required[] = {"stages", NULL};
    pl__put(root, "required", pl__strs(required, &ok), &ok);
    pl__put(root, "additionalProperties", json_false(), &ok);
    json_t *defs = json_object();
    pl__put(defs, "run", pl__fields(pl__type("object", &ok), &pl_schema_run, &ok), &ok);
    pl__put(defs, "buffer", pl__fields(pl__type("object", &ok), &pl_schema_buffer, &ok), &ok);
    /* A stage: a loop (it has `loop:`) or a stage of a kind, whose kind picks the keys (if kind
     * == K then K's keys, and no others). A loop's body holds stages of kinds. */
    json_t *loop_req =
        pl__put(json_object(), "required", pl__strs((const char *const[]){"loop", NULL}, &ok), &ok);
    json_t *any_stage = pl__put(json_object(), "if", loop_req, &ok);
    pl__put(any_stage, "then",
            pl__put(json_object(), "$ref", json_string("#/$defs/loop_stage"), &ok), &ok);
    pl__put(any_stage, "else",
            pl__put(json_object(), "$ref", json_string("#/$defs/kind_stage"), &ok), &ok);
    pl__put(defs, "stage", any_stage, &ok);
    json_t *ls = pl__type("object", &ok);
    pl__put(ls, "description",
            json_string("a loop: its stages run again and again in one batch, at most loop.max "
                        "times (docs/pipeline-yaml.md, Loops)"),
            &ok);
    static const char *const loop_stage_req[] = {"name", "loop", "stages", NULL};
    pl__put(ls, "required", pl__strs(loop_stage_req, &ok), &ok);
    json_t *lprops = json_object();
    json_t *common = pl__stage_keys(NULL, &ok);
    pl__put(lprops, "name", json_incref(json_object_get(common, "name")), &ok);
    pl__put(lprops, "loop", pl__fields(pl__type("object", &ok), &pl_schema_loop, &ok), &ok);
    json_t *body = pl__put(pl__type("array", &ok), "minItems", json_integer(1), &ok);
    pl__put(body, "items", pl__put(json_object(), "$ref", json_string("#/$defs/kind_stage"), &ok),
            &ok);
    pl__put(
        body, "description",
        json_string(
            "the body: stages of one side, host or device, run one after another every iteration"),
        &ok);
    pl__put(lprops, "stages", body, &ok);
    pl__put(lprops, "after", json_incref(json_object_get(common, "after")), &ok);
    json_decref(common);
    pl__put(ls, "properties", lprops, &ok);
    pl__put(ls, "additionalProperties", json_false(), &ok);
    pl__put(defs, "loop_stage", ls, &ok);
    json_t *stage = pl__type("object", &ok);
    static const char *const stage_req[] = {"name", "kind", NULL};
    pl__put(stage, "required", pl__strs(stage_req, &ok), &ok);
    pl__put(stage, "properties", pl__stage_keys(NULL, &ok), &ok);
    json_t *all = json_array();
    for (int i = 0; i < n_kinds; i++) {
        char ref[128];
        snprintf(ref, sizeof ref, "#/$defs/stage_%s", kinds[i]->name);
        json_t *is = pl__put(json_object(), "const", pl_json_str(kinds[i]->name), &ok);
        json_t *cond =
            pl__put(json_object(), "properties", pl__put(json_object(), "kind", is, &ok), &ok);
        static const char *const kind_req[] = {"kind", NULL};
        pl__put(cond, "required", pl__strs(kind_req, &ok), &ok);
        json_t *rule = pl__put(json_object(), "if", cond, &ok);
        pl__put(rule, "then", pl__put(json_object(), "$ref", pl_json_str(ref), &ok), &ok);
        pl__push(all, rule, &ok);
    }
    pl__put(stage, "allOf", all, &ok);
    pl__put(defs, "kind_stage", stage, &ok);
    for (int i = 0; i < n_kinds; i++) {
        char name[128], doc[256];
        snprintf(name, sizeof name, "stage_%s", kinds[i]->name);
        snprintf(doc, sizeof doc, "%s (%s)", kinds[i]->doc, pl_engine_name(kinds[i]->engine));
        json_t *k = pl__put(json_object(), "description", pl_json_str(doc), &ok);
        pl__put(k, "properties", pl__stage_keys(kinds[i], &ok), &ok);
        pl__put(k, "additionalProperties", json_false(), &ok);
        pl__put(defs, name, k, &ok);
    }
    pl__put(root, "$defs", defs, &ok);
    if (!ok) {
        json_decref(root);
        return NULL;
    }
    return root;
}

int pl_cmd_schema(int argc, char **argv)
{
    pl_cli_args a;
    pl_cli_args_init(&a, pl_cmd_find("schema", NULL), argc, argv);
    const char *v;
    int id;
    while ((id = pl_cli_next(&a, &v)) > 0)
        ;
    if (id < 0) return a.rc;
    if (a.n_operands > 0)
        return pl_cli_usage_error(a.cmd, "'pipectl schema' takes no arguments, got '%s'",
                                  a.operands[0]);
    json_t *schema = pl__schema();
    if (!schema) {
        fprintf(stderr, "error: out of memory building the schema\n");
        return 1;
    }
    int rc = json_dumpf(schema, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(schema);
    if (rc != 0 || fputc('\n', stdout) == EOF || fflush(stdout) != 0) {
        fprintf(stderr, "error: writing the schema failed\n");
        return 1;
    }
    return 0;
}
