/*
 * Golden case files: a written case reads back identical (manifest fields
 * and tensor bytes), an existing case is replaced only when forced, a
 * failed write leaves the earlier case and no temporary behind, atomic
 * file writes never leave a partial file, and case discovery is sorted and
 * skips the dot-directories an interrupted write may leave.
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

#include "golden/case.h"
#include "golden/fileio.h"
#include "golden/generate.h"

static char root[] = "/tmp/moeperm-test-case-io-XXXXXX";

static int setup(void **state)
{
    (void)state;
    return mkdtemp(root) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return golden_remove_tree(root);
}

static golden_case make_case(uint64_t seed, int64_t rows)
{
    golden_spec s;
    char err[512];
    golden_case c;
    memset(&s, 0, sizeof s);
    snprintf(s.name, sizeof s.name, "io \"quoted\"\tname");
    snprintf(s.description, sizeof s.description, "a description with \\ and \"quotes\"");
    s.dtype = MOEPERM_FLOAT16;
    s.tokens_num = 7;
    s.top_k = 3;
    s.hidden_size = 5;
    s.num_rows = rows;
    s.hot_percent = 50;
    s.seed = seed;
    s.values = GOLDEN_VALUES_ROUNDING;
    s.routing = GOLDEN_ROUTING_ROUTED;
    if (golden_generate(&s, "moeperm golden --out .. \"x\"", &c, err, sizeof err) != 0)
        fail_msg("%s", err);
    return c;
}

static size_t entries(const char *dir)
{
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | wc -l", dir);
    FILE *p = popen(cmd, "r");
    size_t n = 0;
    if (!p || fscanf(p, "%zu", &n) != 1)
        fail_msg("cannot list %s", dir);
    pclose(p);
    return n;
}

static void test_written_case_reads_back_identical(void **state)
{
    (void)state;
    char err[512], path[512];
    golden_case c = make_case(5, 17), back;
    snprintf(path, sizeof path, "%s/a/b/case", root);
    assert_int_equal(golden_case_write(path, &c, false, err, sizeof err), 0);
    if (golden_case_read(path, true, &back, err, sizeof err) != 0)
        fail_msg("%s", err);
    assert_string_equal(back.name, c.name);
    assert_string_equal(back.description, c.description);
    assert_string_equal(back.command, c.command);
    assert_string_equal(back.generator, c.generator);
    assert_int_equal(back.dtype, c.dtype);
    assert_int_equal(back.tokens_num, 7);
    assert_int_equal(back.top_k, 3);
    assert_int_equal(back.hidden_size, 5);
    assert_int_equal(back.num_rows, 17);
    assert_int_equal(back.seed, 5);
    assert_false(back.padded_mode);
    assert_memory_equal(back.permuted_output_grad, c.permuted_output_grad, golden_grad_bytes(&c));
    assert_memory_equal(back.sorted_indices, c.sorted_indices, golden_indices_bytes(&c));
    assert_memory_equal(back.input_grad, c.input_grad, golden_output_bytes(&c));
    golden_case_free(&back);
    golden_case_free(&c);
}

static void test_existing_case_is_replaced_only_when_forced(void **state)
{
    (void)state;
    char err[512], path[1100], parent[512];
    golden_case first = make_case(1, -1), second = make_case(2, -1), back;
    snprintf(parent, sizeof parent, "%s/force", root);
    snprintf(path, sizeof path, "%s/case", parent);
    assert_int_equal(golden_case_write(path, &first, false, err, sizeof err), 0);
    assert_int_equal(golden_case_write(path, &second, false, err, sizeof err), -1);
    assert_non_null(strstr(err, "already exists"));
    assert_int_equal(golden_case_read(path, true, &back, err, sizeof err), 0);
    assert_int_equal(back.seed, 1);
    golden_case_free(&back);

    assert_int_equal(golden_case_write(path, &second, true, err, sizeof err), 0);
    assert_int_equal(golden_case_read(path, true, &back, err, sizeof err), 0);
    assert_int_equal(back.seed, 2);
    assert_memory_equal(back.permuted_output_grad, second.permuted_output_grad,
                        golden_grad_bytes(&second));
    golden_case_free(&back);
    /* Nothing but the case is left in the parent: no .tmp or .old. */
    assert_int_equal(entries(parent), 1);
    golden_case_free(&first);
    golden_case_free(&second);
}

static void test_failed_write_leaves_earlier_outputs(void **state)
{
    (void)state;
    char err[512], path[1100], blocker[512];
    golden_case c = make_case(3, -1);
    /* The parent is a file: the write fails before anything is created. */
    snprintf(blocker, sizeof blocker, "%s/blocker", root);
    FILE *f = fopen(blocker, "w");
    assert_non_null(f);
    fputs("keep me", f);
    fclose(f);
    snprintf(path, sizeof path, "%s/case", blocker);
    assert_int_equal(golden_case_write(path, &c, true, err, sizeof err), -1);
    assert_true(strlen(err) > 0);

    /* An atomic file write into a missing directory fails and leaves the
     * earlier file untouched. */
    snprintf(path, sizeof path, "%s/out.bin", root);
    assert_int_equal(golden_write_file_atomic(path, "old", 3, err, sizeof err), 0);
    char bad[1100];
    snprintf(bad, sizeof bad, "%s/missing/out.bin", root);
    assert_int_equal(golden_write_file_atomic(bad, "new", 3, err, sizeof err), -1);
    assert_int_equal(golden_write_file_atomic(path, "newer", 5, err, sizeof err), 0);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_size, 5);
    golden_case_free(&c);
}

/* A FIFO (or a device that blocks on open) where a manifest or a tensor
 * file should be is refused as not a regular file, at once: opening it for
 * reading must not wait for a writer that never comes.  SIGALRM ends the
 * test, failing it, should a read hang. */
static void test_fifo_in_place_of_a_file_is_refused_without_hanging(void **state)
{
    (void)state;
    char err[1024], path[512], file[600];
    golden_case c = make_case(9, -1), back;
    snprintf(path, sizeof path, "%s/fifo-case", root);
    assert_int_equal(golden_case_write(path, &c, false, err, sizeof err), 0);
    golden_case_free(&c);

    alarm(20);
    snprintf(file, sizeof file, "%s/sorted_indices.bin", path);
    assert_int_equal(unlink(file), 0);
    assert_int_equal(mkfifo(file, 0600), 0);
    assert_int_equal(golden_case_read(path, true, &back, err, sizeof err), -1);
    if (!strstr(err, "sorted_indices.bin is not a regular file"))
        fail_msg("unexpected message: %s", err);

    snprintf(file, sizeof file, "%s/case.json", path);
    assert_int_equal(unlink(file), 0);
    assert_int_equal(mkfifo(file, 0600), 0);
    assert_int_equal(golden_case_read(path, true, &back, err, sizeof err), -1);
    if (!strstr(err, "case.json is not a regular file"))
        fail_msg("unexpected message: %s", err);

    void *data = NULL;
    char hex[GOLDEN_SHA256_HEX];
    assert_int_equal(golden_read_file(file, "the output", 4, &data, hex, err, sizeof err), -1);
    assert_null(data);
    alarm(0);
}

static void test_find_cases_is_sorted_and_skips_dot_directories(void **state)
{
    (void)state;
    char err[512], dir[512];
    golden_case c = make_case(4, -1);
    const char *names[] = {"find/z/c2", "find/a/c1", "find/m", "find/a/c0", "find/.tmp/c9"};
    for (size_t i = 0; i < 5; i++) {
        snprintf(dir, sizeof dir, "%s/%s", root, names[i]);
        assert_int_equal(golden_case_write(dir, &c, false, err, sizeof err), 0);
    }
    snprintf(dir, sizeof dir, "%s/find/", root);
    char **found;
    size_t count;
    assert_int_equal(golden_find_cases(dir, &found, &count, err, sizeof err), 0);
    assert_int_equal(count, 4);
    const char *want[] = {"find/a/c0", "find/a/c1", "find/m", "find/z/c2"};
    for (size_t i = 0; i < 4; i++) {
        char expected[1100];
        snprintf(expected, sizeof expected, "%s/%s", root, want[i]);
        assert_string_equal(found[i], expected);
    }
    golden_free_paths(found, count);
    snprintf(dir, sizeof dir, "%s/nothing-here", root);
    assert_int_equal(golden_find_cases(dir, &found, &count, err, sizeof err), -1);
    golden_case_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_written_case_reads_back_identical),
        cmocka_unit_test(test_existing_case_is_replaced_only_when_forced),
        cmocka_unit_test(test_failed_write_leaves_earlier_outputs),
        cmocka_unit_test(test_fifo_in_place_of_a_file_is_refused_without_hanging),
        cmocka_unit_test(test_find_cases_is_sorted_and_skips_dot_directories),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
