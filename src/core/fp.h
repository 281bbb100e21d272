/*
 * fp.h - the conversion primitives between binary32, binary16 and bfloat16,
 * in one place.
 *
 * Every path that widens or narrows (the public scalar and bulk functions,
 * the operator's kernels, any vectorised fast path) must give exactly these
 * bits, so they are written once, as integer operations that do not depend
 * on the floating-point environment (rounding mode, flush-to-zero) or on the
 * compiler contracting anything.  Narrowing is round to nearest, ties to
 * even, with IEEE subnormals and overflow to infinity; NaNs keep their sign,
 * become quiet and keep the leading payload bits that fit.
 */
#ifndef MOEPERM_FP_H
#define MOEPERM_FP_H

#include <stdint.h>
#include <string.h>

/* The device's bits need IEEE arithmetic: -ffast-math (or
 * -ffinite-math-only) lets the compiler reassociate sums and drop the NaN
 * tests, so a build with it would silently give other bits.  meson.build
 * also turns contraction into FMA off (-ffp-contract=off), which no macro
 * shows. */
#if defined(__FAST_MATH__) || (defined(__FINITE_MATH_ONLY__) && __FINITE_MATH_ONLY__)
#error "moeperm must be built without -ffast-math and -ffinite-math-only"
#endif

static inline uint32_t fp_bits(float value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    return bits;
}

static inline float fp_from_bits(uint32_t bits)
{
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

/* bfloat16 is the upper half of a binary32, so widening is a shift; only a
 * signalling NaN changes (it is made quiet, as every conversion here does). */
static inline float fp_bf16_to_float(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    if ((h & 0x7fffu) > 0x7f80u)
        bits |= 0x00400000u;
    return fp_from_bits(bits);
}

/* Adding 0x7fff plus the lowest kept bit carries into the kept half exactly
 * when the dropped half is above one half, or equal to it with an odd kept
 * half: round to nearest even.  The carry runs into the exponent when the
 * mantissa overflows, which is also right for the largest finite values
 * (they round to infinity) and for subnormals (they round into normals). */
static inline uint16_t fp_float_to_bf16(float value)
{
    uint32_t bits = fp_bits(value);
    if ((bits & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((bits >> 16) | 0x0040u);
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return (uint16_t)(bits >> 16);
}

static inline float fp_fp16_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exponent = (h >> 10) & 0x1fu;
    uint32_t mantissa = h & 0x3ffu;

    if (exponent == 0x1f) /* inf, or NaN made quiet */
        return fp_from_bits(sign | 0x7f800000u | (mantissa ? 0x00400000u | mantissa << 13 : 0));
    if (exponent != 0) /* normal: rebias 15 -> 127 */
        return fp_from_bits(sign | (exponent + 112u) << 23 | mantissa << 13);
    if (mantissa == 0)
        return fp_from_bits(sign);
    /* Subnormal: mantissa * 2^-24, normal in binary32.  Shift the leading 1
     * up to the implicit bit position, one exponent step per shift. */
    exponent = 113;
    while (!(mantissa & 0x400u)) {
        mantissa <<= 1;
        exponent--;
    }
    return fp_from_bits(sign | exponent << 23 | (mantissa & 0x3ffu) << 13);
}

static inline uint16_t fp_float_to_fp16(float value)
{
    uint32_t bits = fp_bits(value);
    uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
    uint32_t magnitude = bits & 0x7fffffffu;

    if (magnitude > 0x7f800000u) /* NaN: quiet, leading payload bits, as F16C */
        return (uint16_t)(sign | 0x7e00u | (magnitude & 0x7fffffu) >> 13);
    if (magnitude >= 0x477ff000u) /* >= 65520, the midpoint above 65504: inf */
        return (uint16_t)(sign | 0x7c00u);
    if (magnitude >= 0x38800000u) { /* >= 2^-14: a normal fp16 */
        uint32_t rebiased = magnitude - (112u << 23);
        rebiased += 0xfffu + ((rebiased >> 13) & 1u);
        return (uint16_t)(sign | rebiased >> 13);
    }
    if (magnitude <= 0x33000000u) /* <= 2^-25: rounds to zero (2^-25 is a tie to 0) */
        return sign;
    /* A subnormal fp16 in units of 2^-24: the binary32 value is
     * significand * 2^(exponent-150), so shift right by 126 - exponent
     * (14 to 24 here) and round the dropped bits to nearest even. */
    uint32_t exponent = magnitude >> 23;
    uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - exponent;
    uint32_t quotient = significand >> shift;
    uint32_t rest = significand & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rest > half || (rest == half && (quotient & 1u)))
        quotient++; /* 0x3ff + 1 = 0x400 is the smallest normal: still right */
    return (uint16_t)(sign | quotient);
}

#endif
