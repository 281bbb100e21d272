/*
 * rows.h - the row loops of the generator: a whole row of a tensor whose
 * value kind needs nothing but each element's own draws, in one call, on
 * the vector instructions this CPU has.
 */
#ifndef MOEPERM_GOLDEN_GENERATE_ROWS_H
#define MOEPERM_GOLDEN_GENERATE_ROWS_H

#include <stdint.h>

#include <moeperm/golden.h>

/*
 * A tensor is made a row at a time: the elements (t, k, 0..H-1), whose
 * value draws are n + 2h and n + 2h + 1 with n = 2 (t K + k) H.  The kinds
 * that need nothing but an element's own draws (normal values, random
 * bits, int8 bytes, -0), which is what large cases are made of, run as
 * loops over blocks of a row that the compiler vectorises, built a second
 * time for AVX-512, where the PRNG's 64-bit multiplies are vector
 * instructions, and chosen at run time.  The other kinds go element by
 * element through golden_element_bits().  Every path gives an element the
 * bits golden_element_bits() gives it: the same draws, the same value, the
 * same rounding as moeperm_float_to_bf16() and moeperm_float_to_fp16()
 * (see bf16_of_finite(); vcvtps2ph, which the library's own fast paths
 * hold to the same bits, tests/core/test_fast_conversions_exhaustive.c
 * checking every input; or moeperm_convert() itself).
 */
typedef enum row_kind { ROW_ELEMENTS, ROW_NORMAL, ROW_BITS, ROW_INT8, ROW_NEGZERO } row_kind;

/* The row loop of a tensor of dtype and value kind values: ROW_ELEMENTS
 * when its elements go one by one through golden_element_bits(). */
row_kind golden_row_kind_of(moeperm_dtype dtype, moeperm_golden_values values);

/* count elements of kind (not ROW_ELEMENTS) in dst, the first drawing n
 * and n + 1 from key. */
typedef void row_fn(row_kind kind, moeperm_dtype dtype, uint64_t key, uint64_t n, int64_t count,
                    void *dst);

/* The row loops for this CPU, chosen once: AVX-512 (F, DQ, BW, VL) with
 * F16C where the CPU has them, unless MOEPERM_FORCE_PORTABLE is set (not
 * to 0), which turns the library's fast paths off too. */
row_fn *golden_row_loops(void);

#endif
