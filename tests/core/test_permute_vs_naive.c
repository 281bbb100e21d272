/*
 * MoeTokenPermute against the tests' own model (naive_family.c): the
 * stable rank counted pair by pair and a row copy, byte for byte.  Random
 * cases cover every tokens dtype (int8 too), int32 and int64 ids, [N, K]
 * and [N] indices, the num_out_tokens rule (0, negative, positive, clamped
 * at both ends) and the sentinel ids; then NaN payloads, strided views and
 * thread counts.
 *
 * Each random case is numbered; its seed is its number (MOEPERM_TEST_CASE=N
 * runs one case alone).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "call_family.h"
#include "core/internal.h"
#include "permute/permute.h"
#include "naive.h"
#include "naive_family.h"

static const moeperm_dtype token_dtypes[4] = {MOEPERM_BF16, MOEPERM_FLOAT16, MOEPERM_FLOAT,
                                              MOEPERM_INT8};

static size_t dtype_size(moeperm_dtype dtype)
{
    return dtype == MOEPERM_FLOAT ? 4 : dtype == MOEPERM_INT8 ? 1 : 2;
}

/* ids in [0, experts), a tenth of them the index dtype's minimum or maximum */
static void draw_ids(uint64_t *rng, moeperm_dtype index_dtype, int64_t experts, int64_t *wide,
                     void *ids, int64_t count)
{
    for (int64_t i = 0; i < count; i++) {
        uint64_t r = naive_rand(rng);
        int64_t id = (int64_t)(r % (uint64_t)experts);
        if ((r >> 32) % 10 == 0)
            id = index_dtype == MOEPERM_INT64 ? ((r >> 40) & 1 ? INT64_MAX : INT64_MIN)
                                              : ((r >> 40) & 1 ? INT32_MAX : INT32_MIN);
        wide[i] = id;
        if (index_dtype == MOEPERM_INT64)
            ((int64_t *)ids)[i] = id;
        else
            ((int32_t *)ids)[i] = (int32_t)id;
    }
}

static void check_case(int number, moeperm_dtype dtype, moeperm_dtype index_dtype,
                       int64_t tokens, int64_t top_k, bool one_dim, int64_t hidden,
                       int64_t experts, int64_t num_out_tokens)
{
    uint64_t rng = (uint64_t)number;
    size_t es = dtype_size(dtype), is = index_dtype == MOEPERM_INT64 ? 8 : 4;
    int64_t count = tokens * top_k, num_out = naive_num_out(num_out_tokens, count);
    unsigned char *x = malloc((size_t)(tokens * hidden) * es + 1);
    void *ids = malloc((size_t)count * is + 1);
    int64_t *wide = malloc((size_t)count * sizeof *wide + 1);
    unsigned char *want = malloc((size_t)(num_out * hidden) * es + 1);
    unsigned char *got = malloc((size_t)(num_out * hidden) * es + 1);
    int32_t *want_sorted = malloc((size_t)count * 4 + 1), *got_sorted = malloc((size_t)count * 4 + 1);
    assert_true(x && ids && wide && want && got && want_sorted && got_sorted);
    /* any bits at all: NaNs with payloads, infinities, subnormals */
    for (int64_t i = 0; i < tokens * hidden * (int64_t)es; i++)
        x[i] = (unsigned char)naive_rand(&rng);
    draw_ids(&rng, index_dtype, experts, wide, ids, count);
    naive_permute(es, x, tokens, hidden, wide, top_k, num_out, want, want_sorted);
    memset(got, 0xa5, (size_t)(num_out * hidden) * es);
    memset(got_sorted, 0xa5, (size_t)count * 4);

    moeperm_status status = call_permute(dtype, x, tokens, hidden, index_dtype, ids, top_k,
                                         one_dim, num_out_tokens, got, got_sorted);
    if (status != MOEPERM_SUCCESS)
        fail_msg("case %d: status %d: %s", number, status, moeperm_last_error());
    for (int64_t i = 0; i < count; i++)
        if (got_sorted[i] != want_sorted[i])
            fail_msg("case %d: sorted_indices_out[%lld] = %d, expected %d (id %lld)", number,
                     (long long)i, got_sorted[i], want_sorted[i], (long long)wide[i]);
    for (int64_t i = 0; i < num_out * hidden * (int64_t)es; i++)
        if (got[i] != want[i])
            fail_msg("case %d (dtype %d, T=%lld K=%lld H=%lld num_out %lld): row %lld byte "
                     "%lld is 0x%02x, expected 0x%02x",
                     number, dtype, (long long)tokens, (long long)top_k, (long long)hidden,
                     (long long)num_out, (long long)(i / (hidden * (int64_t)es)),
                     (long long)(i % (hidden * (int64_t)es)), got[i], want[i]);
    free(x);
    free(ids);
    free(wide);
    free(want);
    free(got);
    free(want_sorted);
    free(got_sorted);
}

static void test_random_cases_match_naive_model_in_every_dtype(void **state)
{
    (void)state;
    const char *only = getenv("MOEPERM_TEST_CASE");
    for (int number = 0; number < 400; number++) {
        if (only && atoi(only) != number)
            continue;
        uint64_t rng = (uint64_t)number * 7919u + 11;
        moeperm_dtype dtype = token_dtypes[number % 4];
        moeperm_dtype index_dtype = (number / 4) % 2 ? MOEPERM_INT64 : MOEPERM_INT32;
        bool one_dim = number % 7 == 3;
        int64_t tokens = (int64_t)(naive_rand(&rng) % 60);
        int64_t top_k = one_dim ? 1 : 1 + (int64_t)(naive_rand(&rng) % 9);
        int64_t hidden = 1 + (int64_t)(naive_rand(&rng) % 40);
        int64_t experts = 1 + (int64_t)(naive_rand(&rng) % 20);
        int64_t count = tokens * top_k;
        /* num_out_tokens over [-2*count - 1, 2*count + 1]: negative, zero,
         * positive and clamped at both ends */
        int64_t num_out = (int64_t)(naive_rand(&rng) % (uint64_t)(4 * count + 3)) - 2 * count - 1;
        check_case(number, dtype, index_dtype, tokens, top_k, one_dim, hidden, experts, num_out);
    }
}

static void test_num_out_tokens_rule_zero_negative_positive_and_clamped(void **state)
{
    (void)state;
    /* T = 10, K = 3: 30 copies */
    const int64_t values[] = {0, -1, -29, -30, -31, -1000, 1, 17, 29, 30, 31, 1000,
                              INT64_MIN, INT64_MAX};
    for (size_t v = 0; v < sizeof values / sizeof values[0]; v++)
        for (int d = 0; d < 4; d++)
            check_case(2000 + (int)v * 4 + d, token_dtypes[d],
                       d % 2 ? MOEPERM_INT64 : MOEPERM_INT32, 10, 3, false, 5, 4, values[v]);
}

static void test_sentinels_sort_first_and_last_in_entry_order(void **state)
{
    (void)state;
    /* int32: minimum -> the first rows, maximum -> the last, each stable */
    int32_t ids[8] = {INT32_MAX, 3, INT32_MIN, 3, INT32_MIN, INT32_MAX, 0, 16777214};
    const int32_t expected[8] = {6, 3, 0, 4, 1, 7, 2, 5};
    float x[4 * 2] = {1, 2, 3, 4, 5, 6, 7, 8}, y[8 * 2];
    int32_t sorted[8];
    assert_int_equal(call_permute(MOEPERM_FLOAT, x, 4, 2, MOEPERM_INT32, ids, 2, false, 0, y,
                                  sorted),
                     MOEPERM_SUCCESS);
    for (int i = 0; i < 8; i++)
        assert_int_equal(sorted[i], expected[i]);
    /* row 0 holds token 1 (entry 2 = token 1's slot 0), row 7 token 2 */
    assert_true(y[0] == 3 && y[1] == 4 && y[14] == 5 && y[15] == 6);

    int64_t wide[8] = {INT64_MAX, 3, INT64_MIN, 3, INT64_MIN, INT64_MAX, 0, 16777214};
    memset(sorted, 0, sizeof sorted);
    assert_int_equal(call_permute(MOEPERM_FLOAT, x, 4, 2, MOEPERM_INT64, wide, 2, false, 0, y,
                                  sorted),
                     MOEPERM_SUCCESS);
    for (int i = 0; i < 8; i++)
        assert_int_equal(sorted[i], expected[i]);
}

static void test_nan_payloads_and_int8_bits_are_copied_unchanged(void **state)
{
    (void)state;
    const uint32_t f32[4] = {0x7f800001u, 0xffbfffffu, 0x7fc12345u, 0x00000001u};
    const uint16_t h16[4] = {0x7c01, 0xfd55, 0x7f81, 0x8001};
    const int8_t i8[4] = {-128, 127, -1, 0};
    const int32_t ids[4] = {1, 0, 1, 0};
    int32_t sorted[4];
    uint32_t f32_out[4];
    uint16_t h16_out[4];
    int8_t i8_out[4];
    /* one column, K = 1: ids 1 0 1 0 put tokens 1 and 3 first, then 0 and 2 */
    assert_int_equal(call_permute(MOEPERM_FLOAT, f32, 4, 1, MOEPERM_INT32, ids, 1, true, 0,
                                  f32_out, sorted),
                     MOEPERM_SUCCESS);
    assert_true(f32_out[0] == f32[1] && f32_out[1] == f32[3] && f32_out[2] == f32[0] &&
                f32_out[3] == f32[2]);
    assert_int_equal(call_permute(MOEPERM_BF16, h16, 4, 1, MOEPERM_INT32, ids, 1, true, 0,
                                  h16_out, sorted),
                     MOEPERM_SUCCESS);
    assert_true(h16_out[0] == h16[1] && h16_out[1] == h16[3] && h16_out[2] == h16[0] &&
                h16_out[3] == h16[2]);
    assert_int_equal(call_permute(MOEPERM_FLOAT16, h16, 4, 1, MOEPERM_INT32, ids, 1, true, 0,
                                  h16_out, sorted),
                     MOEPERM_SUCCESS);
    assert_true(h16_out[2] == 0x7c01 && h16_out[0] == 0xfd55);
    assert_int_equal(call_permute(MOEPERM_INT8, i8, 4, 1, MOEPERM_INT32, ids, 1, true, 0, i8_out,
                                  sorted),
                     MOEPERM_SUCCESS);
    assert_true(i8_out[0] == 127 && i8_out[1] == 0 && i8_out[2] == -128 && i8_out[3] == -1);
}

/* Every tensor a strided view with gaps; the gaps keep their pattern. */
static void test_strided_views_match_naive_model_and_leave_gaps_untouched(void **state)
{
    (void)state;
    enum { T = 9, K = 3, H = 5, N = T * K, NUM_OUT = N - 4 };
    for (int d = 0; d < 4; d++) {
        moeperm_dtype dtype = token_dtypes[d];
        size_t es = dtype_size(dtype);
        uint64_t rng = 4242u + (uint64_t)d;
        unsigned char x_dense[T * H * 4], want[NUM_OUT * H * 4];
        int64_t wide[N];
        int32_t want_sorted[N];
        int64_t ids_dense[N];
        for (size_t i = 0; i < sizeof x_dense; i++)
            x_dense[i] = (unsigned char)naive_rand(&rng);
        draw_ids(&rng, MOEPERM_INT64, 4, wide, ids_dense, N);
        naive_permute(es, x_dense, T, H, wide, K, NUM_OUT, want, want_sorted);

        /* tokens: row stride 2H+1, column stride 2, offset 3 */
        int64_t x_strides[2] = {2 * H + 1, 2}, x_dims[2] = {T, H};
        unsigned char x[(3 + T * (2 * H + 1)) * 4];
        memset(x, 0, sizeof x);
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++)
                memcpy(x + (3 + t * (2 * H + 1) + 2 * h) * es, x_dense + (t * H + h) * es, es);
        /* ids: int64, row stride 2K, column stride 2 */
        int64_t ids[2 * N], id_strides[2] = {2 * K, 2}, id_dims[2] = {T, K};
        for (int i = 0; i < N; i++)
            ids[2 * i] = wide[i], ids[2 * i + 1] = 99999999;
        /* outputs: rows 3H apart, columns 3 apart, offset 1; sorted stride 2 */
        int64_t y_strides[2] = {3 * H, 3}, y_dims[2] = {NUM_OUT, H};
        unsigned char y[(1 + NUM_OUT * 3 * H) * 4];
        memset(y, 0x5a, sizeof y);
        int32_t sorted[2 * N];
        int64_t s_strides[1] = {2}, s_dims[1] = {N};
        memset(sorted, 0x5a, sizeof sorted);

        moeperm_tensor *tx = moeperm_tensor_create(x_dims, 2, dtype, x_strides, 3, x);
        moeperm_tensor *ti = moeperm_tensor_create(id_dims, 2, MOEPERM_INT64, id_strides, 0, ids);
        moeperm_tensor *ty = moeperm_tensor_create(y_dims, 2, dtype, y_strides, 1, y);
        moeperm_tensor *ts = moeperm_tensor_create(s_dims, 1, MOEPERM_INT32, s_strides, 0, sorted);
        uint64_t ws;
        moeperm_executor *plan;
        assert_int_equal(moeperm_token_permute_get_workspace_size(tx, ti, -4, false, ty, ts, &ws,
                                                                  &plan),
                         MOEPERM_SUCCESS);
        assert_int_equal(moeperm_token_permute(NULL, ws, plan, NULL), MOEPERM_SUCCESS);
        for (int i = 0; i < N; i++) {
            assert_int_equal(sorted[2 * i], want_sorted[i]);
            assert_int_equal(sorted[2 * i + 1], 0x5a5a5a5a);
        }
        for (size_t b = 0; b < (1 + NUM_OUT * 3 * H) * es; b++) {
            size_t element = b / es;
            bool inside =
                element >= 1 && (element - 1) % 3 == 0 && (element - 1) / (3 * H) < NUM_OUT;
            if (!inside) {
                if (y[b] != 0x5a)
                    fail_msg("dtype %d: byte %zu outside the view changed", dtype, b);
                continue;
            }
            size_t r = (element - 1) / (3 * H), h = (element - 1) % (3 * H) / 3;
            if (y[b] != want[(r * H + h) * es + b % es])
                fail_msg("dtype %d: row %zu column %zu differs from the model", dtype, r, h);
        }
        moeperm_tensor_destroy(tx);
        moeperm_tensor_destroy(ti);
        moeperm_tensor_destroy(ty);
        moeperm_tensor_destroy(ts);
    }
}

/* A case large enough for three threads (about 80 MB moved): 1, 2 and 3
 * threads give the model's bytes. */
static void test_thread_counts_1_to_3_give_the_same_bytes(void **state)
{
    (void)state;
    enum { T = 1024, K = 8, H = 2048, N = T * K };
    uint64_t rng = 77;
    float *x = malloc(sizeof(float) * T * H), *want = malloc(sizeof(float) * N * H),
          *got = malloc(sizeof(float) * N * H);
    int32_t *ids = malloc(sizeof(int32_t) * N), *want_sorted = malloc(sizeof(int32_t) * N),
            *sorted = malloc(sizeof(int32_t) * N);
    int64_t *wide = malloc(sizeof(int64_t) * N);
    assert_true(x && want && got && ids && want_sorted && sorted && wide);
    for (int64_t i = 0; i < (int64_t)T * H; i++)
        x[i] = (float)(naive_rand(&rng) % 1000);
    draw_ids(&rng, MOEPERM_INT32, 64, wide, ids, N);
    naive_permute(4, x, T, H, wide, K, N, want, want_sorted);
    int64_t x_dims[2] = {T, H}, id_dims[2] = {T, K}, y_dims[2] = {N, H}, s_dims[1] = {N};
    moeperm_tensor *tx = moeperm_tensor_create(x_dims, 2, MOEPERM_FLOAT, NULL, 0, x);
    moeperm_tensor *ti = moeperm_tensor_create(id_dims, 2, MOEPERM_INT32, NULL, 0, ids);
    moeperm_tensor *ty = moeperm_tensor_create(y_dims, 2, MOEPERM_FLOAT, NULL, 0, got);
    moeperm_tensor *ts = moeperm_tensor_create(s_dims, 1, MOEPERM_INT32, NULL, 0, sorted);
    for (int threads = 1; threads <= 3; threads++) {
        uint64_t ws;
        moeperm_executor *plan;
        assert_int_equal(
            moeperm_token_permute_get_workspace_size(tx, ti, 0, false, ty, ts, &ws, &plan),
            MOEPERM_SUCCESS);
        memset(got, 0, sizeof(float) * N * H);
        memset(sorted, 0, sizeof(int32_t) * N);
        assert_int_equal(moeperm_permute_run(plan->plan, threads), MOEPERM_SUCCESS);
        moeperm_executor_destroy(plan);
        if (memcmp(got, want, sizeof(float) * N * H) != 0)
            fail_msg("%d threads: permute_tokens_out differs from the model", threads);
        if (memcmp(sorted, want_sorted, sizeof(int32_t) * N) != 0)
            fail_msg("%d threads: sorted_indices_out differs from the model", threads);
    }
    moeperm_tensor_destroy(tx);
    moeperm_tensor_destroy(ti);
    moeperm_tensor_destroy(ty);
    moeperm_tensor_destroy(ts);
    free(x);
    free(want);
    free(got);
    free(ids);
    free(want_sorted);
    free(sorted);
    free(wide);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_cases_match_naive_model_in_every_dtype),
        cmocka_unit_test(test_num_out_tokens_rule_zero_negative_positive_and_clamped),
        cmocka_unit_test(test_sentinels_sort_first_and_last_in_entry_order),
        cmocka_unit_test(test_nan_payloads_and_int8_bits_are_copied_unchanged),
        cmocka_unit_test(test_strided_views_match_naive_model_and_leave_gaps_untouched),
        cmocka_unit_test(test_thread_counts_1_to_3_give_the_same_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
