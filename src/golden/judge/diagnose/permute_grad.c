/*
 * permute_grad.c - MoeTokenPermuteGrad's entry in the diagnosis: which
 * runs its models take (setup), which variants of each apply to a run,
 * what each finding says, and the table of models in catalogue order
 * (permute_grad_models.c computes them).
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden/judge/diagnose/permute_grad_models.h"

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
             moeperm_dtype_name(x->s.dtype));
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
                 (x->s.K + 1) / 2);
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
    snprintf(read, sizeof read, what[v], v == 1 ? x->s.R : x->s.R - 1);
    snprintf(out, len,
             "slots whose index is %" PRId64 " (the rows of permuted_output_grad) or more are not "
             "skipped: they %s",
             x->s.R, read);
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
                 moeperm_dtype_name(x->s.dtype), golden_bits_max_finite(x->s.dtype));
    else
        snprintf(out, len,
                 "every fp32 addition that overflows gives +-0x7f7fffff (the largest "
                 "finite value), not +-inf");
}

/* What slot k of token t adds at column c: its row, or nothing when the
 * slot is dropped. */
static double contribution(const void *ctx, int64_t t, int64_t k, int64_t c)
{
    const pg_ctx *x = ctx;
    int32_t r = x->s.idx[t * x->s.K + k];
    if (r >= x->s.R)
        return NAN;
    uint64_t at = (uint64_t)r * (uint64_t)x->s.H + (uint64_t)c;
    return golden_bits_double(x->s.dtype, golden_bits_load(x->s.dtype, x->grad, at));
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
    /* The operator's domain: num_topk -1 means 1, T = floor(L / K) tokens
     * (the last L mod K entries never read), any number of rows R. */
    if (k == -1)
        k = 1;
    if (g->ndim != 2 || ix->ndim != 1 || expected->ndim != 2 || ix->dtype != MOEPERM_INT32 ||
        g->dtype != expected->dtype || !golden_bits_is_float(g->dtype) || k < 1 ||
        k > MOEPERM_MAX_TOP_K || g->dims[1] != expected->dims[1] ||
        ix->dims[0] / k != expected->dims[0] || ix->dims[0] > INT32_MAX ||
        (g->dims[0] > 0 && !g->data) || (ix->dims[0] > 0 && !ix->data))
        return false;
    x->s.dtype = g->dtype;
    x->grad = g->data;
    x->s.idx = ix->data;
    x->s.R = g->dims[0];
    x->s.H = g->dims[1];
    x->s.T = expected->dims[0];
    x->s.K = k;
    x->s.contribution = contribution;
    return golden_diag_sum_indices(&x->s) && x->s.H > 0;
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
    return (size_t)(x->s.K + 1) * (size_t)x->s.H;
}

/* Arithmetic can make an infinity or a NaN at (t, c) when a kept slot
 * holds one, or when the slots' magnitudes reach the end of fp16's range. */
static bool special_possible(const void *ctx, int64_t t, int64_t c)
{
    const pg_ctx *x = ctx;
    double sum = 0;
    for (int64_t k = 0; k < x->s.K; k++) {
        double v = contribution(ctx, t, k, c);
        if (v != v && x->s.idx[t * x->s.K + k] >= x->s.R)
            continue; /* dropped */
        if (!isfinite(v))
            return true;
        sum += fabs(v);
    }
    return sum >= GOLDEN_DIAG_FP16_LIMIT;
}

#define PG "MoeTokenPermuteGrad"

/* In catalogue order, which is also the order of exact findings. */
static const golden_diag_model models[] = {
    {{"acc-in-output-dtype", PG, "the accumulator is rounded to bf16/fp16 after every addition"},
     golden_diag_sum_narrow16, NULL, NULL, golden_pg_acc_in_output_dtype, d_acc},
    {{"truncate", PG, "the fp32 sum is narrowed by truncation instead of to nearest even"},
     golden_diag_sum_narrow16, NULL, NULL, golden_pg_truncate, golden_diag_sum_truncate},
    {{"round-half-away", PG, "ties are rounded away from zero instead of to even when narrowing"},
     golden_diag_sum_narrow16, NULL, NULL, golden_pg_half_away, golden_diag_sum_half_away},
    {{"k-order-reversed", PG, "slots are added from k = K-1 down to 0"},
     golden_diag_sum_two, NULL, NULL, golden_pg_reversed, golden_diag_sum_reversed},
    {{"k-order-pairwise", PG, "slots are added as a pairwise tree (neighbours, or folded halves)"},
     golden_diag_sum_pairwise, NULL, NULL, golden_pg_pairwise, d_pairwise},
    {{"zero-start", PG, "the accumulator starts at +0.0 instead of slot 0"},
     golden_diag_sum_zero_start, NULL, NULL, golden_pg_zero_start, d_zero_start},
    {{"dropped-not-skipped", PG,
      "slots with an index >= rows are added (as +0.0, row index mod rows, or the last row)"},
     golden_diag_sum_dropped, NULL, NULL, golden_pg_dropped, d_dropped},
    {{"missing-slot", PG, "slot k is never added"},
     golden_diag_sum_missing, NULL, golden_diag_sum_select_missing, golden_pg_missing, golden_diag_sum_missing_slot},
    {{"rows-ignored-from", PG, "rows at or above some index X contribute nothing"},
     v_rows_ignored, golden_pg_prepare_rows_ignored, NULL, golden_pg_rows_ignored, d_rows_ignored},
    {{"ftz", PG, "subnormals are flushed to zero (inputs, each addition, results)"},
     v_ftz, NULL, NULL, golden_pg_ftz, d_ftz},
    {{"saturate", PG, "overflow gives the largest finite value instead of infinity"},
     v_saturate, NULL, NULL, golden_pg_saturate, d_saturate},
};

const golden_diag_operator golden_diag_permute_grad = {
    PG, "input_grad", "token", models, sizeof models / sizeof models[0], sizeof(pg_ctx),
    setup, cleanup, row_elements, special_possible,
};
