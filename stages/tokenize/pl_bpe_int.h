/* pl_bpe_int: the tokenizer's tables, shared by its loader (pl_bpe_load.c) and its encoder and
 * decoder (pl_bpe.c). Nothing outside those two files includes it. */
#ifndef PL_BPE_INT_H
#define PL_BPE_INT_H

#include <pthread.h>

#include "pl_bpe.h"

/* One merge: the pair (left id << 32 | right id), its rank and the id it gives. */
typedef struct pl__bpe_merge {
    uint64_t key; /* PL__BPE_EMPTY: a free slot */
    uint32_t rank;
    int32_t id;
} pl__bpe_merge;
#define PL__BPE_EMPTY UINT64_MAX

/* An added token (`<|endoftext|>`): found in raw text before pre-tokenizing. */
typedef struct pl__bpe_added {
    char *text; /* owned */
    size_t len;
    int32_t id;
    bool special; /* skipped by decode's skip_special */
} pl__bpe_added;

typedef struct pl__bpe_cache pl__bpe_cache;

struct pl_bpe {
    int32_t n_vocab;       /* largest id + 1 */
    char *tok_bytes;       /* every token's bytes, back to back; owned */
    uint32_t *tok_off;     /* [n_vocab]: where token id's bytes start in tok_bytes */
    int32_t *tok_len;      /* [n_vocab]: their length; -1: no token has this id */
    uint8_t *tok_special;  /* [n_vocab]: 1 for special added tokens */
    int32_t byte_id[256];  /* the token of each single byte */
    pl__bpe_merge *merges; /* open addressing, mmask + 1 slots */
    uint64_t mmask;
    pl__bpe_added *added;
    int n_added;
    int32_t eos;
    bool add_prefix_space; /* tokenizer.json's ByteLevel option (false for GPT-2) */
    bool use_regex;        /* idem (true for GPT-2) */
    size_t heap_min;       /* words longer than this merge through the heap */
    char source[4300];
    /* Word caches not in use, one taken per encoding thread. */
    pthread_mutex_t mu;
    pl__bpe_cache **free_caches;
    int n_free, cap_free;
};

/* Slot of the merge table for a pair key. */
static inline uint64_t pl__bpe_slot(uint64_t key)
{
    key ^= key >> 31;
    key *= UINT64_C(0x7FB5D329728EA185);
    key ^= key >> 27;
    key *= UINT64_C(0x81DADEF4BC2DD44D);
    key ^= key >> 33;
    return key;
}

/* The byte-to-unicode map of GPT-2's encoder.py: printable Latin-1 bytes stand for themselves,
 * the others (0..32, 127..160, 173) for U+0100 on, in order. */
static inline uint32_t pl__bpe_byte_cp(int b)
{
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255))
        return (uint32_t)b;
    int n = 0;
    for (int x = 0; x < b; x++)
        if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255))) n++;
    return 256u + (uint32_t)n;
}

#endif
