/*
 * sums.c - what MoeTokenPermuteGrad's and MoeTokenUnpermute's models share:
 * which variants apply to a sum of top_k slots, the sentences both say
 * alike, and missing-slot's choice of slots (model.h).
 */
#include <inttypes.h>
#include <stdio.h>

#include "golden/judge/diagnose/model.h"

bool golden_diag_sum_indices(golden_diag_sum *s)
{
    for (int64_t i = 0; i < s->T * s->K; i++) {
        if (s->idx[i] < 0)
            return false;
        s->has_dropped |= s->idx[i] >= s->R;
    }
    return true;
}

int golden_diag_sum_narrow16(const void *ctx)
{
    const golden_diag_sum *s = ctx;
    return s->dtype != MOEPERM_FLOAT;
}

int golden_diag_sum_two(const void *ctx)
{
    const golden_diag_sum *s = ctx;
    return s->K >= 2;
}

int golden_diag_sum_pairwise(const void *ctx)
{
    const golden_diag_sum *s = ctx;
    return s->K >= 3 ? 2 : 0;
}

int golden_diag_sum_zero_start(const void *ctx)
{
    const golden_diag_sum *s = ctx;
    return s->K < MOEPERM_MAX_TOP_K;
}

int golden_diag_sum_dropped(const void *ctx)
{
    const golden_diag_sum *s = ctx;
    return !s->has_dropped ? 0 : s->R == 0 ? 1 : 3;
}

int golden_diag_sum_missing(const void *ctx)
{
    const golden_diag_sum *s = ctx;
    return (int)s->K;
}

void golden_diag_sum_select_missing(const void *ctx, const golden_diag_data *d,
                                    const int64_t *sample, size_t n, int *list, size_t *count)
{
    const golden_diag_sum *s = ctx;
    if (s->K <= GOLDEN_DIAG_SELECT_MAX) {
        size_t found = 0;
        for (int64_t k = 0; k < s->K && found < *count; k++)
            list[found++] = (int)k;
        *count = found;
        return;
    }
    golden_diag_pick_slots(d, ctx, s->K, s->contribution, sample, n, list, count);
}

void golden_diag_sum_truncate(const void *ctx, int v, char *out, size_t len)
{
    const golden_diag_sum *s = ctx;
    (void)v;
    snprintf(out, len, "the fp32 sum is narrowed to %s by truncation, not to nearest even",
             moeperm_dtype_name(s->dtype));
}

void golden_diag_sum_half_away(const void *ctx, int v, char *out, size_t len)
{
    const golden_diag_sum *s = ctx;
    (void)v;
    snprintf(out, len, "ties are rounded away from zero when narrowing to %s, not to even",
             moeperm_dtype_name(s->dtype));
}

void golden_diag_sum_reversed(const void *ctx, int v, char *out, size_t len)
{
    const golden_diag_sum *s = ctx;
    (void)v;
    snprintf(out, len, "slots are added from k = %" PRId64 " down to k = 0", s->K - 1);
}

void golden_diag_sum_missing_slot(const void *ctx, int v, char *out, size_t len)
{
    (void)ctx;
    snprintf(out, len, "slot %d is never added", v);
}
