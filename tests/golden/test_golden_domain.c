/*
 * Golden cases at the input domain's edge (docs/operators.md, "The input
 * domain"; docs/golden-format.md, "The domain suites"): the generator makes
 * sorted_indices that are no permutation (rows read twice or never, more
 * rows than slots), huge dropped entries, entries past the ones read,
 * num_topk -1, padded_mode true and tokens of rank 3, as the spec says;
 * the outputs it records are the tests' own naive models' (nothing here
 * computes them with libmoeperm), rows no slot names reading +0; the
 * manifest keeps every one of them as given, a named chip with its
 * numbers, and the writer refuses a chip whose name and numbers disagree;
 * the spec refuses what the generator cannot make, with a sentence.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include <moeperm/golden.h>

#include "golden_util.h"
#include "naive_family.h"
#include "naive_permute_grad.h"
#include "naive_unpermute_grad.h"

static moeperm_golden_spec domain_spec(moeperm_op op, moeperm_dtype dtype, int64_t t, int64_t k,
                                       int64_t h, int64_t rows, moeperm_golden_routing routing)
{
    moeperm_golden_spec s = moeperm_golden_spec_default(op, dtype, t, k, h);
    s.num_rows = rows;
    s.routing = routing;
    s.probs_dtype = MOEPERM_FLOAT;
    s.seed = 7;
    snprintf(s.name, sizeof s.name, "domain");
    return s;
}

/* One case at the edge: its routing, sizes and the spec's edge fields. */
typedef struct edge {
    moeperm_golden_routing routing;
    int64_t t, k, rows, extra, num_topk;
    bool probs, huge, padded;
} edge;

static moeperm_golden_spec edge_spec(moeperm_op op, moeperm_dtype dtype, int64_t h, const edge *e)
{
    moeperm_golden_spec s = domain_spec(op, dtype, e->t, e->k, h, e->rows, e->routing);
    s.has_probs = e->probs && op != MOEPERM_OP_PERMUTE_GRAD;
    s.extra_indices = e->extra;
    s.num_topk = e->num_topk;
    s.huge_indices = e->huge;
    s.padded_mode = e->padded;
    return s;
}

static const moeperm_golden_tensor *tensor(const moeperm_golden_case *c, const char *name)
{
    const moeperm_golden_tensor *t = moeperm_golden_case_tensor_const(c, name);
    if (!t)
        fail_msg("the case has no %s", name);
    return t;
}

/* How many rows below R no slot names, and whether one is named twice. */
static void row_use(const int32_t *idx, int64_t slots, int64_t rows, int64_t *unnamed,
                    bool *twice)
{
    int *uses = calloc((size_t)(rows > 0 ? rows : 1), sizeof *uses);
    assert_non_null(uses);
    *twice = false;
    for (int64_t i = 0; i < slots; i++)
        if (idx[i] >= 0 && idx[i] < rows)
            *twice |= ++uses[idx[i]] > 1;
    *unnamed = 0;
    for (int64_t r = 0; r < rows; r++)
        *unnamed += uses[r] == 0;
    free(uses);
}

/* The huge entries: slot i = 1, 4, 7, ... holds 1.0f's bits, INT32_MAX,
 * R, +inf's bits, 2^24 in turn (docs/golden-format.md). */
static void assert_huge(const int32_t *idx, int64_t slots, int64_t rows)
{
    const int64_t huge[5] = {1065353216, INT32_MAX, rows, 2139095040, 16777216};
    for (int64_t i = 1; i < slots; i += 3)
        if (idx[i] != huge[(i / 3) % 5])
            fail_msg("sorted_indices[%lld] = %d, expected %lld", (long long)i, idx[i],
                     (long long)huge[(i / 3) % 5]);
}

static void test_permute_grad_cases_at_the_edge_are_the_naive_models(void **state)
{
    (void)state;
    const edge edges[] = {
        {MOEPERM_GOLDEN_ROUTING_REPEATS, 16, 4, 64, 0, 0, false, false, false},
        {MOEPERM_GOLDEN_ROUTING_REPEATS, 16, 4, 100, 0, 0, false, true, true},
        {MOEPERM_GOLDEN_ROUTING_SPARSE, 16, 4, 100, 0, 0, false, false, false},
        {MOEPERM_GOLDEN_ROUTING_ROUTED, 10, 4, -1, 3, 0, false, true, false},
        {MOEPERM_GOLDEN_ROUTING_RANDOM, 24, 1, 40, 0, -1, false, false, true},
    };
    for (size_t e = 0; e < sizeof edges / sizeof edges[0]; e++) {
        moeperm_golden_spec s = edge_spec(MOEPERM_OP_PERMUTE_GRAD, MOEPERM_BF16, 9, &edges[e]);
        moeperm_golden_case c = generated_case(&s, NULL);
        int64_t slots = s.tokens_num * s.top_k, rows = s.num_rows < 0 ? slots : s.num_rows;
        const moeperm_golden_tensor *g = tensor(&c, "permuted_output_grad"),
                                    *ix = tensor(&c, "sorted_indices"),
                                    *out = tensor(&c, "input_grad");
        assert_int_equal(c.attrs.top_k, edges[e].num_topk ? edges[e].num_topk : edges[e].k);
        assert_int_equal(c.attrs.padded_mode, edges[e].padded);
        assert_int_equal(c.recipe.huge_indices, edges[e].huge);
        assert_int_equal(ix->shape[0], slots + edges[e].extra);
        assert_int_equal(g->shape[0], rows);
        assert_int_equal(out->shape[0], s.tokens_num);
        const int32_t *idx = ix->data;
        int64_t unnamed;
        bool twice;
        row_use(idx, slots, rows, &unnamed, &twice);
        if (edges[e].routing == MOEPERM_GOLDEN_ROUTING_REPEATS)
            assert_true(twice && unnamed > 0);
        if (edges[e].routing == MOEPERM_GOLDEN_ROUTING_SPARSE)
            assert_true(!twice && unnamed == rows - slots);
        if (edges[e].huge)
            assert_huge(idx, slots, rows);
        for (int64_t i = 0; i < slots + edges[e].extra; i++) {
            bool huge = edges[e].huge && i % 3 == 1 && i < slots;
            assert_true(idx[i] >= 0 && (huge || idx[i] < rows));
        }
        uint16_t *want = calloc((size_t)(s.tokens_num * 9), sizeof *want);
        assert_non_null(want);
        naive_permute_grad(MOEPERM_BF16, g->data, rows, 9, idx, s.tokens_num, s.top_k, want);
        assert_memory_equal(want, out->data, out->bytes);
        free(want);
        moeperm_golden_case_free(&c);
    }
}

static void test_unpermute_cases_at_the_edge_are_the_naive_model(void **state)
{
    (void)state;
    const edge edges[] = {
        {MOEPERM_GOLDEN_ROUTING_REPEATS, 16, 4, 100, 0, 0, true, false, true},
        {MOEPERM_GOLDEN_ROUTING_SPARSE, 16, 4, 90, 7, 0, true, true, true},
        {MOEPERM_GOLDEN_ROUTING_REPEATS, 32, 1, 40, 0, 0, false, true, true},
    };
    for (size_t e = 0; e < sizeof edges / sizeof edges[0]; e++) {
        moeperm_golden_spec s = edge_spec(MOEPERM_OP_UNPERMUTE, MOEPERM_FLOAT16, 11, &edges[e]);
        moeperm_golden_case c = generated_case(&s, NULL);
        const moeperm_golden_tensor *x = tensor(&c, "permuted_tokens"),
                                    *ix = tensor(&c, "sorted_indices"),
                                    *out = tensor(&c, "unpermuted_tokens");
        const moeperm_golden_tensor *p = moeperm_golden_case_tensor_const(&c, "probs");
        assert_true(c.attrs.padded_mode);
        assert_int_equal(ix->shape[0], s.tokens_num * s.top_k + edges[e].extra);
        assert_int_equal(out->shape[0], s.tokens_num);
        uint16_t *want = calloc((size_t)(s.tokens_num * 11), sizeof *want);
        assert_non_null(want);
        naive_unpermute(MOEPERM_FLOAT16, x->data, edges[e].rows, 11, ix->data, s.tokens_num,
                        s.top_k, MOEPERM_FLOAT, p ? p->data : NULL, want);
        assert_memory_equal(want, out->data, out->bytes);
        free(want);
        moeperm_golden_case_free(&c);
    }
}

/* Rows no slot names keep the caller's bytes on the device; the golden
 * output starts as zeros, so they read +0 there. */
static void test_unpermute_grad_cases_at_the_edge_leave_unnamed_rows_zero(void **state)
{
    (void)state;
    const edge edges[] = {
        {MOEPERM_GOLDEN_ROUTING_SPARSE, 16, 4, 100, 0, 0, true, false, true},
        {MOEPERM_GOLDEN_ROUTING_SPARSE, 20, 1, 50, 3, 0, false, true, true},
        {MOEPERM_GOLDEN_ROUTING_ROUTED, 12, 4, -1, 9, 0, true, true, true},
    };
    for (size_t e = 0; e < sizeof edges / sizeof edges[0]; e++) {
        moeperm_golden_spec s = edge_spec(MOEPERM_OP_UNPERMUTE_GRAD, MOEPERM_BF16, 13, &edges[e]);
        moeperm_golden_case c = generated_case(&s, NULL);
        int64_t slots = s.tokens_num * s.top_k, rows = s.num_rows < 0 ? slots : s.num_rows;
        const moeperm_golden_tensor *x = tensor(&c, "permuted_tokens"),
                                    *g = tensor(&c, "unpermuted_tokens_grad"),
                                    *ix = tensor(&c, "sorted_indices"),
                                    *out = tensor(&c, "permuted_tokens_grad");
        const moeperm_golden_tensor *p = moeperm_golden_case_tensor_const(&c, "probs");
        int64_t unnamed;
        bool twice;
        row_use(ix->data, slots, rows, &unnamed, &twice);
        assert_false(twice);
        assert_true(unnamed > 0);
        uint16_t *want = calloc((size_t)(rows * 13), sizeof *want);
        float *want_probs = calloc((size_t)(slots > 0 ? slots : 1), sizeof *want_probs);
        assert_non_null(want);
        assert_non_null(want_probs);
        int64_t chunk = p ? naive_ug_chunk_for(s.tokens_num, s.top_k, 13, MOEPERM_BF16,
                                               MOEPERM_FLOAT, MOEPERM_CHIP_A2_UB_BYTES,
                                               MOEPERM_CHIP_A2_VECTOR_CORES)
                          : 1;
        naive_unpermute_grad(MOEPERM_BF16, MOEPERM_FLOAT, x->data, rows, 13, g->data,
                             s.tokens_num, ix->data, p ? p->data : NULL, s.top_k, chunk, want,
                             p ? want_probs : NULL);
        assert_memory_equal(want, out->data, out->bytes);
        if (p)
            assert_memory_equal(want_probs, tensor(&c, "probs_grad")->data,
                                (size_t)slots * sizeof *want_probs);
        /* The rows no slot names hold +0 in the golden output, though the
         * input holds values there. */
        const int32_t *idx = ix->data;
        const uint16_t *got = out->data, *in = x->data;
        for (int64_t r = 0; r < rows; r++) {
            bool named = false, nonzero_in = false;
            for (int64_t i = 0; i < slots && !named; i++)
                named = idx[i] == r;
            if (named)
                continue;
            for (int64_t h = 0; h < 13; h++) {
                assert_int_equal(got[r * 13 + h], 0);
                nonzero_in |= in[r * 13 + h] != 0;
            }
            assert_true(nonzero_in);
        }
        free(want);
        free(want_probs);
        moeperm_golden_case_free(&c);
    }
}

static void test_permute_tokens_of_rank_3_are_copied_by_their_rows(void **state)
{
    (void)state;
    moeperm_golden_spec s = domain_spec(MOEPERM_OP_PERMUTE, MOEPERM_BF16, 6, 4, 12, -1,
                                        MOEPERM_GOLDEN_ROUTING_ROUTED);
    s.hidden_outer = 3;
    s.num_out_tokens = -5;
    moeperm_golden_case c = generated_case(&s, NULL);
    const moeperm_golden_tensor *tokens = tensor(&c, "tokens"), *ids = tensor(&c, "indices"),
                                *out = tensor(&c, "permuted_tokens"),
                                *sorted = tensor(&c, "sorted_indices");
    assert_int_equal(tokens->ndim, 3);
    assert_int_equal(tokens->shape[1], 3);
    assert_int_equal(tokens->shape[2], 4);
    assert_int_equal(out->ndim, 3);
    assert_int_equal(out->shape[0], 19);
    assert_int_equal(out->shape[1], 3);
    assert_int_equal(out->shape[2], 4);
    int64_t wide[24];
    for (int i = 0; i < 24; i++)
        wide[i] = ((const int32_t *)ids->data)[i];
    uint16_t want[19 * 12];
    int32_t want_sorted[24];
    naive_permute(2, tokens->data, 6, 12, wide, 4, 19, want, want_sorted);
    assert_memory_equal(want, out->data, out->bytes);
    assert_memory_equal(want_sorted, sorted->data, sorted->bytes);
    moeperm_golden_case_free(&c);
}

/* Each edge survives the manifest: written, read back whole, the same. */
static void test_the_manifest_keeps_the_edge_as_given(void **state)
{
    (void)state;
    const char *root = scratch_root; /* scratch_setup() makes it */
    moeperm_golden_spec specs[4];
    specs[0] = domain_spec(MOEPERM_OP_PERMUTE_GRAD, MOEPERM_FLOAT, 8, 1, 5, 30,
                           MOEPERM_GOLDEN_ROUTING_REPEATS);
    specs[0].num_topk = -1;
    specs[0].huge_indices = true;
    specs[0].padded_mode = true;
    specs[1] = domain_spec(MOEPERM_OP_PERMUTE, MOEPERM_INT8, 5, 2, 8, -1,
                           MOEPERM_GOLDEN_ROUTING_ROUTED);
    specs[1].hidden_outer = 2;
    specs[2] = domain_spec(MOEPERM_OP_UNPERMUTE, MOEPERM_BF16, 6, 2, 5, 20,
                           MOEPERM_GOLDEN_ROUTING_SPARSE);
    specs[2].extra_indices = 4;
    specs[3] = domain_spec(MOEPERM_OP_UNPERMUTE_GRAD, MOEPERM_BF16, 6, 2, 5, 20,
                           MOEPERM_GOLDEN_ROUTING_SPARSE);
    snprintf(specs[3].chip, sizeof specs[3].chip, "Ascend910B4-1");
    specs[3].padded_mode = true;
    for (size_t i = 0; i < 4; i++) {
        moeperm_golden_case c = generated_case(&specs[i], NULL), back;
        char path[128], err[1024];
        snprintf(path, sizeof path, "%s/case%zu", root, i);
        if (moeperm_golden_case_write(path, &c, false, err, sizeof err) != 0)
            fail_msg("%s", err);
        if (moeperm_golden_case_read(path, MOEPERM_GOLDEN_LOAD_ALL, &back, err, sizeof err) != 0)
            fail_msg("%s", err);
        assert_same_case(&c, &back);
        assert_int_equal(back.recipe.huge_indices, specs[i].huge_indices);
        moeperm_golden_case_free(&back);
        moeperm_golden_case_free(&c);
    }
    /* The named chip is written as its name and its numbers. */
    char path[128];
    snprintf(path, sizeof path, "%s/case3/case.json", root);
    char *text = read_text(path);
    assert_non_null(strstr(text, "\"attrs\": {\"chip\": \"Ascend910B4-1\", \"ub_bytes\": 196352, "
                                 "\"vector_cores\": 40, \"padded_mode\": true}"));
    free(text);
    snprintf(path, sizeof path, "%s/case0/case.json", root);
    text = read_text(path);
    assert_non_null(strstr(text, "\"attrs\": {\"top_k\": -1, \"padded_mode\": true}"));
    assert_non_null(strstr(text, "\"huge_indices\": true"));
    free(text);
}

/* A chip's name and numbers that disagree are refused by the writer as
 * the reader refuses them, and nothing is written. */
static void test_the_writer_refuses_a_chip_whose_name_and_numbers_disagree(void **state)
{
    (void)state;
    const char *root = scratch_root; /* scratch_setup() makes it */
    moeperm_golden_spec s = domain_spec(MOEPERM_OP_UNPERMUTE_GRAD, MOEPERM_BF16, 4, 2, 5, -1,
                                        MOEPERM_GOLDEN_ROUTING_ROUTED);
    moeperm_golden_case c = generated_case(&s, NULL);
    char path[128], err[1024];
    struct {
        const char *name;
        int64_t ub, cores;
        const char *sentence;
    } bad[] = {
        {"Ascend910B3", 196352, 48,
         "attrs.chip is \"Ascend910B3\", a chip of 196352 unified-buffer bytes and 40 vector "
         "cores, but attrs.ub_bytes is 196352 and attrs.vector_cores 48"},
        {"Ascend910B3", 0, 0, "(0: absent; a named chip gives both)"},
        {"Ascend310P3", 262144, 8, "attrs.chip is \"Ascend310P3\", which is not a chip moeperm "
                                   "knows (Ascend910B1 "},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(c.attrs.chip, sizeof c.attrs.chip, "%s", bad[i].name);
        c.attrs.ub_bytes = bad[i].ub;
        c.attrs.vector_cores = bad[i].cores;
        snprintf(path, sizeof path, "%s/refused%zu", root, i);
        err[0] = '\0';
        assert_int_equal(moeperm_golden_case_write(path, &c, false, err, sizeof err), -1);
        if (!strstr(err, bad[i].sentence) || strncmp(err, path, strlen(path)) != 0)
            fail_msg("\"%s\" does not name %s and say \"%s\"", err, path, bad[i].sentence);
        struct stat st;
        assert_int_not_equal(lstat(path, &st), 0);
    }
    moeperm_golden_case_free(&c);
}

static void test_the_spec_refuses_what_the_generator_cannot_make(void **state)
{
    (void)state;
    struct {
        moeperm_op op;
        int64_t k, rows;
        moeperm_golden_routing routing;
        int64_t extra, num_topk, outer;
        bool huge, padded, probs;
        const char *chip;
        int64_t cores;
        const char *sentence;
    } bad[] = {
        {MOEPERM_OP_UNPERMUTE_GRAD, 2, -1, MOEPERM_GOLDEN_ROUTING_REPEATS, 0, 0, 0, false,
         false, true, "", 0, "routing repeats names rows twice, which MoeTokenUnpermuteGrad"},
        {MOEPERM_OP_PERMUTE_GRAD, 2, 7, MOEPERM_GOLDEN_ROUTING_SPARSE, 0, 0, 0, false, false,
         false, "", 0, "routing sparse gives every slot its own row, but num_rows 7 is below "
                       "tokens_num*top_k = 8"},
        {MOEPERM_OP_PERMUTE, 2, -1, MOEPERM_GOLDEN_ROUTING_REPEATS, 0, 0, 0, false, false,
         false, "", 0, "routing repeats makes sorted_indices, which MoeTokenPermute computes"},
        {MOEPERM_OP_PERMUTE_GRAD, 2, 16777217, MOEPERM_GOLDEN_ROUTING_ROUTED, 0, 0, 0, true,
         false, false, "", 0, "huge_indices needs num_rows at most 16777216"},
        {MOEPERM_OP_PERMUTE_GRAD, 2, -1, MOEPERM_GOLDEN_ROUTING_ROUTED, 2, 0, 0, false, false,
         false, "", 0, "extra_indices is 2, expected below top_k"},
        {MOEPERM_OP_UNPERMUTE, 1, -1, MOEPERM_GOLDEN_ROUTING_ROUTED, 1, 0, 0, false, false,
         false, "", 0, "extra_indices is 1, expected 0: without probs MoeTokenUnpermute"},
        {MOEPERM_OP_PERMUTE_GRAD, 2, -1, MOEPERM_GOLDEN_ROUTING_ROUTED, 0, -1, 0, false, false,
         false, "", 0, "num_topk is -1, expected 0 (top_k) or, for MoeTokenPermuteGrad with "
                       "top_k 1, -1"},
        {MOEPERM_OP_PERMUTE, 2, -1, MOEPERM_GOLDEN_ROUTING_ROUTED, 0, 0, 5, false, false, false,
         "", 0, "hidden_outer is 5, expected 0, or for MoeTokenPermute a divisor of hidden_size 6"},
        {MOEPERM_OP_PERMUTE, 2, -1, MOEPERM_GOLDEN_ROUTING_ROUTED, 0, 0, 0, false, true, false,
         "", 0, "padded_mode is true, which MoeTokenPermute refuses"},
        {MOEPERM_OP_UNPERMUTE_GRAD, 2, -1, MOEPERM_GOLDEN_ROUTING_ROUTED, 0, 0, 0, false, false,
         true, "Ascend950", 0, "chip is \"Ascend950\", expected one of Ascend910B1"},
        {MOEPERM_OP_UNPERMUTE_GRAD, 2, -1, MOEPERM_GOLDEN_ROUTING_ROUTED, 0, 0, 0, false, false,
         true, "Ascend910B3", 48, "chip Ascend910B3 has 196352 unified-buffer bytes and 40 "
                                  "vector cores, but vector_cores 48 is given beside it"},
        {MOEPERM_OP_UNPERMUTE, 2, -1, MOEPERM_GOLDEN_ROUTING_ROUTED, 0, 0, 0, false, false,
         true, "Ascend910B3", 0, "chip \"Ascend910B3\" is MoeTokenUnpermuteGrad's"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        moeperm_golden_spec s = domain_spec(bad[i].op, MOEPERM_BF16, 4, bad[i].k, 6, bad[i].rows,
                                            bad[i].routing);
        s.has_probs = bad[i].probs;
        s.extra_indices = bad[i].extra;
        s.num_topk = bad[i].num_topk;
        s.hidden_outer = bad[i].outer;
        s.huge_indices = bad[i].huge;
        s.padded_mode = bad[i].padded;
        s.vector_cores = bad[i].cores;
        snprintf(s.chip, sizeof s.chip, "%s", bad[i].chip);
        char err[512] = "";
        assert_int_equal(moeperm_golden_spec_check(&s, err, sizeof err), -1);
        if (!strstr(err, bad[i].sentence))
            fail_msg("case %zu: \"%s\" lacks \"%s\"", i, err, bad[i].sentence);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_permute_grad_cases_at_the_edge_are_the_naive_models),
        cmocka_unit_test(test_unpermute_cases_at_the_edge_are_the_naive_model),
        cmocka_unit_test(test_unpermute_grad_cases_at_the_edge_leave_unnamed_rows_zero),
        cmocka_unit_test(test_permute_tokens_of_rank_3_are_copied_by_their_rows),
        cmocka_unit_test(test_the_manifest_keeps_the_edge_as_given),
        cmocka_unit_test(test_the_writer_refuses_a_chip_whose_name_and_numbers_disagree),
        cmocka_unit_test(test_the_spec_refuses_what_the_generator_cannot_make),
    };
    return cmocka_run_group_tests(tests, scratch_setup, scratch_teardown);
}
