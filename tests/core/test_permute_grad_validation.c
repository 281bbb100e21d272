/*
 * Every refusal of MoeTokenPermuteGrad's first phase (docs/operators.md,
 * "The input domain"): each returns its aclnn code, leaves the output
 * memory untouched, sets *executor to NULL and names the offending value in
 * moeperm_last_error(), whose sentence says whether the device refuses it
 * too or gives no determined result for it.  What the device accepts that
 * the library once refused is tests/core/test_permute_grad_domain.c's.
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

typedef struct fixture {
    uint16_t grad[N * H];
    int32_t indices[N];
    uint16_t out[T * H];
    int64_t grad_dims[2], index_dims[1], out_dims[2];
    moeperm_dtype grad_dtype, index_dtype, out_dtype;
    uint64_t grad_ndim, index_ndim, out_ndim;
    int64_t top_k;
    bool padded_mode;
} fixture;

static void fixture_init(fixture *f)
{
    memset(f, 0, sizeof *f);
    for (int i = 0; i < N * H; i++)
        f->grad[i] = 0x3f80;
    for (int i = 0; i < N; i++)
        f->indices[i] = N - 1 - i;
    memset(f->out, EXPECT_FILL, sizeof f->out);
    f->grad_dims[0] = N, f->grad_dims[1] = H;
    f->index_dims[0] = N;
    f->out_dims[0] = T, f->out_dims[1] = H;
    f->grad_dtype = f->out_dtype = MOEPERM_BF16;
    f->index_dtype = MOEPERM_INT32;
    f->grad_ndim = 2, f->index_ndim = 1, f->out_ndim = 2;
    f->top_k = K;
    f->padded_mode = false;
}

/* Runs the first phase on the fixture and asserts the failure contract. */
static void expect_failure(fixture *f, moeperm_status want, const char *message)
{
    moeperm_tensor *g =
        moeperm_tensor_create(f->grad_dims, f->grad_ndim, f->grad_dtype, NULL, 0, f->grad);
    moeperm_tensor *ix = moeperm_tensor_create(f->index_dims, f->index_ndim, f->index_dtype,
                                               NULL, 0, f->indices);
    moeperm_tensor *o =
        moeperm_tensor_create(f->out_dims, f->out_ndim, f->out_dtype, NULL, 0, f->out);
    assert_non_null(g);
    assert_non_null(ix);
    assert_non_null(o);
    uint64_t workspace = 77;
    moeperm_executor *plan = (moeperm_executor *)(uintptr_t)1;
    moeperm_status status = moeperm_token_permute_grad_get_workspace_size(
        g, ix, f->top_k, f->padded_mode, o, &workspace, &plan);
    expect_refusal(status, want, plan, message);
    expect_untouched(f->out, sizeof f->out, "out");
    moeperm_tensor_destroy(g);
    moeperm_tensor_destroy(ix);
    moeperm_tensor_destroy(o);
}

static void test_null_tensors_and_out_pointers_are_nullptr(void **state)
{
    (void)state;
    fixture f;
    fixture_init(&f);
    moeperm_tensor *g = moeperm_tensor_create(f.grad_dims, 2, MOEPERM_BF16, NULL, 0, f.grad);
    moeperm_tensor *ix =
        moeperm_tensor_create(f.index_dims, 1, MOEPERM_INT32, NULL, 0, f.indices);
    moeperm_tensor *o = moeperm_tensor_create(f.out_dims, 2, MOEPERM_BF16, NULL, 0, f.out);
    uint64_t ws;
    moeperm_executor *plan;
    struct {
        const moeperm_tensor *g, *ix;
        moeperm_tensor *o;
        uint64_t *ws;
        moeperm_executor **plan;
        const char *name;
    } cases[] = {
        {NULL, ix, o, &ws, &plan,
         "the device refuses permuted_output_grad = NULL: it is a required tensor"},
        {g, NULL, o, &ws, &plan,
         "the device refuses sorted_indices = NULL: it is a required tensor"},
        {g, ix, NULL, &ws, &plan, "the device refuses out = NULL: it is a required tensor"},
        {g, ix, o, NULL, &plan, "workspace_size is NULL"},
        {g, ix, o, &ws, NULL, "executor is NULL"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(moeperm_token_permute_grad_get_workspace_size(
                             cases[i].g, cases[i].ix, K, false, cases[i].o, cases[i].ws,
                             cases[i].plan),
                         MOEPERM_ERR_PARAM_NULLPTR);
        assert_string_equal(moeperm_last_error(), cases[i].name);
    }
    moeperm_tensor *no_data = moeperm_tensor_create(f.grad_dims, 2, MOEPERM_BF16, NULL, 0, NULL);
    assert_int_equal(
        moeperm_token_permute_grad_get_workspace_size(no_data, ix, K, false, o, &ws, &plan),
        MOEPERM_ERR_PARAM_NULLPTR);
    assert_non_null(strstr(moeperm_last_error(), "permuted_output_grad with 24 elements"));
    moeperm_tensor_destroy(no_data);
    assert_int_equal(moeperm_token_permute_grad(NULL, 0, NULL, NULL), MOEPERM_ERR_PARAM_NULLPTR);
    moeperm_tensor_destroy(g);
    moeperm_tensor_destroy(ix);
    moeperm_tensor_destroy(o);
    expect_untouched(f.out, sizeof f.out, "out");
}

static void test_grad_dtype_outside_float_types_is_invalid(void **state)
{
    (void)state;
    fixture f;
    fixture_init(&f);
    f.grad_dtype = f.out_dtype = MOEPERM_INT32;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                   "the device refuses permuted_output_grad dtype 3 (int32)");
    f.grad_dtype = f.out_dtype = (moeperm_dtype)9;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID, "permuted_output_grad dtype 9");
}

static void test_out_dtype_differing_from_grad_is_invalid(void **state)
{
    (void)state;
    fixture f;
    fixture_init(&f);
    f.out_dtype = MOEPERM_FLOAT16;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                   "the device refuses out dtype 1 (float16): it must be permuted_output_grad's, "
                   "27 (bf16)");
}

static void test_indices_not_int32_are_invalid(void **state)
{
    (void)state;
    fixture f;
    fixture_init(&f);
    f.index_dtype = MOEPERM_FLOAT;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                   "the device refuses sorted_indices dtype 0 (float32): it takes INT32 (3)");
}

static void test_wrong_ndim_is_invalid(void **state)
{
    (void)state;
    fixture f;
    fixture_init(&f);
    f.grad_ndim = 1;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                   "the device's result is undetermined: permuted_output_grad has 1 dims");
    fixture_init(&f);
    int64_t dims2[2] = {N, 1};
    moeperm_tensor *ix = moeperm_tensor_create(dims2, 2, MOEPERM_INT32, NULL, 0, f.indices);
    moeperm_tensor *g = moeperm_tensor_create(f.grad_dims, 2, MOEPERM_BF16, NULL, 0, f.grad);
    moeperm_tensor *o = moeperm_tensor_create(f.out_dims, 2, MOEPERM_BF16, NULL, 0, f.out);
    uint64_t ws;
    moeperm_executor *plan;
    assert_int_equal(moeperm_token_permute_grad_get_workspace_size(g, ix, K, false, o, &ws, &plan),
                     MOEPERM_ERR_PARAM_INVALID);
    assert_non_null(strstr(moeperm_last_error(), "sorted_indices has 2 dims"));
    moeperm_tensor_destroy(ix);
    moeperm_tensor_destroy(g);
    moeperm_tensor_destroy(o);
    fixture_init(&f);
    f.out_ndim = 1;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID, "out has 1 dims");
}

static void test_out_shape_other_than_tokens_by_hidden_is_invalid(void **state)
{
    (void)state;
    fixture f;
    fixture_init(&f);
    f.out_dims[0] = T - 1;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                   "the device's result is undetermined: out shape is [3, 3], expected [4, 3]: "
                   "the kernel writes floor(8 / 2) rows of hidden_size 3");
    fixture_init(&f);
    f.out_dims[1] = H - 1;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID, "out shape is [4, 2], expected [4, 3]");
    fixture_init(&f);
    f.top_k = 3; /* floor(8 / 3) = 2 tokens, the last two entries unread */
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID, "out shape is [4, 3], expected [2, 3]");
}

/* num_topk 0 and below -1: the device launches its kernel on 0 or a
 * negative count of cores; above 512 its buffers are not characterised.
 * -1 means 1 (test_permute_grad_domain.c). */
static void test_top_k_without_a_determined_result_is_invalid(void **state)
{
    (void)state;
    fixture f;
    fixture_init(&f);
    f.top_k = 0;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                   "the device's result is undetermined: num_topk = 0: tokens_num = L / 0 is "
                   "taken as 0 and the kernel is launched on 0 cores");
    f.top_k = -2;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                   "the device's result is undetermined: num_topk = -2: tokens_num = L / "
                   "num_topk is negative");
    f.top_k = INT64_MIN;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID, "num_topk = -9223372036854775808");
    f.top_k = 513;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                   "the device's result is undetermined: num_topk = 513 is above 512");
}

static void test_negative_index_is_invalid_and_named(void **state)
{
    (void)state;
    fixture f;
    fixture_init(&f);
    f.indices[0] = -1;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                   "the device's result is undetermined: sorted_indices[0] = -1 is negative: "
                   "the kernel would address row -1 of permuted_output_grad, outside the tensor");
    fixture_init(&f);
    f.indices[7] = INT32_MIN;
    f.indices[3] = -5;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID, "sorted_indices[3] = -5 is negative");
}

/* First phase on n indices (K = 1, H = 1, grad of n rows) read with the
 * given stride from `storage`; returns the status and leaves the message in
 * moeperm_last_error(). */
static moeperm_status validate_indices(int32_t *storage, int64_t n, int64_t stride)
{
    static float grad[1024], out[1024];
    int64_t grad_dims[2] = {n, 1}, index_dims[1] = {n}, index_strides[1] = {stride};
    int64_t out_dims[2] = {n, 1};
    moeperm_tensor *g = moeperm_tensor_create(grad_dims, 2, MOEPERM_FLOAT, NULL, 0, grad);
    moeperm_tensor *ix =
        moeperm_tensor_create(index_dims, 1, MOEPERM_INT32, index_strides, 0, storage);
    moeperm_tensor *o = moeperm_tensor_create(out_dims, 2, MOEPERM_FLOAT, NULL, 0, out);
    assert_non_null(g);
    assert_non_null(ix);
    assert_non_null(o);
    uint64_t workspace;
    moeperm_executor *plan = NULL;
    moeperm_status status =
        moeperm_token_permute_grad_get_workspace_size(g, ix, 1, false, o, &workspace, &plan);
    moeperm_executor_destroy(plan);
    moeperm_tensor_destroy(g);
    moeperm_tensor_destroy(ix);
    moeperm_tensor_destroy(o);
    return status;
}

/* The index check scans the sign bits of all the entries at once before
 * it walks them in order for the message: whatever the count, the stride
 * and where the negative entries sit, indices that repeat rows or drop
 * slots pass and the first negative position in order is the one named. */
static void test_index_check_names_the_first_negative_position_at_every_count(void **state)
{
    (void)state;
    static int32_t storage[3 * 1024];
    char want[160];
    for (int64_t stride = 1; stride <= 3; stride += 2)
        for (int64_t n = 1; n <= 41; n++) {
            uint64_t seed = (uint64_t)(n * 7 + stride);
            /* rows in [0, n + 2): repeats, and slots dropped at n and n + 1 */
            for (int64_t i = 0; i < n; i++) {
                seed = seed * 6364136223846793005u + 1442695040888963407u;
                storage[i * stride] = (int32_t)((seed >> 33) % (uint64_t)(n + 2));
            }
            if (validate_indices(storage, n, stride) != MOEPERM_SUCCESS)
                fail_msg("n %lld stride %lld: nonnegative indices were refused: %s", (long long)n,
                         (long long)stride, moeperm_last_error());
            for (int64_t p = 0; p < n; p++) {
                int32_t kept = storage[p * stride];
                int32_t bad = p % 2 ? INT32_MIN : -1 - (int32_t)p;
                storage[p * stride] = bad;
                /* a later negative entry too: the first is named */
                int64_t later = p + 1 + (p * 5) % (n - p > 1 ? n - p - 1 : 1);
                int32_t later_kept = later < n ? storage[later * stride] : 0;
                if (later < n)
                    storage[later * stride] = -7;
                assert_int_equal(validate_indices(storage, n, stride),
                                 MOEPERM_ERR_PARAM_INVALID);
                snprintf(want, sizeof want, "sorted_indices[%lld] = %d is negative",
                         (long long)p, bad);
                if (!strstr(moeperm_last_error(), want))
                    fail_msg("n %lld stride %lld: \"%s\", expected \"%s\"", (long long)n,
                             (long long)stride, moeperm_last_error(), want);
                if (later < n)
                    storage[later * stride] = later_kept;
                storage[p * stride] = kept;
            }
        }
}

static void test_out_overlapping_itself_or_an_input_is_invalid(void **state)
{
    (void)state;
    fixture f;
    fixture_init(&f);
    moeperm_tensor *g = moeperm_tensor_create(f.grad_dims, 2, MOEPERM_BF16, NULL, 0, f.grad);
    moeperm_tensor *ix = moeperm_tensor_create(f.index_dims, 1, MOEPERM_INT32, NULL, 0, f.indices);
    int64_t zero_row_stride[2] = {0, 1};
    moeperm_tensor *o =
        moeperm_tensor_create(f.out_dims, 2, MOEPERM_BF16, zero_row_stride, 0, f.out);
    moeperm_tensor *in_place = moeperm_tensor_create(f.out_dims, 2, MOEPERM_BF16, NULL, 0, f.grad);
    uint64_t ws;
    moeperm_executor *plan;
    assert_int_equal(moeperm_token_permute_grad_get_workspace_size(g, ix, K, false, o, &ws, &plan),
                     MOEPERM_ERR_PARAM_INVALID);
    assert_non_null(strstr(moeperm_last_error(), "out strides [0, 1]"));
    assert_int_equal(
        moeperm_token_permute_grad_get_workspace_size(g, ix, K, false, in_place, &ws, &plan),
        MOEPERM_ERR_PARAM_INVALID);
    assert_string_equal(moeperm_last_error(),
                        "the device's result is undetermined: out overlaps permuted_output_grad "
                        "in memory");
    moeperm_tensor_destroy(g);
    moeperm_tensor_destroy(ix);
    moeperm_tensor_destroy(o);
    moeperm_tensor_destroy(in_place);
}

/* A view whose bytes do not fit in 63 bits is refused, naming its offset
 * and the last element it reaches. */
static void test_view_past_the_address_space_is_invalid_and_named(void **state)
{
    (void)state;
    fixture f;
    fixture_init(&f);
    int64_t offset = INT64_MAX / 2 - 3; /* fine in elements, too many bytes */
    moeperm_tensor *g =
        moeperm_tensor_create(f.grad_dims, 2, MOEPERM_BF16, NULL, offset, f.grad);
    moeperm_tensor *ix = moeperm_tensor_create(f.index_dims, 1, MOEPERM_INT32, NULL, 0, f.indices);
    moeperm_tensor *o = moeperm_tensor_create(f.out_dims, 2, MOEPERM_BF16, NULL, 0, f.out);
    assert_true(g && ix && o);
    uint64_t ws;
    moeperm_executor *plan = (moeperm_executor *)(uintptr_t)1;
    assert_int_equal(moeperm_token_permute_grad_get_workspace_size(g, ix, K, false, o, &ws, &plan),
                     MOEPERM_ERR_PARAM_INVALID);
    assert_null(plan);
    const char *message = moeperm_last_error();
    if (!strstr(message, "permuted_output_grad") || !strstr(message, "4611686018427387900") ||
        !strstr(message, "4611686018427387923"))
        fail_msg("message \"%s\" does not name the offset and the last element", message);
    expect_untouched(f.out, sizeof f.out, "out");
    moeperm_tensor_destroy(g);
    moeperm_tensor_destroy(ix);
    moeperm_tensor_destroy(o);
}

static void test_tensor_create_refuses_negative_and_too_many_dims(void **state)
{
    (void)state;
    int64_t dims[9] = {2, 2, 2, 2, 2, 2, 2, 2, 2}, bad[2] = {2, -1}, strides[2] = {1, -4};
    uint16_t data[4];
    assert_null(moeperm_tensor_create(dims, 9, MOEPERM_BF16, NULL, 0, data));
    assert_non_null(strstr(moeperm_last_error(), "ndim = 9"));
    assert_null(moeperm_tensor_create(bad, 2, MOEPERM_BF16, NULL, 0, data));
    assert_string_equal(moeperm_last_error(), "dims[1] = -1 is negative");
    assert_null(moeperm_tensor_create(dims, 2, MOEPERM_BF16, strides, 0, data));
    assert_string_equal(moeperm_last_error(), "strides[1] = -4 is negative");
    assert_null(moeperm_tensor_create(dims, 2, MOEPERM_BF16, NULL, -3, data));
    assert_string_equal(moeperm_last_error(), "offset = -3 is negative");
}

static void test_a_stream_on_the_cpu_is_refused_and_frees_the_plan(void **state)
{
    (void)state;
    fixture f;
    fixture_init(&f);
    moeperm_tensor *g = moeperm_tensor_create(f.grad_dims, 2, MOEPERM_BF16, NULL, 0, f.grad);
    moeperm_tensor *ix = moeperm_tensor_create(f.index_dims, 1, MOEPERM_INT32, NULL, 0, f.indices);
    moeperm_tensor *o = moeperm_tensor_create(f.out_dims, 2, MOEPERM_BF16, NULL, 0, f.out);
    uint64_t ws;
    moeperm_executor *plan;
    assert_int_equal(moeperm_token_permute_grad_get_workspace_size(g, ix, K, false, o, &ws, &plan),
                     MOEPERM_SUCCESS);
    int stream;
    assert_int_equal(moeperm_token_permute_grad(NULL, ws, plan, &stream),
                     MOEPERM_ERR_PARAM_INVALID);
    assert_non_null(strstr(moeperm_last_error(), "stream must be NULL"));
    expect_untouched(f.out, sizeof f.out, "out");
    moeperm_tensor_destroy(g);
    moeperm_tensor_destroy(ix);
    moeperm_tensor_destroy(o);
}

static void test_status_names_are_the_macro_names(void **state)
{
    (void)state;
    assert_string_equal(moeperm_status_name(MOEPERM_SUCCESS), "MOEPERM_SUCCESS");
    assert_string_equal(moeperm_status_name(MOEPERM_ERR_PARAM_NULLPTR), "MOEPERM_ERR_PARAM_NULLPTR");
    assert_string_equal(moeperm_status_name(MOEPERM_ERR_PARAM_INVALID), "MOEPERM_ERR_PARAM_INVALID");
    assert_string_equal(moeperm_status_name(MOEPERM_ERR_RUNTIME_ERROR), "MOEPERM_ERR_RUNTIME_ERROR");
    assert_string_equal(moeperm_status_name(MOEPERM_ERR_INNER), "MOEPERM_ERR_INNER");
    assert_string_equal(moeperm_status_name(MOEPERM_ERR_INNER_TILING_ERROR),
                        "MOEPERM_ERR_INNER_TILING_ERROR");
    assert_string_equal(moeperm_status_name(12345), "MOEPERM_UNKNOWN_STATUS");
    assert_int_equal(MOEPERM_ERR_PARAM_NULLPTR, 161001);
    assert_int_equal(MOEPERM_ERR_PARAM_INVALID, 161002);
    assert_int_equal(MOEPERM_ERR_RUNTIME_ERROR, 361001);
    assert_int_equal(MOEPERM_ERR_INNER, 561000);
    assert_int_equal(MOEPERM_ERR_INNER_TILING_ERROR, 561002);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_null_tensors_and_out_pointers_are_nullptr),
        cmocka_unit_test(test_grad_dtype_outside_float_types_is_invalid),
        cmocka_unit_test(test_out_dtype_differing_from_grad_is_invalid),
        cmocka_unit_test(test_indices_not_int32_are_invalid),
        cmocka_unit_test(test_wrong_ndim_is_invalid),
        cmocka_unit_test(test_out_shape_other_than_tokens_by_hidden_is_invalid),
        cmocka_unit_test(test_top_k_without_a_determined_result_is_invalid),
        cmocka_unit_test(test_negative_index_is_invalid_and_named),
        cmocka_unit_test(test_index_check_names_the_first_negative_position_at_every_count),
        cmocka_unit_test(test_out_overlapping_itself_or_an_input_is_invalid),
        cmocka_unit_test(test_view_past_the_address_space_is_invalid_and_named),
        cmocka_unit_test(test_tensor_create_refuses_negative_and_too_many_dims),
        cmocka_unit_test(test_a_stream_on_the_cpu_is_refused_and_frees_the_plan),
        cmocka_unit_test(test_status_names_are_the_macro_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
