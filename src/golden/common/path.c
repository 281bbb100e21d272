/*
 * path.c - paths and directories, for the writers and the walk: names
 * joined once, directories created with their parents, removed only as far
 * as the caller says, and two names swapped in one step where the kernel
 * can.
 */
/* renameat2() and RENAME_EXCHANGE (glibc 2.28 and later). */
#define _GNU_SOURCE
#include "golden/common/path.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/syscall.h>
#endif

#include "golden/common/text.h"

char *golden_join(const char *dir, const char *file)
{
    size_t n = strlen(dir);
    return golden_strdup_printf("%s%s%s", dir, n > 0 && dir[n - 1] == '/' ? "" : "/", file);
}

char *golden_dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return golden_strdup_printf(".");
    if (slash == path)
        return golden_strdup_printf("/");
    return golden_strdup_printf("%.*s", (int)(slash - path), path);
}

const char *golden_base_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

int golden_mkdirs(const char *dir, char *err, size_t err_len)
{
    char *copy = golden_strdup_printf("%s", dir);
    if (!copy) {
        snprintf(err, err_len, "out of memory creating %s", dir);
        return -1;
    }
    for (char *p = copy + 1; ; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char saved = *p;
        *p = '\0';
        if (mkdir(copy, 0777) != 0 && errno != EEXIST) {
            snprintf(err, err_len, "cannot create directory %s: %s", copy, strerror(errno));
            free(copy);
            return -1;
        }
        *p = saved;
        if (saved == '\0')
            break;
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(err, err_len, "%s exists and is not a directory", dir);
        free(copy);
        return -1;
    }
    free(copy);
    return 0;
}

int golden_remove_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? 0 : -1;
    if (!S_ISDIR(st.st_mode))
        return unlink(path);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char *child = golden_join(path, e->d_name);
        if (!child || golden_remove_tree(child) != 0)
            rc = -1;
        free(child);
    }
    closedir(d);
    if (rmdir(path) != 0)
        rc = -1;
    return rc;
}

int golden_remove_listed_dir(const char *dir, const char *const *names, size_t count)
{
    bool *present = calloc(count ? count : 1, sizeof *present);
    if (!present) {
        errno = ENOMEM;
        return -1;
    }
    /* Anything unlisted keeps the whole directory: nothing is unlinked, so
     * what is reported as kept is kept whole.  Only the files the
     * directory holds are unlinked, so each unlink removes a file. */
    DIR *d = opendir(dir);
    if (!d) {
        free(present);
        return -1;
    }
    struct dirent *e;
    bool foreign = false;
    while (!foreign && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        bool known = false;
        for (size_t i = 0; !known && i < count; i++)
            if (strcmp(e->d_name, names[i]) == 0)
                known = present[i] = true;
        foreign = !known;
    }
    closedir(d);
    if (foreign) {
        free(present);
        errno = ENOTEMPTY;
        return -1;
    }
    /* In the list's order, which the caller chose (a case lists case.json
     * last, so a removal cut short never leaves a manifest whose files are
     * gone). */
    for (size_t i = 0; i < count; i++) {
        if (!present[i])
            continue;
        char *path = golden_join(dir, names[i]);
        int rc = path ? unlink(path) : -1;
        int saved = path ? errno : ENOMEM;
        free(path);
        if (rc != 0 && saved != ENOENT) {
            free(present);
            errno = saved;
            return -1;
        }
    }
    free(present);
    /* Whatever appeared meanwhile keeps the directory from going:
     * ENOTEMPTY. */
    return rmdir(dir);
}

int golden_rename_exchange(const char *a, const char *b)
{
#if defined(RENAME_EXCHANGE)
    return renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE);
#elif defined(SYS_renameat2)
    /* A C library without the wrapper, on a kernel that may have the call
     * (Linux 3.15 and later); RENAME_EXCHANGE is (1 << 1) in linux/fs.h. */
    return (int)syscall(SYS_renameat2, AT_FDCWD, a, AT_FDCWD, b, 1 << 1);
#else
    (void)a;
    (void)b;
    errno = ENOSYS;
    return -1;
#endif
}
