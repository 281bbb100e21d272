/*
 * naive_unpermute_grad.h - the tests' own model of MoeTokenUnpermuteGrad,
 * written apart from the library: the tiling transcribed again from the
 * vendor's host code with its unsigned 64-bit arithmetic, the reduction as
 * the sequence of AscendC instructions the kernel issues (BinaryAddFunc's
 * Add calls, BlockReduceSum on 8-float blocks, WholeReduceSum over 64
 * masked lanes), and the operator as plain loops over contiguous buffers
 * with the conversions of naive.c.  Nothing here calls libmoeperm.
 */
#ifndef MOEPERM_TEST_NAIVE_UNPERMUTE_GRAD_H
#define MOEPERM_TEST_NAIVE_UNPERMUTE_GRAD_H

#include <stdbool.h>
#include <stdint.h>

#include <moeperm/moeperm.h>

/* The vendor's MoeTokenUnpermuteGradTilingData, in its order. */
typedef struct naive_tiling {
    int64_t tokens_num, top_k, hidden_size, num_out_tokens;
    int64_t former_core_num, tail_core_num, token_num_each_core, token_num_tail_core;
    int64_t row_id_map_each_core, row_id_map_tail_core;
    int64_t hidden_size_align, hidden_size_loop_times, hidden_size_tail;
    int64_t input_reserve_num, indices_reserve_num, indices_reserve_num_align;
    int64_t total_ub_size;
} naive_tiling;

/* probs_dtype < 0: no probs (top_k is then 1). */
void naive_ug_tiling(int64_t tokens_num, int64_t top_k, int64_t hidden_size, int64_t num_out_tokens,
                     moeperm_dtype tokens_dtype, int probs_dtype, int64_t ub_bytes, int64_t cores,
                     naive_tiling *out);

/* The columns of every chunk but the last (the whole row when one chunk). */
int64_t naive_ug_chunk(const naive_tiling *t);

/* ReduceSumFunc over buf[0..len) as the kernel's instructions do it
 * (buf is overwritten). */
float naive_ug_reduce_sum_func(float *buf, int64_t len);

/* The operator over contiguous row-major buffers.  probs NULL: without
 * probs (top_k must be 1, probs_grad is not written).  chunk: the columns
 * per chunk (naive_ug_chunk()).  tokens_grad rows that no slot names are
 * not written. */
void naive_unpermute_grad(moeperm_dtype dtype, moeperm_dtype probs_dtype, const void *tokens,
                          int64_t rows, int64_t hidden, const void *grad, int64_t tokens_num,
                          const int32_t *indices, const void *probs, int64_t top_k, int64_t chunk,
                          void *tokens_grad, void *probs_grad);

/* The chunk length a plan on (ub_bytes, cores) uses, through naive_ug_tiling(). */
int64_t naive_ug_chunk_for(int64_t tokens_num, int64_t top_k, int64_t hidden, moeperm_dtype dtype,
                           moeperm_dtype probs_dtype, int64_t ub_bytes, int64_t cores);

#endif
