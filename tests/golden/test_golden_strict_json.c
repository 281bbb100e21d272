/*
 * Manifests are RFC 8259 JSON and nothing looser: every form a lenient
 * parser accepts (comments, single quotes, trailing commas, leading zeros,
 * NaN, "1.", "+1", hex, a BOM, raw control characters, "\u0000" that cuts
 * a string short, a key named twice ...) is refused by the syntax check
 * with a sentence that names it, both on its own and through
 * moeperm_golden_case_read() on a real case; and valid JSON of every shape the
 * grammar allows still passes, so the check cannot pass by refusing all.
 * The expected verdicts are written out here from the RFC's grammar, not
 * taken from any parser.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include <moeperm/golden.h>

#include "golden/case/json_strict.h"
#include "golden/common/fileio.h"
#include "golden_util.h"

typedef struct form {
    const char *what;
    const char *text;
    const char *says; /* NULL: valid JSON */
} form;

/* Texts the RFC 8259 grammar accepts (plus the checker's own limits). */
static const form valid[] = {
    {"empty object", "{}", NULL},
    {"empty array", "[]", NULL},
    {"scalar text", "7", NULL},
    {"white space of all four kinds", " \t\r\n{ \"a\" :\t1 ,\r\n\"b\":[ ] }\n", NULL},
    {"zero, minus zero", "[0, -0, 0.0, -0.0]", NULL},
    {"fractions and exponents", "[1.5, -2.25e-3, 1E+2, 1e2, 6.02E23, 0e0]", NULL},
    {"huge integer (a range limit, not syntax)", "[100000000000000000000000000000]", NULL},
    {"literals", "[true, false, null]", NULL},
    {"every escape", "[\"\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u00e9 \\uFFFF\"]", NULL},
    {"a surrogate pair", "\"\\ud83d\\ude00\"", NULL},
    {"raw UTF-8 of 2, 3 and 4 bytes", "\"\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"", NULL},
    {"DEL is not a control character in JSON", "\"a\x7f\"", NULL},
    {"keys that differ only after decoding are not equal", "{\"a\": 1, \"\\u0062\": 2}", NULL},
    {"equal keys in different objects", "{\"a\": {\"a\": 1}, \"b\": {\"a\": 2}}", NULL},
    {"32 levels", "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]", NULL},
};

/* Texts that are not JSON, each with what the message must say. */
static const form invalid[] = {
    {"line comment", "{\"a\": 1 // one\n}", "a comment (//)"},
    {"block comment", "{/* c */ \"a\": 1}", "a comment (/*)"},
    {"unterminated block comment", "{\"a\": 1} /*", "a comment (/*)"},
    {"comment after the object", "{\"a\": 1}\n// end\n", "a comment (//)"},
    {"single-quoted value", "{\"a\": 'x'}", "single quote"},
    {"single-quoted key", "{'a': 1}", "single quote"},
    {"unquoted key", "{a: 1}", "the word \"a\" where a key in double quotes is expected"},
    {"trailing comma in an object", "{\"a\": 1,}", "a comma before '}'"},
    {"trailing comma in an array", "{\"a\": [1, 2,]}", "a comma before ']'"},
    {"two commas", "[1,,2]", "',' where a value is expected"},
    {"leading zero 010", "{\"a\": 010}", "010 has a leading zero"},
    {"leading zero 00", "{\"a\": 00}", "00 has a leading zero"},
    {"leading zero -01", "{\"a\": -01}", "-01 has a leading zero"},
    {"fAlSe", "{\"a\": fAlSe}", "\"fAlSe\"; the JSON literal is false, in lower case"},
    {"TRUE", "{\"a\": TRUE}", "\"TRUE\"; the JSON literal is true"},
    {"Null", "[Null]", "the JSON literal is null"},
    {"truex", "[truex]", "the word \"truex\""},
    {"raw tab in a string", "{\"a\": \"x\ty\"}", "control character 0x09 inside a string"},
    {"raw line feed in a string", "{\"a\": \"x\ny\"}", "control character 0x0a"},
    {"raw 0x01 in a key", "{\"a\x01\": 1}", "control character 0x01"},
    {"\\u0000 in a value", "{\"dtype\": \"bf16\\u0000junk\"}", "\\u0000 inside a string"},
    {"\\u0000 in a key", "{\"format\\u0000x\": 1}", "\\u0000 inside a string"},
    {"NaN", "{\"a\": NaN}", "NaN, which is not a JSON number"},
    {"nan", "{\"a\": nan}", "nan, which is not a JSON number"},
    {"Infinity", "{\"a\": Infinity}", "Infinity, which is not a JSON number"},
    {"-Infinity", "{\"a\": -Infinity}", "-Infinity, which is not a JSON number"},
    {"1.", "{\"a\": 1.}", "1. has no digit after its decimal point"},
    {"1.e5", "{\"a\": 1.e5}", "no digit after its decimal point"},
    {"+1", "{\"a\": +1}", "starting with +"},
    {".5", "{\"a\": .5}", "starting with '.'"},
    {"-.5", "{\"a\": -.5}", "'-' not followed by a digit"},
    {"hex 0x10", "{\"a\": 0x10}", "hexadecimal number 0x10"},
    {"1e", "[1e]", "exponent without digits"},
    {"1e+", "[1e+]", "exponent without digits"},
    {"a byte order mark", "\xef\xbb\xbf{\"a\": 1}", "byte order mark"},
    {"trailing garbage", "{\"a\": 1} x", "unexpected text after the JSON object"},
    {"a second object", "{\"a\": 1}\n{}", "unexpected text after the JSON object"},
    {"a key twice", "{\"a\": 1, \"b\": 2, \"a\": 3}", "the key \"a\" a second time"},
    {"a key twice, once escaped", "{\"top_k\": 1, \"top\\u005fk\": 3}", "a second time"},
    {"unknown escape", "[\"\\x41\"]", "the escape \\x"},
    {"short \\u", "[\"\\u12\"]", "\\u not followed by four hexadecimal digits"},
    {"lone high surrogate", "[\"\\ud800\"]", "unpaired surrogate \\ud800"},
    {"lone low surrogate", "[\"\\udc00x\"]", "unpaired surrogate \\udc00"},
    {"high surrogate then not a low one", "[\"\\ud800\\u0041\"]", "unpaired surrogate"},
    {"byte 0xff", "[\"\xff\"]", "0xff inside a string is not UTF-8"},
    {"overlong UTF-8", "[\"\xc0\xaf\"]", "not UTF-8"},
    {"UTF-8 of a surrogate", "[\"\xed\xa0\x80\"]", "not UTF-8"},
    {"UTF-8 beyond U+10FFFF", "[\"\xf4\x90\x80\x80\"]", "not UTF-8"},
    {"truncated UTF-8", "[\"\xe2\x82\"]", "not UTF-8"},
    {"unclosed string", "{\"a\": \"x", "a string that is never closed"},
    {"unclosed object", "{\"a\": 1", "the text ends where ',' or '}' is expected"},
    {"empty text", "", "the text ends where a value is expected"},
    {"only white space", " \n", "the text ends where a value is expected"},
    {"missing colon", "{\"a\" 1}", "'1' where ':' after the key is expected"},
    {"missing comma", "{\"a\": 1 \"b\": 2}", "where ',' or '}' is expected"},
    {"form feed as white space", "{\f}", "the byte 0x0c"},
    {"33 levels",
     "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
     "nested deeper than 32 levels"},
};

static void test_valid_json_of_every_shape_passes(void **state)
{
    (void)state;
    char err[512];
    for (size_t i = 0; i < sizeof valid / sizeof valid[0]; i++)
        if (golden_json_check_strict(valid[i].text, strlen(valid[i].text), err, sizeof err) != 0)
            fail_msg("%s was refused: %s", valid[i].what, err);
}

static void test_each_lenient_form_is_refused_with_its_name(void **state)
{
    (void)state;
    char err[512];
    for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++) {
        const form *f = &invalid[i];
        err[0] = '\0';
        if (golden_json_check_strict(f->text, strlen(f->text), err, sizeof err) == 0)
            fail_msg("%s was accepted", f->what);
        if (!strstr(err, "not valid JSON at line ") || !strstr(err, f->says))
            fail_msg("%s: the message \"%s\" lacks \"%s\"", f->what, err, f->says);
    }
    printf("%zu invalid and %zu valid texts\n", sizeof invalid / sizeof invalid[0],
           sizeof valid / sizeof valid[0]);
}

static void test_message_names_line_column_and_byte(void **state)
{
    (void)state;
    char err[512];
    const char *text = "{\n  \"a\": 1,\n  \"b\": 010\n}";
    assert_int_equal(golden_json_check_strict(text, strlen(text), err, sizeof err), -1);
    if (!strstr(err, "line 3, column 8 (byte 19)"))
        fail_msg("unexpected position: %s", err);
}

/* ---- through the reader, on a real case ------------------------------- */

static const char *const root = scratch_root; /* scratch_setup() makes it */

/* One edit of a written manifest: the first `from` becomes `to`. */
typedef struct edit {
    const char *what, *from, *to, *says;
} edit;

static const edit edits[] = {
    {"comment", "{\n", "{ /* hand-edited */\n", "a comment (/*)"},
    {"unterminated comment", "  }\n}\n", "  }\n}\n/*", "a comment (/*)"},
    {"single-quoted key and value", "\"dtype\": \"float16\"", "'dtype': 'float16'",
     "single quote"},
    {"single-quoted key", "\"dtype\": \"float16\"", "'dtype': \"float16\"", "single quote"},
    {"trailing comma", "\"shape\": [7, 5]", "\"shape\": [7, 5,]", "a comma before ']'"},
    {"trailing comma in the manifest", "\n  }\n}", ",\n  }\n}", "a comma before '}'"},
    {"leading zeros 005", "\"seed\": 5,", "\"seed\": 005,", "leading zero"},
    {"leading zeros 00", "\"seed\": 5,", "\"seed\": 00,", "leading zero"},
    {"fAlSe", "\"padded_mode\": false", "\"padded_mode\": fAlSe", "in lower case"},
    {"raw tab in the name", "\\tname", "\tname", "control character 0x09"},
    {"\\u0000 in dtype", "\"dtype\": \"float16\"", "\"dtype\": \"float16\\u0000junk\"",
     "\\u0000 inside a string"},
    {"\\u0000 in a file name", "\"file\": \"sorted_indices.bin\"",
     "\"file\": \"sorted_indices.bin\\u0000/../../etc/passwd\"", "\\u0000 inside a string"},
    {"NaN", "\"seed\": 5,", "\"seed\": NaN,", "NaN, which is not a JSON number"},
    {"Infinity", "\"seed\": 5,", "\"seed\": Infinity,", "Infinity, which is not"},
    {"-Infinity", "\"seed\": 5,", "\"seed\": -Infinity,", "-Infinity, which is not"},
    {"1.", "\"top_k\": 3,", "\"top_k\": 3.,", "no digit after its decimal point"},
    {"+1", "\"top_k\": 3,", "\"top_k\": +3,", "starting with +"},
    {".5", "\"top_k\": 3,", "\"top_k\": .5,", "starting with '.'"},
    {"hex", "\"top_k\": 3,", "\"top_k\": 0x3,", "hexadecimal"},
    {"byte order mark", "{\n", "\xef\xbb\xbf{\n", "byte order mark"},
    {"garbage after the object", "  }\n}\n", "  }\n}\nx", "unexpected text after the JSON object"},
    {"a key twice", "\"top_k\": 3,", "\"top_k\": 3, \"top_k\": 3,", "the key \"top_k\" a second"},
};

static void test_reader_refuses_each_form_in_a_real_manifest(void **state)
{
    (void)state;
    moeperm_golden_spec s = moeperm_golden_spec_default(MOEPERM_OP_PERMUTE_GRAD, MOEPERM_FLOAT16, 7, 3, 5);
    moeperm_golden_case c, back;
    char err[1024], dir[600], manifest[700];
    snprintf(s.name, sizeof s.name, "strict\tname");
    s.seed = 5;
    s.values = MOEPERM_GOLDEN_VALUES_ROUNDING;
    c = generated_case(&s, "moeperm golden");
    snprintf(dir, sizeof dir, "%s/case", root);
    snprintf(manifest, sizeof manifest, "%s/case.json", dir);
    assert_int_equal(moeperm_golden_case_write(dir, &c, false, err, sizeof err), 0);
    moeperm_golden_case_free(&c);
    char *orig;
    assert_int_equal(golden_read_text(manifest, 1 << 20, &orig, err, sizeof err), 0);
    /* The unedited case reads: a refusal below is the edit's. */
    if (moeperm_golden_case_read(dir, MOEPERM_GOLDEN_LOAD_ALL, &back, err, sizeof err) != 0)
        fail_msg("the unedited case is refused: %s", err);
    moeperm_golden_case_free(&back);

    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        const edit *e = &edits[i];
        char *at = strstr(orig, e->from);
        if (!at)
            fail_msg("%s: the manifest holds no %s", e->what, e->from);
        char *edited = malloc(strlen(orig) - strlen(e->from) + strlen(e->to) + 1);
        assert_non_null(edited);
        sprintf(edited, "%.*s%s%s", (int)(at - orig), orig, e->to, at + strlen(e->from));
        write_text(manifest, edited);
        free(edited);
        err[0] = '\0';
        if (moeperm_golden_case_read(dir, MOEPERM_GOLDEN_LOAD_ALL, &back, err, sizeof err) == 0) {
            moeperm_golden_case_free(&back);
            fail_msg("%s: the manifest was accepted", e->what);
        }
        if (!strstr(err, manifest) || !strstr(err, "not valid JSON") || !strstr(err, e->says))
            fail_msg("%s: the message \"%s\" lacks \"%s\"", e->what, err, e->says);
        if (moeperm_golden_case_read(dir, MOEPERM_GOLDEN_LOAD_NONE, &back, err, sizeof err) == 0)
            fail_msg("%s: the manifest alone was accepted", e->what);
    }
    write_text(manifest, orig);
    free(orig);
    printf("%zu edits of a real manifest\n", sizeof edits / sizeof edits[0]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_json_of_every_shape_passes),
        cmocka_unit_test(test_each_lenient_form_is_refused_with_its_name),
        cmocka_unit_test(test_message_names_line_column_and_byte),
        cmocka_unit_test(test_reader_refuses_each_form_in_a_real_manifest),
    };
    return cmocka_run_group_tests(tests, scratch_setup, scratch_teardown);
}
