/*
 * x86/golden_rows_template.h - template for the golden generator's row
 * loops (golden/generate/rows.h): a whole row of a tensor whose value kind
 * needs nothing but each element's own draws, in blocks that the compiler
 * vectorises for the instruction set it is told to build for.
 *
 * These loops belong to libmoeperm-golden (src/golden/meson.build lists
 * the files), not to libmoeperm: they live here beside the operators'
 * templates because they are built the same way, once per instruction
 * set.  A file (golden_rows_avx2.c, golden_rows_avx512.c; the portable
 * build is golden/generate/rows.c's) defines the parameters and the
 * primitive below, then includes this file, once per translation unit:
 *
 * SUFFIX:
 *	Name suffix of the instantiated row function (golden_rows_avx2 ...).
 * ATTRIBUTES:
 *	The target attribute of every function, e.g.
 *	__attribute__((target("avx2,f16c"))), or nothing.
 *
 * and the primitive, `static inline ATTRIBUTES`:
 *
 *	void narrow_fp16(const float *v, int64_t count, uint16_t *out);
 *
 * which gives out[j] the bits moeperm_float_to_fp16() gives v[j] (the
 * x86 files use vcvtps2ph, which the library's own fast paths hold to the
 * same bits, tests/core/test_fast_conversions_exhaustive.c checking every
 * input).  Where the PRNG's 64-bit multiplies are vector instructions
 * (AVX-512 DQ) a normal element takes about 0.4 ns, against 2 ns with
 * AVX2 and 2.2 to 3.7 portable (docs/performance.md); every build gives
 * every element the bits golden_element_bits() gives it (the corpus
 * regenerates byte for byte on the best build and on the portable one).
 */

#include <stdint.h>

#include "golden/common/prng.h"
#include "golden/generate/normal.h"
#include "golden/generate/rows.h"

#define GOLDEN_ROWS_CONCAT_(a, b) a##b
#define GOLDEN_ROWS_CONCAT(a, b) GOLDEN_ROWS_CONCAT_(a, b)
#define GOLDEN_ROWS_NAME(name) GOLDEN_ROWS_CONCAT(name, SUFFIX)

/* Elements per block: the normal values of a block wait in a float array
 * on the stack before they are narrowed. */
enum { ROW_BLOCK = 256 };

/* moeperm_float_to_bf16() for a finite v: adding 0x7fff plus the lowest
 * kept bit carries into the kept half exactly when round to nearest even
 * rounds up.  Written out here because a call per element would cost as
 * much as making the value; NaNs, the one case it leaves out, are never
 * made by the row loops. */
static inline ATTRIBUTES uint16_t bf16_of_finite(float v)
{
    uint32_t bits = float_bits(v);
    return (uint16_t)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

/* count <= ROW_BLOCK elements of a row_kind other than ROW_ELEMENTS, the
 * first drawing n and n + 1 from key. */
static inline __attribute__((always_inline)) ATTRIBUTES void
row_block(row_kind kind, moeperm_dtype dtype, uint64_t key, uint64_t n, int64_t count, void *dst)
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
        narrow_fp16(v, count, halves);
    }
}

/* The row_fn of this build (rows.h). */
ATTRIBUTES void GOLDEN_ROWS_NAME(golden_rows)(row_kind kind, moeperm_dtype dtype, uint64_t key,
                                              uint64_t n, int64_t count, void *dst)
{
    size_t size = dtype == MOEPERM_FLOAT ? 4 : dtype == MOEPERM_INT8 ? 1 : 2;
    for (int64_t j = 0; j < count; j += ROW_BLOCK)
        row_block(kind, dtype, key, n + 2 * (uint64_t)j,
                  count - j < ROW_BLOCK ? count - j : ROW_BLOCK,
                  (uint8_t *)dst + (size_t)j * size);
}
