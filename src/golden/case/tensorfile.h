/*
 * tensorfile.h - one tensor in one file: raw little-endian bytes, or
 * numpy's .npy, told apart by the name.
 */
#ifndef MOEPERM_GOLDEN_CASE_TENSORFILE_H
#define MOEPERM_GOLDEN_CASE_TENSORFILE_H

#include <stdbool.h>
#include <stddef.h>

#include <moeperm/golden.h>

#include "golden/common/sha256.h"

/* Whether path names a numpy file (it ends in ".npy"). */
bool golden_is_npy_name(const char *path);

/* Reads a tensor file (raw, or .npy by its name) shaped and typed like
 * `like`, hashing the whole file into hex; what prefixes messages.  The
 * file is path's last component in the directory open at dirfd, or path
 * itself when dirfd is AT_FDCWD (fileio.h). */
int golden_tensor_file_read(int dirfd, const char *path, const char *what,
                            const moeperm_golden_tensor *like, void **data,
                            char hex[GOLDEN_SHA256_HEX], char *err, size_t err_len);

#endif
