/*
 * The words the tool, the Python package and the manifests share, written
 * once in the golden library: the operators' short names parse both ways
 * (and the vendor's names still parse); the command a custom case records
 * spells every option out under its documented name (--top-k, never the
 * old --topk), resolves the defaults, and quotes a name as one shell word;
 * a suite's command names the suite and the seed; and a manifest written
 * with the old spelling in its command still reads, the command kept as it
 * was (nothing parses it).
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

static void test_short_names_parse_both_ways_and_vendor_names_still_parse(void **state)
{
    (void)state;
    static const struct {
        const char *short_name, *vendor;
        moeperm_op op;
    } names[] = {
        {"permute-grad", "MoeTokenPermuteGrad", MOEPERM_OP_PERMUTE_GRAD},
        {"permute", "MoeTokenPermute", MOEPERM_OP_PERMUTE},
        {"unpermute", "MoeTokenUnpermute", MOEPERM_OP_UNPERMUTE},
        {"unpermute-grad", "MoeTokenUnpermuteGrad", MOEPERM_OP_UNPERMUTE_GRAD},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        assert_string_equal(moeperm_golden_op_short_name(names[i].op), names[i].short_name);
        assert_int_equal(moeperm_golden_op_parse(names[i].short_name), names[i].op);
        assert_int_equal(moeperm_golden_op_parse(names[i].vendor), names[i].op);
    }
    assert_null(moeperm_golden_op_short_name((moeperm_op)99));
    assert_int_equal(moeperm_golden_op_parse("permutegrad"), 0);
    assert_int_equal(moeperm_golden_op_parse("Permute"), 0);
    assert_int_equal(moeperm_golden_op_parse(""), 0);
}

/* The command of spec against the one expected, word for word. */
static void assert_command(const moeperm_golden_spec *spec, const char *expected)
{
    char *command = moeperm_golden_spec_command(spec);
    assert_non_null(command);
    if (strcmp(command, expected) != 0)
        fail_msg("the command is\n  %s\nexpected\n  %s", command, expected);
    free(command);
}

static void test_custom_command_spells_every_option_by_its_documented_name(void **state)
{
    (void)state;
    moeperm_golden_spec s =
        moeperm_golden_spec_default(MOEPERM_OP_PERMUTE_GRAD, MOEPERM_BF16, 4, 3, 5);
    snprintf(s.name, sizeof s.name, "pg");
    assert_command(&s, "moeperm golden --out .. --tokens 4 --top-k 3 --hidden 5 --dtype bf16 "
                       "--rows 12 --experts 64 --hot 50 --values normal --routing routed "
                       "--seed 1 --name pg --force");

    s = moeperm_golden_spec_default(MOEPERM_OP_PERMUTE, MOEPERM_INT8, 16, 40, 3);
    snprintf(s.name, sizeof s.name, "p");
    s.num_out_tokens = -5;
    s.index_dtype = MOEPERM_INT64;
    s.sentinels = true;
    s.hot_percent = 80;
    s.seed = 9;
    assert_command(&s, "moeperm golden --out .. --op MoeTokenPermute --num-out-tokens -5 "
                       "--index-dtype int64 --sentinels --tokens 16 --top-k 40 --hidden 3 "
                       "--dtype int8 --rows 640 --experts 80 --hot 80 --values normal "
                       "--routing routed --seed 9 --name p --force");

    s = moeperm_golden_spec_default(MOEPERM_OP_UNPERMUTE, MOEPERM_FLOAT16, 7, 1, 9);
    snprintf(s.name, sizeof s.name, "u");
    s.has_probs = false;
    s.num_rows = 3;
    s.num_experts = 8;
    s.values = MOEPERM_GOLDEN_VALUES_BITS;
    s.routing = MOEPERM_GOLDEN_ROUTING_RANDOM;
    assert_command(&s, "moeperm golden --out .. --op MoeTokenUnpermute --no-probs --tokens 7 "
                       "--top-k 1 --hidden 9 --dtype float16 --rows 3 --experts 8 --hot 50 "
                       "--values bits --routing random --seed 1 --name u --force");

    /* A chip named by one field gets the other from the A2 (48 cores). */
    s = moeperm_golden_spec_default(MOEPERM_OP_UNPERMUTE_GRAD, MOEPERM_BF16, 1, 2, 9001);
    snprintf(s.name, sizeof s.name, "it's a \"$(name)\"");
    s.probs_dtype = MOEPERM_FLOAT;
    s.probs_values = MOEPERM_GOLDEN_VALUES_CANCEL;
    s.ub_bytes = 261888;
    assert_command(&s, "moeperm golden --out .. --op MoeTokenUnpermuteGrad --probs-dtype float32 "
                       "--probs-values cancel --ub-bytes 261888 --vector-cores 48 --tokens 1 "
                       "--top-k 2 --hidden 9001 --dtype bf16 --rows 2 --experts 64 --hot 50 "
                       "--values normal --routing routed --seed 1 "
                       "--name 'it'\\''s a \"$(name)\"' --force");
}

static void test_suite_command_names_the_suite_and_the_seed(void **state)
{
    (void)state;
    const moeperm_golden_suite *suite = moeperm_golden_suite_find("rounding");
    assert_non_null(suite);
    char *command = moeperm_golden_suite_command(suite, UINT64_MAX);
    assert_non_null(command);
    assert_string_equal(command, "moeperm golden --out ../.. --suite rounding "
                                 "--seed 18446744073709551615 --force");
    free(command);
}

static void test_manifest_with_the_old_topk_command_still_reads(void **state)
{
    (void)state;
    static const char old[] = "moeperm golden --out .. --tokens 4 --topk 3 --hidden 5 --dtype "
                              "bf16 --rows 12 --experts 64 --hot 50 --values normal --routing "
                              "routed --seed 1 --name old --force";
    char dir[] = "/tmp/moeperm-test-commands-XXXXXX", path[128], err[512];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/old", dir);
    moeperm_golden_spec s =
        moeperm_golden_spec_default(MOEPERM_OP_PERMUTE_GRAD, MOEPERM_BF16, 4, 3, 5);
    snprintf(s.name, sizeof s.name, "old");
    moeperm_golden_case c = generated_case(&s, old), back;
    if (moeperm_golden_case_write(path, &c, false, err, sizeof err) != 0)
        fail_msg("%s", err);
    if (moeperm_golden_case_read(path, MOEPERM_GOLDEN_LOAD_ALL, &back, err, sizeof err) != 0)
        fail_msg("%s", err);
    assert_string_equal(back.command, old);
    assert_same_case(&c, &back);
    moeperm_golden_case_free(&back);
    moeperm_golden_case_free(&c);
    char rm[160];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    assert_int_equal(system(rm), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_short_names_parse_both_ways_and_vendor_names_still_parse),
        cmocka_unit_test(test_custom_command_spells_every_option_by_its_documented_name),
        cmocka_unit_test(test_suite_command_names_the_suite_and_the_seed),
        cmocka_unit_test(test_manifest_with_the_old_topk_command_still_reads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
