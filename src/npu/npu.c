/*
 * npu.c - the "npu" backend: runs a problem through the vendor's aclnn
 * entry point of its operator (aclnnMoeTokenPermuteGrad,
 * aclnnMoeTokenPermute, aclnnMoeTokenUnpermute, aclnnMoeTokenUnpermuteGrad)
 * on an Ascend device, so that `moeperm check --backend npu` judges a real
 * kernel against the CPU reference's bits.
 *
 * The runtime is opened once per process (aclInit, device, stream) because
 * ACL initialisation is process-wide and slow; each case then owns its
 * device buffers, tensors, restore_shape int array and workspace (one
 * run_state), and gives every one of them back on every path, in reverse
 * order of acquisition, so a failing case leaves the device as it found it
 * and the next case starts clean.  Device pointers are never dereferenced
 * here: they only travel to ACL calls.
 *
 * A problem goes through the CPU reference's checks on the host first, and
 * one the reference refuses is BACKEND_BAD_INPUT (exit 2) with its
 * sentence, as on the cpu backend, before anything touches the device: the
 * vendor's host code does not reliably reject bad indices (docs/npu.md),
 * and a problem the reference refuses has no golden output to compare
 * with.  A missing entry point of the problem's operator (all but
 * MoeTokenPermuteGrad's are optional in the loader), or of the int arrays
 * its restore_shape needs, is a BACKEND_FAILURE named before any device
 * call too, so the other operators' cases still run.  After that,
 * every ACL or aclnn failure is BACKEND_FAILURE (exit 3), even a status
 * that says "invalid parameter": the case was accepted by the reference,
 * so a refusal is the device stack's disagreement, not bad input from the
 * user.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
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
    device_tensor in[BACKEND_MAX_TENSORS], out[BACKEND_MAX_TENSORS];
    aclIntArray *restore_shape;
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
    if (s->restore_shape != NULL)
        a->aclDestroyIntArray(s->restore_shape);
    s->restore_shape = NULL;
    for (size_t i = BACKEND_MAX_TENSORS; i-- > 0;)
        release_tensor(a, &s->out[i]);
    for (size_t i = BACKEND_MAX_TENSORS; i-- > 0;)
        release_tensor(a, &s->in[i]);
}

/* Allocates bytes of device memory for t and copies host there.  Outputs
 * are copied too: where an operator leaves elements untouched, they must
 * come back as the caller had them.  A zero-byte tensor still gets a
 * (one-byte) allocation because aclrtMalloc refuses size 0 and
 * aclCreateTensor wants an address. */
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

/* moeperm_dtype's values are aclDataType's (include/moeperm/moeperm.h);
 * spelled out so a dtype added to one side cannot slip through unseen.
 * The host check has refused every dtype no operator takes. */
static aclDataType acl_dtype(moeperm_dtype dtype)
{
    switch (dtype) {
    case MOEPERM_FLOAT16:
        return ACL_FLOAT16;
    case MOEPERM_BF16:
        return ACL_BF16;
    case MOEPERM_INT8:
        return ACL_INT8;
    case MOEPERM_INT32:
        return ACL_INT32;
    case MOEPERM_INT64:
        return ACL_INT64;
    case MOEPERM_FLOAT:
    default:
        return ACL_FLOAT;
    }
}

/* A contiguous ND descriptor: strides in elements, storage = view. */
static int describe_tensor(const acl_api *a, device_tensor *t, const backend_tensor *host,
                           char *err, size_t err_len)
{
    int64_t strides[MOEPERM_MAX_DIMS];
    int64_t stride = 1;
    for (uint64_t i = host->ndim; i-- > 0;) {
        strides[i] = stride;
        stride *= host->shape[i];
    }
    t->tensor = a->aclCreateTensor(host->shape, host->ndim, acl_dtype(host->dtype), strides, 0,
                                   ACL_FORMAT_ND, host->shape, host->ndim, t->data);
    if (t->tensor == NULL) {
        char recent[1024];
        snprintf(err, err_len, "aclCreateTensor(%s) returned NULL%s", t->name,
                 recent_message(a, recent, sizeof recent));
        return BACKEND_FAILURE;
    }
    return BACKEND_OK;
}

/* The operator's two entry points, or a sentence naming the one missing. */
typedef struct entry_points {
    const char *plan_name, *run_name;
    bool plan_present;
    aclnnRun_fn run;
} entry_points;

static entry_points entry_points_of(const acl_api *a, moeperm_op op)
{
    switch (op) {
    case MOEPERM_OP_PERMUTE:
        return (entry_points){"aclnnMoeTokenPermuteGetWorkspaceSize", "aclnnMoeTokenPermute",
                              a->aclnnMoeTokenPermuteGetWorkspaceSize != NULL,
                              a->aclnnMoeTokenPermute};
    case MOEPERM_OP_UNPERMUTE:
        return (entry_points){"aclnnMoeTokenUnpermuteGetWorkspaceSize",
                              "aclnnMoeTokenUnpermute",
                              a->aclnnMoeTokenUnpermuteGetWorkspaceSize != NULL,
                              a->aclnnMoeTokenUnpermute};
    case MOEPERM_OP_UNPERMUTE_GRAD:
        return (entry_points){"aclnnMoeTokenUnpermuteGradGetWorkspaceSize",
                              "aclnnMoeTokenUnpermuteGrad",
                              a->aclnnMoeTokenUnpermuteGradGetWorkspaceSize != NULL,
                              a->aclnnMoeTokenUnpermuteGrad};
    default:
        return (entry_points){"aclnnMoeTokenPermuteGradGetWorkspaceSize",
                              "aclnnMoeTokenPermuteGrad",
                              a->aclnnMoeTokenPermuteGradGetWorkspaceSize != NULL,
                              a->aclnnMoeTokenPermuteGrad};
    }
}

/* The first phase of p's operator over the device tensors of s. */
static aclnnStatus plan(const acl_api *a, const backend_problem *p, run_state *s,
                        uint64_t *workspace_size, aclOpExecutor **executor)
{
    aclTensor *in[BACKEND_MAX_TENSORS], *out[BACKEND_MAX_TENSORS];
    for (size_t i = 0; i < BACKEND_MAX_TENSORS; i++) {
        in[i] = s->in[i].tensor;
        out[i] = s->out[i].tensor;
    }
    switch (p->op) {
    case MOEPERM_OP_PERMUTE:
        return a->aclnnMoeTokenPermuteGetWorkspaceSize(in[0], in[1], p->num_out_tokens,
                                                       p->padded_mode, out[0], out[1],
                                                       workspace_size, executor);
    case MOEPERM_OP_UNPERMUTE:
        return a->aclnnMoeTokenUnpermuteGetWorkspaceSize(in[0], in[1], in[2], p->padded_mode,
                                                         s->restore_shape, out[0],
                                                         workspace_size, executor);
    case MOEPERM_OP_UNPERMUTE_GRAD:
        return a->aclnnMoeTokenUnpermuteGradGetWorkspaceSize(
            in[0], in[1], in[2], in[3], p->padded_mode, s->restore_shape, out[0], out[1],
            workspace_size, executor);
    default:
        return a->aclnnMoeTokenPermuteGradGetWorkspaceSize(in[0], in[1], p->top_k,
                                                           p->padded_mode, out[0],
                                                           workspace_size, executor);
    }
}

/* Whether p's operator takes restoreShape, and p gives one. */
static bool passes_restore_shape(const backend_problem *p)
{
    return (p->op == MOEPERM_OP_UNPERMUTE || p->op == MOEPERM_OP_UNPERMUTE_GRAD) &&
           p->restore_shape != NULL && p->restore_shape_len > 0;
}

/* MoeTokenUnpermuteGrad without probs still needs a probsGradOut: the
 * vendor's header marks it required and its generated code refuses NULL
 * (frameworks pass a placeholder too).  The kernel does not write it
 * without probs; it takes the shape probs_grad would have at top_k 1 and
 * the tokens' dtype, and never comes back to the host. */
static bool needs_probs_grad_placeholder(const backend_problem *p)
{
    return p->op == MOEPERM_OP_UNPERMUTE_GRAD && !p->outputs[1].present;
}

static int upload_one(const acl_api *a, device_tensor *t, const backend_tensor *host,
                      char *err, size_t err_len)
{
    t->name = host->name;
    int rc = device_upload(a, t, host->data, host->bytes, err, err_len);
    if (rc == BACKEND_OK)
        rc = describe_tensor(a, t, host, err, err_len);
    return rc;
}

static int upload_all(const acl_api *a, const backend_problem *p, run_state *s, char *err,
                      size_t err_len)
{
    int rc = BACKEND_OK;
    for (size_t i = 0; rc == BACKEND_OK && i < p->input_count; i++)
        if (p->inputs[i].present)
            rc = upload_one(a, &s->in[i], &p->inputs[i], err, err_len);
    for (size_t i = 0; rc == BACKEND_OK && i < p->output_count; i++)
        if (p->outputs[i].present)
            rc = upload_one(a, &s->out[i], &p->outputs[i], err, err_len);
    if (rc == BACKEND_OK && needs_probs_grad_placeholder(p)) {
        const backend_tensor *grad = &p->inputs[1]; /* unpermuted_tokens_grad [N, H] */
        backend_tensor placeholder = {
            .name = "probs_grad placeholder",
            .dtype = grad->dtype,
            .ndim = 2,
            .shape = {grad->shape[0], 1},
            .bytes = (size_t)grad->shape[0] * moeperm_dtype_size(grad->dtype),
            .present = true,
        };
        rc = upload_one(a, &s->out[1], &placeholder, err, err_len);
    }
    if (rc == BACKEND_OK && passes_restore_shape(p)) {
        s->restore_shape = a->aclCreateIntArray(p->restore_shape, p->restore_shape_len);
        if (s->restore_shape == NULL) {
            char recent[1024];
            snprintf(err, err_len, "aclCreateIntArray(restore_shape) returned NULL%s",
                     recent_message(a, recent, sizeof recent));
            return BACKEND_FAILURE;
        }
    }
    return rc;
}

static int npu_run(backend *b, backend_problem *p, char *err, size_t err_len)
{
    const acl_api *a = &b->api;
    switch (backend_cpu_call(p, false, err, err_len)) {
    case MOEPERM_SUCCESS:
        break;
    case MOEPERM_ERR_PARAM_NULLPTR:
    case MOEPERM_ERR_PARAM_INVALID:
    case MOEPERM_ERR_INNER_TILING_ERROR:
        return BACKEND_BAD_INPUT;
    default:
        return BACKEND_FAILURE;
    }
    entry_points ep = entry_points_of(a, p->op);
    if (!ep.plan_present || ep.run == NULL) {
        snprintf(err, err_len, "the Ascend runtime has no %s, which %s needs (is the "
                 "operator's library loaded? see MOEPERM_ASCEND_LIBS in docs/npu.md)",
                 ep.plan_present ? ep.run_name : ep.plan_name, moeperm_op_name(p->op));
        return BACKEND_FAILURE;
    }
    if (passes_restore_shape(p) &&
        (a->aclCreateIntArray == NULL || a->aclDestroyIntArray == NULL)) {
        snprintf(err, err_len, "the Ascend runtime has no %s, which restore_shape needs",
                 a->aclCreateIntArray == NULL ? "aclCreateIntArray" : "aclDestroyIntArray");
        return BACKEND_FAILURE;
    }

    uint64_t workspace_size = 0;
    aclOpExecutor *executor = NULL;
    aclError e;
    run_state s;
    memset(&s, 0, sizeof s);
    int rc = upload_all(a, p, &s, err, err_len);
    if (rc != BACKEND_OK)
        goto done;

    aclnnStatus st = plan(a, p, &s, &workspace_size, &executor);
    if (st != ACLNN_SUCCESS) {
        describe_failure(a, err, err_len, ep.plan_name, "aclnn status", st);
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
    st = ep.run(s.workspace, workspace_size, executor, b->stream);
    if (st != ACLNN_SUCCESS) {
        describe_failure(a, err, err_len, ep.run_name, "aclnn status", st);
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
    for (size_t i = 0; i < p->output_count; i++) {
        const backend_tensor *t = &p->outputs[i];
        if (!t->present || t->bytes == 0)
            continue;
        e = a->aclrtMemcpy(t->data, t->bytes, s.out[i].data, t->bytes,
                           ACL_MEMCPY_DEVICE_TO_HOST);
        if (e != ACL_SUCCESS) {
            char call[128];
            snprintf(call, sizeof call, "aclrtMemcpy(%s, %zu bytes, device to host)", t->name,
                     t->bytes);
            describe_failure(a, err, err_len, call, "ACL error", e);
            rc = BACKEND_FAILURE;
            break;
        }
    }
done:
    run_release(a, &s);
    return rc;
}

const backend_ops backend_npu = {"npu", npu_open, npu_run, npu_close};
