/*
 * golden_util.h - what the golden library's cmocka tests share: cases
 * generated from a spec, a tensor's data by name, and the small file
 * chores (text in and out, a manifest edited in place, a directory's
 * entries counted) that the tests of case files repeat.  Every helper
 * fails the running test, with the reason, instead of returning an error.
 */
#ifndef MOEPERM_TEST_GOLDEN_UTIL_H
#define MOEPERM_TEST_GOLDEN_UTIL_H

#include <stddef.h>

#include <moeperm/golden.h>

/* The case of spec, from moeperm_golden_generate(), with command recorded. */
moeperm_golden_case generated_case(const moeperm_golden_spec *spec, const char *command);

/* The loaded data of c's tensor called name. */
void *tensor_data(const moeperm_golden_case *c, const char *name);

/* Asserts that b holds what a holds: operator, names, seed, attributes and
 * every tensor's name, role, dtype, shape and (where both are loaded)
 * bytes. */
void assert_same_case(const moeperm_golden_case *a, const moeperm_golden_case *b);

/* Writes text to path, replacing it. */
void write_text(const char *path, const char *text);

/* The whole file at path, NUL-terminated (free()). */
char *read_text(const char *path);

/* Replaces the first `from` in the file at path by `to`; the test fails
 * when the file holds no `from`, so an edit can never silently miss. */
void edit_text(const char *path, const char *from, const char *to);

/* The number of entries of dir, dot names included ("." and ".." not). */
size_t dir_entries(const char *dir);

/* A cmocka group's setup and teardown: a fresh directory below /tmp,
 * whose path (malloc'd) is the state every test of the group gets, and
 * which the teardown removes with all it holds. */
int temp_root_setup(void **state);
int temp_root_teardown(void **state);

#endif
