/*
 * Every refusal of MoeTokenPermute: each returns its aclnn code, sets
 * *executor to NULL, names the offending value in moeperm_last_error() and
 * leaves the outputs' memory as it was; and its second phase refuses a
 * stream and a plan of another operator.  The accepted edges (sentinel
 * ids, clamped num_out_tokens, empty inputs) are checked to pass.
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

/* ---- MoeTokenPermute ---------------------------------------------------- */

typedef struct permute_fixture {
    uint16_t tokens[T * H];
    int64_t ids[N]; /* int32 ids use the first half as int32_t[N] when asked */
    uint16_t out[N * H];
    int32_t sorted[N];
    int64_t tokens_dims[3], ids_dims[3], out_dims[3], sorted_dims[1];
    uint64_t tokens_ndim, ids_ndim, out_ndim, sorted_ndim;
    moeperm_dtype tokens_dtype, ids_dtype, out_dtype, sorted_dtype;
    int64_t out_strides[2], sorted_strides[1];
    bool out_strided, sorted_strided;
    void *tokens_data, *ids_data, *out_data, *sorted_data;
    int64_t num_out_tokens;
    bool padded_mode;
} permute_fixture;

static void permute_init(permute_fixture *f)
{
    memset(f, 0, sizeof *f);
    for (int i = 0; i < T * H; i++)
        f->tokens[i] = 0x3f80;
    for (int i = 0; i < N; i++)
        ((int32_t *)f->ids)[i] = i % 3;
    memset(f->out, EXPECT_FILL, sizeof f->out);
    memset(f->sorted, EXPECT_FILL, sizeof f->sorted);
    f->tokens_dims[0] = T, f->tokens_dims[1] = H;
    f->ids_dims[0] = T, f->ids_dims[1] = K;
    f->out_dims[0] = N, f->out_dims[1] = H;
    f->sorted_dims[0] = N;
    f->tokens_ndim = 2, f->ids_ndim = 2, f->out_ndim = 2, f->sorted_ndim = 1;
    f->tokens_dtype = f->out_dtype = MOEPERM_BF16;
    f->ids_dtype = f->sorted_dtype = MOEPERM_INT32;
    f->tokens_data = f->tokens, f->ids_data = f->ids, f->out_data = f->out,
    f->sorted_data = f->sorted;
}

static void set_id(permute_fixture *f, int i, int64_t id)
{
    if (f->ids_dtype == MOEPERM_INT64)
        f->ids[i] = id;
    else
        ((int32_t *)f->ids)[i] = (int32_t)id;
}

static moeperm_status permute_plan(permute_fixture *f, moeperm_executor **plan)
{
    moeperm_tensor *t = moeperm_tensor_create(f->tokens_dims, f->tokens_ndim, f->tokens_dtype,
                                              NULL, 0, f->tokens_data);
    moeperm_tensor *ix =
        moeperm_tensor_create(f->ids_dims, f->ids_ndim, f->ids_dtype, NULL, 0, f->ids_data);
    moeperm_tensor *o =
        moeperm_tensor_create(f->out_dims, f->out_ndim, f->out_dtype,
                              f->out_strided ? f->out_strides : NULL, 0, f->out_data);
    moeperm_tensor *s =
        moeperm_tensor_create(f->sorted_dims, f->sorted_ndim, f->sorted_dtype,
                              f->sorted_strided ? f->sorted_strides : NULL, 0, f->sorted_data);
    assert_true(t && ix && o && s);
    uint64_t workspace = 77;
    moeperm_status status = moeperm_token_permute_get_workspace_size(
        t, ix, f->num_out_tokens, f->padded_mode, o, s, &workspace, plan);
    moeperm_tensor_destroy(t);
    moeperm_tensor_destroy(ix);
    moeperm_tensor_destroy(o);
    moeperm_tensor_destroy(s);
    return status;
}

static void expect_permute_failure(permute_fixture *f, moeperm_status want, const char *message)
{
    moeperm_executor *plan = (moeperm_executor *)(uintptr_t)1;
    moeperm_status status = permute_plan(f, &plan);
    expect_refusal(status, want, plan, message);
    expect_untouched(f->out, sizeof f->out, "permute_tokens_out");
    expect_untouched(f->sorted, sizeof f->sorted, "sorted_indices_out");
}

static void test_permute_null_arguments_are_nullptr(void **state)
{
    (void)state;
    permute_fixture f;
    permute_init(&f);
    int64_t td[2] = {T, H}, id[2] = {T, K}, od[2] = {N, H}, sd[1] = {N};
    moeperm_tensor *t = moeperm_tensor_create(td, 2, MOEPERM_BF16, NULL, 0, f.tokens);
    moeperm_tensor *ix = moeperm_tensor_create(id, 2, MOEPERM_INT32, NULL, 0, f.ids);
    moeperm_tensor *o = moeperm_tensor_create(od, 2, MOEPERM_BF16, NULL, 0, f.out);
    moeperm_tensor *s = moeperm_tensor_create(sd, 1, MOEPERM_INT32, NULL, 0, f.sorted);
    uint64_t ws;
    moeperm_executor *plan;
    struct {
        const moeperm_tensor *t, *ix;
        moeperm_tensor *o, *s;
        uint64_t *ws;
        moeperm_executor **plan;
        const char *message;
    } cases[] = {
        {NULL, ix, o, s, &ws, &plan, "the device refuses tokens = NULL: it is a required tensor"},
        {t, NULL, o, s, &ws, &plan, "the device refuses indices = NULL: it is a required tensor"},
        {t, ix, NULL, s, &ws, &plan,
         "the device refuses permute_tokens_out = NULL: it is a required tensor"},
        {t, ix, o, NULL, &ws, &plan,
         "the device refuses sorted_indices_out = NULL: it is a required tensor"},
        {t, ix, o, s, NULL, &plan, "workspace_size is NULL"},
        {t, ix, o, s, &ws, NULL, "executor is NULL"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(moeperm_token_permute_get_workspace_size(cases[i].t, cases[i].ix, 0,
                                                                  false, cases[i].o, cases[i].s,
                                                                  cases[i].ws, cases[i].plan),
                         MOEPERM_ERR_PARAM_NULLPTR);
        assert_string_equal(moeperm_last_error(), cases[i].message);
    }
    moeperm_tensor_destroy(t);
    moeperm_tensor_destroy(ix);
    moeperm_tensor_destroy(o);
    moeperm_tensor_destroy(s);
    assert_int_equal(moeperm_token_permute(NULL, 0, NULL, NULL), MOEPERM_ERR_PARAM_NULLPTR);
    expect_untouched(f.out, sizeof f.out, "permute_tokens_out");

    const char *names[4] = {"tokens with 12 elements", "indices with 8 elements",
                            "permute_tokens_out with 24 elements",
                            "sorted_indices_out with 8 elements"};
    for (int which = 0; which < 4; which++) {
        permute_init(&f);
        void **data[4] = {&f.tokens_data, &f.ids_data, &f.out_data, &f.sorted_data};
        *data[which] = NULL;
        expect_permute_failure(&f, MOEPERM_ERR_PARAM_NULLPTR, names[which]);
    }
}

/* The device refuses padded_mode and ranks in its tiling (561002), the
 * dtypes before (161002). */
static void test_permute_padded_mode_dtypes_and_ranks_are_invalid(void **state)
{
    (void)state;
    permute_fixture f;
    permute_init(&f);
    f.padded_mode = true;
    expect_permute_failure(&f, MOEPERM_ERR_INNER_TILING_ERROR,
                           "the device refuses padded_mode = true: its tiling supports only false");
    permute_init(&f);
    f.tokens_dtype = f.out_dtype = MOEPERM_INT32;
    expect_permute_failure(&f, MOEPERM_ERR_PARAM_INVALID, "tokens dtype 3 (int32)");
    permute_init(&f);
    f.out_dtype = MOEPERM_FLOAT16;
    expect_permute_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                           "the device refuses permute_tokens_out dtype 1 (float16): it must be "
                           "tokens's, 27");
    permute_init(&f);
    f.ids_dtype = MOEPERM_FLOAT;
    expect_permute_failure(&f, MOEPERM_ERR_PARAM_INVALID, "indices dtype 0 (float32)");
    permute_init(&f);
    f.sorted_dtype = MOEPERM_INT64;
    expect_permute_failure(&f, MOEPERM_ERR_PARAM_INVALID, "sorted_indices_out dtype 9 (int64)");
    permute_init(&f);
    f.tokens_ndim = 1;
    expect_permute_failure(&f, MOEPERM_ERR_INNER_TILING_ERROR,
                           "the device refuses tokens with 1 dims: it needs at least 2");
    permute_init(&f);
    f.ids_ndim = 3, f.ids_dims[2] = 1;
    expect_permute_failure(&f, MOEPERM_ERR_INNER_TILING_ERROR, "indices with 3 dims");
    permute_init(&f);
    f.out_ndim = 1;
    expect_permute_failure(&f, MOEPERM_ERR_INNER_TILING_ERROR,
                           "permute_tokens_out with 1 dims: its tiling wants at least 2");
    permute_init(&f);
    f.sorted_ndim = 2;
    expect_permute_failure(&f, MOEPERM_ERR_INNER_TILING_ERROR, "sorted_indices_out with 2 dims");
}

static void test_permute_shapes_and_limits_are_invalid(void **state)
{
    (void)state;
    permute_fixture f;
    permute_init(&f);
    f.ids_dims[0] = T - 1;
    expect_permute_failure(&f, MOEPERM_ERR_INNER_TILING_ERROR,
                           "the device refuses indices with 3 rows beside tokens with 4");
    /* top_k 0 with outputs that are not empty: sorted_indices_out is not
     * the N*K = 0 entries */
    permute_init(&f);
    f.ids_dims[1] = 0;
    expect_permute_failure(&f, MOEPERM_ERR_INNER_TILING_ERROR,
                           "sorted_indices_out with 8 entries: its tiling wants tokens_num * "
                           "top_k = 4 * 0 = 0");
    /* top_k 513 and N*K at the sort's limit: shapes alone, no data read */
    permute_init(&f);
    f.ids_dims[1] = 513, f.ids_data = NULL;
    expect_permute_failure(&f, MOEPERM_ERR_INNER_TILING_ERROR,
                           "indices with 513 columns (top_k): its tiling takes at most 512");
    permute_init(&f);
    f.tokens_dims[0] = f.ids_dims[0] = 32768, f.ids_dims[1] = 512;
    f.tokens_data = f.ids_data = NULL;
    expect_permute_failure(&f, MOEPERM_ERR_INNER_TILING_ERROR,
                           "tokens_num * top_k = 32768 * 512: its tiling takes fewer than "
                           "16777215 entries");
    permute_init(&f);
    f.tokens_dims[0] = f.ids_dims[0] = 16777215, f.ids_ndim = 1;
    f.tokens_data = f.ids_data = NULL;
    expect_permute_failure(&f, MOEPERM_ERR_INNER_TILING_ERROR,
                           "tokens_num * top_k = 16777215 * 1");

    /* num_out_tokens = -2 keeps 6 rows, not 8 */
    permute_init(&f);
    f.num_out_tokens = -2;
    expect_permute_failure(&f, MOEPERM_ERR_INNER_TILING_ERROR,
                           "permute_tokens_out with 8 rows: its tiling wants 6 (num_out_tokens = "
                           "-2 keeps 6 of the 8 rows)");
    permute_init(&f);
    f.num_out_tokens = 5;
    expect_permute_failure(&f, MOEPERM_ERR_INNER_TILING_ERROR, "its tiling wants 5");
    permute_init(&f);
    f.num_out_tokens = -9;
    expect_permute_failure(&f, MOEPERM_ERR_INNER_TILING_ERROR, "its tiling wants 0");
    permute_init(&f);
    f.out_dims[1] = H + 1;
    expect_permute_failure(&f, MOEPERM_ERR_INNER_TILING_ERROR,
                           "permute_tokens_out with rows of 4 elements: its tiling wants those of "
                           "tokens, 3 (hidden_size)");
    permute_init(&f);
    f.sorted_dims[0] = N - 1;
    expect_permute_failure(&f, MOEPERM_ERR_INNER_TILING_ERROR,
                           "sorted_indices_out with 7 entries: its tiling wants tokens_num * "
                           "top_k = 4 * 2 = 8");
}

static void test_permute_ids_outside_the_sorted_set_are_named(void **state)
{
    (void)state;
    permute_fixture f;
    permute_init(&f);
    set_id(&f, 5, 16777215);
    expect_permute_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                           "indices[2][1] = 16777215 is outside [0, 16777214] and is not the "
                           "int32 minimum or maximum");
    permute_init(&f);
    set_id(&f, 0, -1);
    expect_permute_failure(&f, MOEPERM_ERR_PARAM_INVALID, "indices[0][0] = -1 is outside");
    permute_init(&f);
    set_id(&f, 1, INT32_MIN + 1);
    expect_permute_failure(&f, MOEPERM_ERR_PARAM_INVALID, "indices[0][1] = -2147483647");
    /* int64: the int32 sentinels are ordinary out-of-range ids there */
    permute_init(&f);
    f.ids_dtype = MOEPERM_INT64;
    for (int i = 0; i < N; i++)
        f.ids[i] = i % 3;
    set_id(&f, 7, INT32_MAX);
    expect_permute_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                           "indices[3][1] = 2147483647 is outside [0, 16777214] and is not the "
                           "int64 minimum or maximum");
    permute_init(&f);
    f.ids_dtype = MOEPERM_INT64;
    for (int i = 0; i < N; i++)
        f.ids[i] = 0;
    set_id(&f, 4, INT64_MAX - 1);
    expect_permute_failure(&f, MOEPERM_ERR_PARAM_INVALID, "indices[2][0] = 9223372036854775806");
    /* [N] indices name one position */
    permute_init(&f);
    f.ids_ndim = 1, f.out_dims[0] = T, f.sorted_dims[0] = T;
    set_id(&f, 3, -5);
    expect_permute_failure(&f, MOEPERM_ERR_PARAM_INVALID, "indices[3] = -5 is outside");
}

static void test_permute_overlapping_outputs_are_invalid(void **state)
{
    (void)state;
    permute_fixture f;
    /* permute_tokens_out in the tokens' memory */
    permute_init(&f);
    f.out_data = f.tokens;
    f.out_dims[0] = T, f.num_out_tokens = T;
    expect_permute_failure(&f, MOEPERM_ERR_PARAM_INVALID, "permute_tokens_out overlaps tokens");
    permute_init(&f);
    f.sorted_data = f.ids;
    expect_permute_failure(&f, MOEPERM_ERR_PARAM_INVALID, "sorted_indices_out overlaps indices");
    permute_init(&f);
    f.sorted_data = f.out;
    expect_permute_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                           "permute_tokens_out overlaps sorted_indices_out");
    permute_init(&f);
    f.out_strided = true, f.out_strides[0] = 1, f.out_strides[1] = 1;
    expect_permute_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                           "permute_tokens_out strides [1, 1] make distinct elements share memory");
    permute_init(&f);
    f.sorted_strided = true, f.sorted_strides[0] = 0;
    expect_permute_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                           "the device's result is undetermined: sorted_indices_out strides [0] "
                           "make distinct elements share memory");
}

static void test_permute_accepts_sentinels_clamped_counts_and_empty_inputs(void **state)
{
    (void)state;
    permute_fixture f;
    moeperm_executor *plan;
    permute_init(&f);
    set_id(&f, 0, INT32_MIN);
    set_id(&f, 1, INT32_MAX);
    set_id(&f, 2, 16777214);
    f.num_out_tokens = 1000; /* clamped to 8 */
    assert_int_equal(permute_plan(&f, &plan), MOEPERM_SUCCESS);
    assert_int_equal(moeperm_token_permute(NULL, 0, plan, NULL), MOEPERM_SUCCESS);
    assert_int_equal(f.sorted[0], 0);
    assert_int_equal(f.sorted[1], N - 1);
    assert_int_equal(f.sorted[2], N - 2);

    permute_init(&f);
    f.ids_dtype = MOEPERM_INT64;
    for (int i = 0; i < N; i++)
        f.ids[i] = i % 2 ? INT64_MAX : INT64_MIN;
    assert_int_equal(permute_plan(&f, &plan), MOEPERM_SUCCESS);
    moeperm_executor_destroy(plan);

    /* no tokens at all: every tensor empty, no data needed */
    permute_init(&f);
    f.tokens_dims[0] = f.ids_dims[0] = f.out_dims[0] = f.sorted_dims[0] = 0;
    f.tokens_data = f.ids_data = f.out_data = f.sorted_data = NULL;
    assert_int_equal(permute_plan(&f, &plan), MOEPERM_SUCCESS);
    assert_int_equal(moeperm_token_permute(NULL, 0, plan, NULL), MOEPERM_SUCCESS);
}

/* ---- the second phase ---------------------------------------------------- */

/* A permute plan run with a stream, by MoeTokenUnpermute and by
 * MoeTokenPermuteGrad, and a MoeTokenPermuteGrad plan run by
 * MoeTokenPermute: refused, freed, outputs untouched. */
static void test_second_phase_refuses_streams_and_other_operators_plans(void **state)
{
    (void)state;
    permute_fixture f;
    moeperm_executor *plan;
    int stream_object;

    permute_init(&f);
    assert_int_equal(permute_plan(&f, &plan), MOEPERM_SUCCESS);
    assert_int_equal(moeperm_token_permute(NULL, 0, plan, &stream_object),
                     MOEPERM_ERR_PARAM_INVALID);
    assert_non_null(strstr(moeperm_last_error(), "stream must be NULL"));
    assert_int_equal(permute_plan(&f, &plan), MOEPERM_SUCCESS);
    assert_int_equal(moeperm_token_unpermute(NULL, 0, plan, NULL), MOEPERM_ERR_PARAM_INVALID);
    assert_non_null(strstr(moeperm_last_error(),
                           "planned by MoeTokenPermute's first phase, not MoeTokenUnpermute's"));
    assert_int_equal(permute_plan(&f, &plan), MOEPERM_SUCCESS);
    assert_int_equal(moeperm_token_permute_grad(NULL, 0, plan, NULL), MOEPERM_ERR_PARAM_INVALID);
    expect_untouched(f.out, sizeof f.out, "permute_tokens_out");
    expect_untouched(f.sorted, sizeof f.sorted, "sorted_indices_out");

    uint16_t grad[N * H] = {0}, out[T * H];
    int32_t indices[N];
    for (int i = 0; i < N; i++)
        indices[i] = i;
    memset(out, EXPECT_FILL, sizeof out);
    int64_t gd[2] = {N, H}, id[1] = {N}, od[2] = {T, H};
    moeperm_tensor *g = moeperm_tensor_create(gd, 2, MOEPERM_BF16, NULL, 0, grad);
    moeperm_tensor *ix = moeperm_tensor_create(id, 1, MOEPERM_INT32, NULL, 0, indices);
    moeperm_tensor *o = moeperm_tensor_create(od, 2, MOEPERM_BF16, NULL, 0, out);
    uint64_t ws;
    assert_int_equal(moeperm_token_permute_grad_get_workspace_size(g, ix, K, false, o, &ws, &plan),
                     MOEPERM_SUCCESS);
    assert_int_equal(moeperm_token_permute(NULL, 0, plan, NULL), MOEPERM_ERR_PARAM_INVALID);
    assert_non_null(strstr(moeperm_last_error(),
                           "planned by MoeTokenPermuteGrad's first phase, not MoeTokenPermute's"));
    expect_untouched(out, sizeof out, "out");
    moeperm_tensor_destroy(g);
    moeperm_tensor_destroy(ix);
    moeperm_tensor_destroy(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_permute_null_arguments_are_nullptr),
        cmocka_unit_test(test_permute_padded_mode_dtypes_and_ranks_are_invalid),
        cmocka_unit_test(test_permute_shapes_and_limits_are_invalid),
        cmocka_unit_test(test_permute_ids_outside_the_sorted_set_are_named),
        cmocka_unit_test(test_permute_overlapping_outputs_are_invalid),
        cmocka_unit_test(test_permute_accepts_sentinels_clamped_counts_and_empty_inputs),
        cmocka_unit_test(test_second_phase_refuses_streams_and_other_operators_plans),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
