/*
 * permute_grad/permute_grad.h - MoeTokenPermuteGrad's plan and its checks.
 * The operator is the sum of src/sum/ with K = num_topk.
 */
#ifndef MOEPERM_PERMUTE_GRAD_H
#define MOEPERM_PERMUTE_GRAD_H

#include <stdbool.h>
#include <stdint.h>

#include "core/internal.h"
#include "sum/sum.h"

struct moeperm_permute_grad_plan {
    struct moeperm_sum sum; /* permuted_output_grad, sorted_indices, out, num_topk */
};

/* Every check of the first phase after the NULL tensors (check.c), with
 * the aclnn status and a sentence naming the offending value.  On success
 * *nothing says the output is empty (the plan does nothing), else *top_k
 * receives K (num_topk, -1 meaning 1). */
moeperm_status moeperm_permute_grad_check(const moeperm_tensor *grad,
                                          const moeperm_tensor *indices, int64_t num_topk,
                                          bool padded_mode, const moeperm_tensor *out,
                                          int64_t *top_k, bool *nothing);

#endif
