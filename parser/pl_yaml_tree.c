/* pl_yaml_tree: YAML text to a value tree (parser/pl_value.h), through libyaml's event stream:
 * only YAML itself is here (text, syntax, anchors, tags, documents, nesting); the schema walker
 * (parser/pl_schema.c) gives the tree its meaning. Every error is "file:line:col: error: what;
 * how to fix" with status PL_EINPUT. Used by the YAML front end (pl_yaml.c) and by --set values
 * (pl_override.c). */
#include "pl_yaml_tree.h"

#include "pl_spec.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

typedef struct pl__yaml {
    const char *file; /* the name positions carry (borrowed: the spec's) */
    bool arg;         /* a --set value: every position is the argument as a whole (PL_POS_ARG) */
    pl_error *err;
} pl__yaml;

static pl_status pl__oom(pl__yaml *y)
{
    return pl_error_set(y->err, PL_ENOMEM, "error: out of memory while reading '%s'", y->file);
}

static pl_pos pl__at(const pl__yaml *y, int line, int col)
{
    pl_pos p = {y->file, y->arg ? PL_POS_ARG : line, y->arg ? 0 : col};
    return p;
}

static pl_pos pl__pos(const pl__yaml *y, yaml_mark_t m)
{
    return pl__at(y, (int)(m.line > INT_MAX - 1 ? INT_MAX - 1 : m.line) + 1,
                  (int)(m.column > INT_MAX - 1 ? INT_MAX - 1 : m.column) + 1);
}

/* ---- Reading: bytes -> events -> node tree ---------------------------------------------- */

/* Rejects what is not YAML text before libyaml sees it, with one message and a position:
 * NUL bytes, invalid UTF-8, and control characters YAML does not allow. */
static pl_status pl__check_text(pl__yaml *y, const unsigned char *s, size_t len)
{
    int line = 1, col = 1;
    for (size_t i = 0; i < len;) {
        unsigned c = s[i];
        size_t n = 1;
        bool bad = false;
        if (c < 0x80) {
            if (c == 0 || (c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f) {
                pl_pos p = pl__at(y, line, col);
                if (c == 0)
                    return pl_error_at(
                        y->err, PL_EINPUT, p,
                        "the file contains a NUL byte (offset %zu): it is binary, not "
                        "YAML text; pass the pipeline's .yaml file",
                        i);
                return pl_error_at(
                    y->err, PL_EINPUT, p,
                    "control character 0x%02x is not allowed in YAML; remove it (only "
                    "tab, newline and carriage return may appear)",
                    c);
            }
        } else {
            uint32_t cp = 0, min = 0;
            if ((c & 0xe0) == 0xc0)
                n = 2, cp = c & 0x1f, min = 0x80;
            else if ((c & 0xf0) == 0xe0)
                n = 3, cp = c & 0x0f, min = 0x800;
            else if ((c & 0xf8) == 0xf0)
                n = 4, cp = c & 0x07, min = 0x10000;
            else
                bad = true;
            if (!bad && i + n > len) bad = true;
            for (size_t k = 1; !bad && k < n; k++) {
                if ((s[i + k] & 0xc0) != 0x80) bad = true;
                cp = (cp << 6) | (s[i + k] & 0x3f);
            }
            if (!bad && (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))) bad = true;
            pl_pos p = pl__at(y, line, col);
            if (bad)
                return pl_error_at(y->err, PL_EINPUT, p,
                                   "the file is not UTF-8 text (byte 0x%02x at offset %zu); a "
                                   "pipeline file is YAML in UTF-8: re-save it as UTF-8 or pass "
                                   "the right file",
                                   c, i);
            /* What libyaml's reader refuses as non-printable: C1 controls but NEL, U+FFFE/F. */
            if ((cp >= 0x80 && cp < 0xa0 && cp != 0x85) || cp == 0xfffe || cp == 0xffff)
                return pl_error_at(
                    y->err, PL_EINPUT, p,
                    "control character U+%04X is not allowed in YAML; remove it (only "
                    "tab, newline and carriage return may appear)",
                    (unsigned)cp);
            if (cp == 0x85 || cp == 0x2028 || cp == 0x2029) { /* YAML 1.1 line breaks */
                line++, col = 1;
                i += n;
                continue;
            }
        }
        if (c == '\n' || (c == '\r' && (i + 1 >= len || s[i + 1] != '\n')))
            line++, col = 1;
        else if (c != '\r')
            col++;
        i += n;
    }
    return PL_OK;
}

/* libyaml's problem texts, with what the user should do about each. */
static const struct {
    const char *problem, *fix;
} pl__syntax_fixes[] = {
    {"mapping values are not allowed in this context",
     "a ':' followed by a space starts a key here; fix the indentation of this line, or quote the "
     "value if it contains ': '"},
    {"did not find expected key",
     "expected another 'key: value' at this indentation; align this line with the keys above it"},
    {"could not find expected ':'", "a key needs ':' after it; write 'key: value'"},
    {"found character that cannot start any token",
     "indent with spaces, not tabs, and quote values that start with '`', '@', '%' or '|'"},
    {"found a tab character that violates indentation", "indent with spaces, not tabs"},
    {"found a tab character where an indentation space is expected",
     "indent with spaces, not tabs"},
    {"did not find expected ',' or ']'",
     "separate the items of a [...] list with ', ' and close it with ']'"},
    {"did not find expected ',' or '}'",
     "separate the entries of a {...} mapping with ', ' and close it with '}'"},
    {"found unexpected end of stream",
     "the file ends inside a quoted value or a [...] / {...}; close it"},
    {"did not find expected node content", "a value is missing here; write one or remove the line"},
    {"block sequence entries are not allowed in this context",
     "a '- ' list item cannot follow 'key: value' on one line; start the list on the next line"},
    {"did not find expected '-' indicator",
     "this line continues a '- ' list; start it with '- ' at the list's indentation"},
    {"found unknown escape character",
     "in \"double quotes\" a backslash starts an escape; write '\\\\' for a backslash or use "
     "'single quotes'"},
    {"found unexpected ':'", "quote the value if it contains ':'"},
    {"found undefined tag handle", "pipectl files do not use tags; remove the '!...'"},
    {"found incompatible YAML document", "pipectl reads YAML 1.1/1.2; remove the %YAML line"},
    {"did not find expected <document start>",
     "a document ends here ('...'); remove it and what follows, or add '---' before the next one"},
    {"did not find expected comment or line break",
     "only a comment may follow on this line; move the rest to a new line"},
};

static pl_status pl__syntax_error(pl__yaml *y, yaml_parser_t *p, size_t len)
{
    if (p->error == YAML_MEMORY_ERROR) return pl__oom(y);
    const char *problem = p->problem ? p->problem : "unknown problem";
    pl_pos pos = pl__pos(y, p->problem_mark);
    if (p->error == YAML_READER_ERROR) { /* pl__check_text should have caught it */
        pos.line = 0;
        return pl_error_at(y->err, PL_EINPUT, pos,
                           "'%s' is not UTF-8 YAML text (%s at byte offset %zu); re-save it as "
                           "UTF-8",
                           y->file, problem, p->problem_offset < len ? p->problem_offset : len);
    }
    const char *fix = "check the indentation and the quoting on this line and the one above";
    for (size_t i = 0; i < sizeof pl__syntax_fixes / sizeof pl__syntax_fixes[0]; i++)
        if (strcmp(problem, pl__syntax_fixes[i].problem) == 0) fix = pl__syntax_fixes[i].fix;
    if (p->context && !y->arg) /* an argument is one line: its line says nothing */
        return pl_error_at(y->err, PL_EINPUT, pos, "YAML syntax: %s (%s at line %d); %s", problem,
                           p->context, (int)p->context_mark.line + 1, fix);
    return pl_error_at(y->err, PL_EINPUT, pos, "YAML syntax: %s; %s", problem, fix);
}

static pl_status pl__no_anchor_tag(pl__yaml *y, pl_pos pos, const yaml_char_t *anchor,
                                   const yaml_char_t *tag)
{
    char cb[72];
    if (anchor)
        return pl_error_at(y->err, PL_EINPUT, pos,
                           "anchor '&%s': pipectl files do not use anchors and aliases; write the "
                           "value out where it is needed (or generate the pipeline in Lua)",
                           pl_clip((const char *)anchor, cb));
    if (tag) {
        /* libyaml expands "!!int" to "tag:yaml.org,2002:int"; show it as written. */
        static const char core[] = "tag:yaml.org,2002:";
        const char *t = (const char *)tag;
        bool is_core = strncmp(t, core, sizeof core - 1) == 0;
        return pl_error_at(y->err, PL_EINPUT, pos,
                           "tag '%s%s': pipectl files do not use YAML tags; remove it",
                           is_core ? "!!" : "", pl_clip(is_core ? t + sizeof core - 1 : t, cb));
    }
    return PL_OK;
}

/* Reads the whole text into a tree. *root is NULL for an empty stream. */
static pl_status pl__read_tree(pl__yaml *y, const char *text, size_t len, pl_value **root)
{
    pl_status st = PL_OK;
    yaml_parser_t p;
    yaml_event_t ev;
    pl_value *stack[PL_MAX_NESTING + 1];
    int depth = 0, docs = 0;
    bool done = false;
    *root = NULL;
    PL_CHECK(pl__check_text(y, (const unsigned char *)text, len));
    if (!yaml_parser_initialize(&p)) return pl__oom(y);
    yaml_parser_set_input_string(&p, (const unsigned char *)(text ? text : ""), text ? len : 0);
    /* No yaml_parser_set_encoding: libyaml's detection skips a UTF-8 BOM (forcing UTF-8 would
     * not), and pl__check_text already refused UTF-16 (its BOM and NULs are not UTF-8 text). */
    while (!done) {
        if (!yaml_parser_parse(&p, &ev)) {
            st = pl__syntax_error(y, &p, len);
            break;
        }
        pl_pos pos = pl__pos(y, ev.start_mark);
        pl_value *n = NULL;
        switch (ev.type) {
        case YAML_STREAM_END_EVENT:
            done = true;
            break;
        case YAML_DOCUMENT_START_EVENT:
            if (docs > 0)
                st = pl_error_at(y->err, PL_EINPUT, pos,
                                 "a second YAML document starts here; a pipeline file holds one "
                                 "document: remove this '---' and what follows, or split the file");
            break;
        case YAML_DOCUMENT_END_EVENT:
            docs++;
            break;
        case YAML_ALIAS_EVENT: {
            char cb[72];
            st = pl_error_at(y->err, PL_EINPUT, pos,
                             "alias '*%s': pipectl files do not use anchors and aliases; write the "
                             "value out where it is needed (or generate the pipeline in Lua)",
                             pl_clip((const char *)ev.data.alias.anchor, cb));
            break;
        }
        case YAML_SCALAR_EVENT:
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT:
            if (ev.type == YAML_SCALAR_EVENT)
                st = pl__no_anchor_tag(y, pos, ev.data.scalar.anchor, ev.data.scalar.tag);
            else if (ev.type == YAML_SEQUENCE_START_EVENT)
                st = pl__no_anchor_tag(y, pos, ev.data.sequence_start.anchor,
                                       ev.data.sequence_start.tag);
            else
                st = pl__no_anchor_tag(y, pos, ev.data.mapping_start.anchor,
                                       ev.data.mapping_start.tag);
            if (st != PL_OK) break;
            if (ev.type != YAML_SCALAR_EVENT && depth >= PL_MAX_NESTING) {
                st = pl_error_at(y->err, PL_EINPUT, pos,
                                 "nesting deeper than %d levels (PL_MAX_NESTING); a pipeline needs "
                                 "at most 4 (stages: - {key: [list]}): flatten this value",
                                 PL_MAX_NESTING);
                break;
            }
            if (ev.type == YAML_SCALAR_EVENT &&
                memchr(ev.data.scalar.value, '\0', ev.data.scalar.length)) {
                st = pl_error_at(y->err, PL_EINPUT, pos,
                                 "a value contains a NUL character (\\0); remove it");
                break;
            }
            n = pl_value_add(depth ? stack[depth - 1] : NULL,
                             ev.type == YAML_SCALAR_EVENT           ? PL_VAL_SCALAR
                             : ev.type == YAML_SEQUENCE_START_EVENT ? PL_VAL_LIST
                                                                    : PL_VAL_MAP,
                             pos);
            if (!n) {
                st = pl__oom(y);
                break;
            }
            if (depth == 0) *root = n; /* one document, so one root */
            if (ev.type == YAML_SCALAR_EVENT) {
                n->plain = ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
                if (!pl_value_set_text(n, (const char *)ev.data.scalar.value,
                                       ev.data.scalar.length)) {
                    st = pl__oom(y);
                    break;
                }
            } else {
                stack[depth++] = n;
            }
            break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
            if (depth > 0) depth--;
            break;
        default:
            break;
        }
        yaml_event_delete(&ev);
        if (st != PL_OK) break;
    }
    yaml_parser_delete(&p);
    if (st != PL_OK) {
        pl_value_free(*root);
        *root = NULL;
    }
    return st;
}

pl_status pl_yaml_read_value(const char *label, const char *text, size_t len, pl_value **out,
                             pl_error *err)
{
    pl__yaml y = {label, true, err};
    PL_CHECK(pl__read_tree(&y, text, len, out));
    if (*out) return PL_OK;
    /* Nothing (`--set run.batches=`): a plain empty scalar, "no value", as in a file. */
    pl_pos p = pl__at(&y, 1, 1);
    *out = pl_value_add(NULL, PL_VAL_SCALAR, p);
    if (!*out || !pl_value_set_text(*out, "", 0)) {
        pl_value_free(*out);
        *out = NULL;
        return pl__oom(&y);
    }
    (*out)->plain = true;
    return PL_OK;
}

pl_status pl_yaml_read_tree(const char *file, const char *text, size_t len, pl_value **root,
                            pl_error *err)
{
    pl__yaml y = {file, false, err};
    return pl__read_tree(&y, text, len, root);
}
