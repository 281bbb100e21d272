/*
 * The inputs of MoeTokenPermuteGrad that the Atlas A2/A3 kernel gives a
 * determined result for, beyond a permutation (docs/operators.md, "The
 * input domain"), each checked against the tests' own model
 * (naive_permute_grad.c) bit for bit: rows read by several slots, slots
 * dropped (index >= R, slot 0 among them), more rows than slots,
 * num_topk = -1 (one slot per token), a count of indices that num_topk
 * does not divide (the last ones unread), padded_mode = true (ignored), and
 * an empty output (nothing to do, whatever the rest says).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "expect.h"
#include "naive.h"
#include "naive_permute_grad.h"

static const moeperm_dtype dtypes[3] = {MOEPERM_FLOAT, MOEPERM_FLOAT16, MOEPERM_BF16};

/* One call on contiguous buffers: grad [rows, hidden], `count` indices,
 * out [out_rows, hidden]. */
static moeperm_status call(moeperm_dtype dtype, const void *grad, int64_t rows, int64_t hidden,
                           const int32_t *indices, int64_t count, int64_t num_topk,
                           bool padded_mode, void *out, int64_t out_rows)
{
    int64_t gd[2] = {rows, hidden}, id[1] = {count}, od[2] = {out_rows, hidden};
    moeperm_tensor *g = moeperm_tensor_create(gd, 2, dtype, NULL, 0, (void *)grad);
    moeperm_tensor *ix = moeperm_tensor_create(id, 1, MOEPERM_INT32, NULL, 0, (void *)indices);
    moeperm_tensor *o = moeperm_tensor_create(od, 2, dtype, NULL, 0, out);
    assert_true(g && ix && o);
    uint64_t workspace = 1;
    moeperm_executor *plan = NULL;
    moeperm_status status = moeperm_token_permute_grad_get_workspace_size(
        g, ix, num_topk, padded_mode, o, &workspace, &plan);
    moeperm_tensor_destroy(g);
    moeperm_tensor_destroy(ix);
    moeperm_tensor_destroy(o);
    if (status != MOEPERM_SUCCESS)
        return status;
    assert_int_equal(workspace, 0);
    return moeperm_token_permute_grad(NULL, 0, plan, NULL);
}

/* The library against the model on grad [rows, hidden] and the given
 * indices; out rows = floor(count / K) with K = num_topk (-1 meaning 1). */
static void expect_model(const char *what, moeperm_dtype dtype, int64_t rows, int64_t hidden,
                         const int32_t *indices, int64_t count, int64_t num_topk,
                         bool padded_mode, uint64_t seed)
{
    size_t es = naive_size(dtype);
    int64_t k = num_topk == -1 ? 1 : num_topk, tokens = count / k;
    void *grad = malloc((size_t)(rows * hidden) * es + 1);
    void *want = malloc((size_t)(tokens * hidden) * es + 1);
    void *got = malloc((size_t)(tokens * hidden) * es + 1);
    assert_true(grad && want && got);
    naive_fill_ordinary(&seed, dtype, grad, rows * hidden);
    memset(got, EXPECT_FILL, (size_t)(tokens * hidden) * es);
    naive_permute_grad(dtype, grad, rows, hidden, indices, tokens, k, want);
    moeperm_status status =
        call(dtype, grad, rows, hidden, indices, count, num_topk, padded_mode, got, tokens);
    if (status != MOEPERM_SUCCESS)
        fail_msg("%s, %s: refused: %s", what, moeperm_dtype_name(dtype), moeperm_last_error());
    int64_t first;
    if (!naive_equal(dtype, want, got, tokens * hidden, &first))
        fail_msg("%s, %s: element %lld differs from the model", what, moeperm_dtype_name(dtype),
                 (long long)first);
    free(grad);
    free(want);
    free(got);
}

/* Rows read by several slots of one token and of different tokens, slots
 * dropped (slot 0 of a token too), and more rows than slots. */
static void test_repeated_rows_dropped_slots_and_more_rows_than_slots_match_the_model(void **state)
{
    (void)state;
    /* 4 tokens of 3 slots over 5 rows */
    const int32_t indices[12] = {2, 2, 0, 7, 1, 2, 4, 4, 5, 9, 9, 3};
    for (int d = 0; d < 3; d++) {
        expect_model("repeats and drops", dtypes[d], 5, 37, indices, 12, 3, false, 1 + d);
        /* 40 rows for 12 slots: most rows are read by no slot */
        expect_model("R > N*K", dtypes[d], 40, 9, indices, 12, 3, false, 4 + d);
    }
    /* random indices over twice the rows, many tokens */
    uint64_t rng = 77;
    int32_t *many = malloc(400 * 8 * sizeof *many);
    assert_non_null(many);
    for (int i = 0; i < 400 * 8; i++)
        many[i] = (int32_t)(naive_rand(&rng) % 6000);
    for (int d = 0; d < 3; d++)
        expect_model("random rows", dtypes[d], 3000, 70, many, 400 * 8, 8, false, 7 + d);
    free(many);
}

/* num_topk = -1 is 1 (moe_token_permute_grad_tiling.cpp:129); a count
 * num_topk does not divide gives floor(L / K) tokens, the rest unread
 * (:130); padded_mode is never read (:327). */
static void test_minus_one_top_k_odd_counts_and_padded_mode_take_the_device_rules(void **state)
{
    (void)state;
    const int32_t indices[11] = {3, 0, 6, 6, 1, 2, 5, 4, -9, 8, 7};
    for (int d = 0; d < 3; d++) {
        expect_model("num_topk -1", dtypes[d], 7, 11, indices, 8, -1, false, 10 + d);
        /* 11 entries, K = 4: 2 tokens; entry 8 (negative) is never read */
        expect_model("11 entries, K = 4", dtypes[d], 7, 11, indices, 11, 4, false, 13 + d);
        expect_model("padded_mode", dtypes[d], 7, 11, indices, 8, 2, true, 16 + d);
    }
}

/* Every output empty: the device does nothing and succeeds, before its
 * tiling, whatever num_topk or the indices say. */
static void test_an_empty_output_succeeds_without_reading_anything(void **state)
{
    (void)state;
    const int32_t negative[4] = {-1, -2, -3, -4};
    uint16_t grad[4 * 3] = {0};
    uint16_t untouched[1] = {0x5a5a};
    assert_int_equal(call(MOEPERM_BF16, grad, 4, 3, negative, 4, 0, true, untouched, 0),
                     MOEPERM_SUCCESS);
    /* hidden_size 0: out [tokens, 0] */
    assert_int_equal(call(MOEPERM_BF16, grad, 4, 0, negative, 4, -7, false, untouched, 2),
                     MOEPERM_SUCCESS);
    assert_int_equal(untouched[0], 0x5a5a);
    /* but a non-empty out with num_topk 0 has no determined result */
    uint16_t out[3];
    memset(out, EXPECT_FILL, sizeof out);
    assert_int_equal(call(MOEPERM_BF16, grad, 4, 3, negative, 4, 0, false, out, 1),
                     MOEPERM_ERR_PARAM_INVALID);
    expect_untouched(out, sizeof out, "out");
}

/* No rows at all: every slot is dropped, every sum is +0.0. */
static void test_no_rows_gives_positive_zeros(void **state)
{
    (void)state;
    const int32_t indices[6] = {0, 1, 2, 3, 4, 5};
    float out[2 * 5];
    memset(out, EXPECT_FILL, sizeof out);
    assert_int_equal(call(MOEPERM_FLOAT, NULL, 0, 5, indices, 6, 3, false, out, 2),
                     MOEPERM_SUCCESS);
    for (int i = 0; i < 10; i++)
        assert_int_equal(naive_bits(out[i]), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(
            test_repeated_rows_dropped_slots_and_more_rows_than_slots_match_the_model),
        cmocka_unit_test(test_minus_one_top_k_odd_counts_and_padded_mode_take_the_device_rules),
        cmocka_unit_test(test_an_empty_output_succeeds_without_reading_anything),
        cmocka_unit_test(test_no_rows_gives_positive_zeros),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
