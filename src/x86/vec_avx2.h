/*
 * x86/vec_avx2.h - the vector primitives of the x86 templates in AVX2 +
 * F16C: vec_t is eight binary32 lanes, and a pair of them (sixteen
 * columns) is the unit the templates step over.  avx2.c includes this,
 * then the templates; nothing else does.
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
 * tests/core/test_fast_paths.c every widening against fp.h, and the
 * operators against their portable loops bit for bit.
 */
#ifndef MOEPERM_X86_VEC_AVX2_H
#define MOEPERM_X86_VEC_AVX2_H

#include <immintrin.h>

#define SUFFIX _avx2
#define ISA_NAME "x86-avx2"
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

/* A sum and a product whose NaN, if any, is never seen (MoeTokenUnpermuteGrad's
 * probs_grad turns every NaN into one quiet NaN), so the operand order is
 * the compiler's.  Separate instructions: the build forbids contraction. */
PRIMITIVE __m256 vadd(__m256 a, __m256 b)
{
    return _mm256_add_ps(a, b);
}

PRIMITIVE __m256 vmul(__m256 a, __m256 b)
{
    return _mm256_mul_ps(a, b);
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

/* Lane 0. */
PRIMITIVE float vfirst(__m256 v)
{
    return _mm256_cvtss_f32(v);
}

PRIMITIVE __m256 vloadu(const float *p)
{
    return _mm256_loadu_ps(p);
}

PRIMITIVE void vstoreu(float *p, __m256 v)
{
    _mm256_storeu_ps(p, v);
}

/* The sums of neighbouring lanes of the pair (a, b), in order:
 * a0 + a1, a2 + a3, ..., b6 + b7.  The in-lane shuffles leave the sums of
 * a and b interleaved by 64-bit halves, which one permute puts back. */
PRIMITIVE __m256 vpair(__m256 a, __m256 b)
{
    __m256 sums = _mm256_add_ps(_mm256_shuffle_ps(a, b, 0x88), _mm256_shuffle_ps(a, b, 0xdd));
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(sums), 0xd8));
}

/* The largest magnitude's bits seen so far (an unsigned maximum of the
 * bits without their sign): at least 0x7f800000 once an infinity or a NaN
 * went by. */
PRIMITIVE __m256 vmagnitude_max(__m256 seen, __m256 v)
{
    __m256i bits = _mm256_and_si256(_mm256_castps_si256(v), _mm256_set1_epi32(0x7fffffff));
    return _mm256_castsi256_ps(_mm256_max_epu32(_mm256_castps_si256(seen), bits));
}

PRIMITIVE uint32_t vmagnitude_reduce(__m256 seen)
{
    uint32_t lanes[8], most = 0;
    _mm256_storeu_si256((__m256i *)lanes, _mm256_castps_si256(seen));
    for (int i = 0; i < 8; i++)
        most = lanes[i] > most ? lanes[i] : most;
    return most;
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

/* Sixteen bf16 in column order, eight to a vector, without making a
 * signalling NaN quiet (for values that are only multiplied). */
PRIMITIVE void columns_bf16(const void *p, __m256 *lo, __m256 *hi)
{
    __m256i a = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    __m256i b = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p + 1));
    *lo = _mm256_castsi256_ps(_mm256_slli_epi32(a, 16));
    *hi = _mm256_castsi256_ps(_mm256_slli_epi32(b, 16));
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

/* How a narrowing stores: stream 0 ordinarily, 1 (true) non-temporally
 * where p is aligned for it, STREAM_ALIGNED non-temporally, p aligned to
 * the store's size (the caller knows). */
#define STREAM_ALIGNED 2

/* Non-temporal when asked and aligned; malloc() gives large buffers only
 * 16-byte alignment, so the 16-byte form is the common one. */
PRIMITIVE void store256(void *p, __m256i v, int stream)
{
    if (stream == STREAM_ALIGNED || (stream && ((uintptr_t)p & 31u) == 0)) {
        _mm256_stream_si256((__m256i *)p, v);
    } else if (stream && ((uintptr_t)p & 15u) == 0) {
        _mm_stream_si128((__m128i *)p, _mm256_castsi256_si128(v));
        _mm_stream_si128((__m128i *)p + 1, _mm256_extracti128_si256(v, 1));
    } else {
        _mm256_storeu_si256((__m256i *)p, v);
    }
}

PRIMITIVE void narrow_f32(__m256 lo, __m256 hi, void *p, int stream)
{
    store256(p, _mm256_castps_si256(lo), stream);
    store256((float *)p + 8, _mm256_castps_si256(hi), stream);
}

PRIMITIVE void narrow_f16(__m256 lo, __m256 hi, void *p, int stream)
{
    __m128i a = _mm256_cvtps_ph(lo, _MM_FROUND_TO_NEAREST_INT);
    __m128i b = _mm256_cvtps_ph(hi, _MM_FROUND_TO_NEAREST_INT);
    store256(p, _mm256_set_m128i(b, a), stream);
}

/* fp_float_to_bf16(): add 0x7fff plus the lowest kept bit and keep the
 * upper half; a NaN keeps its upper half with the quiet bit set (unless
 * the caller knows there is none: finite).  The result is left in the
 * upper half of each word. */
PRIMITIVE __m256i round_bf16_as(__m256 value, bool finite)
{
    const __m256i magnitude = _mm256_set1_epi32(0x7fffffff);
    const __m256i infinity = _mm256_set1_epi32(0x7f800000);
    const __m256i bias = _mm256_set1_epi32(0x7fff);
    const __m256i one = _mm256_set1_epi32(1);
    const __m256i quiet = _mm256_set1_epi32(0x00400000);
    __m256i bits = _mm256_castps_si256(value);
    __m256i lowest = _mm256_and_si256(_mm256_srli_epi32(bits, 16), one);
    __m256i rounded = _mm256_add_epi32(bits, _mm256_add_epi32(bias, lowest));
    if (finite)
        return rounded;
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(bits, magnitude), infinity);
    return _mm256_blendv_epi8(rounded, _mm256_or_si256(bits, quiet), nan);
}

/* Puts the even columns' upper halves back in the low halves and the odd
 * ones' in the high halves, undoing widen_bf16(); finite: no lane is a
 * NaN. */
PRIMITIVE void narrow_bf16_as(__m256 even, __m256 odd, void *p, int stream, bool finite)
{
    __m256i low = _mm256_srli_epi32(round_bf16_as(even, finite), 16);
    __m256i high =
        _mm256_and_si256(round_bf16_as(odd, finite), _mm256_set1_epi32((int)0xffff0000u));
    store256(p, _mm256_or_si256(low, high), stream);
}

PRIMITIVE void narrow_bf16(__m256 even, __m256 odd, void *p, int stream)
{
    narrow_bf16_as(even, odd, p, stream, false);
}

/* The inverse of columns_bf16(): the packing works within 128-bit lanes,
 * so the halves come out interleaved, and one permute puts them back. */
PRIMITIVE void narrow_columns_bf16_as(__m256 lo, __m256 hi, void *p, int stream, bool finite)
{
    __m256i a = _mm256_srli_epi32(round_bf16_as(lo, finite), 16);
    __m256i b = _mm256_srli_epi32(round_bf16_as(hi, finite), 16);
    store256(p, _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xd8), stream);
}

/* One 64-byte line from src to dst, which is 64-byte aligned, past the
 * caches. */
PRIMITIVE void stream_line(char *dst, const char *src)
{
    __m256i a = _mm256_loadu_si256((const __m256i *)src);
    __m256i b = _mm256_loadu_si256((const __m256i *)src + 1);
    _mm256_stream_si256((__m256i *)dst, a);
    _mm256_stream_si256((__m256i *)dst + 1, b);
}

#undef PRIMITIVE

#endif
