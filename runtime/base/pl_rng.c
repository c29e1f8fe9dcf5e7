/* pl_rng: counter-based uniform values per dtype (definition in pl_rng.h). */
#include "pl_rng.h"

#include <math.h>

#include "pl_half.h"

void pl_rng_default_range(pl_dtype t, double *min, double *max)
{
    if (pl_dtype_is_float(t)) {
        *min = -1;
        *max = 1;
    } else {
        *min = 0;
        *max = 100;
    }
}

static double pl__uniform(uint64_t u, double min, double max)
{
    double r = (double)(u >> 11) * 0x1p-53;
    double v = min + (max - min) * r;
    return v >= max && max > min ? min : v;
}

void pl_rng_fill(void *dst, pl_dtype t, int64_t count, uint64_t key, uint64_t first, double min,
                 double max)
{
    /* Integer bounds: floor/ceil-free, the caller passes integral values; span as unsigned. */
    int64_t imin = (int64_t)min;
    uint64_t span = max > min ? (uint64_t)((int64_t)max - imin) : 0;
    for (int64_t j = 0; j < count; j++) {
        uint64_t u = pl_rng_u64(key, first + (uint64_t)j);
        switch (t) {
        case PL_F64:
            ((double *)dst)[j] = pl__uniform(u, min, max);
            break;
        case PL_F32:
        case PL_F16:
        case PL_BF16: {
            float f = (float)pl__uniform(u, min, max);
            if (f >= (float)max && max > min) f = (float)min; /* rounding up onto max */
            if (t == PL_F32)
                ((float *)dst)[j] = f;
            else if (t == PL_F16)
                ((uint16_t *)dst)[j] = pl_f32_to_f16(f);
            else
                ((uint16_t *)dst)[j] = pl_f32_to_bf16(f);
            break;
        }
        case PL_U8:
        case PL_I32:
        case PL_I64: {
            int64_t v = span ? imin + (int64_t)(u % span) : imin;
            if (t == PL_U8)
                ((uint8_t *)dst)[j] = (uint8_t)v;
            else if (t == PL_I32)
                ((int32_t *)dst)[j] = (int32_t)v;
            else
                ((int64_t *)dst)[j] = v;
            break;
        }
        case PL_DTYPE_COUNT:
            break;
        }
    }
}
