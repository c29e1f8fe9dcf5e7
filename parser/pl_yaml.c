/* pl_yaml: the YAML front end. libyaml's event stream becomes a small node tree (so keys can be
 * checked for duplicates and read in any order), then the tree becomes a pl_spec through the
 * builders. Every error is "file:line:col: error: what; how to fix" with status PL_EINPUT. */
#include "pl_parse.h"
#include "pl_stage.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

/* Pipeline files are small; a cap keeps `pipectl check /dev/zero` from eating all memory. */
#define PL__MAX_FILE_BYTES ((size_t)64 << 20)

typedef enum pl__ntype { PL__SCALAR, PL__SEQ, PL__MAP } pl__ntype;

/* One YAML node. Sequences chain their items through `child`/`next`; mappings chain key, value,
 * key, value, ... the same way. */
typedef struct pl__node {
    pl__ntype type;
    pl_pos pos;
    bool plain; /* scalar written without quotes (so `~`, `null` and nothing mean "no value") */
    char *text; /* scalar, NUL-terminated (NULs inside are rejected while reading) */
    size_t len;
    int n; /* items (sequence) or keys + values (mapping) */
    struct pl__node *child, *last, *next;
} pl__node;

typedef struct pl__yaml {
    pl_spec *spec;
    pl_error *err;
} pl__yaml;

static void pl__node_free(pl__node *n)
{
    while (n) {
        pl__node *next = n->next;
        pl__node_free(n->child); /* depth is bounded by PL_MAX_NESTING */
        free(n->text);
        free(n);
        n = next;
    }
}

static pl_status pl__fail(pl__yaml *y, pl_pos pos, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static pl_status pl__fail(pl__yaml *y, pl_pos pos, const char *fmt, ...)
{
    char msg[PL_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return pl_error_at(y->err, PL_EINPUT, pos, "%s", msg);
}

static pl_status pl__oom(pl__yaml *y)
{
    return pl_error_set(y->err, PL_ENOMEM, "error: out of memory while reading '%s'",
                        y->spec->file);
}

/* User text inside a message: one line, at most 60 bytes (then "..."). */
static const char *pl__clip(const char *s, char buf[72])
{
    size_t n = 0;
    while (s[n] && s[n] != '\n' && s[n] != '\r' && n < 60)
        n++;
    memcpy(buf, s, n);
    if (s[n])
        memcpy(buf + n, "...", 4);
    else
        buf[n] = '\0';
    return buf;
}

static pl_pos pl__pos(const pl__yaml *y, yaml_mark_t m)
{
    pl_pos p = {y->spec->file, (int)(m.line > INT_MAX - 1 ? INT_MAX - 1 : m.line) + 1,
                (int)(m.column > INT_MAX - 1 ? INT_MAX - 1 : m.column) + 1};
    return p;
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
                pl_pos p = {y->spec->file, line, col};
                if (c == 0)
                    return pl__fail(y, p,
                                    "the file contains a NUL byte (offset %zu): it is binary, not "
                                    "YAML text; pass the pipeline's .yaml file",
                                    i);
                return pl__fail(y, p,
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
            pl_pos p = {y->spec->file, line, col};
            if (bad)
                return pl__fail(y, p,
                                "the file is not UTF-8 text (byte 0x%02x at offset %zu); a "
                                "pipeline file is YAML in UTF-8: re-save it as UTF-8 or pass "
                                "the right file",
                                c, i);
            /* What libyaml's reader refuses as non-printable: C1 controls but NEL, U+FFFE/F. */
            if ((cp >= 0x80 && cp < 0xa0 && cp != 0x85) || cp == 0xfffe || cp == 0xffff)
                return pl__fail(y, p,
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
                           y->spec->file, problem,
                           p->problem_offset < len ? p->problem_offset : len);
    }
    const char *fix = "check the indentation and the quoting on this line and the one above";
    for (size_t i = 0; i < sizeof pl__syntax_fixes / sizeof pl__syntax_fixes[0]; i++)
        if (strcmp(problem, pl__syntax_fixes[i].problem) == 0) fix = pl__syntax_fixes[i].fix;
    if (p->context)
        return pl__fail(y, pos, "YAML syntax: %s (%s at line %d); %s", problem, p->context,
                        (int)p->context_mark.line + 1, fix);
    return pl__fail(y, pos, "YAML syntax: %s; %s", problem, fix);
}

static pl_status pl__no_anchor_tag(pl__yaml *y, pl_pos pos, const yaml_char_t *anchor,
                                   const yaml_char_t *tag)
{
    char cb[72];
    if (anchor)
        return pl__fail(y, pos,
                        "anchor '&%s': pipectl files do not use anchors and aliases; write the "
                        "value out where it is needed (or generate the pipeline in Lua)",
                        pl__clip((const char *)anchor, cb));
    if (tag) {
        /* libyaml expands "!!int" to "tag:yaml.org,2002:int"; show it as written. */
        static const char core[] = "tag:yaml.org,2002:";
        const char *t = (const char *)tag;
        bool is_core = strncmp(t, core, sizeof core - 1) == 0;
        return pl__fail(y, pos, "tag '%s%s': pipectl files do not use YAML tags; remove it",
                        is_core ? "!!" : "", pl__clip(is_core ? t + sizeof core - 1 : t, cb));
    }
    return PL_OK;
}

/* Reads the whole text into a tree. *root is NULL for an empty stream. */
static pl_status pl__read_tree(pl__yaml *y, const char *text, size_t len, pl__node **root)
{
    pl_status st = PL_OK;
    yaml_parser_t p;
    yaml_event_t ev;
    pl__node *stack[PL_MAX_NESTING + 1];
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
        pl__node *n = NULL;
        switch (ev.type) {
        case YAML_STREAM_END_EVENT:
            done = true;
            break;
        case YAML_DOCUMENT_START_EVENT:
            if (docs > 0)
                st = pl__fail(y, pos,
                              "a second YAML document starts here; a pipeline file holds one "
                              "document: remove this '---' and what follows, or split the file");
            break;
        case YAML_DOCUMENT_END_EVENT:
            docs++;
            break;
        case YAML_ALIAS_EVENT: {
            char cb[72];
            st = pl__fail(y, pos,
                          "alias '*%s': pipectl files do not use anchors and aliases; write the "
                          "value out where it is needed (or generate the pipeline in Lua)",
                          pl__clip((const char *)ev.data.alias.anchor, cb));
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
                st = pl__fail(y, pos,
                              "nesting deeper than %d levels (PL_MAX_NESTING); a pipeline needs "
                              "at most 4 (stages: - {key: [list]}): flatten this value",
                              PL_MAX_NESTING);
                break;
            }
            if (ev.type == YAML_SCALAR_EVENT &&
                memchr(ev.data.scalar.value, '\0', ev.data.scalar.length)) {
                st = pl__fail(y, pos, "a value contains a NUL character (\\0); remove it");
                break;
            }
            n = calloc(1, sizeof *n);
            if (!n) {
                st = pl__oom(y);
                break;
            }
            n->pos = pos;
            if (ev.type == YAML_SCALAR_EVENT) {
                n->type = PL__SCALAR;
                n->plain = ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
                n->len = ev.data.scalar.length;
                n->text = malloc(n->len + 1);
                if (!n->text) {
                    free(n);
                    st = pl__oom(y);
                    break;
                }
                memcpy(n->text, ev.data.scalar.value, n->len);
                n->text[n->len] = '\0';
            } else {
                n->type = ev.type == YAML_SEQUENCE_START_EVENT ? PL__SEQ : PL__MAP;
            }
            if (depth == 0) {
                *root = n; /* one document, so one root */
            } else {
                pl__node *parent = stack[depth - 1];
                if (parent->last)
                    parent->last->next = n;
                else
                    parent->child = n;
                parent->last = n;
                parent->n++;
            }
            if (n->type != PL__SCALAR) stack[depth++] = n;
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
        pl__node_free(*root);
        *root = NULL;
    }
    return st;
}

/* ---- Typed access to nodes ------------------------------------------------------------ */

static bool pl__is_null(const pl__node *n)
{
    if (!n || n->type != PL__SCALAR || !n->plain) return false;
    return n->len == 0 || strcmp(n->text, "~") == 0 || strcmp(n->text, "null") == 0 ||
           strcmp(n->text, "Null") == 0 || strcmp(n->text, "NULL") == 0;
}

static const char *pl__what(const pl__node *n)
{
    if (pl__is_null(n)) return "nothing";
    return n->type == PL__MAP ? "a mapping" : n->type == PL__SEQ ? "a list" : "a single value";
}

/* `where` is the owner of the key, for messages: "run: ", "buffer 'x': ", "stage 'y': ". */
static pl_status pl__want_scalar(pl__yaml *y, const char *where, const char *key, const pl__node *v,
                                 const char *example)
{
    if (v->type == PL__SCALAR && !pl__is_null(v)) return PL_OK;
    if (v->type == PL__SCALAR)
        return pl__fail(y, v->pos, "%s'%s' has no value; write %s: %s", where, key, key, example);
    return pl__fail(y, v->pos, "%s'%s' must be a single value like %s: %s, not %s", where, key, key,
                    example, pl__what(v));
}

/* Parses a decimal integer (optional sign). false on anything else or on overflow. */
static bool pl__parse_i64(const char *s, int64_t *out)
{
    bool neg = *s == '-';
    if (*s == '-' || *s == '+') s++;
    if (!*s) return false;
    uint64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return false;
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_C(1) << 63) / 10 || v * 10 > (UINT64_C(1) << 63) - d) return false;
        v = v * 10 + d;
    }
    if (!neg && v > (uint64_t)INT64_MAX) return false;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return true;
}

static bool pl__parse_u64(const char *s, uint64_t *out)
{
    if (*s == '+') s++;
    if (!*s) return false;
    uint64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return false;
        unsigned d = (unsigned)(*s - '0');
        if (v > UINT64_MAX / 10 || v * 10 > UINT64_MAX - d) return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

typedef struct pl__keyref {
    const pl__node *key;
    int ordinal; /* position in the mapping */
} pl__keyref;

static int pl__keyref_cmp(const void *a, const void *b)
{
    const pl__keyref *x = a, *y = b;
    int c = strcmp(x->key->text, y->key->text);
    return c ? c : (x->ordinal > y->ordinal) - (x->ordinal < y->ordinal);
}

/* A mapping's keys must be single values, given once. Reports the first problem in document
 * order: the earliest key that repeats an earlier one. Sorting keeps a mapping with a million keys
 * from taking quadratic time. */
static pl_status pl__check_keys(pl__yaml *y, const pl__node *map, const char *where)
{
    char cb[72];
    int n = 0;
    for (const pl__node *k = map->child; k && k->next; k = k->next->next, n++)
        if (k->type != PL__SCALAR)
            return pl__fail(y, k->pos, "%sa key must be a single word, not %s; write 'key: value'",
                            where, pl__what(k));
    if (n < 2) return PL_OK;
    pl__keyref *refs = malloc((size_t)n * sizeof *refs);
    if (!refs) return pl__oom(y);
    int i = 0;
    for (const pl__node *k = map->child; k && k->next; k = k->next->next, i++)
        refs[i] = (pl__keyref){k, i};
    qsort(refs, (size_t)n, sizeof *refs, pl__keyref_cmp);
    const pl__node *dup = NULL, *first = NULL;
    int dup_ordinal = n;
    for (int g = 0; g < n;) { /* groups of equal keys, in ordinal order inside each group */
        int e = g + 1;
        while (e < n && strcmp(refs[e].key->text, refs[g].key->text) == 0)
            e++;
        if (e - g > 1 && refs[g + 1].ordinal < dup_ordinal) {
            dup = refs[g + 1].key;
            first = refs[g].key;
            dup_ordinal = refs[g + 1].ordinal;
        }
        g = e;
    }
    free(refs);
    if (dup)
        return pl__fail(y, dup->pos,
                        "%sduplicate key '%s' (first given at line %d, column %d); keep only one",
                        where, pl__clip(dup->text, cb), first->pos.line, first->pos.col);
    return PL_OK;
}

static pl_status pl__unknown_key(pl__yaml *y, const pl__node *k, const char *where,
                                 const char *const *keys, int n)
{
    char cb[72], list[256] = "";
    if (k->len == 0) return pl__fail(y, k->pos, "%sempty key; write 'key: value'", where);
    const char *best = pl_closest(k->text, keys, n);
    if (best)
        return pl__fail(y, k->pos, "%sunknown key '%s' (did you mean '%s'?)", where,
                        pl__clip(k->text, cb), best);
    for (int i = 0; i < n; i++) {
        strncat(list, keys[i], sizeof list - strlen(list) - 1);
        if (i + 1 < n) strncat(list, ", ", sizeof list - strlen(list) - 1);
    }
    return pl__fail(y, k->pos, "%sunknown key '%s'; the keys here are: %s", where,
                    pl__clip(k->text, cb), list);
}

static int pl__index_of(const char *s, const char *const *words, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(s, words[i]) == 0) return i;
    return -1;
}

/* A scalar that must be one of `words`: its index, or an error with "did you mean". */
static pl_status pl__want_word(pl__yaml *y, const char *where, const char *key, const pl__node *v,
                               const char *const *words, int n, int *out)
{
    char cb[72], list[256] = "";
    PL_CHECK(pl__want_scalar(y, where, key, v, words[0]));
    *out = pl__index_of(v->text, words, n);
    if (*out >= 0) return PL_OK;
    for (int i = 0; i < n; i++) {
        strncat(list, words[i], sizeof list - strlen(list) - 1);
        if (i + 1 < n) strncat(list, ", ", sizeof list - strlen(list) - 1);
    }
    const char *best = pl_closest(v->text, words, n);
    if (best)
        return pl__fail(y, v->pos, "%s'%s' is '%s' (did you mean '%s'?); it must be one of: %s",
                        where, key, pl__clip(v->text, cb), best, list);
    return pl__fail(y, v->pos, "%s'%s' is '%s'; it must be one of: %s", where, key,
                    pl__clip(v->text, cb), list);
}

static pl_status pl__want_int(pl__yaml *y, const char *where, const char *key, const pl__node *v,
                              int64_t min, int64_t max, const char *cap, int64_t *out)
{
    char cb[72];
    char ex[32];
    snprintf(ex, sizeof ex, "%lld", (long long)min);
    PL_CHECK(pl__want_scalar(y, where, key, v, ex));
    if (!pl__parse_i64(v->text, out))
        return pl__fail(y, v->pos, "%s'%s' must be a whole number, got '%s'", where, key,
                        pl__clip(v->text, cb));
    if (*out < min || *out > max)
        return pl__fail(y, v->pos, "%s'%s' is %lld; it must be between %lld and %lld%s", where, key,
                        (long long)*out, (long long)min, (long long)max, cap);
    return PL_OK;
}

/* ---- Tree -> spec ------------------------------------------------------------------------ */

static pl_status pl__load_run(pl__yaml *y, const pl__node *run)
{
    static const char *const keys[] = {"batches", "depth", "device", "seed"};
    const char *where = "run: ";
    if (pl__is_null(run)) return PL_OK;
    if (run->type != PL__MAP)
        return pl__fail(y, run->pos, "'run' must be a mapping like {batches: 16, depth: 3}, not %s",
                        pl__what(run));
    PL_CHECK(pl__check_keys(y, run, where));
    pl_run_opts *r = &y->spec->run;
    for (const pl__node *k = run->child; k && k->next; k = k->next->next) {
        const pl__node *v = k->next;
        int64_t i;
        switch (pl__index_of(k->text, keys, 4)) {
        case 0:
            PL_CHECK(
                pl__want_int(y, where, "batches", v, 1, PL_MAX_BATCHES, " (PL_MAX_BATCHES)", &i));
            r->batches = i;
            r->batches_pos = v->pos;
            break;
        case 1:
            PL_CHECK(pl__want_int(y, where, "depth", v, 1, PL_MAX_DEPTH, " (PL_MAX_DEPTH)", &i));
            r->depth = (int)i;
            r->depth_pos = v->pos;
            break;
        case 2:
            PL_CHECK(pl__want_int(y, where, "device", v, 0, INT_MAX, "", &i));
            r->device = (int)i;
            r->device_pos = v->pos;
            break;
        case 3: {
            char cb[72];
            PL_CHECK(pl__want_scalar(y, where, "seed", v, "42"));
            if (!pl__parse_u64(v->text, &r->seed))
                return pl__fail(y, v->pos,
                                "run: 'seed' must be a whole number from 0 to "
                                "18446744073709551615, got '%s'",
                                pl__clip(v->text, cb));
            r->seed_pos = v->pos;
            break;
        }
        default:
            return pl__unknown_key(y, k, where, keys, 4);
        }
    }
    return PL_OK;
}

static pl_status pl__load_shape(pl__yaml *y, const char *where, const pl__node *v, pl_buffer *b)
{
    char cb[72];
    if (v->type != PL__SEQ) {
        if (v->type == PL__SCALAR && !pl__is_null(v))
            return pl__fail(y, v->pos,
                            "%s'shape' must be a list of positive integers like [%s], not a "
                            "single value",
                            where, pl__clip(v->text, cb));
        return pl__fail(y, v->pos,
                        "%s'shape' must be a list of positive integers like [1024] or [64, 256], "
                        "not %s",
                        where, pl__what(v));
    }
    if (v->n == 0)
        return pl__fail(y, v->pos, "%s'shape' is empty; give at least one dimension, like [1024]",
                        where);
    if (v->n > PL_MAX_RANK)
        return pl__fail(y, v->pos,
                        "%s'shape' has %d dimensions; at most %d (PL_MAX_RANK) are allowed: "
                        "merge some of them",
                        where, v->n, PL_MAX_RANK);
    int d = 0;
    for (const pl__node *it = v->child; it; it = it->next, d++) {
        int64_t dim;
        if (it->type != PL__SCALAR || pl__is_null(it))
            return pl__fail(y, it->pos, "%sshape dimension %d must be a positive integer, not %s",
                            where, d + 1, pl__what(it));
        if (!pl__parse_i64(it->text, &dim) || dim < 1)
            return pl__fail(y, it->pos, "%sshape dimension %d must be a positive integer, got '%s'",
                            where, d + 1, pl__clip(it->text, cb));
        b->shape[d] = dim;
    }
    b->rank = v->n;
    b->shape_pos = v->pos;
    return PL_OK;
}

/* Element count and byte size against int64 and PL_MAX_BUFFER_BYTES, at the shape's position. */
static pl_status pl__check_size(pl__yaml *y, const char *where, const pl_buffer *b)
{
    uint64_t count = 1, esize = pl_dtype_size(b->dtype);
    for (int d = 0; d < b->rank; d++) {
        uint64_t dim = (uint64_t)b->shape[d];
        if (count > (uint64_t)INT64_MAX / dim)
            return pl__fail(y, b->shape_pos,
                            "%sthe shape has more than 2^63-1 elements; a buffer holds at most "
                            "%llu bytes (64 GiB, PL_MAX_BUFFER_BYTES): make it smaller",
                            where, (unsigned long long)PL_MAX_BUFFER_BYTES);
        count *= dim;
    }
    if (count > PL_MAX_BUFFER_BYTES / esize)
        return pl__fail(y, b->shape_pos,
                        "%s%llu elements of %s is more than %llu bytes (64 GiB, "
                        "PL_MAX_BUFFER_BYTES) per buffer: make the shape smaller",
                        where, (unsigned long long)count, pl_dtype_name(b->dtype),
                        (unsigned long long)PL_MAX_BUFFER_BYTES);
    return PL_OK;
}

static pl_status pl__load_buffer(pl__yaml *y, const pl__node *k, const pl__node *v)
{
    static const char *const keys[] = {"where", "dtype", "shape", "persistent", "init", "file"};
    static const char *const wheres[] = {"host", "device"};
    static const char *const inits[] = {"zeros", "random", "file"};
    static const char *const bools[] = {"false", "true"};
    char where[128], cb[72];
    if (k->type != PL__SCALAR || pl__is_null(k))
        return pl__fail(y, k->pos,
                        "a buffer name must be a single word, not %s; write 'name: {shape: [N]}'",
                        pl__what(k));
    snprintf(where, sizeof where, "buffer '%s': ", pl__clip(k->text, cb));
    if (v->type != PL__MAP)
        return pl__fail(y, v->pos,
                        "%sexpected a mapping like {where: host, dtype: f32, shape: [1024]}, "
                        "not %s",
                        where, pl__what(v));
    PL_CHECK(pl__check_keys(y, v, where));
    pl_buffer *b = pl_spec_add_buffer(y->spec, k->text, k->pos);
    if (!b) return pl__oom(y);
    const char *dtypes[PL_DTYPE_COUNT];
    for (int i = 0; i < PL_DTYPE_COUNT; i++)
        dtypes[i] = pl_dtype_name((pl_dtype)i);
    bool has_init = false;
    const pl__node *file_key = NULL, *init_val = NULL;
    for (const pl__node *kk = v->child; kk && kk->next; kk = kk->next->next) {
        const pl__node *vv = kk->next;
        int idx;
        switch (pl__index_of(kk->text, keys, 6)) {
        case 0:
            PL_CHECK(pl__want_word(y, where, "where", vv, wheres, 2, &idx));
            b->where = idx ? PL_DEVICE : PL_HOST;
            b->where_pos = vv->pos;
            break;
        case 1:
            PL_CHECK(pl__want_word(y, where, "dtype", vv, dtypes, PL_DTYPE_COUNT, &idx));
            b->dtype = (pl_dtype)idx;
            b->dtype_pos = vv->pos;
            break;
        case 2:
            PL_CHECK(pl__load_shape(y, where, vv, b));
            break;
        case 3:
            PL_CHECK(pl__want_word(y, where, "persistent", vv, bools, 2, &idx));
            b->persistent = idx == 1;
            b->persistent_pos = vv->pos;
            break;
        case 4:
            PL_CHECK(pl__want_word(y, where, "init", vv, inits, 3, &idx));
            b->init = idx == 0 ? PL_INIT_ZEROS : idx == 1 ? PL_INIT_RANDOM : PL_INIT_FILE;
            b->init_pos = vv->pos;
            has_init = true;
            init_val = vv;
            break;
        case 5:
            PL_CHECK(pl__want_scalar(y, where, "file", vv, "data.npy"));
            b->init_file = pl_spec_strdup(y->spec, vv->text);
            if (!b->init_file) return pl__oom(y);
            file_key = kk;
            break;
        default:
            return pl__unknown_key(y, kk, where, keys, 6);
        }
    }
    if (b->rank == 0)
        return pl__fail(y, k->pos, "%sno 'shape'; add shape: [N] (a list of positive integers)",
                        where);
    if (has_init && b->init == PL_INIT_FILE && !b->init_file)
        return pl__fail(y, init_val->pos, "%sinit: file needs 'file: PATH' (raw or .npy)", where);
    if (file_key && b->init != PL_INIT_FILE)
        return pl__fail(y, file_key->pos,
                        "%s'file' is only used with init: file; add init: file or remove 'file'",
                        where);
    return pl__check_size(y, where, b);
}

static pl_status pl__load_buffers(pl__yaml *y, const pl__node *bufs)
{
    if (pl__is_null(bufs)) return PL_OK;
    if (bufs->type != PL__MAP)
        return pl__fail(y, bufs->pos,
                        "'buffers' must be a mapping of buffer names to properties, like "
                        "'x: {where: host, dtype: f32, shape: [1024]}' on the next line, not %s",
                        pl__what(bufs));
    /* Duplicate buffer names are left to pl_spec_check (one message for YAML and Lua). */
    int n = 0;
    for (const pl__node *k = bufs->child; k && k->next; k = k->next->next) {
        if (++n > PL_MAX_BUFFERS)
            return pl__fail(y, k->pos,
                            "more than %d buffers (PL_MAX_BUFFERS); split the pipeline into "
                            "several",
                            PL_MAX_BUFFERS);
        PL_CHECK(pl__load_buffer(y, k, k->next));
    }
    return PL_OK;
}

/* reads / writes / after: a list of names. */
static pl_status pl__load_refs(pl__yaml *y, const char *where, const char *key, const pl__node *v,
                               pl_stage *st,
                               pl_ref *(*add)(pl_spec *, pl_stage *, const char *, pl_pos))
{
    char cb[72];
    if (v->type != PL__SEQ) {
        if (v->type == PL__SCALAR && !pl__is_null(v))
            return pl__fail(y, v->pos,
                            "%s'%s' must be a list of names like [%s], not a single value", where,
                            key, pl__clip(v->text, cb));
        return pl__fail(y, v->pos, "%s'%s' must be a list of names like [a, b], not %s", where, key,
                        pl__what(v));
    }
    for (const pl__node *it = v->child; it; it = it->next) {
        if (it->type != PL__SCALAR || pl__is_null(it) || it->len == 0)
            return pl__fail(y, it->pos, "%seach item of '%s' must be a name, not %s", where, key,
                            it->len == 0 && it->type == PL__SCALAR ? "an empty string"
                                                                   : pl__what(it));
        if (!add(y->spec, st, it->text, it->pos)) return pl__oom(y);
    }
    return PL_OK;
}

static pl_status pl__load_opt(pl__yaml *y, const char *where, const pl__node *k, const pl__node *v,
                              pl_stage *st)
{
    if (k->len == 0) return pl__fail(y, k->pos, "%sempty key; write 'key: value'", where);
    if (v->type == PL__MAP)
        return pl__fail(y, v->pos,
                        "%s'%s' is a mapping; stage options are single values or lists of values",
                        where, k->text);
    if (pl__is_null(v))
        return pl__fail(y, v->pos, "%s'%s' has no value; give it a value or remove the key", where,
                        k->text);
    pl_opt *o = pl_stage_add_opt(y->spec, st, k->text, k->pos);
    if (!o) return pl__oom(y);
    o->val_pos = v->pos;
    if (v->type == PL__SCALAR) {
        o->str = pl_spec_strdup(y->spec, v->text);
        return o->str ? PL_OK : pl__oom(y);
    }
    o->is_list = true;
    for (const pl__node *it = v->child; it; it = it->next) {
        /* A one-key mapping item ({f32: 1.5}: a user kernel's typed argument) is kept as the text
         * "f32: 1.5", spaced so that column offsets into the text match the file. */
        const pl__node *mk = it->type == PL__MAP && it->n == 2 ? it->child : NULL;
        const pl__node *mv = mk ? mk->next : NULL;
        if (mk && mk->type == PL__SCALAR && mv && mv->type == PL__SCALAR && !pl__is_null(mv)) {
            int gap =
                mv->pos.line == mk->pos.line ? mv->pos.col - mk->pos.col - (int)mk->len - 1 : 1;
            if (gap < 0 || gap > 64) gap = 1;
            size_t n = mk->len + mv->len + (size_t)gap + 2;
            char *text = pl_spec_alloc(y->spec, n);
            if (!text) return pl__oom(y);
            snprintf(text, n, "%s:%*s%s", mk->text, gap, "", mv->text);
            if (pl_opt_add_item(y->spec, o, text, mk->pos) != PL_OK) return pl__oom(y);
            continue;
        }
        if (it->type != PL__SCALAR || pl__is_null(it))
            return pl__fail(y, it->pos, "%seach item of '%s' must be a single value, not %s", where,
                            k->text, pl__what(it));
        if (pl_opt_add_item(y->spec, o, it->text, it->pos) != PL_OK) return pl__oom(y);
    }
    return PL_OK;
}

/* When `name` or `kind` is missing, a misspelling of it is the likelier story: say so. The other
 * unknown keys of a stage are reported by pl_stage_check_opts, which knows the kind's keys. */
static pl_status pl__misspelled(pl__yaml *y, const pl__node *m, const char *where,
                                const char *missing)
{
    static const char *const common[] = {"name", "kind", "reads", "writes", "after"};
    char cb[72];
    for (const pl__node *k = m->child; k && k->next; k = k->next->next) {
        if (pl__index_of(k->text, common, 5) >= 0) continue;
        const char *best = pl_closest(k->text, common, 5);
        if (best && strcmp(best, missing) == 0)
            return pl__fail(y, k->pos, "%sunknown key '%s' (did you mean '%s'?)", where,
                            pl__clip(k->text, cb), missing);
    }
    return PL_OK;
}

static pl_status pl__load_stage(pl__yaml *y, const pl__node *m, int number)
{
    char where[128], cb[72];
    snprintf(where, sizeof where, "stage %d: ", number);
    for (const pl__node *k = m->type == PL__MAP ? m->child : NULL; k && k->next; k = k->next->next)
        if (k->type == PL__SCALAR && strcmp(k->text, "name") == 0 && k->next->type == PL__SCALAR &&
            !pl__is_null(k->next)) { /* the stage's name, for messages, as early as possible */
            snprintf(where, sizeof where, "stage '%s': ", pl__clip(k->next->text, cb));
            break;
        }
    if (m->type != PL__MAP)
        return pl__fail(y, m->pos,
                        "each stage must be a mapping like {name: up, kind: h2d, from: x, to: y}, "
                        "not %s",
                        pl__what(m));
    PL_CHECK(pl__check_keys(y, m, where));
    const pl__node *name = NULL, *kind = NULL;
    for (const pl__node *k = m->child; k && k->next; k = k->next->next) {
        if (strcmp(k->text, "name") == 0) name = k->next;
        if (strcmp(k->text, "kind") == 0) kind = k->next;
    }
    if (!name) {
        PL_CHECK(pl__misspelled(y, m, where, "name"));
        return pl__fail(y, m->pos, "stage %d has no 'name'; add name: <a unique stage name>",
                        number);
    }
    PL_CHECK(pl__want_scalar(y, where, "name", name, "up"));
    snprintf(where, sizeof where, "stage '%s': ", pl__clip(name->text, cb));
    int n_kinds;
    const char *const *kinds = pl_kind_names(&n_kinds);
    if (!kind) PL_CHECK(pl__misspelled(y, m, where, "kind"));
    if (!kind)
        return pl__fail(y, name->pos, "stage '%s' has no 'kind'; add kind: one of %s",
                        pl__clip(name->text, cb), pl_kind_list());
    int kind_idx;
    PL_CHECK(pl__want_word(y, where, "kind", kind, kinds, n_kinds, &kind_idx));
    const pl_kind *kd = pl_kind_find(kinds[kind_idx]);
    if (!kd) return pl__oom(y); /* the table is inconsistent */

    pl_stage *st = pl_spec_add_stage(y->spec, name->text, name->pos);
    if (!st) return pl__oom(y);
    st->kind = kd;
    st->kind_pos = kind->pos;
    for (const pl__node *k = m->child; k && k->next; k = k->next->next) {
        const pl__node *v = k->next;
        if (v == name || v == kind) continue;
        if (strcmp(k->text, "reads") == 0)
            PL_CHECK(pl__load_refs(y, where, "reads", v, st, pl_stage_add_read));
        else if (strcmp(k->text, "writes") == 0)
            PL_CHECK(pl__load_refs(y, where, "writes", v, st, pl_stage_add_write));
        else if (strcmp(k->text, "after") == 0)
            PL_CHECK(pl__load_refs(y, where, "after", v, st, pl_stage_add_after));
        else
            /* Kind-specific keys: typed (and unknown ones reported) by pl_stage_check_opts. */
            PL_CHECK(pl__load_opt(y, where, k, v, st));
    }
    return PL_OK;
}

static pl_status pl__load_stages(pl__yaml *y, const pl__node *stages)
{
    if (pl__is_null(stages)) return PL_OK;
    if (stages->type != PL__SEQ)
        return pl__fail(y, stages->pos,
                        "'stages' must be a list of stages, each on its own line like "
                        "'- {name: up, kind: h2d, from: x_host, to: x_dev}', not %s",
                        pl__what(stages));
    int i = 1;
    for (const pl__node *s = stages->child; s; s = s->next, i++) {
        if (i > PL_MAX_STAGES)
            return pl__fail(y, s->pos,
                            "more than %d stages (PL_MAX_STAGES); split the pipeline into several",
                            PL_MAX_STAGES);
        PL_CHECK(pl__load_stage(y, s, i));
    }
    return PL_OK;
}

static pl_status pl__load_root(pl__yaml *y, const pl__node *root)
{
    static const char *const keys[] = {"pipeline", "run", "buffers", "stages"};
    pl_pos start = {y->spec->file, 1, 1};
    if (!root || pl__is_null(root))
        return pl__fail(y, start,
                        "the file is empty; a pipeline needs at least 'stages:' (see "
                        "docs/pipeline-yaml.md)");
    if (root->type != PL__MAP)
        return pl__fail(y, root->pos,
                        "the document must be a mapping with the keys pipeline, run, buffers and "
                        "stages, not %s",
                        pl__what(root));
    PL_CHECK(pl__check_keys(y, root, ""));
    const pl__node *v[4] = {NULL, NULL, NULL, NULL};
    for (const pl__node *k = root->child; k && k->next; k = k->next->next) {
        int idx = pl__index_of(k->text, keys, 4);
        if (idx < 0) return pl__unknown_key(y, k, "", keys, 4);
        v[idx] = k->next;
    }
    if (v[0]) {
        PL_CHECK(pl__want_scalar(y, "", "pipeline", v[0], "my_pipeline"));
        if (v[0]->len == 0)
            return pl__fail(y, v[0]->pos,
                            "'pipeline' is empty; write pipeline: my_pipeline, or remove the key "
                            "to use the file's base name");
        y->spec->name = pl_spec_strdup(y->spec, v[0]->text);
        if (!y->spec->name) return pl__oom(y);
    }
    if (v[1]) PL_CHECK(pl__load_run(y, v[1]));
    if (v[2]) PL_CHECK(pl__load_buffers(y, v[2]));
    if (!v[3])
        return pl__fail(y, root->pos,
                        "the pipeline has no 'stages:'; add a list of stages, each like "
                        "'- {name: gen, kind: source, to: x_host}'");
    return pl__load_stages(y, v[3]);
}

pl_status pl_yaml_load_string(const char *name, const char *text, size_t len, pl_spec **out,
                              pl_error *err)
{
    *out = NULL;
    pl_spec *spec = NULL;
    pl__node *root = NULL;
    PL_CHECK(pl_spec_new(name, &spec, err));
    pl__yaml y = {spec, err};
    pl_status st = pl__read_tree(&y, text, len, &root);
    if (st == PL_OK) st = pl__load_root(&y, root);
    pl__node_free(root);
    if (st != PL_OK) {
        pl_spec_free(spec);
        return st;
    }
    *out = spec;
    return PL_OK;
}

pl_status pl_yaml_load_file(const char *path, pl_spec **out, pl_error *err)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return pl_error_set(err, PL_EINPUT, "error: cannot read '%s': %s", path, strerror(errno));
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    pl_status st = PL_OK;
    if (!buf) {
        st = pl_error_set(err, PL_ENOMEM, "error: out of memory reading '%s'", path);
        goto done;
    }
    for (;;) {
        if (len == cap) {
            if (cap > PL__MAX_FILE_BYTES) {
                st = pl_error_set(err, PL_EINPUT,
                                  "error: cannot read '%s': larger than %zu MiB; a pipeline file "
                                  "is a small YAML text file",
                                  path, PL__MAX_FILE_BYTES >> 20);
                goto done;
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                st = pl_error_set(err, PL_ENOMEM, "error: out of memory reading '%s'", path);
                goto done;
            }
            buf = nb;
            cap *= 2;
        }
        errno = 0;
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) break;
    }
    if (ferror(f)) { /* e.g. a directory: EISDIR */
        st = pl_error_set(err, PL_EINPUT, "error: cannot read '%s': %s", path,
                          strerror(errno ? errno : EIO));
        goto done;
    }
    st = pl_yaml_load_string(path, buf, len, out, err);
done:
    free(buf);
    fclose(f);
    return st;
}
