/*
 * x86/vec_avx512.h - the vector primitives of the x86 templates in
 * AVX-512 F, BW and VL: vec_t is sixteen binary32 lanes, a pair of them
 * (thirty-two columns) the unit the templates step over, and the columns
 * left at the end of a row one masked pair.  avx512.c includes this, then
 * the templates; nothing else does.
 *
 * The steps are those of vec_avx2.h at twice the width, tied to fp.h the
 * same way (vcvtph2ps and vcvtps2ph with immediate 0 for fp16, integer
 * operations for bf16: vcvtneps2bf16 would flush subnormals, so it is not
 * used), with mask registers where AVX2 compares into vectors.
 */
#ifndef MOEPERM_X86_VEC_AVX512_H
#define MOEPERM_X86_VEC_AVX512_H

#include <immintrin.h>

#define SUFFIX _avx512
#define ISA_NAME "x86-avx512"
#define ATTRIBUTES __attribute__((target("avx512f,avx512bw,avx512vl,avx2,f16c")))
#define vec_t __m512
#define VL 16
#define USE_MASKING 1
#define mask_t __mmask32

#define PRIMITIVE static MOEPERM_FORCE_INLINE ATTRIBUTES

PRIMITIVE __m512 vzero(void)
{
    return _mm512_setzero_ps();
}

/* moeperm_accumulate() as in vec_avx2.h: the accumulator is the first
 * source, and the asm keeps it there. */
PRIMITIVE __m512 vaccumulate(__m512 acc, __m512 x)
{
    __m512 sum;
    __asm__("vaddps %2, %1, %0" : "=v"(sum) : "v"(acc), "vm"(x));
    return sum;
}

/* A sum and a product whose NaN is never seen, as in vec_avx2.h. */
PRIMITIVE __m512 vadd(__m512 a, __m512 b)
{
    return _mm512_add_ps(a, b);
}

PRIMITIVE __m512 vmul(__m512 a, __m512 b)
{
    return _mm512_mul_ps(a, b);
}

PRIMITIVE __m512 vset1(float p)
{
    return _mm512_set1_ps(p);
}

PRIMITIVE __m512 vset1_lanes(float p, int64_t lanes)
{
    return _mm512_maskz_mov_ps((__mmask16)((1u << lanes) - 1u), _mm512_set1_ps(p));
}

/* x * p with x the first source, as in vec_avx2.h. */
PRIMITIVE __m512 vscale(__m512 x, __m512 p)
{
    __m512 product;
    __asm__("vmulps %2, %1, %0" : "=v"(product) : "v"(x), "vm"(p));
    return product;
}

/* Lane 0. */
PRIMITIVE float vfirst(__m512 v)
{
    return _mm512_cvtss_f32(v);
}

PRIMITIVE __m512 vloadu(const float *p)
{
    return _mm512_loadu_ps(p);
}

PRIMITIVE void vstoreu(float *p, __m512 v)
{
    _mm512_storeu_ps(p, v);
}

/* The sums of neighbouring lanes of the pair (a, b), in order:
 * a0 + a1, ..., a14 + a15, b0 + b1, ..., b14 + b15. */
PRIMITIVE __m512 vpair(__m512 a, __m512 b)
{
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4,
                                          2, 0);
    const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5,
                                         3, 1);
    return _mm512_add_ps(_mm512_permutex2var_ps(a, even, b), _mm512_permutex2var_ps(a, odd, b));
}

/* As in vec_avx2.h: the largest magnitude's bits seen so far. */
PRIMITIVE __m512 vmagnitude_max(__m512 seen, __m512 v)
{
    __m512i bits = _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(0x7fffffff));
    return _mm512_castsi512_ps(_mm512_max_epu32(_mm512_castps_si512(seen), bits));
}

PRIMITIVE uint32_t vmagnitude_reduce(__m512 seen)
{
    return _mm512_reduce_max_epu32(_mm512_castps_si512(seen));
}

PRIMITIVE void widen_f32(const void *p, __m512 *lo, __m512 *hi)
{
    *lo = _mm512_loadu_ps((const float *)p);
    *hi = _mm512_loadu_ps((const float *)p + 16);
}

PRIMITIVE void widen_f16(const void *p, __m512 *lo, __m512 *hi)
{
    *lo = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
    *hi = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p + 1));
}

/* The even columns of 32 bf16 in lo, the odd ones in hi, a word at a
 * time, as vec_avx2.h lays them out. */
PRIMITIVE void bf16_halves(__m512i h, __m512 *even, __m512 *odd)
{
    *even = _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
    *odd = _mm512_castsi512_ps(_mm512_and_si512(h, _mm512_set1_epi32((int)0xffff0000u)));
}

PRIMITIVE __mmask16 nan_lanes(__m512i bits)
{
    return _mm512_cmpgt_epi32_mask(_mm512_and_si512(bits, _mm512_set1_epi32(0x7fffffff)),
                                   _mm512_set1_epi32(0x7f800000));
}

/* fp_bf16_to_float()'s quiet bit for a NaN. */
PRIMITIVE __m512 quiet_bf16(__m512 value)
{
    __m512i bits = _mm512_castps_si512(value);
    return _mm512_castsi512_ps(
        _mm512_mask_or_epi32(bits, nan_lanes(bits), bits, _mm512_set1_epi32(0x00400000)));
}

PRIMITIVE void addend_bf16(const void *p, __m512 *even, __m512 *odd)
{
    bf16_halves(_mm512_loadu_si512(p), even, odd);
}

PRIMITIVE void widen_bf16(const void *p, __m512 *even, __m512 *odd)
{
    addend_bf16(p, even, odd);
    *even = quiet_bf16(*even);
    *odd = quiet_bf16(*odd);
}

/* Sixteen bf16 (a 256-bit half of a pair) in column order, without making
 * a signalling NaN quiet, as in vec_avx2.h. */
PRIMITIVE __m512 bf16_columns(__m256i h)
{
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

PRIMITIVE void columns_bf16(const void *p, __m512 *lo, __m512 *hi)
{
    *lo = bf16_columns(_mm256_loadu_si256((const __m256i *)p));
    *hi = bf16_columns(_mm256_loadu_si256((const __m256i *)p + 1));
}

/* How a narrowing stores: stream 0 ordinarily, 1 (true) non-temporally
 * where p is aligned for it, STREAM_ALIGNED non-temporally, p aligned to
 * the store's size (the caller knows). */
#define STREAM_ALIGNED 2

/* Non-temporal when asked, in the widest form the alignment of p allows;
 * malloc() gives large buffers only 16-byte alignment. */
PRIMITIVE void store512(void *p, __m512i v, int stream)
{
    if (stream == STREAM_ALIGNED || (stream && ((uintptr_t)p & 63u) == 0)) {
        _mm512_stream_si512((__m512i *)p, v);
    } else if (stream && ((uintptr_t)p & 31u) == 0) {
        _mm256_stream_si256((__m256i *)p, _mm512_castsi512_si256(v));
        _mm256_stream_si256((__m256i *)p + 1, _mm512_extracti64x4_epi64(v, 1));
    } else if (stream && ((uintptr_t)p & 15u) == 0) {
        _mm_stream_si128((__m128i *)p, _mm512_castsi512_si128(v));
        _mm_stream_si128((__m128i *)p + 1, _mm512_extracti32x4_epi32(v, 1));
        _mm_stream_si128((__m128i *)p + 2, _mm512_extracti32x4_epi32(v, 2));
        _mm_stream_si128((__m128i *)p + 3, _mm512_extracti32x4_epi32(v, 3));
    } else {
        _mm512_storeu_si512(p, v);
    }
}

PRIMITIVE void narrow_f32(__m512 lo, __m512 hi, void *p, int stream)
{
    store512(p, _mm512_castps_si512(lo), stream);
    store512((float *)p + 16, _mm512_castps_si512(hi), stream);
}

PRIMITIVE __m512i f16_pair(__m512 lo, __m512 hi)
{
    __m256i a = _mm512_cvtps_ph(lo, _MM_FROUND_TO_NEAREST_INT);
    __m256i b = _mm512_cvtps_ph(hi, _MM_FROUND_TO_NEAREST_INT);
    return _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1);
}

PRIMITIVE void narrow_f16(__m512 lo, __m512 hi, void *p, int stream)
{
    store512(p, f16_pair(lo, hi), stream);
}

/* fp_float_to_bf16() as in vec_avx2.h, with a mask register for the NaN
 * lanes (none when finite); the result is left in the upper half of each
 * word. */
PRIMITIVE __m512i round_bf16_as(__m512 value, bool finite)
{
    __m512i bits = _mm512_castps_si512(value);
    __m512i lowest = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
    __m512i rounded =
        _mm512_add_epi32(bits, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lowest));
    if (finite)
        return rounded;
    return _mm512_mask_or_epi32(rounded, nan_lanes(bits), bits, _mm512_set1_epi32(0x00400000));
}

/* Undoes bf16_halves(). */
PRIMITIVE __m512i bf16_pair(__m512 even, __m512 odd, bool finite)
{
    __m512i low = _mm512_srli_epi32(round_bf16_as(even, finite), 16);
    __m512i high =
        _mm512_and_si512(round_bf16_as(odd, finite), _mm512_set1_epi32((int)0xffff0000u));
    return _mm512_or_si512(low, high);
}

PRIMITIVE void narrow_bf16_as(__m512 even, __m512 odd, void *p, int stream, bool finite)
{
    store512(p, bf16_pair(even, odd, finite), stream);
}

PRIMITIVE void narrow_bf16(__m512 even, __m512 odd, void *p, int stream)
{
    narrow_bf16_as(even, odd, p, stream, false);
}

/* Undoes columns_bf16(): the packing works within 128-bit lanes, and one
 * permute of 64-bit pieces puts the columns back in order. */
PRIMITIVE __m512i bf16_columns_pair(__m512 lo, __m512 hi, bool finite)
{
    const __m512i order = _mm512_set_epi64(7, 5, 3, 1, 6, 4, 2, 0);
    __m512i a = _mm512_srli_epi32(round_bf16_as(lo, finite), 16);
    __m512i b = _mm512_srli_epi32(round_bf16_as(hi, finite), 16);
    return _mm512_permutexvar_epi64(order, _mm512_packus_epi32(a, b));
}

PRIMITIVE void narrow_columns_bf16_as(__m512 lo, __m512 hi, void *p, int stream, bool finite)
{
    store512(p, bf16_columns_pair(lo, hi, finite), stream);
}

/* The masked forms: the lanes outside the mask load as zero, are never
 * stored, and do not fault. */
PRIMITIVE void widen_masked_f32(const void *p, __mmask32 mask, __m512 *lo, __m512 *hi)
{
    *lo = _mm512_maskz_loadu_ps((__mmask16)mask, p);
    *hi = _mm512_maskz_loadu_ps((__mmask16)(mask >> 16), (const float *)p + 16);
}

PRIMITIVE void widen_masked_f16(const void *p, __mmask32 mask, __m512 *lo, __m512 *hi)
{
    *lo = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16((__mmask16)mask, p));
    *hi = _mm512_cvtph_ps(
        _mm256_maskz_loadu_epi16((__mmask16)(mask >> 16), (const uint16_t *)p + 16));
}

PRIMITIVE void addend_masked_bf16(const void *p, __mmask32 mask, __m512 *even, __m512 *odd)
{
    bf16_halves(_mm512_maskz_loadu_epi16(mask, p), even, odd);
}

PRIMITIVE void widen_masked_bf16(const void *p, __mmask32 mask, __m512 *even, __m512 *odd)
{
    addend_masked_bf16(p, mask, even, odd);
    *even = quiet_bf16(*even);
    *odd = quiet_bf16(*odd);
}

PRIMITIVE void columns_masked_bf16(const void *p, __mmask32 mask, __m512 *lo, __m512 *hi)
{
    *lo = bf16_columns(_mm256_maskz_loadu_epi16((__mmask16)mask, p));
    *hi = bf16_columns(
        _mm256_maskz_loadu_epi16((__mmask16)(mask >> 16), (const uint16_t *)p + 16));
}

PRIMITIVE void narrow_masked_f32(__m512 lo, __m512 hi, void *p, __mmask32 mask)
{
    _mm512_mask_storeu_ps(p, (__mmask16)mask, lo);
    _mm512_mask_storeu_ps((float *)p + 16, (__mmask16)(mask >> 16), hi);
}

PRIMITIVE void narrow_masked_f16(__m512 lo, __m512 hi, void *p, __mmask32 mask)
{
    _mm512_mask_storeu_epi16(p, mask, f16_pair(lo, hi));
}

PRIMITIVE void narrow_masked_bf16(__m512 even, __m512 odd, void *p, __mmask32 mask)
{
    _mm512_mask_storeu_epi16(p, mask, bf16_pair(even, odd, false));
}

PRIMITIVE void narrow_columns_masked_bf16(__m512 lo, __m512 hi, void *p, __mmask32 mask)
{
    _mm512_mask_storeu_epi16(p, mask, bf16_columns_pair(lo, hi, false));
}

/* One 64-byte line from src to dst, which is 64-byte aligned, past the
 * caches. */
PRIMITIVE void stream_line(char *dst, const char *src)
{
    _mm512_stream_si512((__m512i *)dst, _mm512_loadu_si512(src));
}

#undef PRIMITIVE

#endif
