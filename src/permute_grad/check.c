/*
 * permute_grad/check.c - the first phase's checks of MoeTokenPermuteGrad
 * (docs/operators.md, "The input domain"): what the Atlas A2/A3 device
 * refuses, and what its kernel gives no determined result for.  The checks
 * every operator shares are core/checks.c's.
 *
 * The device's host code checks nothing but the dtypes
 * (moe_token_permute_grad_tiling.cpp:82-100 cannot fail): num_topk = -1
 * means 1 (:129), tokens = floor(L / num_topk) (:130), padded_mode is never
 * read (only attribute 0 is, :327), and the kernel skips every slot whose
 * index is not below R (moe_token_permute_grad.h:246, 264).
 */
#include "core/checks.h"
#include "permute_grad/permute_grad.h"

moeperm_status moeperm_permute_grad_check(const moeperm_tensor *grad,
                                          const moeperm_tensor *indices, int64_t num_topk,
                                          bool padded_mode, const moeperm_tensor *out,
                                          int64_t *top_k, bool *nothing)
{
    moeperm_status status;
    (void)padded_mode; /* never read by the Atlas A2/A3 tiling */

    if ((status = moeperm_check_float_dtype(grad, "permuted_output_grad")) ||
        (status = moeperm_check_same_dtype(out, "out", grad, "permuted_output_grad")) ||
        (status = moeperm_check_int32(indices, "sorted_indices")))
        return status;
    if (moeperm_outputs_empty(&out, 1)) {
        *nothing = true;
        return MOEPERM_SUCCESS;
    }
    *nothing = false;

    int64_t k = num_topk == -1 ? 1 : num_topk;
    if (k == 0)
        return moeperm_undetermined("num_topk = 0: tokens_num = L / 0 is taken as 0 and the "
                                    "kernel is launched on 0 cores");
    if (k < 0)
        return moeperm_undetermined("num_topk = %lld: tokens_num = L / num_topk is negative, "
                                    "and so is the count of cores the kernel is launched on",
                                    (long long)num_topk);
    if (k > MOEPERM_MAX_TOP_K)
        return moeperm_undetermined("num_topk = %lld is above %d, the vendor's documented "
                                    "limit, beyond which the kernel's buffers are not "
                                    "characterised",
                                    (long long)num_topk, MOEPERM_MAX_TOP_K);

    if ((status = moeperm_check_ndim(grad, "permuted_output_grad", 2, "[rows, hidden_size]")) ||
        (status = moeperm_check_ndim(indices, "sorted_indices", 1, "[tokens_num * num_topk]")) ||
        (status = moeperm_check_ndim(out, "out", 2, "[tokens_num, hidden_size]")))
        return status;

    int64_t count = indices->dims[0], hidden = grad->dims[1];
    int64_t tokens = count / k; /* the trailing count % k entries are never read */
    if (out->dims[0] != tokens || out->dims[1] != hidden)
        return moeperm_undetermined("out shape is [%lld, %lld], expected [%lld, %lld]: the "
                                    "kernel writes floor(%lld / %lld) rows of hidden_size %lld",
                                    (long long)out->dims[0], (long long)out->dims[1],
                                    (long long)tokens, (long long)hidden, (long long)count,
                                    (long long)k, (long long)hidden);

    if ((status = moeperm_check_view(grad, "permuted_output_grad")) ||
        (status = moeperm_check_view(indices, "sorted_indices")) ||
        (status = moeperm_check_view(out, "out")) ||
        (status = moeperm_check_no_self_overlap(out, "out")) ||
        (status = moeperm_check_disjoint(out, "out", grad, "permuted_output_grad")) ||
        (status = moeperm_check_disjoint(out, "out", indices, "sorted_indices")))
        return status;

    *top_k = k;
    return moeperm_check_slots_nonnegative(indices, tokens * k, "permuted_output_grad");
}
