/*
 * Every refusal of MoeTokenUnpermuteGrad's first phase, of the chip setter
 * and of the second phase: each returns its aclnn code, leaves both outputs
 * untouched, sets *executor to NULL and names the offending value, the
 * sentence saying whether the device refuses it too or gives no determined
 * result for it.  What the device accepts that the library once refused
 * is tests/core/test_unpermute_grad_domain.c's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <moeperm/moeperm.h>

enum { N = 4, K = 2, H = 3, R = 6, SLOTS = N * K };

typedef struct fixture {
    uint16_t tokens[SLOTS * H], grad[N * H], probs[SLOTS];
    int32_t indices[SLOTS];
    uint16_t tokens_grad[SLOTS * H], probs_grad[SLOTS];
    int64_t tokens_dims[2], grad_dims[2], index_dims[1], probs_dims[3], tokens_grad_dims[2],
        probs_grad_dims[2];
    uint64_t tokens_ndim, grad_ndim, index_ndim, probs_ndim, tokens_grad_ndim, probs_grad_ndim;
    moeperm_dtype tokens_dtype, grad_dtype, index_dtype, probs_dtype, tokens_grad_dtype,
        probs_grad_dtype;
    bool with_probs, with_probs_grad, padded_mode;
    /* where the outputs' views point (default: their own buffers) */
    void *tokens_grad_data, *probs_grad_data;
    int64_t tokens_grad_strides[2];
    bool tokens_grad_strided;
} fixture;

static void fixture_init(fixture *f)
{
    memset(f, 0, sizeof *f);
    for (int i = 0; i < SLOTS * H; i++)
        f->tokens[i] = 0x3f80;
    for (int i = 0; i < N * H; i++)
        f->grad[i] = 0x4000;
    for (int i = 0; i < SLOTS; i++) {
        f->probs[i] = 0x3f00;
        f->indices[i] = SLOTS - 1 - i;
    }
    memset(f->tokens_grad, 0x5a, sizeof f->tokens_grad);
    memset(f->probs_grad, 0x5a, sizeof f->probs_grad);
    f->tokens_dims[0] = R, f->tokens_dims[1] = H;
    f->grad_dims[0] = N, f->grad_dims[1] = H;
    f->index_dims[0] = SLOTS;
    f->probs_dims[0] = N, f->probs_dims[1] = K;
    f->tokens_grad_dims[0] = R, f->tokens_grad_dims[1] = H;
    f->probs_grad_dims[0] = N, f->probs_grad_dims[1] = K;
    f->tokens_ndim = f->grad_ndim = f->probs_ndim = f->tokens_grad_ndim = f->probs_grad_ndim = 2;
    f->index_ndim = 1;
    f->tokens_dtype = f->grad_dtype = f->probs_dtype = f->tokens_grad_dtype = f->probs_grad_dtype =
        MOEPERM_BF16;
    f->index_dtype = MOEPERM_INT32;
    f->with_probs = f->with_probs_grad = true;
    f->tokens_grad_data = f->tokens_grad;
    f->probs_grad_data = f->probs_grad;
}

typedef struct views {
    moeperm_tensor *tokens, *grad, *indices, *probs, *tokens_grad, *probs_grad;
} views;

static views make_views(fixture *f)
{
    views v;
    v.tokens =
        moeperm_tensor_create(f->tokens_dims, f->tokens_ndim, f->tokens_dtype, NULL, 0, f->tokens);
    v.grad = moeperm_tensor_create(f->grad_dims, f->grad_ndim, f->grad_dtype, NULL, 0, f->grad);
    v.indices =
        moeperm_tensor_create(f->index_dims, f->index_ndim, f->index_dtype, NULL, 0, f->indices);
    v.probs = f->with_probs ? moeperm_tensor_create(f->probs_dims, f->probs_ndim, f->probs_dtype,
                                                    NULL, 0, f->probs)
                            : NULL;
    v.tokens_grad = moeperm_tensor_create(
        f->tokens_grad_dims, f->tokens_grad_ndim, f->tokens_grad_dtype,
        f->tokens_grad_strided ? f->tokens_grad_strides : NULL, 0, f->tokens_grad_data);
    v.probs_grad = f->with_probs_grad
                       ? moeperm_tensor_create(f->probs_grad_dims, f->probs_grad_ndim,
                                               f->probs_grad_dtype, NULL, 0, f->probs_grad_data)
                       : NULL;
    assert_non_null(v.tokens);
    assert_non_null(v.grad);
    assert_non_null(v.indices);
    assert_non_null(v.tokens_grad);
    return v;
}

static void free_views(views *v)
{
    moeperm_tensor_destroy(v->tokens);
    moeperm_tensor_destroy(v->grad);
    moeperm_tensor_destroy(v->indices);
    moeperm_tensor_destroy(v->probs);
    moeperm_tensor_destroy(v->tokens_grad);
    moeperm_tensor_destroy(v->probs_grad);
}

static void expect_untouched(const fixture *f)
{
    for (size_t i = 0; i < sizeof f->tokens_grad; i++)
        assert_int_equal(((const unsigned char *)f->tokens_grad)[i], 0x5a);
    for (size_t i = 0; i < sizeof f->probs_grad; i++)
        assert_int_equal(((const unsigned char *)f->probs_grad)[i], 0x5a);
}

static void expect_message(const char *message)
{
    if (!strstr(moeperm_last_error(), message))
        fail_msg("message \"%s\" does not contain \"%s\"", moeperm_last_error(), message);
}

static void expect_failure(fixture *f, moeperm_status want, const char *message)
{
    views v = make_views(f);
    uint64_t workspace = 77;
    moeperm_executor *plan = (moeperm_executor *)(uintptr_t)1;
    moeperm_status status = moeperm_token_unpermute_grad_get_workspace_size(
        v.tokens, v.grad, v.indices, v.probs, f->padded_mode, NULL, 0, v.tokens_grad, v.probs_grad,
        &workspace, &plan);
    if (status != want)
        fail_msg("status %d (%s), expected %d; message: %s", status, moeperm_status_name(status),
                 want, moeperm_last_error());
    assert_null(plan);
    expect_message(message);
    expect_untouched(f);
    free_views(&v);
}

static void test_fixture_is_accepted(void **state)
{
    (void)state;
    fixture f;
    fixture_init(&f);
    views v = make_views(&f);
    uint64_t workspace = 77;
    moeperm_executor *plan = NULL;
    int64_t restore[2] = {N, H};
    assert_int_equal(moeperm_token_unpermute_grad_get_workspace_size(
                         v.tokens, v.grad, v.indices, v.probs, false, restore, 2, v.tokens_grad,
                         v.probs_grad, &workspace, &plan),
                     MOEPERM_SUCCESS);
    assert_int_equal(workspace, 0);
    assert_int_equal(moeperm_token_unpermute_grad(NULL, 0, plan, NULL), MOEPERM_SUCCESS);
    /* every row below R is written: none keeps the fill */
    for (int i = 0; i < R * H; i++)
        assert_int_not_equal(f.tokens_grad[i], 0x5a5a);
    free_views(&v);
}

static void test_null_arguments_are_nullptr(void **state)
{
    (void)state;
    fixture f;
    fixture_init(&f);
    views v = make_views(&f);
    uint64_t workspace;
    moeperm_executor *plan = (moeperm_executor *)(uintptr_t)1;
    struct {
        int which;
        const char *message;
    } cases[] = {{0, "the device refuses permuted_tokens = NULL: it is a required tensor"},
                 {1, "the device refuses unpermuted_tokens_grad = NULL"},
                 {2, "the device refuses sorted_indices = NULL"},
                 {3, "the device refuses permuted_tokens_grad_out = NULL"},
                 {4, "the device refuses probs_grad_out = NULL"},
                 {5, "workspace_size is NULL"}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        int w = cases[c].which;
        plan = (moeperm_executor *)(uintptr_t)1;
        moeperm_status status = moeperm_token_unpermute_grad_get_workspace_size(
            w == 0 ? NULL : v.tokens, w == 1 ? NULL : v.grad, w == 2 ? NULL : v.indices, v.probs,
            false, NULL, 0, w == 3 ? NULL : v.tokens_grad, w == 4 ? NULL : v.probs_grad,
            w == 5 ? NULL : &workspace, &plan);
        assert_int_equal(status, MOEPERM_ERR_PARAM_NULLPTR);
        assert_null(plan);
        expect_message(cases[c].message);
    }
    assert_int_equal(moeperm_token_unpermute_grad_get_workspace_size(
                         v.tokens, v.grad, v.indices, v.probs, false, NULL, 0, v.tokens_grad,
                         v.probs_grad, &workspace, NULL),
                     MOEPERM_ERR_PARAM_NULLPTR);
    expect_message("executor is NULL");
    expect_untouched(&f);
    free_views(&v);
}

static void test_dtypes_are_checked(void **state)
{
    (void)state;
    fixture f;
    fixture_init(&f);
    f.tokens_dtype = MOEPERM_INT32;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                   "the device refuses permuted_tokens dtype 3 (int32): it takes FLOAT (0), "
                   "FLOAT16 (1) or BF16 (27)");
    fixture_init(&f);
    f.grad_dtype = MOEPERM_FLOAT16;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                   "the device refuses unpermuted_tokens_grad dtype 1 (float16): it must be "
                   "permuted_tokens's, 27 (bf16)");
    fixture_init(&f);
    f.tokens_grad_dtype = MOEPERM_FLOAT16;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                   "permuted_tokens_grad_out dtype 1 (float16): it must be permuted_tokens's");
    fixture_init(&f);
    f.index_dtype = MOEPERM_INT64;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                   "the device refuses sorted_indices dtype 9 (int64): it takes INT32 (3)");
    fixture_init(&f);
    f.probs_dtype = MOEPERM_INT8;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID, "probs dtype 2 (int8): it takes FLOAT (0)");
    fixture_init(&f);
    f.probs_grad_dtype = MOEPERM_FLOAT16;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                   "probs_grad_out dtype 1 (float16): it must be probs's, 27 (bf16)");
    /* without probs, probs_grad_out is never written, but its dtype is one
     * of the device's */
    fixture_init(&f);
    f.with_probs = false;
    f.probs_grad_dtype = MOEPERM_INT32;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                   "the device refuses probs_grad_out dtype 3 (int32): it takes FLOAT (0)");
}

static void test_probs_dtype_is_independent_of_the_tokens(void **state)
{
    (void)state;
    fixture f;
    fixture_init(&f);
    f.probs_dtype = f.probs_grad_dtype = MOEPERM_FLOAT16;
    views v = make_views(&f);
    uint64_t workspace;
    moeperm_executor *plan = NULL;
    assert_int_equal(moeperm_token_unpermute_grad_get_workspace_size(
                         v.tokens, v.grad, v.indices, v.probs, false, NULL, 0, v.tokens_grad,
                         v.probs_grad, &workspace, &plan),
                     MOEPERM_SUCCESS);
    moeperm_executor_destroy(plan);
    free_views(&v);
}

static void test_ranks_and_shapes_are_checked(void **state)
{
    (void)state;
    fixture f;
    fixture_init(&f);
    f.tokens_ndim = 1;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                   "the device's result is undetermined: permuted_tokens has 1 dims; the kernel "
                   "reads it as 2 ([num_out_tokens, hidden_size])");
    fixture_init(&f);
    f.probs_ndim = 3;
    f.probs_dims[2] = 1;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID, "probs has 3 dims; the kernel reads it as 2");
    fixture_init(&f);
    f.tokens_dims[1] = H - 1;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                   "permuted_tokens has hidden_size 2 but unpermuted_tokens_grad has 3");
    fixture_init(&f);
    f.probs_dims[0] = N - 1;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                   "probs has 3 rows but unpermuted_tokens_grad has 4 (tokens_num)");
    fixture_init(&f);
    f.index_dims[0] = SLOTS - 1;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                   "the device's result is undetermined: sorted_indices has 7 entries, fewer "
                   "than tokens_num * top_k = 4 * 2: the kernel would read past its end");
    fixture_init(&f);
    f.tokens_grad_dims[0] = R - 1;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                   "permuted_tokens_grad_out shape is [5, 3], expected [6, 3]");
    fixture_init(&f);
    f.probs_grad_dims[1] = 1;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                   "probs_grad_out shape is [4, 1], expected [4, 2]");
}

static void test_top_k_above_512_is_invalid(void **state)
{
    (void)state;
    static uint16_t probs[1 * 513], probs_grad[1 * 513], grad[1 * 2];
    static int32_t indices[513];
    for (int i = 0; i < 513; i++)
        indices[i] = i;
    int64_t tdims[2] = {513, 2}, gdims[2] = {1, 2}, idims[1] = {513}, pdims[2] = {1, 513};
    static uint16_t tokens[513 * 2], tokens_grad[513 * 2];
    memset(tokens_grad, 0x5a, sizeof tokens_grad);
    moeperm_tensor *t = moeperm_tensor_create(tdims, 2, MOEPERM_BF16, NULL, 0, tokens);
    moeperm_tensor *g = moeperm_tensor_create(gdims, 2, MOEPERM_BF16, NULL, 0, grad);
    moeperm_tensor *ix = moeperm_tensor_create(idims, 1, MOEPERM_INT32, NULL, 0, indices);
    moeperm_tensor *p = moeperm_tensor_create(pdims, 2, MOEPERM_BF16, NULL, 0, probs);
    moeperm_tensor *tg = moeperm_tensor_create(tdims, 2, MOEPERM_BF16, NULL, 0, tokens_grad);
    moeperm_tensor *pg = moeperm_tensor_create(pdims, 2, MOEPERM_BF16, NULL, 0, probs_grad);
    uint64_t workspace;
    moeperm_executor *plan;
    assert_int_equal(moeperm_token_unpermute_grad_get_workspace_size(t, g, ix, p, false, NULL, 0,
                                                                     tg, pg, &workspace, &plan),
                     MOEPERM_ERR_INNER_TILING_ERROR);
    expect_message("the device refuses top_k = 513 (the columns of probs): its tiling takes at "
                   "most 512");
    for (size_t i = 0; i < sizeof tokens_grad / sizeof *tokens_grad; i++)
        assert_int_equal(tokens_grad[i], 0x5a5a);
    moeperm_tensor_destroy(t);
    moeperm_tensor_destroy(g);
    moeperm_tensor_destroy(ix);
    moeperm_tensor_destroy(p);
    moeperm_tensor_destroy(tg);
    moeperm_tensor_destroy(pg);
}

static void test_without_probs_fewer_entries_than_tokens_are_invalid(void **state)
{
    (void)state;
    fixture f;
    fixture_init(&f);
    f.with_probs = f.with_probs_grad = false;
    f.index_dims[0] = N - 1; /* K = 1: one entry per token */
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                   "sorted_indices has 3 entries, fewer than tokens_num * top_k = 4 * 1");
}

/* A negative index addresses outside the tensors; two slots naming one
 * row below R write it from two cores in no fixed order. */
static void test_negative_and_twice_written_rows_are_named(void **state)
{
    (void)state;
    fixture f;
    fixture_init(&f);
    f.indices[5] = -1;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                   "the device's result is undetermined: sorted_indices[5] = -1 is negative: "
                   "the kernel would address row -1 of permuted_tokens_grad_out, outside the "
                   "tensor");
    fixture_init(&f);
    f.indices[6] = f.indices[2]; /* = 5, below R = 6 */
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                   "the device's result is undetermined: sorted_indices[2] = 5 and "
                   "sorted_indices[6] = 5 both name row 5 of permuted_tokens_grad_out, below "
                   "num_out_tokens = 6: the kernel writes that row once per slot, from "
                   "whichever cores hold the two tokens, in no fixed order");
    /* the first repeat in slot order is named, with its first use */
    fixture_init(&f);
    f.indices[4] = 1; /* row 1 at slots 4 and 6 */
    f.indices[7] = 2; /* row 2 at slots 5 and 7, a later repeat */
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                   "sorted_indices[4] = 1 and sorted_indices[6] = 1 both name row 1");
}

/* First phase without probs on n tokens (H = 1, R rows), the n indices
 * read with the given stride from `storage`; returns the status, the
 * message left in moeperm_last_error(). */
static moeperm_status plan_indices(const int32_t *storage, int64_t n, int64_t stride, int64_t rows)
{
    static uint16_t tokens[64], grad[64], tokens_grad[64];
    int64_t td[2] = {rows, 1}, gd[2] = {n, 1}, id[1] = {n}, is[1] = {stride};
    moeperm_tensor *t = moeperm_tensor_create(td, 2, MOEPERM_BF16, NULL, 0, tokens);
    moeperm_tensor *g = moeperm_tensor_create(gd, 2, MOEPERM_BF16, NULL, 0, grad);
    moeperm_tensor *ix = moeperm_tensor_create(id, 1, MOEPERM_INT32, is, 0, (void *)storage);
    moeperm_tensor *tg = moeperm_tensor_create(td, 2, MOEPERM_BF16, NULL, 0, tokens_grad);
    assert_true(t && g && ix && tg);
    uint64_t workspace;
    moeperm_executor *plan = NULL;
    moeperm_status status = moeperm_token_unpermute_grad_get_workspace_size(
        t, g, ix, NULL, false, NULL, 0, tg, NULL, &workspace, &plan);
    moeperm_executor_destroy(plan);
    moeperm_tensor_destroy(t);
    moeperm_tensor_destroy(g);
    moeperm_tensor_destroy(ix);
    moeperm_tensor_destroy(tg);
    return status;
}

/* The row check walks several stretches of the indices side by side:
 * whatever the count, the stride and where the repeat sits, distinct rows
 * with dropped slots repeating freely pass, and a repeat below R is named
 * with its first use. */
static void test_a_row_named_twice_is_found_at_every_count_and_position(void **state)
{
    (void)state;
    static int32_t storage[3 * 64];
    char want[96];
    for (int64_t stride = 1; stride <= 3; stride += 2)
        for (int64_t n = 2; n <= 41; n++) {
            int64_t rows = n + 3;
            uint64_t seed = (uint64_t)(n * 13 + stride);
            /* distinct rows below R, every third slot dropped (all at R + 5) */
            for (int64_t i = 0; i < n; i++)
                storage[i * stride] = i % 3 == 2 ? (int32_t)(rows + 5) : (int32_t)(rows - 1 - i);
            for (int64_t i = n - 1; i > 0; i--) {
                seed = seed * 6364136223846793005u + 1442695040888963407u;
                int64_t j = (int64_t)((seed >> 33) % (uint64_t)(i + 1));
                int32_t swap = storage[i * stride];
                storage[i * stride] = storage[j * stride];
                storage[j * stride] = swap;
            }
            if (plan_indices(storage, n, stride, rows) != MOEPERM_SUCCESS)
                fail_msg("n %lld stride %lld: refused: %s", (long long)n, (long long)stride,
                         moeperm_last_error());
            for (int64_t p = 1; p < n; p++) {
                int64_t q = 0; /* the first slot before p that names a row */
                while (q < p && storage[q * stride] >= rows)
                    q++;
                if (q == p)
                    continue; /* only dropped slots before p */
                int32_t kept = storage[p * stride];
                storage[p * stride] = storage[q * stride];
                assert_int_equal(plan_indices(storage, n, stride, rows),
                                 MOEPERM_ERR_PARAM_INVALID);
                snprintf(want, sizeof want, "sorted_indices[%lld] = %d and sorted_indices[%lld]",
                         (long long)q, storage[q * stride], (long long)p);
                if (!strstr(moeperm_last_error(), want))
                    fail_msg("n %lld stride %lld: \"%s\", expected \"%s\"", (long long)n,
                             (long long)stride, moeperm_last_error(), want);
                storage[p * stride] = kept;
            }
        }
}

static void test_overlapping_outputs_are_invalid(void **state)
{
    (void)state;
    fixture f;
    fixture_init(&f);
    f.tokens_grad_data = f.tokens;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                   "permuted_tokens_grad_out overlaps permuted_tokens in memory");
    fixture_init(&f);
    f.probs_grad_data = f.probs;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID, "probs_grad_out overlaps probs in memory");
    fixture_init(&f);
    f.probs_grad_data = f.grad;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                   "probs_grad_out overlaps unpermuted_tokens_grad in memory");
    fixture_init(&f);
    f.probs_grad_data = f.tokens_grad + 4;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                   "permuted_tokens_grad_out overlaps probs_grad_out in memory");
    fixture_init(&f);
    f.tokens_grad_data = f.indices;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                   "permuted_tokens_grad_out overlaps sorted_indices in memory");
    fixture_init(&f);
    f.tokens_grad_strided = true;
    f.tokens_grad_strides[0] = 1, f.tokens_grad_strides[1] = 1;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                   "permuted_tokens_grad_out strides [1, 1] make distinct elements share memory");
}

static void test_null_data_under_elements_is_nullptr(void **state)
{
    (void)state;
    fixture f;
    fixture_init(&f);
    f.probs_grad_data = NULL;
    expect_failure(&f, MOEPERM_ERR_PARAM_NULLPTR,
                   "probs_grad_out with 8 elements and a NULL data pointer");
}

static moeperm_executor *plan_fixture(fixture *f)
{
    views v = make_views(f);
    uint64_t workspace;
    moeperm_executor *plan = NULL;
    assert_int_equal(moeperm_token_unpermute_grad_get_workspace_size(
                         v.tokens, v.grad, v.indices, v.probs, false, NULL, 0, v.tokens_grad,
                         v.probs_grad, &workspace, &plan),
                     MOEPERM_SUCCESS);
    free_views(&v);
    return plan;
}

static void test_set_chip_refuses_bad_values_and_other_operators(void **state)
{
    (void)state;
    fixture f;
    fixture_init(&f);
    moeperm_executor *plan = plan_fixture(&f);
    moeperm_chip chip = {MOEPERM_CHIP_MIN_UB_BYTES - 1, 48};
    assert_int_equal(moeperm_executor_set_chip(plan, &chip), MOEPERM_ERR_PARAM_INVALID);
    expect_message("chip ub_bytes = 32767 is outside [32768, 16777216]");
    chip = (moeperm_chip){MOEPERM_CHIP_MAX_UB_BYTES + 1, 48};
    assert_int_equal(moeperm_executor_set_chip(plan, &chip), MOEPERM_ERR_PARAM_INVALID);
    expect_message("chip ub_bytes = 16777217 is outside");
    chip = (moeperm_chip){196352, 0};
    assert_int_equal(moeperm_executor_set_chip(plan, &chip), MOEPERM_ERR_PARAM_INVALID);
    expect_message("chip vector_cores = 0 is outside [1, 4096]");
    chip = (moeperm_chip){196352, MOEPERM_CHIP_MAX_VECTOR_CORES + 1};
    assert_int_equal(moeperm_executor_set_chip(plan, &chip), MOEPERM_ERR_PARAM_INVALID);
    expect_message("chip vector_cores = 4097 is outside");
    assert_int_equal(moeperm_executor_set_chip(plan, NULL), MOEPERM_ERR_PARAM_NULLPTR);
    expect_message("chip is NULL");
    assert_int_equal(moeperm_executor_set_chip(NULL, &chip), MOEPERM_ERR_PARAM_NULLPTR);
    /* the plan survived every refusal and still runs */
    chip = (moeperm_chip){261888, 64};
    assert_int_equal(moeperm_executor_set_chip(plan, &chip), MOEPERM_SUCCESS);
    assert_int_equal(moeperm_token_unpermute_grad(NULL, 0, plan, NULL), MOEPERM_SUCCESS);

    /* a MoeTokenPermuteGrad plan has no chip */
    uint16_t grad[4 * 2] = {0}, out[2 * 2];
    int32_t indices[4] = {0, 1, 2, 3};
    int64_t gdims[2] = {4, 2}, idims[1] = {4}, odims[2] = {2, 2};
    moeperm_tensor *g = moeperm_tensor_create(gdims, 2, MOEPERM_BF16, NULL, 0, grad);
    moeperm_tensor *ix = moeperm_tensor_create(idims, 1, MOEPERM_INT32, NULL, 0, indices);
    moeperm_tensor *o = moeperm_tensor_create(odims, 2, MOEPERM_BF16, NULL, 0, out);
    uint64_t workspace;
    moeperm_executor *other = NULL;
    assert_int_equal(
        moeperm_token_permute_grad_get_workspace_size(g, ix, 2, false, o, &workspace, &other),
        MOEPERM_SUCCESS);
    chip = (moeperm_chip){196352, 48};
    assert_int_equal(moeperm_executor_set_chip(other, &chip), MOEPERM_ERR_PARAM_INVALID);
    expect_message("planned by MoeTokenPermuteGrad's first phase, whose arithmetic does not "
                   "depend on the chip");
    /* and the second phase refuses it, freeing it, outputs untouched */
    fixture_init(&f);
    assert_int_equal(moeperm_token_unpermute_grad(NULL, 0, other, NULL), MOEPERM_ERR_PARAM_INVALID);
    expect_message("the executor was planned by MoeTokenPermuteGrad's first phase, not "
                   "MoeTokenUnpermuteGrad's");
    moeperm_tensor_destroy(g);
    moeperm_tensor_destroy(ix);
    moeperm_tensor_destroy(o);
}

static void test_second_phase_refuses_a_stream_and_a_null_executor(void **state)
{
    (void)state;
    fixture f;
    fixture_init(&f);
    moeperm_executor *plan = plan_fixture(&f);
    int stream;
    assert_int_equal(moeperm_token_unpermute_grad(NULL, 0, plan, &stream),
                     MOEPERM_ERR_PARAM_INVALID);
    expect_message("stream must be NULL on the CPU backend");
    expect_untouched(&f);
    assert_int_equal(moeperm_token_unpermute_grad(NULL, 0, NULL, NULL), MOEPERM_ERR_PARAM_NULLPTR);
    /* the permute-grad second phase refuses an unpermute-grad plan */
    plan = plan_fixture(&f);
    assert_int_equal(moeperm_token_permute_grad(NULL, 0, plan, NULL), MOEPERM_ERR_PARAM_INVALID);
    expect_untouched(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_is_accepted),
        cmocka_unit_test(test_null_arguments_are_nullptr),
        cmocka_unit_test(test_dtypes_are_checked),
        cmocka_unit_test(test_probs_dtype_is_independent_of_the_tokens),
        cmocka_unit_test(test_ranks_and_shapes_are_checked),
        cmocka_unit_test(test_top_k_above_512_is_invalid),
        cmocka_unit_test(test_without_probs_fewer_entries_than_tokens_are_invalid),
        cmocka_unit_test(test_negative_and_twice_written_rows_are_named),
        cmocka_unit_test(test_a_row_named_twice_is_found_at_every_count_and_position),
        cmocka_unit_test(test_overlapping_outputs_are_invalid),
        cmocka_unit_test(test_null_data_under_elements_is_nullptr),
        cmocka_unit_test(test_set_chip_refuses_bad_values_and_other_operators),
        cmocka_unit_test(test_second_phase_refuses_a_stream_and_a_null_executor),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
