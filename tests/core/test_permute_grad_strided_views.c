/*
 * Strided views give the same bits as contiguous ones: a gradient with
 * padded rows and every other column, indices with a stride and an offset,
 * and an output stored column-major, in all three dtypes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "call_permute_grad.h"
#include "naive.h"

static uint32_t element(const void *base, size_t es, int64_t i)
{
    return es == 4 ? ((const uint32_t *)base)[i] : ((const uint16_t *)base)[i];
}

static void set_element(void *base, size_t es, int64_t i, uint32_t v)
{
    if (es == 4)
        ((uint32_t *)base)[i] = v;
    else
        ((uint16_t *)base)[i] = (uint16_t)v;
}

static void check_strided(moeperm_dtype dtype, int64_t tokens, int64_t top_k, int64_t hidden,
                          int64_t rows, uint64_t seed)
{
    size_t es = naive_size(dtype);
    int64_t count = tokens * top_k;
    /* grad: row stride 2*hidden + 3, column stride 2, offset 5 */
    int64_t g_rs = 2 * hidden + 3, g_cs = 2, g_off = 5;
    /* indices: stride 3, offset 1;  out: column-major with a padded column */
    int64_t i_s = 3, i_off = 1, o_rs = 1, o_cs = tokens + 1, o_off = 2;
    void *grad_dense = calloc((size_t)(rows * hidden) + 1, es);
    void *grad_strided = calloc((size_t)(g_off + rows * g_rs) + 1, es);
    int32_t *dense_idx = calloc((size_t)count + 1, 4);
    int32_t *strided_idx = calloc((size_t)(i_off + count * i_s) + 1, 4);
    void *want = calloc((size_t)(tokens * hidden) + 1, es);
    void *out_strided = calloc((size_t)(o_off + hidden * o_cs) + 1, es);
    assert_true(grad_dense && grad_strided && dense_idx && strided_idx && want && out_strided);

    uint64_t rng = seed;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t h = 0; h < hidden; h++) {
            uint32_t v = (uint32_t)naive_rand(&rng);
            if (es == 2)
                v = (v & 0x80ff) | 0x3c00; /* finite, so the comparison is exact bits */
            else
                v = (v & 0x807fffff) | 0x3f000000;
            set_element(grad_dense, es, r * hidden + h, v);
            set_element(grad_strided, es, g_off + r * g_rs + h * g_cs, v);
        }
    naive_permutation(&rng, dense_idx, count);
    for (int64_t i = 0; i < count; i++)
        strided_idx[i_off + i * i_s] = dense_idx[i];

    assert_int_equal(call_permute_grad(dtype, grad_dense, rows, hidden, dense_idx, tokens, top_k,
                                       want),
                     MOEPERM_SUCCESS);

    int64_t g_dims[2] = {rows, hidden}, g_strides[2] = {g_rs, g_cs};
    int64_t i_dims[1] = {count}, i_strides[1] = {i_s};
    int64_t o_dims[2] = {tokens, hidden}, o_strides[2] = {o_rs, o_cs};
    moeperm_tensor *g = moeperm_tensor_create(g_dims, 2, dtype, g_strides, g_off, grad_strided);
    moeperm_tensor *ix =
        moeperm_tensor_create(i_dims, 1, MOEPERM_INT32, i_strides, i_off, strided_idx);
    moeperm_tensor *o = moeperm_tensor_create(o_dims, 2, dtype, o_strides, o_off, out_strided);
    uint64_t ws;
    moeperm_executor *plan;
    moeperm_status status =
        moeperm_token_permute_grad_get_workspace_size(g, ix, top_k, false, o, &ws, &plan);
    if (status)
        fail_msg("status %d: %s", status, moeperm_last_error());
    assert_int_equal(moeperm_token_permute_grad(NULL, ws, plan, NULL), MOEPERM_SUCCESS);
    for (int64_t t = 0; t < tokens; t++)
        for (int64_t h = 0; h < hidden; h++) {
            uint32_t a = element(want, es, t * hidden + h);
            uint32_t b = element(out_strided, es, o_off + t * o_rs + h * o_cs);
            if (a != b)
                fail_msg("dtype %d token %lld column %lld: contiguous 0x%x, strided 0x%x", dtype,
                         (long long)t, (long long)h, a, b);
        }
    /* the padding the view skips is untouched */
    for (int64_t h = 0; h < hidden; h++)
        assert_int_equal(element(out_strided, es, o_off + h * o_cs + tokens), 0);
    moeperm_tensor_destroy(g);
    moeperm_tensor_destroy(ix);
    moeperm_tensor_destroy(o);
    free(grad_dense);
    free(grad_strided);
    free(dense_idx);
    free(strided_idx);
    free(want);
    free(out_strided);
}

static void test_strided_views_give_contiguous_bits(void **state)
{
    (void)state;
    const moeperm_dtype dtypes[3] = {MOEPERM_FLOAT, MOEPERM_FLOAT16, MOEPERM_BF16};
    for (int d = 0; d < 3; d++) {
        check_strided(dtypes[d], 7, 3, 19, 21, 1 + (uint64_t)d);
        check_strided(dtypes[d], 5, 4, 2100, 13, 11 + (uint64_t)d); /* across a column block */
        check_strided(dtypes[d], 64, 8, 33, 512, 21 + (uint64_t)d);
    }
}

/* A gradient with no rows (every slot dropped) addresses no element, so
 * its offset is never checked against memory and may be anything; the
 * kernel must not do arithmetic with it (offset * element size overflowed
 * int64 on the x86 path: undefined behaviour that UBSan reports, as under
 * scripts/ci-sanitize).  The output is all +0. */
static void test_grad_without_rows_ignores_any_offset(void **state)
{
    (void)state;
    const moeperm_dtype dtypes[3] = {MOEPERM_FLOAT, MOEPERM_FLOAT16, MOEPERM_BF16};
    const int64_t offsets[3] = {INT64_C(1) << 62, INT64_MAX / 2 + 1, INT64_MAX};
    enum { T = 3, K = 2, H = 40 };
    int32_t indices[T * K] = {5, 0, 3, 1, 4, 2};
    uint32_t grad[4] = {0}, out[T * H];
    int64_t grad_dims[2] = {0, H}, index_dims[1] = {T * K}, out_dims[2] = {T, H};
    for (int d = 0; d < 3; d++) {
        for (int o = 0; o < 3; o++) {
            moeperm_tensor *g =
                moeperm_tensor_create(grad_dims, 2, dtypes[d], NULL, offsets[o], grad);
            moeperm_tensor *ix =
                moeperm_tensor_create(index_dims, 1, MOEPERM_INT32, NULL, 0, indices);
            moeperm_tensor *t = moeperm_tensor_create(out_dims, 2, dtypes[d], NULL, 0, out);
            assert_true(g && ix && t);
            uint64_t workspace = 0;
            moeperm_executor *plan = NULL;
            memset(out, 0xa5, sizeof out);
            assert_int_equal(moeperm_token_permute_grad_get_workspace_size(
                                 g, ix, K, false, t, &workspace, &plan),
                             MOEPERM_SUCCESS);
            assert_int_equal(moeperm_token_permute_grad(NULL, workspace, plan, NULL),
                             MOEPERM_SUCCESS);
            for (size_t i = 0; i < naive_size(dtypes[d]) * T * H; i++)
                if (((unsigned char *)out)[i] != 0)
                    fail_msg("dtype %d offset %lld: byte %zu is %#x, expected 0", dtypes[d],
                             (long long)offsets[o], i, ((unsigned char *)out)[i]);
            moeperm_tensor_destroy(g);
            moeperm_tensor_destroy(ix);
            moeperm_tensor_destroy(t);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strided_views_give_contiguous_bits),
        cmocka_unit_test(test_grad_without_rows_ignores_any_offset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
