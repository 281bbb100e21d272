/*
 * The inputs of MoeTokenPermute the Atlas A2/A3 device takes beyond 2-D
 * tokens (docs/operators.md, "The input domain"), checked against the
 * tests' own model (naive_family.c): tokens of rank 3 and 4 whose rows are
 * the product of the trailing dims (moe_token_permute_tiling.cpp:300-305),
 * an output of another rank with the same trailing product, views whose
 * trailing dims do not fold into one stride; and an empty output pair,
 * which the device answers with success before its tiling, even with
 * padded_mode = true.
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

enum { N = 5, K = 3, A = 4, B = 3, C = 2 };

/* One call: tokens of `ndim` dims and strides (NULL: contiguous), ids
 * [N, K] int32, permute_tokens_out of out_ndim dims, sorted [N*K]. */
static moeperm_status call(const int64_t *tokens_dims, uint64_t ndim,
                           const int64_t *tokens_strides, const void *tokens,
                           const int32_t *ids, int64_t num_out_tokens, bool padded_mode,
                           const int64_t *out_dims, uint64_t out_ndim, void *out,
                           int32_t *sorted, int64_t sorted_len)
{
    int64_t id[2] = {tokens_dims[0], K}, sd[1] = {sorted_len};
    moeperm_tensor *t =
        moeperm_tensor_create(tokens_dims, ndim, MOEPERM_BF16, tokens_strides, 0, (void *)tokens);
    moeperm_tensor *ix = moeperm_tensor_create(id, 2, MOEPERM_INT32, NULL, 0, (void *)ids);
    moeperm_tensor *o = moeperm_tensor_create(out_dims, out_ndim, MOEPERM_BF16, NULL, 0, out);
    moeperm_tensor *s = moeperm_tensor_create(sd, 1, MOEPERM_INT32, NULL, 0, sorted);
    assert_true(t && ix && o && s);
    uint64_t workspace = 1;
    moeperm_executor *plan = NULL;
    moeperm_status status = moeperm_token_permute_get_workspace_size(
        t, ix, num_out_tokens, padded_mode, o, s, &workspace, &plan);
    moeperm_tensor_destroy(t);
    moeperm_tensor_destroy(ix);
    moeperm_tensor_destroy(o);
    moeperm_tensor_destroy(s);
    if (status != MOEPERM_SUCCESS)
        return status;
    return moeperm_token_permute(NULL, 0, plan, NULL);
}

/* tokens [N, A, B, C] in row-major order, token n element h = (n, h). */
static void fill_tokens(uint16_t *tokens)
{
    for (int i = 0; i < N * A * B * C; i++)
        tokens[i] = (uint16_t)(0x3f80 + i);
}

static void test_tokens_of_rank_3_and_4_permute_their_flattened_rows(void **state)
{
    (void)state;
    uint16_t tokens[N * A * B * C], want[N * K * A * B * C], got[N * K * A * B * C];
    int32_t ids[N * K], want_sorted[N * K], sorted[N * K];
    int64_t ids64[N * K];
    fill_tokens(tokens);
    for (int i = 0; i < N * K; i++) {
        ids[i] = (i * 7) % 4;
        ids64[i] = ids[i];
    }
    const int64_t hidden = A * B * C, num_out = N * K - 2;
    naive_permute(2, tokens, N, hidden, ids64, K, num_out, want, want_sorted);
    /* [N, A, B, C] into [R, A, B, C], [R, A * B * C] and [R, A * B, C] */
    const int64_t in4[4] = {N, A, B, C}, in3[3] = {N, A * B, C};
    const int64_t out4[4] = {num_out, A, B, C}, out2[2] = {num_out, hidden},
                  out3[3] = {num_out, A, B * C};
    const struct {
        const int64_t *in, *out;
        uint64_t in_ndim, out_ndim;
    } shapes[] = {{in4, out4, 4, 4}, {in4, out2, 4, 2}, {in3, out3, 3, 3}};
    for (size_t c = 0; c < sizeof shapes / sizeof *shapes; c++) {
        memset(got, EXPECT_FILL, sizeof got);
        memset(sorted, EXPECT_FILL, sizeof sorted);
        assert_int_equal(call(shapes[c].in, shapes[c].in_ndim, NULL, tokens, ids, -2, false,
                              shapes[c].out, shapes[c].out_ndim, got, sorted, N * K),
                         MOEPERM_SUCCESS);
        assert_memory_equal(sorted, want_sorted, sizeof sorted);
        assert_memory_equal(got, want, (size_t)(num_out * hidden) * 2);
    }
}

/* tokens [N, A, B] seen through strides that do not fold into one: each
 * token's [A, B] stored transposed.  Element (a, b) of token n is
 * element b * A + a of its storage. */
static void test_trailing_dims_that_do_not_fold_are_copied_element_by_element(void **state)
{
    (void)state;
    uint16_t storage[N * A * B], flat[N * A * B], want[N * K * A * B], got[N * K * A * B];
    int32_t ids[N * K], want_sorted[N * K], sorted[N * K];
    int64_t ids64[N * K];
    for (int i = 0; i < N * A * B; i++)
        storage[i] = (uint16_t)(0x4000 + i);
    for (int n = 0; n < N; n++)
        for (int a = 0; a < A; a++)
            for (int b = 0; b < B; b++)
                flat[(n * A + a) * B + b] = storage[n * A * B + b * A + a];
    for (int i = 0; i < N * K; i++) {
        ids[i] = (i * 5 + 1) % 3;
        ids64[i] = ids[i];
    }
    naive_permute(2, flat, N, A * B, ids64, K, N * K, want, want_sorted);
    const int64_t dims[3] = {N, A, B}, strides[3] = {A * B, 1, A};
    const int64_t out_dims[3] = {N * K, A, B};
    memset(got, EXPECT_FILL, sizeof got);
    assert_int_equal(
        call(dims, 3, strides, storage, ids, 0, false, out_dims, 3, got, sorted, N * K),
        MOEPERM_SUCCESS);
    assert_memory_equal(sorted, want_sorted, sizeof sorted);
    assert_memory_equal(got, want, sizeof want);
}

/* Both outputs empty (no tokens): success, nothing read or written, even
 * with what the tiling would refuse. */
static void test_empty_outputs_succeed_before_the_tiling(void **state)
{
    (void)state;
    const int64_t dims[2] = {0, 7}, out_dims[2] = {0, 7};
    assert_int_equal(call(dims, 2, NULL, NULL, NULL, 0, true, out_dims, 2, NULL, NULL, 0),
                     MOEPERM_SUCCESS);
    /* with elements, the tiling refuses padded_mode */
    uint16_t tokens[N * A * B * C], out[N * K * A * B * C];
    int32_t ids[N * K] = {0}, sorted[N * K];
    const int64_t in2[2] = {N, A * B * C}, out2[2] = {N * K, A * B * C};
    memset(out, EXPECT_FILL, sizeof out);
    memset(sorted, EXPECT_FILL, sizeof sorted);
    fill_tokens(tokens);
    assert_int_equal(call(in2, 2, NULL, tokens, ids, 0, true, out2, 2, out, sorted, N * K),
                     MOEPERM_ERR_INNER_TILING_ERROR);
    expect_untouched(out, sizeof out, "permute_tokens_out");
    expect_untouched(sorted, sizeof sorted, "sorted_indices_out");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tokens_of_rank_3_and_4_permute_their_flattened_rows),
        cmocka_unit_test(test_trailing_dims_that_do_not_fold_are_copied_element_by_element),
        cmocka_unit_test(test_empty_outputs_succeed_before_the_tiling),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
