/*
 * unpermute_grad_exact.c - the exact dot products behind probs_grad, for
 * telling a device that sums in another order from a wrong one.
 *
 * Both factors are binary32 values (widened exactly), so each product has
 * at most 48 significant bits and an exponent between -298 and 256: it is
 * exact in a double.  The products are then added into a fixed-point
 * integer wide enough for every one of them (bit 0 weighs 2^-416, the top
 * limb has room for 2^62 products of 2^256), so the sum is exact too, in
 * any order; it is rounded once, to nearest even, into a double.  A long
 * double or compensated sum would be close but not exact when the terms
 * cancel, and cancellation is exactly where an order matters.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/fp.h"
#include "unpermute_grad/model.h"

/* 32-bit digits, least significant first, each kept in an int64 so that
 * signed parts add without carrying until normalise() runs.  Digits 0 and
 * 1 are never touched by a product: the 96 bits read below the leading
 * digit always exist. */
#define DIGITS 24
#define LSB_EXPONENT (-416)
/* Adds between normalisations: each adds less than 2^32 to a digit. */
#define ADDS_PER_NORMALISE (1 << 20)

typedef struct exact_sum {
    int64_t digit[DIGITS];
    int64_t adds;
    bool nan, plus_inf, minus_inf;
} exact_sum;

/* Carries every digit into [0, 2^32) but the top one, which keeps the
 * sign of the whole number. */
static void normalise(exact_sum *e)
{
    for (int i = 0; i < DIGITS - 1; i++) {
        int64_t carry = e->digit[i] >> 32; /* arithmetic shift: a floor */
        e->digit[i] -= carry * (INT64_C(1) << 32);
        e->digit[i + 1] += carry;
    }
    e->adds = 0;
}

static void add_product(exact_sum *e, float x, float g)
{
    double p = (double)x * (double)g;
    if (isnan(p)) {
        e->nan = true;
        return;
    }
    if (isinf(p)) {
        if (p > 0)
            e->plus_inf = true;
        else
            e->minus_inf = true;
        return;
    }
    if (p == 0)
        return;
    uint64_t bits;
    memcpy(&bits, &p, sizeof bits);
    /* |p| >= 2^-298 is a normal double: p = m * 2^(biased - 1075) */
    int biased = (int)((bits >> 52) & 0x7ff);
    uint64_t m = (bits & ((UINT64_C(1) << 52) - 1)) | (UINT64_C(1) << 52);
    int shift = biased - 1075 - LSB_EXPONENT;
    int at = shift / 32, offset = shift % 32;
    uint64_t low = m << offset, high = offset ? m >> (64 - offset) : 0;
    int64_t parts[3] = {(int64_t)(low & 0xffffffffu), (int64_t)(low >> 32), (int64_t)high};
    for (int i = 0; i < 3; i++)
        e->digit[at + i] += (bits >> 63) ? -parts[i] : parts[i];
    if (++e->adds == ADDS_PER_NORMALISE)
        normalise(e);
}

/* The nearest double to the exact sum, ties to even. */
static double round_sum(exact_sum *e)
{
    if (e->nan || (e->plus_inf && e->minus_inf))
        return NAN;
    if (e->plus_inf)
        return INFINITY;
    if (e->minus_inf)
        return -INFINITY;
    normalise(e);
    bool negative = e->digit[DIGITS - 1] < 0;
    if (negative) {
        for (int i = 0; i < DIGITS; i++)
            e->digit[i] = -e->digit[i];
        normalise(e);
    }
    int top = DIGITS - 1;
    while (top >= 2 && e->digit[top] == 0)
        top--;
    if (top < 2)
        return 0.0;
    /* The 96 bits of the three leading digits, shifted so that the leading
     * one is bit 63 of `head`; whatever lies below goes into `sticky`. */
    uint64_t a = (uint64_t)e->digit[top], b = (uint64_t)e->digit[top - 1],
             c = (uint64_t)e->digit[top - 2];
    int lead = __builtin_clzll(a) - 32; /* leading zeros of the 32-bit digit a */
    uint64_t head = ((a << 32 | b) << lead) | (lead ? c >> (32 - lead) : 0);
    bool sticky = ((c << lead) & 0xffffffffu) != 0;
    for (int i = 0; i < top - 2; i++)
        sticky |= e->digit[i] != 0;
    uint64_t kept = head >> 11, dropped = head & 0x7ff;
    if (dropped > 0x400 || (dropped == 0x400 && (sticky || (kept & 1))))
        kept++;
    /* head weighs 2^(32 * (top - 2) + LSB_EXPONENT + 32 - lead); kept is
     * at most 2^53 and the result is far from the subnormal range, so the
     * scaling is exact. */
    double value = ldexp((double)kept, 32 * (top - 2) + LSB_EXPONENT + 32 - lead + 11);
    return negative ? -value : value;
}

static float widen(moeperm_dtype dtype, const char *base, int64_t index)
{
    if (dtype == MOEPERM_FLOAT) {
        float value;
        memcpy(&value, base + index * 4, sizeof value);
        return value;
    }
    uint16_t h;
    memcpy(&h, base + index * 2, sizeof h);
    return dtype == MOEPERM_BF16 ? fp_bf16_to_float(h) : fp_fp16_to_float(h);
}

moeperm_status moeperm_ug_exact(const moeperm_tensor *tokens, const moeperm_tensor *grad,
                                const moeperm_tensor *indices, int64_t top_k, double *exact)
{
    int64_t tokens_num = grad->dims[0], hidden = grad->dims[1], rows = tokens->dims[0];
    int64_t size = (int64_t)moeperm_dtype_size(grad->dtype);
    const char *t = tokens->data && rows > 0 && hidden > 0
                        ? (const char *)tokens->data + tokens->offset * size
                        : NULL;
    const char *g = grad->data && tokens_num > 0 && hidden > 0
                        ? (const char *)grad->data + grad->offset * size
                        : NULL;
    const int32_t *idx = tokens_num > 0 ? (const int32_t *)indices->data + indices->offset : NULL;

#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1)
#endif
    for (int64_t i = 0; i < tokens_num * top_k; i++) {
        int64_t n = i / top_k;
        uint64_t s = (uint64_t)(int64_t)idx[i * indices->strides[0]];
        exact_sum e;
        memset(&e, 0, sizeof e);
        for (int64_t h = 0; h < hidden; h++) {
            float gv = widen(grad->dtype, g, n * grad->strides[0] + h * grad->strides[1]);
            float xv = s < (uint64_t)rows
                           ? widen(tokens->dtype, t,
                                   (int64_t)s * tokens->strides[0] + h * tokens->strides[1])
                           : 0.0f;
            add_product(&e, xv, gv);
        }
        exact[i] = round_sum(&e);
    }
    return MOEPERM_SUCCESS;
}
