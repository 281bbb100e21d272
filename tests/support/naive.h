/*
 * naive.h - the tests' own, independent model of docs/arithmetic.md.
 *
 * Nothing here calls libmoeperm: conversions round with double arithmetic
 * and nearbyint() instead of the library's integer tricks, and the operator
 * is the plain triple loop of the spec.  Tests compare the library against
 * this, never against itself.
 */
#ifndef MOEPERM_TEST_NAIVE_H
#define MOEPERM_TEST_NAIVE_H

#include <stdint.h>

#include <moeperm/moeperm.h>

float naive_bf16_to_float(uint16_t bits);
float naive_fp16_to_float(uint16_t bits);
uint16_t naive_float_to_bf16(float value);
uint16_t naive_float_to_fp16(float value);

/* out[t, h] as docs/arithmetic.md defines it, over contiguous row-major buffers. */
void naive_permute_grad(moeperm_dtype dtype, const void *grad, int64_t rows, int64_t hidden,
                        const int32_t *indices, int64_t tokens, int64_t top_k, void *out);

/* SplitMix64: seeded, reproducible test data. */
uint64_t naive_rand(uint64_t *state);

/* bits of a float */
uint32_t naive_bits(float value);
float naive_float(uint32_t bits);

/* Random permutation of 0..n-1 (Fisher-Yates). */
void naive_permutation(uint64_t *state, int32_t *out, int64_t n);

/* Element size of the three float dtypes. */
size_t naive_size(moeperm_dtype dtype);

/* Whether two output buffers agree bit for bit, any NaN equal to any NaN;
 * on disagreement *first gets the first differing element. */
int naive_equal(moeperm_dtype dtype, const void *a, const void *b, int64_t n, int64_t *first);

#endif
