// moe_token_permute_grad.cpp - MoeTokenPermuteGrad through the aclnn API,
// with the data and calls of the vendor's example program: top-k 2, the
// sorted indices host floats {0, 1} described as INT32 ({0, 1065353216} to
// the operator, the second slot dropped).  Prints the output buffer as
// floats, one per line.
#include <cstdio>
#include <vector>

#include "acl/acl.h"
#include "aclnnop/aclnn_moe_token_permute_grad.h"
#include "device_program.h"

int main()
{
    Device device;
    MUST(device.Open(), "Init acl");

    int64_t num_topk = 2;
    std::vector<float> grad_host = {1, 2, 3, 4};
    std::vector<float> sorted_host = {0, 1};
    std::vector<float> out_host = {0, 0};

    DeviceTensor grad, sorted, out;
    MUST(Upload(grad_host, {2, 2}, aclDataType::ACL_BF16, &grad), "grad");
    MUST(Upload(sorted_host, {2}, aclDataType::ACL_INT32, &sorted), "sorted");
    MUST(Upload(out_host, {1, 2}, aclDataType::ACL_BF16, &out), "out");

    uint64_t workspace_size = 0;
    aclOpExecutor *executor;
    MUST(aclnnMoeTokenPermuteGradGetWorkspaceSize(grad.tensor, sorted.tensor, num_topk, false,
                                                  out.tensor, &workspace_size, &executor),
         "aclnnMoeTokenPermuteGradGetWorkspaceSize");
    if (int rc = RunPlan(aclnnMoeTokenPermuteGrad, "aclnnMoeTokenPermuteGrad", workspace_size,
                         executor, device.stream))
        return rc;

    if (int rc = PrintFloats(out, "mean result"))
        return rc;

    Release(&grad);
    Release(&sorted);
    Release(&out);
    device.Close();
    return 0;
}
