/*
 * The host runtime (libmoeperm-aclnn) driven as a device harness drives
 * the device: buffers from aclrtMalloc, views from aclCreateTensor (strided,
 * offset, tokens of three dims), the two phases on a stream, results read back with
 * aclrtMemcpy.  Every result is compared bit for bit, whole storage buffers
 * included (the gaps of a strided view must keep their bytes), with
 * libmoeperm called directly on the same views over host copies of the
 * same bytes.  Then the refusals: what the first phase checks (NULLs,
 * dtypes, formats, the device's tiling limits), what only the second can
 * (indices, memory), the runtime's own codes, the per-thread message; and
 * after every test nothing the test freed is still alive.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sys/wait.h>
#include <unistd.h>

#include "acl/acl.h"
#include "aclnn/opdev/op_errno.h"
#include "aclnnop/aclnn_moe_token_permute.h"
#include "aclnnop/aclnn_moe_token_permute_grad.h"
#include "aclnnop/aclnn_moe_token_unpermute.h"
#include "aclnnop/aclnn_moe_token_unpermute_grad.h"
#include "internal.h"

/* --- twins: one tensor through the runtime and for libmoeperm ---------- */

typedef enum layout {
    DENSE,   /* row-major */
    PADDED,  /* rows padded by 3 elements (1-D: every other element) */
    COLUMNS, /* column-major with a padded column (1-D: every third) */
} layout;

typedef struct twin {
    moeperm_dtype dtype;
    uint64_t ndim;
    int64_t dims[3], strides[3], offset;
    int64_t storage;      /* elements */
    size_t bytes;         /* of storage */
    unsigned char *host; /* the reference's storage, and what is uploaded */
    void *dev;
    aclTensor *acl;
    moeperm_tensor *ref;
} twin;

static uint64_t rng_next(uint64_t *s)
{
    /* splitmix64 */
    uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static void twin_make(twin *t, moeperm_dtype dtype, uint64_t ndim, const int64_t *dims, layout l,
                      int64_t offset, uint64_t *rng)
{
    memset(t, 0, sizeof *t);
    t->dtype = dtype;
    t->ndim = ndim;
    t->offset = offset;
    memcpy(t->dims, dims, ndim * sizeof *dims);
    if (ndim == 1) {
        t->strides[0] = l == DENSE ? 1 : l == PADDED ? 2 : 3;
    } else if (ndim == 2) {
        if (l == COLUMNS) {
            t->strides[0] = 1;
            t->strides[1] = dims[0] + 1;
        } else {
            t->strides[1] = 1;
            t->strides[0] = dims[1] + (l == PADDED ? 3 : 0);
        }
    } else if (l == COLUMNS) {
        for (uint64_t i = 0; i < ndim; i++)
            t->strides[i] = i == 0 ? 1 : t->strides[i - 1] * (dims[i - 1] + (i == 1));
    } else {
        /* PADDED: every innermost row padded by 3, so dims 1.. do not fold. */
        for (uint64_t i = ndim; i-- > 0;)
            t->strides[i] = i + 1 == ndim ? 1
                                          : t->strides[i + 1] * dims[i + 1] +
                                                (l == PADDED && i + 2 == ndim ? 3 : 0);
    }
    int64_t last = offset;
    for (uint64_t i = 0; i < ndim; i++)
        last += dims[i] > 0 ? (dims[i] - 1) * t->strides[i] : 0;
    t->storage = last + 3; /* a little slack after the view, kept untouched */
    size_t es = moeperm_dtype_size(dtype);
    t->bytes = (size_t)t->storage * es;
    t->host = malloc(t->bytes);
    assert_non_null(t->host);
    for (size_t i = 0; i < t->bytes; i++)
        t->host[i] = (unsigned char)rng_next(rng);
    assert_int_equal(aclrtMalloc(&t->dev, t->bytes, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    int64_t storage_dims[1] = {t->storage};
    t->acl = aclCreateTensor(t->dims, ndim, (aclDataType)dtype, t->strides, offset,
                             ACL_FORMAT_ND, storage_dims, 1, t->dev);
    assert_non_null(t->acl);
    t->ref = moeperm_tensor_create(t->dims, ndim, dtype, t->strides, offset, t->host);
    assert_non_null(t->ref);
}

/* Element at flat position i of the view (row-major over its dims). */
static int64_t twin_at(const twin *t, int64_t i)
{
    int64_t at = t->offset;
    for (uint64_t d = t->ndim; d-- > 0;) {
        at += (i % t->dims[d]) * t->strides[d];
        i /= t->dims[d];
    }
    return at;
}

static void twin_set_index(twin *t, int64_t i, int64_t value)
{
    int64_t at = twin_at(t, i);
    if (t->dtype == MOEPERM_INT64)
        memcpy(t->host + at * 8, &value, 8);
    else {
        int32_t v = (int32_t)value;
        memcpy(t->host + at * 4, &v, 4);
    }
}

/* Finite values of the float dtypes (bits from the generator), so that
 * every slot counts. */
static void twin_fill_finite(twin *t, uint64_t *rng)
{
    int64_t n = 1;
    for (uint64_t d = 0; d < t->ndim; d++)
        n *= t->dims[d];
    for (int64_t i = 0; i < n; i++) {
        int64_t at = twin_at(t, i);
        uint64_t r = rng_next(rng);
        if (t->dtype == MOEPERM_FLOAT) {
            uint32_t v = ((uint32_t)r & 0x807fffff) | 0x3e000000;
            memcpy(t->host + at * 4, &v, 4);
        } else if (t->dtype == MOEPERM_BF16) {
            uint16_t v = ((uint16_t)r & 0x807f) | 0x3e00;
            memcpy(t->host + at * 2, &v, 2);
        } else if (t->dtype == MOEPERM_FLOAT16) {
            uint16_t v = ((uint16_t)r & 0x83ff) | 0x3400;
            memcpy(t->host + at * 2, &v, 2);
        }
    }
}

static void twin_upload(twin *t)
{
    assert_int_equal(aclrtMemcpy(t->dev, t->bytes, t->host, t->bytes, ACL_MEMCPY_HOST_TO_DEVICE),
                     ACL_SUCCESS);
}

/* The device's storage, byte for byte, equals the reference's. */
static void twin_check(const twin *t, const char *what)
{
    unsigned char *back = malloc(t->bytes);
    assert_non_null(back);
    assert_int_equal(aclrtMemcpy(back, t->bytes, t->dev, t->bytes, ACL_MEMCPY_DEVICE_TO_HOST),
                     ACL_SUCCESS);
    for (size_t i = 0; i < t->bytes; i++)
        if (back[i] != t->host[i])
            fail_msg("%s: byte %zu of %zu is 0x%02x through the runtime, 0x%02x from libmoeperm",
                     what, i, t->bytes, back[i], t->host[i]);
    free(back);
}

static void twin_free(twin *t)
{
    if (t->acl == NULL)
        return;
    assert_int_equal(aclDestroyTensor(t->acl), ACLNN_SUCCESS);
    assert_int_equal(aclrtFree(t->dev), ACL_SUCCESS);
    moeperm_tensor_destroy(t->ref);
    free(t->host);
    memset(t, 0, sizeof *t);
}

/* --- the runtime around every test -------------------------------------- */

typedef struct fixture {
    aclrtStream stream;
    host_live before;
} fixture;

static int setup(void **state)
{
    static fixture f;
    host_live_get(&f.before);
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    assert_int_equal(aclrtCreateStream(&f.stream), ACL_SUCCESS);
    while (aclGetRecentErrMsg() != NULL)
        ;
    *state = &f;
    return 0;
}

/* Nothing the test made is alive once it has freed it. */
static int teardown(void **state)
{
    fixture *f = *state;
    assert_int_equal(aclrtDestroyStream(f->stream), ACL_SUCCESS);
    assert_int_equal(aclrtResetDevice(0), ACL_SUCCESS);
    host_live now;
    host_live_get(&now);
    for (int k = 0; k < HOST_KINDS; k++)
        if (now.count[k] != f->before.count[k])
            fail_msg("objects of kind %d: %llu alive before the test, %llu after", k,
                     (unsigned long long)f->before.count[k], (unsigned long long)now.count[k]);
    assert_int_equal(now.bytes, f->before.bytes);
    return 0;
}

static void upload_all(twin **ts, size_t n)
{
    for (size_t i = 0; i < n; i++)
        twin_upload(ts[i]);
}

static void check_all(twin **ts, size_t n, const char *const *names)
{
    for (size_t i = 0; i < n; i++)
        twin_check(ts[i], names[i]);
}

/* Runs libmoeperm's plan (st is its first phase's status; the plan is
 * passed by address because the first phase fills it in). */
static void reference_run(moeperm_status st, moeperm_executor **plan_at)
{
    moeperm_executor *plan = *plan_at;
    if (st != MOEPERM_SUCCESS)
        fail_msg("libmoeperm refuses the case: %s", moeperm_last_error());
    assert_int_equal(moeperm_executor_run(NULL, 0, plan, NULL), MOEPERM_SUCCESS);
}

static void device_run(aclnnStatus st, aclnnStatus (*run)(void *, uint64_t, aclOpExecutor *,
                                                          aclrtStream),
                       uint64_t ws, aclOpExecutor *ex, aclrtStream stream, twin **ts, size_t n,
                       bool upload_after)
{
    if (st != ACLNN_SUCCESS)
        fail_msg("the first phase refuses the case (%d): %s", st, aclGetRecentErrMsg());
    assert_int_equal(ws, 0);
    if (upload_after)
        upload_all(ts, n);
    st = run(NULL, ws, ex, stream);
    if (st != ACLNN_SUCCESS)
        fail_msg("the second phase refuses the case (%d): %s", st, aclGetRecentErrMsg());
    assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
}

/* --- MoeTokenPermute ----------------------------------------------------- */

static const moeperm_dtype floats[] = {MOEPERM_FLOAT, MOEPERM_FLOAT16, MOEPERM_BF16};

static void permute_case(aclrtStream stream, moeperm_dtype dtype, moeperm_dtype index_dtype,
                         int64_t n, int64_t k, int64_t h, int64_t num_out, layout l,
                         bool upload_after, uint64_t seed)
{
    uint64_t rng = seed;
    int64_t slots = n * k;
    int64_t kept = num_out <= 0 ? num_out + slots : num_out;
    kept = kept > slots ? slots : kept < 0 ? 0 : kept;
    twin x, ix, out, sorted;
    twin_make(&x, dtype, 2, (int64_t[]){n, h}, l, 1, &rng);
    twin_make(&ix, index_dtype, k == 1 ? 1 : 2, (int64_t[]){n, k}, l, 2, &rng);
    twin_make(&out, dtype, 2, (int64_t[]){kept, h}, l == DENSE ? DENSE : COLUMNS, 3, &rng);
    twin_make(&sorted, MOEPERM_INT32, 1, (int64_t[]){slots}, l, 0, &rng);
    for (int64_t i = 0; i < slots; i++)
        twin_set_index(&ix, i, (int64_t)(rng_next(&rng) % 5));
    twin *all[] = {&x, &ix, &out, &sorted};
    static const char *const names[] = {"tokens", "indices", "permuteTokensOut",
                                        "sortedIndicesOut"};
    if (!upload_after)
        upload_all(all, 4);
    uint64_t ws = 1;
    aclOpExecutor *ex = NULL;
    aclnnStatus st = aclnnMoeTokenPermuteGetWorkspaceSize(x.acl, ix.acl, num_out, false, out.acl,
                                                          sorted.acl, &ws, &ex);
    device_run(st, aclnnMoeTokenPermute, ws, ex, stream, all, 4, upload_after);
    moeperm_executor *plan = NULL;
    uint64_t rws;
    reference_run(moeperm_token_permute_get_workspace_size(x.ref, ix.ref, num_out, false, out.ref,
                                                           sorted.ref, &rws, &plan),
                  &plan);
    check_all(all, 4, names);
    for (size_t i = 0; i < 4; i++)
        twin_free(all[i]);
}

static void test_permute_every_dtype_view_and_index_type(void **state)
{
    fixture *f = *state;
    static const moeperm_dtype tokens[] = {MOEPERM_FLOAT, MOEPERM_FLOAT16, MOEPERM_BF16,
                                           MOEPERM_INT8};
    uint64_t seed = 1;
    for (size_t d = 0; d < 4; d++)
        for (int idx = 0; idx < 2; idx++)
            for (int l = DENSE; l <= COLUMNS; l++) {
                moeperm_dtype index = idx ? MOEPERM_INT64 : MOEPERM_INT32;
                permute_case(f->stream, tokens[d], index, 5, 3, 7, 0, (layout)l, l == PADDED,
                             seed++);
                permute_case(f->stream, tokens[d], index, 4, 1, 6, -2, (layout)l, false, seed++);
                permute_case(f->stream, tokens[d], index, 6, 2, 3, 5, (layout)l, true, seed++);
            }
}

/* MoeTokenPermute over the twins {tokens, indices, permuteTokensOut,
 * sortedIndicesOut}, ids of at most max_id, through the runtime and through
 * libmoeperm with x_ref and out_ref as its views of tokens and
 * permuteTokensOut; the storage compared; the twins freed. */
static void permute_twins(aclrtStream stream, twin **all, int64_t num_out, int64_t max_id,
                          moeperm_tensor *x_ref, moeperm_tensor *out_ref, uint64_t *rng)
{
    twin *x = all[0], *ix = all[1], *out = all[2], *sorted = all[3];
    for (int64_t i = 0; i < sorted->dims[0]; i++)
        twin_set_index(ix, i, (int64_t)(rng_next(rng) % (uint64_t)(max_id + 1)));
    static const char *const names[] = {"tokens", "indices", "permuteTokensOut",
                                        "sortedIndicesOut"};
    upload_all(all, 4);
    uint64_t ws;
    aclOpExecutor *ex;
    aclnnStatus st = aclnnMoeTokenPermuteGetWorkspaceSize(x->acl, ix->acl, num_out, false,
                                                          out->acl, sorted->acl, &ws, &ex);
    device_run(st, aclnnMoeTokenPermute, ws, ex, stream, all, 4, false);
    moeperm_executor *plan = NULL;
    uint64_t rws;
    reference_run(moeperm_token_permute_get_workspace_size(x_ref, ix->ref, num_out, false,
                                                           out_ref, sorted->ref, &rws, &plan),
                  &plan);
    check_all(all, 4, names);
    for (size_t i = 0; i < 4; i++)
        twin_free(all[i]);
}

/* Tokens of more than two dims: the device folds dims 1.. into a row. */
static void test_permute_folds_trailing_dims_into_rows(void **state)
{
    fixture *f = *state;
    uint64_t rng = 7;
    int64_t n = 4, k = 2, a = 3, b = 5;
    twin x, ix, out, sorted;
    twin_make(&x, MOEPERM_BF16, 3, (int64_t[]){n, a, b}, DENSE, 0, &rng);
    twin_make(&ix, MOEPERM_INT32, 2, (int64_t[]){n, k}, DENSE, 0, &rng);
    twin_make(&out, MOEPERM_BF16, 3, (int64_t[]){n * k, a, b}, DENSE, 0, &rng);
    twin_make(&sorted, MOEPERM_INT32, 1, (int64_t[]){n * k}, DENSE, 0, &rng);
    /* The reference: the same memory as [N, a*b] rows. */
    moeperm_tensor *x2 = moeperm_tensor_create((int64_t[]){n, a * b}, 2, MOEPERM_BF16, NULL, 0,
                                               x.host);
    moeperm_tensor *o2 = moeperm_tensor_create((int64_t[]){n * k, a * b}, 2, MOEPERM_BF16, NULL,
                                               0, out.host);
    permute_twins(f->stream, (twin *[]){&x, &ix, &out, &sorted}, 0, 2, x2, o2, &rng);
    moeperm_tensor_destroy(x2);
    moeperm_tensor_destroy(o2);
}

/* Tokens of more than two dims whose dims 1.. do not fold into one evenly
 * strided row (padded inner rows, column-major): libmoeperm reads such
 * views as they are, and a device makes its inputs contiguous before the
 * kernel (AutoContiguous, moe_token_permute_def.cpp:23-35), so the runtime
 * takes them too and gives libmoeperm's bits for the same views. */
static void test_permute_takes_rank_3_views_whose_rows_do_not_fold(void **state)
{
    fixture *f = *state;
    uint64_t rng = 11;
    int64_t n = 5, k = 2, a = 3, b = 4;
    static const struct {
        layout x, out;
        bool flat_out;
    } cases[] = {{PADDED, COLUMNS, false}, {COLUMNS, PADDED, false}, {PADDED, PADDED, true},
                 {COLUMNS, DENSE, true}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        twin x, ix, out, sorted;
        twin_make(&x, MOEPERM_FLOAT16, 3, (int64_t[]){n, a, b}, cases[c].x, 2, &rng);
        twin_make(&ix, MOEPERM_INT64, 2, (int64_t[]){n, k}, DENSE, 0, &rng);
        if (cases[c].flat_out)
            twin_make(&out, MOEPERM_FLOAT16, 2, (int64_t[]){n * k - 3, a * b}, cases[c].out, 1,
                      &rng);
        else
            twin_make(&out, MOEPERM_FLOAT16, 3, (int64_t[]){n * k - 3, a, b}, cases[c].out, 1,
                      &rng);
        twin_make(&sorted, MOEPERM_INT32, 1, (int64_t[]){n * k}, PADDED, 0, &rng);
        permute_twins(f->stream, (twin *[]){&x, &ix, &out, &sorted}, -3, 3, x.ref, out.ref,
                      &rng);
    }
}

/* --- MoeTokenPermuteGrad and MoeTokenUnpermute --------------------------- */

/* A permutation of 0..count-1 into ix: with rows < count, the entries
 * from rows on are dropped slots. */
static void permutation(twin *ix, int64_t count, uint64_t *rng)
{
    int64_t *p = malloc((size_t)count * sizeof *p);
    assert_non_null(p);
    for (int64_t i = 0; i < count; i++)
        p[i] = i;
    for (int64_t i = count - 1; i > 0; i--) {
        int64_t j = (int64_t)(rng_next(rng) % (uint64_t)(i + 1)), v = p[i];
        p[i] = p[j];
        p[j] = v;
    }
    for (int64_t i = 0; i < count; i++)
        twin_set_index(ix, i, p[i]);
    free(p);
}

/* Indices as a device takes them: any non-negative values, rows read
 * twice, entries at or past rows (dropped slots) up to 1065353216 (the
 * bits of 1.0f, which the vendor's examples hand over as an index).  With
 * unique, no row below rows is named twice (MoeTokenUnpermuteGrad's rule). */
static void wild_indices(twin *ix, int64_t count, int64_t rows, bool unique, uint64_t *rng)
{
    permutation(ix, count, rng);
    for (int64_t i = 0; i < count; i++) {
        uint64_t r = rng_next(rng);
        if (r % 4 == 0)
            twin_set_index(ix, i, rows + (int64_t)(r >> 40) % 5); /* just past the rows */
        else if (r % 4 == 1)
            twin_set_index(ix, i, 1065353216);
        else if (r % 4 == 2 && !unique && rows > 0)
            twin_set_index(ix, i, (int64_t)((r >> 32) % (uint64_t)rows)); /* a repeat, maybe */
    }
}

static void permute_grad_case(aclrtStream stream, moeperm_dtype dtype, int64_t n, int64_t k,
                              int64_t h, int64_t rows, layout l, bool upload_after, uint64_t seed,
                              bool wild)
{
    uint64_t rng = seed;
    twin g, ix, out;
    twin_make(&g, dtype, 2, (int64_t[]){rows, h}, l, 2, &rng);
    twin_make(&ix, MOEPERM_INT32, 1, (int64_t[]){n * k}, l, 1, &rng);
    twin_make(&out, dtype, 2, (int64_t[]){n, h}, l, 4, &rng);
    twin_fill_finite(&g, &rng);
    if (wild)
        wild_indices(&ix, n * k, rows, false, &rng);
    else
        permutation(&ix, n * k, &rng);
    twin *all[] = {&g, &ix, &out};
    static const char *const names[] = {"permutedOutputGrad", "sortedIndices", "out"};
    if (!upload_after)
        upload_all(all, 3);
    uint64_t ws;
    aclOpExecutor *ex;
    aclnnStatus st =
        aclnnMoeTokenPermuteGradGetWorkspaceSize(g.acl, ix.acl, k, false, out.acl, &ws, &ex);
    device_run(st, aclnnMoeTokenPermuteGrad, ws, ex, stream, all, 3, upload_after);
    moeperm_executor *plan = NULL;
    uint64_t rws;
    reference_run(moeperm_token_permute_grad_get_workspace_size(g.ref, ix.ref, k, false, out.ref,
                                                                &rws, &plan),
                  &plan);
    check_all(all, 3, names);
    for (size_t i = 0; i < 3; i++)
        twin_free(all[i]);
}

static void test_permute_grad_every_dtype_view_and_dropped_slots(void **state)
{
    fixture *f = *state;
    uint64_t seed = 100;
    for (size_t d = 0; d < 3; d++)
        for (int l = DENSE; l <= COLUMNS; l++) {
            permute_grad_case(f->stream, floats[d], 4, 3, 5, 12, (layout)l, false, seed++, false);
            permute_grad_case(f->stream, floats[d], 4, 3, 5, 7, (layout)l, true, seed++, false);
            permute_grad_case(f->stream, floats[d], 3, 1, 9, 2, (layout)l, l == PADDED, seed++,
                              false);
            permute_grad_case(f->stream, floats[d], 5, 4, 6, 9, (layout)l, true, seed++, true);
            permute_grad_case(f->stream, floats[d], 5, 4, 6, 30, (layout)l, false, seed++, true);
        }
}

/* drop: how many slots name no row (rows = slots - drop). */
static void unpermute_case(aclrtStream stream, moeperm_dtype dtype, int probs_dtype, int64_t n,
                           int64_t k, int64_t h, int64_t drop, layout l, bool upload_after,
                           uint64_t seed, bool wild)
{
    uint64_t rng = seed;
    bool with_probs = probs_dtype >= 0;
    if (!with_probs)
        k = 1;
    int64_t rows = n * k - drop;
    twin x, ix, probs, out;
    memset(&probs, 0, sizeof probs);
    twin_make(&x, dtype, 2, (int64_t[]){rows, h}, l, 1, &rng);
    twin_make(&ix, MOEPERM_INT32, 1, (int64_t[]){n * k}, l, 0, &rng);
    if (with_probs) {
        twin_make(&probs, (moeperm_dtype)probs_dtype, 2, (int64_t[]){n, k}, l, 3, &rng);
        twin_fill_finite(&probs, &rng);
    }
    twin_make(&out, dtype, 2, (int64_t[]){n, h}, l, 2, &rng);
    twin_fill_finite(&x, &rng);
    if (wild)
        wild_indices(&ix, n * k, rows, false, &rng);
    else
        permutation(&ix, n * k, &rng);
    twin *all[] = {&x, &ix, &out, &probs};
    static const char *const names[] = {"permutedTokens", "sortedIndices", "out",
                                        "probsOptional"};
    size_t count = with_probs ? 4 : 3;
    if (!upload_after)
        upload_all(all, count);
    uint64_t ws;
    aclOpExecutor *ex;
    aclnnStatus st = aclnnMoeTokenUnpermuteGetWorkspaceSize(
        x.acl, ix.acl, with_probs ? probs.acl : NULL, false, NULL, out.acl, &ws, &ex);
    device_run(st, aclnnMoeTokenUnpermute, ws, ex, stream, all, count, upload_after);
    moeperm_executor *plan = NULL;
    uint64_t rws;
    reference_run(moeperm_token_unpermute_get_workspace_size(
                      x.ref, ix.ref, with_probs ? probs.ref : NULL, false, NULL, 0, out.ref,
                      &rws, &plan),
                  &plan);
    check_all(all, count, names);
    for (size_t i = 0; i < count; i++)
        twin_free(all[i]);
}

static void test_unpermute_every_dtype_pair_view_no_probs_and_dropped_slots(void **state)
{
    fixture *f = *state;
    uint64_t seed = 200;
    for (size_t d = 0; d < 3; d++)
        for (int p = -1; p < 3; p++)
            for (int l = DENSE; l <= COLUMNS; l++) {
                int probs = p < 0 ? -1 : (int)floats[p];
                unpermute_case(f->stream, floats[d], probs, 4, 2, 5, 0, (layout)l, false, seed++,
                               false);
                unpermute_case(f->stream, floats[d], probs, 5, 3, 4, 2, (layout)l, true, seed++,
                               false);
                unpermute_case(f->stream, floats[d], probs, 5, 3, 4, 2, (layout)l, true, seed++,
                               true);
            }
}

/* --- MoeTokenUnpermuteGrad ------------------------------------------------ */

/* drop: how many slots name no row (rows = slots - drop). */
static void unpermute_grad_case(aclrtStream stream, moeperm_dtype dtype, int probs_dtype,
                                int64_t n, int64_t k, int64_t h, int64_t drop, layout l,
                                bool upload_after, uint64_t seed, bool wild)
{
    uint64_t rng = seed;
    bool with_probs = probs_dtype >= 0;
    if (!with_probs)
        k = 1;
    int64_t rows = n * k - drop;
    twin x, g, ix, probs, tg, pg;
    memset(&probs, 0, sizeof probs);
    twin_make(&x, dtype, 2, (int64_t[]){rows, h}, l, 1, &rng);
    twin_make(&g, dtype, 2, (int64_t[]){n, h}, l, 2, &rng);
    twin_make(&ix, MOEPERM_INT32, 1, (int64_t[]){n * k}, l, 0, &rng);
    if (with_probs)
        twin_make(&probs, (moeperm_dtype)probs_dtype, 2, (int64_t[]){n, k}, l, 1, &rng);
    twin_make(&tg, dtype, 2, (int64_t[]){rows, h}, l, 3, &rng);
    /* Without probs the device still takes a probsGradOut, and leaves it. */
    twin_make(&pg, with_probs ? (moeperm_dtype)probs_dtype : dtype, 2, (int64_t[]){n, k}, l, 0,
              &rng);
    twin_fill_finite(&x, &rng);
    twin_fill_finite(&g, &rng);
    if (with_probs)
        twin_fill_finite(&probs, &rng);
    if (wild)
        wild_indices(&ix, n * k, rows, true, &rng);
    else
        permutation(&ix, n * k, &rng);
    twin *all[] = {&x, &g, &ix, &tg, &pg, &probs};
    static const char *const names[] = {"permuteTokens",         "unpermutedTokensGrad",
                                        "sortedIndices",         "permutedTokensGradOut",
                                        "probsGradOut",          "probsOptional"};
    size_t count = with_probs ? 6 : 5;
    if (!upload_after)
        upload_all(all, count);
    uint64_t ws;
    aclOpExecutor *ex;
    aclnnStatus st = aclnnMoeTokenUnpermuteGradGetWorkspaceSize(
        x.acl, g.acl, ix.acl, with_probs ? probs.acl : NULL, false, NULL, tg.acl, pg.acl, &ws,
        &ex);
    device_run(st, aclnnMoeTokenUnpermuteGrad, ws, ex, stream, all, count, upload_after);
    moeperm_executor *plan = NULL;
    uint64_t rws;
    reference_run(moeperm_token_unpermute_grad_get_workspace_size(
                      x.ref, g.ref, ix.ref, with_probs ? probs.ref : NULL, false, NULL, 0, tg.ref,
                      with_probs ? pg.ref : NULL, &rws, &plan),
                  &plan);
    check_all(all, count, names);
    for (size_t i = 0; i < count; i++)
        twin_free(all[i]);
}

static void test_unpermute_grad_every_dtype_pair_view_no_probs_and_dropped_slots(void **state)
{
    fixture *f = *state;
    uint64_t seed = 300;
    for (size_t d = 0; d < 3; d++)
        for (int p = -1; p < 3; p++)
            for (int l = DENSE; l <= COLUMNS; l++) {
                int probs = p < 0 ? -1 : (int)floats[p];
                unpermute_grad_case(f->stream, floats[d], probs, 4, 2, 5, 0, (layout)l, false,
                                    seed++, false);
                unpermute_grad_case(f->stream, floats[d], probs, 3, 3, 70, 2, (layout)l, true,
                                    seed++, false);
                /* More rows than slots: the rows no slot names keep their
                 * bytes. */
                unpermute_grad_case(f->stream, floats[d], probs, 3, 2, 9, -5, (layout)l, true,
                                    seed++, true);
            }
}

/* --- threads ------------------------------------------------------------ */

typedef struct worker {
    uint64_t seed;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    aclrtStream stream;
    if (aclrtCreateStream(&stream) != ACL_SUCCESS)
        return NULL;
    for (int i = 0; i < 4; i++) {
        permute_grad_case(stream, floats[i % 3], 6, 2, 33, 10, (layout)(i % 3), i & 1,
                          w->seed + (uint64_t)i, i >= 2);
        unpermute_grad_case(stream, floats[i % 3], (int)floats[(i + 1) % 3], 5, 2, 40, 1,
                            (layout)(i % 3), i & 1, w->seed + 10 + (uint64_t)i, i >= 2);
    }
    aclrtDestroyStream(stream);
    return arg;
}

/* The threads run in a child process: a check that fails on a thread
 * other than cmocka's cannot report back cleanly, so the child's exit
 * status carries the verdict, whatever way it ends. */
static void test_threads_on_their_own_streams_get_the_same_bits(void **state)
{
    (void)state;
    fflush(NULL);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        pthread_t threads[4];
        worker workers[4];
        bool ok = true;
        for (int i = 0; i < 4; i++) {
            workers[i].seed = 1000 + 100 * (uint64_t)i;
            ok = ok && pthread_create(&threads[i], NULL, work, &workers[i]) == 0;
        }
        for (int i = 0; ok && i < 4; i++) {
            void *result = NULL;
            ok = pthread_join(threads[i], &result) == 0 && result == &workers[i];
        }
        fflush(NULL);
        _exit(ok ? 0 : 1);
    }
    int status;
    assert_int_equal(waitpid(child, &status, 0), child);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("the threads' child process %s %d",
                 WIFEXITED(status) ? "exited" : "died of signal",
                 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_permute_every_dtype_view_and_index_type, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_permute_folds_trailing_dims_into_rows, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_permute_takes_rank_3_views_whose_rows_do_not_fold,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_permute_grad_every_dtype_view_and_dropped_slots,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_unpermute_every_dtype_pair_view_no_probs_and_dropped_slots, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_unpermute_grad_every_dtype_pair_view_no_probs_and_dropped_slots, setup,
            teardown),
        cmocka_unit_test_setup_teardown(test_threads_on_their_own_streams_get_the_same_bits,
                                        setup, teardown),
    };
    assert_int_equal(aclInit(NULL), ACL_SUCCESS);
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    assert_int_equal(aclFinalize(), ACL_SUCCESS);
    return failed;
}
