/*
 * naive.c - an independent model of the conversions, and the helpers every
 * model and test shares, for tests only (see naive.h).  Rounding is done in double, where every
 * binary32 value and every rounding candidate is exact, with nearbyint()
 * in the default round-to-nearest-even mode.
 */
#include "golden/prng.h"
#include "naive.h"

#include <math.h>
#include <string.h>

uint32_t naive_bits(float value)
{
    uint32_t bits;
    memcpy(&bits, &value, 4);
    return bits;
}

float naive_float(uint32_t bits)
{
    float value;
    memcpy(&value, &bits, 4);
    return value;
}

float naive_bf16_to_float(uint16_t bits)
{
    int sign = bits >> 15, exponent = (bits >> 7) & 0xff, mantissa = bits & 0x7f;
    double magnitude;
    if (exponent == 0xff) {
        if (mantissa) /* NaN policy of the header: sign kept, quiet, payload kept */
            return naive_float(((uint32_t)bits << 16) | 0x00400000u);
        magnitude = INFINITY;
    } else if (exponent == 0) {
        magnitude = ldexp(mantissa, -133);
    } else {
        magnitude = ldexp(128 + mantissa, exponent - 134);
    }
    return (float)(sign ? -magnitude : magnitude);
}

float naive_fp16_to_float(uint16_t bits)
{
    int sign = bits >> 15, exponent = (bits >> 10) & 0x1f, mantissa = bits & 0x3ff;
    double magnitude;
    if (exponent == 0x1f) {
        if (mantissa)
            return naive_float((sign ? 0x80000000u : 0) | 0x7fc00000u | (uint32_t)mantissa << 13);
        magnitude = INFINITY;
    } else if (exponent == 0) {
        magnitude = ldexp(mantissa, -24);
    } else {
        magnitude = ldexp(1024 + mantissa, exponent - 25);
    }
    return (float)(sign ? -magnitude : magnitude);
}

/* Round |x| to `bits` significant bits with the smallest quantum `min_exp`
 * (the subnormal step), ties to even. */
static double round_significant(double x, int bits, int min_exp)
{
    int exponent;
    frexp(x, &exponent); /* x = m * 2^exponent, m in [0.5, 1) */
    int quantum = exponent - bits;
    if (quantum < min_exp)
        quantum = min_exp;
    return ldexp(nearbyint(ldexp(x, -quantum)), quantum);
}

uint16_t naive_float_to_bf16(float value)
{
    uint32_t bits = naive_bits(value);
    if (isnan(value))
        return (uint16_t)((bits >> 16) | 0x40);
    double x = fabs((double)value);
    double max_midpoint = ldexp(2.0 - ldexp(1, -8), 127);
    double r = x >= max_midpoint ? INFINITY : round_significant(x, 8, -133);
    uint32_t rbits = naive_bits((float)r); /* exact: r has 8 significant bits */
    return (uint16_t)((bits >> 16 & 0x8000) | rbits >> 16);
}

uint16_t naive_float_to_fp16(float value)
{
    uint32_t bits = naive_bits(value);
    uint16_t sign = (uint16_t)(bits >> 16 & 0x8000);
    if (isnan(value))
        return (uint16_t)(sign | 0x7e00 | (bits & 0x7fffff) >> 13);
    double x = fabs((double)value);
    if (x >= 65520.0)
        return sign | 0x7c00;
    double r = round_significant(x, 11, -24);
    if (r < ldexp(1, -14))
        return (uint16_t)(sign | (uint16_t)ldexp(r, 24));
    int exponent;
    double m = frexp(r, &exponent); /* r = m * 2^exponent */
    int biased = exponent - 1 + 15;
    int mantissa = (int)(ldexp(m, 11) - 1024);
    return (uint16_t)(sign | biased << 10 | mantissa);
}

size_t naive_size(moeperm_dtype dtype)
{
    return dtype == MOEPERM_FLOAT ? 4 : 2;
}

float naive_load(moeperm_dtype dtype, const void *base, int64_t i)
{
    if (dtype == MOEPERM_FLOAT)
        return ((const float *)base)[i];
    uint16_t h = ((const uint16_t *)base)[i];
    return dtype == MOEPERM_BF16 ? naive_bf16_to_float(h) : naive_fp16_to_float(h);
}

/* SplitMix64 as a sequence: the project's one copy of the generator is
 * the golden library's (prng.h); the tests draw their data from it too. */
uint64_t naive_rand(uint64_t *state)
{
    return prng_mix64(*state += PRNG_GAMMA);
}

void naive_fill_ordinary(uint64_t *state, moeperm_dtype dtype, void *buf, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        uint32_t bits = (uint32_t)naive_rand(state);
        uint32_t f = (bits & 0x807fffffu) | (0x3a000000u + ((bits >> 23) & 7u) * 0x00800000u);
        if (dtype == MOEPERM_FLOAT)
            ((uint32_t *)buf)[i] = f;
        else if (dtype == MOEPERM_BF16)
            ((uint16_t *)buf)[i] = (uint16_t)(f >> 16);
        else
            ((uint16_t *)buf)[i] = naive_float_to_fp16(naive_float(f));
    }
}

void naive_permutation(uint64_t *state, int32_t *out, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        out[i] = (int32_t)i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(naive_rand(state) % (uint64_t)(i + 1));
        int32_t tmp = out[i];
        out[i] = out[j];
        out[j] = tmp;
    }
}

static int is_nan_bits(moeperm_dtype dtype, uint32_t v)
{
    if (dtype == MOEPERM_FLOAT)
        return (v & 0x7fffffffu) > 0x7f800000u;
    if (dtype == MOEPERM_BF16)
        return (v & 0x7fffu) > 0x7f80u;
    return (v & 0x7fffu) > 0x7c00u;
}

int naive_equal(moeperm_dtype dtype, const void *a, const void *b, int64_t n, int64_t *first)
{
    for (int64_t i = 0; i < n; i++) {
        uint32_t x, y;
        if (dtype == MOEPERM_FLOAT) {
            x = ((const uint32_t *)a)[i];
            y = ((const uint32_t *)b)[i];
        } else {
            x = ((const uint16_t *)a)[i];
            y = ((const uint16_t *)b)[i];
        }
        if (x != y && !(is_nan_bits(dtype, x) && is_nan_bits(dtype, y))) {
            if (first)
                *first = i;
            return 0;
        }
    }
    return 1;
}
