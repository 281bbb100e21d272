/*
 * permute_grad/permute_grad.c - MoeTokenPermuteGrad's two-phase API.  The
 * operator is the sum of each token's num_topk slot rows (src/sum/); the
 * first phase checks the arguments (check.c) and registers the sum as the
 * plan.
 */
#include "core/checks.h"
#include "core/internal.h"
#include "permute_grad/permute_grad.h"

static moeperm_status run_plan(const void *plan, int threads)
{
    moeperm_sum_run(&((const struct moeperm_permute_grad_plan *)plan)->sum, threads,
                    MOEPERM_ISA_AUTO);
    return MOEPERM_SUCCESS;
}

moeperm_status moeperm_token_permute_grad_get_workspace_size(
    const moeperm_tensor *permuted_output_grad, const moeperm_tensor *sorted_indices,
    int64_t num_topk, bool padded_mode, moeperm_tensor *out, uint64_t *workspace_size,
    moeperm_executor **executor)
{
    moeperm_status status;
    if (executor)
        *executor = NULL;
    if ((status = moeperm_check_required(permuted_output_grad, "permuted_output_grad")) ||
        (status = moeperm_check_required(sorted_indices, "sorted_indices")) ||
        (status = moeperm_check_required(out, "out")) ||
        (status = moeperm_check_plan_outputs(workspace_size, executor)))
        return status;

    int64_t top_k = 0;
    bool nothing = false;
    status = moeperm_permute_grad_check(permuted_output_grad, sorted_indices, num_topk,
                                        padded_mode, out, &top_k, &nothing);
    if (status != MOEPERM_SUCCESS)
        return status;

    moeperm_executor *made =
        moeperm_executor_new(MOEPERM_OP_PERMUTE_GRAD, nothing ? NULL : run_plan,
                             nothing ? 0 : sizeof(struct moeperm_permute_grad_plan));
    if (!made)
        return MOEPERM_ERR_INNER;
    if (!nothing) {
        struct moeperm_permute_grad_plan *plan = made->plan;
        plan->sum.permuted = *permuted_output_grad;
        plan->sum.indices = *sorted_indices;
        plan->sum.out = *out;
        plan->sum.top_k = top_k;
    }
    *workspace_size = 0;
    *executor = made;
    return MOEPERM_SUCCESS;
}

moeperm_status moeperm_token_permute_grad(void *workspace, uint64_t workspace_size,
                                          moeperm_executor *executor, void *stream)
{
    (void)workspace;
    (void)workspace_size; /* the CPU plan needs no workspace, so any size is enough */
    return moeperm_executor_finish(executor, stream, MOEPERM_OP_PERMUTE_GRAD);
}
