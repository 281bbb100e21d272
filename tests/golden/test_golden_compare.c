/*
 * The comparator locates differences: one flipped bit anywhere is reported
 * at its (token, column) with its bits, and blocks of differences are
 * summarised as the token and column ranges a kernel developer would look
 * at ("columns 13-20 of every token").  Also pins the ULP distance on the
 * ordered integer line and the NaN rules.  The positions are chosen here,
 * so nothing expected comes from the comparator itself.
 */
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

#include <moeperm/golden.h>

#include "golden_util.h"

#define TOKENS 64
#define HIDDEN 40

static moeperm_golden_case make_case(moeperm_dtype dtype)
{
    moeperm_golden_spec s = moeperm_golden_spec_default(MOEPERM_OP_PERMUTE_GRAD, dtype, TOKENS, 4, HIDDEN);
    snprintf(s.name, sizeof s.name, "compare");
    s.seed = 99;
    return generated_case(&s, NULL);
}

static void flip(moeperm_dtype dtype, void *data, int64_t t, int64_t h, unsigned bit)
{
    size_t es = moeperm_dtype_size(dtype);
    uint8_t *p = (uint8_t *)data + ((size_t)t * HIDDEN + (size_t)h) * es;
    p[bit / 8] ^= (uint8_t)(1u << (bit % 8));
}

static void test_one_flipped_bit_is_located_by_token_and_column(void **state)
{
    (void)state;
    static const moeperm_dtype dtypes[] = {MOEPERM_BF16, MOEPERM_FLOAT16, MOEPERM_FLOAT};
    uint64_t rng = 12345;
    for (int d = 0; d < 3; d++) {
        moeperm_golden_case c = make_case(dtypes[d]);
        const moeperm_golden_tensor *out = moeperm_golden_case_tensor_const(&c, "input_grad");
        size_t bytes = out->bytes;
        void *actual = malloc(bytes);
        assert_non_null(actual);
        for (int trial = 0; trial < 50; trial++) {
            rng = rng * 6364136223846793005u + 1442695040888963407u;
            int64_t t = (int64_t)((rng >> 33) % TOKENS), h = (int64_t)((rng >> 20) % HIDDEN);
            /* Mantissa bit 0: never turns a number into a NaN. */
            memcpy(actual, out->data, bytes);
            flip(out->dtype, actual, t, h, 0);
            moeperm_golden_compare_result r;
            assert_int_equal(moeperm_golden_compare(out->dtype, TOKENS, HIDDEN, out->data, actual,
                                            false, &r), 0);
            assert_int_equal(r.differing, 1);
            assert_int_equal(r.max_ulp, 1);
            assert_int_equal(r.first_count, 1);
            assert_int_equal(r.first[0].token, t);
            assert_int_equal(r.first[0].column, h);
            assert_int_equal(r.first[0].expected ^ r.first[0].actual, 1);
            char where[64];
            snprintf(where, sizeof where, "token %lld: column %lld", (long long)t, (long long)h);
            assert_string_equal(r.where, where);
            moeperm_golden_compare_free(&r);
        }
        free(actual);
        moeperm_golden_case_free(&c);
    }
}

static void test_ranges_are_summarised(void **state)
{
    (void)state;
    moeperm_golden_case c = make_case(MOEPERM_BF16);
    const moeperm_golden_tensor *out = moeperm_golden_case_tensor_const(&c, "input_grad");
    size_t bytes = out->bytes;
    void *actual = malloc(bytes);
    moeperm_golden_compare_result r;
    assert_non_null(actual);

    /* A chunk edge gone wrong: the same columns of every token. */
    memcpy(actual, out->data, bytes);
    for (int64_t t = 0; t < TOKENS; t++)
        for (int64_t h = 13; h <= 20; h++)
            flip(out->dtype, actual, t, h, 1);
    assert_int_equal(moeperm_golden_compare(out->dtype, TOKENS, HIDDEN, out->data, actual, false, &r), 0);
    assert_int_equal(r.differing, TOKENS * 8);
    assert_string_equal(r.where, "columns 13-20 of every token");
    moeperm_golden_compare_free(&r);

    /* One core's tokens gone wrong: a token range, every column. */
    memcpy(actual, out->data, bytes);
    for (int64_t t = 40; t < TOKENS; t++)
        for (int64_t h = 0; h < HIDDEN; h++)
            flip(out->dtype, actual, t, h, 2);
    assert_int_equal(moeperm_golden_compare(out->dtype, TOKENS, HIDDEN, out->data, actual, false, &r), 0);
    assert_string_equal(r.where, "tokens 40-63: all columns");
    assert_int_equal(r.first[0].token, 40);
    assert_int_equal(r.first[0].column, 0);
    moeperm_golden_compare_free(&r);

    /* A tail and a separate token. */
    memcpy(actual, out->data, bytes);
    for (int64_t t = 2; t <= 5; t++) {
        flip(out->dtype, actual, t, 38, 0);
        flip(out->dtype, actual, t, 39, 0);
    }
    flip(out->dtype, actual, 9, 0, 0);
    assert_int_equal(moeperm_golden_compare(out->dtype, TOKENS, HIDDEN, out->data, actual, false, &r), 0);
    assert_string_equal(r.where, "tokens 2-5: columns 38-39; token 9: column 0");
    moeperm_golden_compare_free(&r);

    /* Equal outputs: nothing differs, no summary. */
    assert_int_equal(moeperm_golden_compare(out->dtype, TOKENS, HIDDEN, out->data, out->data, true,
                                    &r), 0);
    assert_int_equal(r.differing, 0);
    assert_null(r.where);
    moeperm_golden_compare_free(&r);
    free(actual);
    moeperm_golden_case_free(&c);
}

static void test_ulp_distance_on_the_ordered_line(void **state)
{
    (void)state;
    assert_int_equal(moeperm_golden_ulp_distance(MOEPERM_FLOAT, 0x00000000, 0x80000000), 1);
    assert_int_equal(moeperm_golden_ulp_distance(MOEPERM_FLOAT, 0x7f7fffff, 0x7f800000), 1);
    assert_int_equal(moeperm_golden_ulp_distance(MOEPERM_FLOAT, 0x3f800000, 0x3f800001), 1);
    assert_int_equal(moeperm_golden_ulp_distance(MOEPERM_FLOAT, 0x80000001, 0x00000001), 3);
    assert_int_equal(moeperm_golden_ulp_distance(MOEPERM_FLOAT, 0xbf800000, 0x3f800000),
                     2 * UINT64_C(0x3f800000) + 1);
    assert_int_equal(moeperm_golden_ulp_distance(MOEPERM_BF16, 0x7f7f, 0x7f80), 1);
    assert_int_equal(moeperm_golden_ulp_distance(MOEPERM_FLOAT16, 0x7bff, 0x7c00), 1);
    assert_int_equal(moeperm_golden_ulp_distance(MOEPERM_FLOAT16, 0x8000, 0x0000), 1);
    assert_int_equal(moeperm_golden_ulp_distance(MOEPERM_BF16, 0x8001, 0x0001), 3);
}

static void test_nans_are_equal_unless_strict(void **state)
{
    (void)state;
    uint16_t expected[2] = {0x7fc0, 0x3f80}, actual[2] = {0xffc1, 0x3f80};
    moeperm_golden_compare_result r;
    assert_int_equal(moeperm_golden_compare(MOEPERM_BF16, 1, 2, expected, actual, false, &r), 0);
    assert_int_equal(r.differing, 0);
    moeperm_golden_compare_free(&r);
    assert_int_equal(moeperm_golden_compare(MOEPERM_BF16, 1, 2, expected, actual, true, &r), 0);
    assert_int_equal(r.differing, 1);
    moeperm_golden_compare_free(&r);
    /* NaN against a number differs in either mode and is counted apart. */
    actual[0] = 0x7f80;
    assert_int_equal(moeperm_golden_compare(MOEPERM_BF16, 1, 2, expected, actual, false, &r), 0);
    assert_int_equal(r.differing, 1);
    assert_int_equal(r.nan_mismatch, 1);
    moeperm_golden_compare_free(&r);
}

/* An independent check of what the JUnit file may hold: well-formed UTF-8
 * (decoded by the bit patterns, then checked against the shortest form,
 * the surrogates and U+10FFFF) of characters XML 1.0 allows.  Returns the
 * offset of the first bad byte, or -1. */
static long first_bad_xml_byte(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned char b = s[i];
        size_t len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
        static const uint32_t shortest[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (len == 0 || i + len > n)
            return (long)i;
        uint32_t cp = len == 1 ? b : (uint32_t)(b & (0x7f >> len));
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return (long)i;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        bool xml_char = cp == 0x9 || cp == 0xa || cp == 0xd || (cp >= 0x20 && cp <= 0xd7ff) ||
                        (cp >= 0xe000 && cp <= 0xfffd) || (cp >= 0x10000 && cp <= 0x10ffff);
        if (cp < shortest[len] || !xml_char)
            return (long)i;
        i += len;
    }
    return -1;
}

static char *escaped(const char *s)
{
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    assert_non_null(f);
    moeperm_golden_xml_escape(f, s);
    assert_int_equal(fclose(f), 0);
    long bad = first_bad_xml_byte((const unsigned char *)text, size);
    if (bad >= 0)
        fail_msg("escaping gave a bad byte 0x%02x at %ld", (unsigned char)text[bad], bad);
    return text;
}

/* The report j writes (j is freed), NUL-terminated, *n bytes of it
 * (free()). */
static char *written_junit(moeperm_golden_junit *j, size_t *n)
{
    char path[] = "/tmp/moeperm-test-junit-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    char err[512];
    assert_int_equal(moeperm_golden_junit_write(j, path, err, sizeof err), 0);
    moeperm_golden_junit_free(j);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *buf = calloc(1, 8192);
    assert_non_null(buf);
    *n = fread(buf, 1, 8191, f);
    fclose(f);
    unlink(path);
    assert_true(*n > 0 && *n < 8191);
    return buf;
}

/* A case directory named with byte 0xff once went raw into a file that
 * says encoding="UTF-8", and XML parsers refused the whole report.  Every
 * kind of malformed UTF-8 must come out as a visible escape per byte;
 * well-formed UTF-8 must come out unchanged.  String literals are split
 * where a hex escape would otherwise swallow the next letter. */
static void test_xml_escape_emits_only_well_formed_utf8(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        {"plain case-1", "plain case-1"},
        {"<a & \"b\" 'c'>", "&lt;a &amp; &quot;b&quot; &apos;c&apos;&gt;"},
        {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xef\xbf\xbd",
         "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xef\xbf\xbd"},
        {"a\xff" "b", "a\\xff" "b"},                          /* never valid */
        {"\xfe", "\\xfe"},
        {"\xc0\xaf", "\\xc0\\xaf"},                          /* overlong "/" */
        {"\xe0\x80\xaf", "\\xe0\\x80\\xaf"},                 /* overlong, 3 bytes */
        {"\xf0\x80\x80\xaf", "\\xf0\\x80\\x80\\xaf"},        /* overlong, 4 bytes */
        {"\xed\xa0\x80", "\\xed\\xa0\\x80"},                 /* surrogate U+D800 */
        {"\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80"},        /* above U+10FFFF */
        {"\xe2\x82", "\\xe2\\x82"},                          /* truncated at the end */
        {"\xe2\x82" "A", "\\xe2\\x82" "A"},                  /* truncated mid-string */
        {"\x80" "x", "\\x80" "x"},                           /* lone continuation */
        {"\xef\xbf\xbe", "\\xef\\xbf\\xbe"},                 /* U+FFFE, not an XML char */
        {"\r\n\t", "&#13;&#10;&#9;"},                          /* a raw CR reads back as LF */
        {"x\x01y\x7f", "x\\x01y\\x7f"},                      /* control characters */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *text = escaped(cases[i][0]);
        if (strcmp(text, cases[i][1]) != 0)
            fail_msg("case %zu: \"%s\", expected \"%s\"", i, text, cases[i][1]);
        free(text);
    }

    /* The whole report, with the bad bytes in the suite, class, name,
     * message and details. */
    moeperm_golden_junit *j = moeperm_golden_junit_new("suite\xff");
    assert_non_null(j);
    assert_int_equal(moeperm_golden_junit_add(j, "dir\xfe/case\xed\xa0\x80", 0.5, MOEPERM_GOLDEN_ERROR,
                                      "bad \xc0\xaf", "details \xf4\x90\x80\x80\x01"),
                     0);
    size_t n;
    char *buf = written_junit(j, &n);
    long bad = first_bad_xml_byte((const unsigned char *)buf, n);
    if (bad >= 0)
        fail_msg("the JUnit file has a bad byte 0x%02x at %ld", (unsigned char)buf[bad], bad);
    assert_non_null(strstr(buf, "name=\"case\\xed\\xa0\\x80\""));
    free(buf);
}

static char *junit_text(const moeperm_golden_outcome *outcomes, size_t n)
{
    moeperm_golden_junit *j = moeperm_golden_junit_new("suite");
    assert_non_null(j);
    for (size_t i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "dir/case%zu", i);
        assert_int_equal(moeperm_golden_junit_add(j, name, 0.25, outcomes[i],
                                                  outcomes[i] == MOEPERM_GOLDEN_PASS
                                                      ? NULL
                                                      : "for another chip: a <b> 'c'",
                                                  NULL),
                         0);
    }
    size_t bytes;
    return written_junit(j, &bytes);
}

/* A case not judged (made for another chip) is a <skipped> testcase with
 * the reason as its message, counted in the testsuite's skipped; a report
 * that skipped nothing carries no skipped attribute, as before. */
static void test_junit_marks_a_case_not_judged_skipped(void **state)
{
    (void)state;
    const moeperm_golden_outcome some[] = {MOEPERM_GOLDEN_PASS, MOEPERM_GOLDEN_SKIPPED,
                                           MOEPERM_GOLDEN_SKIPPED};
    char *xml = junit_text(some, 3);
    assert_non_null(strstr(xml, "tests=\"3\" failures=\"0\" errors=\"0\" skipped=\"2\""));
    assert_non_null(strstr(xml, "<testcase classname=\"dir\" name=\"case1\" time=\"0.250\">\n"
                                "      <skipped message=\"for another chip: a &lt;b&gt; "
                                "&apos;c&apos;\"/>\n    </testcase>\n"));
    assert_non_null(strstr(xml, "name=\"case0\" time=\"0.250\"/>\n"));
    assert_null(strstr(xml, "<failure"));
    assert_null(strstr(xml, "<error"));
    free(xml);
    const moeperm_golden_outcome none[] = {MOEPERM_GOLDEN_PASS};
    xml = junit_text(none, 1);
    assert_null(strstr(xml, "skipped"));
    assert_non_null(strstr(xml, "tests=\"1\" failures=\"0\" errors=\"0\" time="));
    free(xml);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_junit_marks_a_case_not_judged_skipped),
        cmocka_unit_test(test_one_flipped_bit_is_located_by_token_and_column),
        cmocka_unit_test(test_ranges_are_summarised),
        cmocka_unit_test(test_ulp_distance_on_the_ordered_line),
        cmocka_unit_test(test_nans_are_equal_unless_strict),
        cmocka_unit_test(test_xml_escape_emits_only_well_formed_utf8),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
