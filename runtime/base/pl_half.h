/* pl_half: f16 and bf16 <-> f32 conversions (round to nearest even): a base utility below the
 * stage kinds, shared by the ops, the Lua views and the generators.
 * Header-only so the host reference ops, the search stage, buffer init and tests share one exact
 * definition (the GPU's __float2half_rn / __float2bfloat16_rn give the same bits). NaN keeps its
 * sign and becomes a quiet NaN; values too large for f16 become infinity. */
#ifndef PL_HALF_H
#define PL_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint32_t pl__f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float pl__bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* bf16 is the top half of an f32: round the low 16 bits to nearest, ties to even. */
static inline uint16_t pl_f32_to_bf16(float f)
{
    uint32_t u = pl__f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float pl_bf16_to_f32(uint16_t h)
{
    return pl__bits_f32((uint32_t)h << 16);
}

static inline uint16_t pl_f32_to_f16(float f)
{
    uint32_t u = pl__f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu)); /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to inf */
    if (a < 0x38800000u) {
        /* Result is subnormal (or zero): value = a * 2^24 in units of the f16 subnormal step. */
        if (a < 0x33000000u) return sign; /* below half the smallest subnormal: +-0 */
        uint32_t e = a >> 23;
        uint32_t m = (a & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - e; /* 14..24: bring the value to units of 2^-24 */
        uint32_t q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1u);
        uint32_t half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (q & 1u))) q++;
        return (uint16_t)(sign | q);
    }
    /* Normal: rebias the exponent (127 -> 15) and round 13 mantissa bits away. */
    uint32_t r = a - 0x38000000u;
    r += 0xfffu + ((r >> 13) & 1u);
    return (uint16_t)(sign | (r >> 13));
}

static inline float pl_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu;
    uint32_t m = h & 0x3ffu;
    uint32_t u;
    if (e == 0x1fu) {
        u = sign | 0x7f800000u | (m << 13); /* inf, NaN */
    } else if (e == 0) {
        if (m == 0) {
            u = sign;
        } else { /* subnormal: normalise */
            e = 113;
            while (!(m & 0x400u)) {
                m <<= 1;
                e--;
            }
            u = sign | (e << 23) | ((m & 0x3ffu) << 13);
        }
    } else {
        u = sign | ((e + 112u) << 23) | (m << 13);
    }
    return pl__bits_f32(u);
}

#endif
