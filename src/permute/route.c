/*
 * route.c - the forward's index math: expert choices -> sorted_indices.
 *
 * MoeTokenPermute groups the token copies by expert with a stable sort of
 * the flattened expert ids; sorted_indices is the inverse of that argsort
 * (docs/operators.md).  A counting sort produces the inverse directly:
 * walking the entries in order and handing each the next free row of its
 * expert is exactly "the position of entry i in the stable sort".  Its
 * counters cover only the ids that occur; ids spread far wider than their
 * count are sorted instead.  This is the project's one sort: the public
 * routing function and the operator (permute.c, which maps its int32 or
 * int64 ids and their sentinels to int32 keys) both call
 * moeperm_route_ranks().
 */
#include <stdlib.h>

#include "core/internal.h"
#include "permute/permute.h"

/* One entry of the sort: its expert, then its position, so that equal
 * experts keep their order (the stable sort of docs/operators.md). */
typedef struct routed_entry {
    int32_t expert, entry;
} routed_entry;

static int compare_entries(const void *a, const void *b)
{
    const routed_entry *x = a, *y = b;
    if (x->expert != y->expert)
        return x->expert < y->expert ? -1 : 1;
    return (x->entry > y->entry) - (x->entry < y->entry);
}

/* The stable argsort itself, inverted, for keys spread much wider than
 * their count. */
static moeperm_status route_by_sorting(const int32_t *keys, size_t n, int32_t *ranks)
{
    routed_entry *entries = malloc(n * sizeof *entries);
    if (!entries)
        return moeperm_fail(MOEPERM_ERR_INNER, "out of memory sorting %zu expert ids", n);
    for (size_t i = 0; i < n; i++)
        entries[i] = (routed_entry){keys[i], (int32_t)i};
    qsort(entries, n, sizeof *entries, compare_entries);
    for (size_t row = 0; row < n; row++)
        ranks[entries[row].entry] = (int32_t)row;
    free(entries);
    return MOEPERM_SUCCESS;
}

moeperm_status moeperm_route_ranks(const int32_t *keys, size_t n, int32_t *ranks)
{
    if (n == 0)
        return MOEPERM_SUCCESS;

    /* Counters for the span of keys that occur, not for every possible key:
     * a caller may name 2^31 experts for a handful of entries.  When even
     * the span is much wider than the entries, sort the entries instead. */
    int32_t lowest = keys[0], highest = keys[0];
    for (size_t i = 1; i < n; i++) {
        lowest = keys[i] < lowest ? keys[i] : lowest;
        highest = keys[i] > highest ? keys[i] : highest;
    }
    size_t span = (size_t)((int64_t)highest - lowest + 1);
    if (span > 2 * n + 64)
        return route_by_sorting(keys, n, ranks);

    int64_t *next_row = calloc(span, sizeof *next_row);
    if (!next_row)
        return moeperm_fail(MOEPERM_ERR_INNER, "out of memory for %zu expert counters", span);
    for (size_t i = 0; i < n; i++)
        next_row[keys[i] - lowest]++;
    int64_t start = 0; /* counts -> first row of each key */
    for (size_t e = 0; e < span; e++) {
        int64_t count = next_row[e];
        next_row[e] = start;
        start += count;
    }
    for (size_t i = 0; i < n; i++)
        ranks[i] = (int32_t)next_row[keys[i] - lowest]++;
    free(next_row);
    return MOEPERM_SUCCESS;
}

moeperm_status moeperm_route_sorted_indices(const int32_t *expert_ids, size_t n,
                                            int32_t num_experts, int32_t *sorted_indices)
{
    if (n > 0 && !expert_ids)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR, "expert_ids is NULL with n = %zu", n);
    if (n > 0 && !sorted_indices)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR, "sorted_indices is NULL with n = %zu",
                            n);
    if (n > (size_t)INT32_MAX)
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                            "n = %zu entries is above the %d that int32 indices address", n,
                            INT32_MAX);
    if (num_experts < 1)
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID, "num_experts = %d is below 1",
                            num_experts);
    for (size_t i = 0; i < n; i++)
        if (expert_ids[i] < 0 || expert_ids[i] >= num_experts)
            return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                                "expert_ids[%zu] = %d is outside [0, %d]", i, expert_ids[i],
                                num_experts - 1);
    return moeperm_route_ranks(expert_ids, n, sorted_indices);
}
