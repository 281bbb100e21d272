/*
 * kernel.h - the arithmetic of the operators' sums, defined once: the
 * conversions of fp.h, and the addition step moeperm_accumulate(), which
 * pins the NaN the sum gives.  Every loop that adds binary32 values of an
 * operator (src/sum/, MoeTokenUnpermute's scaled sum, the x86 vector code)
 * widens, adds and narrows with these, so that the paths agree bit for bit
 * where their arithmetic meets (docs/arithmetic.md).
 */
#ifndef MOEPERM_KERNEL_H
#define MOEPERM_KERNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/dispatch.h"
#include "core/fp.h"
#include "core/internal.h"

#if defined(__GNUC__)
#define MOEPERM_FORCE_INLINE inline __attribute__((always_inline))
#else
#define MOEPERM_FORCE_INLINE inline
#endif

/*
 * One step of the sum, acc + x, as one binary32 addition, shared by every
 * path.  The only freedom a C compiler has with `acc + x` is the operand
 * order, and on x86 that decides which NaN comes out when both are NaNs;
 * fixing it here makes the bits independent of the compiler and equal
 * between paths: a NaN accumulator stays, made quiet (what x86 does with the
 * accumulator as first operand); a NaN x alone comes out made quiet;
 * inf - inf gives the CPU's default NaN.  The vector forms in src/x86/ pin
 * the same operand order.
 */
static inline float moeperm_accumulate(float acc, float x)
{
    /* a select by mask, without a branch, so that compilers still vectorise
     * the portable loop across columns */
    uint32_t bits = fp_bits(acc);
    uint32_t sum = fp_bits(acc + x);
    uint32_t nan = 0u - (uint32_t)((bits & 0x7fffffffu) > 0x7f800000u);
    return fp_from_bits((sum & ~nan) | ((bits | 0x00400000u) & nan));
}

/* Element j of a row of dtype (float32, float16 or bf16) widened to
 * binary32, and a binary32 narrowed into element j of an output row, as
 * fp.h does it.  Called with a constant dtype, the switch folds away. */
static MOEPERM_FORCE_INLINE float moeperm_widen(moeperm_dtype dtype, const void *row, int64_t j)
{
    switch (dtype) {
    case MOEPERM_FLOAT:
        return ((const float *)row)[j];
    case MOEPERM_FLOAT16:
        return fp_fp16_to_float(((const uint16_t *)row)[j]);
    default:
        return fp_bf16_to_float(((const uint16_t *)row)[j]);
    }
}

static MOEPERM_FORCE_INLINE void moeperm_narrow(moeperm_dtype dtype, void *out, int64_t j,
                                                float value)
{
    switch (dtype) {
    case MOEPERM_FLOAT:
        ((float *)out)[j] = value;
        break;
    case MOEPERM_FLOAT16:
        ((uint16_t *)out)[j] = fp_float_to_fp16(value);
        break;
    default:
        ((uint16_t *)out)[j] = fp_float_to_bf16(value);
        break;
    }
}

#endif
