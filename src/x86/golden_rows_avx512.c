/*
 * x86/golden_rows_avx512.c - the golden generator's row loops
 * (golden_rows_template.h) for the instruction set moeperm_isa_in_use()
 * calls MOEPERM_ISA_X86_AVX512: eight 64-bit lanes, whose multiplies
 * (vpmullq, AVX-512 DQ) make the PRNG's draws, and fp16 narrowed with
 * vcvtps2ph sixteen values at a time.
 */
#include "golden/generate/rows.h"

#ifdef GOLDEN_HAVE_X86_ROWS

#include <immintrin.h>

#define SUFFIX _avx512
#define ATTRIBUTES __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,f16c")))

static inline ATTRIBUTES void narrow_fp16(const float *v, int64_t count, uint16_t *out)
{
    int64_t j = 0;
    for (; j + 16 <= count; j += 16)
        _mm256_storeu_si256((__m256i *)(void *)(out + j),
                            _mm512_cvtps_ph(_mm512_loadu_ps(v + j), _MM_FROUND_TO_NEAREST_INT));
    for (; j < count; j++)
        out[j] = moeperm_float_to_fp16(v[j]);
}

#include "x86/golden_rows_template.h"

#endif
