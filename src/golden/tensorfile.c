/*
 * tensorfile.c - one tensor in one file, as a harness writes it: raw
 * little-endian bytes, or numpy's .npy (npy.c parses and makes its
 * header).  Reading checks the file against the tensor it should hold.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden/internal.h"

int golden_tensor_read_file(const char *path, const golden_tensor *like, void **data,
                            char *err, size_t err_len)
{
    char hex[GOLDEN_SHA256_HEX];
    char what[96];
    snprintf(what, sizeof what, "%s", like->name ? like->name : "the tensor");
    return golden_read_file(path, what, golden_tensor_elements(like) *
                                            moeperm_dtype_size(like->dtype),
                            data, hex, err, err_len);
}

int golden_tensor_write_file(const char *path, const golden_tensor *like, const void *data,
                             char *err, size_t err_len)
{
    return golden_write_file_atomic(path, data,
                                    golden_tensor_elements(like) * moeperm_dtype_size(like->dtype),
                                    err, err_len);
}
