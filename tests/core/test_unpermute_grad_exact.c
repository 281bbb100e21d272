/*
 * moeperm_token_unpermute_grad_exact_probs_grad(): the exact dot product
 * rounded once to a double.  Checked against the tests' own exact sums
 * (128-bit fixed point, for values whose products fit it; hand-computed
 * cases at the extremes of binary32, where a fixed point of that width
 * cannot go), the special values, and the refusals, on every instruction
 * set the CPU has (call_exact()).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <moeperm/moeperm.h>

#include "naive.h"

#if defined(__x86_64__) || (defined(__i386__) && defined(__SSE2__))
#include <xmmintrin.h>
#define HAVE_MXCSR 1
#endif

__extension__ typedef __int128 wide;

typedef struct exact_case {
    moeperm_dtype dtype;
    int64_t tokens_num, top_k, hidden, rows;
    void *tokens, *grad, *probs;
    int32_t *indices;
} exact_case;

static moeperm_status call_exact(const exact_case *c, double *exact, uint64_t exact_len)
{
    int64_t tdims[2] = {c->rows, c->hidden}, gdims[2] = {c->tokens_num, c->hidden};
    int64_t idims[1] = {c->tokens_num * c->top_k}, pdims[2] = {c->tokens_num, c->top_k};
    moeperm_tensor *t = moeperm_tensor_create(tdims, 2, c->dtype, NULL, 0, c->tokens);
    moeperm_tensor *g = moeperm_tensor_create(gdims, 2, c->dtype, NULL, 0, c->grad);
    moeperm_tensor *ix = moeperm_tensor_create(idims, 1, MOEPERM_INT32, NULL, 0, c->indices);
    moeperm_tensor *p =
        c->probs ? moeperm_tensor_create(pdims, 2, MOEPERM_FLOAT, NULL, 0, c->probs) : NULL;
    /* Every instruction set this CPU has gives the same bits (the vector
     * widths of x86/exact_template.h); the portable build's result is the
     * one the tests check, and a refusal comes before any of them. */
    const moeperm_isa sets[3] = {MOEPERM_ISA_PORTABLE, MOEPERM_ISA_X86_AVX2,
                                 MOEPERM_ISA_X86_AVX512};
    assert_int_equal(moeperm_isa_choose(MOEPERM_ISA_PORTABLE), MOEPERM_SUCCESS);
    moeperm_status status =
        moeperm_token_unpermute_grad_exact_probs_grad(t, g, ix, p, exact, exact_len);
    double *again = malloc((size_t)exact_len * sizeof *again + 1);
    assert_non_null(again);
    for (int set = 1; set < 3 && status == MOEPERM_SUCCESS; set++) {
        if (moeperm_isa_choose(sets[set]) != MOEPERM_SUCCESS)
            continue; /* a set this CPU or this build lacks */
        assert_int_equal(
            moeperm_token_unpermute_grad_exact_probs_grad(t, g, ix, p, again, exact_len),
            MOEPERM_SUCCESS);
        if (memcmp(exact, again, (size_t)exact_len * sizeof *again) != 0)
            fail_msg("%s gives other bits than the portable build",
                     moeperm_isa_name(sets[set]));
    }
    assert_int_equal(moeperm_isa_choose(MOEPERM_ISA_AUTO), MOEPERM_SUCCESS);
    free(again);
    moeperm_tensor_destroy(t);
    moeperm_tensor_destroy(g);
    moeperm_tensor_destroy(ix);
    moeperm_tensor_destroy(p);
    return status;
}

static float value_of(moeperm_dtype dtype, const void *base, int64_t i)
{
    if (dtype == MOEPERM_FLOAT)
        return ((const float *)base)[i];
    uint16_t h = ((const uint16_t *)base)[i];
    return dtype == MOEPERM_BF16 ? naive_bf16_to_float(h) : naive_fp16_to_float(h);
}

static void set_value(moeperm_dtype dtype, void *base, int64_t i, float v)
{
    if (dtype == MOEPERM_FLOAT)
        ((float *)base)[i] = v;
    else if (dtype == MOEPERM_BF16)
        ((uint16_t *)base)[i] = naive_float_to_bf16(v);
    else
        ((uint16_t *)base)[i] = naive_float_to_fp16(v);
}

/* An integer of the dtype's significand width times a power of two, so
 * that every product is a multiple of 2^-40 below 2^68. */
static float fixed_point_value(moeperm_dtype dtype, uint64_t *state)
{
    uint64_t r = naive_rand(state);
    int bits = dtype == MOEPERM_FLOAT ? 24 : dtype == MOEPERM_BF16 ? 8 : 11;
    int64_t m = (int64_t)(r & ((UINT64_C(1) << bits) - 1));
    int e = (int)((r >> 32) % 15) - 20; /* [-20, -6]: fp16 keeps these normal-ish */
    if (dtype != MOEPERM_FLOAT16)
        e = (int)((r >> 32) % 31) - 20; /* [-20, 10] */
    return ((r >> 50) & 1 ? -1.0f : 1.0f) * ldexpf((float)m, e);
}

/* The tests' exact sum: every product times 2^40 is an integer. */
static double fixed_point_dot(const exact_case *c, int64_t i)
{
    int64_t n = i / c->top_k, s = c->indices[i];
    wide sum = 0;
    for (int64_t h = 0; h < c->hidden; h++) {
        double x = s < c->rows ? value_of(c->dtype, c->tokens, s * c->hidden + h) : 0.0;
        double g = value_of(c->dtype, c->grad, n * c->hidden + h);
        double scaled = ldexp(x * g, 40); /* exact: an integer below 2^108 */
        sum += (wide)scaled;
    }
    return ldexp((double)sum, -40); /* one rounding, to nearest even */
}

static exact_case *case_new(moeperm_dtype dtype, int64_t tokens_num, int64_t top_k, int64_t hidden,
                            int64_t rows)
{
    exact_case *c = calloc(1, sizeof *c);
    c->dtype = dtype;
    c->tokens_num = tokens_num, c->top_k = top_k, c->hidden = hidden, c->rows = rows;
    c->tokens = calloc((size_t)(rows * hidden) + 1, 4);
    c->grad = calloc((size_t)(tokens_num * hidden) + 1, 4);
    c->probs = calloc((size_t)(tokens_num * top_k) + 1, 4);
    c->indices = calloc((size_t)(tokens_num * top_k) + 1, 4);
    for (int64_t i = 0; i < tokens_num * top_k; i++)
        c->indices[i] = (int32_t)i;
    return c;
}

static void case_free(exact_case *c)
{
    free(c->tokens);
    free(c->grad);
    free(c->probs);
    free(c->indices);
    free(c);
}

static void expect_double_bits(double got, double want, const char *context)
{
    uint64_t a, b;
    memcpy(&a, &got, 8);
    memcpy(&b, &want, 8);
    if (a != b)
        fail_msg("%s: %a (0x%llx), want %a (0x%llx)", context, got, (unsigned long long)a, want,
                 (unsigned long long)b);
}

/* Random rows with heavy cancellation (each token's second half repeats
 * its first with the sign flipped, plus noise), every dtype, some slots
 * dropped; rows of 1000 columns and of 5000 (longer than the library's
 * pieces of a row, which hold a few thousand). */
static void test_exact_equals_a_128_bit_fixed_point_sum(void **state)
{
    (void)state;
    const moeperm_dtype dtypes[6] = {MOEPERM_BF16, MOEPERM_FLOAT16, MOEPERM_FLOAT,
                                     MOEPERM_BF16, MOEPERM_FLOAT16, MOEPERM_FLOAT};
    uint64_t seed = 7;
    for (int d = 0; d < 6; d++) {
        int64_t tokens_num = 6, top_k = 3, hidden = d < 3 ? 1000 : 5000, rows = 14;
        exact_case *c = case_new(dtypes[d], tokens_num, top_k, hidden, rows);
        for (int64_t i = 0; i < rows * hidden; i++) {
            int64_t h = i % hidden;
            float v = h < hidden / 2 ? fixed_point_value(dtypes[d], &seed)
                                     : -value_of(dtypes[d], c->tokens, i - hidden / 2);
            if (h % 97 == 0)
                v = fixed_point_value(dtypes[d], &seed);
            set_value(dtypes[d], c->tokens, i, v);
        }
        for (int64_t i = 0; i < tokens_num * hidden; i++) {
            int64_t h = i % hidden;
            set_value(dtypes[d], c->grad, i,
                      h < hidden / 2 ? fixed_point_value(dtypes[d], &seed)
                                     : value_of(dtypes[d], c->grad, i - hidden / 2));
        }
        naive_permutation(&seed, c->indices, tokens_num * top_k);
        double exact[18];
        assert_int_equal(call_exact(c, exact, 18), MOEPERM_SUCCESS);
        for (int64_t i = 0; i < 18; i++) {
            char context[64];
            snprintf(context, sizeof context, "dtype %d hidden %lld slot %lld", (int)dtypes[d],
                     (long long)hidden, (long long)i);
            expect_double_bits(exact[i], fixed_point_dot(c, i), context);
        }
        case_free(c);
    }
}

static double exact_of_row(const float *x, const float *g, int64_t hidden)
{
    exact_case *c = case_new(MOEPERM_FLOAT, 1, 1, hidden, 1);
    memcpy(c->tokens, x, (size_t)hidden * 4);
    memcpy(c->grad, g, (size_t)hidden * 4);
    double exact = -1;
    assert_int_equal(call_exact(c, &exact, 1), MOEPERM_SUCCESS);
    case_free(c);
    return exact;
}

/* Values a 128-bit fixed point cannot hold, worked out by hand. */
static void test_exact_at_the_extremes_of_binary32(void **state)
{
    (void)state;
    const float one[3] = {1, 1, 1};
    /* 2^100 + 1 - 2^100 is 1 exactly (summed in order in doubles: 0) */
    float cancel[3] = {0x1p100f, 1.0f, -0x1p100f};
    expect_double_bits(exact_of_row(cancel, one, 3), 1.0, "cancel");
    /* 1 + 2^-53 is a tie: to even, 1; with 2^-100 more it rounds up */
    float tie[3] = {1.0f, 0x1p-53f, 0.0f};
    expect_double_bits(exact_of_row(tie, one, 3), 1.0, "tie");
    float above[3] = {1.0f, 0x1p-53f, 0x1p-100f};
    expect_double_bits(exact_of_row(above, one, 3), 1.0 + 0x1p-52, "above tie");
    /* 1 + 3 * 2^-54: three quarters of an ulp above 1 */
    float three[3] = {1.0f, 0x1.8p-53f, 0.0f};
    expect_double_bits(exact_of_row(three, one, 3), 1.0 + 0x1p-52, "three quarters");
    /* 1000 products of FLT_MAX^2 = (2^24 - 1)^2 * 2^208 each */
    float *big = malloc(1000 * 4), *big_g = malloc(1000 * 4);
    for (int i = 0; i < 1000; i++)
        big[i] = big_g[i] = 0x1.fffffep127f;
    int64_t units = ((INT64_C(1) << 24) - 1) * ((INT64_C(1) << 24) - 1) * 1000;
    expect_double_bits(exact_of_row(big, big_g, 1000), ldexp((double)units, 208), "flt_max");
    /* the smallest products: 2^-149 * 2^-149, three of them, and one that
     * cancels the largest */
    float tiny[5] = {0x1p-149f, 0x1p-149f, 0x1p-149f, 0x1.fffffep127f, -0x1.fffffep127f};
    float tiny_g[5] = {0x1p-149f, 0x1p-149f, 0x1p-149f, 1.0f, 1.0f};
    expect_double_bits(exact_of_row(tiny, tiny_g, 5), 3 * 0x1p-298, "subnormal squares");
    /* negative results and the sign of an exact zero */
    float neg[2] = {-3.0f, 1.0f};
    expect_double_bits(exact_of_row(neg, one, 2), -2.0, "negative");
    float zero[2] = {-3.0f, 3.0f};
    expect_double_bits(exact_of_row(zero, one, 2), 0.0, "exact zero is +0");
    free(big);
    free(big_g);
}

/* 2^e as a product of two binary32 powers of two, e in [-298, 254]. */
static void power_product(int e, float *x, float *g)
{
    *x = ldexpf(1.0f, e - e / 2);
    *g = ldexpf(1.0f, e / 2);
}

/* A sum whose rounding turns on its smallest term, 2^-270, with pairs of
 * terms that cancel in every 40th binade between: (2^250 + 2^198) + 2^197
 * is a tie between two doubles, so -2^-270 rounds it down to the odd one
 * and +2^-270 up to the even one, and a sum that lost the smallest term
 * would round the tie to even both times.  The terms span more binades
 * than any fixed number of double-precision sums can hold. */
static void test_exact_with_terms_across_every_binade(void **state)
{
    (void)state;
    enum { HIDDEN = 4500 };
    float *x = calloc(HIDDEN, 4), *g = calloc(HIDDEN, 4);
    for (int sign = -1; sign <= 1; sign += 2) {
        for (int i = 0; i < HIDDEN; i++)
            x[i] = g[i] = 0.0f;
        power_product(250, &x[0], &g[0]);
        power_product(198, &x[1], &g[1]);
        power_product(197, &x[2], &g[2]);
        power_product(-270, &x[3], &g[3]);
        x[3] *= (float)sign;
        for (int i = 2, at = 100; 250 - 40 * i >= -298; i++, at += 2) {
            power_product(250 - 40 * i, &x[at], &g[at]);
            power_product(250 - 40 * i, &x[at + 1], &g[at + 1]);
            x[at + 1] = -x[at + 1];
        }
        double want = sign < 0 ? 0x1p250 + 0x1p198 : 0x1p250 + 0x1p199;
        expect_double_bits(exact_of_row(x, g, HIDDEN), want,
                           sign < 0 ? "just below the tie" : "just above the tie");
    }
    free(x);
    free(g);
}

/* A NaN or an infinity far into a long row still decides the result. */
static void test_specials_far_into_a_long_row(void **state)
{
    (void)state;
    enum { HIDDEN = 7000 };
    float *x = calloc(HIDDEN, 4), *g = calloc(HIDDEN, 4);
    for (int i = 0; i < HIDDEN; i++)
        x[i] = 1.0f, g[i] = 0.5f;
    expect_double_bits(exact_of_row(x, g, HIDDEN), 3500.0, "finite");
    x[6500] = NAN;
    assert_true(isnan(exact_of_row(x, g, HIDDEN)));
    x[6500] = -INFINITY;
    expect_double_bits(exact_of_row(x, g, HIDDEN), -INFINITY, "-inf");
    x[10] = INFINITY;
    assert_true(isnan(exact_of_row(x, g, HIDDEN)));
    free(x);
    free(g);
}

/* A caller that rounds upward and flushes subnormals (MXCSR FTZ and DAZ)
 * changes nothing: subnormal factors still count (fp32 ones, and fp16
 * ones, which widen to normal binary32 values), and the caller's
 * environment is its own again afterwards. */
static void test_caller_floating_point_environment_changes_nothing(void **state)
{
    (void)state;
#ifdef HAVE_MXCSR
    float tiny[5] = {0x1p-149f, 0x1p-149f, 0x1p-149f, 0x1.fffffep127f, -0x1.fffffep127f};
    float tiny_g[5] = {0x1p-149f, 0x1p-149f, 0x1p-149f, 1.0f, 1.0f};
    /* fp16: 3 * 2^-24 times 5 * 2^-24, twice, and 1 + 2^-10 times 1 */
    exact_case *c = case_new(MOEPERM_FLOAT16, 1, 1, 3, 1);
    const uint16_t x16[3] = {0x0003, 0x0003, 0x3c01}, g16[3] = {0x0005, 0x0005, 0x3c00};
    memcpy(c->tokens, x16, sizeof x16);
    memcpy(c->grad, g16, sizeof g16);
    unsigned int saved = _mm_getcsr();
    unsigned int flushing = (saved & ~0x6000u) | 0x4000u | 0x8040u; /* round up, FTZ, DAZ */
    _mm_setcsr(flushing);
    double fp32 = exact_of_row(tiny, tiny_g, 5), fp16 = -1;
    moeperm_status status = call_exact(c, &fp16, 1);
    unsigned int during = _mm_getcsr();
    _mm_setcsr(saved);
    assert_int_equal(status, MOEPERM_SUCCESS);
    assert_int_equal(during & 0xffc0u, flushing & 0xffc0u);
    expect_double_bits(fp32, 3 * 0x1p-298, "fp32 subnormal squares");
    expect_double_bits(fp16, 30 * 0x1p-48 + 1.0 + 0x1p-10, "fp16 subnormal products");
    case_free(c);
#else
    skip();
#endif
}

static void test_specials_and_dropped_slots(void **state)
{
    (void)state;
    const float one[2] = {1, 1};
    float nan_x[2] = {NAN, 1.0f};
    assert_true(isnan(exact_of_row(nan_x, one, 2)));
    float both_inf[2] = {INFINITY, -INFINITY};
    assert_true(isnan(exact_of_row(both_inf, one, 2)));
    float plus_inf[2] = {INFINITY, -5.0f};
    expect_double_bits(exact_of_row(plus_inf, one, 2), INFINITY, "inf");
    float inf_times_zero[2] = {0.0f, 1.0f}, inf_g[2] = {INFINITY, 1.0f};
    assert_true(isnan(exact_of_row(inf_times_zero, inf_g, 2)));

    /* a dropped slot is a row of zeros: +0, or NaN when g holds an inf */
    exact_case *c = case_new(MOEPERM_FLOAT, 2, 2, 3, 2);
    float g[6] = {1, 2, 3, 4, INFINITY, 6};
    memcpy(c->grad, g, sizeof g);
    float x[6] = {1, 1, 1, 2, 2, 2};
    memcpy(c->tokens, x, sizeof x);
    int32_t idx[4] = {3, 0, 1, 2}; /* rows 3 and 2 are dropped (R = 2) */
    memcpy(c->indices, idx, sizeof idx);
    double exact[4];
    assert_int_equal(call_exact(c, exact, 4), MOEPERM_SUCCESS);
    expect_double_bits(exact[0], 0.0, "dropped, finite g");
    expect_double_bits(exact[1], 6.0, "row 0");
    assert_true(isinf(exact[2]));
    assert_true(isnan(exact[3]));
    case_free(c);
}

/* A dropped slot's row offset is never formed: with one row of stride
 * 2^40 and an index of INT32_MAX, index * stride passes 2^63 (signed
 * overflow, which the sanitizer build of this test reports). */
static void test_dropped_slot_of_a_huge_stride_is_a_row_of_zeros(void **state)
{
    (void)state;
    float x[4] = {1, 2, 3, 4}, g[4] = {1, 1, 1, 1}, probs[2] = {0.5f, 0.5f};
    int32_t idx[2] = {0, INT32_MAX};
    int64_t tdims[2] = {1, 4}, tstrides[2] = {(int64_t)1 << 40, 1};
    int64_t gdims[2] = {1, 4}, idims[1] = {2}, pdims[2] = {1, 2};
    moeperm_tensor *t = moeperm_tensor_create(tdims, 2, MOEPERM_FLOAT, tstrides, 0, x);
    moeperm_tensor *gt = moeperm_tensor_create(gdims, 2, MOEPERM_FLOAT, NULL, 0, g);
    moeperm_tensor *ix = moeperm_tensor_create(idims, 1, MOEPERM_INT32, NULL, 0, idx);
    moeperm_tensor *p = moeperm_tensor_create(pdims, 2, MOEPERM_FLOAT, NULL, 0, probs);
    assert_non_null(t);
    double exact[2] = {-1, -1};
    assert_int_equal(moeperm_token_unpermute_grad_exact_probs_grad(t, gt, ix, p, exact, 2),
                     MOEPERM_SUCCESS);
    expect_double_bits(exact[0], 10.0, "row 0: 1 + 2 + 3 + 4");
    expect_double_bits(exact[1], 0.0, "dropped");
    moeperm_tensor_destroy(t);
    moeperm_tensor_destroy(gt);
    moeperm_tensor_destroy(ix);
    moeperm_tensor_destroy(p);
}

static void test_refusals_leave_exact_untouched(void **state)
{
    (void)state;
    exact_case *c = case_new(MOEPERM_FLOAT, 2, 2, 3, 4);
    double exact[4];
    memset(exact, 0x5a, sizeof exact);
    assert_int_equal(call_exact(c, exact, 3), MOEPERM_ERR_PARAM_INVALID);
    if (!strstr(moeperm_last_error(), "exact_len = 3, expected tokens_num * top_k = 4"))
        fail_msg("%s", moeperm_last_error());
    assert_int_equal(call_exact(c, NULL, 4), MOEPERM_ERR_PARAM_NULLPTR);
    c->indices[2] = -9;
    assert_int_equal(call_exact(c, exact, 4), MOEPERM_ERR_PARAM_INVALID);
    if (!strstr(moeperm_last_error(), "sorted_indices[2] = -9 is negative"))
        fail_msg("%s", moeperm_last_error());
    c->indices[2] = 2;
    assert_int_equal(call_exact(c, (double *)c->tokens, 4), MOEPERM_ERR_PARAM_INVALID);
    if (!strstr(moeperm_last_error(), "exact overlaps permuted_tokens in memory"))
        fail_msg("%s", moeperm_last_error());
    void *probs = c->probs;
    c->probs = NULL;
    assert_int_equal(call_exact(c, exact, 4), MOEPERM_ERR_PARAM_NULLPTR);
    c->probs = probs;
    for (size_t i = 0; i < sizeof exact; i++)
        assert_int_equal(((unsigned char *)exact)[i], 0x5a);
    case_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_equals_a_128_bit_fixed_point_sum),
        cmocka_unit_test(test_exact_at_the_extremes_of_binary32),
        cmocka_unit_test(test_exact_with_terms_across_every_binade),
        cmocka_unit_test(test_specials_far_into_a_long_row),
        cmocka_unit_test(test_caller_floating_point_environment_changes_nothing),
        cmocka_unit_test(test_specials_and_dropped_slots),
        cmocka_unit_test(test_dropped_slot_of_a_huge_stride_is_a_row_of_zeros),
        cmocka_unit_test(test_refusals_leave_exact_untouched),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
