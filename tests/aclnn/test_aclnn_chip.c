/*
 * The chip the host runtime presents is the one MOEPERM_ACLNN_CHIP names
 * (run with MOEPERM_ACLNN_CHIP=Ascend910B3: 40 vector cores where the
 * Atlas A2 default has 48): aclrtGetSocName() says it, and
 * MoeTokenUnpermuteGrad's probsGrad follows its tiling: the bits of
 * libmoeperm with that chip's preset, on a shape whose hidden-size chunks
 * differ between the two chips, and not the default's bits.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <moeperm/moeperm.h>

#include "acl/acl.h"
#include "aclnn/opdev/op_errno.h"
#include "aclnnop/aclnn_moe_token_unpermute_grad.h"

/* 41 tokens spread over 40 cores take two a core, over 48 one: with 45
 * slots a token, the indices the kernel loads at a time differ, and so,
 * for fp32 tokens near 5249 columns, does the cut of the hidden size into
 * chunks (found with the tiling query). */
enum { TOKENS = 41, TOP_K = 45 };

/* A hidden size whose chunks differ between the two chips (found, not
 * assumed: the tiling query says). */
static int64_t hidden_where_chips_differ(const moeperm_chip *a, const moeperm_chip *b)
{
    for (int64_t h = 5000; h < 5500; h++) {
        moeperm_unpermute_grad_tiling ta, tb;
        assert_int_equal(moeperm_token_unpermute_grad_tiling(TOKENS, TOP_K, h, TOKENS * TOP_K,
                                                             MOEPERM_FLOAT, true, MOEPERM_FLOAT,
                                                             a, &ta),
                         MOEPERM_SUCCESS);
        assert_int_equal(moeperm_token_unpermute_grad_tiling(TOKENS, TOP_K, h, TOKENS * TOP_K,
                                                             MOEPERM_FLOAT, true, MOEPERM_FLOAT,
                                                             b, &tb),
                         MOEPERM_SUCCESS);
        if (ta.hidden_size_align != tb.hidden_size_align ||
            ta.hidden_size_loop_times != tb.hidden_size_loop_times)
            return h;
    }
    fail_msg("no hidden size in [5000, 5500) splits differently on the two chips");
    return 0;
}

/* probs_grad of libmoeperm on chip, into out. */
static void reference(const moeperm_chip *chip, moeperm_tensor *const *in, int64_t h,
                      void *tokens_grad, float *out)
{
    int64_t tg_dims[2] = {TOKENS * TOP_K, h}, pg_dims[2] = {TOKENS, TOP_K};
    moeperm_tensor *tg = moeperm_tensor_create(tg_dims, 2, MOEPERM_FLOAT, NULL, 0, tokens_grad);
    moeperm_tensor *pg = moeperm_tensor_create(pg_dims, 2, MOEPERM_FLOAT, NULL, 0, out);
    uint64_t ws;
    moeperm_executor *plan = NULL;
    assert_int_equal(moeperm_token_unpermute_grad_get_workspace_size(
                         in[0], in[1], in[2], in[3], false, NULL, 0, tg, pg, &ws, &plan),
                     MOEPERM_SUCCESS);
    assert_int_equal(moeperm_executor_set_chip(plan, chip), MOEPERM_SUCCESS);
    assert_int_equal(moeperm_executor_run(NULL, 0, plan, NULL), MOEPERM_SUCCESS);
    moeperm_tensor_destroy(tg);
    moeperm_tensor_destroy(pg);
}

static void test_probs_grad_follows_the_named_chip(void **state)
{
    (void)state;
    assert_int_equal(aclInit(NULL), ACL_SUCCESS);
    assert_string_equal(aclrtGetSocName(), "Ascend910B3");
    moeperm_chip named = MOEPERM_CHIP_ASCEND910B3, a2 = MOEPERM_CHIP_ASCEND910B2;
    int64_t h = hidden_where_chips_differ(&named, &a2);

    int64_t slots = TOKENS * TOP_K;
    size_t token_bytes = (size_t)slots * (size_t)h * 4, grad_bytes = TOKENS * (size_t)h * 4;
    void *x, *g, *ix, *probs, *tg, *pg;
    assert_int_equal(aclrtMalloc(&x, token_bytes, ACL_MEM_MALLOC_HUGE_FIRST), 0);
    assert_int_equal(aclrtMalloc(&g, grad_bytes, ACL_MEM_MALLOC_HUGE_FIRST), 0);
    assert_int_equal(aclrtMalloc(&ix, (size_t)slots * 4, ACL_MEM_MALLOC_HUGE_FIRST), 0);
    assert_int_equal(aclrtMalloc(&probs, (size_t)slots * 4, ACL_MEM_MALLOC_HUGE_FIRST), 0);
    assert_int_equal(aclrtMalloc(&tg, token_bytes, ACL_MEM_MALLOC_HUGE_FIRST), 0);
    assert_int_equal(aclrtMalloc(&pg, (size_t)slots * 4, ACL_MEM_MALLOC_HUGE_FIRST), 0);
    /* Values of both signs, so that the order of the sums shows. */
    uint32_t seed = 7;
    for (size_t i = 0; i < token_bytes / 4; i++) {
        seed = seed * 1664525u + 1013904223u;
        ((uint32_t *)x)[i] = 0x3c000000u | (seed & 0x807fffffu);
    }
    for (size_t i = 0; i < grad_bytes / 4; i++) {
        seed = seed * 1664525u + 1013904223u;
        ((uint32_t *)g)[i] = 0x3e000000u | (seed & 0x807fffffu);
    }
    for (int64_t i = 0; i < slots; i++) {
        ((int32_t *)ix)[i] = (int32_t)((i * 37) % slots); /* 37 is prime to 1845 */
        ((float *)probs)[i] = 0.5f;
    }

    int64_t x_dims[2] = {slots, h}, g_dims[2] = {TOKENS, h}, i_dims[1] = {slots},
            p_dims[2] = {TOKENS, TOP_K};
    aclTensor *tx = aclCreateTensor(x_dims, 2, ACL_FLOAT, NULL, 0, ACL_FORMAT_ND, x_dims, 2, x);
    aclTensor *tgr = aclCreateTensor(g_dims, 2, ACL_FLOAT, NULL, 0, ACL_FORMAT_ND, g_dims, 2, g);
    aclTensor *tix = aclCreateTensor(i_dims, 1, ACL_INT32, NULL, 0, ACL_FORMAT_ND, i_dims, 1, ix);
    aclTensor *tp = aclCreateTensor(p_dims, 2, ACL_FLOAT, NULL, 0, ACL_FORMAT_ND, p_dims, 2, probs);
    aclTensor *ttg = aclCreateTensor(x_dims, 2, ACL_FLOAT, NULL, 0, ACL_FORMAT_ND, x_dims, 2, tg);
    aclTensor *tpg = aclCreateTensor(p_dims, 2, ACL_FLOAT, NULL, 0, ACL_FORMAT_ND, p_dims, 2, pg);
    uint64_t ws;
    aclOpExecutor *ex;
    assert_int_equal(aclnnMoeTokenUnpermuteGradGetWorkspaceSize(tx, tgr, tix, tp, false, NULL,
                                                                ttg, tpg, &ws, &ex),
                     ACLNN_SUCCESS);
    assert_int_equal(aclnnMoeTokenUnpermuteGrad(NULL, ws, ex, NULL), ACLNN_SUCCESS);

    moeperm_tensor *in[4] = {
        moeperm_tensor_create(x_dims, 2, MOEPERM_FLOAT, NULL, 0, x),
        moeperm_tensor_create(g_dims, 2, MOEPERM_FLOAT, NULL, 0, g),
        moeperm_tensor_create(i_dims, 1, MOEPERM_INT32, NULL, 0, ix),
        moeperm_tensor_create(p_dims, 2, MOEPERM_FLOAT, NULL, 0, probs),
    };
    void *scratch = malloc(token_bytes);
    float *want = malloc((size_t)slots * 4), *other = malloc((size_t)slots * 4);
    assert_non_null(scratch);
    assert_non_null(want);
    assert_non_null(other);
    reference(&named, in, h, scratch, want);
    reference(&a2, in, h, scratch, other);
    assert_memory_equal(pg, want, (size_t)slots * 4);
    if (memcmp(want, other, (size_t)slots * 4) == 0)
        fail_msg("at hidden size %lld the two chips give the same bits: the test would not see "
                 "a runtime that ignores the chip", (long long)h);

    for (int i = 0; i < 4; i++)
        moeperm_tensor_destroy(in[i]);
    free(scratch);
    free(want);
    free(other);
    aclTensor *ts[] = {tx, tgr, tix, tp, ttg, tpg};
    void *mem[] = {x, g, ix, probs, tg, pg};
    for (int i = 0; i < 6; i++) {
        assert_int_equal(aclDestroyTensor(ts[i]), 0);
        assert_int_equal(aclrtFree(mem[i]), 0);
    }
    assert_int_equal(aclFinalize(), ACL_SUCCESS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_probs_grad_follows_the_named_chip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
