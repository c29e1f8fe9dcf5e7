/* pl_hash: the order-independent 64-bit hash pipectl uses for checksums (sink checksums, the
 * `checksum` kernel op, bundles). Order-independent so a GPU can compute it with one atomicAdd per
 * word, in any order, and get the same bits as the host.
 *
 * The exact formula (the CUDA version, checksum_kernel in stages/kernel/ops_gpu.cu, must match it
 * bit for bit):
 *
 *   mix64(z):  z ^= z >> 30; z *= 0xBF58476D1CE4E5B9;
 *              z ^= z >> 27; z *= 0x94D049BB133111EB;
 *              z ^= z >> 31;                            (all mod 2^64; SplitMix64's finaliser)
 *   words:     the bytes split into W = ceil(len / 8) little-endian 64-bit words w_0 .. w_{W-1};
 *              the last word's missing bytes are zero.
 *   sum:       S = sum over i of mix64(w_i + (i + 1) * 0x9E3779B97F4A7C15)   (mod 2^64)
 *   hash:      H = mix64(S ^ mix64(len))                 (len in bytes; the empty range hashes to
 * 0)
 *
 * A GPU thread per word adds its term to S with atomicAdd(unsigned long long); one thread then
 * applies the last line. Splitting the range across blocks is fine as long as each word keeps its
 * global index i (pl_hash_sum takes the index of the first word). */
#ifndef PL_HASH_H
#define PL_HASH_H

#include <stddef.h>
#include <stdint.h>

#define PL_HASH_GOLDEN UINT64_C(0x9E3779B97F4A7C15)

static inline uint64_t pl_mix64(uint64_t z)
{
    z ^= z >> 30;
    z *= UINT64_C(0xBF58476D1CE4E5B9);
    z ^= z >> 27;
    z *= UINT64_C(0x94D049BB133111EB);
    z ^= z >> 31;
    return z;
}

/* The hash H of `len` bytes at `data`. */
uint64_t pl_hash(const void *data, size_t len);

/* The partial sum S of the words of `data` (len bytes, zero-padded to whole words), numbering the
 * first word `first_word` (so chunks starting at 8-byte multiples can be summed separately and
 * added). */
uint64_t pl_hash_sum(const void *data, size_t len, uint64_t first_word);
/* H from the total sum S and the total length in bytes. */
static inline uint64_t pl_hash_final(uint64_t sum, uint64_t len)
{
    return pl_mix64(sum ^ pl_mix64(len));
}

/* Streaming form for data that arrives in pieces of any size (a sink's batches): the result equals
 * pl_hash of the concatenation. Zero-initialise, update, then pl_hash_stream_final. */
typedef struct pl_hash_stream {
    uint64_t sum;
    uint64_t len;
    unsigned char tail[8];
    unsigned n_tail;
} pl_hash_stream;

void pl_hash_stream_update(pl_hash_stream *hs, const void *data, size_t len);
uint64_t pl_hash_stream_final(const pl_hash_stream *hs);

#endif
