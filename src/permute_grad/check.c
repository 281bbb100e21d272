/*
 * permute_grad/check.c - the first phase's checks of MoeTokenPermuteGrad,
 * each with the aclnn status and a sentence that names the offending
 * value; the checks every operator shares are core/checks.c's.
 */
#include "core/checks.h"
#include "permute_grad/permute_grad.h"

moeperm_status moeperm_permute_grad_check(const moeperm_tensor *grad,
                                          const moeperm_tensor *indices, int64_t top_k,
                                          bool padded_mode, const moeperm_tensor *out)
{
    moeperm_status status;

    if (top_k < 1 || top_k > MOEPERM_MAX_TOP_K)
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID, "num_topk = %lld is outside [1, %d]",
                            (long long)top_k, MOEPERM_MAX_TOP_K);
    if (padded_mode)
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                            "padded_mode = true is not supported; only false is");

    if ((status = moeperm_check_float_dtype(grad, "permuted_output_grad")) ||
        (status = moeperm_check_same_dtype(out, "out", grad, "permuted_output_grad")) ||
        (status = moeperm_check_int32(indices, "sorted_indices")))
        return status;

    if ((status = moeperm_check_ndim(grad, "permuted_output_grad", 2, "[rows, hidden_size]")) ||
        (status = moeperm_check_ndim(indices, "sorted_indices", 1, "[tokens_num * num_topk]")) ||
        (status = moeperm_check_ndim(out, "out", 2, "[tokens_num, hidden_size]")))
        return status;

    int64_t count = indices->dims[0];
    int64_t rows = grad->dims[0], hidden = grad->dims[1];
    if (count > (INT64_C(1) << 31))
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                            "sorted_indices has %lld entries, more than the 2^31 that int32 "
                            "indices can address",
                            (long long)count);
    if (count % top_k != 0)
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                            "sorted_indices has %lld entries, not a multiple of num_topk = %lld",
                            (long long)count, (long long)top_k);
    int64_t tokens = count / top_k;
    if (out->dims[0] != tokens || out->dims[1] != hidden)
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                            "out shape is [%lld, %lld], expected [%lld, %lld] (tokens_num = "
                            "%lld / %lld, hidden_size)",
                            (long long)out->dims[0], (long long)out->dims[1], (long long)tokens,
                            (long long)hidden, (long long)count, (long long)top_k);
    if (rows > count)
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                            "permuted_output_grad has %lld rows, more than the %lld entries of "
                            "sorted_indices",
                            (long long)rows, (long long)count);

    if ((status = moeperm_check_view(grad, "permuted_output_grad")) ||
        (status = moeperm_check_view(indices, "sorted_indices")) ||
        (status = moeperm_check_view(out, "out")) ||
        (status = moeperm_check_no_self_overlap(out, "out")) ||
        (status = moeperm_check_disjoint(out, "out", grad, "permuted_output_grad")) ||
        (status = moeperm_check_disjoint(out, "out", indices, "sorted_indices")))
        return status;

    return moeperm_check_sorted_indices(indices);
}
