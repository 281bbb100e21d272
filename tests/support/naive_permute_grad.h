/*
 * naive_permute_grad.h - the tests' own, independent model of
 * MoeTokenPermuteGrad (docs/arithmetic.md).
 *
 * Nothing here calls libmoeperm: the operator is the plain triple loop of
 * the spec with naive.c's conversions.  Tests compare the library against
 * this, never against itself.
 */
#ifndef MOEPERM_TEST_NAIVE_PERMUTE_GRAD_H
#define MOEPERM_TEST_NAIVE_PERMUTE_GRAD_H

#include <stdint.h>

#include <moeperm/moeperm.h>

/* out[t, h] as docs/arithmetic.md defines it, over contiguous row-major buffers. */
void naive_permute_grad(moeperm_dtype dtype, const void *grad, int64_t rows, int64_t hidden,
                        const int32_t *indices, int64_t tokens, int64_t top_k, void *out);

#endif
