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
 * loops over blocks of a row that the compiler vectorises, written once
 * (x86/golden_rows_template.h) and built for each instruction set of
 * libmoeperm's: the one moeperm_isa_in_use() names runs.  The other kinds
 * go element by element through golden_element_bits().  Every path gives
 * an element the bits golden_element_bits() gives it: the same draws, the
 * same value, the same rounding as moeperm_float_to_bf16() and
 * moeperm_float_to_fp16().
 */
typedef enum row_kind { ROW_ELEMENTS, ROW_NORMAL, ROW_BITS, ROW_INT8, ROW_NEGZERO } row_kind;

/* The row loop of a tensor of dtype and value kind values: ROW_ELEMENTS
 * when its elements go one by one through golden_element_bits(). */
row_kind golden_row_kind_of(moeperm_dtype dtype, moeperm_golden_values values);

/* count elements of kind (not ROW_ELEMENTS) in dst, the first drawing n
 * and n + 1 from key. */
typedef void row_fn(row_kind kind, moeperm_dtype dtype, uint64_t key, uint64_t n, int64_t count,
                    void *dst);

/* The row loops of the instruction set libmoeperm's runs use now
 * (moeperm_isa_in_use(): the best this CPU has, the portable loops under
 * MOEPERM_FORCE_PORTABLE, or what moeperm_isa_choose() chose). */
row_fn *golden_row_loops(void);

/* The builds of the row loops: portable everywhere, and on x86 with a GNU
 * C compiler (its intrinsics and target attributes) for AVX2 + F16C and
 * for AVX-512. */
row_fn golden_rows_portable;
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define GOLDEN_HAVE_X86_ROWS 1
row_fn golden_rows_avx2;
row_fn golden_rows_avx512;
#endif

#endif
