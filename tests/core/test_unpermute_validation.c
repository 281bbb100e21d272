/*
 * Every refusal of MoeTokenUnpermute: each returns its aclnn code, sets
 * *executor to NULL, names the offending value in moeperm_last_error() and
 * leaves the output's memory as it was; and its second phase refuses a
 * stream and a plan of another operator.  restore_shape without padded
 * mode is checked to pass; what the device accepts that the library once
 * refused is tests/core/test_unpermute_domain.c's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <moeperm/moeperm.h>

#include "expect.h"

enum { T = 4, K = 2, H = 3, N = T * K };

/* ---- MoeTokenUnpermute -------------------------------------------------- */

typedef struct unpermute_fixture {
    uint16_t x[N * H];
    int32_t indices[N];
    float probs[N];
    uint16_t out[T * H];
    int64_t x_dims[2], indices_dims[1], probs_dims[2], out_dims[2];
    uint64_t x_ndim, indices_ndim, probs_ndim, out_ndim;
    moeperm_dtype x_dtype, indices_dtype, probs_dtype, out_dtype;
    int64_t out_strides[2];
    bool out_strided, no_probs;
    void *x_data, *indices_data, *probs_data, *out_data;
    const int64_t *restore_shape;
    uint64_t restore_shape_len;
    bool padded_mode;
} unpermute_fixture;

static void unpermute_init(unpermute_fixture *f)
{
    memset(f, 0, sizeof *f);
    for (int i = 0; i < N * H; i++)
        f->x[i] = 0x3f80;
    for (int i = 0; i < N; i++) {
        f->indices[i] = N - 1 - i;
        f->probs[i] = 0.5f;
    }
    memset(f->out, EXPECT_FILL, sizeof f->out);
    f->x_dims[0] = N, f->x_dims[1] = H;
    f->indices_dims[0] = N;
    f->probs_dims[0] = T, f->probs_dims[1] = K;
    f->out_dims[0] = T, f->out_dims[1] = H;
    f->x_ndim = 2, f->indices_ndim = 1, f->probs_ndim = 2, f->out_ndim = 2;
    f->x_dtype = f->out_dtype = MOEPERM_BF16;
    f->indices_dtype = MOEPERM_INT32;
    f->probs_dtype = MOEPERM_FLOAT;
    f->x_data = f->x, f->indices_data = f->indices, f->probs_data = f->probs,
    f->out_data = f->out;
}

static moeperm_status unpermute_plan(unpermute_fixture *f, moeperm_executor **plan)
{
    moeperm_tensor *x =
        moeperm_tensor_create(f->x_dims, f->x_ndim, f->x_dtype, NULL, 0, f->x_data);
    moeperm_tensor *ix = moeperm_tensor_create(f->indices_dims, f->indices_ndim,
                                               f->indices_dtype, NULL, 0, f->indices_data);
    moeperm_tensor *p = moeperm_tensor_create(f->probs_dims, f->probs_ndim, f->probs_dtype, NULL,
                                              0, f->probs_data);
    moeperm_tensor *o =
        moeperm_tensor_create(f->out_dims, f->out_ndim, f->out_dtype,
                              f->out_strided ? f->out_strides : NULL, 0, f->out_data);
    assert_true(x && ix && p && o);
    uint64_t workspace = 77;
    moeperm_status status = moeperm_token_unpermute_get_workspace_size(
        x, ix, f->no_probs ? NULL : p, f->padded_mode, f->restore_shape, f->restore_shape_len, o,
        &workspace, plan);
    moeperm_tensor_destroy(x);
    moeperm_tensor_destroy(ix);
    moeperm_tensor_destroy(p);
    moeperm_tensor_destroy(o);
    return status;
}

static void expect_unpermute_failure(unpermute_fixture *f, moeperm_status want,
                                     const char *message)
{
    moeperm_executor *plan = (moeperm_executor *)(uintptr_t)1;
    moeperm_status status = unpermute_plan(f, &plan);
    expect_refusal(status, want, plan, message);
    expect_untouched(f->out, sizeof f->out, "out");
}

static void test_unpermute_null_arguments_are_nullptr(void **state)
{
    (void)state;
    unpermute_fixture f;
    unpermute_init(&f);
    int64_t xd[2] = {N, H}, id[1] = {N}, od[2] = {T, H};
    moeperm_tensor *x = moeperm_tensor_create(xd, 2, MOEPERM_BF16, NULL, 0, f.x);
    moeperm_tensor *ix = moeperm_tensor_create(id, 1, MOEPERM_INT32, NULL, 0, f.indices);
    moeperm_tensor *o = moeperm_tensor_create(od, 2, MOEPERM_BF16, NULL, 0, f.out);
    uint64_t ws;
    moeperm_executor *plan;
    const int64_t shape[2] = {T, H};
    struct {
        const moeperm_tensor *x, *ix;
        moeperm_tensor *o;
        const int64_t *shape;
        uint64_t shape_len;
        uint64_t *ws;
        moeperm_executor **plan;
        const char *message;
    } cases[] = {
        {NULL, ix, o, NULL, 0, &ws, &plan,
         "the device refuses permuted_tokens = NULL: it is a required tensor"},
        {x, NULL, o, NULL, 0, &ws, &plan,
         "the device refuses sorted_indices = NULL: it is a required tensor"},
        {x, ix, NULL, NULL, 0, &ws, &plan, "the device refuses out = NULL: it is a required tensor"},
        {x, ix, o, shape, 2, NULL, &plan, "workspace_size is NULL"},
        {x, ix, o, shape, 2, &ws, NULL, "executor is NULL"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(moeperm_token_unpermute_get_workspace_size(
                             cases[i].x, cases[i].ix, NULL, false, cases[i].shape,
                             cases[i].shape_len, cases[i].o, cases[i].ws, cases[i].plan),
                         MOEPERM_ERR_PARAM_NULLPTR);
        assert_string_equal(moeperm_last_error(), cases[i].message);
    }
    moeperm_tensor_destroy(x);
    moeperm_tensor_destroy(ix);
    moeperm_tensor_destroy(o);
    assert_int_equal(moeperm_token_unpermute(NULL, 0, NULL, NULL), MOEPERM_ERR_PARAM_NULLPTR);
    expect_untouched(f.out, sizeof f.out, "out");

    const char *names[4] = {"permuted_tokens with 24 elements", "sorted_indices with 8 elements",
                            "probs with 8 elements", "out with 12 elements"};
    for (int which = 0; which < 4; which++) {
        unpermute_init(&f);
        void **data[4] = {&f.x_data, &f.indices_data, &f.probs_data, &f.out_data};
        *data[which] = NULL;
        expect_unpermute_failure(&f, MOEPERM_ERR_PARAM_NULLPTR, names[which]);
    }
}

static void test_unpermute_dtypes_and_ranks_are_invalid(void **state)
{
    (void)state;
    unpermute_fixture f;
    unpermute_init(&f);
    f.x_dtype = f.out_dtype = MOEPERM_INT8;
    expect_unpermute_failure(&f, MOEPERM_ERR_PARAM_INVALID, "permuted_tokens dtype 2 (int8)");
    unpermute_init(&f);
    f.out_dtype = MOEPERM_FLOAT16;
    expect_unpermute_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                             "the device refuses out dtype 1 (float16): it must be "
                             "permuted_tokens's, 27");
    unpermute_init(&f);
    f.indices_dtype = MOEPERM_INT64;
    expect_unpermute_failure(&f, MOEPERM_ERR_PARAM_INVALID, "sorted_indices dtype 9 (int64)");
    unpermute_init(&f);
    f.probs_dtype = MOEPERM_INT32;
    expect_unpermute_failure(&f, MOEPERM_ERR_PARAM_INVALID, "probs dtype 3 (int32)");
    unpermute_init(&f);
    f.probs_ndim = 1, f.probs_dims[0] = N;
    expect_unpermute_failure(&f, MOEPERM_ERR_PARAM_INVALID, "probs has 1 dims");
    unpermute_init(&f);
    f.x_ndim = 1;
    expect_unpermute_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                             "the device's result is undetermined: permuted_tokens has 1 dims");
    unpermute_init(&f);
    f.indices_ndim = 2, f.indices_dims[0] = N;
    expect_unpermute_failure(&f, MOEPERM_ERR_PARAM_INVALID, "sorted_indices has 2 dims");
}

static void test_unpermute_shapes_are_invalid(void **state)
{
    (void)state;
    unpermute_fixture f;
    unpermute_init(&f);
    f.probs_dims[1] = 513, f.probs_data = NULL;
    expect_unpermute_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                             "the device's result is undetermined: probs has 513 columns "
                             "(top_k), above 512");
    unpermute_init(&f);
    f.probs_dims[1] = 0;
    expect_unpermute_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                             "the device's result is undetermined: probs has 0 columns (top_k = "
                             "0): the kernel still reads slot 0 of each token");
    /* tokens_num is probs' rows: out must follow */
    unpermute_init(&f);
    f.probs_dims[0] = T + 1;
    expect_unpermute_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                             "out shape is [4, 3], expected [5, 3] (tokens_num from probs");
    unpermute_init(&f);
    f.out_dims[1] = H + 1;
    expect_unpermute_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                             "the device's result is undetermined: out shape is [4, 4], expected "
                             "[4, 3]");
    unpermute_init(&f);
    f.indices_dims[0] = N - 1;
    expect_unpermute_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                             "sorted_indices has 7 entries, fewer than tokens_num * top_k = 4 * 2: "
                             "the kernel would read past its end");
    /* without probs K = 1 and tokens_num = the 8 indices: out has 4 rows */
    unpermute_init(&f);
    f.no_probs = true;
    expect_unpermute_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                             "out shape is [4, 3], expected [8, 3] (tokens_num = the entries of "
                             "sorted_indices without probs");
}

static void test_unpermute_negative_indices_are_named(void **state)
{
    (void)state;
    unpermute_fixture f;
    unpermute_init(&f);
    f.indices[3] = -1;
    expect_unpermute_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                             "the device's result is undetermined: sorted_indices[3] = -1 is "
                             "negative: the kernel would address row -1 of permuted_tokens, outside "
                             "the tensor");
    unpermute_init(&f);
    f.indices[6] = INT32_MIN;
    f.indices[7] = -3;
    expect_unpermute_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                             "sorted_indices[6] = -2147483648 is negative");
}

static void test_unpermute_overlapping_out_is_invalid(void **state)
{
    (void)state;
    unpermute_fixture f;
    unpermute_init(&f);
    f.out_data = f.x;
    expect_unpermute_failure(&f, MOEPERM_ERR_PARAM_INVALID, "out overlaps permuted_tokens");
    unpermute_init(&f);
    f.out_data = f.probs;
    expect_unpermute_failure(&f, MOEPERM_ERR_PARAM_INVALID, "out overlaps probs");
    unpermute_init(&f);
    f.out_data = f.indices;
    expect_unpermute_failure(&f, MOEPERM_ERR_PARAM_INVALID, "out overlaps sorted_indices");
    unpermute_init(&f);
    f.out_strided = true, f.out_strides[0] = 0, f.out_strides[1] = 1;
    expect_unpermute_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                             "the device's result is undetermined: out strides [0, 1] make "
                             "distinct elements share memory");
}

static void test_unpermute_ignores_restore_shape_without_padded_mode(void **state)
{
    (void)state;
    unpermute_fixture f, g;
    unpermute_init(&f);
    unpermute_init(&g);
    const int64_t nonsense[3] = {-1, 0, 12345};
    f.restore_shape = nonsense, f.restore_shape_len = 3;
    moeperm_executor *plan;
    assert_int_equal(unpermute_plan(&f, &plan), MOEPERM_SUCCESS);
    assert_int_equal(moeperm_token_unpermute(NULL, 0, plan, NULL), MOEPERM_SUCCESS);
    assert_int_equal(unpermute_plan(&g, &plan), MOEPERM_SUCCESS);
    assert_int_equal(moeperm_token_unpermute(NULL, 0, plan, NULL), MOEPERM_SUCCESS);
    assert_memory_equal(f.out, g.out, sizeof f.out);
    /* 1 * 0.5 + 1 * 0.5 = 1 */
    assert_int_equal(f.out[0], 0x3f80);
}

/* ---- the second phase ---------------------------------------------------- */

/* An unpermute plan run with a stream and by MoeTokenPermute, and a
 * MoeTokenPermuteGrad plan run by MoeTokenUnpermute: refused, freed,
 * outputs untouched. */
static void test_second_phase_refuses_streams_and_other_operators_plans(void **state)
{
    (void)state;
    unpermute_fixture u;
    moeperm_executor *plan;
    int stream_object;

    unpermute_init(&u);
    assert_int_equal(unpermute_plan(&u, &plan), MOEPERM_SUCCESS);
    assert_int_equal(moeperm_token_unpermute(NULL, 0, plan, &stream_object),
                     MOEPERM_ERR_PARAM_INVALID);
    assert_non_null(strstr(moeperm_last_error(), "stream must be NULL"));
    assert_int_equal(unpermute_plan(&u, &plan), MOEPERM_SUCCESS);
    assert_int_equal(moeperm_token_permute(NULL, 0, plan, NULL), MOEPERM_ERR_PARAM_INVALID);
    assert_non_null(strstr(moeperm_last_error(),
                           "planned by MoeTokenUnpermute's first phase, not MoeTokenPermute's"));
    expect_untouched(u.out, sizeof u.out, "out");

    int64_t gd[2] = {N, H}, id[1] = {N}, od[2] = {T, H};
    moeperm_tensor *g = moeperm_tensor_create(gd, 2, MOEPERM_BF16, NULL, 0, u.x);
    moeperm_tensor *ix = moeperm_tensor_create(id, 1, MOEPERM_INT32, NULL, 0, u.indices);
    moeperm_tensor *o = moeperm_tensor_create(od, 2, MOEPERM_BF16, NULL, 0, u.out);
    uint64_t ws;
    assert_int_equal(moeperm_token_permute_grad_get_workspace_size(g, ix, K, false, o, &ws, &plan),
                     MOEPERM_SUCCESS);
    assert_int_equal(moeperm_token_unpermute(NULL, 0, plan, NULL), MOEPERM_ERR_PARAM_INVALID);
    assert_non_null(strstr(moeperm_last_error(),
                           "planned by MoeTokenPermuteGrad's first phase, not MoeTokenUnpermute's"));
    expect_untouched(u.out, sizeof u.out, "out");
    moeperm_tensor_destroy(g);
    moeperm_tensor_destroy(ix);
    moeperm_tensor_destroy(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unpermute_null_arguments_are_nullptr),
        cmocka_unit_test(test_unpermute_dtypes_and_ranks_are_invalid),
        cmocka_unit_test(test_unpermute_shapes_are_invalid),
        cmocka_unit_test(test_unpermute_negative_indices_are_named),
        cmocka_unit_test(test_unpermute_overlapping_out_is_invalid),
        cmocka_unit_test(test_unpermute_ignores_restore_shape_without_padded_mode),
        cmocka_unit_test(test_second_phase_refuses_streams_and_other_operators_plans),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
