/*
 * golden_util.c - the golden tests' shared helpers (golden_util.h).
 */
#define _XOPEN_SOURCE 700 /* nftw() */
#include "golden_util.h"

#include <dirent.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

moeperm_golden_case generated_case(const moeperm_golden_spec *spec, const char *command)
{
    moeperm_golden_case c;
    char err[1024];
    if (moeperm_golden_generate(spec, command, &c, err, sizeof err) != 0)
        fail_msg("cannot generate %s: %s", spec->name, err);
    return c;
}

void *tensor_data(const moeperm_golden_case *c, const char *name)
{
    const moeperm_golden_tensor *t = moeperm_golden_case_tensor_const(c, name);
    if (!t)
        fail_msg("the %s case has no tensor %s", moeperm_op_name(c->op), name);
    if (!t->data && t->bytes)
        fail_msg("tensor %s is not loaded", name);
    return t->data;
}

static void assert_same_string(const char *what, const char *a, const char *b)
{
    if ((a == NULL) != (b == NULL) || (a && strcmp(a, b) != 0))
        fail_msg("%s: \"%s\" against \"%s\"", what, a ? a : "(null)", b ? b : "(null)");
}

void assert_same_case(const moeperm_golden_case *a, const moeperm_golden_case *b)
{
    assert_int_equal(a->op, b->op);
    assert_same_string("name", a->name, b->name);
    assert_same_string("description", a->description, b->description);
    assert_same_string("generator", a->generator, b->generator);
    assert_same_string("command", a->command, b->command);
    assert_true(a->seed == b->seed);
    assert_int_equal(a->attrs.top_k, b->attrs.top_k);
    assert_int_equal(a->attrs.num_out_tokens, b->attrs.num_out_tokens);
    assert_int_equal(a->attrs.padded_mode, b->attrs.padded_mode);
    assert_int_equal(a->attrs.restore_shape_len, b->attrs.restore_shape_len);
    for (uint64_t i = 0; i < a->attrs.restore_shape_len; i++)
        assert_int_equal(a->attrs.restore_shape[i], b->attrs.restore_shape[i]);
    assert_int_equal(a->attrs.ub_bytes, b->attrs.ub_bytes);
    assert_int_equal(a->attrs.vector_cores, b->attrs.vector_cores);
    assert_string_equal(a->attrs.chip, b->attrs.chip);
    assert_int_equal(a->tensor_count, b->tensor_count);
    for (size_t i = 0; i < a->tensor_count; i++) {
        const moeperm_golden_tensor *x = &a->tensors[i], *y = &b->tensors[i];
        assert_string_equal(x->name, y->name);
        assert_int_equal(x->role, y->role);
        assert_int_equal(x->dtype, y->dtype);
        assert_int_equal(x->ndim, y->ndim);
        for (uint64_t d = 0; d < x->ndim; d++)
            assert_int_equal(x->shape[d], y->shape[d]);
        assert_int_equal(x->bytes, y->bytes);
        if (x->data && y->data)
            assert_memory_equal(x->data, y->data, x->bytes);
    }
}

void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0)
        fail_msg("cannot write %s", path);
}

char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    char *text = NULL;
    size_t size = 0, cap = 0, n;
    char buf[4096];
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
        if (size + n + 1 > cap) {
            cap = 2 * (size + n + 1);
            text = realloc(text, cap);
            assert_non_null(text);
        }
        memcpy(text + size, buf, n);
        size += n;
    }
    fclose(f);
    if (!text)
        text = calloc(1, 1);
    assert_non_null(text);
    text[size] = '\0';
    return text;
}

void edit_text(const char *path, const char *from, const char *to)
{
    char *text = read_text(path);
    char *at = strstr(text, from);
    if (!at)
        fail_msg("%s holds no %s", path, from);
    char *edited = malloc(strlen(text) - strlen(from) + strlen(to) + 1);
    assert_non_null(edited);
    sprintf(edited, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    write_text(path, edited);
    free(edited);
    free(text);
}

size_t dir_entries(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        fail_msg("cannot list %s", dir);
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

char scratch_root[] = "/tmp/moeperm-test-XXXXXX";

int scratch_setup(void **state)
{
    (void)state;
    return mkdtemp(scratch_root) ? 0 : -1;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    /* A test may leave a directory without write permission. */
    chmod(path, 0700);
    return remove(path);
}

int scratch_teardown(void **state)
{
    (void)state;
    return nftw(scratch_root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}
