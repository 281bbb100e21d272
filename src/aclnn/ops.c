/*
 * ops.c - the four operators' aclnn entry points over libmoeperm.
 *
 * First phase (aclnnXxxGetWorkspaceSize): on a device it runs on the host
 * and cannot read tensor data, which a program may upload after it.  So it
 * checks what the device's host code checks, in its order and with its
 * codes (hicann/ops-transformer@c29bc10, docs/aclnn-host.md has the table):
 *
 *   1. a NULL required tensor or out-pointer       ACLNN_ERR_PARAM_NULLPTR
 *   2. a dtype or format the operator's definition does not list for a
 *      required tensor                              ACLNN_ERR_PARAM_INVALID
 *      ... for the optional probs                  ACLNN_ERR_INNER_FIND_KERNEL_ERROR
 *   3. every output empty: success, nothing to run
 *   4. what the operator's tiling refuses          ACLNN_ERR_INNER_TILING_ERROR
 *
 * and then asks libmoeperm's first phase about everything else it checks
 * on metadata alone (shapes, views, overlaps) by handing it the views with
 * the index tensor swapped for a placeholder of the same shape holding
 * valid indices: a refusal there keeps libmoeperm's code (161002 where the
 * device's result is undetermined: the device would run into undefined
 * behaviour instead of refusing).
 *
 * Second phase (aclnnXxx): the data is there now.  It checks that every
 * tensor the operator touches lies in device memory, then calls
 * libmoeperm's two phases back to back on the real views: libmoeperm
 * checks the indices (a negative one, two slots naming one row of
 * MoeTokenUnpermuteGrad's output) and refuses with
 * ACLNN_ERR_PARAM_INVALID, aclGetRecentErrMsg() naming the value; a device
 * would read or write out of bounds, or race, instead.  Otherwise the
 * outputs hold libmoeperm's bits when it returns: the work runs at launch.
 * No tensor is copied; the overhead over calling libmoeperm directly is a
 * few lookups (docs/performance.md).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aclnnop/aclnn_moe_token_permute.h"
#include "aclnnop/aclnn_moe_token_permute_grad.h"
#include "aclnnop/aclnn_moe_token_unpermute.h"
#include "aclnnop/aclnn_moe_token_unpermute_grad.h"
#include "internal.h"

#define MAX_ARGS 6

/* The dtypes the operators' definitions list, as bit masks over
 * aclDataType values (all below 64). */
#define DT(x) (UINT64_C(1) << (x))
#define FLOATS (DT(ACL_FLOAT) | DT(ACL_FLOAT16) | DT(ACL_BF16))
#define PERMUTE_TOKENS (FLOATS | DT(ACL_INT8))
#define PERMUTE_INDICES (DT(ACL_INT32) | DT(ACL_INT64))
#define INT32_ONLY DT(ACL_INT32)

/* The device's tiling limits (hicann/ops-transformer@c29bc10): top-k of
 * MoeTokenPermute (moe_token_permute_tiling.cpp:35, 329-335) and of
 * MoeTokenUnpermuteGrad (moe_token_unpermute_grad_tiling.cpp:318-322),
 * and the slots MoeTokenPermute's sort takes (tiling.cpp:44, 338-344). */
#define TILING_MAX_TOP_K 512
#define TILING_SORT_LIMIT 16777215

/* How one argument is checked in the first phase. */
typedef struct arg_spec {
    const char *name;  /* the vendor's parameter name */
    bool required;     /* NULL is ACLNN_ERR_PARAM_NULLPTR */
    bool output;
    uint64_t dtypes;   /* allowed dtypes */
    int same_dtype_as; /* index of the argument whose dtype it must have, or -1 */
} arg_spec;

/* One tensor argument, as a plan keeps it. */
typedef struct plan_arg {
    const char *name;
    const aclTensor *tensor; /* the program's, for the first phase only */
    bool present;
    bool touched;         /* the operator reads or writes it */
    int64_t elements;     /* 0 when empty */
    moeperm_tensor *view; /* libmoeperm's view; NULL when absent */
    const char *first;    /* lowest byte the view touches */
    size_t bytes;         /* bytes from first to the end of the highest element */
} plan_arg;

struct aclOpExecutor {
    host_kind kind; /* HOST_EXECUTOR */
    moeperm_op op;
    const char *run_name; /* the second phase's name, for messages */
    bool nothing_to_do;   /* every output is empty */
    int64_t attr;         /* numOutTokens (permute) or numTopk (permute grad) */
    bool padded;          /* MoeTokenPermute's paddedMode */
    moeperm_chip chip;    /* MoeTokenUnpermuteGrad */
    int index_arg;        /* the argument holding indices */
    size_t count;
    plan_arg args[MAX_ARGS];
};

/* Frees the views a plan holds; the plan itself is the caller's. */
static void executor_drop_views(aclOpExecutor *e)
{
    for (size_t i = 0; i < e->count; i++) {
        moeperm_tensor_destroy(e->args[i].view);
        e->args[i].view = NULL;
    }
}

/* --- checks of the first phase ----------------------------------------- */

static int64_t element_count(const aclTensor *t)
{
    int64_t n = 1;
    for (uint64_t i = 0; i < t->ndim; i++) {
        if (t->dims[i] == 0)
            return 0;
        n = n > INT64_MAX / t->dims[i] ? INT64_MAX : n * t->dims[i];
    }
    return n;
}

/* The bytes of an element of dtype, or 0 for a dtype libmoeperm does not
 * know (its values are aclDataType's, moeperm.h). */
static size_t dtype_size(aclDataType dtype)
{
    return dtype >= 0 && dtype < 64 ? moeperm_dtype_size((moeperm_dtype)dtype) : 0;
}

static const char *dtype_name(aclDataType dtype)
{
    switch (dtype) {
    case ACL_FLOAT:
        return "ACL_FLOAT";
    case ACL_FLOAT16:
        return "ACL_FLOAT16";
    case ACL_BF16:
        return "ACL_BF16";
    case ACL_INT8:
        return "ACL_INT8";
    case ACL_INT32:
        return "ACL_INT32";
    case ACL_INT64:
        return "ACL_INT64";
    default:
        return "no dtype of the operators";
    }
}

/* Appends the names of the dtypes in mask to buf, for messages. */
static void dtype_list(uint64_t mask, char *buf, size_t len)
{
    static const aclDataType order[] = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16,
                                        ACL_INT8,  ACL_INT32,   ACL_INT64};
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        if (mask & DT(order[i])) {
            size_t used = strlen(buf);
            snprintf(buf + used, len - used, "%s%s", used ? ", " : "", dtype_name(order[i]));
        }
}

/* The byte span a non-empty view touches and whether it fits in its
 * storage; false (message set) when not.  Every sum and product is checked:
 * the strides and dims are the program's, and an extent past what an
 * int64 counts is refused with its value rather than wrapped. */
static bool view_span(const char *fn, plan_arg *a, const aclTensor *t)
{
    int64_t size = (int64_t)dtype_size(t->dtype);
    int64_t last = t->offset;
    for (uint64_t i = 0; i < t->ndim; i++) {
        int64_t step;
        if (__builtin_mul_overflow(t->dims[i] - 1, t->strides[i], &step) ||
            __builtin_add_overflow(last, step, &last)) {
            host_error("%s: %s reaches past 2^63 elements (dims[%llu] = %lld, stride %lld)", fn,
                       a->name, (unsigned long long)i, (long long)t->dims[i],
                       (long long)t->strides[i]);
            return false;
        }
    }
    int64_t end; /* one past the last element */
    if (__builtin_add_overflow(last, 1, &end)) {
        host_error("%s: %s: its last element is element %lld, so it ends past 2^63 - 1 "
                   "elements", fn, a->name, (long long)last);
        return false;
    }
    if (t->storage_ndim > 0) {
        int64_t storage = 1;
        for (uint64_t i = 0; i < t->storage_ndim; i++)
            if (__builtin_mul_overflow(storage, t->storage_dims[i], &storage)) {
                host_error("%s: %s's storageDims hold more than 2^63 - 1 elements: "
                           "storageDims[%llu] = %lld takes the product past it",
                           fn, a->name, (unsigned long long)i, (long long)t->storage_dims[i]);
                return false;
            }
        if (end > storage) {
            host_error("%s: %s reaches element %lld of its storage, which holds %lld (offset, "
                       "strides and viewDims must stay inside storageDims)",
                       fn, a->name, (long long)last, (long long)storage);
            return false;
        }
    }
    int64_t lo, hi, bytes;
    if (__builtin_mul_overflow(t->offset, size, &lo) || __builtin_mul_overflow(end, size, &hi) ||
        __builtin_sub_overflow(hi, lo, &bytes) || (uint64_t)hi > SIZE_MAX) {
        host_error("%s: %s spans elements %lld to %lld of %lld bytes each, more bytes than "
                   "memory holds", fn, a->name, (long long)t->offset, (long long)last,
                   (long long)size);
        return false;
    }
    a->first = (const char *)t->data + lo;
    a->bytes = (size_t)bytes;
    return true;
}

/* Reports t[i]'s dtype when it is outside spec[i]'s list or differs from
 * the tensor whose dtype it must share; returns whether it did. */
static bool dtype_refused(const char *fn, const arg_spec *spec, const aclTensor *const *t,
                          size_t i)
{
    aclDataType dt = t[i]->dtype;
    int same = spec[i].same_dtype_as;
    bool listed = dt >= 0 && dt < 64 && (spec[i].dtypes & DT(dt));
    if (listed && (same < 0 || t[same] == NULL || t[same]->dtype == dt))
        return false;
    char allowed[128];
    dtype_list(spec[i].dtypes, allowed, sizeof allowed);
    if (listed)
        host_error("%s: %s is %s but %s is %s; they must match", fn, spec[i].name,
                   dtype_name(dt), spec[same].name, dtype_name(t[same]->dtype));
    else
        host_error("%s: %s has dtype %d (%s); the operator takes %s", fn, spec[i].name, (int)dt,
                   dtype_name(dt), allowed);
    return true;
}

/* Whether t[i]'s dtype is refused only through the optional input: its
 * own dtype listed, the mismatch with an optional tensor, or t[i] itself
 * optional.  The required tensors then match a kernel's list, and the
 * device finds no binary instead of refusing the parameters. */
static bool mismatch_is_optional(const arg_spec *spec, const aclTensor *const *t, size_t i)
{
    aclDataType dt = t[i]->dtype;
    int same = spec[i].same_dtype_as;
    bool listed = dt >= 0 && dt < 64 && (spec[i].dtypes & DT(dt));
    return !spec[i].required || (listed && same >= 0 && !spec[same].required);
}

/* Steps 1 and 2 of the first phase over every argument, in the device's
 * order: all NULLs first, then liveness, dtypes and formats.  A required
 * tensor outside the definition is refused (161002) wherever it stands;
 * only when every required one matches does a mismatch through the
 * optional input mean no kernel (561003) (opbase indv_executor.cpp:959-969). */
static aclnnStatus check_args(const char *fn, const arg_spec *spec, const aclTensor *const *t,
                              size_t n, plan_arg *args)
{
    for (size_t i = 0; i < n; i++)
        if (spec[i].required && t[i] == NULL) {
            host_error("%s: %s is NULL", fn, spec[i].name);
            return ACLNN_ERR_PARAM_NULLPTR;
        }
    size_t no_kernel = n; /* the first argument whose mismatch finds no kernel */
    for (size_t i = 0; i < n; i++) {
        args[i] = (plan_arg){.name = spec[i].name, .tensor = t[i], .present = t[i] != NULL};
        if (t[i] == NULL)
            continue;
        if (!registry_has(t[i], HOST_TENSOR)) {
            host_error("%s: %s (%p) is not a tensor of aclCreateTensor (or it was destroyed)",
                       fn, spec[i].name, (const void *)t[i]);
            return ACLNN_ERR_PARAM_INVALID;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (t[i] == NULL)
            continue;
        if (dtype_refused(fn, spec, t, i)) {
            if (!mismatch_is_optional(spec, t, i))
                return ACLNN_ERR_PARAM_INVALID;
            if (no_kernel == n)
                no_kernel = i;
            continue;
        }
        if (t[i]->format != ACL_FORMAT_ND) {
            host_error("%s: %s has format %d; the operator takes ACL_FORMAT_ND (2) only", fn,
                       spec[i].name, (int)t[i]->format);
            return ACLNN_ERR_PARAM_INVALID;
        }
        args[i].elements = element_count(t[i]);
        if (args[i].elements > 0 && !view_span(fn, &args[i], t[i]))
            return ACLNN_ERR_PARAM_INVALID;
    }
    if (no_kernel < n) {
        dtype_refused(fn, spec, t, no_kernel); /* its sentence, which a later one may have replaced */
        return ACLNN_ERR_INNER_FIND_KERNEL_ERROR;
    }
    return ACLNN_SUCCESS;
}

/* Step 3: nnopbase skips tiling and launch when every output is empty
 * (hicann/opbase@aa3cd74 indv_executor.cpp:1076-1082, 852-858). */
static bool outputs_empty(const arg_spec *spec, const plan_arg *args, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (spec[i].output && args[i].present && args[i].elements > 0)
            return false;
    return true;
}

static aclnnStatus tiling_error(const char *fn, const char *format, ...) HOST_PRINTF(2, 3);

static aclnnStatus tiling_error(const char *fn, const char *format, ...)
{
    char why[512];
    va_list ap;
    va_start(ap, format);
    vsnprintf(why, sizeof why, format, ap);
    va_end(ap);
    host_error("%s: %s (the device's tiling refuses it)", fn, why);
    return ACLNN_ERR_INNER_TILING_ERROR;
}

/* --- libmoeperm's views ------------------------------------------------ */

/* libmoeperm's view of t, dims and strides as they are: libmoeperm reads
 * MoeTokenPermute's tokens and permuted tokens of any rank >= 2 and any
 * strides as rows of the dims after the first, as the device reads them
 * once its inputs are contiguous (tiling.cpp:300-305, 323-326). */
static aclnnStatus make_view(const char *fn, plan_arg *a)
{
    const aclTensor *t = a->tensor;
    a->view = moeperm_tensor_create(t->dims, t->ndim, (moeperm_dtype)t->dtype, t->strides,
                                    t->offset, t->data);
    if (a->view == NULL) {
        host_error("%s: %s: %s", fn, a->name, moeperm_last_error());
        return ACLNN_ERR_INNER;
    }
    return ACLNN_SUCCESS;
}

/* libmoeperm's first phase of e's operator over the views v. */
static moeperm_status moeperm_plan(const aclOpExecutor *e, moeperm_tensor *const *v,
                                   moeperm_executor **out)
{
    uint64_t workspace = 0;
    switch (e->op) {
    case MOEPERM_OP_PERMUTE:
        return moeperm_token_permute_get_workspace_size(v[0], v[1], e->attr, false, v[2], v[3],
                                                        &workspace, out);
    case MOEPERM_OP_UNPERMUTE:
        return moeperm_token_unpermute_get_workspace_size(v[0], v[1], v[2], false, NULL, 0, v[3],
                                                          &workspace, out);
    case MOEPERM_OP_PERMUTE_GRAD:
        return moeperm_token_permute_grad_get_workspace_size(v[0], v[1], e->attr, false, v[2],
                                                             &workspace, out);
    default: {
        moeperm_status st = moeperm_token_unpermute_grad_get_workspace_size(
            v[0], v[1], v[2], v[3], false, NULL, 0, v[4], v[5], &workspace, out);
        if (st == MOEPERM_SUCCESS)
            st = moeperm_executor_set_chip(*out, &e->chip);
        return st;
    }
    }
}

static void views_of(const aclOpExecutor *e, moeperm_tensor **v)
{
    for (size_t i = 0; i < MAX_ARGS; i++)
        v[i] = i < e->count && e->args[i].touched ? e->args[i].view : NULL;
}

/* The last step of the first phase: libmoeperm's metadata checks, with a
 * placeholder holding valid indices in place of the program's index
 * tensor (identity 0, 1, ... for sorted indices, expert 0 for
 * MoeTokenPermute's), so that no tensor data is read. */
static aclnnStatus dry_run(const char *fn, const aclOpExecutor *e)
{
    for (size_t i = 0; i < e->count; i++)
        if (e->args[i].touched && e->args[i].elements > 0 && e->args[i].tensor->data == NULL)
            return ACLNN_SUCCESS; /* the second phase refuses it: not device memory */
    const plan_arg *ix = &e->args[e->index_arg];
    const aclTensor *t = ix->tensor;
    size_t size = dtype_size(t->dtype);
    /* The placeholder is contiguous, one entry per element of the view.  It
     * is made only when it takes no more bytes than the program's index
     * view spans in device memory, so a view that declares more elements
     * than it has memory for (zero strides, or memory that is not the
     * device's) cannot make the first phase allocate more than the program
     * did.  Such a view is left, like one without data, to the second
     * phase, which checks device memory and then asks libmoeperm about the
     * real view; libmoeperm reads only the entries the operator reads. */
    if (ix->elements > 0 && ((uint64_t)ix->elements > ix->bytes / size ||
                             !registry_holds_span(ix->first, ix->bytes)))
        return ACLNN_SUCCESS;
    void *values = ix->elements > 0 ? calloc((size_t)ix->elements, size) : NULL;
    moeperm_tensor *placeholder = NULL;
    if (ix->elements == 0 || values != NULL)
        placeholder = moeperm_tensor_create(t->dims, t->ndim, (moeperm_dtype)t->dtype, NULL, 0,
                                            values);
    if (placeholder == NULL) {
        free(values);
        host_error("%s: out of host memory", fn);
        return ACLNN_ERR_INNER;
    }
    if (e->op != MOEPERM_OP_PERMUTE && values != NULL)
        for (int64_t i = 0; i < ix->elements; i++)
            ((int32_t *)values)[i] = (int32_t)(i <= INT32_MAX ? i : INT32_MAX);
    moeperm_tensor *v[MAX_ARGS];
    views_of(e, v);
    v[e->index_arg] = placeholder;
    moeperm_executor *plan = NULL;
    moeperm_status st = moeperm_plan(e, v, &plan);
    moeperm_executor_destroy(plan);
    moeperm_tensor_destroy(placeholder);
    free(values);
    if (st != MOEPERM_SUCCESS) {
        host_error("%s: %s", fn, moeperm_last_error());
        /* libmoeperm's codes are aclnn's (moeperm.h). */
        return st;
    }
    return ACLNN_SUCCESS;
}

/* --- the two phases, shared ---------------------------------------------- */

typedef struct first_phase {
    const char *fn;
    aclOpExecutor *e;
} first_phase;

/* What tells one operator's first phase from another's. */
typedef struct op_desc {
    moeperm_op op;
    const char *plan_name, *run_name;
    const arg_spec *spec;
    size_t count;
    int index_arg; /* the argument holding indices */
    /* The operator's tiling checks, run when some output has elements;
     * NULL when its tiling refuses nothing. */
    aclnnStatus (*tiling)(first_phase *p);
} op_desc;

/* The first phase of operator d over the tensors t (in d->spec's order)
 * with the attribute attr (numOutTokens or numTopk): checks, then
 * libmoeperm's views and the dry run.  Hands the plan over on success and
 * frees it on failure. */
static aclnnStatus first_phase_run(const op_desc *d, const aclTensor *const *t, int64_t attr,
                                   bool padded, uint64_t *workspace_size,
                                   aclOpExecutor **executor)
{
    first_phase p = {d->plan_name, NULL};
    if (executor != NULL)
        *executor = NULL;
    if (workspace_size == NULL || executor == NULL) {
        host_error("%s: %s is NULL", p.fn, workspace_size == NULL ? "workspaceSize" : "executor");
        return ACLNN_ERR_PARAM_NULLPTR;
    }
    aclOpExecutor *e = p.e = calloc(1, sizeof *e);
    if (e == NULL) {
        host_error("%s: out of host memory", p.fn);
        return ACLNN_ERR_INNER;
    }
    *e = (aclOpExecutor){.kind = HOST_EXECUTOR, .op = d->op, .run_name = d->run_name,
                         .attr = attr, .padded = padded, .index_arg = d->index_arg,
                         .count = d->count};
    aclnnStatus st = check_args(p.fn, d->spec, t, d->count, e->args);
    for (size_t i = 0; st == ACLNN_SUCCESS && i < d->count; i++)
        e->args[i].touched = e->args[i].present;
    if (st == ACLNN_SUCCESS && outputs_empty(d->spec, e->args, d->count))
        e->nothing_to_do = true;
    else if (st == ACLNN_SUCCESS && d->tiling != NULL)
        st = d->tiling(&p);
    for (size_t i = 0; st == ACLNN_SUCCESS && !e->nothing_to_do && i < d->count; i++)
        if (e->args[i].touched)
            st = make_view(p.fn, &e->args[i]);
    if (st == ACLNN_SUCCESS && !e->nothing_to_do)
        st = dry_run(p.fn, e);
    if (st == ACLNN_SUCCESS && !registry_add(e)) {
        host_error("%s: out of host memory", p.fn);
        st = ACLNN_ERR_INNER;
    }
    if (st != ACLNN_SUCCESS) {
        executor_drop_views(e); /* never handed out: no handle can name it */
        free(e);
        return st;
    }
    *workspace_size = 0;
    *executor = e;
    return ACLNN_SUCCESS;
}

/* The second phase of every operator. */
static aclnnStatus run(const char *fn, moeperm_op op, void *workspace, uint64_t workspace_size,
                       aclOpExecutor *e, aclrtStream stream)
{
    (void)workspace;
    (void)workspace_size; /* the plan asked for none */
    if (e == NULL) {
        host_error("%s: executor is NULL", fn);
        return ACLNN_ERR_PARAM_NULLPTR;
    }
    /* Taking it out of the registry first makes a second run of one plan,
     * or a run of a plan another thread is running, a clean refusal. */
    if (!registry_take(e, HOST_EXECUTOR)) {
        host_error("%s: %p is not a plan of a first phase, or it has run already (a plan runs "
                   "once)", fn, (void *)e);
        return ACLNN_ERR_PARAM_INVALID;
    }
    aclnnStatus st = ACLNN_SUCCESS;
    if (e->op != op) {
        host_error("%s: the executor is a plan of %s", fn, e->run_name);
        st = ACLNN_ERR_PARAM_INVALID;
    } else if (stream != NULL && !registry_has(stream, HOST_STREAM)) {
        host_error("%s: %p is not a stream of aclrtCreateStream (or it was destroyed)", fn,
                   stream);
        st = ACLNN_ERR_RUNTIME_ERROR;
    }
    for (size_t i = 0; st == ACLNN_SUCCESS && !e->nothing_to_do && i < e->count; i++) {
        const plan_arg *a = &e->args[i];
        if (a->touched && a->elements > 0 && !registry_holds_span(a->first, a->bytes)) {
            host_error("%s: %s (%zu bytes at %p) is not inside device memory of aclrtMalloc; "
                       "a device could not reach it",
                       fn, a->name, a->bytes, (const void *)a->first);
            st = ACLNN_ERR_PARAM_INVALID;
        }
    }
    if (st == ACLNN_SUCCESS && !e->nothing_to_do) {
        moeperm_tensor *v[MAX_ARGS];
        views_of(e, v);
        moeperm_executor *plan_now = NULL;
        st = moeperm_plan(e, v, &plan_now);
        if (st == MOEPERM_SUCCESS)
            st = moeperm_executor_run(NULL, 0, plan_now, NULL);
        else
            moeperm_executor_destroy(plan_now);
        if (st != MOEPERM_SUCCESS)
            host_error("%s: %s", fn, moeperm_last_error());
    }
    executor_drop_views(e);
    registry_retire(e, HOST_EXECUTOR);
    return st;
}

/* --- MoeTokenPermute --------------------------------------------------- */

enum { P_TOKENS, P_INDICES, P_OUT, P_SORTED };

/* The elements of a row of t (the product of its dims after the first)
 * in *row; when that product passes what an int64 counts, refuses with the
 * dim that takes it past.  The device's tiling multiplies them in an int64
 * (moe_token_permute_tiling.cpp:247-250, 302-305) with no check, so its
 * verdict on such a shape is undefined: 161002, as for any undetermined
 * result, and never a wrapped value that might equal another. */
static aclnnStatus row_elements(const char *fn, const char *name, const aclTensor *t,
                                int64_t *row)
{
    *row = 1;
    for (uint64_t i = 1; i < t->ndim; i++)
        if (__builtin_mul_overflow(*row, t->dims[i], row)) {
            host_error("%s: a row of %s holds more than 2^63 - 1 elements: dims[%llu] = %lld "
                       "takes the product of dims[1..] past it",
                       fn, name, (unsigned long long)i, (long long)t->dims[i]);
            return ACLNN_ERR_PARAM_INVALID;
        }
    return ACLNN_SUCCESS;
}

static aclnnStatus permute_tiling(first_phase *p)
{
    /* moe_token_permute_tiling.cpp, in its order: the attribute and the
     * inputs (GetShapeAttrsInfo, 279-348), then the output shapes it
     * checks last (CheckOutShape, 229-275). */
    const aclOpExecutor *e = p->e;
    const aclTensor *tokens = e->args[P_TOKENS].tensor, *ix = e->args[P_INDICES].tensor;
    const aclTensor *out = e->args[P_OUT].tensor, *sorted = e->args[P_SORTED].tensor;
    const char *fn = p->fn;
    aclnnStatus st;
    if (e->padded)
        return tiling_error(fn, "paddedMode is true; only false is supported");
    if (tokens->ndim < 2)
        return tiling_error(fn, "tokens has %llu dims; it must have at least 2 ([tokens_num, "
                                "hidden...])",
                            (unsigned long long)tokens->ndim);
    int64_t row, out_row;
    if ((st = row_elements(fn, "tokens", tokens, &row)) != ACLNN_SUCCESS)
        return st;
    if (ix->ndim != 1 && ix->ndim != 2)
        return tiling_error(fn, "indices has %llu dims; it must be [N] or [N, top_k]",
                            (unsigned long long)ix->ndim);
    int64_t n = ix->dims[0], k = ix->ndim == 2 ? ix->dims[1] : 1;
    if (tokens->dims[0] != n)
        return tiling_error(fn, "tokens has %lld rows but indices %lld", (long long)tokens->dims[0],
                            (long long)n);
    if (k > TILING_MAX_TOP_K)
        return tiling_error(fn, "top_k = indices.dims[1] = %lld is above %d", (long long)k,
                            TILING_MAX_TOP_K);
    int64_t slots;
    if (__builtin_mul_overflow(n, k, &slots) || slots >= TILING_SORT_LIMIT)
        return tiling_error(fn, "indices holds %lld x %lld slots; the sort takes fewer than %d",
                            (long long)n, (long long)k, TILING_SORT_LIMIT);
    if (out->ndim < 2)
        return tiling_error(fn, "permuteTokensOut has %llu dims; it must have at least 2",
                            (unsigned long long)out->ndim);
    if ((st = row_elements(fn, "permuteTokensOut", out, &out_row)) != ACLNN_SUCCESS)
        return st;
    if (sorted->ndim != 1 || sorted->dims[0] != slots)
        return tiling_error(fn, "sortedIndicesOut must be [%lld] (tokens x top_k)",
                            (long long)slots);
    if (row != out_row)
        return tiling_error(fn, "a row of permuteTokensOut holds %lld elements but a row of "
                            "tokens %lld", (long long)out_row, (long long)row);
    int64_t num_out = e->attr <= 0 ? e->attr + slots : e->attr;
    num_out = num_out > slots ? slots : num_out < 0 ? 0 : num_out;
    if (out->dims[0] != num_out)
        return tiling_error(fn, "permuteTokensOut has %lld rows; numOutTokens = %lld keeps %lld",
                            (long long)out->dims[0], (long long)e->attr, (long long)num_out);
    return ACLNN_SUCCESS;
}

aclnnStatus aclnnMoeTokenPermuteGetWorkspaceSize(const aclTensor *tokens, const aclTensor *indices,
                                                 int64_t numOutTokens, bool paddedMode,
                                                 const aclTensor *permuteTokensOut,
                                                 const aclTensor *sortedIndicesOut,
                                                 uint64_t *workspaceSize, aclOpExecutor **executor)
{
    static const arg_spec spec[] = {
        {"tokens", true, false, PERMUTE_TOKENS, -1},
        {"indices", true, false, PERMUTE_INDICES, -1},
        {"permuteTokensOut", true, true, PERMUTE_TOKENS, P_TOKENS},
        {"sortedIndicesOut", true, true, INT32_ONLY, -1},
    };
    static const op_desc d = {MOEPERM_OP_PERMUTE, "aclnnMoeTokenPermuteGetWorkspaceSize",
                              "aclnnMoeTokenPermute", spec, 4, P_INDICES, permute_tiling};
    const aclTensor *t[] = {tokens, indices, permuteTokensOut, sortedIndicesOut};
    return first_phase_run(&d, t, numOutTokens, paddedMode, workspaceSize, executor);
}

aclnnStatus aclnnMoeTokenPermute(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                 aclrtStream stream)
{
    return run("aclnnMoeTokenPermute", MOEPERM_OP_PERMUTE, workspace, workspaceSize, executor,
               stream);
}

/* --- MoeTokenUnpermute ------------------------------------------------- */

aclnnStatus aclnnMoeTokenUnpermuteGetWorkspaceSize(const aclTensor *permutedTokens,
                                                   const aclTensor *sortedIndices,
                                                   const aclTensor *probsOptional, bool paddedMode,
                                                   const aclIntArray *restoreShapeOptional,
                                                   aclTensor *out, uint64_t *workspaceSize,
                                                   aclOpExecutor **executor)
{
    /* paddedMode and restoreShape: the Atlas A2/A3 tiling reads no
     * attribute (moe_token_unpermute_tiling.cpp has no GetAttrs). */
    (void)paddedMode;
    (void)restoreShapeOptional;
    static const arg_spec spec[] = {
        {"permutedTokens", true, false, FLOATS, -1},
        {"sortedIndices", true, false, INT32_ONLY, -1},
        {"probsOptional", false, false, FLOATS, -1},
        {"out", true, true, FLOATS, 0},
    };
    static const op_desc d = {MOEPERM_OP_UNPERMUTE, "aclnnMoeTokenUnpermuteGetWorkspaceSize",
                              "aclnnMoeTokenUnpermute", spec, 4, 1, NULL};
    const aclTensor *t[] = {permutedTokens, sortedIndices, probsOptional, out};
    return first_phase_run(&d, t, 0, false, workspaceSize, executor);
}

aclnnStatus aclnnMoeTokenUnpermute(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                   aclrtStream stream)
{
    return run("aclnnMoeTokenUnpermute", MOEPERM_OP_UNPERMUTE, workspace, workspaceSize, executor,
               stream);
}

/* --- MoeTokenPermuteGrad ----------------------------------------------- */

aclnnStatus aclnnMoeTokenPermuteGradGetWorkspaceSize(const aclTensor *permutedOutputGrad,
                                                     const aclTensor *sortedIndices,
                                                     int64_t numTopk, bool paddedMode,
                                                     aclTensor *out, uint64_t *workspaceSize,
                                                     aclOpExecutor **executor)
{
    /* paddedMode: never read on Atlas A2/A3 (the tiling reads attribute 0
     * only, moe_token_permute_grad_tiling.cpp:327). */
    (void)paddedMode;
    static const arg_spec spec[] = {
        {"permutedOutputGrad", true, false, FLOATS, -1},
        {"sortedIndices", true, false, INT32_ONLY, -1},
        {"out", true, true, FLOATS, 0},
    };
    static const op_desc d = {MOEPERM_OP_PERMUTE_GRAD, "aclnnMoeTokenPermuteGradGetWorkspaceSize",
                              "aclnnMoeTokenPermuteGrad", spec, 3, 1, NULL};
    const aclTensor *t[] = {permutedOutputGrad, sortedIndices, out};
    /* -1 means one slot per token (tiling.cpp:129). */
    return first_phase_run(&d, t, numTopk == -1 ? 1 : numTopk, false, workspaceSize, executor);
}

aclnnStatus aclnnMoeTokenPermuteGrad(void *workspace, uint64_t workspaceSize,
                                     aclOpExecutor *executor, aclrtStream stream)
{
    return run("aclnnMoeTokenPermuteGrad", MOEPERM_OP_PERMUTE_GRAD, workspace, workspaceSize,
               executor, stream);
}

/* --- MoeTokenUnpermuteGrad --------------------------------------------- */

enum { UG_TOKENS, UG_GRAD, UG_INDICES, UG_PROBS, UG_TOKENS_GRAD, UG_PROBS_GRAD };

static aclnnStatus unpermute_grad_tiling(first_phase *p)
{
    /* moe_token_unpermute_grad_tiling.cpp:306-322: N and H from the grad,
     * K from probs (else 1), R from permuted tokens. */
    aclOpExecutor *e = p->e;
    const aclTensor *tokens = e->args[UG_TOKENS].tensor, *grad = e->args[UG_GRAD].tensor;
    const aclTensor *probs = e->args[UG_PROBS].tensor;
    if (grad->ndim == 2 && tokens->ndim == 2 && (probs == NULL || probs->ndim == 2)) {
        int64_t n = grad->dims[0], h = grad->dims[1], k = probs ? probs->dims[1] : 1;
        int64_t r = tokens->dims[0];
        if (n == 0 || k == 0 || h == 0 || r == 0)
            return tiling_error(p->fn, "tokens %lld, top_k %lld, hidden %lld and rows %lld "
                                "must all be positive", (long long)n, (long long)k,
                                (long long)h, (long long)r);
        if (k > TILING_MAX_TOP_K)
            return tiling_error(p->fn, "top_k = probs.dims[1] = %lld is above %d", (long long)k,
                                TILING_MAX_TOP_K);
    }
    /* Without probs the kernel never touches probsGradOut. */
    if (probs == NULL)
        e->args[UG_PROBS_GRAD].touched = false;
    const char *why = NULL;
    const host_chip *chip = host_chip_get(&why);
    if (chip == NULL) {
        host_error("%s: %s", p->fn, why);
        return ACLNN_ERR_RUNTIME_ERROR;
    }
    e->chip = chip->chip;
    return ACLNN_SUCCESS;
}

aclnnStatus aclnnMoeTokenUnpermuteGradGetWorkspaceSize(
    const aclTensor *permuteTokens, const aclTensor *unpermutedTokensGrad,
    const aclTensor *sortedIndices, const aclTensor *probsOptional, bool paddedMode,
    const aclIntArray *restoreShapeOptional, aclTensor *permutedTokensGradOut,
    aclTensor *probsGradOut, uint64_t *workspaceSize, aclOpExecutor **executor)
{
    /* paddedMode is read but forced to the unpadded kernel, restoreShape
     * never read (moe_token_unpermute_grad_tiling.cpp:339-347). */
    (void)paddedMode;
    (void)restoreShapeOptional;
    /* probsGradOut is a required output even without probs (the
     * operator's definition, moe_token_unpermute_grad_def.cpp:82-92); with
     * probs its dtype is the probs' (the definition pairs them, so another
     * one finds no kernel). */
    static const arg_spec spec[] = {
        {"permuteTokens", true, false, FLOATS, -1},
        {"unpermutedTokensGrad", true, false, FLOATS, UG_TOKENS},
        {"sortedIndices", true, false, INT32_ONLY, -1},
        {"probsOptional", false, false, FLOATS, -1},
        {"permutedTokensGradOut", true, true, FLOATS, UG_TOKENS},
        {"probsGradOut", true, true, FLOATS, UG_PROBS},
    };
    static const op_desc d = {MOEPERM_OP_UNPERMUTE_GRAD,
                              "aclnnMoeTokenUnpermuteGradGetWorkspaceSize",
                              "aclnnMoeTokenUnpermuteGrad", spec, 6, UG_INDICES,
                              unpermute_grad_tiling};
    const aclTensor *t[] = {permuteTokens,  unpermutedTokensGrad,  sortedIndices,
                            probsOptional,  permutedTokensGradOut, probsGradOut};
    return first_phase_run(&d, t, 0, false, workspaceSize, executor);
}

aclnnStatus aclnnMoeTokenUnpermuteGrad(void *workspace, uint64_t workspaceSize,
                                       aclOpExecutor *executor, aclrtStream stream)
{
    return run("aclnnMoeTokenUnpermuteGrad", MOEPERM_OP_UNPERMUTE_GRAD, workspace, workspaceSize,
               executor, stream);
}
