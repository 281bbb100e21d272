/*
 * naive_family.h - the tests' own models of MoeTokenPermute and
 * MoeTokenUnpermute, written from the definitions in docs/operators.md.
 *
 * Nothing here calls libmoeperm: the sort is the definition of a stable
 * rank counted pair by pair, the conversions are naive.c's (rounding in
 * double), and every multiply and add is a separate volatile binary32
 * step in the order the definition spells out.
 */
#ifndef MOEPERM_TEST_NAIVE_FAMILY_H
#define MOEPERM_TEST_NAIVE_FAMILY_H

#include <stddef.h>
#include <stdint.h>

#include <moeperm/moeperm.h>

/* rank[i] = the number of ids below ids[i], plus the number of earlier
 * entries equal to it: the position of entry i in a stable ascending sort.
 * int64 comparison puts an int32 or int64 minimum first and maximum last. */
void naive_stable_rank(const int64_t *ids, int64_t n, int32_t *rank);

/* The rows MoeTokenPermute keeps: num_out_tokens, or N*K plus it when it
 * is not positive, then clamped to [0, N*K]. */
int64_t naive_num_out(int64_t num_out_tokens, int64_t count);

/* MoeTokenPermute over contiguous buffers: tokens [N, H] of `size`-byte
 * elements, ids [N*K] (already widened to int64), out [num_out, H],
 * sorted [N*K]. */
void naive_permute(size_t size, const void *tokens, int64_t tokens_num, int64_t hidden,
                   const int64_t *ids, int64_t top_k, int64_t num_out, void *out,
                   int32_t *sorted);

/* MoeTokenUnpermute over contiguous buffers: permuted_tokens [R, H] of
 * dtype, sorted_indices [N*K], probs [N, K] of probs_dtype or NULL (then
 * K must be 1), out [N, H] of dtype. */
void naive_unpermute(moeperm_dtype dtype, const void *permuted_tokens, int64_t rows,
                     int64_t hidden, const int32_t *sorted_indices, int64_t tokens_num,
                     int64_t top_k, moeperm_dtype probs_dtype, const void *probs, void *out);

#endif
