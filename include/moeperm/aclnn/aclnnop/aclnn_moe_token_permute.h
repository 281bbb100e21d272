/*
 * aclnnop/aclnn_moe_token_permute.h - MoeTokenPermute, the dispatch of a
 * mixture-of-experts layer, as the vendor's aclnn API declares it
 * (signatures and const-ness included; note that both outputs are
 * `const aclTensor *` here, as in the vendor's header).
 *
 * The first phase checks what the device's host code checks, reading no
 * tensor data (the inputs may be uploaded after it); the second phase runs
 * the operator with libmoeperm's bits (docs/operators.md) once the data is
 * there, and refuses with ACLNN_ERR_PARAM_INVALID (161002) what the data
 * forbids, aclGetRecentErrMsg() naming the value.  The plan is freed by
 * the second phase, which may run once.  docs/aclnn-host.md.
 */
#ifndef MOEPERM_ACLNN_ACLNNOP_MOE_TOKEN_PERMUTE_H
#define MOEPERM_ACLNN_ACLNNOP_MOE_TOKEN_PERMUTE_H

#include "../aclnn/aclnn_base.h"
#include "aclnn_util.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * tokens [N, H...] (FLOAT, FLOAT16, BF16 or INT8), indices [N, K] or [N]
 * (INT32 or INT64): the experts of each token.  numOutTokens: the rows
 * kept (0 all, -d all but d), paddedMode must be false.
 * permuteTokensOut [numOut, H...] of the tokens' dtype, sortedIndicesOut
 * [N*K] INT32.  *workspaceSize receives 0, *executor the plan.
 */
ACLNN_API aclnnStatus aclnnMoeTokenPermuteGetWorkspaceSize(
    const aclTensor *tokens, const aclTensor *indices, int64_t numOutTokens, bool paddedMode,
    const aclTensor *permuteTokensOut, const aclTensor *sortedIndicesOut,
    uint64_t *workspaceSize, aclOpExecutor **executor);

/* Runs the plan on stream (NULL: the default stream) and frees it. */
ACLNN_API aclnnStatus aclnnMoeTokenPermute(void *workspace, uint64_t workspaceSize,
                                           aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif
