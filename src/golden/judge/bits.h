/*
 * bits.h - elements as raw bits, for the judge's files (where, stats,
 * diagnose): a tensor of any dtype is read as unsigned integers, so that
 * NaN payloads, signed zeros and subnormals are seen as they are, and the
 * classification of a value (NaN, infinity, subnormal) is written once.
 * Internal to the golden library; static inline so each file gets its own.
 */
#ifndef MOEPERM_GOLDEN_JUDGE_BITS_H
#define MOEPERM_GOLDEN_JUDGE_BITS_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <moeperm/moeperm.h>

static inline bool golden_bits_is_float(moeperm_dtype dtype)
{
    return dtype == MOEPERM_FLOAT || dtype == MOEPERM_FLOAT16 || dtype == MOEPERM_BF16;
}

/* moeperm_dtype_size(), inline: the loads below run once per element, and
 * a call into libmoeperm for each would cost more than the load. */
static inline size_t golden_bits_size(moeperm_dtype dtype)
{
    switch (dtype) {
    case MOEPERM_INT8:
        return 1;
    case MOEPERM_FLOAT16:
    case MOEPERM_BF16:
        return 2;
    case MOEPERM_FLOAT:
    case MOEPERM_INT32:
        return 4;
    case MOEPERM_INT64:
    case MOEPERM_FLOAT64:
        return 8;
    }
    return 0;
}

static inline uint64_t golden_bits_load(moeperm_dtype dtype, const void *data, uint64_t i)
{
    const uint8_t *p = data;
    switch (golden_bits_size(dtype)) {
    case 1:
        return p[i];
    case 2: {
        uint16_t v;
        memcpy(&v, p + 2 * i, 2);
        return v;
    }
    case 4: {
        uint32_t v;
        memcpy(&v, p + 4 * i, 4);
        return v;
    }
    default: {
        uint64_t v;
        memcpy(&v, p + 8 * i, 8);
        return v;
    }
    }
}

static inline void golden_bits_store(moeperm_dtype dtype, void *data, uint64_t i, uint64_t v)
{
    uint8_t *p = data;
    switch (golden_bits_size(dtype)) {
    case 1:
        p[i] = (uint8_t)v;
        return;
    case 2: {
        uint16_t w = (uint16_t)v;
        memcpy(p + 2 * i, &w, 2);
        return;
    }
    case 4: {
        uint32_t w = (uint32_t)v;
        memcpy(p + 4 * i, &w, 4);
        return;
    }
    default:
        memcpy(p + 8 * i, &v, 8);
        return;
    }
}

/* The sign bit, the exponent field and the mantissa field of a float dtype
 * (0 for the integer dtypes, which have none of these). */
static inline uint64_t golden_bits_sign(moeperm_dtype dtype)
{
    switch (dtype) {
    case MOEPERM_FLOAT:
        return 0x80000000u;
    case MOEPERM_FLOAT16:
    case MOEPERM_BF16:
        return 0x8000u;
    default:
        return 0;
    }
}

static inline uint64_t golden_bits_exponent(moeperm_dtype dtype)
{
    switch (dtype) {
    case MOEPERM_FLOAT:
        return 0x7f800000u;
    case MOEPERM_FLOAT16:
        return 0x7c00u;
    case MOEPERM_BF16:
        return 0x7f80u;
    default:
        return 0;
    }
}

static inline bool golden_bits_is_nan(moeperm_dtype dtype, uint64_t v)
{
    uint64_t e = golden_bits_exponent(dtype);
    return e && (v & e) == e && (v & (golden_bits_sign(dtype) - 1) & ~e) != 0;
}

static inline bool golden_bits_is_inf(moeperm_dtype dtype, uint64_t v)
{
    uint64_t e = golden_bits_exponent(dtype);
    return e && (v & (golden_bits_sign(dtype) - 1)) == e;
}

static inline bool golden_bits_is_finite(moeperm_dtype dtype, uint64_t v)
{
    uint64_t e = golden_bits_exponent(dtype);
    return !e || (v & e) != e;
}

/* Nonzero with a zero exponent field. */
static inline bool golden_bits_is_subnormal(moeperm_dtype dtype, uint64_t v)
{
    uint64_t e = golden_bits_exponent(dtype);
    return e && (v & e) == 0 && (v & (golden_bits_sign(dtype) - 1)) != 0;
}

/* The largest finite magnitude: 0x7f7fffff, 0x7bff, 0x7f7f. */
static inline uint64_t golden_bits_max_finite(moeperm_dtype dtype)
{
    return golden_bits_exponent(dtype) - 1;
}

/* Equal as the comparator judges: the same bits, or two NaNs unless
 * strict_nan. */
static inline bool golden_bits_same(moeperm_dtype dtype, uint64_t a, uint64_t b, bool strict_nan)
{
    return a == b || (!strict_nan && golden_bits_is_nan(dtype, a) && golden_bits_is_nan(dtype, b));
}

/* The exact value of bits of dtype as a double (integers up to 2^53
 * exactly, int64 beyond that rounded). */
static inline double golden_bits_double(moeperm_dtype dtype, uint64_t v)
{
    switch (dtype) {
    case MOEPERM_FLOAT: {
        uint32_t w = (uint32_t)v;
        float f;
        memcpy(&f, &w, 4);
        return f;
    }
    case MOEPERM_FLOAT16:
        return moeperm_fp16_to_float((uint16_t)v);
    case MOEPERM_BF16:
        return moeperm_bf16_to_float((uint16_t)v);
    case MOEPERM_INT8:
        return (int8_t)v;
    case MOEPERM_INT32:
        return (int32_t)v;
    default:
        return (double)(int64_t)v;
    }
}

/*
 * GOLDEN_BITS_SPECIALISE(dtype, body, ...) calls body(D, ...) with D the
 * constant that equals dtype.  body is a static function marked
 * GOLDEN_BITS_INLINE, so each dtype gets a loop of its own in which every
 * switch above folds away: what the judge's passes over whole outputs
 * (hundreds of millions of elements) use.
 */
#if defined(__GNUC__)
#define GOLDEN_BITS_INLINE inline __attribute__((always_inline))
#else
#define GOLDEN_BITS_INLINE inline
#endif

#define GOLDEN_BITS_SPECIALISE(dtype, body, ...)                                                   \
    do {                                                                                           \
        switch (dtype) {                                                                           \
        case MOEPERM_FLOAT:                                                                        \
            body(MOEPERM_FLOAT, __VA_ARGS__);                                                      \
            break;                                                                                 \
        case MOEPERM_FLOAT16:                                                                      \
            body(MOEPERM_FLOAT16, __VA_ARGS__);                                                    \
            break;                                                                                 \
        case MOEPERM_BF16:                                                                         \
            body(MOEPERM_BF16, __VA_ARGS__);                                                       \
            break;                                                                                 \
        case MOEPERM_INT8:                                                                         \
            body(MOEPERM_INT8, __VA_ARGS__);                                                       \
            break;                                                                                 \
        case MOEPERM_INT32:                                                                        \
            body(MOEPERM_INT32, __VA_ARGS__);                                                      \
            break;                                                                                 \
        default:                                                                                   \
            body(MOEPERM_INT64, __VA_ARGS__);                                                      \
            break;                                                                                 \
        }                                                                                          \
    } while (0)

#endif
