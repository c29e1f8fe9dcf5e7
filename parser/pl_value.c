/* pl_value: the generic value tree of the front ends (see pl_value.h). */
#include "pl_value.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

pl_value *pl_value_add(pl_value *parent, pl_vtype type, pl_pos pos)
{
    pl_value *v = calloc(1, sizeof *v);
    if (!v) return NULL;
    v->type = type;
    v->pos = pos;
    if (parent) {
        if (parent->last)
            parent->last->next = v;
        else
            parent->child = v;
        parent->last = v;
        parent->n++;
    }
    return v;
}

bool pl_value_set_text(pl_value *v, const char *s, size_t len)
{
    char *t = malloc(len + 1);
    if (!t) return false;
    if (len) memcpy(t, s, len);
    t[len] = '\0';
    free(v->text);
    v->text = t;
    v->len = len;
    return true;
}

void pl_value_free(pl_value *v)
{
    while (v) {
        pl_value *next = v->next;
        pl_value_free(v->child); /* depth is bounded by PL_MAX_NESTING */
        free(v->text);
        free(v);
        v = next;
    }
}

bool pl_value_is_null(const pl_value *v)
{
    if (!v || v->type != PL_VAL_SCALAR || !v->plain) return false;
    return v->len == 0 || strcmp(v->text, "~") == 0 || strcmp(v->text, "null") == 0 ||
           strcmp(v->text, "Null") == 0 || strcmp(v->text, "NULL") == 0;
}

const char *pl_value_what(const pl_value *v, char buf[32])
{
    if (pl_value_is_null(v)) return "nothing";
    switch (v->type) {
    case PL_VAL_SCALAR:
        return "a single value";
    case PL_VAL_LIST:
        return "a list";
    case PL_VAL_MAP:
        return "a mapping";
    case PL_VAL_FUNC:
        return "a function";
    case PL_VAL_OTHER:
        snprintf(buf, 32, "a %.24s", v->text ? v->text : "value");
        return buf;
    }
    return "a value";
}
