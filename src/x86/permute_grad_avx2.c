/*
 * x86/permute_grad_avx2.c - the segments and conversions of
 * permute_grad_template.h in AVX2 + F16C: sixteen columns at a time, as a
 * pair of vectors of eight binary32 lanes.
 *
 * Each primitive gives the bits of fp.h, to which these vector forms are
 * tied:
 *
 * - fp16 -> float: vcvtph2ps is exact and makes a signalling NaN quiet by
 *   setting bit 22 and keeping the payload, as fp_fp16_to_float().
 * - float -> fp16: vcvtps2ph with immediate 0 rounds to nearest even
 *   whatever MXCSR says, keeps subnormals, overflows to infinity and turns a
 *   NaN into sign | 0x7e00 | mantissa >> 13, as fp_float_to_fp16().
 * - bf16 <-> float: fp_bf16_to_float() and fp_float_to_bf16() are integer
 *   operations, repeated here lane by lane.
 *
 * tests/core/test_fast_conversions_exhaustive.c checks every narrowing and
 * tests/core/test_fast_paths.c every widening against fp.h, and the latter the
 * operator against the portable path bit for bit.
 */
#include "sum/sum.h"

#ifdef MOEPERM_HAVE_X86_PATH

#include <immintrin.h>

#define SUFFIX _avx2
#define ATTRIBUTES __attribute__((target("avx2,f16c")))
#define vec_t __m256
#define VL 8
#define USE_MASKING 0

#define PRIMITIVE static MOEPERM_FORCE_INLINE ATTRIBUTES

PRIMITIVE __m256 vzero(void)
{
    return _mm256_setzero_ps();
}

/* moeperm_accumulate(), eight columns at once: vaddps with the accumulator
 * as first source returns it, made quiet, when it is a NaN, and the asm
 * keeps the compiler from swapping the operands (with _mm256_add_ps it
 * may). */
PRIMITIVE __m256 vaccumulate(__m256 acc, __m256 x)
{
    __m256 sum;
    __asm__("vaddps %2, %1, %0" : "=x"(sum) : "x"(acc), "xm"(x));
    return sum;
}

PRIMITIVE __m256 vset1(float p)
{
    return _mm256_set1_ps(p);
}

/* x * p, eight columns at once, x the first source as in vaccumulate():
 * of two NaNs, vmulps returns that one, made quiet. */
PRIMITIVE __m256 vscale(__m256 x, __m256 p)
{
    __m256 product;
    __asm__("vmulps %2, %1, %0" : "=x"(product) : "x"(x), "xm"(p));
    return product;
}

PRIMITIVE __m256 vloadu(const float *p)
{
    return _mm256_loadu_ps(p);
}

PRIMITIVE void vstoreu(float *p, __m256 v)
{
    _mm256_storeu_ps(p, v);
}

PRIMITIVE void widen_f32(const void *p, __m256 *lo, __m256 *hi)
{
    *lo = _mm256_loadu_ps((const float *)p);
    *hi = _mm256_loadu_ps((const float *)p + 8);
}

PRIMITIVE void widen_f16(const void *p, __m256 *lo, __m256 *hi)
{
    *lo = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
    *hi = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p + 1));
}

/* Sixteen bf16 are read as eight 32-bit words: the even columns are the
 * low halves (shifted up), the odd ones the high halves (masked), so no
 * lane crosses and no shuffle is needed. */
PRIMITIVE void addend_bf16(const void *p, __m256 *even, __m256 *odd)
{
    __m256i h = _mm256_loadu_si256((const __m256i *)p);
    *even = _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
    *odd = _mm256_castsi256_ps(_mm256_and_si256(h, _mm256_set1_epi32((int)0xffff0000u)));
}

/* fp_bf16_to_float()'s quiet bit for a NaN. */
PRIMITIVE __m256 quiet_bf16(__m256 value)
{
    const __m256i magnitude = _mm256_set1_epi32(0x7fffffff);
    const __m256i infinity = _mm256_set1_epi32(0x7f800000);
    const __m256i quiet = _mm256_set1_epi32(0x00400000);
    __m256i bits = _mm256_castps_si256(value);
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(bits, magnitude), infinity);
    return _mm256_castsi256_ps(_mm256_or_si256(bits, _mm256_and_si256(nan, quiet)));
}

PRIMITIVE void widen_bf16(const void *p, __m256 *even, __m256 *odd)
{
    addend_bf16(p, even, odd);
    *even = quiet_bf16(*even);
    *odd = quiet_bf16(*odd);
}

/* Non-temporal when asked and aligned; malloc() gives large buffers only
 * 16-byte alignment, so the 16-byte form is the common one. */
PRIMITIVE void store256(void *p, __m256i v, bool stream)
{
    if (stream && ((uintptr_t)p & 31u) == 0) {
        _mm256_stream_si256((__m256i *)p, v);
    } else if (stream && ((uintptr_t)p & 15u) == 0) {
        _mm_stream_si128((__m128i *)p, _mm256_castsi256_si128(v));
        _mm_stream_si128((__m128i *)p + 1, _mm256_extracti128_si256(v, 1));
    } else {
        _mm256_storeu_si256((__m256i *)p, v);
    }
}

PRIMITIVE void narrow_f32(__m256 lo, __m256 hi, void *p, bool stream)
{
    store256(p, _mm256_castps_si256(lo), stream);
    store256((float *)p + 8, _mm256_castps_si256(hi), stream);
}

PRIMITIVE void narrow_f16(__m256 lo, __m256 hi, void *p, bool stream)
{
    __m128i a = _mm256_cvtps_ph(lo, _MM_FROUND_TO_NEAREST_INT);
    __m128i b = _mm256_cvtps_ph(hi, _MM_FROUND_TO_NEAREST_INT);
    store256(p, _mm256_set_m128i(b, a), stream);
}

/* fp_float_to_bf16(): add 0x7fff plus the lowest kept bit and keep the
 * upper half; a NaN keeps its upper half with the quiet bit set.  The
 * result is left in the upper half of each word. */
PRIMITIVE __m256i round_bf16(__m256 value)
{
    const __m256i magnitude = _mm256_set1_epi32(0x7fffffff);
    const __m256i infinity = _mm256_set1_epi32(0x7f800000);
    const __m256i bias = _mm256_set1_epi32(0x7fff);
    const __m256i one = _mm256_set1_epi32(1);
    const __m256i quiet = _mm256_set1_epi32(0x00400000);
    __m256i bits = _mm256_castps_si256(value);
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(bits, magnitude), infinity);
    __m256i lowest = _mm256_and_si256(_mm256_srli_epi32(bits, 16), one);
    __m256i rounded = _mm256_add_epi32(bits, _mm256_add_epi32(bias, lowest));
    return _mm256_blendv_epi8(rounded, _mm256_or_si256(bits, quiet), nan);
}

/* Puts the even columns' upper halves back in the low halves and the odd
 * ones' in the high halves, undoing widen_bf16(). */
PRIMITIVE void narrow_bf16(__m256 even, __m256 odd, void *p, bool stream)
{
    __m256i low = _mm256_srli_epi32(round_bf16(even), 16);
    __m256i high = _mm256_and_si256(round_bf16(odd), _mm256_set1_epi32((int)0xffff0000u));
    store256(p, _mm256_or_si256(low, high), stream);
}

#undef PRIMITIVE

#include "permute_grad_template.h"

#endif
