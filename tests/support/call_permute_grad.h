/*
 * call_permute_grad.h - the tests' one way of calling MoeTokenPermuteGrad
 * through the public two-phase API on contiguous buffers, so each test
 * file states only what it checks.
 */
#ifndef MOEPERM_TEST_CALL_PERMUTE_GRAD_H
#define MOEPERM_TEST_CALL_PERMUTE_GRAD_H

#include <moeperm/moeperm.h>

/* Creates the three tensors, runs both phases, destroys everything.
 * Returns the first non-success status. */
moeperm_status call_permute_grad(moeperm_dtype dtype, const void *grad, int64_t rows,
                                 int64_t hidden, const int32_t *indices, int64_t tokens,
                                 int64_t top_k, void *out);

#endif
