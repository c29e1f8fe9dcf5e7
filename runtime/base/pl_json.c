/* pl_json: strings from any bytes, whole-file writes and typed getters over jansson. */
#include "pl_json.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at s (at most n bytes), or 0 when it is not one: overlong
 * forms, surrogates and code points past U+10FFFF are invalid, as jansson (and RFC 3629) say. */
static size_t pl__utf8_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t len;
    uint32_t cp;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF)
        len = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF)
        len = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4)
        len = 4, cp = c & 0x07;
    else
        return 0;
    if (n < len) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF))) return 0;
    if (cp >= 0xD800 && cp <= 0xDFFF) return 0;
    return len;
}

json_t *pl_json_strn(const char *s, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t bad = 0;
    for (size_t i = 0; i < len;) {
        size_t l = pl__utf8_len(u + i, len - i);
        if (l == 0) bad++, l = 1;
        i += l;
    }
    if (bad == 0) return json_stringn_nocheck(s, len);
    /* U+FFFD is 3 bytes in UTF-8: each bad byte grows by 2. */
    char *fixed = malloc(len + 2 * bad + 1);
    if (!fixed) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        size_t l = pl__utf8_len(u + i, len - i);
        if (l == 0) {
            memcpy(fixed + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
            continue;
        }
        memcpy(fixed + o, s + i, l);
        o += l;
        i += l;
    }
    json_t *v = json_stringn_nocheck(fixed, o);
    free(fixed);
    return v;
}

json_t *pl_json_str(const char *s)
{
    return s ? pl_json_strn(s, strlen(s)) : json_null();
}

json_t *pl_json_hex64(uint64_t v)
{
    char buf[24];
    snprintf(buf, sizeof buf, "0x%016" PRIx64, v);
    return json_string(buf);
}

bool pl_json_parse_hex64(const char *s, uint64_t *out)
{
    if (!s || s[0] != '0' || (s[1] != 'x' && s[1] != 'X')) return false;
    uint64_t v = 0;
    size_t n = 0;
    for (const char *p = s + 2; *p; p++, n++) {
        int d;
        if (*p >= '0' && *p <= '9')
            d = *p - '0';
        else if (*p >= 'a' && *p <= 'f')
            d = *p - 'a' + 10;
        else if (*p >= 'A' && *p <= 'F')
            d = *p - 'A' + 10;
        else
            return false;
        if (n == 16) return false;
        v = v << 4 | (uint64_t)d;
    }
    if (n == 0) return false;
    *out = v;
    return true;
}

pl_status pl_json_set(json_t *obj, const char *key, json_t *v, pl_error *err)
{
    if (!v || json_object_set_new(obj, key, v) != 0)
        return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    return PL_OK;
}

pl_status pl_json_append(json_t *arr, json_t *v, pl_error *err)
{
    if (!v || json_array_append_new(arr, v) != 0)
        return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    return PL_OK;
}

pl_status pl_json_write_file(const char *path, const json_t *v, pl_error *err)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.partial", path) >= (int)sizeof tmp)
        return pl_error_set(err, PL_EIO, "error: path too long: %s", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return pl_error_set(err, PL_EIO, "error: cannot write %s: %s", path, strerror(errno));
    int rc = json_dumpf(v, f, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    if (rc == 0 && fputc('\n', f) == EOF) rc = -1;
    if (fclose(f) != 0) rc = -1;
    if (rc != 0 || rename(tmp, path) != 0) {
        int e = errno;
        remove(tmp);
        return pl_error_set(err, PL_EIO, "error: cannot write %s: %s", path, strerror(e));
    }
    return PL_OK;
}

pl_status pl_json_read_file(const char *path, const char *what, json_t **out, pl_error *err)
{
    *out = NULL;
    FILE *f = fopen(path, "r");
    if (!f) return pl_error_set(err, PL_EIO, "error: cannot read %s: %s", path, strerror(errno));
    json_error_t je;
    json_t *v = json_loadf(f, JSON_REJECT_DUPLICATES, &je);
    fclose(f);
    if (!v)
        return pl_error_set(err, PL_EINPUT, "%s:%d:%d: error: %s%snot valid JSON: %s", path,
                            je.line, je.column, what ? what : "", what ? ": " : "", je.text);
    *out = v;
    return PL_OK;
}

static pl_status pl__get(const json_t *obj, const char *key, const char *what, json_type t,
                         const char *tname, json_t **out, pl_error *err)
{
    json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
    if (!v)
        return pl_error_set(err, PL_EINPUT, "error: %s: '%s' is missing (expected %s)", what, key,
                            tname);
    bool ok = json_typeof(v) == t || (t == JSON_REAL && json_is_integer(v));
    if (!ok) return pl_error_set(err, PL_EINPUT, "error: %s: '%s' must be %s", what, key, tname);
    *out = v;
    return PL_OK;
}

pl_status pl_json_get_str(const json_t *obj, const char *key, const char *what, const char **out,
                          pl_error *err)
{
    json_t *v = NULL;
    PL_CHECK(pl__get(obj, key, what, JSON_STRING, "a string", &v, err));
    *out = json_string_value(v);
    return PL_OK;
}

pl_status pl_json_get_int(const json_t *obj, const char *key, const char *what, int64_t *out,
                          pl_error *err)
{
    json_t *v = NULL;
    PL_CHECK(pl__get(obj, key, what, JSON_INTEGER, "an integer", &v, err));
    *out = (int64_t)json_integer_value(v);
    return PL_OK;
}

pl_status pl_json_get_num(const json_t *obj, const char *key, const char *what, double *out,
                          pl_error *err)
{
    json_t *v = NULL;
    PL_CHECK(pl__get(obj, key, what, JSON_REAL, "a number", &v, err));
    *out = json_number_value(v);
    return PL_OK;
}

pl_status pl_json_get_obj(const json_t *obj, const char *key, const char *what, json_t **out,
                          pl_error *err)
{
    return pl__get(obj, key, what, JSON_OBJECT, "an object", out, err);
}

pl_status pl_json_get_arr(const json_t *obj, const char *key, const char *what, json_t **out,
                          pl_error *err)
{
    return pl__get(obj, key, what, JSON_ARRAY, "an array", out, err);
}

const char *pl_json_str_or(const json_t *obj, const char *key, const char *def)
{
    json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
    return json_is_string(v) ? json_string_value(v) : def;
}

/* ---- --json outputs ---- */

int pl_json_print(FILE *out, const json_t *v)
{
    /* indent 0 without JSON_COMPACT: one line with ", " and ": ", as the summary always was */
    int rc = v ? json_dumpf(v, out, JSON_PRESERVE_ORDER | JSON_ENCODE_ANY) : -1;
    if (rc == 0 && fputc('\n', out) == EOF) rc = -1;
    if (fflush(out) != 0) rc = -1;
    return rc;
}

/* The suggestion a message makes, if it makes one in the words the checks use ("did you mean
 * 'x'?"); NULL otherwise. The whole advice stays in "message" either way. */
static json_t *pl__hint(const char *msg)
{
    const char *p = strstr(msg, "did you mean ");
    if (!p) return json_null();
    const char *q = strchr(p, '?');
    if (!q) return json_null();
    return pl_json_strn(p, (size_t)(q - p + 1));
}

json_t *pl_json_diag(const pl_error *e, const char *severity)
{
    json_t *d = json_object();
    if (!d) return NULL;
    bool pos = e->line > 0;
    int bad = 0;
    bad |= json_object_set_new(d, "severity", json_string(severity));
    bad |= json_object_set_new(d, "file", e->file[0] ? pl_json_str(e->file) : json_null());
    bad |= json_object_set_new(d, "line", pos ? json_integer(e->line) : json_null());
    bad |= json_object_set_new(d, "column", pos && e->col > 0 ? json_integer(e->col) : json_null());
    bad |= json_object_set_new(d, "stage", e->stage[0] ? pl_json_str(e->stage) : json_null());
    bad |= json_object_set_new(d, "batch", e->batch >= 0 ? json_integer(e->batch) : json_null());
    bad |= json_object_set_new(d, "status", json_string(pl_status_name(e->status)));
    bad |= json_object_set_new(d, "message", pl_json_str(e->msg));
    bad |= json_object_set_new(d, "hint", pl__hint(e->msg));
    if (bad) {
        json_decref(d);
        return NULL;
    }
    return d;
}

json_t *pl_json_error_obj(const char *command, const pl_error *e)
{
    json_t *o = json_object(), *diags = json_array();
    if (!o || !diags) goto oom;
    int bad = 0;
    bad |= json_object_set_new(o, "schema_version", json_integer(PL_JSON_SCHEMA_VERSION));
    bad |= json_object_set_new(o, "command", pl_json_str(command));
    bad |= json_object_set_new(o, "status", json_string(pl_status_name(e->status)));
    bad |= json_object_set_new(o, "exit_code", json_integer(pl_status_exit_code(e->status)));
    bad |= json_object_set_new(o, "error", pl_json_str(e->msg));
    bad |= json_array_append_new(diags, pl_json_diag(e, "error"));
    bad |= json_object_set(o, "diagnostics", diags);
    json_decref(diags);
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
oom:
    json_decref(o);
    json_decref(diags);
    return NULL;
}

int pl_json_print_error(FILE *out, const char *command, const pl_error *e)
{
    json_t *o = pl_json_error_obj(command, e);
    if (o)
        pl_json_print(out, o);
    else
        fputs("{\"schema_version\": 1, \"status\": \"ENOMEM\", \"exit_code\": 1}\n", out);
    json_decref(o);
    return pl_status_exit_code(e->status);
}
