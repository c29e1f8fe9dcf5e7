/* pl_schema: the pipeline file's schema, as tables, and the one walker that validates a value
 * tree (parser/pl_value.h) against them and builds the pl_spec. The YAML and the Lua front end
 * only turn their source into a value tree; every rule (unknown keys with "did you mean",
 * duplicates, types, caps, shapes, the 64 GiB limit, kind names) is written here once. The same
 * tables, with the kinds' key tables (runtime/core/pl_stage.h), give `pipectl schema` (JSON
 * Schema), `pipectl help kinds|KIND` and the rows of docs/pipeline-yaml.md (a test compares them).
 */
#ifndef PL_SCHEMA_H
#define PL_SCHEMA_H

#include "pl_spec.h"
#include "pl_stage.h"
#include "pl_value.h"

struct pl_walk;

/* One key of the top level, of `run:` or of a buffer. `key` is what docs, help and the schema
 * show; the rest is how the walker takes it. */
typedef struct pl_field {
    pl_key key;
    const char *lua_name; /* its spelling in pipeline.lua when that differs (`name`), or NULL */
    const char *example;  /* a value, for "write KEY: EXAMPLE" hints */
    int64_t min, max;     /* PL_KEY_INT: the range (min == max: none) */
    const char *cap;      /* the constant named in range messages ("PL_MAX_DEPTH"), or NULL */
    const struct pl_section *sub; /* PL_KEY_MAP: the mapping's own keys, or NULL */
    /* Validates `v` and stores it into `obj` (the spec, its run options, a buffer). */
    pl_status (*take)(struct pl_walk *w, const struct pl_field *f, const pl_value *v, void *obj);
} pl_field;

/* The mappings of a pipeline file other than stages, each a table terminated by {{NULL}}. */
typedef struct pl_section {
    const char *name;    /* "top", "run", "buffer" */
    const char *heading; /* its section of docs/pipeline-yaml.md ("## `run`") */
    const char *doc;     /* one line, for the JSON Schema */
    const pl_field *fields;
} pl_section;

extern const pl_section pl_schema_top, pl_schema_run, pl_schema_budget, pl_schema_buffer;
/* A loop's `loop:` mapping (a stage written {name, loop: {...}, stages: [...], after}), and its
 * `stream:` mapping. */
extern const pl_section pl_schema_loop, pl_schema_loop_stream;

/* Where the tree came from: what a front end may write differently. */
typedef struct pl_schema_src {
    bool lua;                /* pipeline.lua: fields by their lua_name; a single value where a
                              * list of names or a shape belongs is a list of one; functions */
    const char *script_base; /* pipeline.lua: the script's file name, for function values */
    /* Where every bad buffer and bad stage goes (a bad-input error in one of them is listed and
     * the walk goes on to the next, the first staying in err); NULL: the first error ends it. */
    struct pl_diags *diags;
} pl_schema_src;

/* Validates `root` (NULL: an empty file) and fills `spec` through the builders (runtime/
 * pl_spec.h). Errors are "file:line:col: error: ..." with PL_EINPUT, PL_ENOMEM on OOM. */
pl_status pl_schema_build(pl_spec *spec, const pl_value *root, const pl_schema_src *src,
                          pl_error *err);

/* "a|b|c" -> "a, b, c" into buf (for messages). */
const char *pl_schema_join(const char *values, char *buf, size_t cap);
/* A key type in a word or two, for help and docs ("integer", "list of buffer names"). */
const char *pl_key_type_name(pl_key_type t);

#endif
