/* call_family.c - see call_family.h. */
#include "call_family.h"

#include "naive_family.h"

moeperm_status call_permute(moeperm_dtype dtype, const void *tokens, int64_t tokens_num,
                            int64_t hidden, moeperm_dtype index_dtype, const void *indices,
                            int64_t top_k, bool one_dim, int64_t num_out_tokens, void *out,
                            int32_t *sorted)
{
    int64_t count = tokens_num * top_k;
    int64_t token_dims[2] = {tokens_num, hidden}, index_dims[2] = {tokens_num, top_k},
            out_dims[2] = {naive_num_out(num_out_tokens, count), hidden},
            sorted_dims[1] = {count};
    moeperm_tensor *t = moeperm_tensor_create(token_dims, 2, dtype, NULL, 0, (void *)tokens);
    moeperm_tensor *ix =
        moeperm_tensor_create(index_dims, one_dim ? 1 : 2, index_dtype, NULL, 0, (void *)indices);
    moeperm_tensor *o = moeperm_tensor_create(out_dims, 2, dtype, NULL, 0, out);
    moeperm_tensor *s = moeperm_tensor_create(sorted_dims, 1, MOEPERM_INT32, NULL, 0, sorted);
    uint64_t workspace = 0;
    moeperm_executor *plan = NULL;
    moeperm_status status = moeperm_token_permute_get_workspace_size(
        t, ix, num_out_tokens, false, o, s, &workspace, &plan);
    moeperm_tensor_destroy(t);
    moeperm_tensor_destroy(ix);
    moeperm_tensor_destroy(o);
    moeperm_tensor_destroy(s);
    if (status != MOEPERM_SUCCESS)
        return status;
    return moeperm_token_permute(NULL, workspace, plan, NULL);
}

moeperm_status call_unpermute(moeperm_dtype dtype, const void *permuted_tokens, int64_t rows,
                              int64_t hidden, const int32_t *sorted_indices, int64_t tokens_num,
                              int64_t top_k, moeperm_dtype probs_dtype, const void *probs,
                              void *out)
{
    int64_t x_dims[2] = {rows, hidden}, index_dims[1] = {tokens_num * top_k},
            probs_dims[2] = {tokens_num, top_k}, out_dims[2] = {tokens_num, hidden};
    moeperm_tensor *x = moeperm_tensor_create(x_dims, 2, dtype, NULL, 0, (void *)permuted_tokens);
    moeperm_tensor *ix =
        moeperm_tensor_create(index_dims, 1, MOEPERM_INT32, NULL, 0, (void *)sorted_indices);
    moeperm_tensor *p =
        probs ? moeperm_tensor_create(probs_dims, 2, probs_dtype, NULL, 0, (void *)probs) : NULL;
    moeperm_tensor *o = moeperm_tensor_create(out_dims, 2, dtype, NULL, 0, out);
    uint64_t workspace = 0;
    moeperm_executor *plan = NULL;
    moeperm_status status = moeperm_token_unpermute_get_workspace_size(
        x, ix, p, false, NULL, 0, o, &workspace, &plan);
    moeperm_tensor_destroy(x);
    moeperm_tensor_destroy(ix);
    moeperm_tensor_destroy(p);
    moeperm_tensor_destroy(o);
    if (status != MOEPERM_SUCCESS)
        return status;
    return moeperm_token_unpermute(NULL, workspace, plan, NULL);
}
