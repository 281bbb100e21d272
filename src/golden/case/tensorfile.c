/*
 * tensorfile.c - one tensor in one file, as a harness writes it: raw
 * little-endian bytes, or numpy's .npy (npy.c parses and makes its
 * header), told apart by the name's ".npy" suffix.  Reading checks the
 * file against the tensor it should hold.
 */
#include "golden/case/tensorfile.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "golden/case/npy.h"
#include "golden/common/fileio.h"

bool golden_is_npy_name(const char *path)
{
    size_t n = strlen(path);
    return n >= 4 && strcmp(path + n - 4, ".npy") == 0;
}

/* Whether the file at path (dirfd as golden_open_regular() takes it)
 * starts like a numpy file. */
static bool starts_like_npy(int dirfd, const char *path)
{
    unsigned char head[16];
    struct stat st;
    char ignored[8];
    int fd = golden_open_regular(dirfd, path, NULL, &st, ignored, sizeof ignored);
    if (fd < 0)
        return false;
    ssize_t got = read(fd, head, sizeof head);
    close(fd);
    return got > 0 && golden_npy_looks_like(head, (size_t)got);
}

int golden_tensor_file_read(int dirfd, const char *path, const char *what,
                            const moeperm_golden_tensor *like, void **data,
                            char hex[GOLDEN_SHA256_HEX], char *err, size_t err_len)
{
    if (golden_is_npy_name(path)) {
        uint64_t bytes;
        char inner[768];
        if (golden_npy_read_file_at(dirfd, path, like->dtype, like->shape, like->ndim, data,
                                    &bytes, hex, inner, sizeof inner) != 0) {
            snprintf(err, err_len, "%s: %s", what, inner);
            return -1;
        }
        return 0;
    }
    uint64_t size = moeperm_golden_tensor_elements(like) * moeperm_dtype_size(like->dtype);
    if (golden_read_file_at(dirfd, path, what, size, data, hex, err, err_len) == 0)
        return 0;
    if (starts_like_npy(dirfd, path)) {
        size_t used = strlen(err);
        snprintf(err + used, err_len - used,
                 "; the file starts with a numpy header: name it .npy to read it as one");
    }
    return -1;
}

int moeperm_golden_tensor_read_file(const char *path, const moeperm_golden_tensor *like, void **data,
                            char *err, size_t err_len)
{
    char hex[GOLDEN_SHA256_HEX];
    return golden_tensor_file_read(AT_FDCWD, path, like->name ? like->name : "the tensor", like,
                                   data, hex, err, err_len);
}

int moeperm_golden_tensor_write_file(const char *path, const moeperm_golden_tensor *like, const void *data,
                             char *err, size_t err_len)
{
    if (golden_is_npy_name(path))
        return golden_npy_write_file(path, like->dtype, like->shape, like->ndim, data, err,
                                     err_len);
    return moeperm_golden_write_file_atomic(path, data,
                                    moeperm_golden_tensor_elements(like) * moeperm_dtype_size(like->dtype),
                                    err, err_len);
}

/* The dtype a numpy header's descr carries, in this order of preference:
 * '<f2' is float16 and the other 2-byte descrs bf16 bits. */
static int npy_dtype(const golden_npy_header *h, moeperm_dtype *dtype)
{
    static const moeperm_dtype order[] = {MOEPERM_FLOAT, MOEPERM_FLOAT16, MOEPERM_BF16,
                                          MOEPERM_INT8,  MOEPERM_INT32,   MOEPERM_INT64};
    char ignored[256];
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        if (golden_npy_check(h, "", order[i], NULL, 0, ignored, sizeof ignored) == 0) {
            *dtype = order[i];
            return 0;
        }
    return -1;
}

int moeperm_golden_tensor_from_file(const char *path, int dtype, const int64_t *shape, uint64_t ndim,
                            moeperm_golden_tensor *t, char *err, size_t err_len)
{
    char hex[GOLDEN_SHA256_HEX];
    t->data = NULL;
    if (golden_is_npy_name(path)) {
        golden_npy_header h;
        if (golden_npy_read_header(path, &h, err, err_len) != 0)
            return -1;
        if (dtype >= 0) {
            t->dtype = (moeperm_dtype)dtype;
        } else if (npy_dtype(&h, &t->dtype) != 0) {
            snprintf(err, err_len, "%s holds '%s' data, which moeperm does not read: it reads "
                     "float32 '<f4', float16 '<f2', bf16 '<u2', int8 '|i1', int32 '<i4', "
                     "int64 '<i8'", path, h.descr);
            return -1;
        }
        /* A shape given with the file is a claim about it: one the header
         * contradicts is refused, never silently replaced by the header's. */
        bool same = ndim == 0 || ndim == h.ndim;
        for (uint64_t i = 0; same && ndim > 0 && i < ndim; i++)
            same = shape[i] == h.shape[i];
        if (!same) {
            char got[256], given[256];
            golden_npy_format_shape(got, sizeof got, h.shape, h.ndim);
            golden_npy_format_shape(given, sizeof given, shape, ndim);
            snprintf(err, err_len, "%s has shape %s, but the shape given for it is %s", path,
                     got, given);
            return -1;
        }
        t->ndim = h.ndim;
        memcpy(t->shape, h.shape, sizeof t->shape);
    } else {
        if (dtype < 0 || ndim == 0 || !shape) {
            snprintf(err, err_len, "%s is a raw file: give its dtype and shape "
                     "(NAME=FILE:DTYPE:D0xD1), or save it with numpy as .npy", path);
            return -1;
        }
        t->dtype = (moeperm_dtype)dtype;
        t->ndim = ndim;
        memset(t->shape, 0, sizeof t->shape);
        memcpy(t->shape, shape, ndim * sizeof *shape);
    }
    if (moeperm_dtype_size(t->dtype) == 0) {
        snprintf(err, err_len, "%s: dtype %d is not one moeperm knows", path, (int)t->dtype);
        return -1;
    }
    uint64_t bytes = moeperm_dtype_size(t->dtype);
    for (uint64_t i = 0; i < t->ndim; i++) {
        /* The manifest's limit, even for an empty tensor: a case whose
         * manifest its reader refuses must not be made. */
        if (t->shape[i] < 0 || t->shape[i] > MOEPERM_GOLDEN_MAX_DIM) {
            snprintf(err, err_len, "%s: dimension %llu is %lld, beyond the %lld (2^40) a case "
                     "may hold", path, (unsigned long long)i, (long long)t->shape[i],
                     (long long)MOEPERM_GOLDEN_MAX_DIM);
            return -1;
        }
        if (t->shape[i] && bytes > UINT64_MAX / (uint64_t)t->shape[i]) {
            snprintf(err, err_len, "%s: the shape is too large", path);
            return -1;
        }
        bytes *= (uint64_t)t->shape[i];
    }
    if (bytes > SIZE_MAX) {
        snprintf(err, err_len, "%s: %llu bytes, more than this machine can address", path,
                 (unsigned long long)bytes);
        return -1;
    }
    t->bytes = (size_t)bytes;
    return golden_tensor_file_read(AT_FDCWD, path, path, t, &t->data, hex, err, err_len);
}
