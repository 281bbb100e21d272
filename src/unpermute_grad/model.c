/*
 * model.c - the tiling of the Ascend kernel of
 * MoeTokenUnpermuteGrad, restated from the vendor's host code
 * (moe/moe_token_unpermute_grad/op_host/moe_token_unpermute_grad_tiling.cpp
 * in the vendor's ops-transformer repository): first the tokens are shared
 * among the vector cores, then the unified buffer is shared among the
 * buffers one core needs, which decides how many columns of the hidden
 * dimension one pass holds.  probs_grad sums chunk by chunk in that cut
 * (model.h), so the cut is part of the arithmetic.
 *
 * The vendor computes some of these quantities in unsigned 64-bit
 * arithmetic; over the accepted chip ranges none of them is negative, so
 * signed arithmetic gives the same numbers.  A hidden size so large that
 * one row cannot fit the buffer skips the one formula that could overflow:
 * the row is certainly cut then.
 */
#include "unpermute_grad/model.h"

/* Buffers the kernel doubles (ping-pong). */
#define BUFFER_NUM 2
/* Bytes of an int32 index and of an fp32 value. */
#define INDEX_BYTES 4
#define FP32_BYTES 4
/* The most sorted_indices entries loaded at a time while top_k allows. */
#define INDICES_RESERVE_MAX 256

static int64_t align_up(int64_t x, int64_t unit)
{
    return (x + unit - 1) / unit * unit;
}

static int64_t align_down(int64_t x, int64_t unit)
{
    return x / unit * unit;
}

/* The largest divisor of n that is at most limit (limit >= 1). */
static int64_t greatest_divisor(int64_t n, int64_t limit)
{
    while (n % limit != 0)
        limit--;
    return limit;
}

/* Without probs the kernel only copies rows: as many whole rows as the
 * buffer holds, twice over, each with its index; a row too long for 32
 * bytes of indices is cut. */
static void split_without_probs(moeperm_unpermute_grad_tiling *t, int64_t tokens_size, int64_t ub)
{
    int64_t elems_32b = 32 / tokens_size, indices_32b = 32 / INDEX_BYTES;
    int64_t align = align_up(t->hidden_size, elems_32b);
    int64_t reserve = 8;
    if (align <= ub) {
        reserve = ub / (BUFFER_NUM * (align * tokens_size + INDEX_BYTES));
        reserve = align_down(reserve, indices_32b);
        if (reserve < indices_32b)
            reserve = indices_32b;
    }
    int64_t most = (ub - reserve * BUFFER_NUM * INDEX_BYTES) / (BUFFER_NUM * tokens_size * reserve);
    if (most < align)
        align = align_down(most, elems_32b);
    t->hidden_size_align = align;
    t->hidden_size_loop_times = (t->hidden_size + align - 1) / align;
    t->hidden_size_tail = t->hidden_size - (t->hidden_size_loop_times - 1) * align;
    t->input_reserve_num = reserve;
    t->indices_reserve_num = reserve;
    t->indices_reserve_num_align = reserve;
}

/* With probs: up to 256 indices (a multiple of top_k) and their probs per
 * load, then as many permuted_tokens rows as fit beside one row of each of
 * the other buffers (two tokens-dtype rows doubled, three fp32 rows); when
 * not even one fits, the row is cut into chunks of what three doubled
 * tokens-dtype rows and three fp32 rows leave room for, a multiple of 512
 * bytes of tokens. */
static void split_with_probs(moeperm_unpermute_grad_tiling *t, int64_t tokens_size,
                             int64_t probs_size, int64_t ub)
{
    int64_t hidden = t->hidden_size, top_k = t->top_k;
    int64_t elems_512b = 512 / tokens_size, probs_32b = 32 / probs_size;
    int64_t align = align_up(hidden, elems_512b);
    int64_t indices = top_k;
    if (top_k <= INDICES_RESERVE_MAX) {
        indices = align_down(INDICES_RESERVE_MAX, top_k);
        if (t->token_num_each_core * top_k < indices)
            indices = t->token_num_each_core * top_k;
    }
    int64_t indices_align = align_up(indices, probs_32b);
    int64_t left =
        ub - BUFFER_NUM * probs_size * indices_align * 2 - indices_align * FP32_BYTES * 3 - 256;
    /* Rows beyond the buffer's size cannot fit even once. */
    int64_t rows = 0;
    if (align <= ub)
        rows = (left - (BUFFER_NUM * tokens_size * 2 + 3 * FP32_BYTES) * align) /
               (BUFFER_NUM * tokens_size * align);
    int64_t input_reserve = 1, loops = 1, tail = hidden;
    if (rows < 1) {
        int64_t chunk = left / (3 * BUFFER_NUM * tokens_size + 3 * FP32_BYTES);
        chunk = align_down(chunk, elems_512b);
        loops = (hidden + chunk - 1) / chunk;
        tail = hidden - (loops - 1) * chunk;
        align = chunk;
    } else {
        input_reserve = greatest_divisor(top_k, rows < top_k ? rows : top_k);
    }
    t->hidden_size_align = align;
    t->hidden_size_loop_times = loops;
    t->hidden_size_tail = tail;
    t->input_reserve_num = input_reserve;
    t->indices_reserve_num = indices;
    t->indices_reserve_num_align = indices_align;
}

void moeperm_ug_tiling(int64_t tokens_num, int64_t top_k, int64_t hidden_size,
                       int64_t num_out_tokens, int64_t tokens_size, bool has_probs,
                       int64_t probs_size, const moeperm_chip *chip,
                       moeperm_unpermute_grad_tiling *t)
{
    int64_t cores = chip->vector_cores;
    t->tokens_num = tokens_num;
    t->top_k = top_k;
    t->hidden_size = hidden_size;
    t->num_out_tokens = num_out_tokens;
    /* The first tokens_num % cores cores take one token more. */
    t->token_num_tail_core = tokens_num / cores;
    t->former_core_num = tokens_num % cores;
    t->token_num_each_core = t->token_num_tail_core + (t->former_core_num ? 1 : 0);
    t->tail_core_num = cores - t->former_core_num;
    t->row_id_map_each_core = t->token_num_each_core * top_k;
    t->row_id_map_tail_core = t->token_num_tail_core * top_k;
    t->total_ub_size = chip->ub_bytes;
    if (has_probs)
        split_with_probs(t, tokens_size, probs_size, chip->ub_bytes);
    else
        split_without_probs(t, tokens_size, chip->ub_bytes);
}
