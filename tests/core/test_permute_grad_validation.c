/*
 * Every validation path of the first phase: each returns its aclnn code,
 * leaves the output memory untouched, sets *executor to NULL and names the
 * offending value in moeperm_last_error().
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <moeperm/moeperm.h>

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
    memset(f->out, 0x5a, sizeof f->out);
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
    if (status != want)
        fail_msg("status %d (%s), expected %d; message: %s", status,
                 moeperm_status_name(status), want, moeperm_last_error());
    assert_null(plan);
    if (!strstr(moeperm_last_error(), message))
        fail_msg("message \"%s\" does not contain \"%s\"", moeperm_last_error(), message);
    for (size_t i = 0; i < sizeof f->out; i++)
        assert_int_equal(((unsigned char *)f->out)[i], 0x5a);
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
        {NULL, ix, o, &ws, &plan, "permuted_output_grad is NULL"},
        {g, NULL, o, &ws, &plan, "sorted_indices is NULL"},
        {g, ix, NULL, &ws, &plan, "out is NULL"},
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
    assert_non_null(strstr(moeperm_last_error(), "permuted_output_grad has 24 elements"));
    moeperm_tensor_destroy(no_data);
    assert_int_equal(moeperm_token_permute_grad(NULL, 0, NULL, NULL), MOEPERM_ERR_PARAM_NULLPTR);
    moeperm_tensor_destroy(g);
    moeperm_tensor_destroy(ix);
    moeperm_tensor_destroy(o);
    for (size_t i = 0; i < sizeof f.out; i++)
        assert_int_equal(((unsigned char *)f.out)[i], 0x5a);
}

static void test_grad_dtype_outside_float_types_is_invalid(void **state)
{
    (void)state;
    fixture f;
    fixture_init(&f);
    f.grad_dtype = f.out_dtype = MOEPERM_INT32;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID, "permuted_output_grad dtype 3 (int32)");
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
                   "out dtype 1 (float16) differs from permuted_output_grad dtype 27 (bf16)");
}

static void test_indices_not_int32_are_invalid(void **state)
{
    (void)state;
    fixture f;
    fixture_init(&f);
    f.index_dtype = MOEPERM_FLOAT;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID, "sorted_indices dtype 0 (float32) is not INT32");
}

static void test_wrong_ndim_is_invalid(void **state)
{
    (void)state;
    fixture f;
    fixture_init(&f);
    f.grad_ndim = 1;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID, "permuted_output_grad has 1 dims");
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

static void test_index_count_not_divisible_by_top_k_is_invalid(void **state)
{
    (void)state;
    fixture f;
    fixture_init(&f);
    f.top_k = 3;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                   "sorted_indices has 8 entries, not a multiple of num_topk = 3");
}

static void test_out_shape_other_than_tokens_by_hidden_is_invalid(void **state)
{
    (void)state;
    fixture f;
    fixture_init(&f);
    f.out_dims[0] = T - 1;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID, "out shape is [3, 3], expected [4, 3]");
    fixture_init(&f);
    f.out_dims[1] = H - 1;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID, "out shape is [4, 2], expected [4, 3]");
}

static void test_more_grad_rows_than_indices_is_invalid(void **state)
{
    (void)state;
    fixture f;
    fixture_init(&f);
    f.grad_dims[0] = N + 1; /* [9, 2] still fits in the 24-element buffer */
    f.grad_dims[1] = 2;
    f.out_dims[1] = 2;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                   "permuted_output_grad has 9 rows, more than the 8 entries of sorted_indices");
}

static void test_top_k_outside_1_to_512_is_invalid(void **state)
{
    (void)state;
    fixture f;
    fixture_init(&f);
    f.top_k = 0;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID, "num_topk = 0 is outside [1, 512]");
    f.top_k = 513;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID, "num_topk = 513 is outside [1, 512]");
    f.top_k = -1;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID, "num_topk = -1 is outside [1, 512]");
}

static void test_padded_mode_true_is_invalid(void **state)
{
    (void)state;
    fixture f;
    fixture_init(&f);
    f.padded_mode = true;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID, "padded_mode = true is not supported");
}

static void test_index_outside_range_is_invalid_and_named(void **state)
{
    (void)state;
    fixture f;
    fixture_init(&f);
    f.indices[5] = N;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID, "sorted_indices[5] = 8 is outside [0, 7]");
    fixture_init(&f);
    f.indices[0] = -1;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID, "sorted_indices[0] = -1 is outside [0, 7]");
    fixture_init(&f);
    f.indices[7] = INT32_MIN;
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID,
                   "sorted_indices[7] = -2147483648 is outside [0, 7]");
}

static void test_duplicate_index_is_invalid_and_names_both_places(void **state)
{
    (void)state;
    fixture f;
    fixture_init(&f);
    f.indices[6] = f.indices[2]; /* = 5 */
    expect_failure(&f, MOEPERM_ERR_PARAM_INVALID, "sorted_indices[6] = 5 repeats sorted_indices[2]");
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

/* The index check walks several stretches of the indices side by side
 * before falling back to a walk in order for the message: whatever the
 * count (stretches of every length, with and without a remainder), the
 * stride and where the bad index sits, a permutation passes and the first
 * bad position in order is the one named. */
static void test_index_check_names_the_first_bad_position_at_every_count(void **state)
{
    (void)state;
    static int32_t storage[3 * 1024];
    char want[128];
    for (int64_t stride = 1; stride <= 3; stride += 2)
        for (int64_t n = 1; n <= 41; n++) {
            uint64_t seed = (uint64_t)(n * 7 + stride);
            /* a shuffled permutation of [0, n) */
            for (int64_t i = 0; i < n; i++)
                storage[i * stride] = (int32_t)i;
            for (int64_t i = n - 1; i > 0; i--) {
                seed = seed * 6364136223846793005u + 1442695040888963407u;
                int64_t j = (int64_t)((seed >> 33) % (uint64_t)(i + 1));
                int32_t swap = storage[i * stride];
                storage[i * stride] = storage[j * stride];
                storage[j * stride] = swap;
            }
            if (validate_indices(storage, n, stride) != MOEPERM_SUCCESS)
                fail_msg("n %lld stride %lld: a permutation was refused: %s", (long long)n,
                         (long long)stride, moeperm_last_error());
            for (int64_t p = 0; p < n; p++) {
                int32_t kept = storage[p * stride];
                int32_t bad = p % 2 ? (int32_t)n : -1 - (int32_t)p;
                storage[p * stride] = bad;
                assert_int_equal(validate_indices(storage, n, stride),
                                 MOEPERM_ERR_PARAM_INVALID);
                snprintf(want, sizeof want, "sorted_indices[%lld] = %d is outside [0, %lld]",
                         (long long)p, bad, (long long)(n - 1));
                if (!strstr(moeperm_last_error(), want))
                    fail_msg("n %lld stride %lld: \"%s\", expected \"%s\"", (long long)n,
                             (long long)stride, moeperm_last_error(), want);
                /* the value of position q < p repeated at p */
                if (p > 0) {
                    int64_t q = (n * 3 + 1) % p;
                    storage[p * stride] = storage[q * stride];
                    assert_int_equal(validate_indices(storage, n, stride),
                                     MOEPERM_ERR_PARAM_INVALID);
                    snprintf(want, sizeof want, "sorted_indices[%lld] = %d repeats "
                             "sorted_indices[%lld]", (long long)p, storage[q * stride],
                             (long long)q);
                    if (!strstr(moeperm_last_error(), want))
                        fail_msg("n %lld stride %lld: \"%s\", expected \"%s\"",
                                 (long long)n, (long long)stride, moeperm_last_error(), want);
                }
                storage[p * stride] = kept;
            }
        }
    /* many indices sharing each bitmap word: identity and reversed orders */
    for (int64_t i = 0; i < 1000; i++)
        storage[i] = (int32_t)i;
    assert_int_equal(validate_indices(storage, 1000, 1), MOEPERM_SUCCESS);
    for (int64_t i = 0; i < 1000; i++)
        storage[i] = (int32_t)(999 - i);
    assert_int_equal(validate_indices(storage, 1000, 1), MOEPERM_SUCCESS);
    storage[999] = 1;
    assert_int_equal(validate_indices(storage, 1000, 1), MOEPERM_ERR_PARAM_INVALID);
    assert_non_null(strstr(moeperm_last_error(), "sorted_indices[999] = 1 repeats "
                                                 "sorted_indices[998]"));
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
    assert_string_equal(moeperm_last_error(), "out overlaps permuted_output_grad in memory");
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
    for (size_t i = 0; i < sizeof f.out; i++)
        assert_int_equal(((unsigned char *)f.out)[i], 0x5a);
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
    for (size_t i = 0; i < sizeof f.out; i++)
        assert_int_equal(((unsigned char *)f.out)[i], 0x5a);
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
    assert_string_equal(moeperm_status_name(12345), "MOEPERM_UNKNOWN_STATUS");
    assert_int_equal(MOEPERM_ERR_PARAM_NULLPTR, 161001);
    assert_int_equal(MOEPERM_ERR_PARAM_INVALID, 161002);
    assert_int_equal(MOEPERM_ERR_RUNTIME_ERROR, 361001);
    assert_int_equal(MOEPERM_ERR_INNER, 561000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_null_tensors_and_out_pointers_are_nullptr),
        cmocka_unit_test(test_grad_dtype_outside_float_types_is_invalid),
        cmocka_unit_test(test_out_dtype_differing_from_grad_is_invalid),
        cmocka_unit_test(test_indices_not_int32_are_invalid),
        cmocka_unit_test(test_wrong_ndim_is_invalid),
        cmocka_unit_test(test_index_count_not_divisible_by_top_k_is_invalid),
        cmocka_unit_test(test_out_shape_other_than_tokens_by_hidden_is_invalid),
        cmocka_unit_test(test_more_grad_rows_than_indices_is_invalid),
        cmocka_unit_test(test_top_k_outside_1_to_512_is_invalid),
        cmocka_unit_test(test_padded_mode_true_is_invalid),
        cmocka_unit_test(test_index_outside_range_is_invalid_and_named),
        cmocka_unit_test(test_duplicate_index_is_invalid_and_names_both_places),
        cmocka_unit_test(test_index_check_names_the_first_bad_position_at_every_count),
        cmocka_unit_test(test_out_overlapping_itself_or_an_input_is_invalid),
        cmocka_unit_test(test_view_past_the_address_space_is_invalid_and_named),
        cmocka_unit_test(test_tensor_create_refuses_negative_and_too_many_dims),
        cmocka_unit_test(test_a_stream_on_the_cpu_is_refused_and_frees_the_plan),
        cmocka_unit_test(test_status_names_are_the_macro_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
