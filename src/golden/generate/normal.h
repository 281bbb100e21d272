/*
 * normal.h - the gradient-like value of one element from its two draws,
 * shared by the element-by-element path (values.c) and the row loops
 * (rows.c), which must give an element the same bits.
 */
#ifndef MOEPERM_GOLDEN_GENERATE_NORMAL_H
#define MOEPERM_GOLDEN_GENERATE_NORMAL_H

#include <stdint.h>
#include <string.h>

static inline uint32_t float_bits(float v)
{
    uint32_t bits;
    memcpy(&bits, &v, 4);
    return bits;
}

static inline float float_of_bits(uint32_t bits)
{
    float v;
    memcpy(&v, &bits, 4);
    return v;
}

/* normal_exact() (values.c) rounded to binary32, without double or
 * ldexp(): the centred sum (an integer of magnitude at most 2^25) converted once to
 * binary32 (round to nearest even, as the conversion from double) and
 * multiplied by 2^(-25-e).  A product by a power of two is exact and
 * commutes with the rounding while nothing overflows or goes subnormal,
 * and every non-zero value here has a magnitude in [2^-32, 1]: the same
 * bits, in a loop the compiler vectorises. */
static inline float normal_value(uint64_t d0, uint64_t d1)
{
    int32_t sum = (int32_t)(d0 & 0xffffff) + (int32_t)((d0 >> 24) & 0xffffff) +
                  (int32_t)(d1 & 0xffffff) + (int32_t)((d1 >> 24) & 0xffffff) - (1 << 25);
    uint32_t e = (uint32_t)(d1 >> 61);
    return (float)sum * float_of_bits((127u - 25u - e) << 23);
}

#endif
