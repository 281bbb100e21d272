// moe_token_unpermute.cpp - MoeTokenUnpermute through the aclnn API, with
// the data and calls of the vendor's example program.  The sorted indices
// are host floats {0, 1} described as INT32, so the operator sees
// {0, 1065353216}: the second slot names no row and is dropped.  Prints the
// output buffer as floats, one per line.
#include <cstdio>
#include <vector>

#include "acl/acl.h"
#include "aclnnop/aclnn_moe_token_unpermute.h"
#include "device_program.h"

int main()
{
    Device device;
    MUST(device.Open(), "Init acl");

    std::vector<float> permuted_host = {1, 2, 3, 4};
    std::vector<float> sorted_host = {0, 1};
    std::vector<float> probs_host = {1, 1};
    std::vector<float> out_host = {0, 0};

    DeviceTensor permuted, sorted, probs, out;
    MUST(Upload(permuted_host, {2, 2}, aclDataType::ACL_BF16, &permuted), "permuted");
    MUST(Upload(sorted_host, {2}, aclDataType::ACL_INT32, &sorted), "sorted");
    MUST(Upload(probs_host, {1, 2}, aclDataType::ACL_BF16, &probs), "probs");
    MUST(Upload(out_host, {1, 2}, aclDataType::ACL_BF16, &out), "out");

    uint64_t workspace_size = 0;
    aclOpExecutor *executor;
    MUST(aclnnMoeTokenUnpermuteGetWorkspaceSize(permuted.tensor, sorted.tensor, probs.tensor,
                                                false, nullptr, out.tensor, &workspace_size,
                                                &executor),
         "aclnnMoeTokenUnpermuteGetWorkspaceSize");
    if (int rc = RunPlan(aclnnMoeTokenUnpermute, "aclnnMoeTokenUnpermute", workspace_size,
                         executor, device.stream))
        return rc;

    if (int rc = PrintFloats(out, "mean result"))
        return rc;

    Release(&permuted);
    Release(&sorted);
    Release(&probs);
    Release(&out);
    device.Close();
    return 0;
}
