/*
 * permute/permute.h - MoeTokenPermute's plan, its run, and the sort it
 * shares with the public routing function (route.c).
 */
#ifndef MOEPERM_PERMUTE_H
#define MOEPERM_PERMUTE_H

#include <stddef.h>
#include <stdint.h>

#include "core/internal.h"

struct moeperm_permute_plan {
    struct moeperm_tensor tokens;         /* tokens [N, H] */
    struct moeperm_tensor indices;        /* expert ids [N, K] or [N] */
    struct moeperm_tensor permute_tokens; /* permute_tokens_out [num_out_tokens, H] */
    struct moeperm_tensor sorted_indices; /* sorted_indices_out [N*K] */
    int64_t top_k;
    int64_t num_out_tokens; /* after the <= 0 rule and the clamp */
};

/* The second phase's work over a validated plan, with `threads` as for
 * moeperm_sum_run() (tests and the benchmark call it directly).  Whatever
 * the index memory holds by then, it neither reads nor writes out of
 * bounds.  Fails only for memory (MOEPERM_ERR_INNER), before writing
 * anything. */
moeperm_status moeperm_permute_run(const struct moeperm_permute_plan *plan, int threads);

/* The stable-sort rank of each of n int32 keys: ranks[i] is the position
 * key i takes in an ascending sort where equal keys keep their order.  Any
 * keys; ranks is a permutation of [0, n).  Writes ranks only on success;
 * MOEPERM_ERR_INNER when memory runs out (route.c). */
moeperm_status moeperm_route_ranks(const int32_t *keys, size_t n, int32_t *ranks);

#endif
