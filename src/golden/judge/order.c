/*
 * order.c - MoeTokenUnpermuteGrad's probs_grad: whether the values a
 * device gives differ from the model's by no more than a reduction in
 * another order could make, measured against the exact dot products the
 * case carries (docs/unpermute-grad.md, docs/judging.md).
 */
#include "golden/judge/order.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The value of element i of a float tensor, widened (exactly) to double. */
static double value_at(moeperm_dtype dtype, const void *data, uint64_t i)
{
    switch (dtype) {
    case MOEPERM_FLOAT:
        return ((const float *)data)[i];
    case MOEPERM_FLOAT16:
        return moeperm_fp16_to_float(((const uint16_t *)data)[i]);
    default:
        return moeperm_bf16_to_float(((const uint16_t *)data)[i]);
    }
}

/* The spacing of the probs dtype at |v| (its ulp), as a double. */
static double ulp_at(moeperm_dtype dtype, double v)
{
    int mantissa = dtype == MOEPERM_FLOAT ? 23 : dtype == MOEPERM_FLOAT16 ? 10 : 7;
    int min_exp = dtype == MOEPERM_FLOAT16 ? -14 : -126;
    int e;
    frexp(fabs(v), &e);
    e -= 1; /* |v| in [2^e, 2^(e+1)) */
    if (v == 0 || e < min_exp)
        e = min_exp;
    return ldexp(1.0, e - mantissa);
}

/*
 * Sums in binary32 of n products, in any order, lie within
 * (n - 1) * u * sum|p| of the exact sum of the products (u = 2^-24, the
 * unit roundoff; Higham, "Accuracy and Stability of Numerical Algorithms",
 * 4.2), and each product is within u of x*g.  So a device that multiplies
 * as the model does but adds in another order lands within
 * n * u * sum|x*g| of the exact dot product, plus half an ulp of the probs
 * dtype for the final narrowing.  A difference inside that bound is
 * "order"; one outside is "wrong".
 */
bool golden_judge_order(const moeperm_golden_case *c, const moeperm_golden_tensor *pg,
                        const void *actual, golden_diagnosis *d)
{
    const moeperm_golden_tensor *exact = moeperm_golden_case_tensor_const(c, "probs_grad_exact");
    const moeperm_golden_tensor *x = moeperm_golden_case_tensor_const(c, "permuted_tokens");
    const moeperm_golden_tensor *g = moeperm_golden_case_tensor_const(c, "unpermuted_tokens_grad");
    const moeperm_golden_tensor *idx = moeperm_golden_case_tensor_const(c, "sorted_indices");
    if (!exact || !exact->data || !x || !x->data || !g || !g->data || !idx || !idx->data)
        return false;
    int64_t n = pg->shape[0], k = pg->shape[1], rows = x->shape[0], h = x->shape[1];
    const double *ex = exact->data;
    const int32_t *si = idx->data;
    uint64_t order = 0, wrong = 0, worst_ulp = 0;
    /* a token's g and a slot's row, widened once */
    float *gw = malloc((size_t)h * sizeof *gw + 1), *xw = malloc((size_t)h * sizeof *xw + 1);
    if (!gw || !xw) {
        free(gw);
        free(xw);
        return false;
    }
    size_t es = moeperm_dtype_size(x->dtype);
    for (int64_t t = 0; t < n; t++) {
        bool widened = false;
        for (int64_t s = 0; s < k; s++) {
            uint64_t i = (uint64_t)(t * k + s);
            double got = value_at(pg->dtype, actual, i);
            double want = value_at(pg->dtype, pg->data, i);
            if (got == want || (isnan(got) && isnan(want)))
                continue;
            double abs_sum = 0;
            int32_t row = si[i];
            if (row >= 0 && row < rows) {
                if (!widened)
                    moeperm_convert((const uint8_t *)g->data + (size_t)t * (size_t)h * es,
                                    g->dtype, gw, MOEPERM_FLOAT, (size_t)h);
                widened = true;
                moeperm_convert((const uint8_t *)x->data + (size_t)row * (size_t)h * es,
                                x->dtype, xw, MOEPERM_FLOAT, (size_t)h);
                for (int64_t col = 0; col < h; col++) {
                    float product = xw[col] * gw[col];
                    abs_sum += fabs((double)product);
                }
            }
            double bound = (double)(h + 1) * ldexp(abs_sum, -24) + 0.5 * ulp_at(pg->dtype, ex[i]);
            double distance = fabs(got - ex[i]);
            if (isfinite(distance) && distance <= bound) {
                order++;
                uint64_t ulps = (uint64_t)(distance / ulp_at(pg->dtype, ex[i]) + 0.5);
                worst_ulp = ulps > worst_ulp ? ulps : worst_ulp;
            } else {
                wrong++;
            }
        }
    }
    free(gw);
    free(xw);
    if (order + wrong == 0 || d->count >= GOLDEN_DIAG_MAX_FINDINGS)
        return false;
    /* This finding leads: it is the question the case asks; but "wrong"
     * comes after a model that reproduces the output exactly, which says
     * how it is wrong. */
    size_t at = 0;
    while (wrong > 0 && at < d->count && d->finding[at].exact)
        at++;
    memmove(&d->finding[at + 1], &d->finding[at], (d->count - at) * sizeof d->finding[0]);
    d->count++;
    golden_finding *f = &d->finding[at];
    memset(f, 0, sizeof *f);
    if (wrong == 0) {
        snprintf(f->id, sizeof f->id, "order");
        snprintf(f->detail, sizeof f->detail,
                 "every difference is within the error of some order of the reduction "
                 "(at most %" PRIu64 " ulp from the exact dot product): the device sums in "
                 "another order than the model",
                 worst_ulp);
        f->explained = order;
        f->exact = true;
    } else {
        snprintf(f->id, sizeof f->id, "wrong");
        snprintf(f->detail, sizeof f->detail,
                 "%" PRIu64 " of the %" PRIu64 " differences are farther from the exact dot "
                 "product than any order of the reduction could make them: a wrong kernel",
                 wrong, order + wrong);
        f->explained = wrong;
        f->contradicted = order;
    }
    return true;
}
