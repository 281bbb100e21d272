/*
 * npu.c - the "npu" backend: runs a golden case through the vendor's
 * aclnnMoeTokenPermuteGrad on an Ascend device, so that `moeperm check
 * --backend npu` judges a real kernel against the CPU reference's bits.
 *
 * The runtime is opened once per process (aclInit, device, stream) because
 * ACL initialisation is process-wide and slow; each case then owns its
 * device buffers, tensors and workspace, and gives every one of them back
 * on every path, in reverse order of acquisition, so a failing case leaves
 * the device as it found it and the next case starts clean.  Device
 * pointers are never dereferenced here: they only travel to ACL calls.
 *
 * A case goes through the CPU reference's checks on the host first, and
 * one the reference refuses is BACKEND_BAD_INPUT (exit 2) with its sentence,
 * as on the cpu backend, before anything touches the device: the vendor's
 * host code does not reliably reject bad indices (spec §3), and a case the
 * reference refuses has no golden output to compare with.  After that, every
 * ACL or aclnn failure is BACKEND_FAILURE (exit 3), even a status that says
 * "invalid parameter": the case was accepted by the reference, so a refusal
 * is the device stack's disagreement, not bad input from the user.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "golden/case.h"
#include "golden/generate.h"
#include "npu/acl.h"
#include "npu/loader.h"

struct backend {
    acl_api api;
    int32_t device;
    aclrtStream stream;
};

/* One open backend at a time: ACL state (aclInit, the device) is
 * process-wide, so a second open would fail inside aclInit with a less
 * helpful message. */
static bool backend_is_open;

/* The runtime's own account of its last failure, as ": text", or "". */
static const char *recent_message(const acl_api *api, char *buf, size_t len)
{
    const char *recent = api->aclGetRecentErrMsg != NULL ? api->aclGetRecentErrMsg() : NULL;
    if (recent == NULL || *recent == '\0')
        return "";
    snprintf(buf, len, ": %s", recent);
    return buf;
}

/* Formats "<call> failed with <kind> <code>: <runtime's own message>". */
static void describe_failure(const acl_api *api, char *err, size_t err_len, const char *call,
                             const char *kind, long code)
{
    char recent[1024];
    snprintf(err, err_len, "%s failed with %s %ld%s", call, kind, code,
             recent_message(api, recent, sizeof recent));
}

static int npu_open(const backend_options *options, backend **out, char *err, size_t err_len)
{
    *out = NULL;
    if (backend_is_open) {
        snprintf(err, err_len, "the npu backend is already open in this process");
        return BACKEND_FAILURE;
    }
    backend *b = calloc(1, sizeof *b);
    if (b == NULL) {
        snprintf(err, err_len, "out of memory opening the npu backend");
        return BACKEND_FAILURE;
    }
    b->device = options != NULL ? options->device_id : 0;
    if (acl_load(&b->api, err, err_len) != 0) {
        free(b);
        return BACKEND_FAILURE;
    }
    const acl_api *a = &b->api;
    char call[64];
    aclError rc = a->aclInit(NULL);
    if (rc != ACL_SUCCESS) {
        describe_failure(a, err, err_len, "aclInit", "ACL error", rc);
        goto unload;
    }
    rc = a->aclrtSetDevice(b->device);
    if (rc != ACL_SUCCESS) {
        snprintf(call, sizeof call, "aclrtSetDevice(%d)", (int)b->device);
        describe_failure(a, err, err_len, call, "ACL error", rc);
        goto finalize;
    }
    rc = a->aclrtCreateStream(&b->stream);
    if (rc != ACL_SUCCESS) {
        describe_failure(a, err, err_len, "aclrtCreateStream", "ACL error", rc);
        goto reset;
    }
    backend_is_open = true;
    *out = b;
    return BACKEND_OK;

reset:
    a->aclrtResetDevice(b->device);
finalize:
    a->aclFinalize();
unload:
    acl_unload(&b->api);
    free(b);
    return BACKEND_FAILURE;
}

static void npu_close(backend *b)
{
    if (b == NULL)
        return;
    const acl_api *a = &b->api;
    /* Nothing useful can be done with a failure this late: the process is
     * ending and the runtime reclaims the device anyway. */
    a->aclrtDestroyStream(b->stream);
    a->aclrtResetDevice(b->device);
    a->aclFinalize();
    acl_unload(&b->api);
    free(b);
    backend_is_open = false;
}

/* One device tensor: its memory, its descriptor, and what to call it. */
typedef struct device_tensor {
    const char *name;
    void *data;        /* device memory, never dereferenced here */
    aclTensor *tensor; /* descriptor over data */
} device_tensor;

/* What a run holds; run_release() gives back whatever is non-NULL. */
typedef struct run_state {
    device_tensor grad, indices, out;
    void *workspace;
} run_state;

static void release_tensor(const acl_api *a, device_tensor *t)
{
    if (t->tensor != NULL)
        a->aclDestroyTensor(t->tensor);
    if (t->data != NULL)
        a->aclrtFree(t->data);
    t->tensor = NULL;
    t->data = NULL;
}

static void run_release(const acl_api *a, run_state *s)
{
    if (s->workspace != NULL)
        a->aclrtFree(s->workspace);
    s->workspace = NULL;
    release_tensor(a, &s->out);
    release_tensor(a, &s->indices);
    release_tensor(a, &s->grad);
}

/* Allocates bytes of device memory for t and, when host is given, copies
 * it there.  A zero-byte tensor still gets a (one-byte) allocation because
 * aclrtMalloc refuses size 0 and aclCreateTensor wants an address. */
static int device_upload(const acl_api *a, device_tensor *t, const void *host, size_t bytes,
                         char *err, size_t err_len)
{
    char call[128];
    size_t alloc = bytes > 0 ? bytes : 1;
    aclError rc = a->aclrtMalloc(&t->data, alloc, ACL_MEM_MALLOC_HUGE_FIRST);
    if (rc != ACL_SUCCESS) {
        t->data = NULL;
        snprintf(call, sizeof call, "aclrtMalloc(%zu bytes for %s)", alloc, t->name);
        describe_failure(a, err, err_len, call, "ACL error", rc);
        return BACKEND_FAILURE;
    }
    if (host != NULL && bytes > 0) {
        rc = a->aclrtMemcpy(t->data, alloc, host, bytes, ACL_MEMCPY_HOST_TO_DEVICE);
        if (rc != ACL_SUCCESS) {
            snprintf(call, sizeof call, "aclrtMemcpy(%s, %zu bytes, host to device)", t->name,
                     bytes);
            describe_failure(a, err, err_len, call, "ACL error", rc);
            return BACKEND_FAILURE;
        }
    }
    return BACKEND_OK;
}

/* A contiguous ND descriptor: strides in elements, storage = view. */
static int describe_tensor(const acl_api *a, device_tensor *t, const int64_t *dims,
                           uint64_t ndim, aclDataType dtype, char *err, size_t err_len)
{
    int64_t strides[2];
    int64_t stride = 1;
    for (uint64_t i = ndim; i-- > 0;) {
        strides[i] = stride;
        stride *= dims[i];
    }
    t->tensor = a->aclCreateTensor(dims, ndim, dtype, strides, 0, ACL_FORMAT_ND, dims, ndim,
                                   t->data);
    if (t->tensor == NULL) {
        char recent[1024];
        snprintf(err, err_len, "aclCreateTensor(%s) returned NULL%s", t->name,
                 recent_message(a, recent, sizeof recent));
        return BACKEND_FAILURE;
    }
    return BACKEND_OK;
}

/* Bytes of n elements of size elem, or SIZE_MAX when it does not fit. */
static size_t bytes_of(int64_t n, size_t elem)
{
    if (n < 0 || (uint64_t)n > SIZE_MAX / elem)
        return SIZE_MAX;
    return (size_t)n * elem;
}

static int npu_run_case(backend *b, const golden_case *c, void *out, char *err, size_t err_len)
{
    const acl_api *a = &b->api;
    size_t elem;
    aclDataType dtype;
    switch (c->dtype) {
    case MOEPERM_FLOAT: elem = 4; dtype = ACL_FLOAT; break;
    case MOEPERM_FLOAT16: elem = 2; dtype = ACL_FLOAT16; break;
    case MOEPERM_BF16: elem = 2; dtype = ACL_BF16; break;
    default:
        snprintf(err, err_len, "dtype %d is not one the operator takes", (int)c->dtype);
        return BACKEND_BAD_INPUT;
    }
    switch (golden_check_reference(c, out, err, err_len)) {
    case MOEPERM_SUCCESS:
        break;
    case MOEPERM_ERR_PARAM_NULLPTR:
    case MOEPERM_ERR_PARAM_INVALID:
        return BACKEND_BAD_INPUT;
    default:
        return BACKEND_FAILURE;
    }
    const int64_t T = c->tokens_num, K = c->top_k, H = c->hidden_size, R = c->num_rows;
    if (T < 0 || K < 0 || H < 0 || R < 0 || (K > 0 && T > INT64_MAX / K) ||
        (H > 0 && (R > INT64_MAX / H || T > INT64_MAX / H))) {
        snprintf(err, err_len, "shape tokens_num=%lld top_k=%lld hidden_size=%lld "
                 "num_rows=%lld does not fit in memory", (long long)T, (long long)K,
                 (long long)H, (long long)R);
        return BACKEND_BAD_INPUT;
    }
    const size_t grad_bytes = bytes_of(R * H, elem), index_bytes = bytes_of(T * K, 4),
                 out_bytes = bytes_of(T * H, elem);
    if (grad_bytes == SIZE_MAX || index_bytes == SIZE_MAX || out_bytes == SIZE_MAX) {
        snprintf(err, err_len, "case %s is too large for this host's address space",
                 c->name ? c->name : "?");
        return BACKEND_BAD_INPUT;
    }

    uint64_t workspace_size = 0;
    aclOpExecutor *executor = NULL;
    aclnnStatus st;
    aclError e;
    run_state s = {{"permuted_output_grad", NULL, NULL},
                   {"sorted_indices", NULL, NULL},
                   {"input_grad", NULL, NULL},
                   NULL};
    const int64_t grad_dims[2] = {R, H}, index_dims[1] = {T * K}, out_dims[2] = {T, H};
    int rc = device_upload(a, &s.grad, c->permuted_output_grad, grad_bytes, err, err_len);
    if (rc == BACKEND_OK)
        rc = device_upload(a, &s.indices, c->sorted_indices, index_bytes, err, err_len);
    if (rc == BACKEND_OK)
        rc = device_upload(a, &s.out, NULL, out_bytes, err, err_len);
    if (rc == BACKEND_OK)
        rc = describe_tensor(a, &s.grad, grad_dims, 2, dtype, err, err_len);
    if (rc == BACKEND_OK)
        rc = describe_tensor(a, &s.indices, index_dims, 1, ACL_INT32, err, err_len);
    if (rc == BACKEND_OK)
        rc = describe_tensor(a, &s.out, out_dims, 2, dtype, err, err_len);
    if (rc != BACKEND_OK)
        goto done;

    st = a->aclnnMoeTokenPermuteGradGetWorkspaceSize(
        s.grad.tensor, s.indices.tensor, K, c->padded_mode, s.out.tensor, &workspace_size,
        &executor);
    if (st != ACLNN_SUCCESS) {
        describe_failure(a, err, err_len, "aclnnMoeTokenPermuteGradGetWorkspaceSize",
                         "aclnn status", st);
        rc = BACKEND_FAILURE;
        goto done;
    }
    if (workspace_size > 0) {
        if (workspace_size > SIZE_MAX) {
            snprintf(err, err_len, "the operator asks for a workspace of %llu bytes",
                     (unsigned long long)workspace_size);
            rc = BACKEND_FAILURE;
            goto done;
        }
        e = a->aclrtMalloc(&s.workspace, (size_t)workspace_size, ACL_MEM_MALLOC_HUGE_FIRST);
        if (e != ACL_SUCCESS) {
            /* The plan is now lost: aclnn frees a plan only by running it,
             * and offers no call to drop an unrun one (aclDestroyAclOpExecutor
             * is for repeatable plans only). */
            s.workspace = NULL;
            char call[96];
            snprintf(call, sizeof call, "aclrtMalloc(%llu bytes of workspace)",
                     (unsigned long long)workspace_size);
            describe_failure(a, err, err_len, call, "ACL error", e);
            rc = BACKEND_FAILURE;
            goto done;
        }
    }
    st = a->aclnnMoeTokenPermuteGrad(s.workspace, workspace_size, executor, b->stream);
    if (st != ACLNN_SUCCESS) {
        describe_failure(a, err, err_len, "aclnnMoeTokenPermuteGrad", "aclnn status", st);
        /* Work may already be queued on the stream: wait for it before the
         * memory it uses is freed.  Its own status adds nothing. */
        a->aclrtSynchronizeStream(b->stream);
        rc = BACKEND_FAILURE;
        goto done;
    }
    e = a->aclrtSynchronizeStream(b->stream);
    if (e != ACL_SUCCESS) {
        describe_failure(a, err, err_len, "aclrtSynchronizeStream (after the operator)",
                         "ACL error", e);
        rc = BACKEND_FAILURE;
        goto done;
    }
    if (out_bytes > 0) {
        e = a->aclrtMemcpy(out, out_bytes, s.out.data, out_bytes, ACL_MEMCPY_DEVICE_TO_HOST);
        if (e != ACL_SUCCESS) {
            char call[96];
            snprintf(call, sizeof call, "aclrtMemcpy(input_grad, %zu bytes, device to host)",
                     out_bytes);
            describe_failure(a, err, err_len, call, "ACL error", e);
            rc = BACKEND_FAILURE;
        }
    }
done:
    run_release(a, &s);
    return rc;
}

const backend_ops backend_npu = {"npu", npu_open, npu_run_case, npu_close};
