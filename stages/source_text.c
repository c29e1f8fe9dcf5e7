/* source_text: the source kind's text and JSONL records (one record per line) and the buffered
 * stream it reads them from in order, a file or stdin (pl_source.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pl_source.h"

#define PL__IN_CHUNK (1u << 16)

pl_status pl_src_in_init(pl_src_in *in, int fd, const char *name, pl_error *err)
{
    memset(in, 0, sizeof *in);
    in->fd = fd;
    in->name = name;
    in->cap = PL__IN_CHUNK;
    in->buf = malloc(in->cap);
    if (!in->buf) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    return PL_OK;
}

void pl_src_in_fini(pl_src_in *in)
{
    free(in->buf);
    free(in->line);
    json_decref(in->record);
    memset(in, 0, sizeof *in);
    in->fd = -1;
}

/* Refills the buffer after what is left in it. */
static pl_status pl__in_fill(pl_src_in *in, pl_error *err)
{
    if (in->beg > 0) {
        memmove(in->buf, in->buf + in->beg, in->end - in->beg);
        in->bytes_off += (int64_t)in->beg;
        in->end -= in->beg;
        in->beg = 0;
    }
    while (!in->eof && in->end < in->cap) {
        ssize_t r = read(in->fd, in->buf + in->end, in->cap - in->end);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0)
            return pl_error_set(err, PL_EIO, "error: reading '%s' failed: %s", in->name,
                                strerror(errno));
        if (r == 0) in->eof = true;
        in->end += (size_t)r;
        break;
    }
    return PL_OK;
}

pl_status pl_src_in_read(pl_src_in *in, void *dst, size_t n, size_t *got, pl_error *err)
{
    *got = 0;
    char *d = dst;
    while (*got < n) {
        if (in->beg == in->end) {
            if (in->eof) break;
            in->bytes_off += (int64_t)in->end;
            in->beg = in->end = 0;
            /* Large reads go straight to the destination. */
            if (n - *got >= in->cap) {
                ssize_t r = read(in->fd, d + *got, n - *got);
                if (r < 0 && errno == EINTR) continue;
                if (r < 0)
                    return pl_error_set(err, PL_EIO, "error: reading '%s' failed: %s", in->name,
                                        strerror(errno));
                if (r == 0) in->eof = true;
                *got += (size_t)r;
                in->bytes_off += r;
                continue;
            }
            PL_CHECK(pl__in_fill(in, err));
            continue;
        }
        size_t k = in->end - in->beg < n - *got ? in->end - in->beg : n - *got;
        memcpy(d + *got, in->buf + in->beg, k);
        in->beg += k;
        *got += k;
    }
    return PL_OK;
}

/* The next line without its '\n': *more = false at the end of the stream. */
static pl_status pl__in_line(pl_src_in *in, const char **s, size_t *n, bool *more, pl_error *err)
{
    size_t have = 0; /* bytes assembled in in->line */
    *more = true;
    for (;;) {
        char *nl = memchr(in->buf + in->beg, '\n', in->end - in->beg);
        size_t k = nl ? (size_t)(nl - (in->buf + in->beg)) : in->end - in->beg;
        if (nl && have == 0) {
            *s = in->buf + in->beg;
            *n = k;
            in->beg += k + 1;
            break;
        }
        if (have + k + 1 > in->line_cap) {
            size_t cap = in->line_cap ? in->line_cap : 256;
            while (cap < have + k + 1)
                cap *= 2;
            char *p = realloc(in->line, cap);
            if (!p) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
            in->line = p;
            in->line_cap = cap;
        }
        memcpy(in->line + have, in->buf + in->beg, k);
        have += k;
        in->beg += k + (nl ? 1 : 0);
        if (nl) {
            *s = in->line;
            *n = have;
            break;
        }
        if (in->eof) {
            if (have == 0) {
                *more = false;
                return PL_OK;
            }
            *s = in->line; /* a last line without '\n' */
            *n = have;
            break;
        }
        PL_CHECK(pl__in_fill(in, err));
    }
    in->lineno++;
    if (*n > 0 && (*s)[*n - 1] == '\r') (*n)--;
    if (in->lineno == 1 && *n >= 3 && memcmp(*s, "\xEF\xBB\xBF", 3) == 0) {
        *s += 3;
        *n -= 3;
    }
    return PL_OK;
}

static bool pl__blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t') return false;
    return true;
}

static const char *pl__json_type(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    case JSON_NULL:
        return "null";
    }
    return "a value";
}

pl_status pl_source_text_next(const pl_source_opts *o, pl_src_in *in, const char **s, size_t *n,
                              bool *more, pl_error *err)
{
    json_decref(in->record);
    in->record = NULL;
    if (o->format != PL_SRC_JSONL) return pl__in_line(in, s, n, more, err);
    const char *line;
    size_t len;
    do {
        PL_CHECK(pl__in_line(in, &line, &len, more, err));
        if (!*more) return PL_OK;
    } while (pl__blank(line, len));
    json_error_t je;
    json_t *j = json_loadb(line, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    if (!j)
        return pl_error_set(err, PL_EINPUT,
                            "error: %s:%lld:%d: not valid JSON: %s; each line of a JSONL file "
                            "holds one JSON object",
                            in->name, (long long)in->lineno, je.column > 0 ? je.column : 1,
                            je.text);
    in->record = j;
    if (!json_is_object(j))
        return pl_error_set(err, PL_EINPUT,
                            "error: %s:%lld: the line holds %s, not an object with a field '%s'",
                            in->name, (long long)in->lineno, pl__json_type(j), o->field);
    json_t *f = json_object_get(j, o->field);
    if (!f) {
        char keys[256] = "";
        size_t k = 0;
        const char *key;
        json_t *v;
        json_object_foreach(j, key, v)
        {
            (void)v;
            int w = snprintf(keys + k, sizeof keys - k, "%s%s", k ? ", " : "", key);
            if (w < 0 || (size_t)w >= sizeof keys - k) break;
            k += (size_t)w;
        }
        return pl_error_set(err, PL_EINPUT,
                            "error: %s:%lld: the record has no field '%s' (%s%s); give the "
                            "source's 'field' the one that holds the text",
                            in->name, (long long)in->lineno, o->field,
                            k ? "its fields: " : "it has no fields", keys);
    }
    if (!json_is_string(f))
        return pl_error_set(err, PL_EINPUT,
                            "error: %s:%lld: field '%s' is %s; a text row holds a string", in->name,
                            (long long)in->lineno, o->field, pl__json_type(f));
    *s = json_string_value(f);
    *n = json_string_length(f);
    return PL_OK;
}

pl_status pl_source_text_row(const pl_source_opts *o, const pl_src_in *in, const pl_buffer *to,
                             const char *s, size_t n, void *to_mem, int32_t *lens, int64_t r,
                             pl_error *err)
{
    size_t L = (size_t)to->shape[1];
    if (n > L) {
        if (!o->truncate)
            return pl_error_set(err, PL_EINPUT,
                                "error: %s:%lld: a record of %zu bytes does not fit a row of "
                                "buffer '%s' (%zu bytes); set truncate: true to keep its first "
                                "%zu bytes, or give '%s' longer rows (shape [%lld, %zu])",
                                in->name, (long long)in->lineno, n, to->name, L, L, to->name,
                                (long long)to->shape[0], n);
        /* Never half a character: back to the first byte of the one that would be cut. */
        size_t cut = L;
        while (cut > 0 && ((unsigned char)s[cut] & 0xC0) == 0x80)
            cut--;
        n = cut;
    }
    char *row = (char *)to_mem + (size_t)r * L;
    memcpy(row, s, n);
    memset(row + n, 0, L - n);
    if (lens) lens[r] = (int32_t)n;
    return PL_OK;
}

pl_status pl_source_text_count(const pl_source_opts *o, pl_src_in *in, const pl_buffer *to,
                               int64_t *records, pl_error *err)
{
    *records = 0;
    char *row = malloc((size_t)to->shape[1]);
    if (!row) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    pl_status ps = PL_OK;
    for (;;) {
        const char *s;
        size_t n;
        bool more;
        ps = pl_source_text_next(o, in, &s, &n, &more, err);
        if (ps != PL_OK || !more) break;
        ps = pl_source_text_row(o, in, to, s, n, row, NULL, 0, err);
        if (ps != PL_OK) break;
        (*records)++;
    }
    free(row);
    return ps;
}
