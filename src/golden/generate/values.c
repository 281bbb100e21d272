/*
 * values.c - the value kinds, element by element: gradient-like values,
 * the adversarial kinds (one device question per kind, a scenario per
 * column), and the kinds made together across the tokens, probs and
 * gradient of a case, keyed by shared draws, so that a token value meets
 * the prob it was made for.  Every input bit is a pure function of (seed,
 * position), documented in docs/golden-format.md, so numpy can rebuild any
 * case.
 */
#include "golden/generate/values.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "golden/common/prng.h"
#include "golden/generate/normal.h"

golden_format golden_format_of(moeperm_dtype dtype)
{
    switch (dtype) {
    case MOEPERM_FLOAT:
        return (golden_format){dtype, 23, 127, 0x80000000u, 0x7f800000u, 0x7f7fffffu, 0x3f800000u,
                        0x7fc00000u};
    case MOEPERM_FLOAT16:
        return (golden_format){dtype, 10, 15, 0x8000u, 0x7c00u, 0x7bffu, 0x3c00u, 0x7e00u};
    default:
        return (golden_format){dtype, 7, 127, 0x8000u, 0x7f80u, 0x7f7fu, 0x3f80u, 0x7fc0u};
    }
}

static uint32_t narrow(const golden_format *f, float v)
{
    switch (f->dtype) {
    case MOEPERM_FLOAT:
        return float_bits(v);
    case MOEPERM_FLOAT16:
        return moeperm_float_to_fp16(v);
    default:
        return moeperm_float_to_bf16(v);
    }
}

/* 2^e in the format (exact for every e used here). */
static uint32_t pow2(const golden_format *f, int e)
{
    return narrow(f, ldexpf(1.0f, e));
}

/*
 * The gradient-like value of one element from its two draws: the
 * Irwin-Hall sum of four 24-bit uniforms, centred, scaled into (-1, 1) and
 * further by 2^-e with e from the top 3 bits of d1, computed exactly in
 * double and rounded once to binary32 (then to the format, both RNE).
 */
static double normal_exact(uint64_t d0, uint64_t d1)
{
    int64_t sum = (int64_t)(d0 & 0xffffff) + (int64_t)((d0 >> 24) & 0xffffff) +
                  (int64_t)(d1 & 0xffffff) + (int64_t)((d1 >> 24) & 0xffffff);
    int e = (int)(d1 >> 61);
    return ldexp((double)(sum - (INT64_C(1) << 25)), -25 - e);
}

/* A NaN with random sign and payload; quiet unless signalling is asked,
 * when the quiet bit is clear and the payload non-zero. */
static uint32_t nan_bits(const golden_format *f, uint64_t d, bool signalling)
{
    uint32_t payload_mask = (1u << (f->mantissa - 1)) - 1;
    uint32_t payload = (uint32_t)(d >> 32) & payload_mask;
    uint32_t sign = (d & 1) ? f->sign : 0;
    if (signalling)
        return sign | f->inf | (payload | 1u);
    return sign | f->qnan | payload;
}

/* A subnormal of the format with random sign and non-zero mantissa. */
static uint32_t subnormal_bits(const golden_format *f, uint64_t d)
{
    uint32_t mantissa = 1u + (uint32_t)prng_below(d, (1u << f->mantissa) - 1u);
    return ((d & 1) ? f->sign : 0) | mantissa;
}

typedef struct element {
    int64_t k, top_k;
    int64_t p, q, r; /* distinct slots picked for this (token, column) when top_k allows */
    uint64_t d0, d1, dp;
    int scenario;
} element;

static uint32_t kind_nan_inf(const golden_format *f, const element *e, uint32_t normal)
{
    bool at_p = e->k == e->p, at_q = e->top_k > 1 && e->k == e->q;
    switch (e->scenario) {
    case 1: /* one NaN among numbers */
        return at_p ? nan_bits(f, e->d0, false) : normal;
    case 2: /* one +inf */
        return at_p ? f->inf : normal;
    case 3: /* one -inf */
        return at_p ? (f->sign | f->inf) : normal;
    case 4: /* +inf + -inf = NaN */
        return at_p ? f->inf : at_q ? (f->sign | f->inf) : normal;
    case 5: /* +inf + +inf = +inf */
        return at_p || at_q ? f->inf : normal;
    case 6: /* a signalling NaN input */
        return at_p ? nan_bits(f, e->d0, true) : normal;
    case 7: /* every slot a NaN: whose payload survives */
        return nan_bits(f, e->d0, false);
    default: /* 0: control */
        return normal;
    }
}

static uint32_t kind_subnormal(const golden_format *f, const element *e, uint32_t normal)
{
    uint32_t min_normal = 1u << f->mantissa;
    bool at_p = e->k == e->p, at_q = e->top_k > 1 && e->k == e->q;
    switch (e->scenario) {
    case 1: /* the smallest normal among subnormals */
        return at_p ? (((e->dp & 1) ? f->sign : 0) | min_normal) : subnormal_bits(f, e->d0);
    case 2: /* 1.5 * min_normal - min_normal: two normals, a subnormal sum */
        return at_p ? (min_normal | min_normal >> 1) : at_q ? (f->sign | min_normal) : 0;
    case 3: /* one subnormal repeated: the sum grows into the normals */
        return (uint32_t)prng_below(e->dp, min_normal - 1u) + 1u;
    case 4: /* a normal plus subnormals */
        return at_p ? normal : subnormal_bits(f, e->d0);
    case 5: /* one magnitude, alternating signs: a zero or one subnormal */
        return ((e->k & 1) ? f->sign : 0) | ((uint32_t)prng_below(e->dp, min_normal - 1u) + 1u);
    default: /* 0: subnormals only */
        return subnormal_bits(f, e->d0);
    }
}

static uint32_t kind_overflow(const golden_format *f, const element *e, uint32_t normal)
{
    bool at_p = e->k == e->p, at_q = e->top_k > 1 && e->k == e->q;
    switch (e->scenario) {
    case 0: /* max + max: +inf (IEEE) or +max (saturation) */
        return at_p || at_q ? f->max : normal;
    case 1: /* the negative side */
        return at_p || at_q ? (f->sign | f->max) : normal;
    case 2: /* max + a quarter ulp of max: below the midpoint, stays max */
        return at_p ? f->max : at_q ? pow2(f, f->emax - f->mantissa - 2) : 0;
    case 3: /* max + half an ulp of max: a tie, to even is to infinity */
        return at_p ? f->max : at_q ? pow2(f, f->emax - f->mantissa - 1) : 0;
    case 4: /* max, max, -max: the k-order sum overflows first (fp32 and bf16) */
        if (e->k == 0 || (e->k == 1 && e->top_k > 2))
            return f->max;
        return e->k == (e->top_k > 2 ? 2 : 1) ? (f->sign | f->max) : 0;
    default: /* 5: +-max/2 in every slot */
        return ((e->d0 & 1) ? f->sign : 0) | (f->max - (1u << f->mantissa));
    }
}

static uint32_t kind_rounding(const golden_format *f, const element *e, uint32_t normal)
{
    bool at_p = e->k == e->p, at_q = e->top_k > 1 && e->k == e->q;
    bool at_r = e->top_k > 2 && e->k == e->r;
    uint32_t sign = (e->dp & 1) ? f->sign : 0;
    uint32_t mantissa = (uint32_t)(e->dp >> 40) & ((1u << f->mantissa) - 1u);
    uint32_t neg_zero = f->sign;
    switch (e->scenario) {
    case 0: /* 1 + even ulps, plus half an ulp: a tie that stays (even) */
        return at_p ? sign | f->one | (mantissa & ~1u)
               : at_q ? sign | pow2(f, -f->mantissa - 1)
                      : 0;
    case 1: /* 1 + odd ulps, plus half an ulp: a tie that rounds up (to even) */
        return at_p ? sign | f->one | (mantissa | 1u)
               : at_q ? sign | pow2(f, -f->mantissa - 1)
                      : 0;
    case 2: /* half plus a quarter ulp: above the tie */
        return at_p ? sign | f->one | (mantissa & ~1u)
               : at_q ? sign | pow2(f, -f->mantissa - 1)
               : at_r ? sign | pow2(f, -f->mantissa - 2)
                      : 0;
    case 3: { /* B, small..., -B with small = B * 2^-24: absorbed in k order */
        int eb = f->dtype == MOEPERM_FLOAT16 ? 10 : 24;
        if (e->k == 0)
            return sign | pow2(f, eb);
        if (e->k == e->top_k - 1)
            return (sign ^ f->sign) | pow2(f, eb);
        return sign | pow2(f, eb - 24);
    }
    case 4: /* every slot -0: the sum is -0 */
        return neg_zero;
    case 5: /* every slot +0 */
        return 0;
    case 6: /* -0 first, +0 after: +0 */
        return e->k == 0 ? neg_zero : 0;
    case 7: /* x + -x = +0, then -0s: +0 */
        return e->k == 0 ? normal : e->k == 1 ? (normal ^ f->sign) : neg_zero;
    case 8: /* -0, x, -x, -0...: +0 */
        return e->k == 1 ? normal : e->k == 2 ? (normal ^ f->sign) : neg_zero;
    case 9: /* (1 + ulp) - 1: exact cancellation (Sterbenz) */
        return e->k == 0 ? (f->one | 1u) : e->k == 1 ? (f->sign | f->one) : neg_zero;
    default: /* 10: control */
        return normal;
    }
}

/* p, q, r: distinct slots of a (token, column) from its pick draw dp (p
 * from the high 32 bits, q and r from the low 32); all p when K = 1. */
static void pick_slots(element *e, int64_t top_k)
{
    e->p = (int64_t)prng_below(e->dp, (uint64_t)top_k);
    e->q = e->p;
    e->r = e->p;
    if (top_k > 1) {
        uint64_t low = (e->dp & 0xffffffffu) << 32;
        e->q = (e->p + 1 + (int64_t)prng_below(low, (uint64_t)top_k - 1)) % top_k;
        e->r = (e->q + 1) % top_k;
        if (e->r == e->p)
            e->r = (e->r + 1) % top_k;
    }
}

/* The draw of slot (t, k) that the coordinated kinds share between probs
 * and the rows that slot owns. */
static uint64_t slot_draw(const golden_generator *g, int64_t t, int64_t k)
{
    return prng_draw(g->slot_key, (uint64_t)t * (uint64_t)g->slots + (uint64_t)k);
}

/* Raw bits sign | 2^e * (1 + mant / 2^m) for a normal exponent e. */
static uint32_t compose(const golden_format *f, bool negative, int e, uint32_t mant)
{
    return (negative ? f->sign : 0) | ((uint32_t)(e + f->emax) << f->mantissa) | mant;
}

static uint32_t random_mantissa(const golden_format *f, uint64_t d)
{
    return (uint32_t)(d >> 40) & ((1u << f->mantissa) - 1u);
}

static int min_normal_exponent(const golden_format *f)
{
    return 1 - f->emax;
}

/* masking: a quarter of the slots (slot draw & 3 == 0) are masked. */
static bool slot_masked(const golden_generator *g, int64_t t, int64_t k)
{
    return (slot_draw(g, t, k) & 3u) == 0;
}

/* inf, -inf, a quiet NaN, a number: the four columns of a poisoned row. */
static uint32_t poisoned(const golden_format *f, int64_t h, uint64_t d0, uint32_t normal)
{
    switch (h % 4) {
    case 0:
        return f->inf;
    case 1:
        return f->sign | f->inf;
    case 2:
        return nan_bits(f, d0, false);
    default:
        return normal;
    }
}

/* product-rounding: prob 1 + 2^-d with d in [lo, hi], where the tokens
 * can hold the 1 + 2^-(24 - d) whose fp32 product with it is a tie. */
static int product_d(const golden_generator *g, int64_t t, int64_t k)
{
    int hi = g->probs.mantissa < 22 ? g->probs.mantissa : 22;
    int lo = 24 - g->tokens.mantissa > 2 ? 24 - g->tokens.mantissa : 2;
    if (lo > hi)
        lo = 2;
    return lo + (int)prng_below(slot_draw(g, t, k), (uint64_t)(hi - lo + 1));
}

/* 1 + 2^-c (a tie with 1 + 2^-d when c + d = 24) and 1 + 2^-(c-1) + 2^-c
 * (a tie that rounds up), c = min(24 - d, m), with the sign from dp. */
static uint32_t product_tie(const golden_format *f, int d, uint64_t dp, bool up)
{
    int c = 24 - d < f->mantissa ? 24 - d : f->mantissa;
    uint32_t bits = ((dp & 1) ? f->sign : 0) | f->one | (1u << (f->mantissa - c));
    return up ? bits | (1u << (f->mantissa - c + 1)) : bits;
}

/* product-subnormal: prob 2^-jp. */
static int subnormal_jp(const golden_generator *g, int64_t t, int64_t k)
{
    int base = g->probs.dtype == MOEPERM_FLOAT16    ? 14
               : g->tokens.dtype == MOEPERM_FLOAT16 ? 122
                                                    : 40;
    return base + (int)prng_below(slot_draw(g, t, k), 8);
}

/* A token value whose product with 2^-jp is (1 + f) 2^te, te drawn from dp
 * in [-149, -127], its exponent raised to the format's smallest normal
 * where the format cannot go that low. */
static uint32_t subnormal_factor(const golden_format *f, int jp, uint64_t dp, uint64_t d0)
{
    int te = -127 - (int)prng_below(dp, 23);
    int e = te + jp > min_normal_exponent(f) ? te + jp : min_normal_exponent(f);
    return compose(f, d0 & 1, e, random_mantissa(f, d0));
}

/* product-overflow: prob 2^jp, jp in [1, 4]. */
static int overflow_jp(const golden_generator *g, int64_t t, int64_t k)
{
    return 1 + (int)prng_below(slot_draw(g, t, k), 4);
}

/* The coordinated kinds.  (t, k, h) is the element; for GOLDEN_FILL_GRAD k is
 * unused and the gradient takes the value of the pick slot p, for
 * GOLDEN_FILL_PROBS h is unused.  d0, d1 are the element's own value draws,
 * normal its normal value. */
static uint32_t coordinated_bits(const golden_generator *g, int64_t t, int64_t k, int64_t h,
                                 uint64_t d0, uint64_t d1, uint32_t normal)
{
    const golden_format *f = &g->f;
    moeperm_golden_values v = g->values;
    if (g->fills == GOLDEN_FILL_PROBS) {
        uint64_t ds;
        switch (v) {
        case MOEPERM_GOLDEN_VALUES_MASKING:
            ds = slot_draw(g, t, k);
            return (ds & 3u) == 0 ? ((ds & 4u) ? f->sign : 0) : normal;
        case MOEPERM_GOLDEN_VALUES_PRODUCT_ROUNDING:
            return f->one | (1u << (f->mantissa - product_d(g, t, k)));
        case MOEPERM_GOLDEN_VALUES_PRODUCT_SUBNORMAL:
            return narrow(f, ldexpf(1.0f, -subnormal_jp(g, t, k)));
        case MOEPERM_GOLDEN_VALUES_PRODUCT_OVERFLOW:
            return pow2(f, overflow_jp(g, t, k));
        case MOEPERM_GOLDEN_VALUES_ONE:
            return f->one;
        default:
            return normal;
        }
    }
    if (g->fills == GOLDEN_FILL_TOKENS)
        return normal;
    switch (v) {
    case MOEPERM_GOLDEN_VALUES_MASKING:
        return g->fills == GOLDEN_FILL_PERMUTED && slot_masked(g, t, k) ? poisoned(f, h, d0, normal)
                                                                : normal;
    case MOEPERM_GOLDEN_VALUES_GRAD_INF:
        return g->fills == GOLDEN_FILL_GRAD && (t & 1) ? poisoned(f, h, d0, normal) : normal;
    case MOEPERM_GOLDEN_VALUES_CANCEL:
        if (g->fills == GOLDEN_FILL_GRAD) {
            /* +-2^-E, +-1, +-2^E in pairs of columns, E = 24 (fp16: 14):
             * the products span more than 24 bits, so which small ones
             * are absorbed depends on the order of the adds. */
            int e = f->dtype == MOEPERM_FLOAT16 ? 14 : 24;
            return ((h & 1) ? f->sign : 0) | pow2(f, e * ((int)((h >> 1) % 3) - 1));
        }
        return narrow(f, (float)(1.0 + normal_exact(d0, d1) / 4));
    case MOEPERM_GOLDEN_VALUES_TINY:
        return compose(f, d0 & 1, f->dtype == MOEPERM_FLOAT16 ? -14 : -70,
                       random_mantissa(f, d0));
    case MOEPERM_GOLDEN_VALUES_PRODUCT_ROUNDING:
    case MOEPERM_GOLDEN_VALUES_PRODUCT_SUBNORMAL:
    case MOEPERM_GOLDEN_VALUES_PRODUCT_OVERFLOW:
        break;
    default:
        return normal;
    }

    element e = {.k = k, .top_k = g->slots};
    e.dp = prng_draw(g->pick_key, (uint64_t)t * (uint64_t)g->columns + (uint64_t)h);
    pick_slots(&e, g->slots);
    bool grad = g->fills == GOLDEN_FILL_GRAD;
    bool at_p = grad || k == e.p, at_q = !grad && g->slots > 1 && k == e.q;
    uint32_t sgn = (e.dp & 1) ? f->sign : 0;
    switch (v) {
    case MOEPERM_GOLDEN_VALUES_PRODUCT_ROUNDING: {
        int s = (int)(h % 6);
        if (s == 5 || (grad && s == 4))
            return normal;
        if (s == 4) { /* N at p, -N at q: the same value, its draws slot p's */
            if (at_p)
                return normal;
            if (!at_q)
                return 0;
            uint64_t n = (((uint64_t)t * (uint64_t)g->slots + (uint64_t)e.p) *
                              (uint64_t)g->columns + (uint64_t)h) * 2;
            return narrow(f, normal_value(prng_draw(g->value_key, n),
                                          prng_draw(g->value_key, n + 1))) ^ f->sign;
        }
        uint32_t x = product_tie(f, product_d(g, t, e.p), e.dp, s & 1);
        return at_p ? x : (s >= 2 && at_q) ? x ^ f->sign : 0;
    }
    case MOEPERM_GOLDEN_VALUES_PRODUCT_SUBNORMAL: {
        int s = (int)(h % 3);
        if (s == 2)
            return normal;
        int jp = subnormal_jp(g, t, grad ? e.p : k);
        return (s == 0 || at_p) ? subnormal_factor(f, jp, e.dp, d0) : 0;
    }
    default: { /* MOEPERM_GOLDEN_VALUES_PRODUCT_OVERFLOW */
        int s = (int)(h % 4);
        switch (s) {
        case 0:
            return sgn | f->max;
        case 1:
            return at_p ? sgn | f->max : at_q ? (sgn ^ f->sign) | f->max : 0;
        case 2:
            return at_p ? sgn | (f->max - ((uint32_t)overflow_jp(g, t, e.p) << f->mantissa))
                        : 0;
        default:
            return normal;
        }
    }
    }
}

static bool coordinated_kind(moeperm_golden_values v)
{
    return v >= MOEPERM_GOLDEN_VALUES_MASKING;
}

uint32_t golden_element_bits(const golden_generator *g, int64_t t, int64_t k, int64_t h)
{
    const golden_format *f = &g->f;
    uint64_t slot = (uint64_t)(t * g->top_k + k);
    uint64_t n = (slot * (uint64_t)g->hidden + (uint64_t)h) * 2;
    element e = {.k = k, .top_k = g->top_k};
    e.d0 = prng_draw(g->value_key, n);
    /* int8 tokens are copied, never computed with: random bytes. */
    if (f->dtype == MOEPERM_INT8)
        return (uint32_t)(e.d0 & 0xffu);
    e.d1 = prng_draw(g->value_key, n + 1);
    uint32_t normal = narrow(f, normal_value(e.d0, e.d1));

    switch (g->values) {
    case MOEPERM_GOLDEN_VALUES_NORMAL:
        return normal;
    case MOEPERM_GOLDEN_VALUES_NEGZERO:
        return f->sign;
    case MOEPERM_GOLDEN_VALUES_BITS:
        return f->dtype == MOEPERM_FLOAT ? (uint32_t)e.d0 : (uint32_t)(e.d0 & 0xffffu);
    default:
        break;
    }
    if (coordinated_kind(g->values)) {
        /* A plain tensor numbers its draws by (row, column): for probs
         * that is (t, k), for the gradient (t, h). */
        if (g->fills == GOLDEN_FILL_PROBS)
            return coordinated_bits(g, t, h, 0, e.d0, e.d1, normal);
        return coordinated_bits(g, t, k, h, e.d0, e.d1, normal);
    }
    /* Per (token, column): the scenario is the column modulo the kind's
     * scenario count; p, q, r are distinct slots drawn from the pick
     * stream. */
    e.scenario = (int)(h % g->scenarios);
    e.dp = prng_draw(g->pick_key, (uint64_t)t * (uint64_t)g->hidden + (uint64_t)h);
    pick_slots(&e, g->top_k);
    switch (g->values) {
    case MOEPERM_GOLDEN_VALUES_NAN_INF:
        return kind_nan_inf(f, &e, normal);
    case MOEPERM_GOLDEN_VALUES_SUBNORMAL:
        return kind_subnormal(f, &e, normal);
    case MOEPERM_GOLDEN_VALUES_OVERFLOW:
        return kind_overflow(f, &e, normal);
    default:
        return kind_rounding(f, &e, normal);
    }
}
