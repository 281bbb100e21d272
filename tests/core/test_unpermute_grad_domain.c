/*
 * The inputs of MoeTokenUnpermuteGrad that the Atlas A2/A3 kernel gives a
 * determined result for, beyond a permutation (docs/unpermute-grad.md,
 * "The input domain"), each checked against the tests' own model
 * (naive_unpermute_grad.c) bit for bit: more rows than slots, the rows no
 * slot names keeping the caller's bytes, dropped slots naming the same row
 * (>= R) again and again, more indices than tokens_num * top_k (the rest
 * unread), with and without probs on every instruction set; probs_grad_out
 * given without probs (never written) or NULL; padded_mode = true and a
 * NULL restore_shape with a length (neither read).  And the width the
 * device cannot hold, refused before any work.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "expect.h"
#include "naive.h"
#include "naive_unpermute_grad.h"

static const moeperm_dtype dtypes[3] = {MOEPERM_FLOAT, MOEPERM_FLOAT16, MOEPERM_BF16};

typedef struct ug_case {
    moeperm_dtype dtype, probs_dtype;
    bool has_probs, padded_mode, probs_grad_without_probs;
    int64_t tokens, top_k, hidden, rows, count;
    const int32_t *indices;
} ug_case;

/* One call on contiguous buffers.  Without probs, probs_grad is passed
 * only when probs_grad_without_probs says so (as a [1] tensor, like the
 * 0-d one torch_npu passes). */
static moeperm_status call(const ug_case *c, const void *tokens, const void *grad,
                           const void *probs, void *tokens_grad, void *probs_grad)
{
    int64_t td[2] = {c->rows, c->hidden}, gd[2] = {c->tokens, c->hidden}, id[1] = {c->count};
    int64_t pd[2] = {c->tokens, c->top_k}, one[1] = {1};
    moeperm_tensor *t = moeperm_tensor_create(td, 2, c->dtype, NULL, 0, (void *)tokens);
    moeperm_tensor *g = moeperm_tensor_create(gd, 2, c->dtype, NULL, 0, (void *)grad);
    moeperm_tensor *ix = moeperm_tensor_create(id, 1, MOEPERM_INT32, NULL, 0, (void *)c->indices);
    moeperm_tensor *tg = moeperm_tensor_create(td, 2, c->dtype, NULL, 0, tokens_grad);
    moeperm_tensor *p = NULL, *pg = NULL;
    if (c->has_probs) {
        p = moeperm_tensor_create(pd, 2, c->probs_dtype, NULL, 0, (void *)probs);
        pg = moeperm_tensor_create(pd, 2, c->probs_dtype, NULL, 0, probs_grad);
    } else if (c->probs_grad_without_probs) {
        pg = moeperm_tensor_create(one, 1, c->probs_dtype, NULL, 0, probs_grad);
    }
    uint64_t workspace = 1;
    moeperm_executor *plan = NULL;
    moeperm_status status = moeperm_token_unpermute_grad_get_workspace_size(
        t, g, ix, p, c->padded_mode, NULL, 7, tg, pg, &workspace, &plan);
    moeperm_tensor_destroy(t);
    moeperm_tensor_destroy(g);
    moeperm_tensor_destroy(ix);
    moeperm_tensor_destroy(tg);
    moeperm_tensor_destroy(p);
    moeperm_tensor_destroy(pg);
    if (status != MOEPERM_SUCCESS)
        return status;
    return moeperm_token_unpermute_grad(NULL, 0, plan, NULL);
}

/* The library against the model; both outputs start as EXPECT_FILL, so
 * every byte the operator must leave is compared too. */
static void expect_model(const char *what, const ug_case *c, uint64_t seed)
{
    size_t es = naive_size(c->dtype), ps = naive_size(c->probs_dtype);
    int64_t slots = c->tokens * c->top_k;
    size_t tg_bytes = (size_t)(c->rows * c->hidden) * es, pg_bytes = (size_t)slots * ps;
    void *tokens = malloc((size_t)(c->rows * c->hidden) * es + 1);
    void *grad = malloc((size_t)(c->tokens * c->hidden) * es + 1);
    void *probs = malloc(pg_bytes + 1);
    void *tokens_grad = malloc(tg_bytes + 1), *want_tokens_grad = malloc(tg_bytes + 1);
    void *probs_grad = malloc(pg_bytes + ps), *want_probs_grad = malloc(pg_bytes + ps);
    assert_true(tokens && grad && probs && tokens_grad && want_tokens_grad && probs_grad &&
                want_probs_grad);
    naive_fill_ordinary(&seed, c->dtype, tokens, c->rows * c->hidden);
    naive_fill_ordinary(&seed, c->dtype, grad, c->tokens * c->hidden);
    naive_fill_ordinary(&seed, c->probs_dtype, probs, slots);
    memset(tokens_grad, EXPECT_FILL, tg_bytes);
    memset(want_tokens_grad, EXPECT_FILL, tg_bytes);
    memset(probs_grad, EXPECT_FILL, pg_bytes + ps);
    memset(want_probs_grad, EXPECT_FILL, pg_bytes + ps);
    int64_t chunk = naive_ug_chunk_for(c->tokens, c->top_k, c->hidden, c->dtype, c->probs_dtype,
                                       MOEPERM_CHIP_A2_UB_BYTES, MOEPERM_CHIP_A2_VECTOR_CORES);
    naive_unpermute_grad(c->dtype, c->probs_dtype, tokens, c->rows, c->hidden, grad, c->tokens,
                         c->indices, c->has_probs ? probs : NULL, c->top_k, chunk,
                         want_tokens_grad, want_probs_grad);
    moeperm_status status = call(c, tokens, grad, probs, tokens_grad, probs_grad);
    if (status != MOEPERM_SUCCESS)
        fail_msg("%s: refused: %s", what, moeperm_last_error());
    if (memcmp(tokens_grad, want_tokens_grad, tg_bytes) != 0)
        fail_msg("%s: permuted_tokens_grad differs from the model", what);
    /* without probs, probs_grad (given or not) keeps its bytes */
    if (memcmp(probs_grad, want_probs_grad, pg_bytes + ps) != 0)
        fail_msg("%s: probs_grad differs from the model", what);
    free(tokens);
    free(grad);
    free(probs);
    free(tokens_grad);
    free(want_tokens_grad);
    free(probs_grad);
    free(want_probs_grad);
}

/* Rows 0..R-1 named at most once each, R > N*K, dropped slots repeating
 * row R and beyond, and trailing entries the kernel never reads. */
static void test_more_rows_than_slots_and_repeated_dropped_slots_match_the_model(void **state)
{
    (void)state;
    /* 4 tokens of 3 slots, R = 20: rows 0..19 named by 7 slots, the rest
     * dropped (20 twice, 25 three times); two unread trailing entries */
    const int32_t with_probs[14] = {19, 20, 3, 25, 0, 7, 25, 11, 20, 12, 25, 5, -1, 3};
    /* 9 tokens, one slot each, R = 15 */
    const int32_t without[10] = {14, 15, 2, 15, 8, 0, 30, 9, 1, 2};
    for (int d = 0; d < 3; d++) {
        for (int p = 0; p < 3; p++) {
            ug_case c = {dtypes[d], dtypes[p], true,  false, false, 4,
                         3,         37,        20,    14,    with_probs};
            expect_model("with probs", &c, 1 + d * 3 + p);
            c.hidden = 9000; /* two chunks */
            expect_model("with probs, two chunks", &c, 20 + d * 3 + p);
        }
        ug_case c = {dtypes[d], dtypes[d], false, false, false, 9, 1, 21, 15, 10, without};
        expect_model("without probs", &c, 40 + d);
        c.probs_grad_without_probs = true;
        expect_model("without probs, probs_grad given", &c, 50 + d);
        c.padded_mode = true;
        expect_model("without probs, padded_mode", &c, 60 + d);
    }
}

/* The same bits on every instruction set and thread count as the model
 * when rows outnumber slots and slots are dropped. */
static void test_every_instruction_set_agrees_on_dropped_slots_and_unnamed_rows(void **state)
{
    (void)state;
    enum { TOKENS = 40, TOP_K = 5, ROWS = 260 };
    int32_t indices[TOKENS * TOP_K];
    uint64_t rng = 3;
    /* a random injection into [0, 2 * ROWS): about half the slots dropped */
    int32_t pool[2 * ROWS];
    for (int i = 0; i < 2 * ROWS; i++)
        pool[i] = i;
    for (int i = 0; i < TOKENS * TOP_K; i++) {
        int j = i + (int)(naive_rand(&rng) % (uint64_t)(2 * ROWS - i));
        int32_t swap = pool[i];
        pool[i] = pool[j];
        pool[j] = swap;
        indices[i] = pool[i];
    }
    const moeperm_isa sets[3] = {MOEPERM_ISA_PORTABLE, MOEPERM_ISA_X86_AVX2,
                                 MOEPERM_ISA_X86_AVX512};
    for (int s = 0; s < 3; s++) {
        if (moeperm_isa_choose(sets[s]) != MOEPERM_SUCCESS)
            continue; /* a set this CPU lacks */
        for (int d = 0; d < 3; d++) {
            ug_case c = {dtypes[d], dtypes[(d + 1) % 3], true, false, false, TOKENS,
                         TOP_K,     777,                 ROWS, TOKENS * TOP_K, indices};
            char what[64];
            snprintf(what, sizeof what, "%s, %s", moeperm_isa_name(sets[s]),
                     moeperm_dtype_name(dtypes[d]));
            expect_model(what, &c, 70 + d);
        }
    }
    assert_int_equal(moeperm_isa_choose(MOEPERM_ISA_AUTO), MOEPERM_SUCCESS);
}

/* A 0-row call with a broadcast gradient 2^40 columns wide once summed
 * for minutes over 4 bytes of input.  The device has at most 64 GiB
 * (memory_size of the largest Atlas A2/A3 chip), so it cannot hold such a
 * gradient: refused at once; and with no rows the device's tiling refuses
 * anyway. */
static void test_a_width_no_device_holds_is_refused_before_any_work(void **state)
{
    (void)state;
    uint16_t grad[1] = {0x3f80}, tokens[1] = {0x3f80}, probs[1] = {0x3f80};
    uint16_t probs_grad[1] = {0x5a5a}, tokens_grad[1] = {0x5a5a};
    int32_t indices[1] = {5};
    int64_t wide = INT64_C(1) << 40, zero_strides[2] = {0, 0};
    int64_t gd[2] = {1, wide}, td[2] = {1, wide}, id[1] = {1}, pd[2] = {1, 1};
    for (int rows = 0; rows <= 1; rows++) {
        td[0] = rows;
        moeperm_tensor *g = moeperm_tensor_create(gd, 2, MOEPERM_BF16, zero_strides, 0, grad);
        moeperm_tensor *t = moeperm_tensor_create(td, 2, MOEPERM_BF16, zero_strides, 0, tokens);
        moeperm_tensor *ix = moeperm_tensor_create(id, 1, MOEPERM_INT32, NULL, 0, indices);
        moeperm_tensor *p = moeperm_tensor_create(pd, 2, MOEPERM_BF16, NULL, 0, probs);
        moeperm_tensor *pg = moeperm_tensor_create(pd, 2, MOEPERM_BF16, NULL, 0, probs_grad);
        /* one row of output claims 2^41 bytes: never touched, as the run
         * never starts */
        moeperm_tensor *tg = moeperm_tensor_create(td, 2, MOEPERM_BF16, NULL, 0, tokens_grad);
        uint64_t workspace;
        moeperm_executor *plan = (moeperm_executor *)(uintptr_t)1;
        moeperm_status status = moeperm_token_unpermute_grad_get_workspace_size(
            t, g, ix, p, false, NULL, 0, tg, pg, &workspace, &plan);
        if (rows == 0)
            expect_refusal(status, MOEPERM_ERR_INNER_TILING_ERROR, plan,
                           "the device refuses num_out_tokens = 0");
        else
            expect_refusal(status, MOEPERM_ERR_PARAM_INVALID, plan,
                           "the device's result is undetermined: unpermuted_tokens_grad of "
                           "[1, 1099511627776] elements of 2 bytes is more than the "
                           "68719476736 bytes of memory of the largest Atlas A2/A3 chip");
        assert_int_equal(probs_grad[0], 0x5a5a);
        assert_int_equal(tokens_grad[0], 0x5a5a);
        moeperm_tensor_destroy(g);
        moeperm_tensor_destroy(t);
        moeperm_tensor_destroy(ix);
        moeperm_tensor_destroy(p);
        moeperm_tensor_destroy(pg);
        moeperm_tensor_destroy(tg);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_more_rows_than_slots_and_repeated_dropped_slots_match_the_model),
        cmocka_unit_test(test_every_instruction_set_agrees_on_dropped_slots_and_unnamed_rows),
        cmocka_unit_test(test_a_width_no_device_holds_is_refused_before_any_work),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
