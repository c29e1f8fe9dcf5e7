/* cmd_schema: `pipectl schema` prints a JSON Schema (draft 2020-12) of pipeline.yaml, generated
 * from the tables the parser checks files against (parser/pl_schema.h, the kinds' key tables), so
 * editors complete and validate the same keys `pipectl check` accepts. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_cli.h"
#include "pl_schema.h"

static void pl__json_str(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p == '\n')
            fputs("\\n", out);
        else if (*p < 0x20)
            fprintf(out, "\\u%04x", *p);
        else
            fputc(*p, out);
    }
    fputc('"', out);
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
static void pl__json_enum(FILE *out, const char *values)
{
    fputc('[', out);
    for (const char *p = values; p && *p;) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        fprintf(out, "\"%.*s\"%s", (int)n, p, bar ? ", " : "");
        p = bar ? bar + 1 : NULL;
    }
    fputc(']', out);
}

/* The default as a JSON value of the key's type; false when the table's text is prose ("the
 * run's seed") rather than a value. */
static bool pl__json_default(FILE *out, const pl_key *k)
{
    const char *d = k->def;
    if (!d) return false;
    switch (k->type) {
    case PL_KEY_INT:
    case PL_KEY_INT_OR_INTS:
        if (!pl__is_int(d)) return false;
        fprintf(out, ", \"default\": %s", d);
        return true;
    case PL_KEY_NUM:
        if (!pl__is_num(d)) return false;
        fprintf(out, ", \"default\": %s", d);
        return true;
    case PL_KEY_BOOL:
        if (strcmp(d, "true") != 0 && strcmp(d, "false") != 0) return false;
        fprintf(out, ", \"default\": %s", d);
        return true;
    case PL_KEY_NAMES:
    case PL_KEY_INTS:
    case PL_KEY_ITEMS:
        if (strcmp(d, "[]") != 0) return false;
        fputs(", \"default\": []", out);
        return true;
    case PL_KEY_STR:
    case PL_KEY_PATH:
    case PL_KEY_ENUM:
    case PL_KEY_NAME:
        if (strchr(d, ' ')) return false; /* prose: "the file's base name" */
        fputs(", \"default\": ", out);
        pl__json_str(out, d);
        return true;
    default:
        return false;
    }
}

static void pl__json_fields(FILE *out, const pl_section *sec, const char *indent);

/* One key's schema: type, range, enum, default, description. `f` (NULL for kind keys) adds the
 * range of the file's own sections; `vals` (or NULL) documents the values of an enum key, in its
 * description. */
static void pl__json_key(FILE *out, const pl_key *k, const pl_field *f, const pl_key_value *vals)
{
    static const char scalar[] = "{\"type\": [\"string\", \"number\", \"boolean\"]}";
    /* pipectl reads every value as text, so a quoted number ("2") is a number too. */
    static const char int_text[] = "{\"type\": \"string\", \"pattern\": \"^[-+]?[0-9]+$\"}";
    static const char num_text[] = "{\"type\": \"string\", \"pattern\": "
                                   "\"^[-+]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][-+]?[0-9]+)?$\"}";
    switch (k->type) {
    case PL_KEY_STR:
        fprintf(out, "{\"type\": [\"string\", \"number\", \"boolean\"]");
        break;
    case PL_KEY_PATH:
    case PL_KEY_NAME:
        fputs("{\"type\": \"string\", \"minLength\": 1", out);
        break;
    case PL_KEY_INT:
        fprintf(out, "{\"anyOf\": [{\"type\": \"integer\"");
        if (f && f->min < f->max)
            fprintf(out, ", \"minimum\": %lld, \"maximum\": %lld", (long long)f->min,
                    (long long)f->max);
        fprintf(out, "}, %s", int_text);
        if (k->values) { /* words it takes besides a number (run.batches: all, depth: auto) */
            fputs(", {\"enum\": ", out);
            pl__json_enum(out, k->values);
            fputc('}', out);
        }
        fputc(']', out);
        break;
    case PL_KEY_SIZE:
        fputs("{\"anyOf\": [{\"type\": \"integer\", \"minimum\": 0}, {\"type\": \"string\", "
              "\"pattern\": \"^[0-9]+([.][0-9]*)? ?(B|KiB|MiB|GiB|TiB|kB|KB|MB|GB|TB)?$\"}]",
              out);
        break;
    case PL_KEY_NUM:
        fprintf(out, "{\"anyOf\": [{\"type\": \"number\"}, %s]", num_text);
        break;
    case PL_KEY_BOOL:
        fputs("{\"anyOf\": [{\"type\": \"boolean\"}, {\"enum\": [\"true\", \"false\"]}]", out);
        break;
    case PL_KEY_ENUM:
        fputs("{\"enum\": ", out);
        pl__json_enum(out, k->values);
        break;
    case PL_KEY_NAMES:
        fputs("{\"type\": \"array\", \"items\": {\"type\": \"string\", \"minLength\": 1}", out);
        break;
    case PL_KEY_INT_OR_INTS: /* chunks: 4 or [1, 1, 2, 4] */
        fprintf(out,
                "{\"anyOf\": [{\"type\": \"integer\"}, %s, {\"type\": \"array\", \"items\": "
                "{\"anyOf\": [{\"type\": \"integer\"}, %s]}}]",
                int_text, int_text);
        break;
    case PL_KEY_INTS:
        fputs("{\"type\": \"array\", \"items\": {\"type\": \"integer\"", out);
        if (f && f->min < f->max) fprintf(out, ", \"minimum\": %lld", (long long)f->min);
        fputc('}', out);
        if (f && f->min >= 1) fprintf(out, ", \"minItems\": 1, \"maxItems\": %d", PL_MAX_RANK);
        break;
    case PL_KEY_ITEMS:
        fprintf(out,
                "{\"type\": \"array\", \"items\": {\"anyOf\": [%s, {\"type\": \"object\", "
                "\"minProperties\": 1, \"maxProperties\": 1, \"additionalProperties\": %s}]}",
                scalar, scalar);
        break;
    case PL_KEY_MAP:
        if (f && f->sub) {
            fputs("{\"type\": [\"object\", \"null\"], ", out);
            pl__json_fields(out, f->sub, "");
            break;
        }
        fputs("{", out);
        break;
    case PL_KEY_LIST:
    case PL_KEY_FUNC:
        fputs("{", out);
        break;
    }
    bool has_def = pl__json_default(out, k);
    char doc[2048];
    if (!has_def && k->def)
        snprintf(doc, sizeof doc, "%s (default: %s)", k->doc, k->def);
    else
        snprintf(doc, sizeof doc, "%s", k->doc);
    for (size_t n = strlen(doc); vals && vals->name && n < sizeof doc; vals++) {
        char usage[160];
        n += (size_t)snprintf(doc + n, sizeof doc - n, "%s%s (%s): %s", n ? "; " : "", vals->name,
                              pl_key_value_usage(vals, usage, sizeof usage), vals->doc);
    }
    fputs(", \"description\": ", out);
    pl__json_str(out, doc);
    fputc('}', out);
}

/* The properties of a section of the file (run, a buffer), and its required keys. */
static void pl__json_fields(FILE *out, const pl_section *sec, const char *indent)
{
    fprintf(out, "%s\"description\": ", indent);
    pl__json_str(out, sec->doc);
    fputs(",\n", out);
    fprintf(out, "%s\"properties\": {", indent);
    for (int i = 0; sec->fields[i].key.name; i++) {
        fprintf(out, "%s\n%s  \"%s\": ", i ? "," : "", indent, sec->fields[i].key.name);
        pl__json_key(out, &sec->fields[i].key, &sec->fields[i], NULL);
    }
    fprintf(out, "\n%s},\n", indent);
    fprintf(out, "%s\"required\": [", indent);
    int n = 0;
    for (int i = 0; sec->fields[i].key.name; i++)
        if (!sec->fields[i].key.def && strstr(sec->fields[i].key.doc, "(required)"))
            fprintf(out, "%s\"%s\"", n++ ? ", " : "", sec->fields[i].key.name);
    fprintf(out, "],\n%s\"additionalProperties\": false", indent);
}

/* Stage keys: the common ones, then (kind != NULL) the kind's; a function key has no YAML form. */
static void pl__json_stage_keys(FILE *out, const pl_kind *kind)
{
    int n = 0;
    int n_kinds;
    pl_kinds(&n_kinds);
    for (const pl_key *k = pl_common_stage_keys; k->name; k++) {
        fprintf(out, "%s\n        \"%s\": ", n++ ? "," : "", k->name);
        if (strcmp(k->name, "kind") == 0) {
            fputs("{\"enum\": [", out);
            const char *const *names = pl_kind_names(&n_kinds);
            for (int i = 0; i < n_kinds; i++)
                fprintf(out, "%s\"%s\"", i ? ", " : "", names[i]);
            fputs("], \"description\": ", out);
            pl__json_str(out, k->doc);
            fputc('}', out);
        } else if (strcmp(k->name, "name") == 0) {
            fprintf(out,
                    "{\"type\": \"string\", \"pattern\": \"^[A-Za-z_][A-Za-z0-9_]*$\", "
                    "\"maxLength\": %d, \"description\": ",
                    PL_MAX_NAME);
            pl__json_str(out, k->doc);
            fputc('}', out);
        } else {
            pl__json_key(out, k, NULL, NULL);
        }
    }
    for (const pl_key *k = kind ? kind->keys : NULL; k && k->name; k++) {
        if (k->type == PL_KEY_FUNC) continue;
        fprintf(out, ",\n        \"%s\": ", k->name);
        bool documented = kind->values_key && strcmp(k->name, kind->values_key) == 0;
        pl__json_key(out, k, NULL, documented ? kind->values : NULL);
    }
}

static void pl__json_schema(FILE *out)
{
    int n_kinds;
    const pl_kind *const *kinds = pl_kinds(&n_kinds);
    const pl_field *top = pl_schema_top.fields;
    fputs("{\n  \"$schema\": \"https://json-schema.org/draft/2020-12/schema\",\n", out);
    fputs("  \"title\": \"pipectl pipeline file\",\n", out);
    fputs("  \"description\": \"Generated by `pipectl schema` from the tables pipectl checks "
          "files against; `pipectl check` checks the rest (names, sizes, hazards). See "
          "docs/pipeline-yaml.md.\",\n",
          out);
    fputs("  \"type\": \"object\",\n  \"properties\": {\n", out);
    for (int i = 0; top[i].key.name; i++) {
        const pl_key *k = &top[i].key;
        fprintf(out, "    \"%s\": ", k->name);
        if (strcmp(k->name, "run") == 0)
            fputs("{\"anyOf\": [{\"type\": \"null\"}, {\"$ref\": \"#/$defs/run\"}]", out);
        else if (strcmp(k->name, "buffers") == 0)
            fprintf(out,
                    "{\"type\": [\"object\", \"null\"], \"propertyNames\": {\"pattern\": "
                    "\"^[A-Za-z_][A-Za-z0-9_]*$\", \"maxLength\": %d}, "
                    "\"additionalProperties\": {\"$ref\": \"#/$defs/buffer\"}",
                    PL_MAX_NAME);
        else if (strcmp(k->name, "stages") == 0)
            fputs("{\"type\": [\"array\", \"null\"], \"items\": {\"$ref\": \"#/$defs/stage\"}",
                  out);
        else {
            pl__json_key(out, k, &top[i], NULL);
            fputs(top[i + 1].key.name ? ",\n" : "\n", out);
            continue;
        }
        fputs(", \"description\": ", out);
        pl__json_str(out, k->doc);
        fputs(top[i + 1].key.name ? "},\n" : "}\n", out);
    }
    fputs("  },\n  \"required\": [\"stages\"],\n  \"additionalProperties\": false,\n", out);
    fputs("  \"$defs\": {\n    \"run\": {\n      \"type\": \"object\",\n", out);
    pl__json_fields(out, &pl_schema_run, "      ");
    fputs("\n    },\n    \"buffer\": {\n      \"type\": \"object\",\n", out);
    pl__json_fields(out, &pl_schema_buffer, "      ");
    /* A stage: its kind picks the keys (if kind == K then K's keys, and no others). */
    fputs("\n    },\n    \"stage\": {\n      \"type\": \"object\",\n"
          "      \"required\": [\"name\", \"kind\"],\n      \"properties\": {",
          out);
    pl__json_stage_keys(out, NULL);
    fputs("\n      },\n      \"allOf\": [", out);
    for (int i = 0; i < n_kinds; i++)
        fprintf(out,
                "%s\n        {\"if\": {\"properties\": {\"kind\": {\"const\": \"%s\"}}, "
                "\"required\": [\"kind\"]}, \"then\": {\"$ref\": \"#/$defs/stage_%s\"}}",
                i ? "," : "", kinds[i]->name, kinds[i]->name);
    fputs("\n      ]\n    }", out);
    for (int i = 0; i < n_kinds; i++) {
        fprintf(out, ",\n    \"stage_%s\": {\n      \"description\": ", kinds[i]->name);
        char doc[256];
        snprintf(doc, sizeof doc, "%s (%s)", kinds[i]->doc, pl_engine_name(kinds[i]->engine));
        pl__json_str(out, doc);
        fputs(",\n      \"properties\": {", out);
        pl__json_stage_keys(out, kinds[i]);
        fputs("\n      },\n      \"additionalProperties\": false\n    }", out);
    }
    fputs("\n  }\n}\n", out);
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
    pl__json_schema(stdout);
    return 0;
}
