/*
 * fake_operator.c - the operator half of the fake Ascend stack:
 * aclnnMoeTokenPermuteGradGetWorkspaceSize and aclnnMoeTokenPermuteGrad.
 *
 * The arithmetic is the tests' own naive model of spec §2 (tests/naive.c),
 * never libmoeperm, so `moeperm check --backend npu` against the fake
 * compares two implementations written apart.  The planning phase is
 * stricter than the vendor's: it refuses any descriptor the backend should
 * never build (non-contiguous, wrong format, storage that disagrees with
 * the view, memory that is not a live device allocation), because here a
 * refusal means a backend bug.
 *
 * Faults on demand, read at each call, counted from 1 since loading:
 *   FAKE_ACL_FAIL_PLAN=n     the n-th GetWorkspaceSize returns 161002
 *   FAKE_ACL_FAIL_RUN=n      the n-th run returns 361001
 *   FAKE_ACL_FLIP=E:B        flip bit B of output element E (row-major)
 *   FAKE_ACL_FLIP_RUN=n      ... only in the n-th run (default: every run)
 *   FAKE_ACL_WORKSPACE=bytes the workspace asked for (default 512)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_acl.h"
#include "naive.h"

#define FAKE_ACLNN_ERR_PARAM_NULLPTR 161001
#define FAKE_ACLNN_ERR_PARAM_INVALID 161002
#define FAKE_ACLNN_ERR_RUNTIME_ERROR 361001
#define FAKE_ACLNN_ERR_INNER 561000

struct aclOpExecutor {
    aclDataType dtype;
    int64_t tokens, top_k, hidden, rows;
    const void *grad, *indices; /* device addresses */
    void *out;
    uint64_t workspace_size;
    long run; /* which run this is, for FAKE_ACL_FLIP_RUN */
    aclOpExecutor *next; /* in unrun, until a run takes it */
};

/* Plans made but never run (a workspace allocation refused in between):
 * aclnn has no call to drop one, so they are freed when the library goes,
 * and leak checkers run on moeperm see only moeperm's own leaks. */
static aclOpExecutor *unrun;

static void take_unrun(aclOpExecutor *e)
{
    for (aclOpExecutor **p = &unrun; *p != NULL; p = &(*p)->next) {
        if (*p == e) {
            *p = e->next;
            return;
        }
    }
}

__attribute__((destructor)) static void free_unrun(void)
{
    while (unrun != NULL) {
        aclOpExecutor *e = unrun;
        unrun = e->next;
        free(e);
    }
}

static size_t elem_size(aclDataType dtype)
{
    return dtype == ACL_FLOAT || dtype == ACL_INT32 ? 4 : 2;
}

/* Checks one tensor: ours, alive, ND, contiguous, storage = view, memory
 * in a live allocation.  Returns its element count, or -1 with the reason
 * in aclGetRecentErrMsg(). */
static int64_t check_tensor(const aclTensor *t, const char *name, uint64_t ndim)
{
    if (t->magic != FAKE_TENSOR_MAGIC) {
        fake_acl_misuse("%s is not a live tensor", name);
        fake_acl_set_error("fake aclnn: %s is not a live tensor", name);
        return -1;
    }
    if (t->ndim != ndim || t->format != ACL_FORMAT_ND || t->offset != 0 ||
        t->storage_ndim != ndim) {
        fake_acl_set_error("fake aclnn: %s must be %llu-d ND with offset 0 and storage = view",
                           name, (unsigned long long)ndim);
        return -1;
    }
    int64_t n = 1;
    for (uint64_t i = ndim; i-- > 0;) {
        if (t->strides[i] != n || t->storage_dims[i] != t->dims[i] || t->dims[i] < 0) {
            fake_acl_set_error("fake aclnn: %s dim %llu: extent %lld stride %lld storage %lld "
                               "is not contiguous",
                               name, (unsigned long long)i, (long long)t->dims[i],
                               (long long)t->strides[i], (long long)t->storage_dims[i]);
            return -1;
        }
        n *= t->dims[i];
    }
    if (fake_acl_host(t->data, (size_t)n * elem_size(t->dtype), name) == NULL) {
        fake_acl_set_error("fake aclnn: %s's memory is not a live device allocation", name);
        return -1;
    }
    return n;
}

aclnnStatus aclnnMoeTokenPermuteGradGetWorkspaceSize(const aclTensor *permutedOutputGrad,
                                                     const aclTensor *sortedIndices,
                                                     int64_t numTopk, bool paddedMode,
                                                     aclTensor *out, uint64_t *workspaceSize,
                                                     aclOpExecutor **executor)
{
    fake_acl_stats *stats = fake_acl_stats_get();
    long plan = ++stats->plans;
    if (permutedOutputGrad == NULL || sortedIndices == NULL || out == NULL ||
        workspaceSize == NULL || executor == NULL) {
        fake_acl_set_error("fake aclnn: a NULL tensor or out-pointer");
        return FAKE_ACLNN_ERR_PARAM_NULLPTR;
    }
    if (plan == fake_acl_env_long("FAKE_ACL_FAIL_PLAN", 0)) {
        fake_acl_set_error("fake aclnn: injected refusal of plan %ld (FAKE_ACL_FAIL_PLAN)",
                           plan);
        return FAKE_ACLNN_ERR_PARAM_INVALID;
    }
    const aclTensor *g = permutedOutputGrad, *ix = sortedIndices;
    if (check_tensor(g, "permutedOutputGrad", 2) < 0 || check_tensor(ix, "sortedIndices", 1) < 0 ||
        check_tensor(out, "out", 2) < 0)
        return FAKE_ACLNN_ERR_PARAM_INVALID;
    if ((g->dtype != ACL_FLOAT && g->dtype != ACL_FLOAT16 && g->dtype != ACL_BF16) ||
        out->dtype != g->dtype || ix->dtype != ACL_INT32) {
        fake_acl_set_error("fake aclnn: dtypes grad %d, indices %d, out %d", (int)g->dtype,
                           (int)ix->dtype, (int)out->dtype);
        return FAKE_ACLNN_ERR_PARAM_INVALID;
    }
    const int64_t T = out->dims[0], H = out->dims[1], R = g->dims[0], N = ix->dims[0];
    if (numTopk < 1 || numTopk > 512 || paddedMode || N != T * numTopk || g->dims[1] != H ||
        R > N) {
        fake_acl_set_error("fake aclnn: shapes grad [%lld, %lld], indices [%lld], out [%lld, "
                           "%lld], numTopk %lld, paddedMode %d do not agree",
                           (long long)R, (long long)g->dims[1], (long long)N, (long long)T,
                           (long long)H, (long long)numTopk, (int)paddedMode);
        return FAKE_ACLNN_ERR_PARAM_INVALID;
    }
    /* Reading device memory here is the fake's privilege: the host-to-device
     * copy has completed.  A negative index would send the naive loop
     * outside the tensor. */
    const int32_t *idx = fake_acl_host(ix->data, (size_t)N * 4, "sortedIndices");
    for (int64_t i = 0; i < N; i++) {
        if (idx[i] < 0) {
            fake_acl_set_error("fake aclnn: sortedIndices[%lld] = %d is negative", (long long)i,
                               (int)idx[i]);
            return FAKE_ACLNN_ERR_PARAM_INVALID;
        }
    }
    aclOpExecutor *e = malloc(sizeof *e);
    if (e == NULL)
        return FAKE_ACLNN_ERR_INNER;
    *e = (aclOpExecutor){g->dtype, T, numTopk, H, R, g->data, ix->data, out->data,
                         (uint64_t)fake_acl_env_long("FAKE_ACL_WORKSPACE", 512), 0, unrun};
    unrun = e;
    stats->executors_created++;
    *workspaceSize = e->workspace_size;
    *executor = e;
    return ACLNN_SUCCESS;
}

/* Runs at aclrtSynchronizeStream, on the host copies of device memory. */
static void execute(void *arg)
{
    const aclOpExecutor *e = arg;
    size_t es = elem_size(e->dtype);
    const void *grad = fake_acl_host(e->grad, (size_t)(e->rows * e->hidden) * es, "grad at run");
    const int32_t *idx =
        fake_acl_host(e->indices, (size_t)(e->tokens * e->top_k) * 4, "indices at run");
    unsigned char *out = fake_acl_host(e->out, (size_t)(e->tokens * e->hidden) * es, "out at run");
    if (grad == NULL || idx == NULL || out == NULL)
        return;
    /* aclDataType values equal moeperm_dtype's for the three float types. */
    naive_permute_grad((moeperm_dtype)e->dtype, grad, e->rows, e->hidden, idx, e->tokens,
                       e->top_k, out);
    fake_acl_stats_get()->operator_runs++;

    const char *flip = getenv("FAKE_ACL_FLIP");
    long flip_run = fake_acl_env_long("FAKE_ACL_FLIP_RUN", 0);
    long long element;
    int bit;
    if (flip != NULL && sscanf(flip, "%lld:%d", &element, &bit) == 2 &&
        (flip_run == 0 || flip_run == e->run) && element >= 0 &&
        element < e->tokens * e->hidden && bit >= 0 && (size_t)bit < 8 * es)
        out[(size_t)element * es + (size_t)bit / 8] ^= (unsigned char)(1u << (bit % 8));
}

aclnnStatus aclnnMoeTokenPermuteGrad(void *workspace, uint64_t workspaceSize,
                                     aclOpExecutor *executor, aclrtStream stream)
{
    if (executor == NULL) {
        fake_acl_set_error("fake aclnn: NULL executor");
        return FAKE_ACLNN_ERR_PARAM_NULLPTR;
    }
    /* The plan is consumed whatever happens next, as in aclnn. */
    take_unrun(executor);
    long run = ++fake_acl_stats_get()->executors_run;
    executor->run = run;
    aclnnStatus rc = ACLNN_SUCCESS;
    if (run == fake_acl_env_long("FAKE_ACL_FAIL_RUN", 0)) {
        fake_acl_set_error("fake aclnn: injected runtime failure of run %ld (FAKE_ACL_FAIL_RUN)",
                           run);
        rc = FAKE_ACLNN_ERR_RUNTIME_ERROR;
    } else if (workspaceSize < executor->workspace_size ||
               (executor->workspace_size > 0 &&
                fake_acl_host(workspace, executor->workspace_size, "workspace") == NULL)) {
        fake_acl_set_error("fake aclnn: workspace %p of %llu bytes, %llu planned", workspace,
                           (unsigned long long)workspaceSize,
                           (unsigned long long)executor->workspace_size);
        rc = FAKE_ACLNN_ERR_PARAM_INVALID;
    } else if (fake_acl_enqueue(stream, execute, executor) != 0) {
        fake_acl_set_error("fake aclnn: %p is not a stream the runtime made", stream);
        rc = FAKE_ACLNN_ERR_RUNTIME_ERROR;
    }
    if (rc != ACLNN_SUCCESS)
        free(executor);
    return rc;
}
