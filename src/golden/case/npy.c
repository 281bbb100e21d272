/*
 * npy.c - the .npy header: a hand-written parser for the small subset of
 * Python literals numpy writes (a dict of strings, booleans and a tuple of
 * integers), the writer of numpy's own layout, and whole-file reads and
 * writes.  No general Python parser: what is not this subset is refused.
 */
#include "golden/case/npy.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "golden/common/fileio.h"
#include "golden/common/sha256.h"

static const unsigned char npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

/* The largest dim accepted; with at most 8 of them and 8-byte elements
 * the byte count is then checked for overflow step by step. */
#define NPY_MAX_DIM (INT64_C(1) << 62)

bool golden_npy_looks_like(const void *bytes, size_t size)
{
    return size >= sizeof npy_magic && memcmp(bytes, npy_magic, sizeof npy_magic) == 0;
}

/* ---------------------------------------------------------------------- */
/* The dict literal                                                       */
/* ---------------------------------------------------------------------- */

typedef struct scanner {
    const char *p, *end;
    const char *name;
    char *err;
    size_t err_len;
} scanner;

static void skip_space(scanner *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
        s->p++;
}

static int fail_at(scanner *s, const char *what)
{
    if (s->p >= s->end)
        snprintf(s->err, s->err_len, "%s: the .npy header ends inside its dict (%s)", s->name,
                 what);
    else
        snprintf(s->err, s->err_len, "%s: the .npy header has '%c' where %s belongs", s->name,
                 (*s->p >= 0x20 && *s->p < 0x7f) ? *s->p : '?', what);
    return -1;
}

static bool take(scanner *s, char c)
{
    skip_space(s);
    if (s->p < s->end && *s->p == c) {
        s->p++;
        return true;
    }
    return false;
}

/* A quoted string without escapes; *out gets at most cap-1 bytes, *len the
 * full length. */
static int scan_string(scanner *s, char *out, size_t cap, size_t *len, const char *what)
{
    skip_space(s);
    if (s->p >= s->end || (*s->p != '\'' && *s->p != '"'))
        return fail_at(s, what);
    char quote = *s->p++;
    const char *start = s->p;
    while (s->p < s->end && *s->p != quote) {
        if (*s->p == '\\' || (unsigned char)*s->p < 0x20 || (unsigned char)*s->p >= 0x7f) {
            snprintf(s->err, s->err_len,
                     "%s: the .npy header has an escape or a non-ASCII byte in %s", s->name, what);
            return -1;
        }
        s->p++;
    }
    if (s->p >= s->end)
        return fail_at(s, "the end of a quoted string");
    *len = (size_t)(s->p - start);
    size_t n = *len < cap - 1 ? *len : cap - 1;
    memcpy(out, start, n);
    out[n] = '\0';
    s->p++;
    return 0;
}

static bool take_word(scanner *s, const char *word)
{
    skip_space(s);
    size_t n = strlen(word);
    if ((size_t)(s->end - s->p) >= n && memcmp(s->p, word, n) == 0) {
        const char *after = s->p + n;
        if (after < s->end &&
            ((*after >= 'a' && *after <= 'z') || (*after >= 'A' && *after <= 'Z') ||
             (*after >= '0' && *after <= '9') || *after == '_'))
            return false;
        s->p = after;
        return true;
    }
    return false;
}

/* A tuple of non-negative integers: "()", "(5,)", "(3, 4)", "(3, 4,)";
 * Python 2's "3L" too.  "(5)" is an int in Python, not a tuple. */
static int scan_shape(scanner *s, golden_npy_header *h)
{
    if (!take(s, '('))
        return fail_at(s, "the shape tuple");
    h->ndim = 0;
    bool trailing_comma = false;
    for (;;) {
        skip_space(s);
        if (take(s, ')'))
            break;
        if (s->p >= s->end || *s->p < '0' || *s->p > '9')
            return fail_at(s, "a dim of the shape");
        /* Python 3 refuses "04" (a leading zero), and so does np.load. */
        if (*s->p == '0' && s->p + 1 < s->end && s->p[1] >= '0' && s->p[1] <= '9') {
            snprintf(s->err, s->err_len,
                     "%s: a dim of the .npy shape has a leading zero, which Python (and "
                     "np.load) refuses", s->name);
            return -1;
        }
        int64_t v = 0;
        while (s->p < s->end && *s->p >= '0' && *s->p <= '9') {
            int digit = *s->p - '0';
            if (v > (NPY_MAX_DIM - digit) / 10) {
                snprintf(s->err, s->err_len, "%s: a dim of the .npy shape exceeds 2^62", s->name);
                return -1;
            }
            v = v * 10 + digit;
            s->p++;
        }
        if (s->p < s->end && (*s->p == 'L' || *s->p == 'l'))
            s->p++;
        if (h->ndim == MOEPERM_MAX_DIMS) {
            snprintf(s->err, s->err_len, "%s: the .npy shape has more than %d dims", s->name,
                     MOEPERM_MAX_DIMS);
            return -1;
        }
        h->shape[h->ndim++] = v;
        trailing_comma = take(s, ',');
        if (!trailing_comma) {
            if (!take(s, ')'))
                return fail_at(s, "',' or ')' in the shape");
            break;
        }
    }
    if (h->ndim == 1 && !trailing_comma) {
        snprintf(s->err, s->err_len,
                 "%s: the .npy shape (%" PRId64 ") is an int, not a tuple; numpy writes (%" PRId64
                 ",)",
                 s->name, h->shape[0], h->shape[0]);
        return -1;
    }
    return 0;
}

/* A descr numpy writes for a plain array: byte order, kind, size, and
 * for a date or time kind its unit ("<M8[ns]").  The size of 'U' counts
 * characters of 4 bytes each.  'O' holds pickled Python objects, whose
 * bytes no size describes: refused here. */
static int descr_itemsize(const char *descr, size_t *itemsize)
{
    size_t n = strlen(descr);
    if (n >= 5 && (descr[1] == 'm' || descr[1] == 'M') && descr[n - 1] == ']' &&
        strchr(descr, '['))
        n = (size_t)(strchr(descr, '[') - descr);
    if (n < 3 || n > 4 || !strchr("<>|=", descr[0]) || !strchr("biufcVSUmM", descr[1]))
        return -1;
    size_t v = 0;
    for (size_t i = 2; i < n; i++) {
        if (descr[i] < '0' || descr[i] > '9')
            return -1;
        v = v * 10 + (size_t)(descr[i] - '0');
    }
    if (v == 0)
        return -1;
    *itemsize = descr[1] == 'U' ? 4 * v : v;
    return 0;
}

static int parse_dict(scanner *s, golden_npy_header *h)
{
    bool have_descr = false, have_order = false, have_shape = false;
    if (!take(s, '{'))
        return fail_at(s, "the opening '{'");
    for (;;) {
        if (take(s, '}'))
            break;
        char key[32];
        size_t key_len;
        if (scan_string(s, key, sizeof key, &key_len, "a key") != 0)
            return -1;
        if (!take(s, ':'))
            return fail_at(s, "':' after a key");
        bool *seen;
        if (strcmp(key, "descr") == 0 && key_len == 5)
            seen = &have_descr;
        else if (strcmp(key, "fortran_order") == 0 && key_len == 13)
            seen = &have_order;
        else if (strcmp(key, "shape") == 0 && key_len == 5)
            seen = &have_shape;
        else {
            snprintf(s->err, s->err_len,
                     "%s: the .npy header has the key '%s'; only 'descr', 'fortran_order' and "
                     "'shape' belong there",
                     s->name, key);
            return -1;
        }
        if (*seen) {
            snprintf(s->err, s->err_len, "%s: the .npy header gives '%s' twice", s->name, key);
            return -1;
        }
        *seen = true;
        if (seen == &have_descr) {
            skip_space(s);
            if (s->p < s->end && (*s->p == '[' || *s->p == '(')) {
                snprintf(s->err, s->err_len,
                         "%s holds a structured dtype; only plain arrays are read", s->name);
                return -1;
            }
            size_t len;
            if (scan_string(s, h->descr, sizeof h->descr, &len, "the descr string") != 0)
                return -1;
            if (len < sizeof h->descr && h->descr[0] && h->descr[1] == 'O') {
                snprintf(s->err, s->err_len,
                         "%s holds Python objects ('%s'); only plain numeric arrays are read",
                         s->name, h->descr);
                return -1;
            }
            if (len >= sizeof h->descr || descr_itemsize(h->descr, &h->itemsize) != 0) {
                snprintf(s->err, s->err_len, "%s: '%s' is not a numpy dtype string", s->name,
                         h->descr);
                return -1;
            }
        } else if (seen == &have_order) {
            if (take_word(s, "True"))
                h->fortran_order = true;
            else if (take_word(s, "False"))
                h->fortran_order = false;
            else
                return fail_at(s, "True or False for 'fortran_order'");
        } else if (scan_shape(s, h) != 0) {
            return -1;
        }
        if (!take(s, ',')) {
            if (!take(s, '}'))
                return fail_at(s, "',' or '}' in the dict");
            break;
        }
    }
    skip_space(s);
    if (s->p != s->end) {
        snprintf(s->err, s->err_len, "%s: the .npy header has bytes after its dict", s->name);
        return -1;
    }
    if (!have_descr || !have_order || !have_shape) {
        snprintf(s->err, s->err_len, "%s: the .npy header lacks '%s'", s->name,
                 !have_descr   ? "descr"
                 : !have_order ? "fortran_order"
                               : "shape");
        return -1;
    }
    return 0;
}

void golden_npy_format_shape(char *out, size_t cap, const int64_t *shape, uint64_t ndim)
{
    /* At most 8 dims of at most 20 characters: cap is never reached. */
    size_t n = (size_t)snprintf(out, cap, "(");
    for (uint64_t i = 0; i < ndim && n < cap; i++)
        n += (size_t)snprintf(out + n, cap - n, "%s%" PRId64, i ? ", " : "", shape[i]);
    if (n < cap)
        snprintf(out + n, cap - n, ndim == 1 ? ",)" : ")");
}

int golden_npy_parse(const void *bytes, size_t size, uint64_t file_size, const char *name,
                     golden_npy_header *h, char *err, size_t err_len)
{
    const unsigned char *b = bytes;
    memset(h, 0, sizeof *h);
    if (size > file_size)
        size = (size_t)file_size;
    if (!golden_npy_looks_like(bytes, size)) {
        snprintf(err, err_len, "%s does not start with the .npy magic \\x93NUMPY", name);
        return -1;
    }
    if (size < 8) {
        snprintf(err, err_len, "%s ends inside its .npy header", name);
        return -1;
    }
    h->major = b[6];
    h->minor = b[7];
    if (h->major < 1 || h->major > 3 || h->minor != 0) {
        snprintf(err, err_len, "%s is .npy format %u.%u; only 1.0, 2.0 and 3.0 are read", name,
                 h->major, h->minor);
        return -1;
    }
    size_t prefix = h->major == 1 ? 10 : 12;
    if (size < prefix) {
        snprintf(err, err_len, "%s ends inside its .npy header", name);
        return -1;
    }
    uint64_t header_len = h->major == 1 ? (uint64_t)b[8] | (uint64_t)b[9] << 8
                                        : (uint64_t)b[8] | (uint64_t)b[9] << 8 |
                                              (uint64_t)b[10] << 16 | (uint64_t)b[11] << 24;
    if (header_len > GOLDEN_NPY_MAX_HEADER - prefix) {
        snprintf(err, err_len,
                 "%s: the .npy header claims %" PRIu64 " bytes, more than the %zu accepted", name,
                 header_len, GOLDEN_NPY_MAX_HEADER - prefix);
        return -1;
    }
    h->data_offset = prefix + header_len;
    if (h->data_offset > file_size) {
        snprintf(err, err_len,
                 "%s: the .npy header claims %" PRIu64 " bytes, past the end of the %" PRIu64
                 "-byte file",
                 name, header_len, file_size);
        return -1;
    }
    if (h->data_offset > size) {
        snprintf(err, err_len, "%s: only %zu bytes of its %" PRIu64 "-byte .npy header were read",
                 name, size, h->data_offset);
        return -1;
    }
    for (size_t i = prefix; i < h->data_offset; i++) {
        if (b[i] == 0 || b[i] >= 0x80) {
            snprintf(err, err_len, "%s: the .npy header has byte 0x%02x at offset %zu", name, b[i],
                     i);
            return -1;
        }
    }
    scanner s = {(const char *)b + prefix, (const char *)b + h->data_offset, name, err, err_len};
    if (parse_dict(&s, h) != 0)
        return -1;

    if (h->descr[0] == '>' && h->itemsize > 1) {
        snprintf(err, err_len,
                 "%s holds big-endian '%s' data; only little-endian .npy files are read "
                 "(numpy: a.astype('<%s'))",
                 name, h->descr, h->descr + 1);
        return -1;
    }
    h->elements = 1;
    uint64_t beyond_one = 0;
    for (uint64_t i = 0; i < h->ndim; i++) {
        if (__builtin_mul_overflow(h->elements, (uint64_t)h->shape[i], &h->elements)) {
            char text[256];
            golden_npy_format_shape(text, sizeof text, h->shape, h->ndim);
            snprintf(err, err_len, "%s: the .npy shape %s has more elements than 2^64", name, text);
            return -1;
        }
        beyond_one += h->shape[i] > 1;
    }
    /* Fortran order is the same memory as C order when at most one dim
     * exceeds 1 (or there is nothing to order). */
    if (h->fortran_order && beyond_one > 1 && h->elements > 0) {
        snprintf(err, err_len,
                 "%s is in Fortran order; only C order is read (numpy: np.ascontiguousarray(a))",
                 name);
        return -1;
    }
    if (__builtin_mul_overflow(h->elements, (uint64_t)h->itemsize, &h->data_bytes)) {
        char text[256];
        golden_npy_format_shape(text, sizeof text, h->shape, h->ndim);
        snprintf(err, err_len, "%s: the .npy shape %s of '%s' has more bytes than 2^64", name, text,
                 h->descr);
        return -1;
    }
    if (h->data_bytes != file_size - h->data_offset) {
        char text[256];
        golden_npy_format_shape(text, sizeof text, h->shape, h->ndim);
        snprintf(err, err_len,
                 "%s has %" PRIu64 " bytes after its %" PRIu64 "-byte header; shape %s of '%s' "
                 "needs %" PRIu64,
                 name, file_size - h->data_offset, h->data_offset, text, h->descr, h->data_bytes);
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Dtypes and shapes                                                      */
/* ---------------------------------------------------------------------- */

/* The descrs that carry each dtype, the first being what the writer uses,
 * and how a message lists them. */
typedef struct npy_dtype {
    moeperm_dtype dtype;
    const char *descrs[4];
    const char *listed;
} npy_dtype;

static const npy_dtype npy_dtypes[] = {
    {MOEPERM_FLOAT, {"<f4"}, "'<f4'"},
    {MOEPERM_FLOAT16, {"<f2"}, "'<f2'"},
    {MOEPERM_BF16, {"<u2", "<i2", "<V2", "|V2"}, "'<u2', '<i2' or '<V2'"},
    {MOEPERM_INT32, {"<i4"}, "'<i4'"},
    {MOEPERM_INT64, {"<i8"}, "'<i8'"},
    {MOEPERM_INT8, {"|i1", "<i1"}, "'|i1'"},
};

static const npy_dtype *find_dtype(moeperm_dtype dtype)
{
    for (size_t i = 0; i < sizeof npy_dtypes / sizeof npy_dtypes[0]; i++)
        if (npy_dtypes[i].dtype == dtype)
            return &npy_dtypes[i];
    return NULL;
}

const char *golden_npy_descr(moeperm_dtype dtype)
{
    const npy_dtype *d = find_dtype(dtype);
    return d ? d->descrs[0] : NULL;
}

int golden_npy_check(const golden_npy_header *h, const char *name, moeperm_dtype dtype,
                     const int64_t *shape, uint64_t ndim, char *err, size_t err_len)
{
    const npy_dtype *d = find_dtype(dtype);
    if (!d) {
        snprintf(err, err_len, "%s: dtype %d has no .npy form", name, (int)dtype);
        return -1;
    }
    bool carries = false;
    for (size_t i = 0; i < 4 && d->descrs[i]; i++)
        carries |= strcmp(h->descr, d->descrs[i]) == 0;
    if (!carries) {
        snprintf(err, err_len, "%s holds '%s' data, expected %s (%s)", name, h->descr,
                 moeperm_dtype_name(dtype), d->listed);
        return -1;
    }
    if (!shape)
        return 0;
    bool same = h->ndim == ndim;
    for (uint64_t i = 0; same && i < ndim; i++)
        same = h->shape[i] == shape[i];
    if (!same) {
        char got[256], want[256];
        golden_npy_format_shape(got, sizeof got, h->shape, h->ndim);
        golden_npy_format_shape(want, sizeof want, shape, ndim);
        snprintf(err, err_len, "%s has shape %s, expected %s", name, got, want);
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Writing                                                                */
/* ---------------------------------------------------------------------- */

size_t golden_npy_format_header(moeperm_dtype dtype, const int64_t *shape, uint64_t ndim,
                                char out[GOLDEN_NPY_HEADER_CAP])
{
    const char *descr = golden_npy_descr(dtype);
    if (!descr || ndim > MOEPERM_MAX_DIMS)
        return 0;
    for (uint64_t i = 0; i < ndim; i++)
        if (shape[i] < 0)
            return 0;
    /* numpy's layout: keys sorted, repr() of each value, then spaces so the
     * first dim can grow to 21 digits in place, then padding so that the
     * data starts on a 64-byte boundary, then a newline. */
    char dict[GOLDEN_NPY_HEADER_CAP];
    char tuple[256];
    golden_npy_format_shape(tuple, sizeof tuple, shape, ndim);
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                     descr, tuple);
    if (ndim > 0) {
        char first[24];
        int digits = snprintf(first, sizeof first, "%" PRId64, shape[0]);
        for (int i = digits; i < 21; i++)
            dict[n++] = ' ';
        dict[n] = '\0';
    }
    size_t total = 10 + (size_t)n + 1;
    size_t pad = 64 - total % 64;
    total += pad;
    if (total > GOLDEN_NPY_HEADER_CAP)
        return 0;
    size_t header_len = total - 10;
    memcpy(out, npy_magic, sizeof npy_magic);
    out[6] = 1;
    out[7] = 0;
    out[8] = (char)(header_len & 0xff);
    out[9] = (char)(header_len >> 8);
    memcpy(out + 10, dict, (size_t)n);
    memset(out + 10 + n, ' ', pad);
    out[total - 1] = '\n';
    return total;
}

int golden_npy_write_file(const char *path, moeperm_dtype dtype, const int64_t *shape,
                          uint64_t ndim, const void *data, char *err, size_t err_len)
{
    char header[GOLDEN_NPY_HEADER_CAP];
    size_t header_size = golden_npy_format_header(dtype, shape, ndim, header);
    if (header_size == 0) {
        snprintf(err, err_len, "%s: a tensor of dtype %s and %" PRIu64 " dims has no .npy form",
                 path, moeperm_dtype_name(dtype), ndim);
        return -1;
    }
    uint64_t bytes = moeperm_dtype_size(dtype);
    for (uint64_t i = 0; i < ndim; i++) {
        if (__builtin_mul_overflow(bytes, (uint64_t)shape[i], &bytes) || bytes > SIZE_MAX) {
            snprintf(err, err_len, "%s: the tensor has more bytes than memory holds", path);
            return -1;
        }
    }
    return golden_write_file_atomic_with_header(path, header, header_size, data, (size_t)bytes, err,
                                                err_len);
}

/* ---------------------------------------------------------------------- */
/* Reading                                                                */
/* ---------------------------------------------------------------------- */

/* Opens the .npy file at path (dirfd as golden_open_regular() takes it)
 * and parses its header into *h: *fd, and the header's bytes in *head
 * (malloc'd) for the hash, on success; -1 with a sentence in err (nothing
 * left open) on failure. */
static int open_npy(int dirfd, const char *path, int *fd, uint8_t **head, golden_npy_header *h,
                    uint64_t *file_size, char *err, size_t err_len)
{
    struct stat st;
    *head = NULL;
    *fd = golden_open_regular(dirfd, path, NULL, &st, err, err_len);
    if (*fd < 0)
        return -1;
    *file_size = (uint64_t)st.st_size;
    size_t head_size =
        *file_size < GOLDEN_NPY_MAX_HEADER ? (size_t)*file_size : GOLDEN_NPY_MAX_HEADER;
    *head = malloc(head_size ? head_size : 1);
    if (!*head) {
        snprintf(err, err_len, "out of memory reading %s", path);
    } else if (golden_pread_all(*fd, *head, head_size, 0) != 0) {
        snprintf(err, err_len, "reading %s failed: %s", path, strerror(errno));
    } else if (golden_npy_parse(*head, head_size, *file_size, path, h, err, err_len) == 0) {
        return 0;
    }
    free(*head);
    *head = NULL;
    close(*fd);
    *fd = -1;
    return -1;
}

int golden_npy_read_header(const char *path, golden_npy_header *h, char *err, size_t err_len)
{
    int fd;
    uint8_t *head;
    uint64_t file_size;
    if (open_npy(AT_FDCWD, path, &fd, &head, h, &file_size, err, err_len) != 0)
        return -1;
    free(head);
    close(fd);
    return 0;
}

int golden_npy_read_file(const char *path, moeperm_dtype dtype, const int64_t *shape, uint64_t ndim,
                         void **data, uint64_t *data_bytes, char hex[65], char *err, size_t err_len)
{
    return golden_npy_read_file_at(AT_FDCWD, path, dtype, shape, ndim, data, data_bytes, hex, err,
                                   err_len);
}

int golden_npy_read_file_at(int dirfd, const char *path, moeperm_dtype dtype,
                            const int64_t *shape, uint64_t ndim, void **data,
                            uint64_t *data_bytes, char hex[65], char *err, size_t err_len)
{
    *data = NULL;
    *data_bytes = 0;
    int fd;
    uint8_t *head;
    uint64_t file_size;
    golden_npy_header h;
    if (open_npy(dirfd, path, &fd, &head, &h, &file_size, err, err_len) != 0)
        return -1;
    if (golden_npy_check(&h, path, dtype, shape, ndim, err, err_len) != 0) {
        free(head);
        close(fd);
        return -1;
    }
    if (h.data_bytes > SIZE_MAX) {
        snprintf(err, err_len, "%s: %" PRIu64 " bytes of data, more than this machine addresses",
                 path, h.data_bytes);
        free(head);
        close(fd);
        return -1;
    }
    uint8_t *buffer = NULL;
    if (h.data_bytes > 0) {
        buffer = malloc((size_t)h.data_bytes);
        if (!buffer) {
            snprintf(err, err_len, "out of memory for the %" PRIu64 " bytes of %s", h.data_bytes,
                     path);
            free(head);
            close(fd);
            return -1;
        }
        if (golden_pread_all(fd, buffer, (size_t)h.data_bytes, h.data_offset) != 0) {
            snprintf(err, err_len, "reading %s failed: %s", path, strerror(errno));
            free(buffer);
            free(head);
            close(fd);
            return -1;
        }
    }
    close(fd);
    if (hex) {
        golden_sha256 hash;
        golden_sha256_init(&hash);
        golden_sha256_update(&hash, head, (size_t)h.data_offset);
        golden_sha256_update(&hash, buffer, (size_t)h.data_bytes);
        if (golden_sha256_finish(&hash, hex) != 0) {
            snprintf(err, err_len, "out of memory hashing %s", path);
            free(buffer);
            free(head);
            return -1;
        }
    }
    free(head);
    *data = buffer;
    *data_bytes = h.data_bytes;
    return 0;
}
