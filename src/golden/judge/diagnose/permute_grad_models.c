/*
 * permute_grad_models.c - the bugs MoeTokenPermuteGrad kernels really
 * have, each as the output the buggy kernel would give: a sum kept in
 * another dtype is a chain of top_k = 2 runs in that dtype, a sum in
 * another order a tree of such runs in fp32, a sum narrowed another way a
 * run in fp32 on widened inputs followed by that narrowing (runner.h).
 * What remains written out here is only the bug itself (a truncation, a
 * flush to zero, a saturation), and the search for the row limit of
 * rows-ignored-from.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden/judge/diagnose/permute_grad_models.h"
#include "golden/judge/diagnose/runner.h"

/* Slot elements of one run of the rows-ignored-from search (a token's
 * top_k + 1 variants); beyond it the search is not tried. */
#define FIT_ELEMENTS ((size_t)1 << 25)

static golden_diag_operand pg_slot(const pg_ctx *x, int64_t t, int64_t k)
{
    int32_t r = x->s.idx[t * x->s.K + k];
    return r < x->s.R ? (golden_diag_operand){x->grad, x->s.dtype, r} : GOLDEN_DIAG_SKIP;
}

/* The slots of the tokens, widened to fp32, slot-major: block k holds slot
 * k of every token ([K][n][H]); present[k*n + i] says whether that slot of
 * token i is kept (a dropped one is +0.0). */
static int pg_slots(const pg_ctx *x, const int64_t *tokens, size_t n, bool flush, float **slots,
                    bool **present, char *err, size_t err_len)
{
    size_t block = n * (size_t)x->s.H;
    *slots = malloc((size_t)x->s.K * block * sizeof(float));
    *present = malloc((size_t)x->s.K * n * sizeof(bool));
    if (!*slots || !*present) {
        free(*slots);
        free(*present);
        snprintf(err, err_len, "out of memory for a diagnosis model");
        return -1;
    }
    size_t es = moeperm_dtype_size(x->s.dtype);
    for (int64_t k = 0; k < x->s.K; k++) {
        for (size_t i = 0; i < n; i++) {
            float *dst = *slots + (size_t)k * block + i * (size_t)x->s.H;
            int32_t r = x->s.idx[tokens[i] * x->s.K + k];
            (*present)[(size_t)k * n + i] = r < x->s.R;
            if (r >= x->s.R) {
                memset(dst, 0, (size_t)x->s.H * sizeof(float));
                continue;
            }
            moeperm_convert((const uint8_t *)x->grad + (size_t)r * (size_t)x->s.H * es, x->s.dtype, dst,
                            MOEPERM_FLOAT, (size_t)x->s.H);
            if (flush)
                for (int64_t c = 0; c < x->s.H; c++)
                    if (golden_bits_is_subnormal(MOEPERM_FLOAT,
                                                 golden_bits_load(MOEPERM_FLOAT, dst, (uint64_t)c)))
                        golden_bits_store(MOEPERM_FLOAT, dst, (uint64_t)c,
                                          golden_bits_load(MOEPERM_FLOAT, dst, (uint64_t)c) &
                                              0x80000000u);
        }
    }
    return 0;
}

static void flush_subnormals(moeperm_dtype dtype, void *data, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        uint64_t v = golden_bits_load(dtype, data, i);
        if (golden_bits_is_subnormal(dtype, v))
            golden_bits_store(dtype, data, i, v & golden_bits_sign(dtype));
    }
}

/* The fp32 sum of each token's slots in k order: the operator run in fp32
 * on widened inputs, whose narrowing is then the identity. */
static int pg_sum32(const pg_ctx *x, const int64_t *tokens, size_t n, float *acc, char *err,
                    size_t err_len)
{
    golden_diag_operand *ops = malloc(n * (size_t)x->s.K * sizeof *ops);
    if (!ops) {
        snprintf(err, err_len, "out of memory for a diagnosis model");
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        for (int64_t k = 0; k < x->s.K; k++)
            ops[i * (size_t)x->s.K + (size_t)k] = pg_slot(x, tokens[i], k);
    int rc = golden_diag_run(MOEPERM_FLOAT, x->s.H, (int64_t)n, x->s.K, ops, acc, err, err_len);
    free(ops);
    return rc;
}

/* The models.  Each writes the output the buggy kernel would give for the
 * n tokens into out ([n, H] of the case's dtype). */

int golden_pg_acc_in_output_dtype(void *ctx, int variant, const int64_t *tokens, size_t n,
                                  void *out, char *err, size_t err_len)
{
    pg_ctx *x = ctx;
    (void)variant;
    size_t es = moeperm_dtype_size(x->s.dtype), row = (size_t)x->s.H * es;
    uint8_t *acc = malloc(n * row), *slot = malloc(n * row), *next = malloc(n * row);
    bool *present = malloc(n * sizeof *present);
    int rc = -1;
    if (!acc || !slot || !next || !present) {
        snprintf(err, err_len, "out of memory for a diagnosis model");
        goto done;
    }
    for (int64_t k = 0; k < x->s.K; k++) {
        for (size_t i = 0; i < n; i++) {
            int32_t r = x->s.idx[tokens[i] * x->s.K + k];
            uint8_t *dst = (k == 0 ? acc : slot) + i * row;
            present[i] = r < x->s.R;
            /* a dropped first slot starts the sum from +0.0 */
            if (r < x->s.R)
                memcpy(dst, (const uint8_t *)x->grad + (size_t)r * row, row);
            else
                memset(dst, 0, row);
        }
        if (k == 0)
            continue;
        if (golden_diag_add_rows(x->s.dtype, x->s.H, (int64_t)n, acc, NULL, slot, present, next,
                                 NULL, err, err_len) != 0)
            goto done;
        uint8_t *swap = acc;
        acc = next;
        next = swap;
    }
    memcpy(out, acc, n * row);
    rc = 0;
done:
    free(acc);
    free(slot);
    free(next);
    free(present);
    return rc;
}

static int pg_narrowed(pg_ctx *x, const int64_t *tokens, size_t n, void *out,
                       golden_diag_rule rule, char *err, size_t err_len)
{
    size_t count = n * (size_t)x->s.H;
    float *acc = malloc(count * sizeof *acc + 1);
    if (!acc) {
        snprintf(err, err_len, "out of memory for a diagnosis model");
        return -1;
    }
    if (pg_sum32(x, tokens, n, acc, err, err_len) != 0) {
        free(acc);
        return -1;
    }
    golden_diag_narrow(x->s.dtype, rule, acc, out, count);
    free(acc);
    return 0;
}

int golden_pg_truncate(void *ctx, int variant, const int64_t *tokens, size_t n, void *out,
                       char *err, size_t err_len)
{
    pg_ctx *x = ctx;
    (void)variant;
    return pg_narrowed(x, tokens, n, out, GOLDEN_DIAG_TRUNCATE, err, err_len);
}

int golden_pg_half_away(void *ctx, int variant, const int64_t *tokens, size_t n, void *out,
                        char *err, size_t err_len)
{
    pg_ctx *x = ctx;
    (void)variant;
    return pg_narrowed(x, tokens, n, out, GOLDEN_DIAG_HALF_AWAY, err, err_len);
}

/* Models that only rearrange slots: the operator in the case's dtype on
 * tokens whose slots slot_of() chooses. */
typedef golden_diag_operand (*slot_rule)(const pg_ctx *x, int variant, int64_t t, int64_t k);

static int pg_rearranged(pg_ctx *x, int variant, const int64_t *tokens, size_t n, void *out,
                         int64_t kp, slot_rule rule, char *err, size_t err_len)
{
    golden_diag_operand *ops = malloc(n * (size_t)kp * sizeof *ops);
    if (!ops) {
        snprintf(err, err_len, "out of memory for a diagnosis model");
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        for (int64_t k = 0; k < kp; k++)
            ops[i * (size_t)kp + (size_t)k] = rule(x, variant, tokens[i], k);
    int rc = golden_diag_run(x->s.dtype, x->s.H, (int64_t)n, kp, ops, out, err, err_len);
    free(ops);
    return rc;
}

static golden_diag_operand rule_reversed(const pg_ctx *x, int variant, int64_t t, int64_t k)
{
    (void)variant;
    return pg_slot(x, t, x->s.K - 1 - k);
}

static golden_diag_operand rule_zero_start(const pg_ctx *x, int variant, int64_t t, int64_t k)
{
    (void)variant;
    return k == 0 ? GOLDEN_DIAG_ZERO : pg_slot(x, t, k - 1);
}

static golden_diag_operand rule_missing(const pg_ctx *x, int variant, int64_t t, int64_t k)
{
    return k == variant ? GOLDEN_DIAG_SKIP : pg_slot(x, t, k);
}

static golden_diag_operand rule_dropped(const pg_ctx *x, int variant, int64_t t, int64_t k)
{
    int32_t r = x->s.idx[t * x->s.K + k];
    if (r < x->s.R)
        return (golden_diag_operand){x->grad, x->s.dtype, r};
    switch (variant) {
    case 0:
        return GOLDEN_DIAG_ZERO;
    case 1:
        return (golden_diag_operand){x->grad, x->s.dtype, r % x->s.R};
    default:
        return (golden_diag_operand){x->grad, x->s.dtype, x->s.R - 1};
    }
}

static golden_diag_operand rule_rows_ignored(const pg_ctx *x, int variant, int64_t t, int64_t k)
{
    (void)variant;
    int32_t r = x->s.idx[t * x->s.K + k];
    return r < x->x_lo ? (golden_diag_operand){x->grad, x->s.dtype, r} : GOLDEN_DIAG_SKIP;
}

int golden_pg_reversed(void *ctx, int variant, const int64_t *tokens, size_t n, void *out,
                       char *err, size_t err_len)
{
    pg_ctx *x = ctx;
    return pg_rearranged(x, variant, tokens, n, out, x->s.K, rule_reversed, err, err_len);
}

int golden_pg_zero_start(void *ctx, int variant, const int64_t *tokens, size_t n, void *out,
                         char *err, size_t err_len)
{
    pg_ctx *x = ctx;
    return pg_rearranged(x, variant, tokens, n, out, x->s.K + 1, rule_zero_start, err, err_len);
}

int golden_pg_missing(void *ctx, int variant, const int64_t *tokens, size_t n, void *out,
                      char *err, size_t err_len)
{
    pg_ctx *x = ctx;
    return pg_rearranged(x, variant, tokens, n, out, x->s.K, rule_missing, err, err_len);
}

int golden_pg_dropped(void *ctx, int variant, const int64_t *tokens, size_t n, void *out,
                      char *err, size_t err_len)
{
    pg_ctx *x = ctx;
    return pg_rearranged(x, variant, tokens, n, out, x->s.K, rule_dropped, err, err_len);
}

int golden_pg_rows_ignored(void *ctx, int variant, const int64_t *tokens, size_t n, void *out,
                           char *err, size_t err_len)
{
    pg_ctx *x = ctx;
    return pg_rearranged(x, variant, tokens, n, out, x->s.K, rule_rows_ignored, err, err_len);
}

/* A tree over the slots in fp32 (golden_diag_tree()), then the library's
 * narrowing. */
int golden_pg_pairwise(void *ctx, int variant, const int64_t *tokens, size_t n, void *out,
                       char *err, size_t err_len)
{
    pg_ctx *x = ctx;
    float *slots, *sum;
    bool *present;
    if (pg_slots(x, tokens, n, false, &slots, &present, err, err_len) != 0)
        return -1;
    size_t block = n * (size_t)x->s.H;
    int rc = -1;
    sum = malloc(block * sizeof *sum + 1);
    if (!sum)
        snprintf(err, err_len, "out of memory for a diagnosis model");
    else if (golden_diag_tree(variant, x->s.K, (int64_t)n, x->s.H, slots, present, sum, err,
                              err_len) == 0)
        rc = moeperm_convert(sum, MOEPERM_FLOAT, out, x->s.dtype, block) == MOEPERM_SUCCESS ? 0 : -1;
    free(slots);
    free(present);
    free(sum);
    return rc;
}

/* Subnormals flushed to zero: variant 0 in the inputs, 1 in the inputs and
 * the results, 2 also after every addition. */
int golden_pg_ftz(void *ctx, int variant, const int64_t *tokens, size_t n, void *out, char *err,
                  size_t err_len)
{
    pg_ctx *x = ctx;
    float *slots;
    bool *present;
    if (pg_slots(x, tokens, n, true, &slots, &present, err, err_len) != 0)
        return -1;
    size_t block = n * (size_t)x->s.H;
    float *acc = malloc(block * sizeof(float)), *next = malloc(block * sizeof(float));
    golden_diag_operand *ops = malloc(n * (size_t)x->s.K * sizeof *ops);
    int rc = -1;
    if (!acc || !next || !ops) {
        snprintf(err, err_len, "out of memory for a diagnosis model");
        goto done;
    }
    if (variant < 2) {
        for (size_t i = 0; i < n; i++)
            for (int64_t k = 0; k < x->s.K; k++)
                ops[i * (size_t)x->s.K + (size_t)k] =
                    present[(size_t)k * n + i]
                        ? (golden_diag_operand){slots, MOEPERM_FLOAT, (int64_t)((size_t)k * n + i)}
                        : GOLDEN_DIAG_SKIP;
        if (golden_diag_run(MOEPERM_FLOAT, x->s.H, (int64_t)n, x->s.K, ops, acc, err, err_len) != 0)
            goto done;
    } else {
        /* slot 0, or +0.0 where it is dropped (pg_slots zeroed it) */
        memcpy(acc, slots, block * sizeof(float));
        for (int64_t k = 1; k < x->s.K; k++) {
            if (golden_diag_add_rows(MOEPERM_FLOAT, x->s.H, (int64_t)n, acc, NULL,
                                     slots + (size_t)k * block, present + (size_t)k * n, next,
                                     NULL, err, err_len) != 0)
                goto done;
            flush_subnormals(MOEPERM_FLOAT, next, block);
            float *sw = acc;
            acc = next;
            next = sw;
        }
    }
    moeperm_convert(acc, MOEPERM_FLOAT, out, x->s.dtype, block);
    if (variant >= 1)
        flush_subnormals(x->s.dtype, out, block);
    rc = 0;
done:
    free(slots);
    free(present);
    free(acc);
    free(next);
    free(ops);
    return rc;
}

/* Overflow to the largest finite value: variant 0 in the narrowing of a
 * finite fp32 sum, 1 also in every fp32 addition. */
int golden_pg_saturate(void *ctx, int variant, const int64_t *tokens, size_t n, void *out,
                       char *err, size_t err_len)
{
    pg_ctx *x = ctx;
    size_t block = n * (size_t)x->s.H;
    float *acc = NULL, *next = NULL, *slots = NULL;
    bool *present = NULL;
    int rc = -1;
    if (variant == 0) {
        acc = malloc(block * sizeof(float));
        if (!acc) {
            snprintf(err, err_len, "out of memory for a diagnosis model");
            return -1;
        }
        if (pg_sum32(x, tokens, n, acc, err, err_len) != 0)
            goto done;
    } else {
        if (pg_slots(x, tokens, n, false, &slots, &present, err, err_len) != 0)
            return -1;
        acc = malloc(block * sizeof(float));
        next = malloc(block * sizeof(float));
        if (!acc || !next) {
            snprintf(err, err_len, "out of memory for a diagnosis model");
            goto done;
        }
        memcpy(acc, slots, block * sizeof(float));
        for (int64_t k = 1; k < x->s.K; k++) {
            const float *s = slots + (size_t)k * block;
            if (golden_diag_add_rows(MOEPERM_FLOAT, x->s.H, (int64_t)n, acc, NULL, s,
                                     present + (size_t)k * n, next, NULL, err, err_len) != 0)
                goto done;
            for (size_t i = 0; i < block; i++) {
                uint64_t r = golden_bits_load(MOEPERM_FLOAT, next, i);
                uint64_t a = golden_bits_load(MOEPERM_FLOAT, acc, i);
                uint64_t b = golden_bits_load(MOEPERM_FLOAT, s, i);
                if (golden_bits_is_inf(MOEPERM_FLOAT, r) &&
                    golden_bits_is_finite(MOEPERM_FLOAT, a) &&
                    golden_bits_is_finite(MOEPERM_FLOAT, b))
                    golden_bits_store(MOEPERM_FLOAT, next, i, (r & 0x80000000u) | 0x7f7fffffu);
            }
            float *sw = acc;
            acc = next;
            next = sw;
        }
    }
    moeperm_convert(acc, MOEPERM_FLOAT, out, x->s.dtype, block);
    for (size_t i = 0; i < block; i++) {
        uint64_t r = golden_bits_load(x->s.dtype, out, i);
        if (golden_bits_is_inf(x->s.dtype, r) &&
            golden_bits_is_finite(MOEPERM_FLOAT, golden_bits_load(MOEPERM_FLOAT, acc, i)))
            golden_bits_store(x->s.dtype, out, i,
                              (r & golden_bits_sign(x->s.dtype)) | golden_bits_max_finite(x->s.dtype));
    }
    rc = 0;
done:
    free(acc);
    free(next);
    free(slots);
    free(present);
    return rc;
}

/* rows-ignored-from: the X for which each given token's output matches.
 * For a token whose kept rows sorted are q_0 < ... < q_{m-1}, ignoring rows
 * >= X keeps the first j of them exactly when q_{j-1} < X <= q_j (with
 * q_{-1} = -1, q_m = R), so one run over m + 1 variants of each token gives
 * the X that fit it.  The hull of the fitting X is intersected into
 * [*lo, *hi]; *lo > *hi means no X fits. */
static int pg_fit_group(pg_ctx *x, const golden_diag_data *d, const int64_t *tokens, size_t n,
                        int64_t *lo, int64_t *hi, char *err, size_t err_len)
{
    size_t pseudo = 0;
    for (size_t i = 0; i < n; i++) {
        pseudo++;
        for (int64_t k = 0; k < x->s.K; k++)
            pseudo += x->s.idx[tokens[i] * x->s.K + k] < x->s.R;
    }
    size_t es = moeperm_dtype_size(x->s.dtype);
    golden_diag_operand *ops = calloc(pseudo * (size_t)x->s.K, sizeof *ops);
    int32_t *sorted = malloc((size_t)x->s.K * sizeof *sorted);
    int64_t *rank = malloc((size_t)x->s.K * sizeof *rank);
    uint8_t *out = malloc(pseudo * (size_t)x->s.H * es);
    int rc = -1;
    if (!ops || !sorted || !rank || !out) {
        snprintf(err, err_len, "out of memory for a diagnosis model");
        goto done;
    }
    size_t p = 0;
    for (size_t i = 0; i < n; i++) {
        const int32_t *slots = x->s.idx + tokens[i] * x->s.K;
        for (int64_t k = 0; k < x->s.K; k++) {
            rank[k] = 0;
            for (int64_t q = 0; q < x->s.K; q++)
                rank[k] += slots[q] < x->s.R && slots[q] < slots[k];
        }
        int64_t m = 0;
        for (int64_t k = 0; k < x->s.K; k++)
            m += slots[k] < x->s.R;
        /* variant j keeps the j smallest kept rows */
        for (int64_t j = 0; j <= m; j++, p++)
            for (int64_t k = 0; k < x->s.K; k++)
                ops[p * (size_t)x->s.K + (size_t)k] =
                    slots[k] < x->s.R && rank[k] < j
                        ? (golden_diag_operand){x->grad, x->s.dtype, slots[k]}
                        : GOLDEN_DIAG_SKIP;
    }
    if (golden_diag_run(x->s.dtype, x->s.H, (int64_t)pseudo, x->s.K, ops, out, err, err_len) != 0)
        goto done;
    p = 0;
    for (size_t i = 0; i < n; i++) {
        const int32_t *slots = x->s.idx + tokens[i] * x->s.K;
        int64_t m = 0;
        for (int64_t k = 0; k < x->s.K; k++)
            if (slots[k] < x->s.R)
                sorted[m++] = slots[k];
        /* insertion sort: m <= K */
        for (int64_t a = 1; a < m; a++)
            for (int64_t b = a; b > 0 && sorted[b - 1] > sorted[b]; b--) {
                int32_t t = sorted[b];
                sorted[b] = sorted[b - 1];
                sorted[b - 1] = t;
            }
        int64_t fit_lo = INT64_MAX, fit_hi = -1;
        uint64_t base = (uint64_t)tokens[i] * (uint64_t)d->cols;
        for (int64_t j = 0; j <= m; j++, p++) {
            bool match = true;
            for (int64_t c = 0; c < d->cols && match; c++)
                match =
                    golden_diag_same(d,
                                     golden_bits_load(d->dtype, out,
                                                      p * (uint64_t)d->cols + (uint64_t)c),
                                     golden_bits_load(d->dtype, d->actual, base + (uint64_t)c));
            if (!match)
                continue;
            int64_t a = j == 0 ? 0 : (int64_t)sorted[j - 1] + 1, b = j == m ? x->s.R : sorted[j];
            fit_lo = a < fit_lo ? a : fit_lo;
            fit_hi = b > fit_hi ? b : fit_hi;
        }
        *lo = fit_lo > *lo ? fit_lo : *lo;
        *hi = fit_hi < *hi ? fit_hi : *hi;
    }
    rc = 0;
done:
    free(ops);
    free(sorted);
    free(rank);
    free(out);
    return rc;
}

/* pg_fit_group() over the tokens, as many at a time as FIT_ELEMENTS
 * allows (at least one). */
static int pg_fit_x(pg_ctx *x, const golden_diag_data *d, const int64_t *tokens, size_t n,
                    int64_t *lo, int64_t *hi, char *err, size_t err_len)
{
    size_t per_token = (size_t)(x->s.K + 1) * (size_t)x->s.K * (size_t)x->s.H;
    size_t group = FIT_ELEMENTS / per_token ? FIT_ELEMENTS / per_token : 1;
    for (size_t start = 0; start < n && *lo <= *hi; start += group)
        if (pg_fit_group(x, d, tokens + start, n - start < group ? n - start : group, lo, hi, err,
                         err_len) != 0)
            return -1;
    return 0;
}

int golden_pg_prepare_rows_ignored(void *ctx, const golden_diag_data *d, const int64_t *sample,
                                   size_t n, char *err, size_t err_len)
{
    pg_ctx *x = ctx;
    int64_t lo = 0, hi = x->s.R;
    x->x_found = false;
    if ((size_t)(x->s.K + 1) * (size_t)x->s.K * (size_t)x->s.H > FIT_ELEMENTS)
        return 0; /* one token's variants alone would exceed the budget */
    if (pg_fit_x(x, d, sample, n, &lo, &hi, err, err_len) != 0)
        return -1;
    if (lo > hi)
        return 0;
    if (!x->owner) {
        x->owner = malloc((size_t)(x->s.R > 0 ? x->s.R : 1) * sizeof *x->owner);
        if (!x->owner) {
            snprintf(err, err_len, "out of memory for a diagnosis model");
            return -1;
        }
        for (int64_t r = 0; r < x->s.R; r++)
            x->owner[r] = -1; /* a row no slot reads */
        for (int64_t i = 0; i < x->s.T * x->s.K; i++)
            if (x->s.idx[i] < x->s.R)
                x->owner[x->s.idx[i]] = (int32_t)i;
    }
    /* Narrow [lo, hi] with the tokens that read rows inside it: the token
     * reading row r tells X <= r from X > r, unless that row adds nothing
     * visible.  Sixteen rows a round, spread over the interval. */
    for (int round = 0; round < 12 && lo < hi; round++) {
        int64_t tokens[16];
        size_t count = 0;
        for (int64_t s = 0; s < 16; s++) {
            int64_t r = lo + (hi - lo) * s / 16;
            if (x->owner[r] < 0)
                continue;
            int64_t t = x->owner[r] / x->s.K;
            if (count == 0 || tokens[count - 1] != t)
                tokens[count++] = t;
        }
        int64_t before_lo = lo, before_hi = hi;
        if (pg_fit_x(x, d, tokens, count, &lo, &hi, err, err_len) != 0)
            return -1;
        if (lo > hi)
            return 0;
        if (lo == before_lo && hi == before_hi)
            break;
    }
    if (lo >= x->s.R)
        return 0; /* only "nothing ignored" fits */
    x->x_found = true;
    x->x_lo = lo;
    x->x_hi = hi;
    return 0;
}

