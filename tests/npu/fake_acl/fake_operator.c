/*
 * fake_operator.c - the operator half of the fake Ascend stack: the two
 * aclnn phases of MoeTokenPermuteGrad, MoeTokenPermute, MoeTokenUnpermute
 * and MoeTokenUnpermuteGrad.
 *
 * The arithmetic is the tests' own naive models (tests/support/naive_permute_grad.c,
 * naive_family.c, naive_unpermute_grad.c), never libmoeperm, so `moeperm
 * check --backend npu` against the fake compares two implementations
 * written apart.  The planning phase is stricter than the vendor's: it
 * refuses any descriptor the backend should never build (non-contiguous,
 * wrong format, storage that disagrees with the view, memory that is not a
 * live device allocation, an int array that is not live), because here a
 * refusal means a backend bug.  Where the vendor's own header is strict,
 * so is the fake: probsGradOut is required even without probs.  Its
 * shape checks take the Atlas A2/A3 input domain (docs/operators.md):
 * padded_mode ignored but by MoeTokenPermute, numTopk -1 taken as 1, rows
 * read twice or never, more rows than slots, sorted_indices longer than
 * the entries read (only those are looked at), tokens of rank 3 and more.
 *
 * Built with FAKE_ACL_NO_PERMUTE, FAKE_ACL_NO_UNPERMUTE or
 * FAKE_ACL_NO_UNPERMUTE_GRAD it lacks that operator's two entry points, as
 * the operator library of a release without the operator does.
 *
 * Faults on demand, read at each call, counted from 1 since loading over
 * all four operators together:
 *   FAKE_ACL_FAIL_PLAN=n     the n-th GetWorkspaceSize returns 161002
 *   FAKE_ACL_FAIL_RUN=n      the n-th run returns 361001
 *   FAKE_ACL_FLIP=E:B        flip bit B of output element E (row-major)
 *   FAKE_ACL_FLIP_OUTPUT=o   ... of output o, in argument order (default 0)
 *   FAKE_ACL_FLIP_RUN=n      ... only in the n-th run (default: every run)
 *   FAKE_ACL_KEEP_ROW=r      write nothing into row r of the first output,
 *                            as the vendor's kernels write nothing where no
 *                            slot leads
 *   FAKE_ACL_WORKSPACE=bytes the workspace asked for (default 512)
 *   FAKE_ACL_UB_BYTES=n      the chip whose tiling MoeTokenUnpermuteGrad's
 *   FAKE_ACL_VECTOR_CORES=n  probs gradient follows (default the Atlas
 *                            A2's, 196352 bytes and 48 cores)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_acl.h"
#include "naive.h"
#include "naive_permute_grad.h"
#include "naive_family.h"
#include "naive_unpermute_grad.h"

#define FAKE_ACLNN_ERR_PARAM_NULLPTR 161001
#define FAKE_ACLNN_ERR_PARAM_INVALID 161002
#define FAKE_ACLNN_ERR_RUNTIME_ERROR 361001
#define FAKE_ACLNN_ERR_INNER 561000

/* One tensor of a plan: what the kernel reads or writes at run time. */
typedef struct fake_view {
    const char *name;
    aclDataType dtype;
    int64_t rows, cols; /* a 1-d tensor is rows elements of one column; more than 2
                         * dims are rows of their product */
    void *data;         /* device address; NULL for an absent tensor */
} fake_view;

typedef struct aclOpExecutor aclOpExecutor;
/* The kernel over host copies: in[i] and out[i] are NULL where absent. */
typedef void (*compute_fn)(const aclOpExecutor *e, void *const in[4], void *const out[2]);

struct aclOpExecutor {
    const char *run_name; /* the second phase this plan is for */
    compute_fn compute;
    fake_view in[4], out[2];
    int64_t tokens, top_k, hidden, rows, num_out, chunk;
    bool probs_grad_written; /* MoeTokenUnpermuteGrad with probs */
    uint64_t workspace_size;
    long run;            /* which run this is, for FAKE_ACL_FLIP_RUN */
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
    switch (dtype) {
    case ACL_INT8:
        return 1;
    case ACL_FLOAT16:
    case ACL_BF16:
        return 2;
    case ACL_INT64:
        return 8;
    default:
        return 4;
    }
}

static bool is_float(aclDataType dtype)
{
    return dtype == ACL_FLOAT || dtype == ACL_FLOAT16 || dtype == ACL_BF16;
}

static size_t view_bytes(const fake_view *v)
{
    return (size_t)(v->rows * v->cols) * elem_size(v->dtype);
}

/* Checks one tensor: ours, alive, ND, contiguous, storage = view, memory
 * in a live allocation; fills *v.  Returns false with the reason in
 * aclGetRecentErrMsg(). */
static bool view_of(const aclTensor *t, const char *name, uint64_t ndim, fake_view *v)
{
    if (t->magic != FAKE_TENSOR_MAGIC) {
        fake_acl_misuse("%s is not a live tensor", name);
        fake_acl_set_error("fake aclnn: %s is not a live tensor", name);
        return false;
    }
    if (t->ndim != ndim || t->format != ACL_FORMAT_ND || t->offset != 0 ||
        t->storage_ndim != ndim) {
        fake_acl_set_error("fake aclnn: %s must be %llu-d ND with offset 0 and storage = view",
                           name, (unsigned long long)ndim);
        return false;
    }
    int64_t n = 1;
    for (uint64_t i = ndim; i-- > 0;) {
        if (t->strides[i] != n || t->storage_dims[i] != t->dims[i] || t->dims[i] < 0) {
            fake_acl_set_error("fake aclnn: %s dim %llu: extent %lld stride %lld storage %lld "
                               "is not contiguous",
                               name, (unsigned long long)i, (long long)t->dims[i],
                               (long long)t->strides[i], (long long)t->storage_dims[i]);
            return false;
        }
        n *= t->dims[i];
    }
    int64_t cols = 1;
    for (uint64_t i = 1; i < ndim; i++)
        cols *= t->dims[i];
    *v = (fake_view){name, t->dtype, t->dims[0], cols, t->data};
    if (fake_acl_host(t->data, view_bytes(v), name) == NULL) {
        fake_acl_set_error("fake aclnn: %s's memory is not a live device allocation", name);
        return false;
    }
    return true;
}

/* What every plan does first: count it, refuse NULL required arguments,
 * and refuse the plan FAKE_ACL_FAIL_PLAN names. */
static aclnnStatus plan_start(const char *call, bool required_present)
{
    long plan = ++fake_acl_stats_get()->plans;
    if (!required_present) {
        fake_acl_set_error("fake aclnn: %s: a NULL required tensor or out-pointer", call);
        return FAKE_ACLNN_ERR_PARAM_NULLPTR;
    }
    if (plan == fake_acl_env_long("FAKE_ACL_FAIL_PLAN", 0)) {
        fake_acl_set_error("fake aclnn: injected refusal of plan %ld (FAKE_ACL_FAIL_PLAN)",
                           plan);
        return FAKE_ACLNN_ERR_PARAM_INVALID;
    }
    return ACLNN_SUCCESS;
}

/* Counts what a plan got of the input domain's edge, as the backend gave
 * it: paddedMode, numTopk -1, tokens of rank 3, more index entries than
 * the kernel reads (read of them), more rows than slots. */
static void count_edge(bool padded, bool minus1, bool rank3, int64_t entries, int64_t read,
                       int64_t rows, int64_t slots)
{
    fake_acl_stats *s = fake_acl_stats_get();
    s->padded_plans += padded;
    s->num_topk_minus1_plans += minus1;
    s->rank3_plans += rank3;
    s->long_index_plans += entries > read;
    s->wide_row_plans += rows > slots;
}

/* Hands out a copy of *proto as the plan. */
static aclnnStatus plan_finish(const aclOpExecutor *proto, uint64_t *workspace_size,
                               aclOpExecutor **executor)
{
    aclOpExecutor *e = malloc(sizeof *e);
    if (e == NULL)
        return FAKE_ACLNN_ERR_INNER;
    *e = *proto;
    e->workspace_size = (uint64_t)fake_acl_env_long("FAKE_ACL_WORKSPACE", 512);
    e->run = 0;
    e->next = unrun;
    unrun = e;
    fake_acl_stats_get()->executors_created++;
    *workspace_size = e->workspace_size;
    *executor = e;
    return ACLNN_SUCCESS;
}

static aclnnStatus refuse_shapes(const char *call, const char *what)
{
    fake_acl_set_error("fake aclnn: %s: %s", call, what);
    return FAKE_ACLNN_ERR_PARAM_INVALID;
}

/* Reading device memory here is the fake's privilege: the host-to-device
 * copy has completed.  A negative index among the first `read` entries
 * (the ones the kernel reads) would send the naive loops outside the
 * tensor. */
static bool indices_nonnegative(const fake_view *v, int64_t read)
{
    const int32_t *idx = fake_acl_host(v->data, view_bytes(v), v->name);
    for (int64_t i = 0; idx != NULL && i < read && i < v->rows; i++) {
        if (idx[i] < 0) {
            fake_acl_set_error("fake aclnn: %s[%lld] = %d is negative", v->name, (long long)i,
                               (int)idx[i]);
            return false;
        }
    }
    return idx != NULL;
}

/* An int array the backend made and has not destroyed (counted), or NULL. */
static bool live_int_array(const aclIntArray *a, const char *name)
{
    if (a == NULL)
        return true;
    if (a->magic == FAKE_INT_ARRAY_MAGIC) {
        fake_acl_stats_get()->int_arrays_planned++;
        return true;
    }
    fake_acl_misuse("%s is not a live int array", name);
    fake_acl_set_error("fake aclnn: %s is not a live int array", name);
    return false;
}

/* Runs at aclrtSynchronizeStream, on the host copies of device memory. */
static void execute(void *arg)
{
    const aclOpExecutor *e = arg;
    void *in[4] = {NULL, NULL, NULL, NULL}, *out[2] = {NULL, NULL};
    for (int i = 0; i < 4; i++)
        if (e->in[i].data != NULL &&
            (in[i] = fake_acl_host(e->in[i].data, view_bytes(&e->in[i]), e->in[i].name)) == NULL)
            return;
    for (int i = 0; i < 2; i++)
        if (e->out[i].data != NULL &&
            (out[i] = fake_acl_host(e->out[i].data, view_bytes(&e->out[i]), e->out[i].name)) ==
                NULL)
            return;

    const fake_view *first = &e->out[0];
    size_t row_bytes = (size_t)first->cols * elem_size(first->dtype);
    long keep = fake_acl_env_long("FAKE_ACL_KEEP_ROW", -1);
    unsigned char *kept = NULL;
    if (keep >= 0 && keep < first->rows && row_bytes > 0) {
        kept = malloc(row_bytes);
        if (kept == NULL)
            abort();
        memcpy(kept, (unsigned char *)out[0] + (size_t)keep * row_bytes, row_bytes);
    }
    e->compute(e, in, out);
    if (kept != NULL) {
        memcpy((unsigned char *)out[0] + (size_t)keep * row_bytes, kept, row_bytes);
        free(kept);
    }
    fake_acl_stats_get()->operator_runs++;

    const char *flip = getenv("FAKE_ACL_FLIP");
    long flip_run = fake_acl_env_long("FAKE_ACL_FLIP_RUN", 0);
    long o = fake_acl_env_long("FAKE_ACL_FLIP_OUTPUT", 0);
    long long element;
    int bit;
    if (flip == NULL || sscanf(flip, "%lld:%d", &element, &bit) != 2 || o < 0 || o > 1 ||
        out[o] == NULL || (flip_run != 0 && flip_run != e->run))
        return;
    const fake_view *v = &e->out[o];
    size_t es = elem_size(v->dtype);
    if (element >= 0 && element < v->rows * v->cols && bit >= 0 && (size_t)bit < 8 * es)
        ((unsigned char *)out[o])[(size_t)element * es + (size_t)bit / 8] ^=
            (unsigned char)(1u << (bit % 8));
}

/* The second phase of every operator: call is its name. */
static aclnnStatus run_plan(const char *call, void *workspace, uint64_t workspaceSize,
                            aclOpExecutor *executor, aclrtStream stream)
{
    if (executor == NULL) {
        fake_acl_set_error("fake aclnn: %s: NULL executor", call);
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
    } else if (strcmp(executor->run_name, call) != 0) {
        fake_acl_misuse("%s ran a plan made for %s", call, executor->run_name);
        fake_acl_set_error("fake aclnn: %s got a plan of %s", call, executor->run_name);
        rc = FAKE_ACLNN_ERR_PARAM_INVALID;
    } else if (workspaceSize < executor->workspace_size ||
               (executor->workspace_size > 0 &&
                fake_acl_host(workspace, executor->workspace_size, "workspace") == NULL)) {
        fake_acl_set_error("fake aclnn: workspace %p of %llu bytes, %llu planned", workspace,
                           (unsigned long long)workspaceSize,
                           (unsigned long long)executor->workspace_size);
        rc = FAKE_ACLNN_ERR_PARAM_INVALID;
    } else if (fake_acl_enqueue(stream, execute, executor, call) != 0) {
        fake_acl_set_error("fake aclnn: %p is not a stream the runtime made", stream);
        rc = FAKE_ACLNN_ERR_RUNTIME_ERROR;
    }
    if (rc != ACLNN_SUCCESS)
        free(executor);
    return rc;
}

/* ---- MoeTokenPermuteGrad -------------------------------------------- */

static void compute_permute_grad(const aclOpExecutor *e, void *const in[4], void *const out[2])
{
    /* aclDataType values equal moeperm_dtype's. */
    naive_permute_grad((moeperm_dtype)e->in[0].dtype, in[0], e->rows, e->hidden, in[1],
                       e->tokens, e->top_k, out[0]);
}

aclnnStatus aclnnMoeTokenPermuteGradGetWorkspaceSize(const aclTensor *permutedOutputGrad,
                                                     const aclTensor *sortedIndices,
                                                     int64_t numTopk, bool paddedMode,
                                                     aclTensor *out, uint64_t *workspaceSize,
                                                     aclOpExecutor **executor)
{
    static const char call[] = "aclnnMoeTokenPermuteGradGetWorkspaceSize";
    aclnnStatus rc = plan_start(call, permutedOutputGrad != NULL && sortedIndices != NULL &&
                                          out != NULL && workspaceSize != NULL &&
                                          executor != NULL);
    if (rc != ACLNN_SUCCESS)
        return rc;
    aclOpExecutor e = {.run_name = "aclnnMoeTokenPermuteGrad", .compute = compute_permute_grad};
    fake_view *g = &e.in[0], *ix = &e.in[1], *o = &e.out[0];
    if (!view_of(permutedOutputGrad, "permutedOutputGrad", 2, g) ||
        !view_of(sortedIndices, "sortedIndices", 1, ix) || !view_of(out, "out", 2, o))
        return FAKE_ACLNN_ERR_PARAM_INVALID;
    if (!is_float(g->dtype) || o->dtype != g->dtype || ix->dtype != ACL_INT32)
        return refuse_shapes(call, "dtypes of grad, indices and out");
    /* The device's tiling takes -1 as 1, ignores paddedMode and sums
     * floor(L / K) tokens. */
    const int64_t K = numTopk == -1 ? 1 : numTopk;
    const int64_t T = o->rows, H = o->cols, R = g->rows, L = ix->rows;
    if (K < 1 || K > 512 || L / K != T || g->cols != H)
        return refuse_shapes(call, "shapes and numTopk do not agree");
    if (!indices_nonnegative(ix, T * K))
        return FAKE_ACLNN_ERR_PARAM_INVALID;
    count_edge(paddedMode, numTopk == -1, false, L, T * K, R, T * K);
    e.tokens = T;
    e.top_k = K;
    e.hidden = H;
    e.rows = R;
    return plan_finish(&e, workspaceSize, executor);
}

aclnnStatus aclnnMoeTokenPermuteGrad(void *workspace, uint64_t workspaceSize,
                                     aclOpExecutor *executor, aclrtStream stream)
{
    return run_plan("aclnnMoeTokenPermuteGrad", workspace, workspaceSize, executor, stream);
}

/* ---- MoeTokenPermute ------------------------------------------------- */

#ifndef FAKE_ACL_NO_PERMUTE
static void compute_permute(const aclOpExecutor *e, void *const in[4], void *const out[2])
{
    int64_t count = e->tokens * e->top_k;
    int64_t *ids = malloc((size_t)(count > 0 ? count : 1) * sizeof *ids);
    if (ids == NULL)
        abort();
    for (int64_t i = 0; i < count; i++)
        ids[i] = e->in[1].dtype == ACL_INT64 ? ((const int64_t *)in[1])[i]
                                             : ((const int32_t *)in[1])[i];
    naive_permute(elem_size(e->in[0].dtype), in[0], e->tokens, e->hidden, ids, e->top_k,
                  e->num_out, out[0], out[1]);
    free(ids);
}

aclnnStatus aclnnMoeTokenPermuteGetWorkspaceSize(const aclTensor *tokens,
                                                 const aclTensor *indices, int64_t numOutTokens,
                                                 bool paddedMode, aclTensor *permuteTokensOut,
                                                 aclTensor *sortedIndicesOut,
                                                 uint64_t *workspaceSize,
                                                 aclOpExecutor **executor)
{
    static const char call[] = "aclnnMoeTokenPermuteGetWorkspaceSize";
    aclnnStatus rc = plan_start(call, tokens != NULL && indices != NULL &&
                                          permuteTokensOut != NULL && sortedIndicesOut != NULL &&
                                          workspaceSize != NULL && executor != NULL);
    if (rc != ACLNN_SUCCESS)
        return rc;
    aclOpExecutor e = {.run_name = "aclnnMoeTokenPermute", .compute = compute_permute};
    fake_view *x = &e.in[0], *ix = &e.in[1], *o = &e.out[0], *s = &e.out[1];
    uint64_t index_ndim = indices->magic == FAKE_TENSOR_MAGIC && indices->ndim == 1 ? 1 : 2;
    /* Tokens of rank 3 and more are rows of the product of their other
     * dims, and so is the output. */
    uint64_t tokens_ndim = tokens->magic == FAKE_TENSOR_MAGIC && tokens->ndim > 2 ? tokens->ndim : 2;
    uint64_t out_ndim = permuteTokensOut->magic == FAKE_TENSOR_MAGIC && permuteTokensOut->ndim > 2
                            ? permuteTokensOut->ndim
                            : 2;
    if (!view_of(tokens, "tokens", tokens_ndim, x) ||
        !view_of(indices, "indices", index_ndim, ix) ||
        !view_of(permuteTokensOut, "permuteTokensOut", out_ndim, o) ||
        !view_of(sortedIndicesOut, "sortedIndicesOut", 1, s))
        return FAKE_ACLNN_ERR_PARAM_INVALID;
    if ((!is_float(x->dtype) && x->dtype != ACL_INT8) || o->dtype != x->dtype ||
        (ix->dtype != ACL_INT32 && ix->dtype != ACL_INT64) || s->dtype != ACL_INT32)
        return refuse_shapes(call, "dtypes of tokens, indices and the outputs");
    const int64_t N = x->rows, H = x->cols, K = ix->cols;
    if (paddedMode || ix->rows != N || K < 1 || K > 512 || N * K >= 16777215)
        return refuse_shapes(call, "tokens, indices and paddedMode do not agree");
    const int64_t num_out = naive_num_out(numOutTokens, N * K);
    if (o->rows != num_out || o->cols != H || s->rows != N * K)
        return refuse_shapes(call, "output shapes disagree with numOutTokens");
    count_edge(false, false, tokens_ndim > 2, 0, 0, 0, 0);
    e.tokens = N;
    e.top_k = K;
    e.hidden = H;
    e.num_out = num_out;
    return plan_finish(&e, workspaceSize, executor);
}

aclnnStatus aclnnMoeTokenPermute(void *workspace, uint64_t workspaceSize,
                                 aclOpExecutor *executor, aclrtStream stream)
{
    return run_plan("aclnnMoeTokenPermute", workspace, workspaceSize, executor, stream);
}
#endif

/* ---- MoeTokenUnpermute ----------------------------------------------- */

#ifndef FAKE_ACL_NO_UNPERMUTE
static void compute_unpermute(const aclOpExecutor *e, void *const in[4], void *const out[2])
{
    naive_unpermute((moeperm_dtype)e->in[0].dtype, in[0], e->rows, e->hidden, in[1], e->tokens,
                    e->top_k, (moeperm_dtype)e->in[2].dtype, in[2], out[0]);
}

aclnnStatus aclnnMoeTokenUnpermuteGetWorkspaceSize(const aclTensor *permutedTokens,
                                                   const aclTensor *sortedIndices,
                                                   const aclTensor *probsOptional,
                                                   bool paddedMode,
                                                   const aclIntArray *restoreShapeOptional,
                                                   aclTensor *out, uint64_t *workspaceSize,
                                                   aclOpExecutor **executor)
{
    static const char call[] = "aclnnMoeTokenUnpermuteGetWorkspaceSize";
    aclnnStatus rc = plan_start(call, permutedTokens != NULL && sortedIndices != NULL &&
                                          out != NULL && workspaceSize != NULL &&
                                          executor != NULL);
    if (rc != ACLNN_SUCCESS)
        return rc;
    aclOpExecutor e = {.run_name = "aclnnMoeTokenUnpermute", .compute = compute_unpermute};
    fake_view *x = &e.in[0], *ix = &e.in[1], *p = &e.in[2], *o = &e.out[0];
    if (!live_int_array(restoreShapeOptional, "restoreShapeOptional") ||
        !view_of(permutedTokens, "permutedTokens", 2, x) ||
        !view_of(sortedIndices, "sortedIndices", 1, ix) ||
        (probsOptional != NULL && !view_of(probsOptional, "probsOptional", 2, p)) ||
        !view_of(out, "out", 2, o))
        return FAKE_ACLNN_ERR_PARAM_INVALID;
    if (!is_float(x->dtype) || o->dtype != x->dtype || ix->dtype != ACL_INT32 ||
        (probsOptional != NULL && !is_float(p->dtype)))
        return refuse_shapes(call, "dtypes of permutedTokens, sortedIndices, probs and out");
    /* paddedMode is ignored; with probs the first N*K entries are read,
     * without them every entry is a token. */
    const int64_t N = o->rows, H = x->cols, R = x->rows;
    const int64_t K = probsOptional != NULL ? p->cols : 1;
    if (o->cols != H || (probsOptional != NULL && p->rows != N) || K < 1 || K > 512 ||
        (probsOptional != NULL ? ix->rows < N * K : ix->rows != N))
        return refuse_shapes(call, "shapes do not agree");
    if (!indices_nonnegative(ix, N * K))
        return FAKE_ACLNN_ERR_PARAM_INVALID;
    count_edge(paddedMode, false, false, ix->rows, N * K, R, N * K);
    e.tokens = N;
    e.top_k = K;
    e.hidden = H;
    e.rows = R;
    return plan_finish(&e, workspaceSize, executor);
}

aclnnStatus aclnnMoeTokenUnpermute(void *workspace, uint64_t workspaceSize,
                                   aclOpExecutor *executor, aclrtStream stream)
{
    return run_plan("aclnnMoeTokenUnpermute", workspace, workspaceSize, executor, stream);
}
#endif

/* ---- MoeTokenUnpermuteGrad ------------------------------------------- */

#ifndef FAKE_ACL_NO_UNPERMUTE_GRAD
static void compute_unpermute_grad(const aclOpExecutor *e, void *const in[4],
                                   void *const out[2])
{
    naive_unpermute_grad((moeperm_dtype)e->in[0].dtype, (moeperm_dtype)e->in[3].dtype, in[0],
                         e->rows, e->hidden, in[1], e->tokens, in[2], in[3], e->top_k, e->chunk,
                         out[0], e->probs_grad_written ? out[1] : NULL);
}

aclnnStatus aclnnMoeTokenUnpermuteGradGetWorkspaceSize(
    const aclTensor *permuteTokens, const aclTensor *unpermutedTokensGrad,
    const aclTensor *sortedIndices, const aclTensor *probsOptional, bool paddedMode,
    const aclIntArray *restoreShapeOptional, aclTensor *permutedTokensGradOut,
    aclTensor *probsGradOut, uint64_t *workspaceSize, aclOpExecutor **executor)
{
    static const char call[] = "aclnnMoeTokenUnpermuteGradGetWorkspaceSize";
    /* probsGradOut is required, probs or not: the vendor's header says so
     * and its generated code refuses a NULL one. */
    aclnnStatus rc = plan_start(call, permuteTokens != NULL && unpermutedTokensGrad != NULL &&
                                          sortedIndices != NULL &&
                                          permutedTokensGradOut != NULL &&
                                          probsGradOut != NULL && workspaceSize != NULL &&
                                          executor != NULL);
    if (rc != ACLNN_SUCCESS)
        return rc;
    aclOpExecutor e = {.run_name = "aclnnMoeTokenUnpermuteGrad",
                       .compute = compute_unpermute_grad};
    fake_view *x = &e.in[0], *g = &e.in[1], *ix = &e.in[2], *p = &e.in[3];
    fake_view *xg = &e.out[0], *pg = &e.out[1];
    bool probs = probsOptional != NULL;
    /* Without probs the kernel never touches probsGradOut: any shape. */
    uint64_t pg_ndim = probs || (probsGradOut->magic == FAKE_TENSOR_MAGIC &&
                                 probsGradOut->ndim == 2)
                           ? 2
                           : 1;
    if (!live_int_array(restoreShapeOptional, "restoreShapeOptional") ||
        !view_of(permuteTokens, "permuteTokens", 2, x) ||
        !view_of(unpermutedTokensGrad, "unpermutedTokensGrad", 2, g) ||
        !view_of(sortedIndices, "sortedIndices", 1, ix) ||
        (probs && !view_of(probsOptional, "probsOptional", 2, p)) ||
        !view_of(permutedTokensGradOut, "permutedTokensGradOut", 2, xg) ||
        !view_of(probsGradOut, "probsGradOut", pg_ndim, pg))
        return FAKE_ACLNN_ERR_PARAM_INVALID;
    if (!is_float(x->dtype) || g->dtype != x->dtype || xg->dtype != x->dtype ||
        ix->dtype != ACL_INT32 || !is_float(pg->dtype) ||
        (probs && (!is_float(p->dtype) || pg->dtype != p->dtype)))
        return refuse_shapes(call, "dtypes of the tokens, sortedIndices, probs and the outputs");
    /* paddedMode is ignored, the first N*K entries are read. */
    const int64_t N = g->rows, H = g->cols, R = x->rows, K = probs ? p->cols : 1;
    if (x->cols != H || xg->rows != R || xg->cols != H ||
        (probs && (p->rows != N || pg->rows != N || pg->cols != K)) || K < 1 || K > 512 ||
        ix->rows < N * K)
        return refuse_shapes(call, "shapes do not agree");
    if (!indices_nonnegative(ix, N * K))
        return FAKE_ACLNN_ERR_PARAM_INVALID;
    count_edge(paddedMode, false, false, ix->rows, N * K, R, N * K);
    e.tokens = N;
    e.top_k = K;
    e.hidden = H;
    e.rows = R;
    e.probs_grad_written = probs;
    /* The tiling is the host's part of the vendor's operator, so it is
     * worked out here, at planning. */
    e.chunk = 1;
    if (probs && H > 0)
        e.chunk = naive_ug_chunk_for(N, K, H, (moeperm_dtype)x->dtype, (moeperm_dtype)p->dtype,
                                     fake_acl_env_long("FAKE_ACL_UB_BYTES", 196352),
                                     fake_acl_env_long("FAKE_ACL_VECTOR_CORES", 48));
    return plan_finish(&e, workspaceSize, executor);
}

aclnnStatus aclnnMoeTokenUnpermuteGrad(void *workspace, uint64_t workspaceSize,
                                       aclOpExecutor *executor, aclrtStream stream)
{
    return run_plan("aclnnMoeTokenUnpermuteGrad", workspace, workspaceSize, executor, stream);
}
#endif
