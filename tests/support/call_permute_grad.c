/* call_permute_grad.c - see call_permute_grad.h. */
#include "call_permute_grad.h"

moeperm_status call_permute_grad(moeperm_dtype dtype, const void *grad, int64_t rows,
                                 int64_t hidden, const int32_t *indices, int64_t tokens,
                                 int64_t top_k, void *out)
{
    int64_t grad_dims[2] = {rows, hidden}, index_dims[1] = {tokens * top_k},
            out_dims[2] = {tokens, hidden};
    moeperm_tensor *g = moeperm_tensor_create(grad_dims, 2, dtype, NULL, 0, (void *)grad);
    moeperm_tensor *ix =
        moeperm_tensor_create(index_dims, 1, MOEPERM_INT32, NULL, 0, (void *)indices);
    moeperm_tensor *o = moeperm_tensor_create(out_dims, 2, dtype, NULL, 0, out);
    uint64_t workspace = 0;
    moeperm_executor *plan = NULL;
    moeperm_status status =
        moeperm_token_permute_grad_get_workspace_size(g, ix, top_k, false, o, &workspace, &plan);
    moeperm_tensor_destroy(g);
    moeperm_tensor_destroy(ix);
    moeperm_tensor_destroy(o);
    if (status != MOEPERM_SUCCESS)
        return status;
    return moeperm_token_permute_grad(NULL, workspace, plan, NULL);
}
