/* pl_str: escaping and shortening user text for messages and summaries. */
#include "pl_str.h"

#include <stdio.h>
#include <string.h>

static const char pl__mark[] = "\xe2\x80\xa6"; /* "…", U+2026 */
#define PL__MARK_LEN (sizeof pl__mark - 1)

/* Bytes of the valid UTF-8 character at s (n bytes left), 0 when it is not one (overlong forms,
 * surrogates and code points past U+10FFFF included). */
static size_t pl__utf8_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0], cp, min;
    size_t len;
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2, cp = c & 0x1f, min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3, cp = c & 0x0f, min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4, cp = c & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (n < len) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3fu);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return len;
}

/* What one character of a name needs. */
typedef enum { PL__SAFE, PL__QUOTED, PL__NAMED, PL__HEX } pl__class;

static pl__class pl__classify(const unsigned char *s, size_t n, size_t *len)
{
    unsigned c = s[0];
    *len = 1;
    if (c < 0x80) {
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            strchr("_-.,/+:=@%^~", (int)c))
            return c ? PL__SAFE : PL__HEX;
        if (c == '\n' || c == '\t' || c == '\r' || c == '\\' || c == '"') return PL__NAMED;
        if (c < 0x20 || c == 0x7f) return PL__HEX;
        return PL__QUOTED; /* space, quotes, shell specials: printable, but not bare */
    }
    size_t l = pl__utf8_len(s, n);
    if (l == 0 || (l == 2 && c == 0xc2 && s[1] < 0xa0)) return PL__HEX; /* invalid, or C1 */
    *len = l;
    return PL__SAFE;
}

bool pl_name_safe(const char *s)
{
    if (!s || !*s) return false;
    const unsigned char *u = (const unsigned char *)s;
    size_t n = strlen(s);
    for (size_t i = 0, l; i < n; i += l)
        if (pl__classify(u + i, n - i, &l) != PL__SAFE) return false;
    return true;
}

/* Appends the escaped s[a, b) to buf at *k; false when it does not fit (room for the NUL and
 * `reserve` more bytes is kept). */
static bool pl__emit(const unsigned char *s, size_t a, size_t b, char *buf, size_t cap, size_t *k,
                     size_t reserve)
{
    for (size_t i = a, l; i < b; i += l) {
        char tmp[8];
        size_t m;
        switch (pl__classify(s + i, b - i, &l)) {
        case PL__SAFE:
        case PL__QUOTED:
            memcpy(tmp, s + i, l);
            m = l;
            break;
        case PL__NAMED:
            tmp[0] = '\\';
            tmp[1] = s[i] == '\n' ? 'n' : s[i] == '\t' ? 't' : s[i] == '\r' ? 'r' : (char)s[i];
            m = 2;
            break;
        default:
            m = (size_t)snprintf(tmp, sizeof tmp, "\\x%02x", s[i]);
            break;
        }
        if (*k + m + reserve + 1 > cap) return false;
        memcpy(buf + *k, tmp, m);
        *k += m;
    }
    return true;
}

/* Where a cut that keeps `head` bytes may end, and where one that keeps `tail` may start, on
 * character boundaries. */
static size_t pl__head_end(const char *s, size_t head)
{
    while (head > 0 && ((unsigned char)s[head] & 0xc0) == 0x80)
        head--;
    return head;
}

static size_t pl__tail_start(const char *s, size_t n, size_t tail)
{
    size_t t = n - tail;
    while (t < n && ((unsigned char)s[t] & 0xc0) == 0x80)
        t++;
    return t;
}

/* One attempt at pl_name_str keeping `keep` bytes at each end (keep >= n: all of it). */
static bool pl__write(const char *s, size_t n, size_t keep, bool quote, char *buf, size_t cap)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t k = 0, q = quote ? 1 : 0;
    bool cut = n > 2 * keep + PL__MARK_LEN;
    size_t h = cut ? pl__head_end(s, keep) : n, t = cut ? pl__tail_start(s, n, keep) : n;
    if (q + q + 1 > cap) return false;
    if (quote) buf[k++] = '"';
    bool ok = pl__emit(u, 0, h, buf, cap, &k, q);
    if (ok && cut) {
        ok = k + PL__MARK_LEN + q + 1 <= cap;
        if (ok) {
            memcpy(buf + k, pl__mark, PL__MARK_LEN);
            k += PL__MARK_LEN;
        }
        ok = ok && pl__emit(u, t, n, buf, cap, &k, q);
    }
    if (!ok) return false;
    if (quote) buf[k++] = '"';
    buf[k] = '\0';
    return true;
}

const char *pl_name_str(const char *s, unsigned flags, char *buf, size_t cap)
{
    if (!cap) return buf;
    if (!s) s = "";
    size_t n = strlen(s);
    bool quote = !(flags & PL_NAME_INSIDE) && ((flags & PL_NAME_QUOTE) || !pl_name_safe(s));
    size_t keep = (flags & PL_NAME_SHORT) && n > PL_NAME_SHORT_OVER ? PL_NAME_SHORT_KEEP : n;
    /* Too long for cap: ends that fit when nothing needs escaping, then shorter ones. */
    size_t fit = cap > PL__MARK_LEN + 3 ? (cap - PL__MARK_LEN - 3) / 2 : 0;
    for (;;) {
        if (pl__write(s, n, keep, quote, buf, cap)) return buf;
        keep = keep > fit ? fit : keep * 3 / 4;
        if (keep == 0) break;
    }
    snprintf(buf, cap, "%s", cap > PL__MARK_LEN + 2 ? "\"\xe2\x80\xa6\"" : "");
    return buf;
}

size_t pl_str_cut_middle(const char *s, size_t n, size_t head, size_t tail, char *buf, size_t cap)
{
    if (!cap) return 0;
    size_t k = 0;
    if (n <= head + tail + PL__MARK_LEN || head + tail + PL__MARK_LEN + 1 > cap) {
        k = n < cap ? n : cap - 1;
        memcpy(buf, s, k);
    } else {
        size_t h = pl__head_end(s, head), t = pl__tail_start(s, n, tail);
        memcpy(buf, s, h);
        memcpy(buf + h, pl__mark, PL__MARK_LEN);
        memcpy(buf + h + PL__MARK_LEN, s + t, n - t);
        k = h + PL__MARK_LEN + (n - t);
    }
    buf[k] = '\0';
    return k;
}

const char *pl_str_count(unsigned long long v, char *buf, size_t cap)
{
    char digits[32], out[48];
    int n = snprintf(digits, sizeof digits, "%llu", v), k = 0;
    for (int i = 0; i < n; i++) {
        if (i > 0 && (n - i) % 3 == 0) out[k++] = ',';
        out[k++] = digits[i];
    }
    out[k] = '\0';
    snprintf(buf, cap, "%s", out);
    return buf;
}
