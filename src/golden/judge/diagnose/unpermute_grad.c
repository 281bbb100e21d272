/*
 * unpermute_grad.c - MoeTokenUnpermuteGrad's models of known kernel bugs,
 * for both its outputs.  Slot i = n*K + k reads row s = sorted_indices[i];
 * row s of permuted_tokens_grad is g[n] * probs[n, k] narrowed (g's bits
 * without probs), probs_grad[n, k] the dot product of row s of
 * permuted_tokens with g[n] (docs/unpermute-grad.md).
 *
 * permuted_tokens_grad's models multiply the rows the library's way
 * (golden_diag_scale_rows()) with the prob the bug takes; probs_grad's
 * model keeps the dot product in the probs' dtype: the library makes each
 * product (a top_k = 1 MoeTokenUnpermute whose "token" is one column of a
 * slot's rows and whose "prob" is g's value there), and a chain of top_k
 * = 2 runs in the probs' dtype adds them.  probs_grad's "order" or
 * "wrong" finding (order.c) is made beside these, by the judge.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden/judge/diagnose/model.h"
#include "golden/judge/diagnose/runner.h"

/* Columns of the dot products made at a time by the probs_grad model:
 * every slot's products over this many columns are in memory at once. */
#define DOT_COLUMNS 256

typedef struct ug_ctx {
    moeperm_dtype dtype, pdtype;
    const void *x;      /* permuted_tokens [R, H] */
    const void *g;      /* unpermuted_tokens_grad [N, H] */
    const int32_t *idx; /* sorted_indices [N*K] */
    const void *probs;  /* [N, K] of pdtype, or NULL */
    int64_t R, H, N, K;
    int32_t *owner; /* owner[s]: the slot that writes row s, -1 for none (owned) */
} ug_ctx;

static int oom(char *err, size_t err_len)
{
    snprintf(err, err_len, "out of memory for a diagnosis model");
    return -1;
}

/* The bits of prob i of the N*K; callers pass only i < N*K (an index
 * past the end reads +0.0 rather than past the buffer). */
static uint64_t prob_at(const ug_ctx *x, int64_t i)
{
    if (i < 0 || i >= x->N * x->K)
        return 0;
    return golden_bits_load(x->pdtype, x->probs, (uint64_t)i);
}

static double value(moeperm_dtype dtype, const void *data, int64_t row, int64_t h, int64_t c)
{
    return golden_bits_double(dtype,
                              golden_bits_load(dtype, data, (uint64_t)row * (uint64_t)h + (uint64_t)c));
}

/* ---------------------------------------------------------------------- */
/* permuted_tokens_grad                                                   */
/* ---------------------------------------------------------------------- */

/* The slot whose prob variant v of wrong-slot-prob takes for slot i.
 * Variant 0 takes the row index s for the slot index: a row s >= N*K has
 * no such prob (the kernel would read past probs, which nothing can
 * model), so that row keeps its own slot's prob (the expected row). */
static int64_t wrong_slot(const ug_ctx *x, int variant, int64_t i, int64_t s)
{
    int64_t n = i / x->K, k = i % x->K;
    switch (variant) {
    case 0:
        return s < x->N * x->K ? s : i; /* the row index taken for the slot index */
    case 1:
        return n * x->K;
    case 2:
        return n * x->K + (x->K - 1 - k);
    case 3:
        return n * x->K + (k + 1) % x->K;
    default:
        return n * x->K + (k + x->K - 1) % x->K;
    }
}

/* Row s as the bug writes it: g[owner / K] times the prob prob_of()
 * chooses (variant < 0: unscaled bits).  A row no slot writes is the
 * expected one (nothing to model). */
static int ug_rows(const ug_ctx *x, int variant, const int64_t *rows, size_t n, void *out,
                   char *err, size_t err_len)
{
    size_t es = moeperm_dtype_size(x->dtype), row = (size_t)x->H * es;
    golden_diag_operand *ops = malloc(n * sizeof *ops + 1);
    void *probs = malloc(n * moeperm_dtype_size(x->pdtype) + 1);
    int rc = -1;
    if (!ops || !probs) {
        oom(err, err_len);
        goto done;
    }
    for (size_t j = 0; j < n; j++) {
        int64_t s = rows[j], i = x->owner[s];
        if (i < 0) {
            ops[j] = GOLDEN_DIAG_SKIP;
            memset((uint8_t *)out + j * row, 0, row);
            continue;
        }
        if (variant < 0) {
            memcpy((uint8_t *)out + j * row, (const uint8_t *)x->g + (size_t)(i / x->K) * row,
                   row);
            ops[j] = GOLDEN_DIAG_SKIP;
            continue;
        }
        ops[j] = (golden_diag_operand){x->g, x->dtype, i / x->K};
        golden_bits_store(x->pdtype, probs, j, prob_at(x, wrong_slot(x, variant, i, s)));
    }
    rc = variant < 0 ? 0
                     : golden_diag_scale_rows(x->dtype, x->pdtype, x->H, (int64_t)n, ops, probs,
                                              out, err, err_len);
done:
    free(ops);
    free(probs);
    return rc;
}

static int m_probs_ignored(void *ctx, int variant, const int64_t *rows, size_t n, void *out,
                           char *err, size_t err_len)
{
    (void)variant;
    return ug_rows(ctx, -1, rows, n, out, err, err_len);
}

static int m_wrong_slot_prob(void *ctx, int variant, const int64_t *rows, size_t n, void *out,
                             char *err, size_t err_len)
{
    return ug_rows(ctx, variant, rows, n, out, err, err_len);
}

static int v_probs(const void *ctx)
{
    const ug_ctx *x = ctx;
    return x->probs != NULL;
}

static int v_wrong_slot(const void *ctx)
{
    const ug_ctx *x = ctx;
    return !x->probs ? 0 : x->K >= 2 ? 5 : 1;
}

static void d_probs_ignored(const void *ctx, int v, char *out, size_t len)
{
    (void)ctx;
    (void)v;
    snprintf(out, len, "probs are ignored: each row is g's row, unscaled");
}

static void d_wrong_slot(const void *ctx, int v, char *out, size_t len)
{
    (void)ctx;
    static const char *const what[] = {
        "the prob at the row's index (probs read flat at the permuted row, not at the slot)",
        "slot 0's prob of the token for every slot",
        "the prob of slot K-1-k (the slots reversed)",
        "the prob of the next slot, k+1 (mod top_k)",
        "the prob of the previous slot, k-1 (mod top_k)",
    };
    snprintf(out, len, "each row is scaled by another slot's prob: %s", what[v]);
}

/* g[n, c] * p reaches the end of fp16's range, or an operand is not
 * finite. */
static bool grad_special(const void *ctx, int64_t s, int64_t c)
{
    const ug_ctx *x = ctx;
    int64_t i = x->owner[s];
    if (i < 0)
        return false;
    double gv = value(x->dtype, x->g, i / x->K, x->H, c);
    double p = x->probs ? golden_bits_double(x->pdtype, prob_at(x, i)) : 1.0;
    return !isfinite(gv) || !isfinite(p) || fabs(gv * p) >= GOLDEN_DIAG_FP16_LIMIT;
}

/* ---------------------------------------------------------------------- */
/* probs_grad                                                             */
/* ---------------------------------------------------------------------- */

/* Element c of row r of a [*, h] tensor of 2- or 4-byte elements. */
static uint32_t elem(size_t es, const void *data, int64_t r, int64_t h, int64_t c)
{
    size_t at = (size_t)r * (size_t)h + (size_t)c;
    if (es == 2)
        return ((const uint16_t *)data)[at];
    return ((const uint32_t *)data)[at];
}

static void put(size_t es, void *data, size_t at, uint32_t v)
{
    if (es == 2)
        ((uint16_t *)data)[at] = (uint16_t)v;
    else
        ((uint32_t *)data)[at] = v;
}

/*
 * probs_grad kept in the probs' dtype: for each slot of the given tokens,
 * the products x*g (x from row s, zeros when s >= R) made by the library
 * in fp32 and narrowed to the probs' dtype, then added one column at a
 * time, in column order, to an accumulator in that dtype that starts at
 * +0.0, each sum narrowed.  DOT_COLUMNS columns at a time: each (token,
 * column) is the "token" of a top_k = 1 run whose row is the token's K
 * slot values in that column and whose prob is g's value there; then each
 * column's products over every slot are one top_k = 2 run in the probs'
 * dtype.
 */
static int m_acc(void *ctx, int variant, const int64_t *tokens, size_t n, void *out, char *err,
                 size_t err_len)
{
    const ug_ctx *x = ctx;
    (void)variant;
    size_t slots = n * (size_t)x->K, es = moeperm_dtype_size(x->dtype);
    size_t ps = moeperm_dtype_size(x->pdtype), cols = DOT_COLUMNS;
    uint8_t *columns = malloc(cols * slots * es + 1); /* [n][cols][K] of the tokens' dtype */
    uint8_t *gvals = malloc(cols * n * es + 1);       /* [n][cols] */
    uint8_t *columns_p = malloc(cols * slots * ps + 1); /* [n][cols][K] of the probs' dtype */
    float *products = malloc(cols * slots * sizeof(float) + 1);
    uint8_t *narrowed = malloc(cols * slots * ps + 1); /* [cols][n*K] of the probs' dtype */
    uint8_t *pair = calloc(2 * slots + 1, ps), *pair_out = malloc(slots * ps + 1);
    const golden_diag_operand pair_ops[2] = {{pair, x->pdtype, 0}, {pair, x->pdtype, 1}};
    int rc = -1;
    if (!columns || !gvals || !columns_p || !products || !narrowed || !pair || !pair_out) {
        oom(err, err_len);
        goto done;
    }
    for (int64_t c0 = 0; c0 < x->H; c0 += (int64_t)cols) {
        size_t w = (size_t)(x->H - c0) < cols ? (size_t)(x->H - c0) : cols;
        /* row (i, c) of the run: token i's K slot values in column c */
        for (size_t i = 0; i < n; i++) {
            for (int64_t k = 0; k < x->K; k++) {
                int32_t s = x->idx[tokens[i] * x->K + k];
                for (size_t c = 0; c < w; c++)
                    put(es, columns, (i * w + c) * (size_t)x->K + (size_t)k,
                        s < x->R ? elem(es, x->x, s, x->H, c0 + (int64_t)c) : 0);
            }
            for (size_t c = 0; c < w; c++) {
                put(es, gvals, i * w + c, elem(es, x->g, tokens[i], x->H, c0 + (int64_t)c));
            }
        }
        if (golden_diag_scale_block(MOEPERM_FLOAT, x->dtype, x->K, (int64_t)(n * w), columns,
                                    x->dtype, gvals, products, err, err_len) != 0 ||
            moeperm_convert(products, MOEPERM_FLOAT, columns_p, x->pdtype, w * slots) !=
                MOEPERM_SUCCESS)
            goto done;
        /* [n][w][K] to [w][n*K]: each column's products over every slot */
        for (size_t c = 0; c < w; c++)
            for (size_t i = 0; i < n; i++)
                memcpy(narrowed + (c * slots + i * (size_t)x->K) * ps,
                       columns_p + (i * w + c) * (size_t)x->K * ps, (size_t)x->K * ps);
        /* acc + column c, one top_k = 2 run over the pair of rows [acc;
         * column c] held in one buffer (so the run reads it in place) */
        for (size_t c = 0; c < w; c++) {
            memcpy(pair + slots * ps, narrowed + c * slots * ps, slots * ps);
            if (golden_diag_run(x->pdtype, (int64_t)slots, 1, 2, pair_ops, pair_out, err,
                                err_len) != 0)
                goto done;
            memcpy(pair, pair_out, slots * ps);
        }
    }
    memcpy(out, pair, slots * ps);
    rc = 0;
done:
    free(columns);
    free(gvals);
    free(columns_p);
    free(products);
    free(narrowed);
    free(pair);
    free(pair_out);
    return rc;
}

static int v_acc(const void *ctx)
{
    const ug_ctx *x = ctx;
    return x->probs && x->pdtype != MOEPERM_FLOAT;
}

static void d_acc(const void *ctx, int v, char *out, size_t len)
{
    const ug_ctx *x = ctx;
    (void)v;
    snprintf(out, len,
             "the dot product is kept in %s: each product narrowed, added column by column, "
             "each sum narrowed",
             moeperm_dtype_name(x->pdtype));
}

/* Some product is not finite, or their magnitudes reach the end of
 * fp16's range. */
static bool probs_grad_special(const void *ctx, int64_t n, int64_t k)
{
    const ug_ctx *x = ctx;
    int32_t s = x->idx[n * x->K + k];
    double sum = 0;
    for (int64_t c = 0; c < x->H; c++) {
        double gv = value(x->dtype, x->g, n, x->H, c);
        double xv = s < x->R ? value(x->dtype, x->x, s, x->H, c) : 0.0;
        if (!isfinite(gv) || !isfinite(xv))
            return true;
        sum += fabs(xv * gv);
    }
    return sum >= GOLDEN_DIAG_FP16_LIMIT;
}

/* ---------------------------------------------------------------------- */
/* The two entries                                                        */
/* ---------------------------------------------------------------------- */

static bool setup_inputs(const golden_diag_problem *p, ug_ctx *x)
{
    const golden_diag_tensor *t = golden_diag_input(p, "permuted_tokens");
    const golden_diag_tensor *g = golden_diag_input(p, "unpermuted_tokens_grad");
    const golden_diag_tensor *ix = golden_diag_input(p, "sorted_indices");
    if (!t || !g || !ix || t->ndim != 2 || g->ndim != 2 || ix->ndim != 1 ||
        ix->dtype != MOEPERM_INT32 || t->dtype != g->dtype || !golden_bits_is_float(t->dtype) ||
        t->dims[1] != g->dims[1] || (t->dims[0] > 0 && !t->data) || (g->dims[0] > 0 && !g->data) ||
        (ix->dims[0] > 0 && !ix->data))
        return false;
    x->N = g->dims[0];
    if (!golden_diag_probs(p, x->N, &x->K, &x->pdtype, &x->probs))
        return false;
    /* The first N*K entries are read, any more never (the input domain). */
    if (ix->dims[0] < x->N * x->K || x->N * x->K > INT32_MAX)
        return false;
    x->dtype = t->dtype;
    x->x = t->data;
    x->g = g->data;
    x->idx = ix->data;
    x->R = t->dims[0];
    x->H = t->dims[1];
    x->owner = malloc((size_t)(x->R > 0 ? x->R : 1) * sizeof *x->owner);
    if (!x->owner)
        return false;
    for (int64_t s = 0; s < x->R; s++)
        x->owner[s] = -1;
    for (int64_t i = 0; i < x->N * x->K; i++) {
        if (x->idx[i] < 0)
            return false;
        if (x->idx[i] < x->R)
            x->owner[x->idx[i]] = (int32_t)i;
    }
    return x->H > 0;
}

static bool setup_grad(const golden_diag_problem *p, const golden_diag_tensor *expected, void *ctx)
{
    ug_ctx *x = ctx;
    return setup_inputs(p, x) && expected->ndim == 2 && expected->dims[0] == x->R &&
           expected->dims[1] == x->H && expected->dtype == x->dtype;
}

static bool setup_probs_grad(const golden_diag_problem *p, const golden_diag_tensor *expected,
                             void *ctx)
{
    ug_ctx *x = ctx;
    return setup_inputs(p, x) && x->probs && expected->ndim == 2 && expected->dims[0] == x->N &&
           expected->dims[1] == x->K && expected->dtype == x->pdtype;
}

static void cleanup(void *ctx)
{
    ug_ctx *x = ctx;
    free(x->owner);
}

/* A row of permuted_tokens_grad is one row of g scaled. */
static size_t grad_row_elements(const void *ctx)
{
    const ug_ctx *x = ctx;
    return 2 * (size_t)x->H;
}

/* A token's probs_grad: its K slots' products over DOT_COLUMNS columns at
 * a time (the model walks the columns itself, so a block holds many
 * tokens). */
static size_t probs_grad_row_elements(const void *ctx)
{
    const ug_ctx *x = ctx;
    return 4 * (size_t)x->K * DOT_COLUMNS;
}

#define UG "MoeTokenUnpermuteGrad"

static const golden_diag_model grad_models[] = {
    {{"probs-ignored", UG, "probs are ignored: permuted_tokens_grad holds g's rows unscaled"},
     v_probs, NULL, NULL, m_probs_ignored, d_probs_ignored},
    {{"wrong-slot-prob", UG, "each row of permuted_tokens_grad is scaled by another slot's prob"},
     v_wrong_slot, NULL, NULL, m_wrong_slot_prob, d_wrong_slot},
};

static const golden_diag_model probs_grad_models[] = {
    {{"acc-in-output-dtype", UG,
      "probs_grad's dot product is kept in the probs' dtype: products and sums narrowed"},
     v_acc, NULL, NULL, m_acc, d_acc},
};

const golden_diag_operator golden_diag_unpermute_grad_tokens = {
    UG, "permuted_tokens_grad", "row", grad_models, sizeof grad_models / sizeof grad_models[0],
    sizeof(ug_ctx), setup_grad, cleanup, grad_row_elements, grad_special,
};

const golden_diag_operator golden_diag_unpermute_grad_probs = {
    UG, "probs_grad", "token", probs_grad_models,
    sizeof probs_grad_models / sizeof probs_grad_models[0], sizeof(ug_ctx), setup_probs_grad,
    cleanup, probs_grad_row_elements, probs_grad_special,
};
