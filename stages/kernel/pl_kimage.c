/* pl_kimage: what a compiled kernel image says about its kernels, read without a GPU: the .entry
 * names and parameter lists of PTX text, and the parameter records of a cubin (ELF). */
#include "pl_kimage.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool pl_kimage_ptx_entries(const char *ptx, const char *fn, char *out, size_t cap)
{
    bool found = false;
    size_t n = 0;
    out[0] = '\0';
    for (const char *q = strstr(ptx, ".entry"); q; q = strstr(q + 6, ".entry")) {
        const char *s = q + 6;
        if (*s != ' ' && *s != '\t') continue;
        while (*s == ' ' || *s == '\t')
            s++;
        size_t len = strcspn(s, "( \t\n");
        if (strlen(fn) == len && strncmp(s, fn, len) == 0) found = true;
        if (n < cap) n += (size_t)snprintf(out + n, cap - n, "%s%.*s", n ? ", " : "", (int)len, s);
    }
    return found;
}

/* The parameter sizes of PTX kernel `fn` (".param .u64 a", ".param .align 8 .b8 s[16]"): *n of
 * them into sizes; false when the entry is not found or a parameter is not understood. */
bool pl_kimage_ptx_params(const char *ptx, const char *fn, size_t *sizes, int cap, int *n)
{
    *n = 0;
    size_t fl = strlen(fn);
    for (const char *q = strstr(ptx, ".entry"); q; q = strstr(q + 6, ".entry")) {
        const char *s = q + 6;
        while (*s == ' ' || *s == '\t')
            s++;
        if (strncmp(s, fn, fl) != 0 || (s[fl] != '(' && !isspace((unsigned char)s[fl]))) continue;
        const char *p = strchr(s, '(');
        const char *end = p ? strchr(p, ')') : NULL;
        if (!p || !end) return false;
        for (const char *a = strstr(p, ".param"); a && a < end; a = strstr(a + 6, ".param")) {
            const char *t = a + 6;
            size_t size = 0;
            while (*t && t < end && *t != ',' && *t != '\n') {
                while (*t == ' ' || *t == '\t')
                    t++;
                if (*t == '.' && isalpha((unsigned char)t[1]) && strncmp(t, ".align", 6) != 0 &&
                    strncmp(t, ".ptr", 4) != 0) {
                    int bits = atoi(t + 2);
                    if (bits == 8 || bits == 16 || bits == 32 || bits == 64)
                        size = (size_t)bits / 8;
                }
                /* An array parameter (a struct passed by value): name[bytes]. */
                const char *tok = t;
                while (*t && t < end && *t != ' ' && *t != '\t' && *t != ',' && *t != '\n')
                    t++;
                const char *br = memchr(tok, '[', (size_t)(t - tok));
                if (br) size *= (size_t)strtoull(br + 1, NULL, 10);
                while (*t && t < end && *t != ',' && *t != '\n' && (*t == ' ' || *t == '\t'))
                    t++;
            }
            if (!size || *n >= cap) return false;
            sizes[(*n)++] = size;
        }
        return true;
    }
    return false;
}

/* The parameter sizes of kernel `symbol` in a cubin (ELF): the EIATTR_KPARAM_INFO records of its
 * .nv.info.<symbol> section (format 0x04, attribute 0x17, 12 bytes: index u32, ordinal u16,
 * offset u16, flags u32 with the size in bits 18-31). false when anything is not as expected: the
 * check then waits for the device (cuFuncGetParamInfo). */
bool pl_kimage_cubin_params(const void *image, size_t size, const char *symbol, size_t *sizes,
                            int cap, int *n)
{
    const unsigned char *b = image;
    *n = 0;
    if (size < 64 || memcmp(b, "\177ELF", 4) != 0 || b[4] != 2 || b[5] != 1) return false;
    uint64_t shoff;
    uint16_t shentsize, shnum, shstrndx;
    memcpy(&shoff, b + 0x28, 8);
    memcpy(&shentsize, b + 0x3a, 2);
    memcpy(&shnum, b + 0x3c, 2);
    memcpy(&shstrndx, b + 0x3e, 2);
    if (shentsize < 64 || shstrndx >= shnum || shoff > size ||
        (uint64_t)shnum * shentsize > size - shoff)
        return false;
    uint64_t stroff, strsize;
    memcpy(&stroff, b + shoff + (uint64_t)shstrndx * shentsize + 0x18, 8);
    memcpy(&strsize, b + shoff + (uint64_t)shstrndx * shentsize + 0x20, 8);
    if (stroff > size || strsize > size - stroff) return false;
    char want[600];
    snprintf(want, sizeof want, ".nv.info.%s", symbol);
    for (uint16_t i = 0; i < shnum; i++) {
        const unsigned char *sh = b + shoff + (uint64_t)i * shentsize;
        uint32_t name;
        uint64_t off, len;
        memcpy(&name, sh, 4);
        memcpy(&off, sh + 0x18, 8);
        memcpy(&len, sh + 0x20, 8);
        if (name >= strsize || off > size || len > size - off) continue;
        const char *sn = (const char *)b + stroff + name;
        if (strnlen(sn, strsize - name) == strsize - name || strcmp(sn, want) != 0) continue;
        int count = 0;
        for (uint64_t p = 0; p + 4 <= len;) {
            unsigned fmt = b[off + p], attr = b[off + p + 1];
            uint16_t v;
            memcpy(&v, b + off + p + 2, 2);
            if (fmt == 0x04) {
                if (p + 4 + v > len) return false;
                if (attr == 0x17 && v >= 12) {
                    uint16_t ord;
                    uint32_t flags;
                    memcpy(&ord, b + off + p + 8, 2);
                    memcpy(&flags, b + off + p + 12, 4);
                    if (ord >= cap) return false;
                    sizes[ord] = (flags >> 18) & 0x3fff;
                    if (ord + 1 > count) count = ord + 1;
                }
                p += 4 + v;
            } else if (fmt == 0x01 || fmt == 0x02 || fmt == 0x03) {
                p += 4;
            } else {
                return false;
            }
        }
        for (int k = 0; k < count; k++)
            if (!sizes[k]) return false; /* an ordinal without a record */
        *n = count;
        return true;
    }
    return false;
}
