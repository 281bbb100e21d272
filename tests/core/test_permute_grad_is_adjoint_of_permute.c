/*
 * MoeTokenPermuteGrad is the adjoint of MoeTokenPermute: for any tokens x
 * and any y shaped like the permuted tokens,
 *
 *   <Permute(x), y> == <x, PermuteGrad(y)>
 *
 * with PermuteGrad run on Permute's own sorted_indices_out, dropped slots
 * (num_out_tokens < N*K) included.  Values are small integers, so every
 * sum the operators form is exact in each dtype and both inner products are
 * computed exactly in int64: the identity holds to the last unit, not
 * within a tolerance.
 *
 * Each case is numbered; its seed is its number (MOEPERM_TEST_CASE=N runs
 * one case alone).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "call_permute_grad.h"
#include "call_family.h"
#include "naive.h"
#include "naive_family.h"

static const moeperm_dtype dtypes[3] = {MOEPERM_FLOAT, MOEPERM_BF16, MOEPERM_FLOAT16};

/* A small integer v in dtype's bits, written with the tests' conversions. */
static void put(moeperm_dtype dtype, void *base, int64_t i, int v)
{
    if (dtype == MOEPERM_FLOAT)
        ((float *)base)[i] = (float)v;
    else if (dtype == MOEPERM_BF16)
        ((uint16_t *)base)[i] = naive_float_to_bf16((float)v);
    else
        ((uint16_t *)base)[i] = naive_float_to_fp16((float)v);
}

static int64_t get(moeperm_dtype dtype, const void *base, int64_t i)
{
    return (int64_t)naive_load(dtype, base, i);
}

static void check_case(int number, moeperm_dtype dtype, int64_t tokens, int64_t top_k,
                       int64_t hidden, int64_t num_out_tokens)
{
    uint64_t rng = (uint64_t)number;
    size_t es = naive_size(dtype);
    int64_t count = tokens * top_k, num_out = naive_num_out(num_out_tokens, count);
    void *x = malloc((size_t)(tokens * hidden) * es + 1);
    void *y = malloc((size_t)(num_out * hidden) * es + 1);
    void *px = malloc((size_t)(num_out * hidden) * es + 1);
    void *gy = malloc((size_t)(tokens * hidden) * es + 1);
    int32_t *ids = malloc((size_t)count * 4 + 1), *sorted = malloc((size_t)count * 4 + 1);
    assert_true(x && y && px && gy && ids && sorted);
    for (int64_t i = 0; i < tokens * hidden; i++)
        put(dtype, x, i, (int)(naive_rand(&rng) % 17) - 8);
    for (int64_t i = 0; i < num_out * hidden; i++)
        put(dtype, y, i, (int)(naive_rand(&rng) % 17) - 8);
    for (int64_t i = 0; i < count; i++) {
        uint64_t r = naive_rand(&rng);
        ids[i] = (int32_t)(r % 6);
        if ((r >> 32) % 16 == 0) /* now and then a sentinel */
            ids[i] = (r >> 40) & 1 ? INT32_MAX : INT32_MIN;
    }

    moeperm_status status = call_permute(dtype, x, tokens, hidden, MOEPERM_INT32, ids, top_k,
                                         false, num_out_tokens, px, sorted);
    if (status != MOEPERM_SUCCESS)
        fail_msg("case %d: permute: status %d: %s", number, status, moeperm_last_error());
    status = call_permute_grad(dtype, y, num_out, hidden, sorted, tokens, top_k, gy);
    if (status != MOEPERM_SUCCESS)
        fail_msg("case %d: permute grad: status %d: %s", number, status, moeperm_last_error());

    int64_t forward = 0, backward = 0;
    for (int64_t i = 0; i < num_out * hidden; i++)
        forward += get(dtype, px, i) * get(dtype, y, i);
    for (int64_t i = 0; i < tokens * hidden; i++)
        backward += get(dtype, x, i) * get(dtype, gy, i);
    if (forward != backward)
        fail_msg("case %d (dtype %d, T=%lld K=%lld H=%lld num_out %lld): <Permute(x), y> = %lld "
                 "but <x, PermuteGrad(y)> = %lld",
                 number, dtype, (long long)tokens, (long long)top_k, (long long)hidden,
                 (long long)num_out, (long long)forward, (long long)backward);
    free(x);
    free(y);
    free(px);
    free(gy);
    free(ids);
    free(sorted);
}

static void test_inner_products_agree_exactly_with_and_without_dropped_slots(void **state)
{
    (void)state;
    const char *only = getenv("MOEPERM_TEST_CASE");
    for (int number = 0; number < 300; number++) {
        if (only && atoi(only) != number)
            continue;
        uint64_t rng = (uint64_t)number * 31337u + 5;
        int64_t tokens = 1 + (int64_t)(naive_rand(&rng) % 50);
        int64_t top_k = 1 + (int64_t)(naive_rand(&rng) % 9);
        int64_t hidden = 1 + (int64_t)(naive_rand(&rng) % 33);
        int64_t count = tokens * top_k;
        /* half the cases drop slots: num_out_tokens in [-count, count) */
        int64_t num_out = number % 2 ? 0 : (int64_t)(naive_rand(&rng) % (uint64_t)(2 * count)) - count;
        check_case(number, dtypes[number % 3], tokens, top_k, hidden, num_out);
    }
}

static void test_every_slot_dropped_gives_zero_on_both_sides(void **state)
{
    (void)state;
    for (int d = 0; d < 3; d++)
        check_case(1000 + d, dtypes[d], 7, 4, 9, -28);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inner_products_agree_exactly_with_and_without_dropped_slots),
        cmocka_unit_test(test_every_slot_dropped_gives_zero_on_both_sides),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
