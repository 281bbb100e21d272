/*
 * route.c - the forward's index math: expert choices -> sorted_indices.
 *
 * MoeTokenPermute groups the token copies by expert with a stable sort of
 * the flattened expert ids; sorted_indices is the inverse of that argsort
 * (spec §1).  A counting sort produces the inverse directly: walking the
 * entries in order and handing each the next free row of its expert is
 * exactly "the position of entry i in the stable sort".
 */
#include <stdlib.h>

#include "internal.h"

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

    int64_t *next_row = calloc((size_t)num_experts, sizeof *next_row);
    if (!next_row)
        return moeperm_fail(MOEPERM_ERR_INNER, "out of memory for %d expert counters",
                            num_experts);
    for (size_t i = 0; i < n; i++)
        next_row[expert_ids[i]]++;
    int64_t start = 0; /* counts -> first row of each expert */
    for (int32_t e = 0; e < num_experts; e++) {
        int64_t count = next_row[e];
        next_row[e] = start;
        start += count;
    }
    for (size_t i = 0; i < n; i++)
        sorted_indices[i] = (int32_t)next_row[expert_ids[i]]++;
    free(next_row);
    return MOEPERM_SUCCESS;
}
