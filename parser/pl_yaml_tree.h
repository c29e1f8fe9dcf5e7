/* pl_yaml_tree: YAML text to a value tree (parser-internal): the YAML front end's reader, and the
 * reader of --set values. */
#ifndef PL_YAML_TREE_H
#define PL_YAML_TREE_H

#include <stddef.h>

#include "pl_value.h"

/* One YAML document into a new tree (*root, owned by the caller; NULL for an empty document).
 * Positions carry `file` (borrowed: it must outlive the tree, e.g. the spec's copy). */
pl_status pl_yaml_read_tree(const char *file, const char *text, size_t len, pl_value **root,
                            pl_error *err);

/* VALUE as YAML (a scalar, [a, b], {k: v}; empty: no value) into a new tree (*out, owned by the
 * caller); every node's position is the argument as a whole: {label, PL_POS_ARG, 0}. `label`
 * must live as long as the tree's positions are used (the spec's arena). */
pl_status pl_yaml_read_value(const char *label, const char *text, size_t len, pl_value **out,
                             pl_error *err);

#endif
