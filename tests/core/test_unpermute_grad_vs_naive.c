/*
 * MoeTokenUnpermuteGrad against the tests' own model
 * (naive_unpermute_grad.c), bit for bit, NaN bits included: every branch
 * of the reduction, chunked rows, masked tails, cancellation, -0, inf and
 * NaN meeting dropped rows, every dtype pair, every instruction-set path
 * and thread count, strided views; and the relation with MoeTokenUnpermute
 * that one-hot gradient columns read the permuted tokens back exactly.
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

#include "core/internal.h"
#include "unpermute_grad/unpermute_grad.h"
#include "naive.h"
#include "naive_unpermute_grad.h"
#include "ug_call.h"

static const moeperm_dtype dtypes[3] = {MOEPERM_BF16, MOEPERM_FLOAT16, MOEPERM_FLOAT};
static const moeperm_chip a2 = {MOEPERM_CHIP_A2_UB_BYTES, MOEPERM_CHIP_A2_VECTOR_CORES};
static const moeperm_chip big_ub = {261888, 64};

/* A test problem with its buffers: library outputs, model outputs. */
typedef struct problem {
    ug_problem p;
    void *tokens, *grad, *probs, *tokens_grad, *probs_grad, *want_tokens_grad, *want_probs_grad;
    int32_t *indices;
} problem;

static void put(moeperm_dtype dtype, void *base, int64_t i, float value)
{
    if (dtype == MOEPERM_FLOAT)
        ((float *)base)[i] = value;
    else if (dtype == MOEPERM_BF16)
        ((uint16_t *)base)[i] = naive_float_to_bf16(value);
    else
        ((uint16_t *)base)[i] = naive_float_to_fp16(value);
}

static void put_bits(moeperm_dtype dtype, void *base, int64_t i, uint32_t bits)
{
    if (dtype == MOEPERM_FLOAT)
        ((uint32_t *)base)[i] = bits;
    else
        ((uint16_t *)base)[i] = (uint16_t)bits;
}

/* Values spread over a few binades of both signs, so that order matters. */
static float random_value(uint64_t *state)
{
    uint64_t r = naive_rand(state);
    float mantissa = (float)(r & 0xffffff) / (float)(1 << 24) + 0.5f;
    int exponent = (int)((r >> 24) % 12) - 6;
    return ((r >> 40) & 1 ? -1.0f : 1.0f) * ldexpf(mantissa, exponent);
}

static problem *problem_new(moeperm_dtype dtype, moeperm_dtype probs_dtype, bool has_probs,
                            int64_t tokens_num, int64_t top_k, int64_t hidden, int64_t rows,
                            uint64_t seed)
{
    problem *q = calloc(1, sizeof *q);
    size_t size = naive_size(dtype), psize = naive_size(probs_dtype);
    int64_t slots = tokens_num * top_k;
    q->tokens = calloc((size_t)(rows * hidden) + 1, size);
    q->grad = calloc((size_t)(tokens_num * hidden) + 1, size);
    q->indices = calloc((size_t)slots + 1, sizeof *q->indices);
    q->tokens_grad = malloc((size_t)(rows * hidden) * size + 1);
    q->want_tokens_grad = malloc((size_t)(rows * hidden) * size + 1);
    memset(q->tokens_grad, 0x5a, (size_t)(rows * hidden) * size);
    memset(q->want_tokens_grad, 0x5a, (size_t)(rows * hidden) * size);
    if (has_probs) {
        q->probs = calloc((size_t)slots + 1, psize);
        q->probs_grad = malloc((size_t)slots * psize + 1);
        q->want_probs_grad = malloc((size_t)slots * psize + 1);
        memset(q->probs_grad, 0x5a, (size_t)slots * psize);
        memset(q->want_probs_grad, 0x5a, (size_t)slots * psize);
    }
    uint64_t state = seed;
    for (int64_t i = 0; i < rows * hidden; i++)
        put(dtype, q->tokens, i, random_value(&state));
    for (int64_t i = 0; i < tokens_num * hidden; i++)
        put(dtype, q->grad, i, random_value(&state));
    for (int64_t i = 0; has_probs && i < slots; i++)
        put(probs_dtype, q->probs, i, random_value(&state));
    naive_permutation(&state, q->indices, slots);
    q->p = (ug_problem){.dtype = dtype,
                        .probs_dtype = probs_dtype,
                        .tokens_num = tokens_num,
                        .top_k = top_k,
                        .hidden = hidden,
                        .rows = rows,
                        .tokens = q->tokens,
                        .grad = q->grad,
                        .probs = q->probs,
                        .indices = q->indices,
                        .tokens_grad = q->tokens_grad,
                        .probs_grad = q->probs_grad};
    return q;
}

static void problem_free(problem *q)
{
    free(q->tokens);
    free(q->grad);
    free(q->indices);
    free(q->probs);
    free(q->tokens_grad);
    free(q->probs_grad);
    free(q->want_tokens_grad);
    free(q->want_probs_grad);
    free(q);
}

static int64_t chunk_of(const problem *q, const moeperm_chip *chip)
{
    const moeperm_chip *c = chip ? chip : &a2;
    return naive_ug_chunk_for(q->p.tokens_num, q->p.top_k, q->p.hidden, q->p.dtype,
                              q->p.probs_dtype, c->ub_bytes, c->vector_cores);
}

static void model(problem *q, const moeperm_chip *chip)
{
    naive_unpermute_grad(q->p.dtype, q->p.probs_dtype, q->tokens, q->p.rows, q->p.hidden, q->grad,
                         q->p.tokens_num, q->indices, q->probs, q->p.top_k,
                         q->p.hidden > 0 ? chunk_of(q, chip) : 1, q->want_tokens_grad,
                         q->want_probs_grad);
}

/* Bits equal, NaNs included. */
static void expect_same_bits(const char *what, const void *got, const void *want, size_t bytes,
                             size_t size, const char *context)
{
    for (size_t i = 0; i < bytes; i += size)
        if (memcmp((const char *)got + i, (const char *)want + i, size) != 0) {
            uint32_t g = 0, w = 0;
            memcpy(&g, (const char *)got + i, size);
            memcpy(&w, (const char *)want + i, size);
            fail_msg("%s: %s element %zu is 0x%x, the model gives 0x%x", context, what, i / size, g,
                     w);
        }
}

static void check_against_model(problem *q, const moeperm_chip *chip, const char *context)
{
    q->p.chip = chip;
    moeperm_status status = ug_call(&q->p);
    if (status != MOEPERM_SUCCESS)
        fail_msg("%s: %s", context, moeperm_last_error());
    model(q, chip);
    size_t size = naive_size(q->p.dtype), psize = naive_size(q->p.probs_dtype);
    expect_same_bits("permuted_tokens_grad", q->tokens_grad, q->want_tokens_grad,
                     (size_t)(q->p.rows * q->p.hidden) * size, size, context);
    if (q->probs)
        expect_same_bits("probs_grad", q->probs_grad, q->want_probs_grad,
                         (size_t)(q->p.tokens_num * q->p.top_k) * psize, psize, context);
}

static void run_case(moeperm_dtype dtype, moeperm_dtype probs_dtype, int64_t tokens_num,
                     int64_t top_k, int64_t hidden, int64_t rows, const moeperm_chip *chip,
                     uint64_t seed)
{
    char context[160];
    snprintf(context, sizeof context, "%s/%s N=%lld K=%lld H=%lld R=%lld ub=%lld",
             moeperm_dtype_name(dtype), moeperm_dtype_name(probs_dtype), (long long)tokens_num,
             (long long)top_k, (long long)hidden, (long long)rows,
             (long long)(chip ? chip->ub_bytes : a2.ub_bytes));
    problem *q = problem_new(dtype, probs_dtype, true, tokens_num, top_k, hidden, rows, seed);
    check_against_model(q, chip, context);
    problem_free(q);
}

/* Chunk lengths on both sides of every branch (< 64, 64..511, 512..4095,
 * >= 4096) and of the 8-float blocks, for all nine dtype pairs, with some
 * slots dropped. */
static void test_probs_grad_bits_every_branch_and_dtype_pair(void **state)
{
    (void)state;
    const int64_t hiddens[] = {1,    2,    7,    8,    9,    63,   64,   65,   100,
                               127,  128,  129,  200,  511,  512,  513,  777,  1023,
                               1024, 1025, 3000, 4095, 4096, 4097, 5000, 6001, 7936};
    uint64_t seed = 1;
    for (size_t h = 0; h < sizeof hiddens / sizeof *hiddens; h++)
        for (int d = 0; d < 3; d++)
            for (int p = 0; p < 3; p++)
                run_case(dtypes[d], dtypes[p], 3, 3, hiddens[h], 7, NULL, seed++);
}

/* The halving loop above 8192 columns runs only with a larger unified
 * buffer: on the 261888-byte platform a 16-bit row of up to 10752 columns
 * is one chunk. */
static void test_folding_loop_above_8192_on_the_261888_byte_chip(void **state)
{
    (void)state;
    const int64_t hiddens[] = {8193, 9000, 10000, 10752};
    uint64_t seed = 100;
    for (size_t h = 0; h < sizeof hiddens / sizeof *hiddens; h++)
        for (int d = 0; d < 2; d++) {
            problem *q = problem_new(dtypes[d], MOEPERM_FLOAT, true, 2, 2, hiddens[h], 3, 9);
            assert_int_equal(chunk_of(q, &big_ub), hiddens[h]);
            problem_free(q);
            run_case(dtypes[d], MOEPERM_FLOAT, 2, 2, hiddens[h], 3, &big_ub, seed++);
            run_case(dtypes[d], MOEPERM_BF16, 2, 2, hiddens[h], 4, &big_ub, seed++);
        }
}

/* fp32 H = 5000 is one chunk at top_k 2 and two at top_k 512 on A2; 4992 +
 * 13 leaves a tail that is no multiple of 8. */
static void test_chunked_rows_and_odd_tails(void **state)
{
    (void)state;
    problem *q = problem_new(MOEPERM_FLOAT, MOEPERM_FLOAT, true, 1, 2, 5000, 2, 1);
    assert_int_equal(chunk_of(q, NULL), 5000);
    problem_free(q);
    q = problem_new(MOEPERM_FLOAT, MOEPERM_FLOAT, true, 1, 512, 5000, 2, 1);
    assert_int_equal(chunk_of(q, NULL), 4992);
    problem_free(q);
    run_case(MOEPERM_FLOAT, MOEPERM_FLOAT, 1, 2, 5000, 2, NULL, 11);
    run_case(MOEPERM_FLOAT, MOEPERM_FLOAT, 1, 512, 5000, 300, NULL, 12);
    run_case(MOEPERM_FLOAT, MOEPERM_BF16, 1, 512, 4992 + 13, 512, NULL, 13);
    run_case(MOEPERM_FLOAT, MOEPERM_FLOAT16, 2, 300, 4992 * 2 + 61, 400, NULL, 14);
    /* 16-bit tokens on A2: rows longer than 7936 are cut */
    run_case(MOEPERM_BF16, MOEPERM_FLOAT, 2, 4, 7936 * 2 + 71, 5, NULL, 15);
    run_case(MOEPERM_FLOAT16, MOEPERM_FLOAT16, 2, 4, 20001, 8, NULL, 16);
    /* and with few tokens per core the indices buffer is small, so rows
     * that would be cut with many tokens are not */
    run_case(MOEPERM_BF16, MOEPERM_BF16, 49, 8, 7000, 300, NULL, 17);
}

/* A sum whose value depends on the order: large terms that cancel around
 * small ones.  The model and the library agree, and a plain left-to-right
 * sum does not, so the test would see a library that summed in order. */
static void test_cancellation_follows_the_device_order(void **state)
{
    (void)state;
    for (int d = 0; d < 3; d++) {
        int64_t hidden = 700;
        problem *q = problem_new(dtypes[d], MOEPERM_FLOAT, true, 1, 1, hidden, 1, 3);
        q->indices[0] = 0;
        for (int64_t h = 0; h < hidden; h++) {
            float big = (h % 3 == 0) ? 4096.0f : (h % 3 == 1 ? -4096.0f : 0.0f);
            float x = big + (float)(h % 7) * 0.0078125f + 0.00390625f;
            put(dtypes[d], q->tokens, h, x);
            put(dtypes[d], q->grad, h, (h % 5 == 0) ? 1.0f : 1.0078125f);
        }
        check_against_model(q, NULL, "cancellation");
        /* left to right, for contrast */
        float sequential = 0.0f;
        for (int64_t h = 0; h < hidden; h++) {
            float x, g;
            if (dtypes[d] == MOEPERM_FLOAT) {
                x = ((float *)q->tokens)[h];
                g = ((float *)q->grad)[h];
            } else if (dtypes[d] == MOEPERM_BF16) {
                x = naive_bf16_to_float(((uint16_t *)q->tokens)[h]);
                g = naive_bf16_to_float(((uint16_t *)q->grad)[h]);
            } else {
                x = naive_fp16_to_float(((uint16_t *)q->tokens)[h]);
                g = naive_fp16_to_float(((uint16_t *)q->grad)[h]);
            }
            volatile float product = x * g;
            sequential = sequential + product;
        }
        assert_true(naive_bits(sequential) != ((uint32_t *)q->probs_grad)[0]);
        problem_free(q);
    }
}

/* An fp32 probs_grad is never -0 (the sum starts at +0.0); a tiny negative
 * sum narrows to -0 in bf16 and fp16. */
static void test_negative_zero_only_through_narrowing(void **state)
{
    (void)state;
    struct {
        moeperm_dtype probs_dtype;
        float x; /* one product x * 1, the rest -0 * 1 */
        uint32_t want;
    } cases[] = {
        {MOEPERM_FLOAT, -0.0f, 0x00000000u},
        {MOEPERM_BF16, -0x1p-140f, 0x8000u},
        {MOEPERM_FLOAT16, -0x1p-30f, 0x8000u},
        {MOEPERM_FLOAT, -0x1p-140f, 0x80000200u},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        problem *q = problem_new(MOEPERM_FLOAT, cases[c].probs_dtype, true, 1, 1, 100, 1, 4);
        q->indices[0] = 0;
        for (int h = 0; h < 100; h++) {
            ((float *)q->tokens)[h] = h == 37 ? cases[c].x : -0.0f;
            ((float *)q->grad)[h] = 1.0f;
        }
        check_against_model(q, NULL, "negative zero");
        uint32_t got = 0;
        memcpy(&got, q->probs_grad, naive_size(cases[c].probs_dtype));
        assert_int_equal(got, cases[c].want);
        problem_free(q);
    }
}

/* A dropped slot multiplies a row of zeros: +0, or NaN (0 * inf) when g
 * holds an inf or a NaN; rows that are kept get NaN from the same g. */
static void test_inf_and_nan_in_g_meeting_dropped_rows(void **state)
{
    (void)state;
    const uint32_t specials[3] = {0x7f800000u, 0xff800000u, 0x7fa00001u};
    for (int d = 0; d < 3; d++)
        for (int p = 0; p < 3; p++)
            for (int s = 0; s < 4; s++) {
                problem *q = problem_new(dtypes[d], dtypes[p], true, 4, 2, 90, 3, 5 + s);
                if (s < 3) { /* token 1 gets the special value in column 33 */
                    uint32_t bits = specials[s];
                    if (dtypes[d] == MOEPERM_BF16)
                        bits >>= 16;
                    else if (dtypes[d] == MOEPERM_FLOAT16)
                        bits = s == 0 ? 0x7c00u : s == 1 ? 0xfc00u : 0x7d01u;
                    put_bits(dtypes[d], q->grad, 1 * 90 + 33, bits);
                }
                check_against_model(q, NULL, "inf/nan in g");
                /* token 1's dropped slots are NaN (0 * inf, 0 * NaN), its kept
                 * ones too when g holds a NaN; an inf in a kept row is an inf */
                for (int k = 0; k < 2; k++) {
                    uint32_t got = 0;
                    memcpy(&got, (char *)q->probs_grad + (2 + k) * naive_size(dtypes[p]),
                           naive_size(dtypes[p]));
                    uint32_t nan = dtypes[p] == MOEPERM_FLOAT  ? 0x7fc00000u
                                   : dtypes[p] == MOEPERM_BF16 ? 0x7fc0u
                                                               : 0x7e00u;
                    uint32_t zero = 0;
                    bool dropped = q->indices[2 + k] >= 3;
                    if ((s < 3 && dropped) || s == 2)
                        assert_int_equal(got, nan);
                    else if (dropped)
                        assert_int_equal(got, zero);
                }
                problem_free(q);
            }
}

/* permuted_tokens_grad = narrow(g * p): ties, subnormal and overflowing
 * products, NaN in g or in p. */
static void test_permuted_tokens_grad_edge_cases(void **state)
{
    (void)state;
    for (int d = 0; d < 3; d++)
        for (int p = 0; p < 3; p++) {
            problem *q = problem_new(dtypes[d], dtypes[p], true, 3, 2, 40, 6, 6);
            float g_values[] = {1.0f + 0x1p-8f, 0x1p-20f, 60000.0f, 0x1p100f, 3.0f};
            for (int h = 0; h < 40; h++)
                put(dtypes[d], q->grad, h, g_values[h % 5]);
            /* a NaN in token 1's g, a NaN prob for token 2 */
            put_bits(dtypes[d], q->grad, 40 + 7,
                     dtypes[d] == MOEPERM_FLOAT  ? 0xffa0beefu
                     : dtypes[d] == MOEPERM_BF16 ? 0xffa1u
                                                 : 0xfd01u);
            put_bits(dtypes[p], q->probs, 4,
                     dtypes[p] == MOEPERM_FLOAT  ? 0x7f80beefu
                     : dtypes[p] == MOEPERM_BF16 ? 0x7f81u
                                                 : 0x7c01u);
            put(dtypes[p], q->probs, 0, 1.0f);
            put(dtypes[p], q->probs, 1, 0x1p-130f);
            put(dtypes[p], q->probs, 2, 0x1p60f);
            put(dtypes[p], q->probs, 3, 0.5f);
            check_against_model(q, NULL, "permuted_tokens_grad edges");
            problem_free(q);
        }
}

/* Without probs: a copy, bits unchanged (a signalling NaN stays one). */
static void test_without_probs_rows_are_copied_bit_for_bit(void **state)
{
    (void)state;
    for (int d = 0; d < 3; d++) {
        problem *q = problem_new(dtypes[d], dtypes[d], false, 9, 1, 33, 6, 7);
        put_bits(dtypes[d], q->grad, 5, dtypes[d] == MOEPERM_FLOAT ? 0x7f800001u : 0x7c01u);
        check_against_model(q, NULL, "without probs");
        problem_free(q);
    }
}

/* Empty shapes: no tokens; no columns (probs_grad is the empty sum, +0);
 * no rows (every slot dropped). */
/* Zero sizes as the device takes them (docs/unpermute-grad.md, "The input
 * domain"): when every output is empty the call does nothing and
 * succeeds; otherwise a 0 among N, K, H and R is refused by the device's
 * tiling with 561002, naming it, and the outputs keep their bytes. */
static void test_zero_sizes_succeed_only_when_every_output_is_empty(void **state)
{
    (void)state;
    run_case(MOEPERM_BF16, MOEPERM_FLOAT, 0, 4, 16, 0, NULL, 1);
    static const struct {
        int64_t tokens_num, top_k, hidden, rows;
        const char *named;
    } refused[] = {
        {3, 4, 0, 5, "hidden_size = 0"},
        {3, 4, 70, 0, "num_out_tokens = 0"},
        {0, 4, 16, 5, "tokens_num = 0"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        problem *q = problem_new(MOEPERM_BF16, MOEPERM_FLOAT, true, refused[i].tokens_num,
                                 refused[i].top_k, refused[i].hidden, refused[i].rows, 1);
        assert_int_equal(ug_call(&q->p), MOEPERM_ERR_INNER_TILING_ERROR);
        if (!strstr(moeperm_last_error(), "the device refuses ") ||
            !strstr(moeperm_last_error(), refused[i].named))
            fail_msg("case %zu: %s", i, moeperm_last_error());
        expect_same_bits("permuted_tokens_grad", q->tokens_grad, q->want_tokens_grad,
                         (size_t)(q->p.rows * q->p.hidden) * 2, 2, "refused");
        expect_same_bits("probs_grad", q->probs_grad, q->want_probs_grad,
                         (size_t)(q->p.tokens_num * q->p.top_k) * 4, 4, "refused");
        problem_free(q);
    }
    /* without probs and no probs_grad_out, a permuted_tokens_grad_out of
     * no columns is every output: nothing to do */
    problem *q = problem_new(MOEPERM_FLOAT16, MOEPERM_FLOAT16, false, 3, 1, 0, 5, 1);
    assert_int_equal(ug_call(&q->p), MOEPERM_SUCCESS);
    problem_free(q);
}

/* The same bits on every instruction-set path and thread count, through
 * the kernel entry point with a plan from the public first phase. */
static void test_every_path_and_thread_count_gives_the_same_bits(void **state)
{
    (void)state;
    const int64_t hiddens[] = {61, 1000, 4097, 9001};
    for (size_t h = 0; h < sizeof hiddens / sizeof *hiddens; h++)
        for (int d = 0; d < 3; d++) {
            problem *q =
                problem_new(dtypes[d], dtypes[(d + 1) % 3], true, 37, 5, hiddens[h], 150, 20 + h);
            model(q, NULL);
            size_t size = naive_size(dtypes[d]), psize = naive_size(dtypes[(d + 1) % 3]);
            size_t tg_bytes = (size_t)(150 * hiddens[h]) * size, pg_bytes = 37 * 5 * psize;
            const moeperm_isa paths[3] = {MOEPERM_ISA_PORTABLE, MOEPERM_ISA_X86_AVX2,
                                          MOEPERM_ISA_X86_AVX512};
            for (int path = 0; path < 3; path++)
                for (int threads = 1; threads <= 3; threads++) {
                    moeperm_executor *plan = NULL;
                    assert_int_equal(ug_plan(&q->p, &plan), MOEPERM_SUCCESS);
                    memset(q->tokens_grad, 0x5a, tg_bytes);
                    memset(q->probs_grad, 0x5a, pg_bytes);
                    assert_true(
                        moeperm_unpermute_grad_run(plan->plan, threads, paths[path]));
                    moeperm_executor_destroy(plan);
                    char context[64];
                    snprintf(context, sizeof context, "path %d threads %d H %lld", paths[path],
                             threads, (long long)hiddens[h]);
                    expect_same_bits("permuted_tokens_grad", q->tokens_grad, q->want_tokens_grad,
                                     tg_bytes, size, context);
                    expect_same_bits("probs_grad", q->probs_grad, q->want_probs_grad, pg_bytes,
                                     psize, context);
                }
            problem_free(q);
        }
}

/* Outputs of 8 MiB and more are written with non-temporal stores on the
 * x86 paths, whole cache lines at a time: with rows of 4099 columns and
 * an output view that starts a few elements into its buffer every row
 * starts and ends mid-line; with 4096 columns in an aligned buffer, fp32
 * rows are streamed straight from the registers. */
static void test_large_outputs_aligned_or_not_on_every_path(void **state)
{
    (void)state;
    for (int layout = 0; layout < 6; layout++) {
        int d = layout % 3;
        bool aligned = layout >= 3;
        moeperm_dtype dtype = dtypes[d], probs_dtype = dtypes[(d + 1) % 3];
        int64_t tokens_num = dtype == MOEPERM_FLOAT ? 70 : 140, top_k = 8;
        int64_t hidden = aligned ? 4096 : 4099;
        int64_t rows = tokens_num * top_k - 3, offset = aligned ? 0 : 3;
        size_t size = naive_size(dtype), bytes = (size_t)(rows * hidden) * size;
        assert_true(bytes >= (size_t)8 << 20);
        problem *q =
            problem_new(dtype, probs_dtype, true, tokens_num, top_k, hidden, rows, 60 + layout);
        model(q, NULL);
        char *tokens_grad = aligned_alloc(64, (bytes + (size_t)offset * size + 64 + 63) / 64 * 64);
        int64_t tdims[2] = {rows, hidden}, gdims[2] = {tokens_num, hidden};
        int64_t pdims[2] = {tokens_num, top_k}, idims[1] = {tokens_num * top_k};
        const moeperm_isa paths[3] = {MOEPERM_ISA_PORTABLE, MOEPERM_ISA_X86_AVX2,
                                      MOEPERM_ISA_X86_AVX512};
        for (int path = 0; path < 3; path++) {
            memset(tokens_grad, 0xa5, bytes + (size_t)offset * size + 64);
            moeperm_tensor *t = moeperm_tensor_create(tdims, 2, dtype, NULL, 0, q->tokens);
            moeperm_tensor *g = moeperm_tensor_create(gdims, 2, dtype, NULL, 0, q->grad);
            moeperm_tensor *ix =
                moeperm_tensor_create(idims, 1, MOEPERM_INT32, NULL, 0, q->indices);
            moeperm_tensor *pr = moeperm_tensor_create(pdims, 2, probs_dtype, NULL, 0, q->probs);
            moeperm_tensor *tg = moeperm_tensor_create(tdims, 2, dtype, NULL, offset, tokens_grad);
            moeperm_tensor *pg =
                moeperm_tensor_create(pdims, 2, probs_dtype, NULL, 0, q->probs_grad);
            uint64_t workspace;
            moeperm_executor *plan;
            assert_int_equal(moeperm_token_unpermute_grad_get_workspace_size(
                                 t, g, ix, pr, false, NULL, 0, tg, pg, &workspace, &plan),
                             MOEPERM_SUCCESS);
            assert_true(moeperm_unpermute_grad_run(plan->plan, 2, paths[path]));
            moeperm_executor_destroy(plan);
            expect_same_bits("permuted_tokens_grad", tokens_grad + offset * size,
                             q->want_tokens_grad, bytes, size, "large, unaligned");
            expect_same_bits("probs_grad", q->probs_grad, q->want_probs_grad,
                             (size_t)(tokens_num * top_k) * naive_size(probs_dtype),
                             naive_size(probs_dtype), "large, unaligned");
            for (int64_t b = 0; b < offset * (int64_t)size; b++)
                assert_int_equal((unsigned char)tokens_grad[b], 0xa5);
            for (size_t b = 0; b < 64; b++)
                assert_int_equal((unsigned char)tokens_grad[(size_t)offset * size + bytes + b],
                                 0xa5);
            moeperm_tensor_destroy(t);
            moeperm_tensor_destroy(g);
            moeperm_tensor_destroy(ix);
            moeperm_tensor_destroy(pr);
            moeperm_tensor_destroy(tg);
            moeperm_tensor_destroy(pg);
        }
        free(tokens_grad);
        problem_free(q);
    }
}

/* The relation with MoeTokenUnpermute: with g one-hot in column c,
 * probs_grad[n, k] is the permuted token's element (s, c), widened and
 * narrowed to the probs dtype (+0 for a dropped slot), whatever the order
 * of summation, since every other product is a zero. */
static void test_one_hot_g_reads_back_the_permuted_tokens(void **state)
{
    (void)state;
    const int64_t hiddens[] = {5, 64, 700, 5000};
    for (size_t h = 0; h < sizeof hiddens / sizeof *hiddens; h++)
        for (int d = 0; d < 3; d++)
            for (int p = 0; p < 3; p++) {
                int64_t hidden = hiddens[h], tokens_num = 4, top_k = 3, rows = 10;
                problem *q =
                    problem_new(dtypes[d], dtypes[p], true, tokens_num, top_k, hidden, rows, 30);
                for (int64_t c = 0; c < hidden; c += hidden / 3 + 1) {
                    memset(q->grad, 0, (size_t)(tokens_num * hidden) * naive_size(dtypes[d]));
                    for (int64_t n = 0; n < tokens_num; n++)
                        put(dtypes[d], q->grad, n * hidden + c, 1.0f);
                    assert_int_equal(ug_call(&q->p), MOEPERM_SUCCESS);
                    for (int64_t i = 0; i < tokens_num * top_k; i++) {
                        int32_t s = q->indices[i];
                        float x = 0.0f;
                        if (s < rows) {
                            int64_t e = (int64_t)s * hidden + c;
                            x = dtypes[d] == MOEPERM_FLOAT ? ((float *)q->tokens)[e]
                                : dtypes[d] == MOEPERM_BF16
                                    ? naive_bf16_to_float(((uint16_t *)q->tokens)[e])
                                    : naive_fp16_to_float(((uint16_t *)q->tokens)[e]);
                        }
                        uint32_t want = 0, got = 0;
                        if (dtypes[p] == MOEPERM_FLOAT)
                            want = naive_bits(x);
                        else if (dtypes[p] == MOEPERM_BF16)
                            want = naive_float_to_bf16(x);
                        else
                            want = naive_float_to_fp16(x);
                        memcpy(&got, (char *)q->probs_grad + i * naive_size(dtypes[p]),
                               naive_size(dtypes[p]));
                        if (got != want)
                            fail_msg("H %lld column %lld slot %lld: 0x%x, the token is 0x%x",
                                     (long long)hidden, (long long)c, (long long)i, got, want);
                    }
                }
                problem_free(q);
            }
}

/* Strided views (padded rows, a transposed probs) give the bits of the
 * contiguous call, and the operator writes no byte outside its outputs'
 * elements. */
static void test_strided_views_leave_gaps_untouched(void **state)
{
    (void)state;
    for (int d = 0; d < 3; d++) {
        moeperm_dtype dtype = dtypes[d], probs_dtype = dtypes[(d + 2) % 3];
        int64_t tokens_num = 5, top_k = 3, hidden = 77, rows = 12, pad = 9;
        size_t size = naive_size(dtype), psize = naive_size(probs_dtype);
        problem *q = problem_new(dtype, probs_dtype, true, tokens_num, top_k, hidden, rows, 40 + d);
        model(q, NULL);
        int64_t row = hidden + pad;
        char *tokens = calloc((size_t)(rows * row), size),
             *grad = calloc((size_t)(tokens_num * row), size);
        char *tokens_grad = malloc((size_t)(rows * row) * size);
        char *probs = malloc((size_t)(tokens_num * top_k * 2) * psize);
        char *probs_grad = malloc((size_t)(tokens_num * top_k * 2) * psize);
        memset(tokens_grad, 0xa5, (size_t)(rows * row) * size);
        memset(probs_grad, 0xa5, (size_t)(tokens_num * top_k * 2) * psize);
        for (int64_t r = 0; r < rows; r++)
            memcpy(tokens + r * row * size, (char *)q->tokens + r * hidden * size, hidden * size);
        for (int64_t n = 0; n < tokens_num; n++)
            memcpy(grad + n * row * size, (char *)q->grad + n * hidden * size, hidden * size);
        /* probs stored column-major with a gap: element (n, k) at k*2N + n */
        for (int64_t n = 0; n < tokens_num; n++)
            for (int64_t k = 0; k < top_k; k++)
                memcpy(probs + (k * 2 * tokens_num + n) * psize,
                       (char *)q->probs + (n * top_k + k) * psize, psize);
        int64_t tdims[2] = {rows, hidden}, gdims[2] = {tokens_num, hidden},
                pdims[2] = {tokens_num, top_k}, idims[1] = {tokens_num * top_k};
        int64_t rstride[2] = {row, 1}, pstride[2] = {1, 2 * tokens_num};
        moeperm_tensor *t = moeperm_tensor_create(tdims, 2, dtype, rstride, 0, tokens);
        moeperm_tensor *g = moeperm_tensor_create(gdims, 2, dtype, rstride, 0, grad);
        moeperm_tensor *ix = moeperm_tensor_create(idims, 1, MOEPERM_INT32, NULL, 0, q->indices);
        moeperm_tensor *pr = moeperm_tensor_create(pdims, 2, probs_dtype, pstride, 0, probs);
        moeperm_tensor *tg = moeperm_tensor_create(tdims, 2, dtype, rstride, 0, tokens_grad);
        moeperm_tensor *pg = moeperm_tensor_create(pdims, 2, probs_dtype, pstride, 0, probs_grad);
        uint64_t workspace;
        moeperm_executor *plan;
        assert_int_equal(moeperm_token_unpermute_grad_get_workspace_size(
                             t, g, ix, pr, false, NULL, 0, tg, pg, &workspace, &plan),
                         MOEPERM_SUCCESS);
        assert_int_equal(moeperm_token_unpermute_grad(NULL, workspace, plan, NULL),
                         MOEPERM_SUCCESS);
        for (int64_t r = 0; r < rows; r++) {
            expect_same_bits("permuted_tokens_grad", tokens_grad + r * row * size,
                             (char *)q->want_tokens_grad + r * hidden * size, hidden * size, size,
                             "strided");
            for (int64_t j = hidden * (int64_t)size; j < row * (int64_t)size; j++)
                assert_int_equal((unsigned char)tokens_grad[r * row * size + j], 0xa5);
        }
        for (int64_t n = 0; n < tokens_num; n++)
            for (int64_t k = 0; k < top_k; k++) {
                expect_same_bits("probs_grad", probs_grad + (k * 2 * tokens_num + n) * psize,
                                 (char *)q->want_probs_grad + (n * top_k + k) * psize, psize, psize,
                                 "strided");
                for (size_t b = 0; b < psize; b++)
                    assert_int_equal(
                        (unsigned char)
                            probs_grad[(k * 2 * tokens_num + tokens_num + n) * psize + b],
                        0xa5);
            }
        moeperm_tensor_destroy(t);
        moeperm_tensor_destroy(g);
        moeperm_tensor_destroy(ix);
        moeperm_tensor_destroy(pr);
        moeperm_tensor_destroy(tg);
        moeperm_tensor_destroy(pg);
        free(tokens);
        free(grad);
        free(tokens_grad);
        free(probs);
        free(probs_grad);
        problem_free(q);
    }
}

/* A chip that cuts the row differently changes probs_grad's bits where the
 * chunks differ, and the run follows the chip's chunks. */
static void test_chip_decides_the_chunks(void **state)
{
    (void)state;
    const moeperm_chip small = {MOEPERM_CHIP_MIN_UB_BYTES, 48};
    problem *q = problem_new(MOEPERM_FLOAT, MOEPERM_FLOAT, true, 6, 4, 3000, 20, 50);
    assert_int_equal(chunk_of(q, NULL), 3000);
    assert_true(chunk_of(q, &small) < 1000);
    check_against_model(q, &small, "small chip");
    uint32_t small_bits[24];
    memcpy(small_bits, q->probs_grad, sizeof small_bits);
    check_against_model(q, NULL, "a2");
    assert_true(memcmp(small_bits, q->probs_grad, sizeof small_bits) != 0);
    problem_free(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_probs_grad_bits_every_branch_and_dtype_pair),
        cmocka_unit_test(test_folding_loop_above_8192_on_the_261888_byte_chip),
        cmocka_unit_test(test_chunked_rows_and_odd_tails),
        cmocka_unit_test(test_cancellation_follows_the_device_order),
        cmocka_unit_test(test_negative_zero_only_through_narrowing),
        cmocka_unit_test(test_inf_and_nan_in_g_meeting_dropped_rows),
        cmocka_unit_test(test_permuted_tokens_grad_edge_cases),
        cmocka_unit_test(test_without_probs_rows_are_copied_bit_for_bit),
        cmocka_unit_test(test_zero_sizes_succeed_only_when_every_output_is_empty),
        cmocka_unit_test(test_every_path_and_thread_count_gives_the_same_bits),
        cmocka_unit_test(test_large_outputs_aligned_or_not_on_every_path),
        cmocka_unit_test(test_one_hot_g_reads_back_the_permuted_tokens),
        cmocka_unit_test(test_strided_views_leave_gaps_untouched),
        cmocka_unit_test(test_chip_decides_the_chunks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
