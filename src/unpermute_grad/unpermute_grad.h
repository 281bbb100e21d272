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
