/*
 * MoeTokenPermute's sorted_indices_out is the routing function's
 * sorted_indices: for the same expert ids, moeperm_token_permute() and
 * moeperm_route_sorted_indices() give the same int32s, with int32 and int64
 * ids, [N, K] and [N] indices, any num_out_tokens, counted experts (few,
 * skewed, all equal) and ids spread so wide that the sort replaces the
 * counters.
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

#include "call_family.h"
#include "naive.h"

static void check_case(int number, int64_t tokens, int64_t top_k, int32_t experts, int skew,
                       moeperm_dtype index_dtype, bool one_dim, int64_t num_out_tokens)
{
    uint64_t rng = (uint64_t)number;
    int64_t count = tokens * top_k, hidden = 3;
    int32_t *ids = malloc((size_t)count * sizeof *ids + 1);
    int64_t *wide = malloc((size_t)count * sizeof *wide + 1);
    int32_t *want = malloc((size_t)count * sizeof *want + 1);
    int32_t *got = malloc((size_t)count * sizeof *got + 1);
    uint16_t *x = calloc((size_t)(tokens * hidden) + 1, sizeof *x);
    uint16_t *y = malloc((size_t)(count * hidden) * sizeof *y + 1);
    assert_true(ids && wide && want && got && x && y);
    for (int64_t i = 0; i < count; i++) {
        uint64_t r = naive_rand(&rng) % (uint64_t)experts;
        if (skew) /* squares crowd the low experts */
            r = r * r / (uint64_t)experts;
        ids[i] = (int32_t)r;
        wide[i] = r;
    }
    assert_int_equal(moeperm_route_sorted_indices(ids, (size_t)count, experts, want),
                     MOEPERM_SUCCESS);
    memset(got, 0xa5, (size_t)count * sizeof *got);
    const void *indices = index_dtype == MOEPERM_INT64 ? (const void *)wide : (const void *)ids;
    moeperm_status status = call_permute(MOEPERM_BF16, x, tokens, hidden, index_dtype, indices,
                                         top_k, one_dim, num_out_tokens, y, got);
    if (status != MOEPERM_SUCCESS)
        fail_msg("case %d: status %d: %s", number, status, moeperm_last_error());
    for (int64_t i = 0; i < count; i++)
        if (got[i] != want[i])
            fail_msg("case %d (T=%lld K=%lld experts %d, %s ids): sorted_indices_out[%lld] = %d, "
                     "the routing function gives %d",
                     number, (long long)tokens, (long long)top_k, experts,
                     index_dtype == MOEPERM_INT64 ? "int64" : "int32", (long long)i, got[i],
                     want[i]);
    free(ids);
    free(wide);
    free(want);
    free(got);
    free(x);
    free(y);
}

static void test_random_routings_give_the_routing_functions_sorted_indices(void **state)
{
    (void)state;
    const char *only = getenv("MOEPERM_TEST_CASE");
    for (int number = 0; number < 200; number++) {
        if (only && atoi(only) != number)
            continue;
        uint64_t rng = (uint64_t)number * 104729u + 3;
        int64_t tokens = 1 + (int64_t)(naive_rand(&rng) % 300);
        int64_t top_k = 1 + (int64_t)(naive_rand(&rng) % 10);
        int32_t experts = 1 + (int32_t)(naive_rand(&rng) % 300);
        int64_t count = tokens * top_k;
        int64_t num_out = (int64_t)(naive_rand(&rng) % (uint64_t)(2 * count + 1)) - count;
        check_case(number, tokens, top_k, experts, number % 2,
                   number % 3 ? MOEPERM_INT32 : MOEPERM_INT64, false, num_out);
    }
}

static void test_one_dim_indices_give_the_routing_functions_sorted_indices(void **state)
{
    (void)state;
    check_case(1000, 777, 1, 16, 1, MOEPERM_INT32, true, 0);
    check_case(1001, 777, 1, 16, 0, MOEPERM_INT64, true, -5);
}

static void test_one_expert_keeps_the_entry_order(void **state)
{
    (void)state;
    check_case(1100, 50, 8, 1, 0, MOEPERM_INT32, false, 0);
}

static void test_ids_spread_wider_than_their_count_give_the_routing_functions_order(void **state)
{
    (void)state;
    /* ids up to 16777214 for a few hundred entries: the sort, not counters */
    check_case(1200, 40, 8, 16777215, 0, MOEPERM_INT32, false, 0);
    check_case(1201, 40, 8, 16777215, 0, MOEPERM_INT64, false, 100);
}

static void test_realistic_shape_gives_the_routing_functions_sorted_indices(void **state)
{
    (void)state;
    check_case(1300, 4096, 8, 256, 1, MOEPERM_INT32, false, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_routings_give_the_routing_functions_sorted_indices),
        cmocka_unit_test(test_one_dim_indices_give_the_routing_functions_sorted_indices),
        cmocka_unit_test(test_one_expert_keeps_the_entry_order),
        cmocka_unit_test(
            test_ids_spread_wider_than_their_count_give_the_routing_functions_order),
        cmocka_unit_test(test_realistic_shape_gives_the_routing_functions_sorted_indices),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
