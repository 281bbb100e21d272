/*
 * aclnnop/aclnn_moe_token_unpermute.h - MoeTokenUnpermute, the combine of
 * a mixture-of-experts layer, as the vendor's aclnn API declares it.
 *
 * The phases behave as aclnnop/aclnn_moe_token_permute.h says: the first
 * reads no tensor data, the second runs with libmoeperm's bits and refuses
 * an index the device could not use (a negative one) with 161002.
 * Entries of sortedIndices at or beyond the rows of permutedTokens are
 * dropped slots, as on the device.  docs/aclnn-host.md.
 */
#ifndef MOEPERM_ACLNN_ACLNNOP_MOE_TOKEN_UNPERMUTE_H
#define MOEPERM_ACLNN_ACLNNOP_MOE_TOKEN_UNPERMUTE_H

#include "../aclnn/aclnn_base.h"
#include "aclnn_util.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * permutedTokens [R, H] (FLOAT, FLOAT16 or BF16), sortedIndices [N*K]
 * INT32, probsOptional [N, K] of any of the three float dtypes or NULL
 * (then K = 1); paddedMode and restoreShapeOptional are ignored, as the
 * Atlas A2/A3 kernel ignores them; out [N, H] of the tokens' dtype.
 */
ACLNN_API aclnnStatus aclnnMoeTokenUnpermuteGetWorkspaceSize(
    const aclTensor *permutedTokens, const aclTensor *sortedIndices, const aclTensor *probsOptional,
    bool paddedMode, const aclIntArray *restoreShapeOptional, aclTensor *out,
    uint64_t *workspaceSize, aclOpExecutor **executor);

/* Runs the plan on stream (NULL: the default stream) and frees it. */
ACLNN_API aclnnStatus aclnnMoeTokenUnpermute(void *workspace, uint64_t workspaceSize,
                                             aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif
