/* pl_hash: the order-independent 64-bit hash (formula in pl_hash.h). */
#include "pl_hash.h"

#include <string.h>

static inline uint64_t pl__load_le64(const unsigned char *p)
{
    uint64_t w = 0;
    for (int b = 7; b >= 0; b--)
        w = (w << 8) | p[b];
    return w;
}

static inline uint64_t pl__term(uint64_t w, uint64_t i)
{
    return pl_mix64(w + (i + 1) * PL_HASH_GOLDEN);
}

uint64_t pl_hash_sum(const void *data, size_t len, uint64_t first_word)
{
    const unsigned char *p = data;
    uint64_t s = 0, i = first_word;
    size_t whole = len / 8;
    for (size_t k = 0; k < whole; k++, i++)
        s += pl__term(pl__load_le64(p + 8 * k), i);
    if (len % 8) {
        unsigned char last[8] = {0};
        memcpy(last, p + 8 * whole, len % 8);
        s += pl__term(pl__load_le64(last), i);
    }
    return s;
}

uint64_t pl_hash(const void *data, size_t len)
{
    return pl_hash_final(pl_hash_sum(data, len, 0), len);
}

void pl_hash_stream_update(pl_hash_stream *hs, const void *data, size_t len)
{
    const unsigned char *p = data;
    if (hs->n_tail) { /* complete the pending partial word first */
        size_t take = 8 - hs->n_tail < len ? 8 - hs->n_tail : len;
        memcpy(hs->tail + hs->n_tail, p, take);
        hs->n_tail += (unsigned)take;
        hs->len += take;
        p += take;
        len -= take;
        if (hs->n_tail < 8) return;
        hs->sum += pl__term(pl__load_le64(hs->tail), hs->len / 8 - 1);
        hs->n_tail = 0;
    }
    size_t whole = len / 8 * 8;
    hs->sum += pl_hash_sum(p, whole, hs->len / 8);
    hs->len += whole;
    hs->n_tail = (unsigned)(len - whole);
    memcpy(hs->tail, p + whole, hs->n_tail);
    hs->len += hs->n_tail;
}

uint64_t pl_hash_stream_final(const pl_hash_stream *hs)
{
    uint64_t s = hs->sum;
    if (hs->n_tail) {
        unsigned char last[8] = {0};
        memcpy(last, hs->tail, hs->n_tail);
        s += pl__term(pl__load_le64(last), hs->len / 8);
    }
    return pl_hash_final(s, hs->len);
}
