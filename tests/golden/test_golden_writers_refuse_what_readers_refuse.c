/*
 * The writers write only what their reader reads: moeperm_golden_case_write(),
 * moeperm_golden_generate_write() and moeperm_golden_tensor_from_file() (the
 * tool's make-case) refuse, before anything is written, what
 * moeperm_golden_case_read() would refuse, and each refusal is checked
 * against the reader itself: the same bytes put into a written case by hand
 * are refused on reading.  At the edges of what the reader takes (4-byte
 * UTF-8, a dimension of exactly 2^40, the chip's bounds) every writer's case
 * reads back identical.
 *
 *   - text that is not UTF-8 (a stray continuation byte, an overlong form,
 *     a surrogate, a cut sequence, a byte above F4) in each string the
 *     manifest carries;
 *   - a dimension beyond MOEPERM_GOLDEN_MAX_DIM, on an empty tensor too;
 *   - a tensor whose bytes are not its shape's; indices the operator
 *     refuses;
 *   - a spec whose chip the operator refuses, or whose name is not UTF-8;
 *   - a file whose .npy header contradicts the shape or dtype given for it,
 *     a directory or FIFO in place of a tensor file, each with its reason.
 */
#include <errno.h>
#include <fcntl.h>
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

#include "golden/case/npy.h"
#include "golden_util.h"

static const char *const root = scratch_root; /* scratch_setup() makes it */

static moeperm_golden_case small_case(moeperm_op op)
{
    moeperm_golden_spec s = moeperm_golden_spec_default(op, MOEPERM_BF16, 6, 2, 8);
    s.has_probs = op == MOEPERM_OP_UNPERMUTE || op == MOEPERM_OP_UNPERMUTE_GRAD;
    s.probs_dtype = MOEPERM_BF16;
    snprintf(s.name, sizeof s.name, "small");
    return generated_case(&s, "moeperm golden --out .. --name small");
}

/* Whether anything is at path. */
static bool exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* Byte strings that are not UTF-8, each a way to fail it. */
static const char *const not_utf8[] = {
    "stray \x80 continuation", "overlong \xc0\xaf slash", "surrogate \xed\xa0\x80 half",
    "cut \xe2\x82", "above \xf5\x80\x80\x80 U+10FFFF", "latin-1 caf\xe9",
};

/* The strings of c the manifest carries, by the name the writer's
 * sentence gives them. */
static char **field(moeperm_golden_case *c, size_t i, const char **what)
{
    char **fields[] = {&c->name,           &c->description,   &c->generator,
                       &c->command,        &c->recipe.routing, &c->recipe.values,
                       &c->recipe.probs_values};
    static const char *const names[] = {"name",           "description",     "generator",
                                        "command",        "recipe's routing", "recipe's values",
                                        "recipe's probs_values"};
    *what = names[i];
    return fields[i];
}

/* Text that is not UTF-8 in any string of the manifest: the writer refuses
 * it naming the field, and leaves nothing at the path; the reader refuses
 * the same bytes put into a written manifest by hand. */
static void test_text_that_is_not_utf8_is_refused_by_writer_and_reader(void **state)
{
    (void)state;
    char err[1024], path[600], manifest[700];
    for (size_t f = 0; f < 7; f++) {
        for (size_t k = 0; k < sizeof not_utf8 / sizeof not_utf8[0]; k++) {
            moeperm_golden_case c = small_case(MOEPERM_OP_UNPERMUTE);
            const char *what;
            char **s = field(&c, f, &what);
            free(*s);
            *s = strdup(not_utf8[k]);
            snprintf(path, sizeof path, "%s/text-%zu-%zu", root, f, k);
            if (moeperm_golden_case_write(path, &c, false, err, sizeof err) != -1 ||
                !strstr(err, what) || !strstr(err, "not UTF-8"))
                fail_msg("%s \"%s\": %s", what, not_utf8[k], err);
            if (exists(path))
                fail_msg("%s \"%s\": %s was written", what, not_utf8[k], path);
            moeperm_golden_case_free(&c);
        }
    }
    /* The reader, on the same bytes in the name and the description. */
    moeperm_golden_case c = small_case(MOEPERM_OP_PERMUTE_GRAD), back;
    snprintf(path, sizeof path, "%s/text-read", root);
    assert_int_equal(moeperm_golden_case_write(path, &c, false, err, sizeof err), 0);
    snprintf(manifest, sizeof manifest, "%s/case.json", path);
    char *orig = read_text(manifest);
    for (size_t k = 0; k < sizeof not_utf8 / sizeof not_utf8[0]; k++) {
        char to[128];
        snprintf(to, sizeof to, "\"name\": \"%s\"", not_utf8[k]);
        edit_text(manifest, "\"name\": \"small\"", to);
        if (moeperm_golden_case_read(path, MOEPERM_GOLDEN_LOAD_NONE, &back, err, sizeof err) != -1 ||
            !strstr(err, "not UTF-8"))
            fail_msg("the reader took the name \"%s\": %s", not_utf8[k], err);
        write_text(manifest, orig);
    }
    free(orig);
    moeperm_golden_case_free(&c);
}

/* UTF-8 of every length, in every string: written, read back identical. */
static void test_utf8_of_every_length_reads_back(void **state)
{
    (void)state;
    char err[1024], path[600];
    moeperm_golden_case c = small_case(MOEPERM_OP_UNPERMUTE_GRAD), back;
    for (size_t f = 0; f < 7; f++) {
        const char *what;
        char **s = field(&c, f, &what);
        free(*s);
        *s = strdup("a \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf");
    }
    snprintf(path, sizeof path, "%s/utf8", root);
    assert_int_equal(moeperm_golden_case_write(path, &c, false, err, sizeof err), 0);
    if (moeperm_golden_case_read(path, MOEPERM_GOLDEN_LOAD_ALL, &back, err, sizeof err) != 0)
        fail_msg("%s", err);
    assert_same_case(&c, &back);
    assert_string_equal(back.recipe.routing, c.recipe.routing);
    assert_string_equal(back.recipe.probs_values, c.recipe.probs_values);
    moeperm_golden_case_free(&back);
    moeperm_golden_case_free(&c);
}

/* A MoeTokenPermuteGrad case with no rows and hidden size `hidden`: no
 * element, so no dimension is too large to hold. */
static moeperm_golden_case empty_case(int64_t hidden)
{
    moeperm_golden_case c;
    memset(&c, 0, sizeof c);
    c.format_version = 2;
    c.op = MOEPERM_OP_PERMUTE_GRAD;
    c.attrs.top_k = 1;
    c.name = strdup("empty");
    c.description = strdup("no rows");
    c.generator = strdup("test");
    static const char *const names[] = {"permuted_output_grad", "sorted_indices"};
    const moeperm_dtype dtypes[] = {MOEPERM_FLOAT, MOEPERM_INT32};
    for (size_t i = 0; i < 2; i++) {
        moeperm_golden_tensor *t = &c.tensors[c.tensor_count++];
        t->name = names[i];
        t->role = MOEPERM_GOLDEN_ROLE_INPUT;
        t->dtype = dtypes[i];
        t->ndim = i == 0 ? 2 : 1;
        t->shape[1] = i == 0 ? hidden : 0;
        t->file = strdup(i == 0 ? "permuted_output_grad.bin" : "sorted_indices.bin");
    }
    char err[1024];
    if (moeperm_golden_case_finish(&c, err, sizeof err) != 0)
        fail_msg("the empty case of hidden %lld: %s", (long long)hidden, err);
    return c;
}

/* A dimension beyond 2^40 has no manifest, even on a tensor with no
 * element; exactly 2^40 is written and reads back. */
static void test_dimensions_beyond_the_format_are_refused_even_when_empty(void **state)
{
    (void)state;
    char err[1024], path[600];
    moeperm_golden_case c = empty_case(MOEPERM_GOLDEN_MAX_DIM + 1), back;
    snprintf(path, sizeof path, "%s/too-wide", root);
    if (moeperm_golden_case_write(path, &c, false, err, sizeof err) != -1 ||
        !strstr(err, "1099511627777") || !strstr(err, "larger than"))
        fail_msg("%s", err);
    assert_false(exists(path));
    moeperm_golden_case_free(&c);

    c = empty_case(MOEPERM_GOLDEN_MAX_DIM);
    snprintf(path, sizeof path, "%s/widest", root);
    assert_int_equal(moeperm_golden_case_write(path, &c, false, err, sizeof err), 0);
    if (moeperm_golden_case_read(path, MOEPERM_GOLDEN_LOAD_ALL, &back, err, sizeof err) != 0)
        fail_msg("%s", err);
    assert_same_case(&c, &back);
    moeperm_golden_case_free(&back);
    moeperm_golden_case_free(&c);
}

/* A tensor whose byte count is not its shape's would be a file of the
 * wrong size; indices the operator refuses would be a case the reader
 * refuses (it runs the operator's first phase). */
static void test_wrong_sizes_and_refused_indices_are_not_written(void **state)
{
    (void)state;
    char err[1024], path[600];
    moeperm_golden_case c = small_case(MOEPERM_OP_PERMUTE_GRAD);
    moeperm_golden_tensor *t = moeperm_golden_case_tensor(&c, "input_grad");
    t->bytes -= 2;
    snprintf(path, sizeof path, "%s/short", root);
    if (moeperm_golden_case_write(path, &c, false, err, sizeof err) != -1 ||
        !strstr(err, "input_grad") || !strstr(err, "bytes"))
        fail_msg("%s", err);
    assert_false(exists(path));
    t->bytes += 2;

    int32_t *indices = tensor_data(&c, "sorted_indices");
    indices[1] = -1; /* the device would read outside the tensor */
    snprintf(path, sizeof path, "%s/negative", root);
    if (moeperm_golden_case_write(path, &c, false, err, sizeof err) != -1 ||
        !strstr(err, "operator refuses"))
        fail_msg("%s", err);
    assert_false(exists(path));
    moeperm_golden_case_free(&c);
}

/* A spec the operator would refuse is refused by the spec check, before
 * anything is made: the chip beyond its bounds, a name that is not UTF-8.
 * The chip at its bounds is written and reads back. */
static void test_specs_the_reader_or_operator_refuse_are_refused_first(void **state)
{
    (void)state;
    char err[1024], path[600];
    moeperm_golden_spec s = moeperm_golden_spec_default(MOEPERM_OP_UNPERMUTE_GRAD, MOEPERM_BF16, 6, 2, 8);
    s.has_probs = true;
    s.probs_dtype = MOEPERM_BF16;
    snprintf(s.name, sizeof s.name, "chip");
    const struct {
        int64_t ub, cores;
        const char *says;
    } bad[] = {{1, 0, "ub_bytes is 1"},
               {MOEPERM_CHIP_MIN_UB_BYTES - 1, 0, "ub_bytes"},
               {MOEPERM_CHIP_MAX_UB_BYTES + 1, 0, "ub_bytes"},
               {0, MOEPERM_CHIP_MAX_VECTOR_CORES + 1, "vector_cores is 4097"},
               {0, -1, "vector_cores"}};
    snprintf(path, sizeof path, "%s/chip", root);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        s.ub_bytes = bad[i].ub;
        s.vector_cores = bad[i].cores;
        if (moeperm_golden_spec_check(&s, err, sizeof err) != -1 || !strstr(err, bad[i].says))
            fail_msg("ub %lld, cores %lld: %s", (long long)bad[i].ub, (long long)bad[i].cores,
                     err);
        if (moeperm_golden_generate_write(&s, NULL, path, false, err, sizeof err) != -2)
            fail_msg("generate_write took ub %lld, cores %lld", (long long)bad[i].ub,
                     (long long)bad[i].cores);
        assert_false(exists(path));
    }
    s.ub_bytes = MOEPERM_CHIP_MIN_UB_BYTES;
    s.vector_cores = MOEPERM_CHIP_MAX_VECTOR_CORES;
    assert_int_equal(moeperm_golden_generate_write(&s, NULL, path, false, err, sizeof err), 0);
    moeperm_golden_case back;
    if (moeperm_golden_case_read(path, MOEPERM_GOLDEN_LOAD_ALL, &back, err, sizeof err) != 0)
        fail_msg("%s", err);
    assert_int_equal(back.attrs.ub_bytes, MOEPERM_CHIP_MIN_UB_BYTES);
    assert_int_equal(back.attrs.vector_cores, MOEPERM_CHIP_MAX_VECTOR_CORES);
    moeperm_golden_case_free(&back);

    s.ub_bytes = s.vector_cores = 0;
    for (size_t k = 0; k < sizeof not_utf8 / sizeof not_utf8[0]; k++) {
        snprintf(s.name, sizeof s.name, "%s", not_utf8[k]);
        if (moeperm_golden_spec_check(&s, err, sizeof err) != -1 || !strstr(err, "not UTF-8"))
            fail_msg("name \"%s\": %s", not_utf8[k], err);
        snprintf(path, sizeof path, "%s/%s", root, not_utf8[k]);
        assert_int_equal(moeperm_golden_generate_write(&s, NULL, path, false, err, sizeof err), -2);
        assert_false(exists(path));
    }
    snprintf(s.name, sizeof s.name, "ok");
    snprintf(s.description, sizeof s.description, "caf\xe9");
    assert_int_equal(moeperm_golden_spec_check(&s, err, sizeof err), -1);
    assert_non_null(strstr(err, "description"));
}

/* make-case's reader of a user's file: a .npy header that contradicts the
 * shape or dtype given is refused, never replaced silently; so is a
 * dimension no case can hold, and a directory or FIFO in place of the
 * file, each with its reason. */
static void test_a_users_file_is_read_as_it_is_or_refused(void **state)
{
    (void)state;
    char err[1024], npy[600], raw[600];
    float data[32] = {0};
    const int64_t shape[2] = {8, 4};
    snprintf(npy, sizeof npy, "%s/a.npy", root);
    assert_int_equal(golden_npy_write_file(npy, MOEPERM_FLOAT, shape, 2, data, err, sizeof err), 0);
    const struct {
        int dtype;
        int64_t dims[2];
        uint64_t ndim;
        const char *says;
    } cases[] = {{MOEPERM_BF16, {4, 16}, 2, "has shape (8, 4), but the shape given for it is (4, 16)"},
                 {MOEPERM_FLOAT, {4, 8}, 2, "(4, 8)"},
                 {MOEPERM_FLOAT, {32, 0}, 1, "(32,)"},
                 {MOEPERM_BF16, {8, 4}, 2, "holds '<f4' data, expected bf16"},
                 {MOEPERM_INT32, {0, 0}, 0, "holds '<f4' data, expected int32"},
                 {MOEPERM_FLOAT, {8, 4}, 2, NULL},
                 {-1, {0, 0}, 0, NULL}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        moeperm_golden_tensor t;
        memset(&t, 0, sizeof t);
        int rc = moeperm_golden_tensor_from_file(npy, cases[i].dtype, cases[i].dims, cases[i].ndim,
                                                 &t, err, sizeof err);
        if (cases[i].says ? rc != -1 || !strstr(err, cases[i].says) : rc != 0)
            fail_msg("case %zu: rc %d: %s", i, rc, err);
        if (rc == 0)
            assert_true(t.ndim == 2 && t.shape[0] == 8 && t.shape[1] == 4 && t.bytes == 128);
        free(t.data);
    }

    /* (0, 2^41): an empty array numpy saves, that no case can hold. */
    const int64_t wide[2] = {0, MOEPERM_GOLDEN_MAX_DIM * 2};
    snprintf(npy, sizeof npy, "%s/wide.npy", root);
    assert_int_equal(golden_npy_write_file(npy, MOEPERM_FLOAT, wide, 2, NULL, err, sizeof err), 0);
    moeperm_golden_tensor t;
    memset(&t, 0, sizeof t);
    if (moeperm_golden_tensor_from_file(npy, -1, NULL, 0, &t, err, sizeof err) != -1 ||
        !strstr(err, "2199023255552") || !strstr(err, "2^40"))
        fail_msg("%s", err);

    /* Not regular files, as .npy and as raw files. */
    const int64_t raw_shape[1] = {4};
    snprintf(npy, sizeof npy, "%s/dir.npy", root);
    snprintf(raw, sizeof raw, "%s/fifo.bin", root);
    assert_int_equal(mkdir(npy, 0755), 0);
    assert_int_equal(mkfifo(raw, 0644), 0);
    const char *paths[] = {npy, raw};
    const char *kinds[] = {"is not a regular file: it is a directory",
                           "is not a regular file: it is a FIFO"};
    for (size_t i = 0; i < 2; i++) {
        memset(&t, 0, sizeof t);
        err[0] = '\0';
        if (moeperm_golden_tensor_from_file(paths[i], MOEPERM_FLOAT, raw_shape, i, &t, err,
                                            sizeof err) != -1 ||
            !strstr(err, paths[i]) || !strstr(err, kinds[i]))
            fail_msg("%s: \"%s\"", paths[i], err);
    }
    snprintf(npy, sizeof npy, "%s/none.npy", root);
    assert_int_equal(moeperm_golden_tensor_from_file(npy, -1, NULL, 0, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "No such file or directory"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_that_is_not_utf8_is_refused_by_writer_and_reader),
        cmocka_unit_test(test_utf8_of_every_length_reads_back),
        cmocka_unit_test(test_dimensions_beyond_the_format_are_refused_even_when_empty),
        cmocka_unit_test(test_wrong_sizes_and_refused_indices_are_not_written),
        cmocka_unit_test(test_specs_the_reader_or_operator_refuse_are_refused_first),
        cmocka_unit_test(test_a_users_file_is_read_as_it_is_or_refused),
    };
    return cmocka_run_group_tests(tests, scratch_setup, scratch_teardown);
}
