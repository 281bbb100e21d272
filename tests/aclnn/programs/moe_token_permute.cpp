// moe_token_permute.cpp - MoeTokenPermute through the aclnn API, with the
// data and calls of the vendor's example program: three tokens of four
// values routed to two experts each, all rows kept.  Prints every float of
// the permuted buffer and every sorted index, one per line.
#include <cstdio>
#include <vector>

#include "acl/acl.h"
#include "aclnnop/aclnn_moe_token_permute.h"
#include "device_program.h"

int main()
{
    Device device;
    MUST(device.Open(), "Init acl");

    // Host floats described as bf16: the operator sees their halves.
    std::vector<float> tokens_host = {0.1f, 0.1f, 0.1f, 0.1f, 0.2f, 0.2f,
                                      0.2f, 0.2f, 0.3f, 0.3f, 0.3f, 0.3f};
    std::vector<int> indices_host = {1, 2, 0, 1, 0, 2};
    std::vector<float> permuted_host(24, 0.0f);
    std::vector<int> sorted_host(6, 0);

    DeviceTensor tokens, indices, permuted, sorted;
    MUST(Upload(tokens_host, {3, 4}, aclDataType::ACL_BF16, &tokens), "tokens");
    MUST(Upload(indices_host, {3, 2}, aclDataType::ACL_INT32, &indices), "indices");
    MUST(Upload(permuted_host, {6, 4}, aclDataType::ACL_BF16, &permuted), "permuted");
    MUST(Upload(sorted_host, {6}, aclDataType::ACL_INT32, &sorted), "sorted");

    int64_t num_out_tokens = 0;
    bool padded_mode = false;
    uint64_t workspace_size = 0;
    aclOpExecutor *executor;
    MUST(aclnnMoeTokenPermuteGetWorkspaceSize(tokens.tensor, indices.tensor, num_out_tokens,
                                              padded_mode, permuted.tensor, sorted.tensor,
                                              &workspace_size, &executor),
         "aclnnMoeTokenPermuteGetWorkspaceSize");
    if (int rc = RunPlan(aclnnMoeTokenPermute, "aclnnMoeTokenPermute", workspace_size,
                         executor, device.stream))
        return rc;

    if (int rc = PrintFloats(permuted, "expandedXData"))
        return rc;
    std::vector<int32_t> sorted_out;
    MUST(Download(sorted, &sorted_out), "sorted");
    for (std::size_t i = 0; i < sorted_out.size(); i++)
        std::printf("sortedIndicesData[%ld] is: %d\n", (long)i, sorted_out[i]);

    Release(&tokens);
    Release(&indices);
    Release(&permuted);
    Release(&sorted);
    device.Close();
    return 0;
}
