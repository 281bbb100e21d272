/*
 * call_family.h - the tests' one way of calling MoeTokenPermute and
 * MoeTokenUnpermute through the public two-phase API on contiguous
 * buffers, so each test file states only what it checks.
 */
#ifndef MOEPERM_TEST_CALL_FAMILY_H
#define MOEPERM_TEST_CALL_FAMILY_H

#include <moeperm/moeperm.h>

/* tokens [N, H] of dtype; indices [N, K] (or [N] when one_dim, K = 1) of
 * index_dtype; out [naive_num_out(), H]; sorted [N*K].  Returns the first
 * non-success status. */
moeperm_status call_permute(moeperm_dtype dtype, const void *tokens, int64_t tokens_num,
                            int64_t hidden, moeperm_dtype index_dtype, const void *indices,
                            int64_t top_k, bool one_dim, int64_t num_out_tokens, void *out,
                            int32_t *sorted);

/* permuted_tokens [R, H] of dtype; sorted_indices [N*K]; probs [N, K] of
 * probs_dtype or NULL (K = 1); out [N, H]. */
moeperm_status call_unpermute(moeperm_dtype dtype, const void *permuted_tokens, int64_t rows,
                              int64_t hidden, const int32_t *sorted_indices, int64_t tokens_num,
                              int64_t top_k, moeperm_dtype probs_dtype, const void *probs,
                              void *out);

#endif
