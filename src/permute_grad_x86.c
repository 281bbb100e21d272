/*
 * permute_grad_x86.c - the kernel of permute_grad.c in AVX2 + F16C and in
 * AVX-512 (F, BW, VL), for x86-64 CPUs that have them (picked at run time; the
 * portable loop stays the reference and the fallback).
 *
 * The arithmetic is spec §2 exactly as permute_grad.c does it: each vector
 * lane owns one column, the accumulator starts from slot 0 (or +0.0 when
 * slot 0 is dropped), the slots are added one at a time in k order with one
 * binary32 addition each (no FMA, no reassociation; only columns are
 * vectorised) and the sum is narrowed once.  Widening and narrowing give the
 * bits of fp.h, which these vector forms are tied to:
 *
 * - fp16 -> float: vcvtph2ps (both widths) is exact and makes a signalling
 *   NaN quiet by setting bit 22 and keeping the payload, as
 *   fp_fp16_to_float().
 * - float -> fp16: vcvtps2ph with immediate 0 rounds to nearest even
 *   whatever MXCSR says, keeps subnormals, overflows to infinity and turns a
 *   NaN into sign | 0x7e00 | mantissa >> 13, as fp_float_to_fp16().
 * - bf16 <-> float: fp_bf16_to_float() and fp_float_to_bf16() are integer
 *   operations, repeated here lane by lane (AVX-512's vcvtneps2bf16 would
 *   flush subnormals, so it is not used).
 *
 * tests/test_fast_conversions_exhaustive.c checks every narrowing and
 * tests/test_fast_paths.c every widening against fp.h, and the latter the
 * operator against the portable path bit for bit, on both instruction sets.
 * The AVX-512 segments finish with masked vectors; the AVX2 ones finish the
 * columns left over after the last vector step with fp.h itself.
 */
#include "kernel.h"

#ifdef MOEPERM_HAVE_X86_PATH

#include <cpuid.h>
#include <immintrin.h>
#include <stdatomic.h>

#include "fp.h"

#define X86_INLINE static inline __attribute__((always_inline, target("avx2,f16c")))

/* 0 = not yet asked, then 1 | 2 (AVX2 and F16C) | 4 (AVX-512 F, BW and VL
 * too).  CPUID
 * traps to the hypervisor in a virtual machine (microseconds), so it is
 * asked once. */
static atomic_int x86_features;

static int features(void)
{
    int known = atomic_load_explicit(&x86_features, memory_order_relaxed);
    if (known)
        return known;
    /* F16C through CPUID.1:ECX (bit_F16C): clang 14, the fuzz build's
     * compiler, does not know __builtin_cpu_supports("f16c").  "avx2" and
     * "avx512f" also check that the OS saves the YMM / ZMM registers, which
     * F16C needs too. */
    unsigned int eax, ebx, ecx, edx;
    __builtin_cpu_init();
    bool avx2 = __builtin_cpu_supports("avx2") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) &&
                (ecx & bit_F16C) != 0;
    bool avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
                  __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
    known = 1 | (avx2 ? 2 : 0) | (avx512 ? 4 : 0);
    atomic_store_explicit(&x86_features, known, memory_order_relaxed);
    return known;
}

bool moeperm_x86_available(void)
{
    return (features() & 2) != 0;
}

bool moeperm_x86_avx512_available(void)
{
    return (features() & 4) != 0;
}

void moeperm_x86_fence(void)
{
    _mm_sfence();
}

/* Sixteen columns at a time, as two vectors of eight floats.  Which column
 * sits in which lane does not matter as long as widen and narrow agree: the
 * bf16 pair holds the even columns in one vector and the odd in the other. */

X86_INLINE void widen16_f32(const void *p, __m256 *lo, __m256 *hi)
{
    *lo = _mm256_loadu_ps((const float *)p);
    *hi = _mm256_loadu_ps((const float *)p + 8);
}

X86_INLINE void widen16_f16(const void *p, __m256 *lo, __m256 *hi)
{
    *lo = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
    *hi = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p + 1));
}

/* fp_bf16_to_float(): the bits move to the upper half, and a NaN gets the
 * quiet bit.  Sixteen bf16 are read as eight 32-bit words: the even
 * columns are the low halves (shifted up), the odd ones the high halves
 * (masked), so no lane crosses and no shuffle is needed. */
X86_INLINE __m256 quiet_bf16(__m256i bits)
{
    const __m256i magnitude = _mm256_set1_epi32(0x7fffffff);
    const __m256i infinity = _mm256_set1_epi32(0x7f800000);
    const __m256i quiet = _mm256_set1_epi32(0x00400000);
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(bits, magnitude), infinity);
    return _mm256_castsi256_ps(_mm256_or_si256(bits, _mm256_and_si256(nan, quiet)));
}

X86_INLINE void widen16_bf16_addend(const void *p, __m256 *even, __m256 *odd)
{
    __m256i h = _mm256_loadu_si256((const __m256i *)p);
    *even = _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
    *odd = _mm256_castsi256_ps(_mm256_and_si256(h, _mm256_set1_epi32((int)0xffff0000u)));
}

X86_INLINE void widen16_bf16(const void *p, __m256 *even, __m256 *odd)
{
    widen16_bf16_addend(p, even, odd);
    *even = quiet_bf16(_mm256_castps_si256(*even));
    *odd = quiet_bf16(_mm256_castps_si256(*odd));
}

/* widen16_bf16_addend() does not make signalling NaNs quiet: it is used
 * for values that are only ever added to the accumulator, and x86 addition
 * returns a NaN operand made quiet (the first one when both are NaN); making
 * it quiet first sets the same bit 22, so the sum's bits are the same. */
#define widen16_f32_addend widen16_f32
#define widen16_f16_addend widen16_f16

/* Non-temporal when asked and aligned; malloc() gives large buffers only
 * 16-byte alignment, so the 16-byte form is the common one. */
X86_INLINE void store256(void *p, __m256i v, bool stream)
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

X86_INLINE void narrow16_f32(__m256 lo, __m256 hi, void *p, bool stream)
{
    store256(p, _mm256_castps_si256(lo), stream);
    store256((float *)p + 8, _mm256_castps_si256(hi), stream);
}

X86_INLINE void narrow16_f16(__m256 lo, __m256 hi, void *p, bool stream)
{
    __m128i a = _mm256_cvtps_ph(lo, _MM_FROUND_TO_NEAREST_INT);
    __m128i b = _mm256_cvtps_ph(hi, _MM_FROUND_TO_NEAREST_INT);
    store256(p, _mm256_set_m128i(b, a), stream);
}

/* fp_float_to_bf16(): add 0x7fff plus the lowest kept bit and keep the
 * upper half; a NaN keeps its upper half with the quiet bit set.  The
 * result is left in the upper half of each word. */
X86_INLINE __m256i round_bf16(__m256 value)
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
 * ones' in the high halves, undoing widen16_bf16(). */
X86_INLINE void narrow16_bf16(__m256 even, __m256 odd, void *p, bool stream)
{
    __m256i low = _mm256_srli_epi32(round_bf16(even), 16);
    __m256i high = _mm256_and_si256(round_bf16(odd), _mm256_set1_epi32((int)0xffff0000u));
    store256(p, _mm256_or_si256(low, high), stream);
}

/* moeperm_accumulate() of kernel.h, eight columns at once: vaddps with the
 * accumulator as first source returns it, made quiet, when it is a NaN, and
 * the asm keeps the compiler from swapping the operands (with
 * _mm256_add_ps it may). */
X86_INLINE __m256 accumulate(__m256 acc, __m256 x)
{
    __m256 sum;
    __asm__("vaddps %2, %1, %0" : "=x"(sum) : "x"(acc), "xm"(x));
    return sum;
}

/* The same steps with AVX-512: 32 columns per pair of vectors.  The
 * bf16 forms keep the layout of widen16_bf16(), a word at a time. */
#define X512_ISA "avx512f,avx512bw,avx512vl,avx2,f16c"
#define X512_INLINE static inline __attribute__((always_inline, target(X512_ISA)))

X512_INLINE void widen32_f32(const void *p, __m512 *lo, __m512 *hi)
{
    *lo = _mm512_loadu_ps((const float *)p);
    *hi = _mm512_loadu_ps((const float *)p + 16);
}

X512_INLINE void widen32_f16(const void *p, __m512 *lo, __m512 *hi)
{
    *lo = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
    *hi = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p + 1));
}

X512_INLINE void widen32_bf16_addend(const void *p, __m512 *even, __m512 *odd)
{
    __m512i h = _mm512_loadu_si512(p);
    *even = _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
    *odd = _mm512_castsi512_ps(_mm512_and_si512(h, _mm512_set1_epi32((int)0xffff0000u)));
}

X512_INLINE __m512 quiet_bf16_512(__m512 value)
{
    __m512i bits = _mm512_castps_si512(value);
    __mmask16 nan = _mm512_cmpgt_epi32_mask(
        _mm512_and_si512(bits, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
    return _mm512_castsi512_ps(
        _mm512_mask_or_epi32(bits, nan, bits, _mm512_set1_epi32(0x00400000)));
}

X512_INLINE void widen32_bf16(const void *p, __m512 *even, __m512 *odd)
{
    widen32_bf16_addend(p, even, odd);
    *even = quiet_bf16_512(*even);
    *odd = quiet_bf16_512(*odd);
}
#define widen32_f32_addend widen32_f32
#define widen32_f16_addend widen32_f16

X512_INLINE void store512(void *p, __m512i v, bool stream)
{
    if (stream && ((uintptr_t)p & 63u) == 0) {
        _mm512_stream_si512((__m512i *)p, v);
    } else if (stream) {
        store256(p, _mm512_castsi512_si256(v), stream);
        store256((char *)p + 32, _mm512_extracti64x4_epi64(v, 1), stream);
    } else {
        _mm512_storeu_si512(p, v);
    }
}

X512_INLINE void narrow32_f32(__m512 lo, __m512 hi, void *p, bool stream)
{
    store512(p, _mm512_castps_si512(lo), stream);
    store512((float *)p + 16, _mm512_castps_si512(hi), stream);
}

X512_INLINE void narrow32_f16(__m512 lo, __m512 hi, void *p, bool stream)
{
    __m256i a = _mm512_cvtps_ph(lo, _MM_FROUND_TO_NEAREST_INT);
    __m256i b = _mm512_cvtps_ph(hi, _MM_FROUND_TO_NEAREST_INT);
    store512(p, _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1), stream);
}

/* round_bf16() with a mask register for the NaN lanes. */
X512_INLINE __m512i round_bf16_512(__m512 value)
{
    __m512i bits = _mm512_castps_si512(value);
    __mmask16 nan = _mm512_cmpgt_epi32_mask(
        _mm512_and_si512(bits, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
    __m512i lowest = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
    __m512i rounded =
        _mm512_add_epi32(bits, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lowest));
    return _mm512_mask_or_epi32(rounded, nan, bits, _mm512_set1_epi32(0x00400000));
}

X512_INLINE void narrow32_bf16(__m512 even, __m512 odd, void *p, bool stream)
{
    __m512i low = _mm512_srli_epi32(round_bf16_512(even), 16);
    __m512i high =
        _mm512_and_si512(round_bf16_512(odd), _mm512_set1_epi32((int)0xffff0000u));
    store512(p, _mm512_or_si512(low, high), stream);
}

X512_INLINE __m512 accumulate512(__m512 acc, __m512 x)
{
    __m512 sum;
    __asm__("vaddps %2, %1, %0" : "=v"(sum) : "v"(acc), "vm"(x));
    return sum;
}

/* The last columns of a segment (fewer than 32) with masked loads and
 * stores: the lanes past the end load as zero and are never stored, and a
 * masked load does not fault on them.  Returns n. */
#define DEFINE_MASKED_TAIL(suffix, type, widen, addend, narrow_tail)                            \
    X512_INLINE int64_t tail32_##suffix(const void *const *rows, int64_t count,                \
                                        bool zero_start, type *out, int64_t j, int64_t n)      \
    {                                                                                          \
        if (j >= n)                                                                            \
            return n;                                                                          \
        __mmask32 mask = (__mmask32)((UINT64_C(1) << (n - j)) - 1);                            \
        __m512 a0, a1, x0, x1;                                                                 \
        if (zero_start)                                                                        \
            a0 = a1 = _mm512_setzero_ps();                                                     \
        else                                                                                   \
            widen((const type *)rows[0] + j, mask, &a0, &a1);                                  \
        for (int64_t r = zero_start ? 0 : 1; r < count; r++) {                                 \
            addend((const type *)rows[r] + j, mask, &x0, &x1);                                 \
            a0 = accumulate512(a0, x0);                                                        \
            a1 = accumulate512(a1, x1);                                                        \
        }                                                                                      \
        narrow_tail(a0, a1, out + j, mask);                                                    \
        return n;                                                                              \
    }

X512_INLINE void widen32m_f32(const void *p, __mmask32 mask, __m512 *lo, __m512 *hi)
{
    *lo = _mm512_maskz_loadu_ps((__mmask16)mask, p);
    *hi = _mm512_maskz_loadu_ps((__mmask16)(mask >> 16), (const float *)p + 16);
}

X512_INLINE void widen32m_f16(const void *p, __mmask32 mask, __m512 *lo, __m512 *hi)
{
    *lo = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16((__mmask16)mask, p));
    *hi = _mm512_cvtph_ps(
        _mm256_maskz_loadu_epi16((__mmask16)(mask >> 16), (const uint16_t *)p + 16));
}

X512_INLINE void widen32m_bf16_addend(const void *p, __mmask32 mask, __m512 *even, __m512 *odd)
{
    __m512i h = _mm512_maskz_loadu_epi16(mask, p);
    *even = _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
    *odd = _mm512_castsi512_ps(_mm512_and_si512(h, _mm512_set1_epi32((int)0xffff0000u)));
}

X512_INLINE void widen32m_bf16(const void *p, __mmask32 mask, __m512 *even, __m512 *odd)
{
    widen32m_bf16_addend(p, mask, even, odd);
    *even = quiet_bf16_512(*even);
    *odd = quiet_bf16_512(*odd);
}
#define widen32m_f32_addend widen32m_f32
#define widen32m_f16_addend widen32m_f16

X512_INLINE void narrow32m_f32(__m512 lo, __m512 hi, void *p, __mmask32 mask)
{
    _mm512_mask_storeu_ps(p, (__mmask16)mask, lo);
    _mm512_mask_storeu_ps((float *)p + 16, (__mmask16)(mask >> 16), hi);
}

X512_INLINE void narrow32m_f16(__m512 lo, __m512 hi, void *p, __mmask32 mask)
{
    _mm256_mask_storeu_epi16(p, (__mmask16)mask, _mm512_cvtps_ph(lo, _MM_FROUND_TO_NEAREST_INT));
    _mm256_mask_storeu_epi16((uint16_t *)p + 16, (__mmask16)(mask >> 16),
                             _mm512_cvtps_ph(hi, _MM_FROUND_TO_NEAREST_INT));
}

X512_INLINE void narrow32m_bf16(__m512 even, __m512 odd, void *p, __mmask32 mask)
{
    __m512i low = _mm512_srli_epi32(round_bf16_512(even), 16);
    __m512i high =
        _mm512_and_si512(round_bf16_512(odd), _mm512_set1_epi32((int)0xffff0000u));
    _mm512_mask_storeu_epi16(p, mask, _mm512_or_si512(low, high));
}

DEFINE_MASKED_TAIL(f32, float, widen32m_f32, widen32m_f32_addend, narrow32m_f32)
DEFINE_MASKED_TAIL(f16, uint16_t, widen32m_f16, widen32m_f16_addend, narrow32m_f16)
DEFINE_MASKED_TAIL(bf16, uint16_t, widen32m_bf16, widen32m_bf16_addend, narrow32m_bf16)

/* The AVX2 segments finish with the scalar loop alone. */
#define NO_VECTOR_TAIL(rows, count, zero_start, out, j, n) (j)

/* One segment, two pairs of vectors (2 * cols columns) at a time, then one
 * pair, then the rest with `tail` (masked vectors on AVX-512) and whatever
 * is left one column at a time with fp.h and moeperm_accumulate().
 * The rows of the next segment are prefetched one cache line per row at a
 * time, a segment ahead. */
#define DEFINE_SEGMENT(name, isa, vec, cols, zero, widen, addend, narrow, acc, tail, type,    \
                       swiden, snarrow)                                                          \
    __attribute__((target(isa))) void name(                                                   \
        const void *const *rows, int64_t count, bool zero_start, void *out_, int64_t n,          \
        bool stream, const void *const *next, int64_t next_count, int64_t next_n)                \
    {                                                                                            \
        type *out = out_;                                                                        \
        int64_t first = zero_start ? 0 : 1;                                                      \
        int64_t j = 0;                                                                           \
        for (; j + 2 * (cols) <= n; j += 2 * (cols)) {                                           \
            vec a0, a1, a2, a3, x0, x1, x2, x3;                                                  \
            if (j < next_n)                                                                      \
                for (int64_t r = 0; r < next_count; r++)                                         \
                    for (size_t b = 0; b < 2 * (cols) * sizeof(type); b += 64)                   \
                        _mm_prefetch((const char *)((const type *)next[r] + j) + b,              \
                                     _MM_HINT_T1);                                               \
            if (zero_start) {                                                                    \
                a0 = a1 = a2 = a3 = zero();                                                      \
            } else {                                                                             \
                widen((const type *)rows[0] + j, &a0, &a1);                                      \
                widen((const type *)rows[0] + j + (cols), &a2, &a3);                             \
            }                                                                                    \
            for (int64_t r = first; r < count; r++) {                                            \
                addend((const type *)rows[r] + j, &x0, &x1);                                     \
                addend((const type *)rows[r] + j + (cols), &x2, &x3);                            \
                a0 = acc(a0, x0);                                                                \
                a1 = acc(a1, x1);                                                                \
                a2 = acc(a2, x2);                                                                \
                a3 = acc(a3, x3);                                                                \
            }                                                                                    \
            narrow(a0, a1, out + j, stream);                                                     \
            narrow(a2, a3, out + j + (cols), stream);                                            \
        }                                                                                        \
        for (; j + (cols) <= n; j += (cols)) {                                                   \
            vec a0, a1, x0, x1;                                                                  \
            if (zero_start)                                                                      \
                a0 = a1 = zero();                                                                \
            else                                                                                 \
                widen((const type *)rows[0] + j, &a0, &a1);                                      \
            for (int64_t r = first; r < count; r++) {                                            \
                addend((const type *)rows[r] + j, &x0, &x1);                                     \
                a0 = acc(a0, x0);                                                                \
                a1 = acc(a1, x1);                                                                \
            }                                                                                    \
            narrow(a0, a1, out + j, stream);                                                     \
        }                                                                                        \
        j = tail(rows, count, zero_start, out, j, n);                                            \
        for (; j < n; j++) {                                                                     \
            float sum = zero_start ? 0.0f : swiden(((const type *)rows[0])[j]);                  \
            for (int64_t r = first; r < count; r++)                                              \
                sum = moeperm_accumulate(sum, swiden(((const type *)rows[r])[j]));               \
            out[j] = snarrow(sum);                                                               \
        }                                                                                        \
    }

static inline float widen_f32(float x)
{
    return x;
}
static inline float narrow_f32(float x)
{
    return x;
}

DEFINE_SEGMENT(moeperm_x86_segment_f32, "avx2,f16c", __m256, 16, _mm256_setzero_ps, widen16_f32,
               widen16_f32_addend, narrow16_f32, accumulate, NO_VECTOR_TAIL, float, widen_f32,
               narrow_f32)
DEFINE_SEGMENT(moeperm_x86_segment_f16, "avx2,f16c", __m256, 16, _mm256_setzero_ps, widen16_f16,
               widen16_f16_addend, narrow16_f16, accumulate, NO_VECTOR_TAIL, uint16_t,
               fp_fp16_to_float, fp_float_to_fp16)
DEFINE_SEGMENT(moeperm_x86_segment_bf16, "avx2,f16c", __m256, 16, _mm256_setzero_ps,
               widen16_bf16, widen16_bf16_addend, narrow16_bf16, accumulate, NO_VECTOR_TAIL,
               uint16_t, fp_bf16_to_float, fp_float_to_bf16)
DEFINE_SEGMENT(moeperm_x86_segment_f32_avx512, X512_ISA, __m512, 32, _mm512_setzero_ps,
               widen32_f32, widen32_f32_addend, narrow32_f32, accumulate512, tail32_f32, float,
               widen_f32, narrow_f32)
DEFINE_SEGMENT(moeperm_x86_segment_f16_avx512, X512_ISA, __m512, 32, _mm512_setzero_ps,
               widen32_f16, widen32_f16_addend, narrow32_f16, accumulate512, tail32_f16,
               uint16_t, fp_fp16_to_float, fp_float_to_fp16)
DEFINE_SEGMENT(moeperm_x86_segment_bf16_avx512, X512_ISA, __m512, 32, _mm512_setzero_ps,
               widen32_bf16, widen32_bf16_addend, narrow32_bf16, accumulate512, tail32_bf16,
               uint16_t, fp_bf16_to_float, fp_float_to_bf16)

/* The conversions alone, through the same widen and narrow steps.  A bf16
 * vector pair holds word i's low half (element 2i) in "even" lane i and its
 * high half (element 2i + 1) in "odd" lane i. */
#define DEFINE_CONVERSIONS(suffix, isa, vec, cols, widen_bf16, widen_f16, narrow_bf16,     \
                           narrow_f16, storeu, loadu)                                         \
    __attribute__((target(isa))) void moeperm_x86_bf16_to_float##suffix(                    \
        const uint16_t *src, float *dst, size_t n)                                            \
    {                                                                                         \
        size_t i = 0;                                                                         \
        for (; i + (cols) <= n; i += (cols)) {                                                \
            vec even, odd;                                                                    \
            float e[(cols) / 2], o[(cols) / 2];                                               \
            widen_bf16(src + i, &even, &odd);                                                 \
            storeu(e, even);                                                                  \
            storeu(o, odd);                                                                   \
            for (size_t w = 0; w < (cols) / 2; w++) {                                         \
                dst[i + 2 * w] = e[w];                                                        \
                dst[i + 2 * w + 1] = o[w];                                                    \
            }                                                                                 \
        }                                                                                     \
        for (; i < n; i++)                                                                    \
            dst[i] = fp_bf16_to_float(src[i]);                                                \
    }                                                                                         \
    __attribute__((target(isa))) void moeperm_x86_fp16_to_float##suffix(                    \
        const uint16_t *src, float *dst, size_t n)                                            \
    {                                                                                         \
        size_t i = 0;                                                                         \
        for (; i + (cols) <= n; i += (cols)) {                                                \
            vec lo, hi;                                                                       \
            widen_f16(src + i, &lo, &hi);                                                     \
            storeu(dst + i, lo);                                                              \
            storeu(dst + i + (cols) / 2, hi);                                                 \
        }                                                                                     \
        for (; i < n; i++)                                                                    \
            dst[i] = fp_fp16_to_float(src[i]);                                                \
    }                                                                                         \
    __attribute__((target(isa))) void moeperm_x86_float_to_bf16##suffix(                   \
        const float *src, uint16_t *dst, size_t n)                                            \
    {                                                                                         \
        size_t i = 0;                                                                         \
        for (; i + (cols) <= n; i += (cols)) {                                                \
            float e[(cols) / 2], o[(cols) / 2];                                               \
            for (size_t w = 0; w < (cols) / 2; w++) {                                         \
                e[w] = src[i + 2 * w];                                                        \
                o[w] = src[i + 2 * w + 1];                                                    \
            }                                                                                 \
            narrow_bf16(loadu(e), loadu(o), dst + i, false);                                  \
        }                                                                                     \
        for (; i < n; i++)                                                                    \
            dst[i] = fp_float_to_bf16(src[i]);                                                \
    }                                                                                         \
    __attribute__((target(isa))) void moeperm_x86_float_to_fp16##suffix(                   \
        const float *src, uint16_t *dst, size_t n)                                            \
    {                                                                                         \
        size_t i = 0;                                                                         \
        for (; i + (cols) <= n; i += (cols))                                                  \
            narrow_f16(loadu(src + i), loadu(src + i + (cols) / 2), dst + i, false);          \
        for (; i < n; i++)                                                                    \
            dst[i] = fp_float_to_fp16(src[i]);                                                \
    }

DEFINE_CONVERSIONS(, "avx2,f16c", __m256, 16, widen16_bf16, widen16_f16, narrow16_bf16,
                   narrow16_f16, _mm256_storeu_ps, _mm256_loadu_ps)
DEFINE_CONVERSIONS(_avx512, X512_ISA, __m512, 32, widen32_bf16, widen32_f16,
                   narrow32_bf16, narrow32_f16, _mm512_storeu_ps, _mm512_loadu_ps)

#endif
