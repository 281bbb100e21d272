/*
 * executor.c - what every operator's second phase checks before it runs a
 * plan, written once: a plan is given, no stream (the CPU has none), and
 * it was planned by the same operator.  A plan runs once, so a refused one
 * is freed too, as the vendor's executors are.
 */
#include <stdlib.h>

#include "core/internal.h"

const char *moeperm_executor_planner(moeperm_op op)
{
    switch (op) {
    case MOEPERM_OP_PERMUTE_GRAD:
        return "moeperm_token_permute_grad_get_workspace_size()";
    case MOEPERM_OP_PERMUTE:
        return "moeperm_token_permute_get_workspace_size()";
    case MOEPERM_OP_UNPERMUTE:
        return "moeperm_token_unpermute_get_workspace_size()";
    case MOEPERM_OP_UNPERMUTE_GRAD:
        return "moeperm_token_unpermute_grad_get_workspace_size()";
    }
    return "another operator";
}

moeperm_status moeperm_executor_accept(moeperm_executor *executor, void *stream, moeperm_op op)
{
    if (!executor)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR, "executor is NULL");
    moeperm_status status = MOEPERM_SUCCESS;
    if (stream)
        status = moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                              "stream must be NULL on the CPU backend, got %p", stream);
    else if (executor->op != op)
        status = moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                              "the executor was planned by %s, not %s",
                              moeperm_executor_planner(executor->op),
                              moeperm_executor_planner(op));
    if (status != MOEPERM_SUCCESS)
        free(executor);
    return status;
}

void moeperm_executor_destroy(moeperm_executor *executor)
{
    free(executor);
}

moeperm_status moeperm_executor_run(void *workspace, uint64_t workspace_size,
                                    moeperm_executor *executor, void *stream)
{
    if (!executor)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR, "executor is NULL");
    switch (executor->op) {
    case MOEPERM_OP_PERMUTE_GRAD:
        return moeperm_token_permute_grad(workspace, workspace_size, executor, stream);
    case MOEPERM_OP_PERMUTE:
        return moeperm_token_permute(workspace, workspace_size, executor, stream);
    case MOEPERM_OP_UNPERMUTE:
        return moeperm_token_unpermute(workspace, workspace_size, executor, stream);
    case MOEPERM_OP_UNPERMUTE_GRAD:
        return moeperm_token_unpermute_grad(workspace, workspace_size, executor, stream);
    }
    free(executor);
    return moeperm_fail(MOEPERM_ERR_PARAM_INVALID, "the executor names no operator");
}
