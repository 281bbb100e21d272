/*
 * x86/golden_rows_avx2.c - the golden generator's row loops
 * (golden_rows_template.h) for AVX2 + F16C, the instruction set
 * moeperm_isa_in_use() calls MOEPERM_ISA_X86_AVX2: eight lanes, the
 * PRNG's 64-bit multiplies made of 32-bit ones, fp16 narrowed with
 * vcvtps2ph eight values at a time.
 */
#include "golden/generate/rows.h"

#ifdef GOLDEN_HAVE_X86_ROWS

#include <immintrin.h>

#define SUFFIX _avx2
#define ATTRIBUTES __attribute__((target("avx2,f16c")))

static inline ATTRIBUTES void narrow_fp16(const float *v, int64_t count, uint16_t *out)
{
    int64_t j = 0;
    for (; j + 8 <= count; j += 8)
        _mm_storeu_si128((__m128i *)(void *)(out + j),
                         _mm256_cvtps_ph(_mm256_loadu_ps(v + j), _MM_FROUND_TO_NEAREST_INT));
    for (; j < count; j++)
        out[j] = moeperm_float_to_fp16(v[j]);
}

#include "x86/golden_rows_template.h"

#endif
