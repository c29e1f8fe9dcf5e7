/* pl_npy: reading .npy headers and writing fixed-length v1.0 headers. */
#include "pl_npy.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

const char *pl_npy_descr(pl_dtype t)
{
    switch (t) {
    case PL_U8:
        return "|u1";
    case PL_I32:
        return "<i4";
    case PL_I64:
        return "<i8";
    case PL_F16:
        return "<f2";
    case PL_BF16:
        return "<u2";
    case PL_F32:
        return "<f4";
    case PL_F64:
        return "<f8";
    case PL_DTYPE_COUNT:
        break;
    }
    return "?";
}

bool pl_npy_descr_matches(const char *descr, pl_dtype t)
{
    if (strcmp(descr, pl_npy_descr(t)) == 0) return true;
    if (t == PL_U8 && (strcmp(descr, "<u1") == 0 || strcmp(descr, "u1") == 0)) return true;
    if (t == PL_BF16 && strcmp(descr, "<V2") == 0) return true;
    return false;
}

bool pl_npy_descr_dtype(const char *descr, pl_dtype *out)
{
    for (int t = 0; t < PL_DTYPE_COUNT; t++)
        if (pl_npy_descr_matches(descr, (pl_dtype)t)) {
            *out = (pl_dtype)t;
            return true;
        }
    return false;
}

static size_t pl__descr_size(const char *d)
{
    size_t n = strlen(d);
    if (n < 2) return 0;
    char c = d[n - 1];
    return isdigit((unsigned char)c) ? (size_t)(c - '0') : 0;
}

/* Finds `'key':` in the header dict and returns a pointer just past the colon, or NULL. */
static const char *pl__find_key(const char *h, const char *key)
{
    char pat[32];
    snprintf(pat, sizeof pat, "'%s'", key);
    const char *p = strstr(h, pat);
    if (!p) {
        snprintf(pat, sizeof pat, "\"%s\"", key);
        p = strstr(h, pat);
    }
    if (!p) return NULL;
    p = strchr(p + strlen(pat), ':');
    if (!p) return NULL;
    p++;
    while (*p == ' ')
        p++;
    return p;
}

pl_status pl_npy_read_header(FILE *f, const char *path, pl_npy_info *out, pl_error *err)
{
    memset(out, 0, sizeof *out);
    unsigned char pre[12];
    if (fseek(f, 0, SEEK_SET) != 0 || fread(pre, 1, 10, f) != 10 ||
        memcmp(pre, "\x93NUMPY", 6) != 0)
        return pl_error_set(err, PL_EINPUT,
                            "error: '%s' is not a .npy file (no \\x93NUMPY magic); write it with "
                            "numpy.save, or give the file a different extension to read raw bytes",
                            path);
    uint64_t hlen, pre_len;
    if (pre[6] == 1) {
        hlen = (uint64_t)pre[8] | (uint64_t)pre[9] << 8;
        pre_len = 10;
    } else if (pre[6] == 2 || pre[6] == 3) {
        if (fread(pre + 10, 1, 2, f) != 2)
            return pl_error_set(err, PL_EINPUT, "error: '%s': truncated .npy header", path);
        hlen = (uint64_t)pre[8] | (uint64_t)pre[9] << 8 | (uint64_t)pre[10] << 16 |
               (uint64_t)pre[11] << 24;
        pre_len = 12;
    } else {
        return pl_error_set(err, PL_EINPUT, "error: '%s': unsupported .npy version %d.%d", path,
                            pre[6], pre[7]);
    }
    if (hlen > 1 << 20)
        return pl_error_set(err, PL_EINPUT, "error: '%s': .npy header of %llu bytes is too long",
                            path, (unsigned long long)hlen);
    char *h = malloc(hlen + 1);
    if (!h) return pl_error_set(err, PL_ENOMEM, "error: out of memory reading '%s'", path);
    pl_status st = PL_OK;
    if (fread(h, 1, hlen, f) != hlen) {
        st = pl_error_set(err, PL_EINPUT, "error: '%s': truncated .npy header", path);
        goto done;
    }
    h[hlen] = '\0';
    const char *d = pl__find_key(h, "descr");
    const char *fo = pl__find_key(h, "fortran_order");
    const char *sh = pl__find_key(h, "shape");
    if (!d || (*d != '\'' && *d != '"') || !fo || !sh || *sh != '(') {
        st = pl_error_set(err, PL_EINPUT,
                          "error: '%s': cannot parse the .npy header (need descr, fortran_order "
                          "and shape): %s",
                          path, h);
        goto done;
    }
    char q = *d++;
    size_t n = 0;
    while (d[n] && d[n] != q && n + 1 < sizeof out->descr)
        n++;
    memcpy(out->descr, d, n);
    out->descr[n] = '\0';
    out->fortran_order = strncmp(fo, "True", 4) == 0;
    const char *p = sh + 1;
    uint64_t count = 1;
    for (;;) {
        while (*p == ' ' || *p == ',')
            p++;
        if (*p == ')') break;
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p || v < 0 || out->rank >= PL_MAX_RANK + 1) {
            st = pl_error_set(err, PL_EINPUT, "error: '%s': bad shape in the .npy header: %s", path,
                              h);
            goto done;
        }
        out->shape[out->rank++] = v;
        if (v && count > UINT64_MAX / (uint64_t)v)
            count = UINT64_MAX;
        else
            count *= (uint64_t)v;
        p = end;
    }
    size_t isz = pl__descr_size(out->descr);
    /* A shape whose bytes overflow would wrap the size checks of every reader (a (2^62-1,) f32
     * header passed them and failed at batch 10240): refuse it here. */
    if (isz && count > (uint64_t)INT64_MAX / isz) {
        char shape[160];
        pl_npy_shape_str(out->rank, out->shape, shape, sizeof shape);
        st = pl_error_set(err, PL_EINPUT,
                          "error: '%s': the .npy header's shape %s of '%s' is more than 2^63 "
                          "bytes; the header is corrupt: write the file again with numpy.save",
                          path, shape, out->descr);
        goto done;
    }
    out->data_bytes = isz ? count * isz : 0;
    out->data_offset = pre_len + hlen;
done:
    free(h);
    return st;
}

pl_status pl_npy_error_at(pl_error *err, pl_pos pos, const char *what, const char *name)
{
    if (!err) return PL_EINPUT;
    char m[PL_ERROR_MSG_MAX];
    snprintf(m, sizeof m, "%s", err->msg);
    const char *body = strncmp(m, "error: ", 7) == 0 ? m + 7 : m;
    return pl_error_at(err, err->status, pos, "%s '%s': %.1900s", what, name, body);
}

void pl_npy_shape_str(int rank, const int64_t *shape, char *out, size_t cap)
{
    size_t k = 0;
    int n = snprintf(out, cap, "(");
    k = n > 0 ? (size_t)n : 0;
    for (int i = 0; i < rank && k < cap; i++) {
        n = snprintf(out + k, cap - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
        k += n > 0 ? (size_t)n : 0;
    }
    if (k < cap) snprintf(out + k, cap - k, rank == 1 ? ",)" : ")");
}

size_t pl_npy_format_header(char *buf, size_t cap, pl_dtype t, int64_t first, int rank_rest,
                            const int64_t *rest)
{
    char dict[200], shape[160];
    int n = snprintf(shape, sizeof shape, "%lld,", (long long)first);
    for (int i = 0; i < rank_rest && n > 0 && (size_t)n < sizeof shape; i++)
        n += snprintf(shape + n, sizeof shape - (size_t)n, " %lld,", (long long)rest[i]);
    if (rank_rest > 0 && n > 0) shape[n - 1] = '\0'; /* (a, b) but (a,) for rank 1 */
    int dn = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }",
                      pl_npy_descr(t), shape);
    if (dn < 0 || (size_t)dn >= sizeof dict) return 0;
    /* Room for the first dimension to grow to 19 digits, then pad to a multiple of 64. */
    size_t first_digits = (size_t)snprintf(NULL, 0, "%lld", (long long)first);
    size_t need = 10 + (size_t)dn + (19 - first_digits) + 1;
    size_t total = (need + 63) / 64 * 64;
    if (total > cap || total - 10 > 65535) return 0;
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    size_t hlen = total - 10;
    buf[8] = (char)(hlen & 0xff);
    buf[9] = (char)(hlen >> 8);
    memcpy(buf + 10, dict, (size_t)dn);
    memset(buf + 10 + dn, ' ', total - 10 - (size_t)dn - 1);
    buf[total - 1] = '\n';
    return total;
}
