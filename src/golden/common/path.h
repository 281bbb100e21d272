/*
 * path.h - paths and directories: joining a name to a directory, the parts
 * of a path, creating and removing directories, and swapping two names.
 */
#ifndef MOEPERM_GOLDEN_COMMON_PATH_H
#define MOEPERM_GOLDEN_COMMON_PATH_H

#include <stddef.h>

/* dir/file, malloc'd, without doubling a slash dir already ends with
 * ("c1/" gives "c1/case.json", not "c1//case.json"); NULL when memory
 * runs out. */
char *golden_join(const char *dir, const char *file);

/* The directory part of path: "." when there is none, "/" for a file at
 * the root (malloc'd; NULL when memory runs out). */
char *golden_dir_of(const char *path);

/* The last component of path (a pointer into it). */
const char *golden_base_of(const char *path);

/* Creates dir and its missing parents (mode 0777 less umask).  Returns 0 or
 * -1 with a sentence in err. */
int golden_mkdirs(const char *dir, char *err, size_t err_len);

/* Removes path and, if it is a directory, everything below it (no links
 * followed).  Returns 0 or -1 with errno set.  Only for directories this
 * process created itself: a directory that was already there goes through
 * golden_remove_listed_dir(). */
int golden_remove_tree(const char *path);

/* golden_remove_listed_dir() removes a directory without recursing: the
 * files of names[0..count) that it holds, in that order, then the
 * directory.  A directory holding anything not in the list is left
 * untouched, listed files included (ENOTEMPTY), so it never removes what
 * the list does not name.  Returns 0 or -1 with errno set (an unlink
 * failing partway, e.g. EACCES, can still leave part of it). */
int golden_remove_listed_dir(const char *dir, const char *const *names, size_t count);

/* golden_rename_exchange() swaps the names a and b atomically
 * (renameat2(RENAME_EXCHANGE)): both must exist, and at every moment each
 * name holds one of the two.  Returns 0, or -1 with errno set: EINVAL,
 * ENOSYS or EOPNOTSUPP where the file system or the kernel cannot exchange
 * (the caller then falls back to two renames). */
int golden_rename_exchange(const char *a, const char *b);

#endif
