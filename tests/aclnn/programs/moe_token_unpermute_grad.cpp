// moe_token_unpermute_grad.cpp - MoeTokenUnpermuteGrad through the aclnn
// API, with the data and calls of the vendor's example program: three
// slots of one token, probs given.  Prints the permuted-tokens gradient
// buffer, then the probs gradient buffer, as floats, one per line.
#include <cstdio>
#include <vector>

#include "acl/acl.h"
#include "aclnnop/aclnn_moe_token_unpermute_grad.h"
#include "device_program.h"

int main()
{
    Device device;
    MUST(device.Open(), "Init acl");

    std::vector<float> permuted_host = {1, 1, 1, 1, 1, 1};
    std::vector<float> grad_host = {1, 1};
    std::vector<float> probs_host = {1, 1, 1};
    std::vector<int> sorted_host = {0, 1, 2};
    std::vector<float> permuted_grad_host = {0, 0, 0, 0, 0, 0};
    std::vector<float> probs_grad_host = {0, 0, 0};

    DeviceTensor permuted, grad, probs, sorted, permuted_grad, probs_grad;
    MUST(Upload(permuted_host, {3, 2}, aclDataType::ACL_BF16, &permuted), "permuted");
    MUST(Upload(grad_host, {1, 2}, aclDataType::ACL_BF16, &grad), "grad");
    MUST(Upload(probs_host, {1, 3}, aclDataType::ACL_BF16, &probs), "probs");
    MUST(Upload(sorted_host, {3}, aclDataType::ACL_INT32, &sorted), "sorted");
    MUST(Upload(permuted_grad_host, {3, 2}, aclDataType::ACL_BF16, &permuted_grad),
         "permuted grad");
    MUST(Upload(probs_grad_host, {1, 3}, aclDataType::ACL_BF16, &probs_grad), "probs grad");

    uint64_t workspace_size = 0;
    aclOpExecutor *executor;
    MUST(aclnnMoeTokenUnpermuteGradGetWorkspaceSize(
             permuted.tensor, grad.tensor, sorted.tensor, probs.tensor, false, nullptr,
             permuted_grad.tensor, probs_grad.tensor, &workspace_size, &executor),
         "aclnnMoeTokenUnpermuteGradGetWorkspaceSize");
    if (int rc = RunPlan(aclnnMoeTokenUnpermuteGrad, "aclnnMoeTokenUnpermuteGrad", workspace_size,
                         executor, device.stream))
        return rc;

    for (DeviceTensor *t : {&permuted_grad, &probs_grad})
        if (int rc = PrintFloats(*t, "mean result"))
            return rc;

    Release(&permuted);
    Release(&grad);
    Release(&probs);
    Release(&sorted);
    Release(&permuted_grad);
    Release(&probs_grad);
    device.Close();
    return 0;
}
