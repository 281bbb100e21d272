/*
 * aclnnop/aclnn_moe_token_unpermute_grad.h - MoeTokenUnpermuteGrad, the
 * backward of the combine, as the vendor's aclnn API declares it.
 *
 * The phases behave as aclnnop/aclnn_moe_token_permute.h says; the second
 * also refuses two slots naming one row of permutedTokensGradOut (on the
 * device the cores race for it).  probsGradOut is required even without
 * probs, as on the device, and is then left untouched.  probsGrad follows
 * the reduction order of the chip aclrtGetSocName() names
 * (MOEPERM_ACLNN_CHIP, default the Atlas A2).  docs/aclnn-host.md.
 */
#ifndef MOEPERM_ACLNN_ACLNNOP_MOE_TOKEN_UNPERMUTE_GRAD_H
#define MOEPERM_ACLNN_ACLNNOP_MOE_TOKEN_UNPERMUTE_GRAD_H

#include "../aclnn/aclnn_base.h"
#include "aclnn_util.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * permuteTokens [R, H] and unpermutedTokensGrad [N, H] (FLOAT, FLOAT16 or
 * BF16, one dtype), sortedIndices [N*K] INT32, probsOptional [N, K] of any
 * of the three float dtypes or NULL (then K = 1); paddedMode and
 * restoreShapeOptional are ignored, as the Atlas A2/A3 kernel ignores
 * them.  permutedTokensGradOut [R, H] of the tokens' dtype; probsGradOut
 * [N, K] of the probs' dtype (any float dtype without probs).
 */
ACLNN_API aclnnStatus aclnnMoeTokenUnpermuteGradGetWorkspaceSize(
    const aclTensor *permuteTokens, const aclTensor *unpermutedTokensGrad,
    const aclTensor *sortedIndices, const aclTensor *probsOptional, bool paddedMode,
    const aclIntArray *restoreShapeOptional, aclTensor *permutedTokensGradOut,
    aclTensor *probsGradOut, uint64_t *workspaceSize, aclOpExecutor **executor);

/* Runs the plan on stream (NULL: the default stream) and frees it. */
ACLNN_API aclnnStatus aclnnMoeTokenUnpermuteGrad(void *workspace, uint64_t workspaceSize,
                                                 aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif
