/*
 * The JSON report parses back (strict JSON, valid UTF-8 even for a case
 * named with odd bytes) with every key docs/judging.md lists, per-case
 * verdicts that follow the outputs and the errors, counts equal to the
 * comparator's, and a summary that adds up.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <json-c/json.h>

#include "golden/judge/report_json.h"

enum { T = 16, H = 24 };

static json_object *parse_strict(const char *s)
{
    json_tokener *tok = json_tokener_new();
    assert_non_null(tok);
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
    json_object *doc = json_tokener_parse_ex(tok, s, (int)strlen(s));
    if (!doc || json_tokener_get_error(tok) != json_tokener_success)
        fail_msg("not strict JSON: %s", json_tokener_error_desc(json_tokener_get_error(tok)));
    json_tokener_free(tok);
    return doc;
}

static json_object *key(json_object *obj, const char *name)
{
    json_object *v;
    if (!json_object_object_get_ex(obj, name, &v))
        fail_msg("no key \"%s\"", name);
    return v;
}

static int64_t int_at(json_object *obj, const char *name)
{
    json_object *v = key(obj, name);
    assert_true(json_object_is_type(v, json_type_int));
    return json_object_get_int64(v);
}

static const char *string_at(json_object *obj, const char *name)
{
    json_object *v = key(obj, name);
    assert_true(json_object_is_type(v, json_type_string));
    return json_object_get_string(v);
}

static void fill(uint16_t *v, uint16_t base)
{
    for (int i = 0; i < T * H; i++)
        v[i] = (uint16_t)(base + i % 97);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *buf = calloc(1, 1 << 20);
    assert_non_null(buf);
    size_t n = fread(buf, 1, (1 << 20) - 1, f);
    fclose(f);
    assert_true(n > 0);
    return buf;
}

static void test_document_parses_back_with_every_key_and_counts(void **state)
{
    (void)state;
    static uint16_t expected[T * H], different[T * H], near[T * H];
    fill(expected, 0x3f80);
    memcpy(different, expected, sizeof expected);
    memcpy(near, expected, sizeof expected);
    for (int t = 4; t < 8; t++)
        memset(different + t * H, 0, H * sizeof(uint16_t)); /* tokens 4-7 left as zeros */
    near[5] ^= 1;                                           /* 1 ulp */

    moeperm_golden_compare_result same_r, diff_r, close_r;
    assert_int_equal(moeperm_golden_compare(MOEPERM_BF16, T, H, expected, expected, false, &same_r), 0);
    assert_int_equal(moeperm_golden_compare(MOEPERM_BF16, T, H, expected, different, false, &diff_r), 0);
    assert_int_equal(moeperm_golden_compare(MOEPERM_BF16, T, H, expected, near, false, &close_r), 0);
    golden_stats diff_s, same_s;
    golden_stats_compute(MOEPERM_BF16, expected, different, T * H, &diff_s);
    golden_stats_compute(MOEPERM_BF16, expected, expected, T * H, &same_s);
    golden_diag_tensor out = {"input_grad", MOEPERM_BF16, 2, {T, H}, expected};
    golden_diagnosis diag;
    char err[512];
    assert_int_equal(golden_diagnose(NULL, &out, different, false, &diag, err, sizeof err), 0);
    assert_true(diag.count > 0);

    moeperm_golden_json_report *r = moeperm_golden_json_report_new();
    assert_non_null(r);
    /* same */
    assert_int_equal(moeperm_golden_json_report_add_case(r, "suite/same", "MoeTokenPermuteGrad"), 0);
    golden_json_output o = {"input_grad",        MOEPERM_BF16, &same_r,
                            MOEPERM_GOLDEN_VERDICT_SAME, NULL,         &same_s};
    assert_int_equal(golden_json_report_add_output(r, &o), 0);
    /* different, with a diagnosis */
    assert_int_equal(moeperm_golden_json_report_add_case(r, "suite/diff\xff", "MoeTokenPermuteGrad"), 0);
    o = (golden_json_output){
        "input_grad", MOEPERM_BF16, &diff_r, moeperm_golden_compare_verdict(&diff_r, 1), &diag, &diff_s};
    assert_int_equal(golden_json_report_add_output(r, &o), 0);
    /* within tolerance */
    assert_int_equal(moeperm_golden_json_report_add_case(r, "suite/close", "MoeTokenPermuteGrad"), 0);
    o = (golden_json_output){
        "input_grad", MOEPERM_BF16, &close_r, moeperm_golden_compare_verdict(&close_r, 1), NULL, NULL};
    assert_int_equal(golden_json_report_add_output(r, &o), 0);
    /* an error, before anything was compared */
    assert_int_equal(moeperm_golden_json_report_add_case(r, "suite/broken", NULL), 0);
    assert_int_equal(moeperm_golden_json_report_set_error(r, "outputs/suite/broken/input_grad.bin is "
                                                     "missing"),
                     0);

    char path[] = "/tmp/moeperm-test-report-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(moeperm_golden_json_report_write_path(r, path, err, sizeof err), 0);
    char *textual = slurp(path);
    unlink(path);
    json_object *doc = parse_strict(textual);

    assert_string_equal(string_at(doc, "format"), GOLDEN_REPORT_FORMAT);
    json_object *summary = key(doc, "summary");
    assert_int_equal(int_at(summary, "cases"), 4);
    assert_int_equal(int_at(summary, "same"), 1);
    assert_int_equal(int_at(summary, "within_tolerance"), 1);
    assert_int_equal(int_at(summary, "different"), 1);
    assert_int_equal(int_at(summary, "error"), 1);

    json_object *cases = key(doc, "cases");
    assert_int_equal(json_object_array_length(cases), 4);
    static const char *const verdicts[] = {"same", "different", "within-tolerance", "error"};
    for (size_t i = 0; i < 4; i++)
        assert_string_equal(string_at(json_object_array_get_idx(cases, i), "verdict"), verdicts[i]);

    json_object *c1 = json_object_array_get_idx(cases, 1);
    assert_string_equal(string_at(c1, "case"), "suite/diff\\xff");
    assert_string_equal(string_at(c1, "op"), "MoeTokenPermuteGrad");
    json_object *g = key(key(c1, "outputs"), "input_grad");
    assert_string_equal(string_at(g, "dtype"), "bf16");
    assert_string_equal(string_at(g, "verdict"), "different");
    assert_int_equal(int_at(g, "elements"), T * H);
    assert_int_equal(int_at(g, "differ"), diff_r.differing);
    assert_int_equal(int_at(g, "nan_mismatch"), 0);
    assert_int_equal(int_at(g, "max_ulp"), diff_r.max_ulp);
    json_object *first = key(g, "first");
    assert_int_equal(json_object_array_length(first), diff_r.first_count);
    json_object *f0 = json_object_array_get_idx(first, 0);
    assert_int_equal(json_object_get_int(json_object_array_get_idx(key(f0, "index"), 0)), 4);
    assert_int_equal(json_object_get_int(json_object_array_get_idx(key(f0, "index"), 1)), 0);
    char bits[8];
    snprintf(bits, sizeof bits, "0x%04x", expected[4 * H]);
    assert_string_equal(string_at(f0, "expected"), bits);
    assert_string_equal(string_at(f0, "actual"), "0x0000");
    assert_true(json_object_get_double(key(f0, "actual_value")) == 0.0);
    json_object *ranges = key(g, "ranges");
    assert_string_equal(string_at(ranges, "text"), diff_r.where);
    assert_string_equal(diff_r.where, "tokens 4-7: all columns");
    json_object *g0 = json_object_array_get_idx(key(ranges, "groups"), 0);
    assert_string_equal(string_at(g0, "columns"), "all");
    assert_int_equal(int_at(g0, "row_count"), 4);
    assert_int_equal(int_at(g0, "rows_listed"), 4);
    assert_int_equal(int_at(g0, "elements"), 4 * H);
    assert_int_equal(int_at(g0, "column_first"), 0);
    assert_int_equal(int_at(g0, "column_last"), H - 1);
    assert_int_equal(json_object_array_length(key(g0, "column_ranges")), 0);
    json_object *span = json_object_array_get_idx(key(g0, "rows"), 0);
    assert_int_equal(int_at(span, "first"), 4);
    assert_int_equal(int_at(span, "last"), 7);
    assert_int_equal(int_at(span, "step"), 1);
    assert_int_equal(int_at(ranges, "rows_elsewhere"), 0);
    json_object *dg = key(g, "diagnosis");
    assert_int_equal(json_object_array_length(dg), diag.count);
    json_object *d0 = json_object_array_get_idx(dg, 0);
    assert_string_equal(string_at(d0, "id"), "unwritten");
    assert_string_equal(string_at(d0, "detail"), diag.finding[0].detail);
    assert_int_equal(int_at(d0, "explained"), diff_r.differing);
    assert_int_equal(int_at(d0, "contradicted"), 0);
    assert_true(json_object_get_boolean(key(d0, "exact")));
    json_object *st = key(g, "stats");
    assert_int_equal(int_at(st, "finite"), T * H);
    assert_true(json_object_get_double(key(st, "max_abs_error")) == diff_s.max_abs_error);
    assert_true(json_object_get_double(key(st, "rmse")) == diff_s.rmse);
    (void)key(st, "max_rel_error");
    (void)key(st, "cosine");
    (void)key(st, "mare");
    (void)key(st, "mere");

    /* the same case: no ranges, an empty diagnosis, exact statistics */
    json_object *s0 = key(key(json_object_array_get_idx(cases, 0), "outputs"), "input_grad");
    assert_true(json_object_is_type(key(s0, "ranges"), json_type_null));
    assert_int_equal(json_object_array_length(key(s0, "diagnosis")), 0);
    assert_int_equal(json_object_array_length(key(s0, "first")), 0);
    assert_true(json_object_get_double(key(key(s0, "stats"), "cosine")) == 1.0);
    /* no statistics asked for: null */
    json_object *w0 = key(key(json_object_array_get_idx(cases, 2), "outputs"), "input_grad");
    assert_true(json_object_is_type(key(w0, "stats"), json_type_null));
    assert_int_equal(int_at(w0, "max_ulp"), 1);
    /* the error */
    json_object *e = json_object_array_get_idx(cases, 3);
    assert_string_equal(string_at(e, "error"), "outputs/suite/broken/input_grad.bin is missing");
    assert_true(json_object_is_type(key(e, "op"), json_type_null));
    assert_int_equal(json_object_object_length(key(e, "outputs")), 0);

    json_object_put(doc);
    free(textual);
    moeperm_golden_json_report_free(r);
    moeperm_golden_compare_free(&same_r);
    moeperm_golden_compare_free(&diff_r);
    moeperm_golden_compare_free(&close_r);
}

/* The document j writes to a stream, parsed back strictly. */
static json_object *written(const moeperm_golden_json_report *j)
{
    FILE *f = tmpfile();
    assert_non_null(f);
    char err[256];
    assert_int_equal(golden_json_report_write(j, f, err, sizeof err), 0);
    rewind(f);
    static char buf[1 << 16];
    memset(buf, 0, sizeof buf);
    assert_true(fread(buf, 1, sizeof buf - 1, f) > 0);
    fclose(f);
    return parse_strict(buf);
}

static void test_unrepresentable_numbers_are_null_and_streams_work(void **state)
{
    (void)state;
    float e[4] = {0, 0, NAN, 1}, a[4] = {0, 0, 1, 1};
    moeperm_golden_compare_result r;
    assert_int_equal(moeperm_golden_compare(MOEPERM_FLOAT, 1, 4, e, a, false, &r), 0);
    golden_stats s;
    golden_stats_compute(MOEPERM_FLOAT, e, e, 2, &s); /* zeros: max_rel_error is NaN */
    moeperm_golden_json_report *j = moeperm_golden_json_report_new();
    assert_non_null(j);
    assert_int_equal(moeperm_golden_json_report_add_case(j, "c", "op"), 0);
    golden_json_output o = {"y", MOEPERM_FLOAT, &r, moeperm_golden_compare_verdict(&r, 0), NULL, &s};
    assert_int_equal(golden_json_report_add_output(j, &o), 0);
    json_object *doc = written(j);
    json_object *y = key(key(json_object_array_get_idx(key(doc, "cases"), 0), "outputs"), "y");
    assert_string_equal(string_at(y, "verdict"), "different");
    json_object *f0 = json_object_array_get_idx(key(y, "first"), 0);
    assert_string_equal(string_at(f0, "expected"), "0x7fc00000");
    assert_true(json_object_is_type(key(f0, "expected_value"), json_type_null));
    assert_true(json_object_is_type(key(key(y, "stats"), "max_rel_error"), json_type_null));
    json_object_put(doc);
    moeperm_golden_json_report_free(j);
    moeperm_golden_compare_free(&r);

    /* nothing open: refused */
    j = moeperm_golden_json_report_new();
    assert_int_equal(moeperm_golden_json_report_set_error(j, "x"), -1);
    assert_int_equal(golden_json_report_add_output(j, &o), -1);
    moeperm_golden_json_report_free(j);
}

/* A missing output, a bad case and a backend failure each counted under
 * moeperm check's table's words, per suite too; int32 bits with 8 hex
 * digits, as the text report writes them. */
static void test_failures_suites_and_int32_bits(void **state)
{
    (void)state;
    int32_t e[2] = {22, 7}, a[2] = {23, 7};
    moeperm_golden_compare_result r;
    assert_int_equal(moeperm_golden_compare(MOEPERM_INT32, 2, 1, e, a, false, &r), 0);
    moeperm_golden_json_report *j = moeperm_golden_json_report_new();
    assert_non_null(j);
    assert_int_equal(moeperm_golden_json_report_add_case(j, "a/one", "MoeTokenPermute"), 0);
    golden_json_output o = {"sorted_indices", MOEPERM_INT32, &r,
                            moeperm_golden_compare_verdict(&r, 0), NULL, NULL};
    assert_int_equal(golden_json_report_add_output(j, &o), 0);
    assert_int_equal(moeperm_golden_json_report_add_case(j, "a/two", "MoeTokenPermute"), 0);
    assert_int_equal(moeperm_golden_json_report_set_failure(j, MOEPERM_GOLDEN_FAILURE_MISSING,
                                                            "no output file x"), 0);
    assert_int_equal(moeperm_golden_json_report_add_case(j, "b/three", NULL), 0);
    assert_int_equal(moeperm_golden_json_report_set_failure(j, MOEPERM_GOLDEN_FAILURE_BAD_INPUT,
                                                            "bad case"), 0);
    assert_int_equal(moeperm_golden_json_report_add_case(j, "b/four", "MoeTokenPermute"), 0);
    assert_int_equal(moeperm_golden_json_report_set_error(j, "backend"), 0);
    moeperm_golden_json_report_note_left_out(j, 5);
    json_object *doc = written(j);
    json_object *cases = key(doc, "cases");
    json_object *f0 = json_object_array_get_idx(
        key(key(key(json_object_array_get_idx(cases, 0), "outputs"), "sorted_indices"), "first"),
        0);
    assert_string_equal(string_at(f0, "expected"), "0x00000016");
    assert_string_equal(string_at(f0, "actual"), "0x00000017");
    static const char *const verdicts[] = {"different", "missing", "error", "error"};
    for (size_t i = 0; i < 4; i++)
        assert_string_equal(string_at(json_object_array_get_idx(cases, i), "verdict"),
                            verdicts[i]);
    assert_string_equal(string_at(json_object_array_get_idx(cases, 2), "error_kind"),
                        "bad-input");
    assert_string_equal(string_at(json_object_array_get_idx(cases, 3), "error_kind"),
                        "backend-failure");
    json_object *summary = key(doc, "summary");
    assert_int_equal(int_at(summary, "cases"), 4);
    assert_int_equal(int_at(summary, "different"), 1);
    assert_int_equal(int_at(summary, "missing"), 1);
    assert_int_equal(int_at(summary, "bad_input"), 1);
    assert_int_equal(int_at(summary, "backend_failure"), 1);
    assert_int_equal(int_at(summary, "error"), 2);
    assert_int_equal(int_at(summary, "left_out"), 5);
    json_object *suites = key(summary, "suites");
    assert_int_equal(json_object_array_length(suites), 2);
    json_object *s0 = json_object_array_get_idx(suites, 0), *s1 = json_object_array_get_idx(suites, 1);
    assert_string_equal(string_at(s0, "suite"), "a");
    assert_int_equal(int_at(s0, "cases"), 2);
    assert_int_equal(int_at(s0, "missing"), 1);
    assert_string_equal(string_at(s1, "suite"), "b");
    assert_int_equal(int_at(s1, "bad_input"), 1);
    assert_int_equal(int_at(s1, "backend_failure"), 1);
    json_object_put(doc);
    moeperm_golden_json_report_free(j);
    moeperm_golden_compare_free(&r);
}

/* A case made for another chip than the device's: verdict "other-chip",
 * no outputs, both chips (a chip without a name has a null name), and its
 * own count in the summary, apart from the judged cases. */
static void test_a_case_of_another_chip_is_other_chip_with_both_chips(void **state)
{
    (void)state;
    moeperm_golden_json_report *j = moeperm_golden_json_report_new();
    assert_non_null(j);
    moeperm_chip device = MOEPERM_CHIP_ASCEND910B2, named = MOEPERM_CHIP_ASCEND910B3;
    moeperm_chip nameless = {261888, 48};
    assert_int_equal(moeperm_golden_json_report_add_case(j, "chips/b3", "MoeTokenUnpermuteGrad"), 0);
    assert_int_equal(moeperm_golden_json_report_set_other_chip(j, "Ascend910B2", &device,
                                                               "Ascend910B3", &named,
                                                               "for another chip: b3"), 0);
    assert_int_equal(moeperm_golden_json_report_add_case(j, "chips/ub", "MoeTokenUnpermuteGrad"), 0);
    assert_int_equal(moeperm_golden_json_report_set_other_chip(j, "Ascend910B2", &device, "",
                                                               &nameless, "for another chip: ub"),
                     0);
    assert_int_equal(moeperm_golden_json_report_add_case(j, "a2/case", "MoeTokenPermuteGrad"), 0);
    json_object *doc = written(j), *cases = key(doc, "cases");
    for (int i = 0; i < 2; i++) {
        json_object *c = json_object_array_get_idx(cases, (size_t)i);
        assert_string_equal(string_at(c, "verdict"), "other-chip");
        assert_int_equal(json_object_object_length(key(c, "outputs")), 0);
        json_object *o = key(c, "other_chip"), *dev = key(o, "device"), *mine = key(o, "case");
        assert_string_equal(string_at(dev, "name"), "Ascend910B2");
        assert_int_equal(int_at(dev, "ub_bytes"), 196352);
        assert_int_equal(int_at(dev, "vector_cores"), 48);
        if (i == 0) {
            assert_string_equal(string_at(mine, "name"), "Ascend910B3");
            assert_int_equal(int_at(mine, "vector_cores"), 40);
            assert_string_equal(string_at(o, "detail"), "for another chip: b3");
        } else {
            assert_true(json_object_is_type(key(mine, "name"), json_type_null));
            assert_int_equal(int_at(mine, "ub_bytes"), 261888);
        }
    }
    assert_string_equal(string_at(json_object_array_get_idx(cases, 2), "verdict"), "same");
    json_object *summary = key(doc, "summary");
    assert_int_equal(int_at(summary, "cases"), 3);
    assert_int_equal(int_at(summary, "same"), 1);
    assert_int_equal(int_at(summary, "other_chip"), 2);
    assert_int_equal(int_at(summary, "error"), 0);
    json_object_put(doc);
    moeperm_golden_json_report_free(j);

    /* nothing open: refused */
    j = moeperm_golden_json_report_new();
    assert_int_equal(moeperm_golden_json_report_set_other_chip(j, NULL, &device, NULL, &named, "x"),
                     -1);
    moeperm_golden_json_report_free(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_document_parses_back_with_every_key_and_counts),
        cmocka_unit_test(test_unrepresentable_numbers_are_null_and_streams_work),
        cmocka_unit_test(test_failures_suites_and_int32_bits),
        cmocka_unit_test(test_a_case_of_another_chip_is_other_chip_with_both_chips),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
