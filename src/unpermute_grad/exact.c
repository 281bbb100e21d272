/*
 * exact.c - the exact dot products behind probs_grad, for
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
 *
 * Adding each product into that integer costs tens of nanoseconds, so a
 * row goes there in a few pieces instead (add_chunk()): the products of a
 * chunk of columns are split, in plain double arithmetic, into levels
 * whose parts add up without any rounding, and only each level's sum goes
 * into the integer.  The integer and its one rounding stay the single
 * place where the value is made; the levels change how fast, not what.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/dispatch.h"
#include "core/fp.h"
#include "core/fp_env.h"
#include "unpermute_grad/model.h"

#ifdef MOEPERM_HAVE_X86_PATH
#include "x86/x86.h"
#endif

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

/* Adds p, a product of two binary32 values or a sum of such products
 * that a double holds exactly (every non-zero one is a multiple of 2^-298
 * below 2^352 in magnitude). */
static void add_value(exact_sum *e, double p)
{
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

static void add_product(exact_sum *e, float x, float g)
{
    add_value(e, (double)x * (double)g);
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

/* The portable build of the widening and the levels
 * (x86/exact_template.h), the levels in two-double vectors. */
#define SUFFIX _portable
#define ATTRIBUTES
#define EXACT_LANES 2
#include "x86/exact_template.h"
#undef SUFFIX
#undef ATTRIBUTES
#undef EXACT_LANES

/* count elements of a row, from element `index` on, `stride` elements
 * apart, widened into out (zeros for a row that is absent: base NULL),
 * then zeros up to the next multiple of MOEPERM_UG_EXACT_STEP: widen_unit
 * for a row of unit stride.  A NaN may come out without fp.h's quiet bit:
 * it stays a NaN, which is all add_chunk() asks of it. */
static void widen_run(moeperm_ug_exact_widen *widen_unit, moeperm_dtype dtype, const char *base,
                      int64_t index, int64_t stride, int64_t count, float *restrict out)
{
    int64_t j = 0;
    const char *row = base ? base + index * (dtype == MOEPERM_FLOAT ? 4 : 2) : NULL;
    if (row && stride == 1) {
        widen_unit(dtype, row, count, out);
        j = count;
    } else if (row) {
        for (; j < count; j++)
            out[j] = widen(dtype, base, index + j * stride);
    }
    for (; j % MOEPERM_UG_EXACT_STEP != 0 || j < count; j++)
        out[j] = 0.0f;
}

/* Adds the products x[j] * g[j], j < count (a multiple of
 * MOEPERM_UG_EXACT_STEP, at most MOEPERM_UG_EXACT_CHUNK), to e, exactly:
 * the sums of their levels, then what the levels left, one by one; a chunk
 * with a NaN or an infinity among its products adds them one by one. */
static void add_chunk(exact_sum *e, moeperm_ug_exact_levels *levels, const float *x,
                      const float *g, int64_t count)
{
    double sums[MOEPERM_UG_EXACT_LEVELS], left[MOEPERM_UG_EXACT_CHUNK];
    int n = levels(x, g, count, sums, left);
    if (n < 0) {
        for (int64_t j = 0; j < count; j++)
            add_product(e, x[j], g[j]);
        return;
    }
    for (int i = 0; i < n && i < MOEPERM_UG_EXACT_LEVELS; i++)
        add_value(e, sums[i]);
    if (n > MOEPERM_UG_EXACT_LEVELS)
        for (int64_t j = 0; j < count; j++)
            add_value(e, left[j]);
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
    /* The levels in the vectors of the instruction set the library's one
     * choice resolved to (core/dispatch.h); every build gives the same
     * sums. */
    moeperm_ug_exact_levels *levels = moeperm_ug_exact_levels_portable;
    moeperm_ug_exact_widen *widen_unit = moeperm_ug_exact_widen_portable;
#ifdef MOEPERM_HAVE_X86_PATH
    const moeperm_x86_kernels *kernels =
        moeperm_x86_kernels_for(moeperm_isa_resolve(MOEPERM_ISA_AUTO));
    if (kernels) {
        levels = kernels->ug_exact_levels;
        widen_unit = kernels->ug_exact_widen;
    }
#endif

#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1)
#endif
    for (int64_t i = 0; i < tokens_num * top_k; i++) {
        int64_t n = i / top_k;
        uint64_t s = (uint64_t)(int64_t)idx[i * indices->strides[0]];
        /* The levels of add_chunk() are exact in any rounding mode, but a
         * caller that flushes subnormals (MXCSR DAZ) would lose them in
         * the widening: the default environment for the slot, as for the
         * operators' own arithmetic. */
        fp_env env = fp_env_enter();
        exact_sum e;
        memset(&e, 0, sizeof e);
        float xs[MOEPERM_UG_EXACT_CHUNK], gs[MOEPERM_UG_EXACT_CHUNK];
        for (int64_t h = 0; h < hidden; h += MOEPERM_UG_EXACT_CHUNK) {
            int64_t count = hidden - h < MOEPERM_UG_EXACT_CHUNK ? hidden - h : MOEPERM_UG_EXACT_CHUNK;
            widen_run(widen_unit, grad->dtype, g, n * grad->strides[0] + h * grad->strides[1],
                      grad->strides[1], count, gs);
            /* A dropped slot's row does not exist: its offset is never
             * formed, as the product could pass 2^63 (src/sum/rows.h). */
            bool kept = s < (uint64_t)rows;
            widen_run(widen_unit, tokens->dtype, kept ? t : NULL,
                      kept ? (int64_t)s * tokens->strides[0] + h * tokens->strides[1] : 0,
                      tokens->strides[1], count, xs);
            add_chunk(&e, levels, xs, gs,
                      (count + MOEPERM_UG_EXACT_STEP - 1) / MOEPERM_UG_EXACT_STEP *
                          MOEPERM_UG_EXACT_STEP);
        }
        exact[i] = round_sum(&e);
        fp_env_leave(env);
    }
    return MOEPERM_SUCCESS;
}
