/*
 * device_harness.c - a test harness written for an Ascend device, running
 * on the host: it includes the vendor's headers (acl/acl.h,
 * aclnnop/aclnn_moe_token_*.h), allocates device memory, builds tensors
 * and calls the aclnn two-phase API, exactly as it would on an NPU, and
 * links libmoeperm-aclnn instead of CANN (docs/aclnn-host.md):
 *
 *     cc device_harness.c $(pkg-config --cflags --libs moeperm-aclnn)
 *
 * What it checks is a property of a mixture-of-experts layer that holds on
 * the device: dispatch the tokens (MoeTokenPermute), then combine them
 * (MoeTokenUnpermute) with routing weights that give each token's first
 * expert weight 1 and the others 0, and every token comes back bit for
 * bit.  It is plain C, which the vendor's headers are not; these are.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acl/acl.h"
#include "aclnnop/aclnn_moe_token_permute.h"
#include "aclnnop/aclnn_moe_token_unpermute.h"

#define TOKENS 64
#define TOP_K 4
#define HIDDEN 96
#define EXPERTS 8

/* Stops the harness with the runtime's own account of what failed. */
static bool ok(int status, const char *what)
{
    if (status == 0)
        return true;
    const char *why = aclGetRecentErrMsg();
    fprintf(stderr, "%s failed with %d: %s\n", what, status, why ? why : "(no message)");
    return false;
}

/* A device buffer of bytes, filled from host (when not NULL), and a
 * contiguous ND tensor over it. */
typedef struct device_tensor {
    void *memory;
    aclTensor *tensor;
    size_t bytes;
} device_tensor;

static bool upload(device_tensor *t, const void *host, size_t element_size, aclDataType dtype,
                   int64_t rows, int64_t cols)
{
    int64_t dims[2] = {rows, cols};
    uint64_t ndim = cols > 0 ? 2 : 1;
    t->bytes = (size_t)rows * (size_t)(cols > 0 ? cols : 1) * element_size;
    if (!ok(aclrtMalloc(&t->memory, t->bytes, ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMalloc"))
        return false;
    if (host != NULL &&
        !ok(aclrtMemcpy(t->memory, t->bytes, host, t->bytes, ACL_MEMCPY_HOST_TO_DEVICE),
            "aclrtMemcpy"))
        return false;
    t->tensor = aclCreateTensor(dims, ndim, dtype, NULL, 0, ACL_FORMAT_ND, dims, ndim, t->memory);
    return ok(t->tensor == NULL, "aclCreateTensor");
}

static void release(device_tensor *t)
{
    aclDestroyTensor(t->tensor);
    if (t->memory != NULL)
        aclrtFree(t->memory);
}

int main(void)
{
    static uint16_t tokens[TOKENS][HIDDEN], back[TOKENS][HIDDEN]; /* bf16 bits */
    static int32_t experts[TOKENS][TOP_K];
    static float probs[TOKENS][TOP_K];
    uint32_t seed = 12345;
    for (int t = 0; t < TOKENS; t++) {
        for (int h = 0; h < HIDDEN; h++) {
            seed = seed * 1664525u + 1013904223u;
            tokens[t][h] = (uint16_t)(0x3c00 | (seed >> 20)); /* finite bf16 values */
        }
        for (int k = 0; k < TOP_K; k++) {
            seed = seed * 1664525u + 1013904223u;
            experts[t][k] = (int32_t)(seed >> 16) % EXPERTS;
            probs[t][k] = k == 0 ? 1.0f : 0.0f;
        }
    }

    aclrtStream stream;
    if (!ok(aclInit(NULL), "aclInit") || !ok(aclrtSetDevice(0), "aclrtSetDevice") ||
        !ok(aclrtCreateStream(&stream), "aclrtCreateStream"))
        return 1;
    const char *chip = aclrtGetSocName();
    printf("runtime: %s\n", chip ? chip : "(unknown chip)");

    int64_t slots = TOKENS * TOP_K;
    device_tensor x = {0}, ix = {0}, permuted = {0}, sorted = {0}, p = {0}, out = {0};
    bool good = upload(&x, tokens, 2, ACL_BF16, TOKENS, HIDDEN) &&
                upload(&ix, experts, 4, ACL_INT32, TOKENS, TOP_K) &&
                upload(&permuted, NULL, 2, ACL_BF16, slots, HIDDEN) &&
                upload(&sorted, NULL, 4, ACL_INT32, slots, 0) &&
                upload(&p, probs, 4, ACL_FLOAT, TOKENS, TOP_K) &&
                upload(&out, NULL, 2, ACL_BF16, TOKENS, HIDDEN);

    /* Dispatch: one copy of each token per chosen expert. */
    uint64_t workspace_size = 0;
    aclOpExecutor *executor = NULL;
    void *workspace = NULL;
    good = good &&
           ok(aclnnMoeTokenPermuteGetWorkspaceSize(x.tensor, ix.tensor, 0, false,
                                                   permuted.tensor, sorted.tensor,
                                                   &workspace_size, &executor),
              "aclnnMoeTokenPermuteGetWorkspaceSize") &&
           (workspace_size == 0 ||
            ok(aclrtMalloc(&workspace, workspace_size, ACL_MEM_MALLOC_HUGE_FIRST), "workspace")) &&
           ok(aclnnMoeTokenPermute(workspace, workspace_size, executor, stream),
              "aclnnMoeTokenPermute");
    if (workspace != NULL)
        aclrtFree(workspace);
    workspace = NULL;

    /* Combine with one-hot weights: each token's first copy, times 1. */
    good = good &&
           ok(aclnnMoeTokenUnpermuteGetWorkspaceSize(permuted.tensor, sorted.tensor, p.tensor,
                                                     false, NULL, out.tensor, &workspace_size,
                                                     &executor),
              "aclnnMoeTokenUnpermuteGetWorkspaceSize") &&
           (workspace_size == 0 ||
            ok(aclrtMalloc(&workspace, workspace_size, ACL_MEM_MALLOC_HUGE_FIRST), "workspace")) &&
           ok(aclnnMoeTokenUnpermute(workspace, workspace_size, executor, stream),
              "aclnnMoeTokenUnpermute") &&
           ok(aclrtSynchronizeStream(stream), "aclrtSynchronizeStream") &&
           ok(aclrtMemcpy(back, sizeof back, out.memory, out.bytes, ACL_MEMCPY_DEVICE_TO_HOST),
              "aclrtMemcpy back");
    if (workspace != NULL)
        aclrtFree(workspace);

    int differ = 0;
    for (int t = 0; good && t < TOKENS; t++)
        if (memcmp(tokens[t], back[t], sizeof tokens[t]) != 0 && differ++ == 0)
            fprintf(stderr, "token %d does not come back from dispatch and combine\n", t);
    if (good)
        printf("%d tokens, top-k %d, hidden %d: %s\n", TOKENS, TOP_K, HIDDEN,
               differ ? "tokens differ" : "every token comes back bit for bit");

    device_tensor *all[] = {&x, &ix, &permuted, &sorted, &p, &out};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        release(all[i]);
    aclrtDestroyStream(stream);
    aclrtResetDevice(0);
    aclFinalize();
    return good && differ == 0 ? 0 : 1;
}
