/*
 * rows.c - the row loops: blocks of a row that the compiler vectorises,
 * built twice (portable, and for AVX-512 where the PRNG's 64-bit
 * multiplies are vector instructions), and the choice between them at run
 * time.  Every loop gives an element the bits golden_element_bits() gives
 * it (rows.h).
 */
#include "golden/generate/rows.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "golden/common/prng.h"
#include "golden/generate/normal.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define HAVE_AVX512_ROWS 1
#define AVX512_ROWS_TARGET __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,f16c")))
#endif

row_kind golden_row_kind_of(moeperm_dtype dtype, moeperm_golden_values values)
{
    if (dtype == MOEPERM_INT8)
        return ROW_INT8;
    switch (values) {
    case MOEPERM_GOLDEN_VALUES_NORMAL:
        return ROW_NORMAL;
    case MOEPERM_GOLDEN_VALUES_BITS:
        return ROW_BITS;
    case MOEPERM_GOLDEN_VALUES_NEGZERO:
        return ROW_NEGZERO;
    default:
        return ROW_ELEMENTS;
    }
}

/* Elements per block: the normal values of a block wait in a float array
 * on the stack before they are narrowed. */
enum { ROW_BLOCK = 256 };

/* moeperm_float_to_bf16() for a finite v: adding 0x7fff plus the lowest
 * kept bit carries into the kept half exactly when round to nearest even
 * rounds up.  Written out here because a call per element would cost as
 * much as making the value; NaNs, the one case it leaves out, are never
 * made by the row loops. */
static inline uint16_t bf16_of_finite(float v)
{
    uint32_t bits = float_bits(v);
    return (uint16_t)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

#ifdef HAVE_AVX512_ROWS
AVX512_ROWS_TARGET static void narrow_fp16_f16c(const float *v, int64_t count, uint16_t *out)
{
    int64_t j = 0;
    for (; j + 16 <= count; j += 16)
        _mm256_storeu_si256((__m256i *)(void *)(out + j),
                            _mm512_cvtps_ph(_mm512_loadu_ps(v + j), _MM_FROUND_TO_NEAREST_INT));
    for (; j < count; j++)
        out[j] = moeperm_float_to_fp16(v[j]);
}
#endif

/* count <= ROW_BLOCK elements of a row_kind other than ROW_ELEMENTS, the
 * first drawing n and n + 1 from key; f16c: narrow fp16 with vcvtps2ph
 * (only where the caller is built for it). */
static inline __attribute__((always_inline)) void row_block(row_kind kind, moeperm_dtype dtype,
                                                            uint64_t key, uint64_t n,
                                                            int64_t count, void *dst, bool f16c)
{
    uint8_t *bytes = dst;
    uint16_t *halves = dst;
    uint32_t *words = dst;
    switch (kind) {
    case ROW_INT8:
        for (int64_t j = 0; j < count; j++)
            bytes[j] = (uint8_t)prng_draw(key, n + 2 * (uint64_t)j);
        return;
    case ROW_BITS:
        for (int64_t j = 0; j < count; j++) {
            uint64_t d = prng_draw(key, n + 2 * (uint64_t)j);
            if (dtype == MOEPERM_FLOAT)
                words[j] = (uint32_t)d;
            else
                halves[j] = (uint16_t)d;
        }
        return;
    case ROW_NEGZERO:
        for (int64_t j = 0; j < count; j++) {
            if (dtype == MOEPERM_FLOAT)
                words[j] = 0x80000000u;
            else
                halves[j] = 0x8000u;
        }
        return;
    default:
        break;
    }
    float v[ROW_BLOCK];
    float *values = dtype == MOEPERM_FLOAT ? dst : v;
    for (int64_t j = 0; j < count; j++)
        values[j] = normal_value(prng_draw(key, n + 2 * (uint64_t)j),
                                 prng_draw(key, n + 2 * (uint64_t)j + 1));
    if (dtype == MOEPERM_BF16) {
        for (int64_t j = 0; j < count; j++)
            halves[j] = bf16_of_finite(v[j]);
    } else if (dtype == MOEPERM_FLOAT16) {
#ifdef HAVE_AVX512_ROWS
        if (f16c) {
            narrow_fp16_f16c(v, count, halves);
            return;
        }
#endif
        moeperm_convert(v, MOEPERM_FLOAT, halves, MOEPERM_FLOAT16, (size_t)count);
    }
}

static inline __attribute__((always_inline)) void row_loop(row_kind kind, moeperm_dtype dtype,
                                                           uint64_t key, uint64_t n,
                                                           int64_t count, void *dst, bool f16c)
{
    size_t size = dtype == MOEPERM_FLOAT ? 4 : dtype == MOEPERM_INT8 ? 1 : 2;
    for (int64_t j = 0; j < count; j += ROW_BLOCK)
        row_block(kind, dtype, key, n + 2 * (uint64_t)j,
                  count - j < ROW_BLOCK ? count - j : ROW_BLOCK,
                  (uint8_t *)dst + (size_t)j * size, f16c);
}

static void row_portable(row_kind kind, moeperm_dtype dtype, uint64_t key, uint64_t n,
                         int64_t count, void *dst)
{
    row_loop(kind, dtype, key, n, count, dst, false);
}

#ifdef HAVE_AVX512_ROWS
AVX512_ROWS_TARGET static void row_avx512(row_kind kind, moeperm_dtype dtype, uint64_t key,
                                          uint64_t n, int64_t count, void *dst)
{
    row_loop(kind, dtype, key, n, count, dst, true);
}
#endif

row_fn *golden_row_loops(void)
{
#ifdef HAVE_AVX512_ROWS
    static atomic_int chosen; /* 0: not yet; 1: portable; 2: AVX-512 */
    int c = atomic_load_explicit(&chosen, memory_order_relaxed);
    if (c == 0) {
        const char *force = getenv("MOEPERM_FORCE_PORTABLE");
        unsigned int eax, ebx, ecx, edx;
        __builtin_cpu_init();
        bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                      __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
        c = avx512 && !(force && *force && strcmp(force, "0") != 0) ? 2 : 1;
        atomic_store_explicit(&chosen, c, memory_order_relaxed);
    }
    if (c == 2)
        return row_avx512;
#endif
    return row_portable;
}
