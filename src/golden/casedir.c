/*
 * casedir.c - a case directory on disk: written whole into a temporary
 * sibling and put in place atomically, replacing an existing case only
 * when it is one (--force never takes anything else with it).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <dirent.h>
#include <unistd.h>

#include "golden/internal.h"

/* dir/file, malloc'd, without doubling a slash dir already ends with. */
static char *join_dir(const char *dir, const char *file)
{
    size_t n = strlen(dir);
    return golden_strdup_printf("%s%s%s", dir, n > 0 && dir[n - 1] == '/' ? "" : "/", file);
}

static char *dup_string(const char *s)
{
    return golden_strdup_printf("%s", s);
}

static int write_in(const char *dir, const char *file, const void *data, size_t size,
                    char *err, size_t err_len)
{
    char *path = golden_strdup_printf("%s/%s", dir, file);
    if (!path) {
        snprintf(err, err_len, "out of memory writing %s", dir);
        return -1;
    }
    /* fsync before the directory is renamed into place, as for single
     * files: after a power loss a case that looks complete is complete. */
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    int rc = 0;
    if (fd < 0) {
        rc = -1;
    } else {
        if (golden_write_all(fd, data, size) != 0 || fsync(fd) != 0)
            rc = -1;
        if (close(fd) != 0)
            rc = -1;
    }
    if (rc != 0)
        snprintf(err, err_len, "writing %s failed: %s", path, strerror(errno));
    free(path);
    return rc;
}

/* --force replaces a case, not whatever happens to hold the name: a
 * mistyped --name or --out must not take a directory of results with it.
 * So the target must be a directory holding case.json and nothing but the
 * files a case holds (golden_case_file_name()), or nothing at all (an empty
 * directory loses nothing).  The first offending entry in byte order is
 * named, so the message does not depend on the file system's order.
 * Returns 0 when the directory may be replaced. */
static int check_replaceable(const char *path, const struct stat *st, char *err,
                             size_t err_len)
{
    if (S_ISLNK(st->st_mode) || !S_ISDIR(st->st_mode)) {
        snprintf(err, err_len, "%s exists and is %s, not a case directory; --force replaces only "
                 "a case, so nothing was changed", path,
                 S_ISLNK(st->st_mode) ? "a symbolic link" : "not a directory");
        return -1;
    }
    DIR *d = opendir(path);
    if (!d) {
        /* Gone since the lstat (another writer parked it): nothing to lose,
         * and the rename that follows reports what it finds. */
        if (errno == ENOENT)
            return 0;
        snprintf(err, err_len, "cannot read %s to check that it is a case: %s", path,
                 strerror(errno));
        return -1;
    }
    char *first = NULL; /* the offending entry that sorts first */
    bool first_is_known = false, has_manifest = false, has_any = false;
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        has_any = true;
        bool known = golden_case_file_name(e->d_name);
        bool ok = known;
        if (known) {
            /* a tensor file name as a directory would be removed with its
             * contents; only plain files are part of a case. */
            struct stat est;
            char *entry = join_dir(path, e->d_name);
            if (!entry)
                rc = -1;
            ok = entry && lstat(entry, &est) == 0 && S_ISREG(est.st_mode);
            free(entry);
        }
        if (ok) {
            has_manifest = has_manifest || strcmp(e->d_name, "case.json") == 0;
            continue;
        }
        if (!first || strcmp(e->d_name, first) < 0) {
            free(first);
            first = dup_string(e->d_name);
            first_is_known = known;
            if (!first)
                rc = -1;
        }
    }
    closedir(d);
    if (rc != 0) {
        snprintf(err, err_len, "out of memory checking %s", path);
    } else if (first) {
        snprintf(err, err_len, "%s is not a golden case directory: it holds \"%s\"%s; --force "
                 "replaces only a directory holding case.json and the case's .bin files, so "
                 "nothing was changed", path, first,
                 first_is_known ? ", which is not a regular file" : "");
        rc = -1;
    } else if (has_any && !has_manifest) {
        snprintf(err, err_len, "%s is not a golden case directory: it holds no case.json; "
                 "--force replaces only a case, so nothing was changed", path);
        rc = -1;
    }
    free(first);
    return rc;
}

int golden_case_write(const char *path_arg, const golden_case *c, bool force, char *err,
                      size_t err_len)
{
    if (path_arg[0] == '\0') {
        snprintf(err, err_len, "the case directory to write is an empty string");
        return -1;
    }
    /* "out/c1/" names c1: without the slash its parent is "out", not "out/c1". */
    char *path = dup_string(path_arg);
    if (!path) {
        snprintf(err, err_len, "out of memory writing %s", path_arg);
        return -1;
    }
    for (size_t n = strlen(path); n > 1 && path[n - 1] == '/'; n--)
        path[n - 1] = '\0';
    if (strcmp(path, "/") == 0) {
        snprintf(err, err_len, "cannot write a case as the root directory /");
        free(path);
        return -1;
    }

    struct stat st;
    bool exists = lstat(path, &st) == 0;
    if (exists && !force) {
        snprintf(err, err_len, "%s already exists; pass --force to replace it", path);
        free(path);
        return -1;
    }
    if (exists && check_replaceable(path, &st, err, err_len) != 0) {
        free(path);
        return -1;
    }

    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    char *parent = golden_dir_of(path);
    if (!parent) {
        snprintf(err, err_len, "out of memory writing %s", path);
        free(path);
        return -1;
    }
    if (golden_mkdirs(parent, err, err_len) != 0) {
        free(parent);
        free(path);
        return -1;
    }
    char *tmp = golden_strdup_printf("%s/.%s.tmp.XXXXXX", parent, base);
    char *old = golden_strdup_printf("%s/.%s.old.XXXXXX", parent, base);
    size_t manifest_size = 0;
    char *manifest = golden_manifest_text(c, &manifest_size);
    int rc = -1, tmp_slot = -1, old_slot = -1;
    /* Each step that creates or parks a directory runs with signals held
     * and registers it before they are let in, so that a signal's cleanup
     * (fileio.h) always knows every temporary and the parked old case. */
    sigset_t all, unblocked;
    sigfillset(&all);

    if (!tmp || !old || !manifest) {
        snprintf(err, err_len, "out of memory writing %s", path);
        goto done;
    }
    sigprocmask(SIG_BLOCK, &all, &unblocked);
    if (mkdtemp(tmp))
        tmp_slot = golden_temp_track(GOLDEN_TEMP_CASE_DIR, tmp, NULL);
    else
        tmp[0] = '\0';
    sigprocmask(SIG_SETMASK, &unblocked, NULL);
    if (!tmp[0]) {
        snprintf(err, err_len, "cannot create a temporary directory beside %s: %s", path,
                 strerror(errno));
        goto done;
    }
    /* mkdtemp makes 0700; a case directory is an ordinary directory. */
    mode_t mask = umask(0);
    umask(mask);
    /* The tensors first and the manifest last, so a removal cut short
     * never leaves a case.json whose files are gone. */
    int written = chmod(tmp, 0777 & ~mask);
    for (size_t i = 0; written == 0 && i < c->tensor_count; i++) {
        char file[96];
        snprintf(file, sizeof file, "%s.bin", c->tensors[i].name);
        written = write_in(tmp, file, c->tensors[i].data, c->tensors[i].bytes, err, err_len);
    }
    if (written != 0 || write_in(tmp, "case.json", manifest, manifest_size, err, err_len) != 0) {
        if (err[0] == '\0')
            snprintf(err, err_len, "cannot write %s: %s", path, strerror(errno));
        golden_remove_tree(tmp);
        goto done;
    }
    if (exists) {
        /* rename() replaces an empty directory, so park the old case under
         * a fresh empty name, put the new one in place, then drop the old;
         * if the second rename fails the old case goes back. */
        sigprocmask(SIG_BLOCK, &all, &unblocked);
        bool parked = mkdtemp(old) && rename(path, old) == 0;
        int saved = errno;
        if (parked)
            old_slot = golden_temp_track(GOLDEN_TEMP_PARKED, old, path);
        else
            rmdir(old);
        sigprocmask(SIG_SETMASK, &unblocked, NULL);
        if (!parked) {
            snprintf(err, err_len, "cannot move the existing %s aside: %s", path,
                     strerror(saved));
            golden_remove_tree(tmp);
            goto done;
        }
        if (rename(tmp, path) != 0) {
            int saved_put = errno;
            golden_remove_tree(tmp);
            /* The old case goes back.  Only when another writer's case
             * holds the name now is the old one (checked above to be a
             * case) dropped instead of left behind under the temporary
             * name, and only if nothing else got into it meanwhile; any
             * other failure (a full disk, an I/O error) keeps it where it
             * is and says so. */
            bool back = rename(old, path) == 0;
            bool taken = !back && (errno == EEXIST || errno == ENOTEMPTY);
            if (back || (taken && golden_remove_case_dir(old) == 0))
                snprintf(err, err_len, "cannot put %s in place: %s", path,
                         strerror(saved_put));
            else
                snprintf(err, err_len, "cannot put %s in place: %s; the case that was there is "
                         "kept at %s", path, strerror(saved_put), old);
            goto done;
        }
        golden_temp_untrack(tmp_slot);
        tmp_slot = -1;
        if (golden_remove_case_dir(old) != 0) {
            /* The new case is in place and what is left of the old one
             * sits under a dot name that readers skip: report it rather
             * than remove more than the case files. */
            snprintf(err, err_len, "%s was written, but the case it replaced could not be "
                     "removed and is kept at %s: %s", path, old, strerror(errno));
            rc = 1;
            goto done;
        }
    } else if (rename(tmp, path) != 0) {
        snprintf(err, err_len, "cannot put %s in place: %s", path, strerror(errno));
        golden_remove_tree(tmp);
        goto done;
    }
    rc = 0;
done:
    golden_temp_untrack(tmp_slot);
    golden_temp_untrack(old_slot);
    free(manifest);
    free(old);
    free(tmp);
    free(parent);
    free(path);
    return rc;
}

