/*
 * fileio.h - whole-file reads and writes that never leave a partial output.
 *
 * Golden tensors can exceed 4 GiB and read()/write() may move fewer bytes
 * than asked, so every transfer loops with 64-bit sizes.  Outputs go to a
 * temporary name in the destination directory and are renamed into place
 * only when complete: a reader, or a later run, sees either the old file or
 * the whole new one, never a torn one.  The temporary is tracked
 * (tempfiles.h), so a signal that ends the process removes it.
 */
#ifndef MOEPERM_GOLDEN_COMMON_FILEIO_H
#define MOEPERM_GOLDEN_COMMON_FILEIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "golden/common/sha256.h"

/*
 * golden_read_file() reads exactly `size` bytes of the file at path into
 * *data (malloc'd; NULL when size is 0), hashing them as it goes into hex.
 * The file must be a regular file of exactly that size.  Returns 0, or -1
 * with a sentence in err (prefixed by what, e.g. "tensors.input_grad").
 */
int golden_read_file(const char *path, const char *what, uint64_t size, void **data,
                     char hex[GOLDEN_SHA256_HEX], char *err, size_t err_len);

/* Reads a small text file (at most max_size bytes) into a NUL-terminated
 * malloc'd string.  Returns 0 or -1 with a sentence in err. */
int golden_read_text(const char *path, size_t max_size, char **text, char *err, size_t err_len);

/*
 * The same, reading the file whose last component is path's in the
 * directory open at dirfd (path itself when dirfd is AT_FDCWD; messages
 * name path either way).  A case is read through one handle on its
 * directory, so a replacement that swaps the directory's name with
 * another (renameat2 RENAME_EXCHANGE) cannot mix the files of two cases.
 */
int golden_read_file_at(int dirfd, const char *path, const char *what, uint64_t size,
                        void **data, char hex[GOLDEN_SHA256_HEX], char *err, size_t err_len);
int golden_read_text_at(int dirfd, const char *path, size_t max_size, char **text, char *err,
                        size_t err_len);

/*
 * golden_open_regular() opens a file for reading as the readers above do
 * (dirfd as there; without blocking on a FIFO) and fills *st: the file
 * descriptor, or -1 with a sentence in err, prefixed by "WHAT: " when what
 * is not NULL, that says why: the system's reason for a file that cannot
 * be opened, or what the file is when it is not a regular file ("... is
 * not a regular file: it is a directory").
 */
struct stat;
int golden_open_regular(int dirfd, const char *path, const char *what, struct stat *st,
                        char *err, size_t err_len);

/* pread()/pwrite() of all size bytes at offset, looping on short transfers
 * and EINTR.  Returns 0 or -1 with errno set (EIO for an end of file
 * before size bytes, or a write that moved nothing). */
int golden_pread_all(int fd, void *data, size_t size, uint64_t offset);
int golden_pwrite_all(int fd, const void *data, size_t size, uint64_t offset);

/* moeperm_golden_write_file_atomic() (golden.h) with header_size bytes of
 * header written before the data (a .npy header), so a large tensor is not
 * copied to prepend a few bytes.  Like it, it never replaces what is not a
 * regular file. */
int golden_write_file_atomic_with_header(const char *path, const void *header,
                                         size_t header_size, const void *data, size_t size,
                                         char *err, size_t err_len);

#endif
