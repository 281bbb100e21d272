/*
 * The tiling model of MoeTokenUnpermuteGrad: every vector of the vendor's
 * tiling unit test (moe/moe_token_unpermute_grad/tests/ut/op_host/
 * test_moe_token_unpermute_grad_tiling.cpp: a 64-core, 261888-byte
 * platform), the Atlas A2 figures the chunking is known by, and a sweep
 * against the tests' own transcription of the formula.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <moeperm/moeperm.h>

#include "naive_unpermute_grad.h"

#define NO_PROBS (-1)

typedef struct vendor_vector {
    const char *name;
    moeperm_dtype tokens_dtype;
    int probs_dtype; /* NO_PROBS: the kernel without probs */
    int64_t expect[17];
} vendor_vector;

/* The expected tiling data strings of the vendor's test, as numbers:
 * tokensNum topK hiddenSize numOutTokens formerCoreNum tailCoreNum
 * tokenNumEachCore tokenNumTailCore rowIdMapEachCore rowIdMapTailCore
 * hiddenSizeAlign hiddenSizeLoopTimes hiddenSizeTail inputReserveNum
 * indicesReserveNum indicesReserveNumAlign totalUbSize. */
static const vendor_vector vendor[] = {
    {"prob_not_none_bf16_001", MOEPERM_BF16, MOEPERM_BF16,
     {10, 3, 64, 30, 10, 54, 1, 0, 3, 0, 256, 1, 64, 3, 3, 16, 261888}},
    {"prob_not_none_bf16_002", MOEPERM_BF16, MOEPERM_FLOAT,
     {10, 3, 64, 30, 10, 54, 1, 0, 3, 0, 256, 1, 64, 3, 3, 8, 261888}},
    {"prob_none_bf16_001", MOEPERM_BF16, NO_PROBS,
     {10, 1, 64, 30, 10, 54, 1, 0, 1, 0, 64, 1, 64, 992, 992, 992, 261888}},
    {"prob_not_none_split_h_bf16_001", MOEPERM_BF16, MOEPERM_BF16,
     {10, 3, 8192, 30, 10, 54, 1, 0, 3, 0, 8192, 1, 8192, 1, 3, 16, 261888}},
    {"prob_not_none_fp16_001", MOEPERM_FLOAT16, MOEPERM_FLOAT16,
     {10, 3, 64, 30, 10, 54, 1, 0, 3, 0, 256, 1, 64, 3, 3, 16, 261888}},
    {"prob_none_fp16_001", MOEPERM_FLOAT16, NO_PROBS,
     {10, 1, 64, 30, 10, 54, 1, 0, 1, 0, 64, 1, 64, 992, 992, 992, 261888}},
    {"prob_not_none_split_h_fp16_001", MOEPERM_FLOAT16, MOEPERM_FLOAT16,
     {10, 3, 8192, 30, 10, 54, 1, 0, 3, 0, 8192, 1, 8192, 1, 3, 16, 261888}},
    {"prob_not_none_split_h_fp16_002", MOEPERM_FLOAT16, MOEPERM_FLOAT,
     {10, 3, 8192, 30, 10, 54, 1, 0, 3, 0, 8192, 1, 8192, 1, 3, 8, 261888}},
    {"prob_not_none_fp32_001", MOEPERM_FLOAT, MOEPERM_FLOAT,
     {10, 3, 64, 30, 10, 54, 1, 0, 3, 0, 128, 1, 64, 3, 3, 8, 261888}},
    {"prob_none_fp32_001", MOEPERM_FLOAT, NO_PROBS,
     {10, 1, 64, 30, 10, 54, 1, 0, 1, 0, 64, 1, 64, 496, 496, 496, 261888}},
    {"prob_not_none_split_h_fp32_001", MOEPERM_FLOAT, MOEPERM_FLOAT,
     {10, 3, 8192, 30, 10, 54, 1, 0, 3, 0, 7168, 2, 1024, 1, 3, 8, 261888}},
    {"prob_not_none_split_h_fp32_002", MOEPERM_FLOAT, MOEPERM_BF16,
     {10, 3, 8192, 30, 10, 54, 1, 0, 3, 0, 7168, 2, 1024, 1, 3, 16, 261888}},
};

/* The vendor's kernel unit test feeds the kernel tilings for Atlas A2
 * (moe/moe_token_unpermute_grad/tests/ut/op_kernel/moe_token_unpermute_grad_data/
 * gen_tiling.py, 48 cores, 196352 bytes); its bf16 cases with probs.  (Its
 * third case, top_k 1 with a 64-column align, is not one the host code
 * produces for either kernel, and is left out.) */
static const vendor_vector kernel_ut[] = {
    {"gen_tiling case0", MOEPERM_BF16, MOEPERM_BF16,
     {10, 3, 64, 30, 10, 38, 1, 0, 3, 0, 256, 1, 64, 3, 3, 16, 196352}},
    {"gen_tiling case2", MOEPERM_BF16, MOEPERM_BF16,
     {10, 3, 8192, 30, 10, 38, 1, 0, 3, 0, 7936, 2, 256, 1, 3, 16, 196352}},
};

static void as_array(const moeperm_unpermute_grad_tiling *t, int64_t out[17])
{
    int64_t v[17] = {t->tokens_num,          t->top_k,
                     t->hidden_size,         t->num_out_tokens,
                     t->former_core_num,     t->tail_core_num,
                     t->token_num_each_core, t->token_num_tail_core,
                     t->row_id_map_each_core, t->row_id_map_tail_core,
                     t->hidden_size_align,   t->hidden_size_loop_times,
                     t->hidden_size_tail,    t->input_reserve_num,
                     t->indices_reserve_num, t->indices_reserve_num_align,
                     t->total_ub_size};
    memcpy(out, v, sizeof v);
}

static void test_every_vendor_tiling_vector_matches(void **state)
{
    (void)state;
    const moeperm_chip platform = {261888, 64};
    for (size_t i = 0; i < sizeof vendor / sizeof vendor[0]; i++) {
        const vendor_vector *v = &vendor[i];
        moeperm_unpermute_grad_tiling t;
        bool has_probs = v->probs_dtype != NO_PROBS;
        moeperm_status status = moeperm_token_unpermute_grad_tiling(
            v->expect[0], v->expect[1], v->expect[2], v->expect[3], v->tokens_dtype, has_probs,
            has_probs ? (moeperm_dtype)v->probs_dtype : MOEPERM_FLOAT, &platform, &t);
        if (status != MOEPERM_SUCCESS)
            fail_msg("%s: %s", v->name, moeperm_last_error());
        int64_t got[17];
        as_array(&t, got);
        for (int f = 0; f < 17; f++)
            if (got[f] != v->expect[f])
                fail_msg("%s: field %d is %lld, the vendor expects %lld", v->name, f,
                         (long long)got[f], (long long)v->expect[f]);
    }
}

static void test_kernel_unit_test_tilings_are_the_a2_defaults(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof kernel_ut / sizeof kernel_ut[0]; i++) {
        const vendor_vector *v = &kernel_ut[i];
        moeperm_unpermute_grad_tiling t;
        assert_int_equal(moeperm_token_unpermute_grad_tiling(
                             v->expect[0], v->expect[1], v->expect[2], v->expect[3],
                             v->tokens_dtype, true, (moeperm_dtype)v->probs_dtype, NULL, &t),
                         MOEPERM_SUCCESS);
        int64_t got[17];
        as_array(&t, got);
        for (int f = 0; f < 17; f++)
            if (got[f] != v->expect[f])
                fail_msg("%s: field %d is %lld, the vendor expects %lld", v->name, f,
                         (long long)got[f], (long long)v->expect[f]);
    }
}

static moeperm_unpermute_grad_tiling a2(int64_t tokens, int64_t top_k, int64_t hidden,
                                        moeperm_dtype dtype, moeperm_dtype probs_dtype)
{
    moeperm_unpermute_grad_tiling t;
    assert_int_equal(moeperm_token_unpermute_grad_tiling(tokens, top_k, hidden, tokens * top_k,
                                                         dtype, true, probs_dtype, NULL, &t),
                     MOEPERM_SUCCESS);
    assert_int_equal(t.total_ub_size, MOEPERM_CHIP_A2_UB_BYTES);
    assert_int_equal(t.former_core_num + t.tail_core_num, MOEPERM_CHIP_A2_VECTOR_CORES);
    return t;
}

/* fp32 H = 5000 on A2: one chunk at top_k 2, two (4992 + 8) at top_k 512,
 * because 512 indices and probs take the room of a row. */
static void test_a2_fp32_h5000_is_one_chunk_at_k2_and_two_at_k512(void **state)
{
    (void)state;
    moeperm_unpermute_grad_tiling t = a2(4096, 2, 5000, MOEPERM_FLOAT, MOEPERM_FLOAT);
    assert_int_equal(t.hidden_size_loop_times, 1);
    assert_int_equal(t.hidden_size_tail, 5000);
    t = a2(4096, 512, 5000, MOEPERM_FLOAT, MOEPERM_FLOAT);
    assert_int_equal(t.hidden_size_loop_times, 2);
    assert_int_equal(t.hidden_size_align, 4992);
    assert_int_equal(t.hidden_size_tail, 8);
}

/* The largest chunks on A2: 7936 columns of 16-bit tokens, 5376 of fp32,
 * so the folding loop above 8192 never runs there. */
static void test_a2_chunks_never_exceed_7936_or_5376_columns(void **state)
{
    (void)state;
    moeperm_dtype dtypes[3] = {MOEPERM_BF16, MOEPERM_FLOAT16, MOEPERM_FLOAT};
    for (int d = 0; d < 3; d++)
        for (int p = 0; p < 3; p++) {
            int64_t most = 0;
            for (int64_t hidden = 64; hidden <= 20000; hidden += 64)
                for (int64_t k = 1; k <= 512; k *= 8) {
                    moeperm_unpermute_grad_tiling t = a2(1, k, hidden, dtypes[d], dtypes[p]);
                    int64_t chunk = t.hidden_size_loop_times == 1 ? t.hidden_size
                                                                  : t.hidden_size_align;
                    if (chunk > most)
                        most = chunk;
                }
            assert_int_equal(most, dtypes[d] == MOEPERM_FLOAT ? 5376 : 7936);
        }
}

/* The library's tiling against the tests' own transcription, over shapes,
 * dtypes, top_k and chips, with and without probs. */
static void test_tiling_matches_the_independent_transcription(void **state)
{
    (void)state;
    const moeperm_chip chips[4] = {
        {MOEPERM_CHIP_A2_UB_BYTES, MOEPERM_CHIP_A2_VECTOR_CORES},
        {261888, 64},
        {MOEPERM_CHIP_MIN_UB_BYTES, 1},
        {MOEPERM_CHIP_MAX_UB_BYTES, 7},
    };
    const int64_t tokens[] = {1, 5, 47, 48, 49, 1000, 100000};
    const int64_t top_ks[] = {1, 2, 3, 7, 8, 64, 255, 256, 257, 300, 512};
    const int64_t hiddens[] = {1, 7, 64, 100, 2048, 4097, 5000, 7937, 10000, 100000, 1 << 24};
    const moeperm_dtype dtypes[3] = {MOEPERM_BF16, MOEPERM_FLOAT16, MOEPERM_FLOAT};
    int64_t checked = 0;
    for (int c = 0; c < 4; c++)
        for (size_t n = 0; n < sizeof tokens / sizeof *tokens; n++)
            for (size_t k = 0; k < sizeof top_ks / sizeof *top_ks; k++)
                for (size_t h = 0; h < sizeof hiddens / sizeof *hiddens; h++)
                    for (int d = 0; d < 3; d++)
                        for (int p = -1; p < 3; p++) {
                            bool has_probs = p >= 0;
                            int64_t top_k = has_probs ? top_ks[k] : 1;
                            moeperm_unpermute_grad_tiling t;
                            naive_tiling want;
                            assert_int_equal(moeperm_token_unpermute_grad_tiling(
                                                 tokens[n], top_k, hiddens[h], 3, dtypes[d],
                                                 has_probs, has_probs ? dtypes[p] : MOEPERM_BF16,
                                                 &chips[c], &t),
                                             MOEPERM_SUCCESS);
                            naive_ug_tiling(tokens[n], top_k, hiddens[h], 3, dtypes[d],
                                            has_probs ? (int)dtypes[p] : -1, chips[c].ub_bytes,
                                            chips[c].vector_cores, &want);
                            int64_t got[17];
                            as_array(&t, got);
                            if (memcmp(got, &want, sizeof got) != 0)
                                fail_msg("chip %d N %lld K %lld H %lld dtype %d probs %d differ",
                                         c, (long long)tokens[n], (long long)top_k,
                                         (long long)hiddens[h], d, p);
                            assert_true(t.hidden_size_align > 0);
                            assert_true(t.hidden_size_tail > 0 &&
                                        t.hidden_size_tail <= t.hidden_size_align);
                            checked++;
                        }
    assert_true(checked > 10000);
}

static void expect_status(moeperm_status want, int64_t tokens, int64_t top_k, int64_t hidden,
                          int64_t rows, moeperm_dtype dtype, bool has_probs,
                          moeperm_dtype probs_dtype, const moeperm_chip *chip,
                          const char *message)
{
    moeperm_unpermute_grad_tiling t;
    memset(&t, 0x5a, sizeof t);
    assert_int_equal(moeperm_token_unpermute_grad_tiling(tokens, top_k, hidden, rows, dtype,
                                                         has_probs, probs_dtype, chip, &t),
                     want);
    if (!strstr(moeperm_last_error(), message))
        fail_msg("\"%s\" does not contain \"%s\"", moeperm_last_error(), message);
    for (size_t i = 0; i < sizeof t; i++)
        assert_int_equal(((unsigned char *)&t)[i], 0x5a);
}

#define expect_refusal(...) expect_status(MOEPERM_ERR_PARAM_INVALID, __VA_ARGS__)
#define expect_tiling_refusal(...) expect_status(MOEPERM_ERR_INNER_TILING_ERROR, __VA_ARGS__)

static void test_tiling_query_refuses_what_the_kernel_cannot_tile(void **state)
{
    (void)state;
    const moeperm_chip tiny = {MOEPERM_CHIP_MIN_UB_BYTES - 1, 48};
    const moeperm_chip no_cores = {196352, 0};
    /* the device's tiling refuses a 0 among the sizes and top_k > 512 */
    expect_tiling_refusal(0, 2, 64, 0, MOEPERM_BF16, true, MOEPERM_BF16, NULL,
                          "the device refuses tokens_num = 0");
    expect_tiling_refusal(4, 2, 0, 8, MOEPERM_BF16, true, MOEPERM_BF16, NULL,
                          "the device refuses hidden_size = 0");
    expect_tiling_refusal(4, 2, 64, 0, MOEPERM_BF16, true, MOEPERM_BF16, NULL,
                          "the device refuses num_out_tokens = 0");
    expect_tiling_refusal(4, 513, 64, 8, MOEPERM_BF16, true, MOEPERM_BF16, NULL,
                          "the device refuses top_k = 513 (the columns of probs): its tiling "
                          "takes at most 512");
    expect_refusal(4, 2, 64, 8, MOEPERM_BF16, false, MOEPERM_BF16, NULL,
                   "top_k = 2 without probs");
    expect_refusal(4, 2, 64, -1, MOEPERM_BF16, true, MOEPERM_BF16, NULL,
                   "num_out_tokens = -1 is negative");
    expect_refusal(4, 2, 64, 8, MOEPERM_INT32, true, MOEPERM_BF16, NULL,
                   "tokens_dtype dtype 3 (int32)");
    expect_refusal(4, 2, 64, 8, MOEPERM_BF16, true, MOEPERM_INT8, NULL,
                   "probs_dtype dtype 2 (int8)");
    expect_refusal(4, 2, 64, 8, MOEPERM_BF16, true, MOEPERM_BF16, &tiny,
                   "chip ub_bytes = 32767 is outside");
    expect_refusal(4, 2, 64, 8, MOEPERM_BF16, true, MOEPERM_BF16, &no_cores,
                   "chip vector_cores = 0 is outside");
    assert_int_equal(moeperm_token_unpermute_grad_tiling(4, 2, 64, 8, MOEPERM_BF16, true,
                                                         MOEPERM_BF16, NULL, NULL),
                     MOEPERM_ERR_PARAM_NULLPTR);
}

/* Sizes where the tiling's int64 arithmetic would overflow are refused,
 * naming the value; every other size gives a tiling whose chunks cover the
 * hidden size.  scripts/ci-sanitize runs this under UBSan, which catches
 * any overflow on the way. */
static void test_extreme_sizes_give_a_tiling_or_a_refusal_naming_the_value(void **state)
{
    (void)state;
    static const int64_t sizes[] = {1,
                                    2,
                                    47,
                                    49,
                                    INT64_C(1) << 31,
                                    INT64_C(1) << 32,
                                    INT64_C(1) << 40,
                                    INT64_C(1) << 53,
                                    INT64_C(1) << 58,
                                    INT64_C(1) << 62,
                                    INT64_MAX / 28,
                                    INT64_MAX / 20,
                                    INT64_MAX - 511,
                                    INT64_MAX};
    static const int64_t top_ks[] = {1, 8, 512};
    const moeperm_chip chips[3] = {
        {MOEPERM_CHIP_A2_UB_BYTES, 1},
        {MOEPERM_CHIP_A2_UB_BYTES, MOEPERM_CHIP_A2_VECTOR_CORES},
        {MOEPERM_CHIP_MAX_UB_BYTES, MOEPERM_CHIP_MAX_VECTOR_CORES},
    };
    const moeperm_dtype dtypes[2] = {MOEPERM_BF16, MOEPERM_FLOAT};
    const size_t n = sizeof sizes / sizeof *sizes;
    int64_t accepted = 0, refused = 0;
    for (size_t a = 0; a < n; a++)
        for (size_t b = 0; b < n; b++)
            for (size_t k = 0; k < 3; k++)
                for (int c = 0; c < 3; c++)
                    for (int d = 0; d < 2; d++)
                        for (int p = 0; p < 2; p++) {
                            bool has_probs = p == 1;
                            int64_t tokens = sizes[a], hidden = sizes[b];
                            int64_t top_k = has_probs ? top_ks[k] : 1;
                            moeperm_unpermute_grad_tiling t;
                            moeperm_status status = moeperm_token_unpermute_grad_tiling(
                                tokens, top_k, hidden, sizes[(a + b) % n], dtypes[d], has_probs,
                                dtypes[1 - d], &chips[c], &t);
                            if (status == MOEPERM_SUCCESS) {
                                accepted++;
                                assert_true(t.hidden_size_align > 0);
                                assert_true(t.hidden_size_tail > 0 &&
                                            t.hidden_size_tail <= t.hidden_size_align);
                                assert_true(t.hidden_size_loop_times >= 1);
                                assert_true((t.hidden_size_loop_times - 1) <=
                                            (hidden - t.hidden_size_tail) / t.hidden_size_align);
                                continue;
                            }
                            refused++;
                            assert_int_equal(status, MOEPERM_ERR_PARAM_INVALID);
                            char tokens_word[32], hidden_word[32];
                            snprintf(tokens_word, sizeof tokens_word, "tokens_num = %lld",
                                     (long long)tokens);
                            snprintf(hidden_word, sizeof hidden_word, "hidden_size = %lld",
                                     (long long)hidden);
                            if (!strstr(moeperm_last_error(), tokens_word) &&
                                !strstr(moeperm_last_error(), hidden_word))
                                fail_msg("N %lld H %lld: \"%s\" names neither", (long long)tokens,
                                         (long long)hidden, moeperm_last_error());
                        }
    assert_true(accepted > 1000 && refused > 1000);
    /* the two the overflow was found with */
    expect_refusal(1, 1, INT64_MAX, 1, MOEPERM_BF16, true, MOEPERM_BF16, NULL,
                   "hidden_size = 9223372036854775807");
    const moeperm_chip one_core = {MOEPERM_CHIP_A2_UB_BYTES, 1};
    expect_refusal(INT64_C(1) << 62, 8, 64, 8, MOEPERM_BF16, true, MOEPERM_BF16, &one_core,
                   "tokens_num = 4611686018427387904");
}

/* Every named chip: ub_size of its platform configuration (196608 for all
 * of them, hicann/runtime src/platform/platform_config/cann/<name>.ini)
 * less the 256 bytes GetCoreMemSize() keeps back on the Ascend910B and
 * Ascend910_93 families, and its vector_core_cnt; the macros and the
 * lookup agree; a name the platform does not have is refused. */
static void test_named_chips_are_their_platform_configurations(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        int64_t ini_ub_size, vector_core_cnt;
    } ini[] = {
        {"Ascend910B1", 196608, 48},    {"Ascend910B2", 196608, 48},
        {"Ascend910B2C", 196608, 48},   {"Ascend910B3", 196608, 40},
        {"Ascend910B4", 196608, 40},    {"Ascend910B4-1", 196608, 40},
        {"Ascend910_9362", 196608, 40}, {"Ascend910_9363", 196608, 40},
        {"Ascend910_9372", 196608, 40}, {"Ascend910_9381", 196608, 48},
        {"Ascend910_9382", 196608, 48}, {"Ascend910_9391", 196608, 48},
        {"Ascend910_9392", 196608, 48},
    };
    const moeperm_chip macros[13] = {
        MOEPERM_CHIP_ASCEND910B1,    MOEPERM_CHIP_ASCEND910B2,    MOEPERM_CHIP_ASCEND910B2C,
        MOEPERM_CHIP_ASCEND910B3,    MOEPERM_CHIP_ASCEND910B4,    MOEPERM_CHIP_ASCEND910B4_1,
        MOEPERM_CHIP_ASCEND910_9362, MOEPERM_CHIP_ASCEND910_9363, MOEPERM_CHIP_ASCEND910_9372,
        MOEPERM_CHIP_ASCEND910_9381, MOEPERM_CHIP_ASCEND910_9382, MOEPERM_CHIP_ASCEND910_9391,
        MOEPERM_CHIP_ASCEND910_9392,
    };
    char names[512] = "";
    for (size_t i = 0; i < 13; i++) {
        moeperm_chip chip = {0, 0};
        assert_int_equal(moeperm_chip_by_name(ini[i].name, &chip), MOEPERM_SUCCESS);
        assert_int_equal(chip.ub_bytes, ini[i].ini_ub_size - 256);
        assert_int_equal(chip.vector_cores, ini[i].vector_core_cnt);
        assert_int_equal(macros[i].ub_bytes, chip.ub_bytes);
        assert_int_equal(macros[i].vector_cores, chip.vector_cores);
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? " " : "",
                 ini[i].name);
        /* a plan accepts every named chip */
        moeperm_unpermute_grad_tiling t;
        assert_int_equal(moeperm_token_unpermute_grad_tiling(4, 2, 64, 8, MOEPERM_BF16, true,
                                                             MOEPERM_BF16, &chip, &t),
                         MOEPERM_SUCCESS);
    }
    assert_string_equal(moeperm_chip_names(), names);
    /* the default is the 48-core chips' */
    assert_int_equal(MOEPERM_CHIP_A2_UB_BYTES, 196352);
    assert_int_equal(MOEPERM_CHIP_A2_VECTOR_CORES, 48);
    moeperm_chip kept = {1, 2};
    assert_int_equal(moeperm_chip_by_name("Ascend910_95", &kept), MOEPERM_ERR_PARAM_INVALID);
    assert_non_null(strstr(moeperm_last_error(), "chip \"Ascend910_95\" is not one of"));
    assert_int_equal(moeperm_chip_by_name("ascend910b1", &kept), MOEPERM_ERR_PARAM_INVALID);
    assert_int_equal(kept.ub_bytes, 1);
    assert_int_equal(kept.vector_cores, 2);
    assert_int_equal(moeperm_chip_by_name(NULL, &kept), MOEPERM_ERR_PARAM_NULLPTR);
    assert_int_equal(moeperm_chip_by_name("Ascend910B1", NULL), MOEPERM_ERR_PARAM_NULLPTR);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_vendor_tiling_vector_matches),
        cmocka_unit_test(test_kernel_unit_test_tilings_are_the_a2_defaults),
        cmocka_unit_test(test_a2_fp32_h5000_is_one_chunk_at_k2_and_two_at_k512),
        cmocka_unit_test(test_a2_chunks_never_exceed_7936_or_5376_columns),
        cmocka_unit_test(test_tiling_matches_the_independent_transcription),
        cmocka_unit_test(test_tiling_query_refuses_what_the_kernel_cannot_tile),
        cmocka_unit_test(test_extreme_sizes_give_a_tiling_or_a_refusal_naming_the_value),
        cmocka_unit_test(test_named_chips_are_their_platform_configurations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
