/*
 * casedir.h - a case directory being written: the temporary sibling the
 * case is written into, and how it is put in place, replacing an existing
 * case only when that is a case.  The writer (writer.h) fills it.
 */
#ifndef MOEPERM_GOLDEN_CASE_CASEDIR_H
#define MOEPERM_GOLDEN_CASE_CASEDIR_H

#include <stdbool.h>
#include <stddef.h>

typedef struct golden_case_dir {
    char *path;   /* the case directory, without trailing slashes */
    char *parent; /* its directory */
    char *tmp;    /* the temporary directory the case is written into ("" once removed) */
    char *old;    /* the name an existing case is parked under */
    bool exists;  /* path held something when it was opened */
    int tmp_slot; /* golden_temp_track() slot of tmp */
} golden_case_dir;

/*
 * golden_case_dir_open() checks path as moeperm_golden_case_write() does
 * (refused without force when it exists; with force only a case or an
 * empty directory is replaced; a name whose temporaries would not fit is
 * refused), creates its parents and the temporary directory the case is
 * written into, and tracks it for the cleanup on a signal.  Returns 0, or
 * -1 with a sentence in err (nothing at path changed, *d closed).
 */
int golden_case_dir_open(golden_case_dir *d, const char *path, bool force, char *err,
                         size_t err_len);

/* Writes size bytes as file in the temporary directory and fsyncs it.
 * Returns 0 or -1 with a sentence in err. */
int golden_case_dir_write_file(const golden_case_dir *d, const char *file, const void *data,
                               size_t size, char *err, size_t err_len);

/* Puts the finished temporary directory in place (swapping it with an
 * existing case where the file system can, docs/reliability.md), then
 * removes the case it replaced.  Returns as moeperm_golden_case_write():
 * 0, 1 (the old case could not be removed entirely), or -1 with nothing at
 * path changed. */
int golden_case_dir_commit(golden_case_dir *d, char *err, size_t err_len);

/* Removes the temporary directory unless it was put in place (remove_tmp
 * false), stops tracking it and frees what d owns. */
void golden_case_dir_close(golden_case_dir *d, bool remove_tmp);

/* golden_remove_case_dir() removes a case directory without recursing: the
 * files a case may hold (case.json last), then the directory; one holding
 * anything else is left untouched (ENOTEMPTY).  Returns 0 or -1 with errno
 * set. */
int golden_remove_case_dir(const char *dir);

#endif
