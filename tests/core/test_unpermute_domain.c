/*
 * The inputs of MoeTokenUnpermute that the Atlas A2/A3 kernel gives a
 * determined result for, beyond a permutation (docs/operators.md, "The
 * input domain"), each checked against the tests' own model
 * (naive_family.c) bit for bit: rows read by several slots, dropped slots
 * (slot 0 among them), more rows than slots, more indices than tokens_num *
 * top_k (the rest unread), with and without probs; padded_mode = true and a
 * NULL restore_shape with a length (neither is read); an empty output.
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
#include "naive_family.h"

static const moeperm_dtype dtypes[3] = {MOEPERM_FLOAT, MOEPERM_FLOAT16, MOEPERM_BF16};

/* One call on contiguous buffers: permuted_tokens [rows, hidden],
 * `count` indices, probs [tokens, top_k] or NULL, out [tokens, hidden]. */
static moeperm_status call(moeperm_dtype dtype, const void *x, int64_t rows, int64_t hidden,
                           const int32_t *indices, int64_t count, moeperm_dtype probs_dtype,
                           const void *probs, int64_t tokens, int64_t top_k, bool padded_mode,
                           const int64_t *restore_shape, uint64_t restore_shape_len, void *out)
{
    int64_t xd[2] = {rows, hidden}, id[1] = {count}, pd[2] = {tokens, top_k},
            od[2] = {tokens, hidden};
    moeperm_tensor *tx = moeperm_tensor_create(xd, 2, dtype, NULL, 0, (void *)x);
    moeperm_tensor *ti = moeperm_tensor_create(id, 1, MOEPERM_INT32, NULL, 0, (void *)indices);
    moeperm_tensor *tp =
        probs ? moeperm_tensor_create(pd, 2, probs_dtype, NULL, 0, (void *)probs) : NULL;
    moeperm_tensor *to = moeperm_tensor_create(od, 2, dtype, NULL, 0, out);
    assert_true(tx && ti && to && (tp || !probs));
    uint64_t workspace = 1;
    moeperm_executor *plan = NULL;
    moeperm_status status = moeperm_token_unpermute_get_workspace_size(
        tx, ti, tp, padded_mode, restore_shape, restore_shape_len, to, &workspace, &plan);
    moeperm_tensor_destroy(tx);
    moeperm_tensor_destroy(ti);
    moeperm_tensor_destroy(tp);
    moeperm_tensor_destroy(to);
    if (status != MOEPERM_SUCCESS)
        return status;
    return moeperm_token_unpermute(NULL, 0, plan, NULL);
}

/* The library against the model: tokens of top_k slots (top_k 1 and no
 * probs when probs_dtype < 0), the first tokens * top_k of `count`
 * indices read. */
static void expect_model(const char *what, moeperm_dtype dtype, int probs_dtype, int64_t rows,
                         int64_t hidden, const int32_t *indices, int64_t count, int64_t tokens,
                         int64_t top_k, uint64_t seed)
{
    size_t es = naive_size(dtype);
    bool has_probs = probs_dtype >= 0;
    moeperm_dtype pd = has_probs ? (moeperm_dtype)probs_dtype : MOEPERM_FLOAT;
    void *x = malloc((size_t)(rows * hidden) * es + 1);
    void *probs = has_probs ? malloc((size_t)(tokens * top_k) * naive_size(pd) + 1) : NULL;
    void *want = malloc((size_t)(tokens * hidden) * es + 1);
    void *got = malloc((size_t)(tokens * hidden) * es + 1);
    assert_true(x && want && got && (probs || !has_probs));
    naive_fill_ordinary(&seed, dtype, x, rows * hidden);
    if (has_probs) {
        naive_fill_ordinary(&seed, pd, probs, tokens * top_k);
        /* a zero prob now and then: a slot the kernel skips */
        for (int64_t i = 0; i < tokens * top_k; i += 7)
            memset((char *)probs + i * (int64_t)naive_size(pd), 0, naive_size(pd));
    }
    memset(got, EXPECT_FILL, (size_t)(tokens * hidden) * es);
    naive_unpermute(dtype, x, rows, hidden, indices, tokens, top_k, pd, probs, want);
    moeperm_status status = call(dtype, x, rows, hidden, indices, count, pd, probs, tokens,
                                 top_k, false, NULL, 0, got);
    if (status != MOEPERM_SUCCESS)
        fail_msg("%s, %s: refused: %s", what, moeperm_dtype_name(dtype), moeperm_last_error());
    int64_t first;
    if (!naive_equal(dtype, want, got, tokens * hidden, &first))
        fail_msg("%s, %s: element %lld differs from the model", what, moeperm_dtype_name(dtype),
                 (long long)first);
    free(x);
    free(probs);
    free(want);
    free(got);
}

static void test_repeated_rows_dropped_slots_and_more_rows_match_the_model(void **state)
{
    (void)state;
    /* 4 tokens of 3 slots over 5 rows; the last two entries unread */
    const int32_t indices[14] = {2, 2, 0, 7, 1, 2, 4, 4, 5, 9, 9, 3, -1, -1};
    for (int d = 0; d < 3; d++)
        for (int p = 0; p < 3; p++) {
            expect_model("repeats and drops", dtypes[d], dtypes[p], 5, 37, indices, 14, 4, 3,
                         1 + d * 3 + p);
            expect_model("R > N*K", dtypes[d], dtypes[p], 40, 9, indices, 12, 4, 3,
                         20 + d * 3 + p);
        }
    /* without probs: one slot per token, tokens_num = the entries */
    for (int d = 0; d < 3; d++)
        expect_model("no probs", dtypes[d], -1, 5, 13, indices, 12, 12, 1, 40 + d);
    /* random indices over twice the rows */
    uint64_t rng = 5;
    int32_t *many = malloc(300 * 6 * sizeof *many);
    assert_non_null(many);
    for (int i = 0; i < 300 * 6; i++)
        many[i] = (int32_t)(naive_rand(&rng) % 3600);
    for (int d = 0; d < 3; d++)
        expect_model("random rows", dtypes[d], dtypes[2 - d], 1800, 70, many, 300 * 6, 300, 6,
                     50 + d);
    free(many);
}

/* padded_mode and restore_shape are never read by the device's host code
 * (moe_token_unpermute_tiling.cpp reads no attribute), so padded_mode =
 * true gives the same bits, and a NULL restore_shape with a length is
 * accepted as MoeTokenUnpermuteGrad accepts it. */
static void test_padded_mode_and_restore_shape_are_ignored(void **state)
{
    (void)state;
    const int32_t indices[6] = {5, 0, 3, 1, 4, 2};
    float x[6 * 4], probs[6], plain[3 * 4], padded[3 * 4];
    for (int i = 0; i < 24; i++)
        x[i] = (float)(i + 1) * 0.25f;
    for (int i = 0; i < 6; i++)
        probs[i] = 0.5f + (float)i;
    assert_int_equal(call(MOEPERM_FLOAT, x, 6, 4, indices, 6, MOEPERM_FLOAT, probs, 3, 2, false,
                          NULL, 0, plain),
                     MOEPERM_SUCCESS);
    assert_int_equal(call(MOEPERM_FLOAT, x, 6, 4, indices, 6, MOEPERM_FLOAT, probs, 3, 2, true,
                          NULL, 5, padded),
                     MOEPERM_SUCCESS);
    assert_memory_equal(plain, padded, sizeof plain);
    float want[3 * 4];
    naive_unpermute(MOEPERM_FLOAT, x, 6, 4, indices, 3, 2, MOEPERM_FLOAT, probs, want);
    assert_memory_equal(plain, want, sizeof want);
}

/* An empty output: nothing to do, whatever the rest says (top_k 0, a
 * negative index). */
static void test_an_empty_output_succeeds_without_reading_anything(void **state)
{
    (void)state;
    const int32_t indices[4] = {-1, -2, -3, -4};
    float x[4 * 2] = {0}, probs[1] = {1.0f};
    assert_int_equal(call(MOEPERM_FLOAT, x, 4, 0, indices, 4, MOEPERM_FLOAT, probs, 4, 0, false,
                          NULL, 0, NULL),
                     MOEPERM_SUCCESS);
    assert_int_equal(call(MOEPERM_FLOAT, x, 4, 2, indices, 4, MOEPERM_FLOAT, probs, 0, 4, false,
                          NULL, 0, NULL),
                     MOEPERM_SUCCESS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_repeated_rows_dropped_slots_and_more_rows_match_the_model),
        cmocka_unit_test(test_padded_mode_and_restore_shape_are_ignored),
        cmocka_unit_test(test_an_empty_output_succeeds_without_reading_anything),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
