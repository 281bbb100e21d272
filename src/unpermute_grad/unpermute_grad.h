/*
 * unpermute_grad/unpermute_grad.h - MoeTokenUnpermuteGrad's plan and the
 * kernel that runs it (kernel.c, the model of model.h).
 */
#ifndef MOEPERM_UNPERMUTE_GRAD_H
#define MOEPERM_UNPERMUTE_GRAD_H

#include <stdbool.h>
#include <stdint.h>

#include "core/internal.h"

/* Copies of the six views (probs and probs_grad hold nothing without
 * probs), top_k, and the chip whose tiling probs_grad follows. */
struct moeperm_unpermute_grad_plan {
    struct moeperm_tensor permuted_tokens; /* [R, H] */
    struct moeperm_tensor grad;            /* unpermuted_tokens_grad [N, H] */
    struct moeperm_tensor indices;         /* sorted_indices [N*K] */
    struct moeperm_tensor probs;           /* [N, K] */
    struct moeperm_tensor tokens_grad;     /* permuted_tokens_grad [R, H] */
    struct moeperm_tensor probs_grad;      /* [N, K] */
    bool has_probs;
    int64_t top_k;
    moeperm_chip chip;
};

/* The sizes the device's tiling reads: N, K, H and R. */
typedef struct ug_shape {
    int64_t tokens, top_k, hidden, rows;
} ug_shape;

/* The checks of check.c, in the order a first phase makes them, each with
 * its status and sentence.  The dtypes of the four inputs (probs may be
 * NULL); their ranks, and the sizes they give; the tiling's refusals (a 0
 * among the sizes, top_k above 512); the shapes the inputs must have
 * beside one another, their views, and that the device can hold them;
 * that no two of the first `slots` entries below `rows` name one row. */
moeperm_status moeperm_ug_check_dtypes(const moeperm_tensor *tokens, const moeperm_tensor *grad,
                                       const moeperm_tensor *indices, const moeperm_tensor *probs);
moeperm_status moeperm_ug_check_inputs(const moeperm_tensor *tokens, const moeperm_tensor *grad,
                                       const moeperm_tensor *indices, const moeperm_tensor *probs,
                                       ug_shape *shape);
moeperm_status moeperm_ug_check_tiling(const ug_shape *shape);
moeperm_status moeperm_ug_check_input_shapes(const moeperm_tensor *tokens,
                                             const moeperm_tensor *grad,
                                             const moeperm_tensor *indices,
                                             const moeperm_tensor *probs, const ug_shape *shape);
moeperm_status moeperm_ug_check_rows_written_once(const moeperm_tensor *indices, int64_t slots,
                                                  int64_t rows);

/* The sizes moeperm_token_unpermute_grad_tiling() accepts besides the
 * dtypes and the chip: none negative, top_k 1 without probs, the tiling's
 * refusals, and none so large that the tiling's int64 arithmetic
 * overflows (tokens_size: bytes of a token element; cores: the chip's). */
moeperm_status moeperm_ug_check_tiling_query(int64_t tokens_num, int64_t top_k,
                                             int64_t hidden_size, int64_t num_out_tokens,
                                             int64_t tokens_size, bool has_probs, int64_t cores);

/* The arithmetic over a validated plan on exactly `threads` threads, or
 * with 0 on the OpenMP default cut down so that every thread has enough
 * bytes to move to pay for waking it; `isa` picks the instruction set
 * (moeperm_isa_resolve() of core/dispatch.h says what AUTO means).  Any
 * index outside [0, R) is a dropped slot, so indices changed after
 * validation cannot make it touch memory outside the views.  Returns
 * false when scratch memory runs out (outputs untouched). */
bool moeperm_unpermute_grad_run(const struct moeperm_unpermute_grad_plan *plan, int threads,
                                moeperm_isa isa);

#endif
