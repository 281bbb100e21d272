/* ug_call.c - see ug_call.h. */
#include "ug_call.h"

#include <stddef.h>

moeperm_status ug_plan(const ug_problem *p, moeperm_executor **executor)
{
    int64_t tokens_dims[2] = {p->rows, p->hidden}, grad_dims[2] = {p->tokens_num, p->hidden};
    int64_t index_dims[1] = {p->tokens_num * p->top_k}, probs_dims[2] = {p->tokens_num, p->top_k};
    moeperm_tensor *tokens =
        moeperm_tensor_create(tokens_dims, 2, p->dtype, NULL, 0, (void *)p->tokens);
    moeperm_tensor *grad = moeperm_tensor_create(grad_dims, 2, p->dtype, NULL, 0, (void *)p->grad);
    moeperm_tensor *indices =
        moeperm_tensor_create(index_dims, 1, MOEPERM_INT32, NULL, 0, (void *)p->indices);
    moeperm_tensor *tokens_grad =
        moeperm_tensor_create(tokens_dims, 2, p->dtype, NULL, 0, p->tokens_grad);
    moeperm_tensor *probs = NULL, *probs_grad = NULL;
    if (p->probs) {
        probs = moeperm_tensor_create(probs_dims, 2, p->probs_dtype, NULL, 0, (void *)p->probs);
        probs_grad = moeperm_tensor_create(probs_dims, 2, p->probs_dtype, NULL, 0, p->probs_grad);
    }
    uint64_t workspace = 0;
    moeperm_status status = moeperm_token_unpermute_grad_get_workspace_size(
        tokens, grad, indices, probs, false, NULL, 0, tokens_grad, probs_grad, &workspace,
        executor);
    moeperm_tensor_destroy(tokens);
    moeperm_tensor_destroy(grad);
    moeperm_tensor_destroy(indices);
    moeperm_tensor_destroy(tokens_grad);
    moeperm_tensor_destroy(probs);
    moeperm_tensor_destroy(probs_grad);
    if (status == MOEPERM_SUCCESS && p->chip) {
        status = moeperm_executor_set_chip(*executor, p->chip);
        if (status != MOEPERM_SUCCESS) {
            moeperm_executor_destroy(*executor);
            *executor = NULL;
        }
    }
    return status;
}

moeperm_status ug_call(const ug_problem *p)
{
    moeperm_executor *executor = NULL;
    moeperm_status status = ug_plan(p, &executor);
    if (status != MOEPERM_SUCCESS)
        return status;
    return moeperm_token_unpermute_grad(NULL, 0, executor, NULL);
}
