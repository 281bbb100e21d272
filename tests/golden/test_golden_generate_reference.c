/*
 * Every output a generated case holds is what a whole run of libmoeperm's
 * public API gives for the case's inputs (moeperm_golden_run_reference()
 * into buffers of the test's own), whether the case is made in memory
 * (moeperm_golden_generate()) or made and written at once
 * (moeperm_golden_generate_write(), read back here).  The generator makes
 * MoeTokenPermute's permuted_tokens itself, from the routing alone, and
 * while it writes, the writer's hashing thread makes rows too; neither may
 * change a byte.  Sizes from one row to tensors of several MiB (written
 * with O_DIRECT, in many stretches).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <moeperm/golden.h>

#include "golden_util.h"

/* Asserts that c's outputs and exact values are, byte for byte, what the
 * reference makes of c's inputs in zeroed buffers (what the operator
 * leaves untouched reads 0 in a case). */
static void assert_outputs_are_the_reference(const moeperm_golden_case *c)
{
    void *outputs[MOEPERM_GOLDEN_MAX_TENSORS] = {0}, *exact[MOEPERM_GOLDEN_MAX_TENSORS] = {0};
    const moeperm_golden_tensor *made[2][MOEPERM_GOLDEN_MAX_TENSORS];
    size_t n[2] = {0, 0};
    for (size_t i = 0; i < c->tensor_count; i++) {
        const moeperm_golden_tensor *t = &c->tensors[i];
        int kind = t->role == MOEPERM_GOLDEN_ROLE_OUTPUT ? 0
                   : t->role == MOEPERM_GOLDEN_ROLE_EXACT ? 1
                                                          : -1;
        if (kind < 0)
            continue;
        void *buffer = calloc(1, t->bytes ? t->bytes : 1);
        assert_non_null(buffer);
        (kind == 0 ? outputs : exact)[n[kind]] = buffer;
        made[kind][n[kind]++] = t;
    }
    char err[512];
    moeperm_status st = moeperm_golden_run_reference(c, outputs, n[1] ? exact : NULL, err,
                                                     sizeof err);
    if (st != MOEPERM_SUCCESS)
        fail_msg("%s: the reference refuses its own case: %s", c->name, err);
    for (int kind = 0; kind < 2; kind++)
        for (size_t i = 0; i < n[kind]; i++) {
            const moeperm_golden_tensor *t = made[kind][i];
            void *want = (kind == 0 ? outputs : exact)[i];
            if (t->bytes && memcmp(t->data, want, t->bytes) != 0) {
                size_t at = 0;
                while (((const uint8_t *)t->data)[at] == ((const uint8_t *)want)[at])
                    at++;
                fail_msg("%s: %s differs from the reference's at byte %zu of %zu", c->name,
                         t->name, at, t->bytes);
            }
            free(want);
        }
}

/* The case of spec made both ways, each checked against the reference,
 * and the written one the same as the one made in memory. */
static void check_both_ways(moeperm_golden_spec *spec)
{
    moeperm_golden_spec_default_name(spec);
    moeperm_golden_case memory = generated_case(spec, NULL);
    assert_outputs_are_the_reference(&memory);

    char dir[4200], err[1024];
    snprintf(dir, sizeof dir, "%s/%s", scratch_root, spec->name);
    if (moeperm_golden_generate_write(spec, NULL, dir, true, err, sizeof err) != 0)
        fail_msg("cannot write %s: %s", spec->name, err);
    moeperm_golden_case written;
    if (moeperm_golden_case_read(dir, MOEPERM_GOLDEN_LOAD_ALL, &written, err, sizeof err) != 0)
        fail_msg("cannot read %s back: %s", dir, err);
    assert_same_case(&memory, &written);
    assert_outputs_are_the_reference(&written);
    moeperm_golden_case_free(&written);
    moeperm_golden_case_free(&memory);
}

static void test_permute_cases_are_the_reference(void **state)
{
    (void)state;
    struct {
        moeperm_dtype dtype, index_dtype;
        int64_t tokens, top_k, hidden, num_out, hidden_outer;
        bool sentinels;
    } shapes[] = {
        {MOEPERM_BF16, MOEPERM_INT32, 300, 6, 700, 0, 0, false},
        {MOEPERM_BF16, MOEPERM_INT32, 300, 6, 700, -123, 0, false},
        {MOEPERM_FLOAT16, MOEPERM_INT32, 300, 6, 700, 777, 0, false},
        {MOEPERM_FLOAT, MOEPERM_INT32, 64, 3, 70, 0, 7, false},
        {MOEPERM_INT8, MOEPERM_INT32, 129, 4, 33, -1, 0, false},
        {MOEPERM_BF16, MOEPERM_INT64, 100, 5, 48, 0, 0, true},
        {MOEPERM_FLOAT, MOEPERM_INT32, 1, 1, 1, 0, 0, false},
        /* tensors of several MiB: O_DIRECT, many stretches */
        {MOEPERM_BF16, MOEPERM_INT32, 512, 8, 1024, 0, 0, false},
        {MOEPERM_FLOAT, MOEPERM_INT64, 700, 3, 1500, -1000, 0, true},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        moeperm_golden_spec s =
            moeperm_golden_spec_default(MOEPERM_OP_PERMUTE, shapes[i].dtype, shapes[i].tokens,
                                        shapes[i].top_k, shapes[i].hidden);
        s.index_dtype = shapes[i].index_dtype;
        s.num_out_tokens = shapes[i].num_out;
        s.hidden_outer = shapes[i].hidden_outer;
        s.sentinels = shapes[i].sentinels;
        s.seed = 11 + i;
        check_both_ways(&s);
    }
}

/* The other three operators, with inputs of several MiB that the
 * writer's thread helps to make. */
static void test_other_operators_cases_are_the_reference(void **state)
{
    (void)state;
    const moeperm_op ops[3] = {MOEPERM_OP_PERMUTE_GRAD, MOEPERM_OP_UNPERMUTE,
                               MOEPERM_OP_UNPERMUTE_GRAD};
    for (int i = 0; i < 3; i++) {
        moeperm_golden_spec s = moeperm_golden_spec_default(ops[i], MOEPERM_BF16, 384, 4, 1536);
        if (ops[i] != MOEPERM_OP_PERMUTE_GRAD) {
            s.has_probs = true;
            s.probs_dtype = MOEPERM_FLOAT;
        }
        s.seed = 5;
        check_both_ways(&s);
        /* Rows no slot names: read by several slots where the operator
         * takes that (MoeTokenUnpermuteGrad refuses it), else apart. */
        bool repeats = ops[i] != MOEPERM_OP_UNPERMUTE_GRAD;
        s.routing = repeats ? MOEPERM_GOLDEN_ROUTING_REPEATS : MOEPERM_GOLDEN_ROUTING_SPARSE;
        s.num_rows = repeats ? 1000 : 2000;
        check_both_ways(&s);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_permute_cases_are_the_reference),
        cmocka_unit_test(test_other_operators_cases_are_the_reference),
    };
    return cmocka_run_group_tests(tests, scratch_setup, scratch_teardown);
}
