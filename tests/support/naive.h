/*
 * naive.h - the tests' own, independent conversions, and the helpers every
 * model of the operators (naive_*.c) and every test shares.
 *
 * Nothing here calls libmoeperm: conversions round with double arithmetic
 * and nearbyint() instead of the library's integer tricks.  Tests compare
 * the library against these, never against itself.
 */
#ifndef MOEPERM_TEST_NAIVE_H
#define MOEPERM_TEST_NAIVE_H

#include <stdint.h>

#include <moeperm/moeperm.h>

float naive_bf16_to_float(uint16_t bits);
float naive_fp16_to_float(uint16_t bits);
uint16_t naive_float_to_bf16(float value);
uint16_t naive_float_to_fp16(float value);

/* Element i of a contiguous buffer of dtype (FLOAT, FLOAT16, BF16), widened
 * with the conversions above. */
float naive_load(moeperm_dtype dtype, const void *base, int64_t i);

/* SplitMix64: seeded, reproducible test data. */
uint64_t naive_rand(uint64_t *state);

/* bits of a float */
uint32_t naive_bits(float value);
float naive_float(uint32_t bits);

/* n ordinary values of dtype, seeded: both signs, magnitudes in
 * [2^-11, 2^-3), so that sums of a few hundred stay far from overflow but
 * their order shows in the bits. */
void naive_fill_ordinary(uint64_t *state, moeperm_dtype dtype, void *buf, int64_t n);

/* Random permutation of 0..n-1 (Fisher-Yates). */
void naive_permutation(uint64_t *state, int32_t *out, int64_t n);

/* Element size of the three float dtypes. */
size_t naive_size(moeperm_dtype dtype);

/* Whether two output buffers agree bit for bit, any NaN equal to any NaN;
 * on disagreement *first gets the first differing element. */
int naive_equal(moeperm_dtype dtype, const void *a, const void *b, int64_t n, int64_t *first);

#endif
