/* pl_value: the generic value tree both front ends build from their source (the YAML node tree,
 * the table a pipeline.lua returns) and the one schema walker (parser/pl_schema.c) reads. A node
 * is a scalar (its text), a list, a mapping in written order, or, from Lua only, a function or
 * another Lua value; every node keeps the position it came from.
 *
 * Ownership: a tree is owned by its root; pl_value_free frees it. Nodes and their text are
 * malloc'd (the allocation-failure test fails each in turn). */
#ifndef PL_VALUE_H
#define PL_VALUE_H

#include <stdbool.h>
#include <stddef.h>

#include "pl_status.h"

typedef enum pl_vtype {
    PL_VAL_SCALAR,
    PL_VAL_LIST,
    PL_VAL_MAP,
    PL_VAL_FUNC,  /* a Lua function (pipeline.lua) */
    PL_VAL_OTHER, /* another Lua value (userdata, thread): `text` is its type's name */
} pl_vtype;

typedef struct pl_value {
    pl_vtype type;
    pl_pos pos;
    bool plain;     /* scalar written without quotes: `~`, `null` and nothing mean "no value" */
    bool table;     /* from a Lua table: an empty LIST may stand for an empty mapping too */
    bool unordered; /* MAP whose written order is unknown (a Lua table): keys sorted by name */
    char *text;     /* SCALAR: NUL-terminated text; OTHER: the Lua type's name */
    size_t len;
    int n; /* LIST: items; MAP: keys + values (key, value, key, value, ... as children) */
    struct pl_value *child, *last, *next;
} pl_value;

/* A new node appended to `parent`'s children (parent NULL: a root). NULL on OOM. Appending
 * first and filling after keeps every node reachable from the root, so freeing the root after an
 * error (or a Lua error that unwinds the converter) frees everything. */
pl_value *pl_value_add(pl_value *parent, pl_vtype type, pl_pos pos);
/* Sets a node's text to a copy of s[0..len). false on OOM. */
bool pl_value_set_text(pl_value *v, const char *s, size_t len);
void pl_value_free(pl_value *v); /* the node, its children and its later siblings; NULL is fine */

/* A plain scalar that means "no value" (empty, `~`, `null`, `Null`, `NULL`). */
bool pl_value_is_null(const pl_value *v);
/* For messages: "nothing", "a single value", "a list", "a mapping", "a function", "a userdata". */
const char *pl_value_what(const pl_value *v, char buf[32]);

#endif
