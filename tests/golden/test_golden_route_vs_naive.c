/*
 * moeperm_route_sorted_indices() against a naive inverse of the stable
 * argsort written here: sorted_indices[i] is the rank of (expert_ids[i], i)
 * among all pairs, which is exactly where the forward puts entry i.  Random
 * expert ids over many sizes and expert counts, including one expert (the
 * identity), more experts than entries (up to 2^31 - 1, which must not cost
 * a counter per expert), and heavy ties.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <moeperm/moeperm.h>

/* O(n^2) on purpose: no sort to get wrong. */
static void naive_route(const int32_t *ids, size_t n, int32_t *out)
{
    for (size_t i = 0; i < n; i++) {
        int32_t rank = 0;
        for (size_t j = 0; j < n; j++)
            if (ids[j] < ids[i] || (ids[j] == ids[i] && j < i))
                rank++;
        out[i] = rank;
    }
}

static uint64_t next(uint64_t *s)
{
    *s = *s * 6364136223846793005u + 1442695040888963407u;
    return *s >> 33;
}

static void test_route_matches_naive_stable_argsort_inverse(void **state)
{
    (void)state;
    /* up to 2^31 - 1 experts: ids spread far wider than the entries take
     * the sorting path, dense ones the counting path */
    static const int32_t expert_counts[] = {1, 2, 3, 8, 64, 5000, 1 << 20, INT32_MAX};
    uint64_t rng = 2026;
    for (int trial = 0; trial < 200; trial++) {
        size_t n = (size_t)(next(&rng) % 1500);
        int32_t experts = expert_counts[trial % 8];
        int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
        int32_t *got = malloc((n ? n : 1) * sizeof *got);
        int32_t *want = malloc((n ? n : 1) * sizeof *want);
        assert_non_null(ids);
        assert_non_null(got);
        assert_non_null(want);
        for (size_t i = 0; i < n; i++)
            ids[i] = (int32_t)(next(&rng) % (uint64_t)experts);
        naive_route(ids, n, want);
        assert_int_equal(moeperm_route_sorted_indices(ids, n, experts, got), MOEPERM_SUCCESS);
        if (n)
            assert_memory_equal(got, want, n * sizeof *got);
        free(ids);
        free(got);
        free(want);
    }
}

static void test_route_rejects_an_expert_out_of_range_and_leaves_output(void **state)
{
    (void)state;
    int32_t ids[4] = {0, 3, 1, 4};
    int32_t out[4] = {-7, -7, -7, -7};
    assert_int_equal(moeperm_route_sorted_indices(ids, 4, 4, out), MOEPERM_ERR_PARAM_INVALID);
    for (int i = 0; i < 4; i++)
        assert_int_equal(out[i], -7);
    assert_true(strstr(moeperm_last_error(), "4") != NULL);
    ids[3] = -1;
    assert_int_equal(moeperm_route_sorted_indices(ids, 4, 4, out), MOEPERM_ERR_PARAM_INVALID);
    assert_int_equal(moeperm_route_sorted_indices(NULL, 4, 4, out), MOEPERM_ERR_PARAM_NULLPTR);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_route_matches_naive_stable_argsort_inverse),
        cmocka_unit_test(test_route_rejects_an_expert_out_of_range_and_leaves_output),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
