/*
 * The HTML report's collector through the public API: misuse refused, a
 * map that counts what the judge counted (NaN rule included) and says so
 * when it was given other rules, outputs that match never read, markup in
 * a case path escaped, and a failed write that leaves nothing behind.
 * The page itself is read back by tests/cli/html_report.py.
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

static char dir[] = "/tmp/test_golden_report_html.XXXXXX";

static int setup(void **state)
{
    (void)state;
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return rmdir(dir);
}

/* A MoeTokenPermuteGrad case of float32 (8 tokens, top-k 2, hidden 16). */
static void make_case(moeperm_golden_case *c)
{
    moeperm_golden_spec s = moeperm_golden_spec_default(MOEPERM_OP_PERMUTE_GRAD, MOEPERM_FLOAT, 8, 2, 16);
    snprintf(s.name, sizeof s.name, "pg");
    char err[512];
    if (moeperm_golden_generate(&s, NULL, c, err, sizeof err) != 0)
        fail_msg("%s", err);
}

static moeperm_golden_tensor *output(moeperm_golden_case *c)
{
    moeperm_golden_tensor *t = moeperm_golden_case_tensor(c, "input_grad");
    assert_non_null(t);
    return t;
}

static moeperm_golden_judgement *judge(const moeperm_golden_case *c, void *actual, bool strict)
{
    moeperm_golden_judge_options o = {strict, 0, false};
    moeperm_golden_judgement *j = NULL;
    char err[512];
    void *outs[1] = {actual};
    if (moeperm_golden_judge(c, outs, &o, &j, err, sizeof err) != 0)
        fail_msg("%s", err);
    return j;
}

/* The page r writes, as a string (free()). */
static char *page(const moeperm_golden_html_report *r)
{
    char path[sizeof dir + 16], err[512];
    snprintf(path, sizeof path, "%s/page.html", dir);
    if (moeperm_golden_html_report_write_path(r, path, err, sizeof err) != 0)
        fail_msg("%s", err);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *text = calloc(1, (size_t)n + 1);
    assert_non_null(text);
    assert_int_equal(fread(text, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    unlink(path);
    return text;
}

static void misuse_is_refused(void **state)
{
    (void)state;
    moeperm_golden_case c, other;
    make_case(&c);
    moeperm_golden_spec s = moeperm_golden_spec_default(MOEPERM_OP_PERMUTE, MOEPERM_BF16, 4, 2, 8);
    snprintf(s.name, sizeof s.name, "permute");
    char err[512];
    if (moeperm_golden_generate(&s, NULL, &other, err, sizeof err) != 0)
        fail_msg("%s", err);
    moeperm_golden_judgement *j = judge(&c, output(&c)->data, false);
    void *outs[1] = {output(&c)->data};
    moeperm_golden_html_report *r = moeperm_golden_html_report_new(NULL);
    assert_non_null(r);
    assert_int_equal(moeperm_golden_html_report_add_judgement(r, &c, outs, NULL, j), -1);
    assert_int_equal(moeperm_golden_html_report_set_error(r, "no case yet"), -1);
    assert_int_equal(moeperm_golden_html_report_add_case(r, "a", "MoeTokenPermuteGrad"), 0);
    /* Another case's outputs: not the judgement's. */
    assert_int_equal(moeperm_golden_html_report_add_judgement(r, &other, outs, NULL, j), -1);
    assert_int_equal(moeperm_golden_html_report_add_judgement(r, &c, outs, NULL, j), 0);
    assert_int_equal(moeperm_golden_html_report_add_judgement(r, &c, outs, NULL, j), -1);
    moeperm_golden_html_report_free(r);
    moeperm_golden_judgement_free(j);
    moeperm_golden_case_free(&other);
    moeperm_golden_case_free(&c);
}

/* Two NaNs of different payloads are equal unless the run is strict; the
 * map must count as the judge did, and says so when it was told otherwise. */
static void map_counts_with_the_judges_nan_rule(void **state)
{
    (void)state;
    moeperm_golden_case c;
    make_case(&c);
    moeperm_golden_tensor *t = output(&c);
    uint32_t *expected = t->data;
    uint32_t *actual = malloc(t->bytes);
    assert_non_null(actual);
    memcpy(actual, expected, t->bytes);
    expected[3] = 0x7fc00000u;
    actual[3] = 0x7fc00001u;
    actual[40] ^= 1u; /* token 2, column 8 */
    void *outs[1] = {actual};
    for (int strict = 0; strict < 2; strict++) {
        moeperm_golden_judgement *j = judge(&c, actual, strict);
        uint64_t want = strict ? 2 : 1;
        assert_int_equal(moeperm_golden_judgement_output_compare(j, 0)->differing, want);
        moeperm_golden_judge_options o = {strict, 0, false};
        moeperm_golden_html_report *r = moeperm_golden_html_report_new("t");
        assert_non_null(r);
        assert_int_equal(moeperm_golden_html_report_add_case(r, "a", NULL), 0);
        assert_int_equal(moeperm_golden_html_report_add_judgement(r, &c, outs, &o, j), 0);
        char *text = page(r);
        assert_non_null(strstr(text, "<svg"));
        assert_null(strstr(text, "The map counts"));
        assert_non_null(strstr(text, "token 2, column 8: 1 of 1 elements differ"));
        bool nan_block = strstr(text, "token 0, column 3: 1 of 1 elements differ") != NULL;
        assert_true(nan_block == (bool)strict);
        free(text);
        moeperm_golden_html_report_free(r);
        /* The defaults (not strict) for a strict judgement: the page says
         * the two disagree. */
        if (strict) {
            r = moeperm_golden_html_report_new("t");
            assert_int_equal(moeperm_golden_html_report_add_case(r, "a", NULL), 0);
            assert_int_equal(moeperm_golden_html_report_add_judgement(r, &c, outs, NULL, j), 0);
            text = page(r);
            assert_non_null(strstr(text, "The map counts 1 differing elements, the judge 2"));
            free(text);
            moeperm_golden_html_report_free(r);
        }
        moeperm_golden_judgement_free(j);
    }
    free(actual);
    moeperm_golden_case_free(&c);
}

/* An output that matches is never read: no map, no section. */
static void matching_outputs_are_not_read(void **state)
{
    (void)state;
    moeperm_golden_case c;
    make_case(&c);
    moeperm_golden_judgement *j = judge(&c, output(&c)->data, false);
    void *outs[1] = {NULL};
    moeperm_golden_html_report *r = moeperm_golden_html_report_new("t");
    assert_int_equal(moeperm_golden_html_report_add_case(r, "a", "MoeTokenPermuteGrad"), 0);
    assert_int_equal(moeperm_golden_html_report_add_judgement(r, &c, outs, NULL, j), 0);
    char *text = page(r);
    assert_null(strstr(text, "<svg"));
    assert_null(strstr(text, "<section"));
    assert_non_null(strstr(text, "1 case: 1 same"));
    free(text);
    moeperm_golden_html_report_free(r);
    moeperm_golden_judgement_free(j);
    moeperm_golden_case_free(&c);
}

static void markup_in_names_is_escaped(void **state)
{
    (void)state;
    moeperm_golden_html_report *r = moeperm_golden_html_report_new("<title>");
    assert_int_equal(moeperm_golden_html_report_add_case(
                         r, "cases/</td><script>alert(1)</script>\xff'\"&", NULL),
                     0);
    assert_int_equal(moeperm_golden_html_report_set_error(r, "<img src=x onerror=alert(1)>"), 0);
    char *text = page(r);
    assert_null(strstr(text, "<script"));
    assert_null(strstr(text, "<img"));
    assert_null(strstr(text, "\xff"));
    assert_null(strstr(text, "<title><title>"));
    assert_non_null(
        strstr(text, "cases/&lt;/td&gt;&lt;script&gt;alert(1)&lt;/script&gt;\\xff&apos;&quot;&amp;"));
    assert_non_null(strstr(text, "&lt;img src=x onerror=alert(1)&gt;"));
    assert_non_null(strstr(text, "<span class=\"badge error\">error</span>"));
    free(text);
    moeperm_golden_html_report_free(r);
}

/* One pass (a strstr() per match would be quadratic under AddressSanitizer,
 * which measures the whole rest of the string on each call). */
static size_t count_of(const char *text, const char *what)
{
    size_t n = 0, len = strlen(what);
    for (const char *p = text; *p; p++)
        if (*p == what[0] && strncmp(p, what, len) == 0)
            n++;
    return n;
}

/* A page stays openable: once the sections pass 32 MiB, later differing
 * cases keep their table row but get no map, and the page says how many. */
static void page_size_is_bounded(void **state)
{
    (void)state;
    moeperm_golden_spec s = moeperm_golden_spec_default(MOEPERM_OP_PERMUTE_GRAD, MOEPERM_FLOAT, 512, 1, 512);
    snprintf(s.name, sizeof s.name, "dots");
    moeperm_golden_case c;
    char err[512];
    if (moeperm_golden_generate(&s, NULL, &c, err, sizeof err) != 0)
        fail_msg("%s", err);
    moeperm_golden_tensor *t = output(&c);
    uint32_t *actual = malloc(t->bytes);
    assert_non_null(actual);
    memcpy(actual, t->data, t->bytes);
    /* 2048 lone elements, none beside another: a map of 2048 rectangles,
     * the most one takes. */
    for (int r = 0; r < 512; r += 2)
        for (int col = 0; col < 16; col += 2)
            actual[r * 512 + col] ^= 1u;
    moeperm_golden_judgement *j = judge(&c, actual, false);
    void *outs[1] = {actual};
    moeperm_golden_html_report *r = moeperm_golden_html_report_new("t");
    enum { CASES = 150 };
    for (int i = 0; i < CASES; i++) {
        assert_int_equal(moeperm_golden_html_report_add_case(r, "dots", NULL), 0);
        assert_int_equal(moeperm_golden_html_report_add_judgement(r, &c, outs, NULL, j), 0);
    }
    char *text = page(r);
    size_t sections = count_of(text, "<section "), size = strlen(text);
    size_t one = size / sections; /* about one section's size */
    char note[128];
    snprintf(note, sizeof note, "%zu more cases that differ have no section here",
             CASES - sections);
    assert_true(sections > 1 && sections < CASES);
    assert_non_null(strstr(text, note));
    assert_in_range(size, (size_t)32 << 20, ((size_t)32 << 20) + 2 * one);
    assert_int_equal(count_of(text, "<rect x="), 2048 * sections);
    assert_int_equal(count_of(text, "<tr class=\"different\">"), CASES);
    free(text);
    moeperm_golden_html_report_free(r);
    moeperm_golden_judgement_free(j);
    free(actual);
    moeperm_golden_case_free(&c);
}

static void failed_write_leaves_nothing(void **state)
{
    (void)state;
    moeperm_golden_html_report *r = moeperm_golden_html_report_new(NULL);
    char path[sizeof dir + 32], err[512] = "";
    snprintf(path, sizeof path, "%s/missing/page.html", dir);
    assert_int_equal(moeperm_golden_html_report_write_path(r, path, err, sizeof err), -1);
    assert_non_null(strstr(err, "missing"));
    snprintf(path, sizeof path, "%s/sub", dir);
    assert_int_equal(mkdir(path, 0777), 0);
    err[0] = '\0';
    assert_int_equal(moeperm_golden_html_report_write_path(r, path, err, sizeof err), -1);
    assert_true(err[0] != '\0');
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(rmdir(path), 0); /* empty: no temporary left in it or beside it */
    moeperm_golden_html_report_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(misuse_is_refused),
        cmocka_unit_test(map_counts_with_the_judges_nan_rule),
        cmocka_unit_test(matching_outputs_are_not_read),
        cmocka_unit_test(markup_in_names_is_escaped),
        cmocka_unit_test(page_size_is_bounded),
        cmocka_unit_test(failed_write_leaves_nothing),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
