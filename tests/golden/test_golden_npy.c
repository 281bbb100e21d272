/*
 * .npy files as numpy writes them are read with the right dtype, shape and
 * elements (fixtures made by numpy itself, tests/golden/npy/make_fixtures.py);
 * what cannot be a moeperm tensor is refused with a sentence naming it;
 * the writer's header equals numpy's byte for byte; and hostile headers
 * (truncated, mutated, lying about lengths and shapes) are refused without
 * reading past the bytes given.
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

#include "golden/case/npy.h"

static const char *fixtures; /* the directory, from argv[1] */

static char *fixture(const char *name)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/%s", fixtures, name);
    return path;
}

static void *slurp(const char *name, size_t *size)
{
    FILE *f = fopen(fixture(name), "rb");
    if (!f)
        fail_msg("cannot open fixture %s", name);
    void *buf = malloc(1 << 16);
    assert_non_null(buf);
    *size = fread(buf, 1, 1 << 16, f);
    fclose(f);
    return buf;
}

/* The fixture script's values, recomputed here. */
static double float_value(int64_t i)
{
    return (double)(i - 3) / 4;
}

static int64_t int_value(int64_t i, int bits)
{
    int64_t v = i * 37 - 100;
    if (bits == 8)
        return (int8_t)(uint8_t)v;
    if (bits == 32)
        return (int32_t)(uint32_t)v;
    return v;
}

typedef struct accepted {
    const char *file;
    moeperm_dtype dtype;
    uint64_t ndim;
    int64_t shape[8];
} accepted;

static void test_numpy_files_are_read_with_dtype_shape_and_elements(void **state)
{
    (void)state;
    static const accepted files[] = {
        {"f4_3x4.npy", MOEPERM_FLOAT, 2, {3, 4}},
        {"f4_v2_3x4.npy", MOEPERM_FLOAT, 2, {3, 4}},
        {"f4_v3_3x4.npy", MOEPERM_FLOAT, 2, {3, 4}},
        {"f4_scalar.npy", MOEPERM_FLOAT, 0, {0}},
        {"f4_fortran_1d.npy", MOEPERM_FLOAT, 1, {5}},
        {"f2_5.npy", MOEPERM_FLOAT16, 1, {5}},
        {"f2_0x4.npy", MOEPERM_FLOAT16, 2, {0, 4}},
        {"i4_6.npy", MOEPERM_INT32, 1, {6}},
        {"i8_2x2.npy", MOEPERM_INT64, 2, {2, 2}},
        {"i1_7.npy", MOEPERM_INT8, 1, {7}},
        {"i1_8dims.npy", MOEPERM_INT8, 8, {1, 1, 1, 2, 1, 1, 1, 1}},
        {"u2_2x3.npy", MOEPERM_BF16, 2, {2, 3}},
        {"i2_2x3.npy", MOEPERM_BF16, 2, {2, 3}},
        {"V2_2x3.npy", MOEPERM_BF16, 2, {2, 3}},
        {"lV2_2x3.npy", MOEPERM_BF16, 2, {2, 3}},
    };
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        const accepted *a = &files[f];
        void *data;
        uint64_t bytes;
        char err[512], hex[65];
        if (golden_npy_read_file(fixture(a->file), a->dtype, a->shape, a->ndim, &data, &bytes, hex,
                                 err, sizeof err) != 0)
            fail_msg("%s: %s", a->file, err);
        uint64_t n = 1;
        for (uint64_t i = 0; i < a->ndim; i++)
            n *= (uint64_t)a->shape[i];
        for (uint64_t i = 0; i < n; i++) {
            switch (a->dtype) {
            case MOEPERM_FLOAT: {
                float v;
                memcpy(&v, (char *)data + 4 * i, 4);
                assert_true((double)v == float_value((int64_t)i));
                break;
            }
            case MOEPERM_FLOAT16: {
                uint16_t v;
                memcpy(&v, (char *)data + 2 * i, 2);
                assert_true((double)moeperm_fp16_to_float(v) == float_value((int64_t)i));
                break;
            }
            case MOEPERM_BF16: {
                uint16_t v;
                memcpy(&v, (char *)data + 2 * i, 2);
                assert_int_equal(v, 0x3f80 + i);
                break;
            }
            case MOEPERM_INT32: {
                int32_t v;
                memcpy(&v, (char *)data + 4 * i, 4);
                assert_int_equal(v, int_value((int64_t)i, 32));
                break;
            }
            case MOEPERM_INT64: {
                int64_t v;
                memcpy(&v, (char *)data + 8 * i, 8);
                assert_int_equal(v, int_value((int64_t)i, 64));
                break;
            }
            default:
                assert_int_equal(((int8_t *)data)[i], int_value((int64_t)i, 8));
                break;
            }
        }
        assert_int_equal(bytes, n * (a->dtype == MOEPERM_FLOAT || a->dtype == MOEPERM_INT32 ? 4
                                     : a->dtype == MOEPERM_INT64                            ? 8
                                     : a->dtype == MOEPERM_INT8                             ? 1
                                                                                            : 2));
        assert_int_equal(strlen(hex), 64);
        free(data);
        /* Without an expected shape, any shape is taken. */
        assert_int_equal(golden_npy_read_file(fixture(a->file), a->dtype, NULL, 0, &data, &bytes,
                                              NULL, err, sizeof err),
                         0);
        free(data);
    }
}

typedef struct refused {
    const char *file;
    moeperm_dtype dtype;
    uint64_t ndim;
    int64_t shape[2];
    const char *sentence; /* after "<path>" */
} refused;

static void test_what_is_no_moeperm_tensor_is_refused_with_a_sentence(void **state)
{
    (void)state;
    static const refused files[] = {
        {"f4_3x4.npy",
         MOEPERM_BF16,
         2,
         {3, 4},
         " holds '<f4' data, expected bf16 ('<u2', '<i2' or '<V2')"},
        {"u2_2x3.npy", MOEPERM_FLOAT16, 2, {2, 3}, " holds '<u2' data, expected float16 ('<f2')"},
        {"f4_3x4.npy", MOEPERM_FLOAT, 2, {4, 3}, " has shape (3, 4), expected (4, 3)"},
        {"f2_5.npy", MOEPERM_FLOAT16, 2, {5, 1}, " has shape (5,), expected (5, 1)"},
        {"f4_fortran_3x4.npy",
         MOEPERM_FLOAT,
         2,
         {3, 4},
         " is in Fortran order; only C order is read (numpy: np.ascontiguousarray(a))"},
        {"bf4_3x4.npy",
         MOEPERM_FLOAT,
         2,
         {3, 4},
         " holds big-endian '>f4' data; only little-endian .npy files are read (numpy: "
         "a.astype('<f4'))"},
        {"f8_3.npy", MOEPERM_FLOAT, 1, {3}, " holds '<f8' data, expected float32 ('<f4')"},
        {"struct_3.npy",
         MOEPERM_FLOAT,
         1,
         {3},
         " holds a structured dtype; only plain arrays are read"},
        {"f4_9dims.npy", MOEPERM_FLOAT, 0, {0}, ": the .npy shape has more than 8 dims"},
    };
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        const refused *r = &files[f];
        void *data = (void *)1;
        uint64_t bytes;
        char err[512], want[8192];
        assert_int_equal(golden_npy_read_file(fixture(r->file), r->dtype, r->shape, r->ndim, &data,
                                              &bytes, NULL, err, sizeof err),
                         -1);
        assert_null(data);
        snprintf(want, sizeof want, "%s%s", fixture(r->file), r->sentence);
        assert_string_equal(err, want);
    }
}

static void test_writer_header_equals_numpys_byte_for_byte(void **state)
{
    (void)state;
    static const struct {
        const char *file;
        moeperm_dtype dtype;
        uint64_t ndim;
        int64_t shape[8];
    } headers[] = {
        {"hdr_f4_123456789012x7168.bin", MOEPERM_FLOAT, 2, {123456789012, 7168}},
        {"hdr_u2_4096x4096.bin", MOEPERM_BF16, 2, {4096, 4096}},
        {"hdr_i8_8dims.bin", MOEPERM_INT64, 8, {2, 3, 4, 5, 6, 7, 8, 9}},
        {"hdr_i1_scalar.bin", MOEPERM_INT8, 0, {0}},
        {"hdr_f2_1.bin", MOEPERM_FLOAT16, 1, {1}},
        {"f4_3x4.npy", MOEPERM_FLOAT, 2, {3, 4}},
        {"f2_5.npy", MOEPERM_FLOAT16, 1, {5}},
        {"u2_2x3.npy", MOEPERM_BF16, 2, {2, 3}},
        {"i4_6.npy", MOEPERM_INT32, 1, {6}},
        {"i1_7.npy", MOEPERM_INT8, 1, {7}},
    };
    for (size_t i = 0; i < sizeof headers / sizeof headers[0]; i++) {
        size_t size;
        unsigned char *numpy = slurp(headers[i].file, &size);
        char mine[GOLDEN_NPY_HEADER_CAP];
        size_t n =
            golden_npy_format_header(headers[i].dtype, headers[i].shape, headers[i].ndim, mine);
        assert_true(n > 0 && n % 64 == 0 && n <= size);
        if (memcmp(mine, numpy, n) != 0 || (size > n && numpy[n - 1] != '\n'))
            fail_msg("%s: the header differs from numpy's", headers[i].file);
        free(numpy);
    }
    int64_t negative = -1;
    char out[GOLDEN_NPY_HEADER_CAP];
    assert_int_equal(golden_npy_format_header(MOEPERM_FLOAT, &negative, 1, out), 0);
    assert_int_equal(golden_npy_format_header((moeperm_dtype)5, NULL, 0, out), 0);
}

static void test_written_file_reads_back(void **state)
{
    (void)state;
    char path[] = "/tmp/moeperm-test-npy-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    uint16_t bits[6] = {0x3f80, 0xbf80, 0x7fc0, 0x0001, 0x8000, 0x7f80};
    int64_t shape[2] = {2, 3};
    char err[512];
    assert_int_equal(golden_npy_write_file(path, MOEPERM_BF16, shape, 2, bits, err, sizeof err), 0);
    void *data;
    uint64_t bytes;
    assert_int_equal(
        golden_npy_read_file(path, MOEPERM_BF16, shape, 2, &data, &bytes, NULL, err, sizeof err),
        0);
    assert_int_equal(bytes, sizeof bits);
    assert_memory_equal(data, bits, sizeof bits);
    free(data);
    unlink(path);
}

/* Parses bytes as a whole file; the result must be consistent when
 * accepted, and the call must not read past size (checked by ASan in the
 * sanitizer job: the buffer is exactly size bytes). */
static int parse_exact(const unsigned char *bytes, size_t size, char *err, size_t err_len)
{
    unsigned char *copy = malloc(size ? size : 1);
    assert_non_null(copy);
    memcpy(copy, bytes, size);
    golden_npy_header h;
    int rc = golden_npy_parse(copy, size, size, "x.npy", &h, err, err_len);
    if (rc == 0) {
        assert_true(h.data_offset + h.data_bytes == size);
        assert_true(h.ndim <= 8);
        uint64_t n = 1;
        for (uint64_t i = 0; i < h.ndim; i++)
            n *= (uint64_t)h.shape[i];
        assert_true(n == h.elements);
    } else {
        assert_true(strlen(err) > 0);
    }
    free(copy);
    return rc;
}

/* A v1.0 file: the dict, padded, then data_bytes of zeros. */
static size_t make_file(unsigned char *out, size_t cap, const char *dict, size_t data_bytes)
{
    size_t len = strlen(dict);
    size_t total = 10 + len + 1;
    total += 64 - total % 64;
    assert_true(total + data_bytes <= cap);
    memcpy(out, "\x93NUMPY\x01\x00", 8);
    out[8] = (unsigned char)((total - 10) & 0xff);
    out[9] = (unsigned char)((total - 10) >> 8);
    memcpy(out + 10, dict, len);
    memset(out + 10 + len, ' ', total - 10 - len);
    out[total - 1] = '\n';
    memset(out + total, 0, data_bytes);
    return total + data_bytes;
}

static void expect_refused(const char *dict, size_t data_bytes, const char *needle)
{
    unsigned char file[4096];
    char err[512];
    size_t size = make_file(file, sizeof file, dict, data_bytes);
    if (parse_exact(file, size, err, sizeof err) == 0)
        fail_msg("accepted: %s", dict);
    if (!strstr(err, needle))
        fail_msg("%s: \"%s\" lacks \"%s\"", dict, err, needle);
}

static void test_hostile_headers_are_refused_by_name(void **state)
{
    (void)state;
    unsigned char file[4096];
    char err[512];
    size_t size = make_file(file, sizeof file,
                            "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 24);
    assert_int_equal(parse_exact(file, size, err, sizeof err), 0);
    /* Other spellings numpy's reader takes. */
    size = make_file(file, sizeof file,
                     "{\"shape\":(2L,3L,),\"descr\":\"<f4\",\"fortran_order\":False}", 24);
    assert_int_equal(parse_exact(file, size, err, sizeof err), 0);

    expect_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), ", 24,
                   "ends inside its dict");
    expect_refused("{'descr': '<f4', 'fortran_order': False}", 24, "lacks 'shape'");
    expect_refused("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (6,)}", 24,
                   "gives 'descr' twice");
    expect_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'x': 1}", 24,
                   "the key 'x'");
    expect_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (6)}", 24,
                   "is an int, not a tuple");
    expect_refused("{'descr': '<f4', 'fortran_order': 0, 'shape': (6,)}", 24, "True or False");
    expect_refused("{'descr': '<f4', 'fortran_order': Falsey, 'shape': (6,)}", 24, "True or False");
    expect_refused("{'descr': 'f4', 'fortran_order': False, 'shape': (6,)}", 24,
                   "is not a numpy dtype string");
    expect_refused("{'descr': '<f4\\n', 'fortran_order': False, 'shape': (6,)}", 24,
                   "an escape or a non-ASCII byte");
    expect_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (6,)} x", 24,
                   "bytes after its dict");
    expect_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (-6,)}", 24,
                   "where a dim of the shape belongs");
    expect_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,6)}", 24,
                   "more than 8 dims");
    expect_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", 24,
                   "exceeds 2^62");
    expect_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, "
                   "4611686018427387904)}",
                   24, "more elements than 2^64");
    expect_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904,)}", 24,
                   "more bytes than 2^64");
    /* Python 3, and so np.load, refuse a literal with a leading zero. */
    expect_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (04, 8)}", 128,
                   "leading zero");
    expect_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 00)}", 0,
                   "leading zero");
    /* Pickled objects have no size to check. */
    expect_refused("{'descr': '|O', 'fortran_order': False, 'shape': (3,)}", 24,
                   "holds Python objects ('|O')");
    expect_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (7,)}", 24, "needs 28");
    expect_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (5,)}", 24, "needs 20");

    /* Lengths that lie. */
    size =
        make_file(file, sizeof file, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,)}", 24);
    file[8] = 0xff;
    file[9] = 0x0f;
    assert_int_equal(parse_exact(file, size, err, sizeof err), -1);
    assert_non_null(strstr(err, "past the end"));
    unsigned char v2[64] = "\x93NUMPY\x02\x00\xff\xff\xff\xff{";
    assert_int_equal(parse_exact(v2, 13, err, sizeof err), -1);
    assert_non_null(strstr(err, "more than the 65524 accepted"));
    unsigned char v4[16] = "\x93NUMPY\x04\x00\x10\x00";
    assert_int_equal(parse_exact(v4, 10, err, sizeof err), -1);
    assert_string_equal(err, "x.npy is .npy format 4.0; only 1.0, 2.0 and 3.0 are read");
    assert_int_equal(parse_exact((const unsigned char *)"\x93NUMPX\x01\x00", 8, err, sizeof err),
                     -1);
    assert_string_equal(err, "x.npy does not start with the .npy magic \\x93NUMPY");
    size =
        make_file(file, sizeof file, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,)}", 24);
    file[20] = 0;
    assert_int_equal(parse_exact(file, size, err, sizeof err), -1);
    assert_non_null(strstr(err, "byte 0x00 at offset 20"));
}

/* Dtypes numpy writes that moeperm does not read parse with their true
 * item size ('<U1' is one 4-byte character, a datetime has a unit), so
 * the sentence is that the dtype is not one moeperm reads, not that the
 * file has the wrong number of bytes. */
static void test_unread_dtypes_are_named_not_miscounted(void **state)
{
    (void)state;
    static const struct {
        const char *descr;
        size_t bytes; /* of the data of 2 elements */
    } dtypes[] = {{"<U1", 8}, {"<U3", 24}, {"|S3", 6}, {"<M8[ns]", 16}, {"<m8[D]", 16},
                  {"<c8", 16}, {"<f8", 16}};
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++) {
        unsigned char file[4096];
        char dict[128], err[512];
        snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (2,), }",
                 dtypes[i].descr);
        size_t size = make_file(file, sizeof file, dict, dtypes[i].bytes);
        if (parse_exact(file, size, err, sizeof err) != 0)
            fail_msg("%s: %s", dtypes[i].descr, err);
        golden_npy_header h;
        assert_int_equal(golden_npy_parse(file, size, size, "x.npy", &h, err, sizeof err), 0);
        assert_int_equal(golden_npy_check(&h, "x.npy", MOEPERM_FLOAT, NULL, 0, err, sizeof err),
                         -1);
        char want[64];
        snprintf(want, sizeof want, "holds '%s' data", dtypes[i].descr);
        if (!strstr(err, want))
            fail_msg("%s: %s", dtypes[i].descr, err);
    }
}

static void test_every_truncation_and_byte_mutation_is_refused_or_consistent(void **state)
{
    (void)state;
    size_t size;
    unsigned char *good = slurp("f4_3x4.npy", &size);
    char err[512];
    for (size_t n = 0; n < size; n++)
        assert_int_equal(parse_exact(good, n, err, sizeof err), -1);
    assert_int_equal(parse_exact(good, size, err, sizeof err), 0);

    /* Every byte of the header through every value it can take: refused
     * or, if accepted, consistent (parse_exact checks), never a crash. */
    unsigned char *mutant = malloc(size);
    assert_non_null(mutant);
    size_t accepted = 0;
    for (size_t at = 0; at < 128; at++) {
        for (unsigned v = 0; v < 256; v++) {
            memcpy(mutant, good, size);
            mutant[at] = (unsigned char)v;
            accepted += parse_exact(mutant, size, err, sizeof err) == 0;
        }
    }
    /* Spaces, the padding and a few dict characters take other values
     * harmlessly; most do not. */
    assert_true(accepted > 128 && accepted < 128 * 256 / 4);
    free(mutant);
    free(good);
}

static void test_looks_like_npy_needs_the_magic(void **state)
{
    (void)state;
    assert_true(golden_npy_looks_like("\x93NUMPY\x01\x00", 8));
    assert_true(golden_npy_looks_like("\x93NUMPY", 6));
    assert_false(golden_npy_looks_like("\x93NUMP", 5));
    assert_false(golden_npy_looks_like("\x93NUMPX\x01\x00", 8));
    assert_false(golden_npy_looks_like("", 0));
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s FIXTURE_DIR\n", argv[0]);
        return 2;
    }
    fixtures = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_numpy_files_are_read_with_dtype_shape_and_elements),
        cmocka_unit_test(test_what_is_no_moeperm_tensor_is_refused_with_a_sentence),
        cmocka_unit_test(test_writer_header_equals_numpys_byte_for_byte),
        cmocka_unit_test(test_written_file_reads_back),
        cmocka_unit_test(test_hostile_headers_are_refused_by_name),
        cmocka_unit_test(test_unread_dtypes_are_named_not_miscounted),
        cmocka_unit_test(test_every_truncation_and_byte_mutation_is_refused_or_consistent),
        cmocka_unit_test(test_looks_like_npy_needs_the_magic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
