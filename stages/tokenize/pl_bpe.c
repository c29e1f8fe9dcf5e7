/* pl_bpe: the encoder (UTF-8 repair, added tokens, GPT-2's pre-tokenizer as a scanner, the BPE
 * merges with per-thread word caches, the batch API on the run's pool) and the decoder. The
 * rules it follows are pl_bpe.h's; the tables come from pl_bpe_load.c. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "pl_bpe_int.h"
#include "pl_hash.h"
#include "pl_intr.h"
#include "pl_pool.h"

/* ---- character classes of the pre-tokenizer ---- */

enum { PL__L, PL__N, PL__O, PL__S }; /* letter, number, other, whitespace */

/* Classes of the code points below this, class + 1 once asked (0: not yet), so a run pays for
 * the characters it meets only; the rest (planes 3 to 16, rarely seen) ask utf8proc each time.
 * Relaxed atomics: threads that race store the same value. */
#define PL__CLS_TABLE 0x30000
static _Atomic uint8_t pl__cls_table[PL__CLS_TABLE];

static int pl__classify(uint32_t cp)
{
    switch (utf8proc_category((utf8proc_int32_t)cp)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
        return PL__L;
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
        return PL__N;
    case UTF8PROC_CATEGORY_ZS:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
        return PL__S;
    default:
        /* White_Space beyond the separators: TAB, LF, VT, FF, CR and NEL (all Cc) */
        return (cp >= 0x09 && cp <= 0x0D) || cp == 0x85 ? PL__S : PL__O;
    }
}

static inline int pl__cls(uint32_t cp)
{
    if (cp >= PL__CLS_TABLE) return pl__classify(cp);
    int c = atomic_load_explicit(&pl__cls_table[cp], memory_order_relaxed);
    if (c) return c - 1;
    c = pl__classify(cp);
    atomic_store_explicit(&pl__cls_table[cp], (uint8_t)(c + 1), memory_order_relaxed);
    return c;
}

/* The class of the code point at s[i] (valid UTF-8); *len gets its bytes. */
static inline int pl__cls_at(const uint8_t *s, size_t i, int *len)
{
    uint32_t c = s[i];
    if (c < 0x80) {
        *len = 1;
        return pl__cls(c);
    }
    uint32_t cp;
    if (c < 0xE0) {
        *len = 2;
        cp = ((c & 0x1F) << 6) | (s[i + 1] & 0x3Fu);
    } else if (c < 0xF0) {
        *len = 3;
        cp = ((c & 0x0F) << 12) | ((s[i + 1] & 0x3Fu) << 6) | (s[i + 2] & 0x3Fu);
    } else {
        *len = 4;
        cp = ((c & 0x07) << 18) | ((s[i + 1] & 0x3Fu) << 12) | ((s[i + 2] & 0x3Fu) << 6) |
             (s[i + 3] & 0x3Fu);
    }
    return pl__cls(cp);
}

/* The end of the piece that starts at s[i] (i < n): the alternatives of GPT-2's pattern in
 * their order, first match wins. */
static size_t pl__piece_end(const uint8_t *s, size_t i, size_t n)
{
    int len, cls;
    if (s[i] == '\'' && i + 1 < n) {
        uint8_t a = s[i + 1];
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
        if (i + 2 < n) {
            uint8_t c = s[i + 2];
            if ((a == 'r' && c == 'e') || (a == 'v' && c == 'e') || (a == 'l' && c == 'l'))
                return i + 3;
        }
    }
    size_t k = i;
    if (s[i] == ' ' && i + 1 < n && (cls = pl__cls_at(s, i + 1, &len)) != PL__S) {
        k = i + 1; /* " ?" then a run of letters, numbers or others */
    } else {
        cls = pl__cls_at(s, i, &len);
    }
    if (cls != PL__S) {
        k += (size_t)len;
        while (k < n && pl__cls_at(s, k, &len) == cls)
            k += (size_t)len;
        return k;
    }
    /* \s+(?!\S) then \s+: a run that ends the text is whole; one followed by a non-space leaves
     * its last code point to the next piece, unless the run is that code point alone */
    size_t last = i;
    k = i + (size_t)len;
    while (k < n && pl__cls_at(s, k, &len) == PL__S) {
        last = k;
        k += (size_t)len;
    }
    if (k == n || last == i) return k;
    return last;
}

/* ---- UTF-8 ---- */

/* The length (1..4) of the valid sequence at s[i], or 0 when it is invalid: then *sub gets the
 * length of its maximal subpart (the bytes one U+FFFD replaces), at least 1. */
static int pl__utf8_seq(const uint8_t *s, size_t i, size_t n, int *sub)
{
    uint8_t c = s[i], lo = 0x80, hi = 0xBF;
    int need;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF)
        need = 1;
    else if (c == 0xE0)
        need = 2, lo = 0xA0;
    else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF)
        need = 2;
    else if (c == 0xED)
        need = 2, hi = 0x9F;
    else if (c == 0xF0)
        need = 3, lo = 0x90;
    else if (c >= 0xF1 && c <= 0xF3)
        need = 3;
    else if (c == 0xF4)
        need = 3, hi = 0x8F;
    else {
        *sub = 1;
        return 0;
    }
    for (int k = 1; k <= need; k++) {
        if (i + (size_t)k >= n || s[i + k] < lo || s[i + k] > hi) {
            *sub = k;
            return 0;
        }
        lo = 0x80;
        hi = 0xBF;
    }
    return need + 1;
}

size_t pl_bpe_utf8_valid(const char *text, size_t len)
{
    const uint8_t *s = (const uint8_t *)text;
    size_t i = 0;
    while (i < len) {
        if (i + 8 <= len) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (!(w & UINT64_C(0x8080808080808080))) {
                i += 8;
                continue;
            }
        }
        int sub, l = pl__utf8_seq(s, i, len, &sub);
        if (!l) return i;
        i += (size_t)l;
    }
    return len;
}

static pl_status pl__text_reserve(pl_bpe_text *t, int64_t more, pl_error *err)
{
    if (t->n + more <= t->cap) return PL_OK;
    int64_t cap = t->cap ? t->cap : 64;
    while (cap < t->n + more)
        cap *= 2;
    char *v = realloc(t->v, (size_t)cap);
    if (!v)
        return pl_error_set(err, PL_ENOMEM, "error: out of memory (%lld bytes of text)",
                            (long long)cap);
    t->v = v;
    t->cap = cap;
    return PL_OK;
}

pl_status pl_bpe_utf8_replace(const char *text, size_t len, pl_bpe_text *out, pl_error *err)
{
    /* each replaced byte grows to at most 3 */
    PL_CHECK(pl__text_reserve(out, (int64_t)len * 3 + 1, err));
    const uint8_t *s = (const uint8_t *)text;
    size_t i = 0;
    while (i < len) {
        size_t ok = pl_bpe_utf8_valid(text + i, len - i);
        memcpy(out->v + out->n, s + i, ok);
        out->n += (int64_t)ok;
        i += ok;
        if (i == len) break;
        int sub = 1; /* set by the call: the byte at i starts no valid sequence */
        pl__utf8_seq(s, i, len, &sub);
        memcpy(out->v + out->n, "\xEF\xBF\xBD", 3);
        out->n += 3;
        i += (size_t)sub;
    }
    return PL_OK;
}

void pl_bpe_text_free(pl_bpe_text *t)
{
    if (!t) return;
    free(t->v);
    t->v = NULL;
    t->n = t->cap = 0;
}

void pl_bpe_ids_free(pl_bpe_ids *ids)
{
    if (!ids) return;
    free(ids->v);
    ids->v = NULL;
    ids->n = ids->cap = 0;
}

static pl_status pl__ids_reserve(pl_bpe_ids *ids, int64_t more, pl_error *err)
{
    if (ids->n + more <= ids->cap) return PL_OK;
    int64_t cap = ids->cap ? ids->cap : 64;
    while (cap < ids->n + more)
        cap *= 2;
    int32_t *v = realloc(ids->v, (size_t)cap * sizeof *v);
    if (!v) return pl_error_set(err, PL_ENOMEM, "error: out of memory (%lld ids)", (long long)cap);
    ids->v = v;
    ids->cap = cap;
    return PL_OK;
}

/* ---- word caches and merge scratch, one per encoding thread ---- */

/* A direct-mapped cache of words' ids: a word of up to PL__KEY_MAX bytes whose ids number at
 * most PL__IDS_MAX (nearly every English word) is merged once per thread. 64 bytes an entry,
 * 256 KiB a cache: it stays in L2, where 2 MiB of entries measured no faster on the development
 * machine (bench_tokenize: CPU time 42-50 MB/s either way). */
#define PL__CACHE_SLOTS (1u << 12)
#define PL__KEY_MAX 26
#define PL__IDS_MAX 8
typedef struct pl__centry {
    uint32_t tag; /* the hash's high half */
    uint8_t len;  /* 0: empty */
    uint8_t n;
    char key[PL__KEY_MAX];
    int32_t ids[PL__IDS_MAX];
} pl__centry;

struct pl__bpe_cache {
    pl__centry *e;
    /* merge scratch for words of up to `cap` bytes */
    size_t cap, heap_cap;
    uint32_t *rk;
    int32_t *nw, *prev, *next;
    uint64_t *heap;
    size_t *added_at;  /* [n_added]: next occurrence of each added token */
    pl_bpe_text fixed; /* the text with invalid UTF-8 replaced */
    pl_bpe_text seg;   /* a segment with its prefix space (add_prefix_space) */
};

static void pl__cache_free(pl__bpe_cache *c)
{
    if (!c) return;
    free(c->e);
    free(c->rk);
    free(c->nw);
    free(c->prev);
    free(c->next);
    free(c->heap);
    free(c->added_at);
    pl_bpe_text_free(&c->fixed);
    pl_bpe_text_free(&c->seg);
    free(c);
}

static pl__bpe_cache *pl__cache_take(const pl_bpe *cb)
{
    pl_bpe *b = (pl_bpe *)cb; /* the free list is the one mutable part, under its mutex */
    pthread_mutex_lock(&b->mu);
    pl__bpe_cache *c = b->n_free ? b->free_caches[--b->n_free] : NULL;
    pthread_mutex_unlock(&b->mu);
    if (c) return c;
    c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->e = calloc(PL__CACHE_SLOTS, sizeof *c->e);
    c->added_at = calloc((size_t)b->n_added + 1, sizeof *c->added_at);
    if (!c->e || !c->added_at) {
        pl__cache_free(c);
        return NULL;
    }
    return c;
}

static void pl__cache_give(const pl_bpe *cb, pl__bpe_cache *c)
{
    pl_bpe *b = (pl_bpe *)cb;
    if (!c) return;
    pthread_mutex_lock(&b->mu);
    if (b->n_free == b->cap_free) {
        int cap = b->cap_free ? 2 * b->cap_free : 8;
        pl__bpe_cache **v = realloc(b->free_caches, (size_t)cap * sizeof *v);
        if (v) {
            b->free_caches = v;
            b->cap_free = cap;
        }
    }
    if (b->n_free < b->cap_free) {
        b->free_caches[b->n_free++] = c;
        c = NULL;
    }
    pthread_mutex_unlock(&b->mu);
    pl__cache_free(c);
}

static pl_status pl__scratch(pl__bpe_cache *c, size_t n, bool heap, pl_error *err)
{
    if (n > c->cap) {
        size_t cap = c->cap ? c->cap : 64;
        while (cap < n)
            cap *= 2;
        uint32_t *rk = realloc(c->rk, cap * sizeof *rk);
        if (rk) c->rk = rk;
        int32_t *nw = rk ? realloc(c->nw, cap * sizeof *nw) : NULL;
        if (nw) c->nw = nw;
        int32_t *pv = nw ? realloc(c->prev, cap * sizeof *pv) : NULL;
        if (pv) c->prev = pv;
        int32_t *nx = pv ? realloc(c->next, cap * sizeof *nx) : NULL;
        if (!nx) return pl_error_set(err, PL_ENOMEM, "error: out of memory (a %zu-byte word)", n);
        c->next = nx;
        c->cap = cap;
    }
    if (heap && 2 * n > c->heap_cap) {
        uint64_t *h = realloc(c->heap, 2 * c->cap * sizeof *h);
        if (!h) return pl_error_set(err, PL_ENOMEM, "error: out of memory (a %zu-byte word)", n);
        c->heap = h;
        c->heap_cap = 2 * c->cap;
    }
    return PL_OK;
}

/* ---- merges ---- */

/* The rank of merging (l, r), UINT32_MAX when no merge has it; *id gets the merged token. */
static inline uint32_t pl__rank(const pl_bpe *b, int32_t l, int32_t r, int32_t *id)
{
    uint64_t key = (uint64_t)(uint32_t)l << 32 | (uint32_t)r;
    for (uint64_t i = pl__bpe_slot(key) & b->mmask;; i = (i + 1) & b->mmask) {
        const pl__bpe_merge *m = &b->merges[i];
        if (m->key == key) {
            *id = m->id;
            return m->rank;
        }
        if (m->key == PL__BPE_EMPTY) return UINT32_MAX;
    }
}

/* Short words: the lowest-ranked adjacent pair, leftmost among equals, merged until none is
 * left; sym (the caller's output, n slots) holds the symbols. Returns their count. */
static int64_t pl__merge_linear(const pl_bpe *b, pl__bpe_cache *c, const uint8_t *s, int64_t n,
                                int32_t *sym)
{
    uint32_t *rk = c->rk;
    int32_t *nw = c->nw;
    for (int64_t i = 0; i < n; i++)
        sym[i] = b->byte_id[s[i]];
    for (int64_t i = 0; i + 1 < n; i++)
        rk[i] = pl__rank(b, sym[i], sym[i + 1], &nw[i]);
    int64_t m = n;
    while (m > 1) {
        int64_t best = 0;
        for (int64_t i = 1; i + 1 < m; i++)
            if (rk[i] < rk[best]) best = i;
        if (rk[best] == UINT32_MAX) break;
        sym[best] = nw[best];
        int64_t tail = m - best - 2; /* symbols after the merged pair */
        memmove(sym + best + 1, sym + best + 2, (size_t)tail * sizeof *sym);
        if (tail > 1) {
            memmove(rk + best + 1, rk + best + 2, (size_t)(tail - 1) * sizeof *rk);
            memmove(nw + best + 1, nw + best + 2, (size_t)(tail - 1) * sizeof *nw);
        }
        m--;
        if (best > 0) rk[best - 1] = pl__rank(b, sym[best - 1], sym[best], &nw[best - 1]);
        if (best + 1 < m) rk[best] = pl__rank(b, sym[best], sym[best + 1], &nw[best]);
    }
    return m;
}

/* A binary min-heap of (rank << 32 | position): lowest rank first, then leftmost. */
static inline void pl__heap_push(uint64_t *h, size_t *n, uint64_t v)
{
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (h[p] <= v) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = v;
}

static inline uint64_t pl__heap_pop(uint64_t *h, size_t *n)
{
    uint64_t top = h[0], v = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1;
        if (l >= *n) break;
        if (l + 1 < *n && h[l + 1] < h[l]) l++;
        if (v <= h[l]) break;
        h[i] = h[l];
        i = l;
    }
    if (*n) h[i] = v;
    return top;
}

/* Long words: the same merges in O(n log n), as the tokenizers crate does them: symbols in a
 * linked list, candidate pairs in a heap, stale candidates skipped when popped. */
static int64_t pl__merge_heap(const pl_bpe *b, pl__bpe_cache *c, const uint8_t *s, int64_t n,
                              int32_t *out)
{
    int32_t *sym = c->nw, *prev = c->prev, *next = c->next;
    uint64_t *h = c->heap;
    size_t hn = 0;
    for (int64_t i = 0; i < n; i++) {
        sym[i] = b->byte_id[s[i]];
        prev[i] = (int32_t)i - 1;
        next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    for (int64_t i = 0; i + 1 < n; i++) {
        int32_t id = 0;
        uint32_t r = pl__rank(b, sym[i], sym[i + 1], &id);
        if (r != UINT32_MAX) pl__heap_push(h, &hn, (uint64_t)r << 32 | (uint64_t)i);
    }
    while (hn) {
        uint64_t top = pl__heap_pop(h, &hn);
        int32_t pos = (int32_t)(top & 0xFFFFFFFFu), id = 0;
        uint32_t rank = (uint32_t)(top >> 32);
        if (sym[pos] < 0 || next[pos] < 0) continue;
        int32_t nx = next[pos];
        if (pl__rank(b, sym[pos], sym[nx], &id) != rank) continue; /* stale */
        sym[pos] = id;
        sym[nx] = -1;
        next[pos] = next[nx];
        if (next[nx] >= 0) prev[next[nx]] = pos;
        int32_t merged; /* the candidates' own merge results are found again when popped */
        if (prev[pos] >= 0) {
            uint32_t r = pl__rank(b, sym[prev[pos]], id, &merged);
            if (r != UINT32_MAX) pl__heap_push(h, &hn, (uint64_t)r << 32 | (uint32_t)prev[pos]);
        }
        if (next[pos] >= 0) {
            uint32_t r = pl__rank(b, id, sym[next[pos]], &merged);
            if (r != UINT32_MAX) pl__heap_push(h, &hn, (uint64_t)r << 32 | (uint32_t)pos);
        }
    }
    int64_t m = 0;
    for (int32_t i = 0; i >= 0; i = next[i])
        out[m++] = sym[i];
    return m;
}

static inline uint64_t pl__hash_word(const uint8_t *p, size_t n)
{
    uint64_t h = PL_HASH_GOLDEN ^ n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * UINT64_C(0xBF58476D1CE4E5B9);
        h ^= h >> 29;
        p += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, p, n);
    return pl_mix64(h ^ w);
}

/* Appends one piece's ids; out has room for n more. */
static pl_status pl__piece(const pl_bpe *b, pl__bpe_cache *c, const uint8_t *s, size_t n,
                           pl_bpe_ids *out, pl_error *err)
{
    if (n == 1) {
        out->v[out->n++] = b->byte_id[s[0]];
        return PL_OK;
    }
    pl__centry *e = NULL;
    uint32_t tag = 0;
    if (n <= PL__KEY_MAX) {
        uint64_t h = pl__hash_word(s, n);
        e = &c->e[h & (PL__CACHE_SLOTS - 1)];
        tag = (uint32_t)(h >> 32);
        if (e->len == n && e->tag == tag && memcmp(e->key, s, n) == 0) {
            memcpy(out->v + out->n, e->ids, e->n * sizeof *e->ids);
            out->n += e->n;
            return PL_OK;
        }
    }
    bool heap = n > b->heap_min;
    PL_CHECK(pl__scratch(c, n, heap, err));
    int32_t *dst = out->v + out->n;
    int64_t m = heap ? pl__merge_heap(b, c, s, (int64_t)n, dst)
                     : pl__merge_linear(b, c, s, (int64_t)n, dst);
    out->n += m;
    if (e && m <= PL__IDS_MAX) {
        e->tag = tag;
        e->len = (uint8_t)n;
        e->n = (uint8_t)m;
        memcpy(e->key, s, n);
        memcpy(e->ids, dst, (size_t)m * sizeof *dst);
    }
    return PL_OK;
}

/* Text between added tokens: pieces of the pre-tokenizer, each merged. */
static pl_status pl__segment(const pl_bpe *b, pl__bpe_cache *c, const uint8_t *s, size_t n,
                             pl_bpe_ids *out, pl_error *err)
{
    if (!n) return PL_OK;
    if (b->add_prefix_space && s[0] != ' ') {
        c->seg.n = 0;
        PL_CHECK(pl__text_reserve(&c->seg, (int64_t)n + 1, err));
        c->seg.v[0] = ' ';
        memcpy(c->seg.v + 1, s, n);
        s = (const uint8_t *)c->seg.v;
        n++;
    }
    PL_CHECK(pl__ids_reserve(out, (int64_t)n, err));
    if (!b->use_regex) return pl__piece(b, c, s, n, out, err);
    for (size_t i = 0; i < n;) {
        size_t j = pl__piece_end(s, i, n);
        PL_CHECK(pl__piece(b, c, s + i, j - i, out, err));
        i = j;
    }
    return PL_OK;
}

/* Where added token a next occurs in s[from..n), or n. */
static size_t pl__find(const pl__bpe_added *a, const uint8_t *s, size_t n, size_t from)
{
    while (from + a->len <= n) {
        const uint8_t *p = memchr(s + from, (uint8_t)a->text[0], n - from - a->len + 1);
        if (!p) break;
        size_t at = (size_t)(p - s);
        if (memcmp(p, a->text, a->len) == 0) return at;
        from = at + 1;
    }
    return n;
}

static pl_status pl__encode(const pl_bpe *b, pl__bpe_cache *c, const char *text, size_t len,
                            pl_bpe_ids *out, pl_error *err)
{
    const uint8_t *s = (const uint8_t *)text;
    size_t n = len;
    if (pl_bpe_utf8_valid(text, len) < len) {
        c->fixed.n = 0;
        PL_CHECK(pl_bpe_utf8_replace(text, len, &c->fixed, err));
        s = (const uint8_t *)c->fixed.v;
        n = (size_t)c->fixed.n;
    }
    for (int k = 0; k < b->n_added; k++)
        c->added_at[k] = pl__find(&b->added[k], s, n, 0);
    for (size_t i = 0;;) {
        /* the leftmost added token, the longest of those that start there */
        int w = -1;
        for (int k = 0; k < b->n_added; k++) {
            if (c->added_at[k] < i) c->added_at[k] = pl__find(&b->added[k], s, n, i);
            if (c->added_at[k] < n &&
                (w < 0 || c->added_at[k] < c->added_at[w] ||
                 (c->added_at[k] == c->added_at[w] && b->added[k].len > b->added[w].len)))
                w = k;
        }
        size_t at = w < 0 ? n : c->added_at[w];
        PL_CHECK(pl__segment(b, c, s + i, at - i, out, err));
        if (w < 0) break;
        PL_CHECK(pl__ids_reserve(out, 1, err));
        out->v[out->n++] = b->added[w].id;
        i = at + b->added[w].len;
    }
    return PL_OK;
}

pl_status pl_bpe_encode(const pl_bpe *b, const char *text, size_t len, pl_bpe_ids *out,
                        pl_error *err)
{
    pl__bpe_cache *c = pl__cache_take(b);
    if (!c) return pl_error_set(err, PL_ENOMEM, "error: out of memory (a word cache)");
    pl_status st = pl__encode(b, c, text, len, out, err);
    pl__cache_give(b, c);
    return st;
}

/* ---- the batch API ---- */

typedef struct pl__batch_job {
    const pl_bpe *b;
    const char *const *texts;
    const size_t *lens;
    pl_bpe_ids *outs;
    int64_t n, n_tasks;
    pl__bpe_cache **caches; /* [parallel], by slot */
    pl_status *st;          /* [parallel] */
    pl_error *errs;         /* [parallel] */
} pl__batch_job;

static void pl__batch_task(void *arg, int64_t t, int slot)
{
    pl__batch_job *j = arg;
    if (j->st[slot] != PL_OK) return;
    int64_t lo = t * j->n / j->n_tasks, hi = (t + 1) * j->n / j->n_tasks;
    for (int64_t r = lo; r < hi && j->st[slot] == PL_OK; r++) {
        if (pl_intr_pending()) { /* between rows: a row is its text's length of work */
            j->st[slot] = pl_intr_error(&j->errs[slot], "tokenizing");
            break;
        }
        j->st[slot] =
            pl__encode(j->b, j->caches[slot], j->texts[r], j->lens[r], &j->outs[r], &j->errs[slot]);
    }
}

pl_status pl_bpe_encode_batch(const pl_bpe *b, pl_pool *pool, int parallel, int64_t n,
                              const char *const *texts, const size_t *lens, pl_bpe_ids *outs,
                              pl_error *err)
{
    if (n <= 0) return PL_OK;
    if (parallel < 1 || !pool) parallel = 1;
    if (parallel > n) parallel = (int)n;
    pl__batch_job j = {b, texts, lens, outs, n, 0, NULL, NULL, NULL};
    /* several tasks a thread, so rows of uneven length still share out */
    j.n_tasks = parallel == 1 ? 1 : (n < 8 * (int64_t)parallel ? n : 8 * (int64_t)parallel);
    j.caches = calloc((size_t)parallel, sizeof *j.caches);
    j.st = calloc((size_t)parallel, sizeof *j.st);
    j.errs = calloc((size_t)parallel, sizeof *j.errs);
    pl_status st = PL_OK;
    if (!j.caches || !j.st || !j.errs)
        st = pl_error_set(err, PL_ENOMEM, "error: out of memory (tokenizer batch)");
    for (int i = 0; st == PL_OK && i < parallel; i++)
        if (!(j.caches[i] = pl__cache_take(b)))
            st = pl_error_set(err, PL_ENOMEM, "error: out of memory (a word cache)");
    if (st == PL_OK) pl_pool_run(pool, j.n_tasks, parallel, pl__batch_task, &j);
    for (int i = 0; st == PL_OK && i < parallel; i++)
        if (j.st[i] != PL_OK) {
            *err = j.errs[i];
            st = j.st[i];
        }
    for (int i = 0; j.caches && i < parallel; i++)
        pl__cache_give(b, j.caches[i]);
    free(j.caches);
    free(j.st);
    free(j.errs);
    return st;
}

/* ---- decoding and the rest ---- */

pl_status pl_bpe_decode(const pl_bpe *b, const int32_t *ids, int64_t n, bool skip_special,
                        pl_bpe_text *out, pl_error *err)
{
    for (int64_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (!pl_bpe_has_id(b, id))
            return pl_error_set(err, PL_EINPUT,
                                "error: id %ld (position %lld) is not in the vocabulary (0..%d)",
                                (long)id, (long long)i, b->n_vocab - 1);
        if (skip_special && b->tok_special[id]) continue;
        int32_t len = b->tok_len[id];
        PL_CHECK(pl__text_reserve(out, len, err));
        memcpy(out->v + out->n, b->tok_bytes + b->tok_off[id], (size_t)len);
        out->n += len;
    }
    return PL_OK;
}

pl_status pl_bpe_error_row(pl_error *err, int64_t row)
{
    char m[PL_ERROR_MSG_MAX];
    snprintf(m, sizeof m, "%s", strncmp(err->msg, "error: ", 7) == 0 ? err->msg + 7 : err->msg);
    return pl_error_set(err, err->status, "error: row %lld: %s", (long long)row, m);
}

bool pl_bpe_has_id(const pl_bpe *b, int32_t id)
{
    return id >= 0 && id < b->n_vocab && b->tok_len[id] >= 0;
}

int32_t pl_bpe_vocab_size(const pl_bpe *b)
{
    return b->n_vocab;
}

int32_t pl_bpe_eos(const pl_bpe *b)
{
    return b->eos;
}

const char *pl_bpe_source(const pl_bpe *b)
{
    return b->source;
}

void pl_bpe_set_heap_min(pl_bpe *b, size_t n)
{
    b->heap_min = n;
}

void pl_bpe_free(pl_bpe *b)
{
    if (!b) return;
    for (int i = 0; i < b->n_free; i++)
        pl__cache_free(b->free_caches[i]);
    free(b->free_caches);
    for (int i = 0; i < b->n_added; i++)
        free(b->added[i].text);
    free(b->added);
    free(b->merges);
    free(b->tok_bytes);
    free(b->tok_off);
    free(b->tok_len);
    free(b->tok_special);
    pthread_mutex_destroy(&b->mu);
    free(b);
}
