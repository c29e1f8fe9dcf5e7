/* pl_philox: Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11;
 * the Random123 reference's constants and round order), and the uniforms the sample kind draws:
 * one header for the C host reference and the CUDA kernels, so both compute the same bits. */
#ifndef PL_PHILOX_H
#define PL_PHILOX_H

#include <stdint.h>

#if defined(__CUDACC__)
#define PL_HD __host__ __device__
#else
#define PL_HD
#endif

typedef struct pl_philox4 {
    uint32_t v[4];
} pl_philox4;

/* The 4 x 32-bit output for counter ctr and key (k0, k1): ten rounds, the key bumped by the Weyl
 * constants between rounds. Random123's known answers: counter 0, key 0 -> 6627e8d5 e169c58d
 * bc57ac4c 9b00dbd8. */
static inline PL_HD pl_philox4 pl_philox4x32_10(pl_philox4 ctr, uint32_t k0, uint32_t k1)
{
    for (int r = 0; r < 10; r++) {
        if (r > 0) {
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        uint64_t p0 = (uint64_t)0xD2511F53u * ctr.v[0], p1 = (uint64_t)0xCD9E8D57u * ctr.v[2];
        uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
        uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
        pl_philox4 n;
        n.v[0] = hi1 ^ ctr.v[1] ^ k0;
        n.v[1] = lo1;
        n.v[2] = hi0 ^ ctr.v[3] ^ k1;
        n.v[3] = lo0;
        ctr = n;
    }
    return ctr;
}

/* The uniform in [0, 1) the sample kind draws token `column` of sequence `seq` of batch `batch`
 * with: Philox4x32-10 with key (seed's low, high 32 bits) and counter (column, seq, batch's low,
 * high 32 bits); the first output's top 24 bits times 2^-24 (exact in f32). */
static inline PL_HD float pl_sample_uniform(uint64_t seed, int64_t batch, int32_t seq,
                                            int32_t column)
{
    pl_philox4 c;
    c.v[0] = (uint32_t)column;
    c.v[1] = (uint32_t)seq;
    c.v[2] = (uint32_t)(uint64_t)batch;
    c.v[3] = (uint32_t)((uint64_t)batch >> 32);
    pl_philox4 r = pl_philox4x32_10(c, (uint32_t)seed, (uint32_t)(seed >> 32));
    return (float)(r.v[0] >> 8) * (1.0f / 16777216.0f);
}

#endif
