/*
 * unpermute/unpermute.h - MoeTokenUnpermute's plan and its run.  Without
 * probs the operator is the sum of src/sum/ with K = 1; with probs, the
 * same sum with each row multiplied by its prob (unpermute.c).
 */
#ifndef MOEPERM_UNPERMUTE_H
#define MOEPERM_UNPERMUTE_H

#include <stdbool.h>

#include "core/internal.h"
#include "sum/sum.h"

struct moeperm_unpermute_plan {
    struct moeperm_sum sum;      /* permuted_tokens, sorted_indices, out, top_k (1 without probs) */
    struct moeperm_tensor probs; /* [N, K]; unread when !has_probs */
    bool has_probs;
};

/* The second phase's work over a validated plan, with `threads` as for
 * moeperm_sum_run() (tests and the benchmark call it directly). */
void moeperm_unpermute_run(const struct moeperm_unpermute_plan *plan, int threads);

#endif
