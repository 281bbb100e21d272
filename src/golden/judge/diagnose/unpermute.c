/*
 * unpermute.c - MoeTokenUnpermute's models of known kernel bugs, for its
 * output unpermuted_tokens.  Each is the output the buggy kernel would
 * give, computed with libmoeperm (runner.h): a sum in another order or
 * with other slots is the operator on rearranged slots and probs, a sum
 * kept in the tokens' dtype a chain of top_k = 2 runs in that dtype, a sum
 * of products made elsewhere a MoeTokenPermuteGrad run over the products
 * the library made.  Only fma's fused step and the narrowing rules are
 * written out here, as the bugs they are.
 *
 * With N tokens, K = top_k, R rows of permuted_tokens, H columns; slot k
 * of token t reads row s = sorted_indices[t*K + k] with prob p =
 * probs[t, k], and is included when s < R and p != 0 (docs/operators.md).
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden/judge/diagnose/model.h"
#include "golden/judge/diagnose/runner.h"

typedef struct up_ctx {
    golden_diag_sum s;  /* first: the shared variants take it (T = N) */
    moeperm_dtype pdtype;
    const void *x;      /* permuted_tokens [R, H] */
    const void *probs;  /* [N, K] of pdtype, or NULL */
    bool has_zero_prob; /* some slot reading a row has a prob of +-0 */
} up_ctx;

static int oom(char *err, size_t err_len)
{
    snprintf(err, err_len, "out of memory for a diagnosis model");
    return -1;
}

static golden_diag_operand slot(const up_ctx *x, int64_t t, int64_t k)
{
    int32_t r = x->s.idx[t * x->s.K + k];
    return r < x->s.R ? (golden_diag_operand){x->x, x->s.dtype, r} : GOLDEN_DIAG_SKIP;
}

static uint64_t prob(const up_ctx *x, int64_t t, int64_t k)
{
    return x->probs ? golden_bits_load(x->pdtype, x->probs, (uint64_t)(t * x->s.K + k))
                    : golden_diag_one(x->pdtype);
}

static bool zero_prob(const up_ctx *x, int64_t t, int64_t k)
{
    return x->probs && (prob(x, t, k) & (golden_bits_sign(x->pdtype) - 1)) == 0;
}

static bool included(const up_ctx *x, int64_t t, int64_t k)
{
    return x->s.idx[t * x->s.K + k] < x->s.R && !zero_prob(x, t, k);
}

/* ---------------------------------------------------------------------- */
/* Rearranged runs                                                        */
/* ---------------------------------------------------------------------- */

/* Which operand and prob a model puts into slot k (of kp) of token t. */
typedef golden_diag_operand (*up_rule)(const up_ctx *x, int variant, int64_t t, int64_t k,
                                       uint64_t *p);

/* The operator on the tokens' slots as rule arranges them; with_probs
 * false runs it without probs (every included row times nothing). */
static int up_rearranged(const up_ctx *x, int variant, const int64_t *tokens, size_t n,
                         void *out, int64_t kp, up_rule rule, bool with_probs, char *err,
                         size_t err_len)
{
    size_t total = n * (size_t)kp;
    golden_diag_operand *ops = malloc(total * sizeof *ops + 1);
    void *probs = malloc(total * moeperm_dtype_size(x->pdtype) + 1);
    int rc = -1;
    if (!ops || !probs) {
        oom(err, err_len);
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        for (int64_t k = 0; k < kp; k++) {
            uint64_t p = golden_diag_one(x->pdtype);
            ops[i * (size_t)kp + (size_t)k] = rule(x, variant, tokens[i], k, &p);
            golden_bits_store(x->pdtype, probs, i * (size_t)kp + (size_t)k, p);
        }
    rc = golden_diag_unpermute(x->s.dtype, x->pdtype, x->s.H, (int64_t)n, kp, ops,
                               with_probs && x->probs ? probs : NULL, out, err, err_len);
done:
    free(ops);
    free(probs);
    return rc;
}

static golden_diag_operand rule_reversed(const up_ctx *x, int variant, int64_t t, int64_t k,
                                         uint64_t *p)
{
    (void)variant;
    *p = prob(x, t, x->s.K - 1 - k);
    return slot(x, t, x->s.K - 1 - k);
}

static golden_diag_operand rule_missing(const up_ctx *x, int variant, int64_t t, int64_t k,
                                        uint64_t *p)
{
    *p = prob(x, t, k);
    return k == variant ? GOLDEN_DIAG_SKIP : slot(x, t, k);
}

/* A +0.0 row with prob 1 first, then the slots. */
static golden_diag_operand rule_zero_start(const up_ctx *x, int variant, int64_t t, int64_t k,
                                           uint64_t *p)
{
    (void)variant;
    if (k == 0)
        return GOLDEN_DIAG_ZERO;
    *p = prob(x, t, k - 1);
    return slot(x, t, k - 1);
}

static golden_diag_operand rule_dropped(const up_ctx *x, int variant, int64_t t, int64_t k,
                                        uint64_t *p)
{
    int32_t r = x->s.idx[t * x->s.K + k];
    *p = prob(x, t, k);
    if (r < x->s.R)
        return (golden_diag_operand){x->x, x->s.dtype, r};
    switch (variant) {
    case 0:
        return GOLDEN_DIAG_ZERO;
    case 1:
        return (golden_diag_operand){x->x, x->s.dtype, r % x->s.R};
    default:
        return (golden_diag_operand){x->x, x->s.dtype, x->s.R - 1};
    }
}

/* Run without probs: variant 1 still skips the slots whose prob is 0. */
static golden_diag_operand rule_probs_ignored(const up_ctx *x, int variant, int64_t t, int64_t k,
                                              uint64_t *p)
{
    (void)p;
    return variant == 1 && zero_prob(x, t, k) ? GOLDEN_DIAG_SKIP : slot(x, t, k);
}

static int m_reversed(void *ctx, int variant, const int64_t *tokens, size_t n, void *out,
                      char *err, size_t err_len)
{
    const up_ctx *x = ctx;
    return up_rearranged(x, variant, tokens, n, out, x->s.K, rule_reversed, true, err, err_len);
}

static int m_missing(void *ctx, int variant, const int64_t *tokens, size_t n, void *out,
                     char *err, size_t err_len)
{
    const up_ctx *x = ctx;
    return up_rearranged(x, variant, tokens, n, out, x->s.K, rule_missing, true, err, err_len);
}

static int m_zero_start(void *ctx, int variant, const int64_t *tokens, size_t n, void *out,
                        char *err, size_t err_len)
{
    const up_ctx *x = ctx;
    return up_rearranged(x, variant, tokens, n, out, x->s.K + 1, rule_zero_start, true, err,
                         err_len);
}

static int m_dropped(void *ctx, int variant, const int64_t *tokens, size_t n, void *out,
                     char *err, size_t err_len)
{
    const up_ctx *x = ctx;
    return up_rearranged(x, variant, tokens, n, out, x->s.K, rule_dropped, true, err, err_len);
}

static int m_probs_ignored(void *ctx, int variant, const int64_t *tokens, size_t n, void *out,
                           char *err, size_t err_len)
{
    const up_ctx *x = ctx;
    return up_rearranged(x, variant, tokens, n, out, x->s.K, rule_probs_ignored, false, err,
                         err_len);
}

/* ---------------------------------------------------------------------- */
/* Products made by the library, summed another way                       */
/* ---------------------------------------------------------------------- */

/* Each slot's product x*p in dtype c (FLOAT: the fp32 product the
 * operator adds; the tokens' dtype: the product narrowed), slot-major:
 * block k holds slot k of every token ([K][n][H]), present[k*n + i] says
 * whether the slot is in the sum (a slot left out is +0.0).  A slot is in
 * when it is included, or (with_zero_probs) when it reads a row whatever
 * its prob. */
static int up_products(const up_ctx *x, moeperm_dtype c, const int64_t *tokens, size_t n,
                       bool with_zero_probs, void **products, bool **present, char *err,
                       size_t err_len)
{
    size_t total = n * (size_t)x->s.K, es = moeperm_dtype_size(c);
    *products = calloc(total * (size_t)x->s.H, es);
    *present = malloc(total * sizeof **present + 1);
    golden_diag_operand *ops = malloc(total * sizeof *ops + 1);
    void *probs = malloc(total * moeperm_dtype_size(x->pdtype) + 1);
    int rc = -1;
    if (!*products || !*present || !ops || !probs) {
        oom(err, err_len);
        goto done;
    }
    for (int64_t k = 0; k < x->s.K; k++)
        for (size_t i = 0; i < n; i++) {
            size_t at = (size_t)k * n + i;
            bool in = with_zero_probs ? x->s.idx[tokens[i] * x->s.K + k] < x->s.R
                                      : included(x, tokens[i], k);
            (*present)[at] = in;
            ops[at] = in ? slot(x, tokens[i], k) : GOLDEN_DIAG_SKIP;
            golden_bits_store(x->pdtype, probs, at, prob(x, tokens[i], k));
        }
    rc = golden_diag_scale_rows(c, x->pdtype, x->s.H, (int64_t)total, ops, probs, *products, err,
                                err_len);
done:
    free(ops);
    free(probs);
    if (rc != 0) {
        free(*products);
        free(*present);
        *products = NULL;
        *present = NULL;
    }
    return rc;
}

/* The operator's sum, in dtype c, over products made by up_products():
 * slots in k order from the first present one (+0.0 when slot 0 is
 * absent), one narrowing: MoeTokenPermuteGrad on the products. */
static int up_sum_products(const up_ctx *x, moeperm_dtype c, size_t n, const void *products,
                           const bool *present, void *out, char *err, size_t err_len)
{
    golden_diag_operand *ops = malloc(n * (size_t)x->s.K * sizeof *ops + 1);
    if (!ops)
        return oom(err, err_len);
    for (size_t i = 0; i < n; i++)
        for (int64_t k = 0; k < x->s.K; k++) {
            size_t at = (size_t)k * n + i;
            ops[i * (size_t)x->s.K + (size_t)k] =
                present[at] ? (golden_diag_operand){products, c, (int64_t)at} : GOLDEN_DIAG_SKIP;
        }
    int rc = golden_diag_run(c, x->s.H, (int64_t)n, x->s.K, ops, out, err, err_len);
    free(ops);
    return rc;
}

/* The fp32 sum of products, narrowed to the tokens' dtype. */
static int up_sum32_narrowed(const up_ctx *x, size_t n, const void *products, const bool *present,
                             void *out, char *err, size_t err_len)
{
    size_t count = n * (size_t)x->s.H;
    float *acc = malloc(count * sizeof *acc + 1);
    if (!acc)
        return oom(err, err_len);
    int rc = up_sum_products(x, MOEPERM_FLOAT, n, products, present, acc, err, err_len);
    if (rc == 0)
        moeperm_convert(acc, MOEPERM_FLOAT, out, x->s.dtype, count);
    free(acc);
    return rc;
}

/* Each product narrowed to the tokens' dtype before it is added. */
static int m_product_narrowed(void *ctx, int variant, const int64_t *tokens, size_t n, void *out,
                              char *err, size_t err_len)
{
    const up_ctx *x = ctx;
    (void)variant;
    void *products;
    bool *present;
    if (up_products(x, x->s.dtype, tokens, n, false, &products, &present, err, err_len) != 0)
        return -1;
    int rc = up_sum_products(x, x->s.dtype, n, products, present, out, err, err_len);
    free(products);
    free(present);
    return rc;
}

/* Slots with a zero prob multiplied and added like the others. */
static int m_zero_prob(void *ctx, int variant, const int64_t *tokens, size_t n, void *out,
                       char *err, size_t err_len)
{
    const up_ctx *x = ctx;
    (void)variant;
    void *products;
    bool *present;
    if (up_products(x, MOEPERM_FLOAT, tokens, n, true, &products, &present, err, err_len) != 0)
        return -1;
    int rc = up_sum32_narrowed(x, n, products, present, out, err, err_len);
    free(products);
    free(present);
    return rc;
}

/* The fp32 products added as a tree (golden_diag_tree()), then narrowed. */
static int m_pairwise(void *ctx, int variant, const int64_t *tokens, size_t n, void *out,
                      char *err, size_t err_len)
{
    const up_ctx *x = ctx;
    void *products;
    bool *present;
    if (up_products(x, MOEPERM_FLOAT, tokens, n, false, &products, &present, err, err_len) != 0)
        return -1;
    size_t count = n * (size_t)x->s.H;
    float *sum = malloc(count * sizeof *sum + 1);
    int rc = -1;
    if (!sum)
        oom(err, err_len);
    else if (golden_diag_tree(variant, x->s.K, (int64_t)n, x->s.H, products, present, sum, err,
                              err_len) == 0)
        rc = moeperm_convert(sum, MOEPERM_FLOAT, out, x->s.dtype, count) == MOEPERM_SUCCESS ? 0 : -1;
    free(sum);
    free(products);
    free(present);
    return rc;
}

/*
 * The fused multiply-add: acc = fmaf(x, p, acc) for every included slot
 * after the first, one rounding where the operator rounds the product and
 * the sum apart.  libmoeperm never fuses (that is the point of its
 * arithmetic), so this step alone is computed here, with C's fmaf(), which
 * rounds the exact x*p + acc once (it is the bug, not the reference).  The
 * first included slot's product, the widening and the narrowing are the
 * library's.
 */
static int m_fma(void *ctx, int variant, const int64_t *tokens, size_t n, void *out, char *err,
                 size_t err_len)
{
    const up_ctx *x = ctx;
    (void)variant;
    size_t count = n * (size_t)x->s.H, es = moeperm_dtype_size(x->s.dtype);
    float *acc = malloc(count * sizeof *acc + 1), *row = malloc((size_t)x->s.H * sizeof *row + 1);
    golden_diag_operand *ops = malloc(n * sizeof *ops + 1);
    void *probs = malloc(n * moeperm_dtype_size(x->pdtype) + 1);
    int rc = -1;
    if (!acc || !row || !ops || !probs) {
        oom(err, err_len);
        goto done;
    }
    /* slot 0's product, or +0.0 when it is not included: the operator with
     * top_k = 1 in fp32 */
    for (size_t i = 0; i < n; i++) {
        ops[i] = slot(x, tokens[i], 0);
        golden_bits_store(x->pdtype, probs, i, prob(x, tokens[i], 0));
    }
    if (golden_diag_unpermute(MOEPERM_FLOAT, x->pdtype, x->s.H, (int64_t)n, 1, ops, probs, acc, err,
                              err_len) != 0)
        goto done;
    for (size_t i = 0; i < n; i++)
        for (int64_t k = 1; k < x->s.K; k++) {
            if (!included(x, tokens[i], k))
                continue;
            float *a = acc + i * (size_t)x->s.H, p;
            int32_t r = x->s.idx[tokens[i] * x->s.K + k];
            uint8_t pb[8];
            golden_bits_store(x->pdtype, pb, 0, prob(x, tokens[i], k));
            moeperm_convert((const uint8_t *)x->x + (size_t)r * (size_t)x->s.H * es, x->s.dtype, row,
                            MOEPERM_FLOAT, (size_t)x->s.H);
            moeperm_convert(pb, x->pdtype, &p, MOEPERM_FLOAT, 1);
            for (int64_t c = 0; c < x->s.H; c++)
                a[c] = fmaf(row[c], p, a[c]);
        }
    rc = moeperm_convert(acc, MOEPERM_FLOAT, out, x->s.dtype, count) == MOEPERM_SUCCESS ? 0 : -1;
done:
    free(acc);
    free(row);
    free(ops);
    free(probs);
    return rc;
}

/* ---------------------------------------------------------------------- */
/* Sums kept or narrowed in the tokens' dtype                             */
/* ---------------------------------------------------------------------- */

/*
 * The accumulator in the tokens' dtype: each step a top_k = 2 run in that
 * dtype, the accumulator with prob 1 and slot k with its prob, so the
 * library multiplies, adds and narrows.  Variant 0 narrows the first
 * product too (acc = narrow(x0*p0), a top_k = 1 run); variant 1 keeps it
 * in fp32 until the first addition (acc = narrow(x0*p0 + x1*p1), the
 * operator on slots 0 and 1).
 */
static int m_acc(void *ctx, int variant, const int64_t *tokens, size_t n, void *out, char *err,
                 size_t err_len)
{
    const up_ctx *x = ctx;
    size_t es = moeperm_dtype_size(x->s.dtype), ps = moeperm_dtype_size(x->pdtype);
    size_t row = (size_t)x->s.H * es;
    uint8_t *acc = malloc(n * row + 1), *next = malloc(n * row + 1);
    golden_diag_operand *ops = malloc(2 * n * sizeof *ops + 1);
    uint8_t *probs = malloc(2 * n * ps + 1);
    int rc = -1;
    if (!acc || !next || !ops || !probs) {
        oom(err, err_len);
        goto done;
    }
    int64_t first = variant == 0 ? 1 : 2;
    for (size_t i = 0; i < n; i++)
        for (int64_t k = 0; k < first; k++) {
            ops[i * (size_t)first + (size_t)k] = slot(x, tokens[i], k);
            golden_bits_store(x->pdtype, probs, i * (size_t)first + (size_t)k,
                              prob(x, tokens[i], k));
        }
    if (golden_diag_unpermute(x->s.dtype, x->pdtype, x->s.H, (int64_t)n, first, ops, probs, acc, err,
                              err_len) != 0)
        goto done;
    for (int64_t k = first; k < x->s.K; k++) {
        for (size_t i = 0; i < n; i++) {
            ops[2 * i] = (golden_diag_operand){acc, x->s.dtype, (int64_t)i};
            golden_bits_store(x->pdtype, probs, 2 * i, golden_diag_one(x->pdtype));
            ops[2 * i + 1] = slot(x, tokens[i], k);
            golden_bits_store(x->pdtype, probs, 2 * i + 1, prob(x, tokens[i], k));
        }
        if (golden_diag_unpermute(x->s.dtype, x->pdtype, x->s.H, (int64_t)n, 2, ops, probs, next, err,
                                  err_len) != 0)
            goto done;
        uint8_t *sw = acc;
        acc = next;
        next = sw;
    }
    memcpy(out, acc, n * row);
    rc = 0;
done:
    free(acc);
    free(next);
    free(ops);
    free(probs);
    return rc;
}

/* The fp32 sum (the operator with fp32 tokens: the rows widened exactly),
 * narrowed by another rule. */
static int up_narrowed(const up_ctx *x, const int64_t *tokens, size_t n, void *out,
                       golden_diag_rule rule, char *err, size_t err_len)
{
    size_t count = n * (size_t)x->s.H, total = n * (size_t)x->s.K;
    float *acc = malloc(count * sizeof *acc + 1);
    golden_diag_operand *ops = malloc(total * sizeof *ops + 1);
    void *probs = malloc(total * moeperm_dtype_size(x->pdtype) + 1);
    int rc = -1;
    if (!acc || !ops || !probs) {
        oom(err, err_len);
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        for (int64_t k = 0; k < x->s.K; k++) {
            ops[i * (size_t)x->s.K + (size_t)k] = slot(x, tokens[i], k);
            golden_bits_store(x->pdtype, probs, i * (size_t)x->s.K + (size_t)k,
                              prob(x, tokens[i], k));
        }
    if (golden_diag_unpermute(MOEPERM_FLOAT, x->pdtype, x->s.H, (int64_t)n, x->s.K, ops,
                              x->probs ? probs : NULL, acc, err, err_len) != 0)
        goto done;
    golden_diag_narrow(x->s.dtype, rule, acc, out, count);
    rc = 0;
done:
    free(acc);
    free(ops);
    free(probs);
    return rc;
}

static int m_truncate(void *ctx, int variant, const int64_t *tokens, size_t n, void *out,
                      char *err, size_t err_len)
{
    (void)variant;
    return up_narrowed(ctx, tokens, n, out, GOLDEN_DIAG_TRUNCATE, err, err_len);
}

static int m_half_away(void *ctx, int variant, const int64_t *tokens, size_t n, void *out,
                       char *err, size_t err_len)
{
    (void)variant;
    return up_narrowed(ctx, tokens, n, out, GOLDEN_DIAG_HALF_AWAY, err, err_len);
}

/* ---------------------------------------------------------------------- */
/* Which variants apply, what each finding says                           */
/* ---------------------------------------------------------------------- */

static int v_acc(const void *ctx)
{
    const up_ctx *x = ctx;
    return x->s.dtype == MOEPERM_FLOAT || x->s.K < 2 ? 0 : x->s.K >= 3 ? 2 : 1;
}

static int v_product(const void *ctx)
{
    const up_ctx *x = ctx;
    return x->s.dtype != MOEPERM_FLOAT && x->probs && x->s.K >= 2;
}

static int v_fma(const void *ctx)
{
    const up_ctx *x = ctx;
    return x->probs && x->s.K >= 2;
}

static int v_zero_prob(const void *ctx)
{
    const up_ctx *x = ctx;
    return x->has_zero_prob;
}

static int v_probs_ignored(const void *ctx)
{
    const up_ctx *x = ctx;
    return !x->probs ? 0 : x->has_zero_prob ? 2 : 1;
}

static const char *dname(const up_ctx *x)
{
    return moeperm_dtype_name(x->s.dtype);
}

static void d_acc(const void *ctx, int v, char *out, size_t len)
{
    const up_ctx *x = ctx;
    snprintf(out, len,
             v == 0 ? "the sum is kept in %s: narrowed after every addition, the first product "
                      "too"
                    : "the sum is kept in %s: narrowed after every addition (the first product "
                      "is not narrowed before it)",
             dname(x));
}

static void d_product(const void *ctx, int v, char *out, size_t len)
{
    const up_ctx *x = ctx;
    (void)v;
    snprintf(out, len, "each product x*p is narrowed to %s before it is added", dname(x));
}

static void d_pairwise(const void *ctx, int v, char *out, size_t len)
{
    const up_ctx *x = ctx;
    if (v == 0)
        snprintf(out, len, "the products are added as a tree of neighbours: (0+1)+(2+3)+...");
    else
        snprintf(out, len,
                 "the products are added as a tree folding the upper half onto the lower: "
                 "slot k plus slot k+%" PRId64 " first",
                 (x->s.K + 1) / 2);
}

static void d_fma(const void *ctx, int v, char *out, size_t len)
{
    (void)ctx;
    (void)v;
    snprintf(out, len, "x*p + acc is fused (one rounding), not a product rounded then a sum");
}

static void d_zero_start(const void *ctx, int v, char *out, size_t len)
{
    (void)ctx;
    (void)v;
    snprintf(out, len,
             "the accumulator starts at +0.0 and adds slot 0 (a sum of -0.0 comes out +0.0)");
}

static void d_zero_prob(const void *ctx, int v, char *out, size_t len)
{
    (void)ctx;
    (void)v;
    snprintf(out, len,
             "slots whose prob is 0 are not skipped: x*0 is added (0*inf gives NaN, signs of "
             "zero change)");
}

static void d_probs_ignored(const void *ctx, int v, char *out, size_t len)
{
    (void)ctx;
    snprintf(out, len,
             v == 0 ? "probs are ignored: the rows are summed unscaled"
                    : "probs are ignored: the rows are summed unscaled (slots whose prob is 0 "
                      "still skipped)");
}

static void d_dropped(const void *ctx, int v, char *out, size_t len)
{
    const up_ctx *x = ctx;
    static const char *const what[] = {"read as zeros", "read row (index mod %" PRId64 ")",
                                       "read row %" PRId64 " (the last)"};
    char read[64];
    snprintf(read, sizeof read, what[v], v == 1 ? x->s.R : x->s.R - 1);
    snprintf(out, len,
             "slots whose index is %" PRId64 " (the rows of permuted_tokens) or more are not "
             "skipped: they are %s and scaled by their prob",
             x->s.R, read);
}

/* What slot k of token t adds at column c: x*p in double, or nothing when
 * it is not included. */
static double contribution(const void *ctx, int64_t t, int64_t k, int64_t c)
{
    const up_ctx *x = ctx;
    if (!included(x, t, k))
        return NAN;
    int32_t r = x->s.idx[t * x->s.K + k];
    double v = golden_bits_double(
        x->s.dtype, golden_bits_load(x->s.dtype, x->x, (uint64_t)r * (uint64_t)x->s.H + (uint64_t)c));
    return v * golden_bits_double(x->pdtype, prob(x, t, k));
}

/* An infinity or NaN among a slot's row or prob (even one whose prob is 0:
 * 0*inf), or products whose magnitudes reach the end of fp16's range. */
static bool special_possible(const void *ctx, int64_t t, int64_t c)
{
    const up_ctx *x = ctx;
    double sum = 0;
    for (int64_t k = 0; k < x->s.K; k++) {
        int32_t r = x->s.idx[t * x->s.K + k];
        if (r >= x->s.R)
            continue;
        double v = golden_bits_double(
            x->s.dtype, golden_bits_load(x->s.dtype, x->x, (uint64_t)r * (uint64_t)x->s.H + (uint64_t)c));
        double p = golden_bits_double(x->pdtype, prob(x, t, k));
        if (!isfinite(v) || !isfinite(p))
            return true;
        sum += fabs(v * p);
    }
    return sum >= GOLDEN_DIAG_FP16_LIMIT;
}

static bool setup(const golden_diag_problem *p, const golden_diag_tensor *expected, void *ctx)
{
    up_ctx *x = ctx;
    const golden_diag_tensor *t = golden_diag_input(p, "permuted_tokens");
    const golden_diag_tensor *ix = golden_diag_input(p, "sorted_indices");
    if (!t || !ix || t->ndim != 2 || ix->ndim != 1 || expected->ndim != 2 ||
        ix->dtype != MOEPERM_INT32 || t->dtype != expected->dtype ||
        !golden_bits_is_float(t->dtype) || t->dims[1] != expected->dims[1] ||
        (t->dims[0] > 0 && !t->data) || (ix->dims[0] > 0 && !ix->data))
        return false;
    x->s.T = expected->dims[0];
    if (!golden_diag_probs(p, x->s.T, &x->s.K, &x->pdtype, &x->probs))
        return false;
    /* The operator's domain: the first N*K entries read, any more never;
     * any number of rows R. */
    if (ix->dims[0] < x->s.T * x->s.K || x->s.T * x->s.K > INT32_MAX)
        return false;
    x->s.dtype = t->dtype;
    x->x = t->data;
    x->s.idx = ix->data;
    x->s.R = t->dims[0];
    x->s.H = t->dims[1];
    x->s.contribution = contribution;
    if (!golden_diag_sum_indices(&x->s))
        return false;
    for (int64_t i = 0; i < x->s.T * x->s.K; i++)
        x->has_zero_prob |= x->s.idx[i] < x->s.R && zero_prob(x, i / x->s.K, i % x->s.K);
    return x->s.H > 0;
}

/* A model touches a token's top_k slots and its output row. */
static size_t row_elements(const void *ctx)
{
    const up_ctx *x = ctx;
    return (size_t)(x->s.K + 1) * (size_t)x->s.H;
}

#define UP "MoeTokenUnpermute"

/* In catalogue order, which is also the order of exact findings. */
static const golden_diag_model models[] = {
    {{"acc-in-output-dtype", UP,
      "the sum is kept in the tokens' dtype: narrowed after every addition"},
     v_acc, NULL, NULL, m_acc, d_acc},
    {{"product-in-output-dtype", UP,
      "each product x*p is narrowed to the tokens' dtype before it is added"},
     v_product, NULL, NULL, m_product_narrowed, d_product},
    {{"truncate", UP, "the fp32 sum is narrowed by truncation instead of to nearest even"},
     golden_diag_sum_narrow16, NULL, NULL, m_truncate, golden_diag_sum_truncate},
    {{"round-half-away", UP, "ties are rounded away from zero instead of to even when narrowing"},
     golden_diag_sum_narrow16, NULL, NULL, m_half_away, golden_diag_sum_half_away},
    {{"k-order-reversed", UP, "slots are added from k = K-1 down to 0"},
     golden_diag_sum_two, NULL, NULL, m_reversed, golden_diag_sum_reversed},
    {{"k-order-pairwise", UP, "the products are added as a pairwise tree"},
     golden_diag_sum_pairwise, NULL, NULL, m_pairwise, d_pairwise},
    {{"fma", UP, "x*p + acc is fused into one rounding"},
     v_fma, NULL, NULL, m_fma, d_fma},
    {{"zero-start", UP, "the accumulator starts at +0.0 and adds slot 0"},
     golden_diag_sum_zero_start, NULL, NULL, m_zero_start, d_zero_start},
    {{"zero-prob-not-skipped", UP, "slots whose prob is 0 are multiplied and added"},
     v_zero_prob, NULL, NULL, m_zero_prob, d_zero_prob},
    {{"probs-ignored", UP, "the rows are summed without their probs"},
     v_probs_ignored, NULL, NULL, m_probs_ignored, d_probs_ignored},
    {{"dropped-not-skipped", UP,
      "slots with an index >= rows are added (as zeros, row index mod rows, or the last row)"},
     golden_diag_sum_dropped, NULL, NULL, m_dropped, d_dropped},
    {{"missing-slot", UP, "slot k is never added"},
     golden_diag_sum_missing, NULL, golden_diag_sum_select_missing, m_missing, golden_diag_sum_missing_slot},
};

const golden_diag_operator golden_diag_unpermute_op = {
    UP, "unpermuted_tokens", "token", models, sizeof models / sizeof models[0], sizeof(up_ctx),
    setup, NULL, row_elements, special_possible,
};
