/*
 * permute_grad.c - MoeTokenPermuteGrad's entry in the diagnosis: which
 * runs its models take (setup), which variants of each apply to a run,
 * what each finding says, and the table of models in catalogue order
 * (permute_grad_models.c computes them).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden/judge/diagnose/permute_grad_models.h"

/* Up to this top_k every missing slot is tried; beyond it only the slots
 * the differences point at. */
#define MISSING_ALL_K GOLDEN_DIAG_SELECT_MAX

static int v_narrow16(const void *ctx)
{
    const pg_ctx *x = ctx;
    return x->dtype != MOEPERM_FLOAT;
}

static int v_one(const void *ctx)
{
    const pg_ctx *x = ctx;
    return x->K >= 2;
}

static int v_pairwise(const void *ctx)
{
    const pg_ctx *x = ctx;
    return x->K >= 3 ? 2 : 0;
}

static int v_zero_start(const void *ctx)
{
    const pg_ctx *x = ctx;
    return x->K < MOEPERM_MAX_TOP_K;
}

static int v_dropped(const void *ctx)
{
    const pg_ctx *x = ctx;
    return !x->has_dropped ? 0 : x->R == 0 ? 1 : 3;
}

static int v_missing(const void *ctx)
{
    const pg_ctx *x = ctx;
    return (int)x->K;
}

static int v_rows_ignored(const void *ctx)
{
    const pg_ctx *x = ctx;
    return x->x_found;
}

static int v_ftz(const void *ctx)
{
    return 3;
}

static int v_saturate(const void *ctx)
{
    return 2;
}

static void d_acc(const void *ctx, int v, char *out, size_t len)
{
    const pg_ctx *x = ctx;
    snprintf(out, len, "the accumulator is rounded to %s after every addition",
             moeperm_dtype_name(x->dtype));
}

static void d_truncate(const void *ctx, int v, char *out, size_t len)
{
    const pg_ctx *x = ctx;
    snprintf(out, len, "the fp32 sum is narrowed to %s by truncation, not to nearest even",
             moeperm_dtype_name(x->dtype));
}

static void d_half_away(const void *ctx, int v, char *out, size_t len)
{
    const pg_ctx *x = ctx;
    snprintf(out, len, "ties are rounded away from zero when narrowing to %s, not to even",
             moeperm_dtype_name(x->dtype));
}

static void d_reversed(const void *ctx, int v, char *out, size_t len)
{
    const pg_ctx *x = ctx;
    snprintf(out, len, "slots are added from k = %" PRId64 " down to k = 0", x->K - 1);
}

static void d_pairwise(const void *ctx, int v, char *out, size_t len)
{
    const pg_ctx *x = ctx;
    if (v == 0)
        snprintf(out, len, "slots are added as a tree of neighbours: (0+1)+(2+3)+...");
    else
        snprintf(out, len,
                 "slots are added as a tree folding the upper half onto the lower: "
                 "slot k plus slot k+%" PRId64 " first",
                 (x->K + 1) / 2);
}

static void d_zero_start(const void *ctx, int v, char *out, size_t len)
{
    snprintf(out, len,
             "the accumulator starts at +0.0 instead of slot 0 (a sum of -0.0 comes "
             "out +0.0)");
}

static void d_dropped(const void *ctx, int v, char *out, size_t len)
{
    const pg_ctx *x = ctx;
    static const char *const what[] = {"add +0.0", "add row (index mod %" PRId64 ")",
                                       "add row %" PRId64 " (the last)"};
    char read[64];
    snprintf(read, sizeof read, what[v], v == 1 ? x->R : x->R - 1);
    snprintf(out, len,
             "slots whose index is %" PRId64 " (the rows of permuted_output_grad) or more are not "
             "skipped: they %s",
             x->R, read);
}

static void d_missing(const void *ctx, int v, char *out, size_t len)
{
    snprintf(out, len, "slot %d is never added", v);
}

static void d_rows_ignored(const void *ctx, int v, char *out, size_t len)
{
    const pg_ctx *x = ctx;
    if (x->x_lo == x->x_hi)
        snprintf(out, len, "rows %" PRId64 " and above of permuted_output_grad contribute nothing",
                 x->x_lo);
    else
        snprintf(out, len,
                 "rows %" PRId64 " and above of permuted_output_grad contribute nothing (any "
                 "limit from %" PRId64 " to %" PRId64 " fits)",
                 x->x_lo, x->x_lo, x->x_hi);
}

static void d_ftz(const void *ctx, int v, char *out, size_t len)
{
    static const char *const what[] = {
        "subnormal inputs are read as zero",
        "subnormal inputs are read as zero and subnormal results flushed to zero",
        "subnormals are flushed to zero in the inputs, after every addition and in the results",
    };
    snprintf(out, len, "%s", what[v]);
}

static void d_saturate(const void *ctx, int v, char *out, size_t len)
{
    const pg_ctx *x = ctx;
    if (v == 0)
        snprintf(out, len,
                 "a finite sum that overflows %s becomes +-0x%04" PRIx64 " (the largest finite "
                 "value), not +-inf",
                 moeperm_dtype_name(x->dtype), golden_bits_max_finite(x->dtype));
    else
        snprintf(out, len,
                 "every fp32 addition that overflows gives +-0x7f7fffff (the largest "
                 "finite value), not +-inf");
}

/* For a large top_k, the slots the differences point at: in a token whose
 * slot k is missing, expected minus actual is about slot k's row, so the
 * slot whose row is nearest (sum of absolute differences, in double) is the
 * golden_diag_candidate; a few differing sample tokens each name one. */
static void s_missing(const void *ctx, const golden_diag_data *d, const int64_t *sample, size_t n,
                      int *list, size_t *count)
{
    const pg_ctx *x = ctx;
    size_t cap = *count, found = 0;
    if (x->K <= MISSING_ALL_K) {
        for (int64_t k = 0; k < x->K && found < cap; k++)
            list[found++] = (int)k;
        *count = found;
        return;
    }
    size_t es = moeperm_dtype_size(x->dtype);
    for (size_t i = 0, tried = 0; i < n && tried < 8 && found < cap; i++) {
        int64_t t = sample[i];
        if (d->row_differ[t] == 0)
            continue;
        tried++;
        double best = -1;
        int best_k = -1;
        for (int64_t k = 0; k < x->K; k++) {
            int32_t r = x->idx[t * x->K + k];
            if (r >= x->R)
                continue;
            const uint8_t *row = (const uint8_t *)x->grad + (size_t)r * (size_t)x->H * es;
            double score = 0;
            for (int64_t c = 0; c < x->H; c++) {
                uint64_t i_e = (uint64_t)t * (uint64_t)x->H + (uint64_t)c;
                double e =
                    golden_bits_double(x->dtype, golden_bits_load(x->dtype, d->expected, i_e));
                double a = golden_bits_double(x->dtype, golden_bits_load(x->dtype, d->actual, i_e));
                double g =
                    golden_bits_double(x->dtype, golden_bits_load(x->dtype, row, (uint64_t)c));
                double diff = (e - a) - g;
                if (diff == diff)
                    score += diff < 0 ? -diff : diff;
            }
            if (best_k < 0 || score < best) {
                best = score;
                best_k = (int)k;
            }
        }
        bool known = best_k < 0;
        for (size_t j = 0; j < found && !known; j++)
            known = list[j] == best_k;
        if (!known)
            list[found++] = best_k;
    }
    *count = found;
}



/* Whether p is a MoeTokenPermuteGrad run the models can rearrange. */
static bool setup(const golden_diag_problem *p, const golden_diag_tensor *expected, void *ctx)
{
    pg_ctx *x = ctx;
    const golden_diag_tensor *g = golden_diag_input(p, "permuted_output_grad");
    const golden_diag_tensor *ix = golden_diag_input(p, "sorted_indices");
    int64_t k;
    if (!g || !ix ||
        (!golden_diag_attr_value(p, "top_k", &k) && !golden_diag_attr_value(p, "num_topk", &k)))
        return false;
    if (g->ndim != 2 || ix->ndim != 1 || expected->ndim != 2 || ix->dtype != MOEPERM_INT32 ||
        g->dtype != expected->dtype || !golden_bits_is_float(g->dtype) || k < 1 ||
        k > MOEPERM_MAX_TOP_K || g->dims[1] != expected->dims[1] ||
        ix->dims[0] != expected->dims[0] * k || g->dims[0] > ix->dims[0] ||
        ix->dims[0] > INT32_MAX || (g->dims[0] > 0 && !g->data) || (ix->dims[0] > 0 && !ix->data))
        return false;
    x->dtype = g->dtype;
    x->grad = g->data;
    x->idx = ix->data;
    x->R = g->dims[0];
    x->H = g->dims[1];
    x->T = expected->dims[0];
    x->K = k;
    for (int64_t i = 0; i < x->T * x->K; i++) {
        if (x->idx[i] < 0)
            return false;
        x->has_dropped |= x->idx[i] >= x->R;
    }
    return x->H > 0;
}

static void cleanup(void *ctx)
{
    pg_ctx *x = ctx;
    free(x->owner);
}

/* A model touches a token's top_k slots and its output row. */
static size_t row_elements(const void *ctx)
{
    const pg_ctx *x = ctx;
    return (size_t)(x->K + 1) * (size_t)x->H;
}

#define PG "MoeTokenPermuteGrad"

/* In catalogue order, which is also the order of exact findings. */
static const golden_diag_model models[] = {
    {{"acc-in-output-dtype", PG, "the accumulator is rounded to bf16/fp16 after every addition"},
     v_narrow16, NULL, NULL, golden_pg_acc_in_output_dtype, d_acc},
    {{"truncate", PG, "the fp32 sum is narrowed by truncation instead of to nearest even"},
     v_narrow16, NULL, NULL, golden_pg_truncate, d_truncate},
    {{"round-half-away", PG, "ties are rounded away from zero instead of to even when narrowing"},
     v_narrow16, NULL, NULL, golden_pg_half_away, d_half_away},
    {{"k-order-reversed", PG, "slots are added from k = K-1 down to 0"},
     v_one, NULL, NULL, golden_pg_reversed, d_reversed},
    {{"k-order-pairwise", PG, "slots are added as a pairwise tree (neighbours, or folded halves)"},
     v_pairwise, NULL, NULL, golden_pg_pairwise, d_pairwise},
    {{"zero-start", PG, "the accumulator starts at +0.0 instead of slot 0"},
     v_zero_start, NULL, NULL, golden_pg_zero_start, d_zero_start},
    {{"dropped-not-skipped", PG,
      "slots with an index >= rows are added (as +0.0, row index mod rows, or the last row)"},
     v_dropped, NULL, NULL, golden_pg_dropped, d_dropped},
    {{"missing-slot", PG, "slot k is never added"},
     v_missing, NULL, s_missing, golden_pg_missing, d_missing},
    {{"rows-ignored-from", PG, "rows at or above some index X contribute nothing"},
     v_rows_ignored, golden_pg_prepare_rows_ignored, NULL, golden_pg_rows_ignored, d_rows_ignored},
    {{"ftz", PG, "subnormals are flushed to zero (inputs, each addition, results)"},
     v_ftz, NULL, NULL, golden_pg_ftz, d_ftz},
    {{"saturate", PG, "overflow gives the largest finite value instead of infinity"},
     v_saturate, NULL, NULL, golden_pg_saturate, d_saturate},
};

const golden_diag_operator golden_diag_permute_grad = {
    PG, "input_grad", "token", models, sizeof models / sizeof models[0], sizeof(pg_ctx),
    setup, cleanup, row_elements,
};
