/*
 * aclnnop/aclnn_moe_token_permute_grad.h - MoeTokenPermuteGrad, the
 * backward of the dispatch, as the vendor's aclnn API declares it.
 *
 * The phases behave as aclnnop/aclnn_moe_token_permute.h says.  Entries of
 * sortedIndices at or beyond the rows of permutedOutputGrad are dropped
 * slots, as on the device.  docs/aclnn-host.md.
 */
#ifndef MOEPERM_ACLNN_ACLNNOP_MOE_TOKEN_PERMUTE_GRAD_H
#define MOEPERM_ACLNN_ACLNNOP_MOE_TOKEN_PERMUTE_GRAD_H

#include "../aclnn/aclnn_base.h"
#include "aclnn_util.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * permutedOutputGrad [R, H] (FLOAT, FLOAT16 or BF16), sortedIndices [N*K]
 * INT32, numTopk K (-1 means 1, as on the device), paddedMode ignored as
 * the Atlas A2/A3 kernel ignores it; out [N, H] of the grad's dtype.
 */
ACLNN_API aclnnStatus aclnnMoeTokenPermuteGradGetWorkspaceSize(
    const aclTensor *permutedOutputGrad, const aclTensor *sortedIndices, int64_t numTopk,
    bool paddedMode, aclTensor *out, uint64_t *workspaceSize, aclOpExecutor **executor);

/* Runs the plan on stream (NULL: the default stream) and frees it. */
ACLNN_API aclnnStatus aclnnMoeTokenPermuteGrad(void *workspace, uint64_t workspaceSize,
                                               aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif
