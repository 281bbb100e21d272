/*
 * tensorfile.c - one tensor in one file, as a harness writes it: raw
 * little-endian bytes, or numpy's .npy (npy.c parses and makes its
 * header), told apart by the name's ".npy" suffix.  Reading checks the
 * file against the tensor it should hold.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "golden/internal.h"
#include "golden/npy.h"

bool golden_is_npy_name(const char *path)
{
    size_t n = strlen(path);
    return n >= 4 && strcmp(path + n - 4, ".npy") == 0;
}

/* Whether the file at path starts like a numpy file. */
static bool starts_like_npy(const char *path)
{
    unsigned char head[16];
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return false;
    ssize_t got = read(fd, head, sizeof head);
    close(fd);
    return got > 0 && golden_npy_looks_like(head, (size_t)got);
}

int golden_tensor_file_read(const char *path, const char *what, const golden_tensor *like,
                            void **data, char hex[GOLDEN_SHA256_HEX], char *err, size_t err_len)
{
    if (golden_is_npy_name(path)) {
        uint64_t bytes;
        char inner[768];
        if (golden_npy_read_file(path, like->dtype, like->shape, like->ndim, data, &bytes, hex,
                                 inner, sizeof inner) != 0) {
            snprintf(err, err_len, "%s: %s", what, inner);
            return -1;
        }
        return 0;
    }
    uint64_t size = golden_tensor_elements(like) * moeperm_dtype_size(like->dtype);
    if (golden_read_file(path, what, size, data, hex, err, err_len) == 0)
        return 0;
    if (starts_like_npy(path)) {
        size_t used = strlen(err);
        snprintf(err + used, err_len - used,
                 "; the file starts with a numpy header: name it .npy to read it as one");
    }
    return -1;
}

int golden_tensor_read_file(const char *path, const golden_tensor *like, void **data,
                            char *err, size_t err_len)
{
    char hex[GOLDEN_SHA256_HEX];
    return golden_tensor_file_read(path, like->name ? like->name : "the tensor", like, data, hex,
                                   err, err_len);
}

int golden_tensor_write_file(const char *path, const golden_tensor *like, const void *data,
                             char *err, size_t err_len)
{
    if (golden_is_npy_name(path))
        return golden_npy_write_file(path, like->dtype, like->shape, like->ndim, data, err,
                                     err_len);
    return golden_write_file_atomic(path, data,
                                    golden_tensor_elements(like) * moeperm_dtype_size(like->dtype),
                                    err, err_len);
}
