/*
 * casedir.c - a case directory on disk: written whole into a temporary
 * sibling and put in place atomically (an old case swaps names with the
 * new one), replacing an existing case only when it is one (--force never
 * takes anything else with it).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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
        bool known = golden_case_file_name(e->d_name);
        bool ok = known;
        if (known) {
            /* a tensor file name as a directory would be removed with its
             * contents; only plain files are part of a case.  Looked up in
             * the directory that was opened, not by name: another --force
             * writer may have moved it meanwhile, and a file that writer
             * has just removed is gone, not "not a regular file". */
            struct stat est;
            int got = fstatat(dirfd(d), e->d_name, &est, AT_SYMLINK_NOFOLLOW);
            if (got != 0 && errno == ENOENT)
                continue;
            ok = got == 0 && S_ISREG(est.st_mode);
        }
        has_any = true;
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

/* The temporaries beside path are named ".BASE.tmp.XXXXXX" and
 * ".BASE.old.XXXXXX": a name that fits but whose temporaries do not would
 * fail only after the case was generated.  Returns 0 or -1 with a sentence
 * in err. */
static int temp_name_fits(const char *path, const char *parent, const char *base, char *err,
                          size_t err_len)
{
    const size_t extra = strlen(".") + strlen(".tmp.XXXXXX");
    errno = 0;
    long name_max = pathconf(parent, _PC_NAME_MAX);
    if (name_max <= 0)
        name_max = NAME_MAX; /* the parent is still to be made, or has no limit */
    if (strlen(base) + extra > (size_t)name_max) {
        snprintf(err, err_len, "the case name \"%.40s...\" is %zu bytes; with the %zu its "
                 "temporary name adds it would pass the %ld bytes a name may have in %s",
                 base, strlen(base), extra, name_max, parent);
        return -1;
    }
    if (strlen(path) + extra >= PATH_MAX) {
        snprintf(err, err_len, "the case directory %.60s... is %zu bytes; with the %zu its "
                 "temporary name adds it would reach PATH_MAX (%d bytes)", path, strlen(path),
                 extra, PATH_MAX);
        return -1;
    }
    return 0;
}

/* Whether dir holds a case.json and every file that manifest names, with
 * the manifest read as it is (no sizes, no hashes). */
static bool case_is_whole(const char *dir)
{
    golden_case c;
    char err[512];
    if (golden_case_read(dir, GOLDEN_LOAD_NONE, &c, err, sizeof err) != 0)
        return false;
    bool whole = true;
    struct stat st;
    for (size_t i = 0; whole && i < c.tensor_count; i++)
        whole = c.tensors[i].path && lstat(c.tensors[i].path, &st) == 0;
    golden_case_free(&c);
    return whole;
}

/* What is left of a replaced case at dir that could not be removed, for
 * a message: "it is kept whole at DIR" when its manifest and every file it
 * names are there, else the case files still there
 * (golden_remove_case_dir() may have removed some before it failed). */
static void describe_left(const char *dir, char *out, size_t len)
{
    char names[512] = "";
    size_t found = 0, used = 0;
    struct stat st;
    const char *const *files;
    size_t count = golden_case_file_list(&files);
    for (size_t i = 0; i < count; i++) {
        char *file = join_dir(dir, files[i]);
        if (file && lstat(file, &st) == 0 && used < sizeof names) {
            used += (size_t)snprintf(names + used, sizeof names - used, "%s%s",
                                     found ? ", " : "", files[i]);
            found++;
        }
        free(file);
    }
    if (found > 0 && case_is_whole(dir))
        snprintf(out, len, "it is kept whole at %s", dir);
    else if (found > 0)
        snprintf(out, len, "only %s %s left, at %s; the rest of it was removed", names,
                 found == 1 ? "is" : "are", dir);
    else if (lstat(dir, &st) == 0)
        snprintf(out, len, "its files were removed and its directory is left at %s", dir);
    else
        snprintf(out, len, "nothing is left");
}

/* After the new case took path: removes the case it replaced, now at old.
 * Returns 0, or 1 with a sentence in err saying exactly what is left of
 * the old case and where. */
static int drop_replaced(const char *path, const char *old, char *err, size_t err_len)
{
    if (golden_remove_case_dir(old) == 0)
        return 0;
    int saved = errno;
    char left[1024];
    describe_left(old, left, sizeof left);
    /* The new case is in place and what is left of the old one sits under
     * a dot name that readers skip: report it rather than remove more than
     * the case files. */
    snprintf(err, err_len, "%s was written, but the case it replaced could not be removed (%s): "
             "%s", path, strerror(saved), left);
    return 1;
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
    if (temp_name_fits(path, parent, base, err, err_len) != 0 ||
        golden_mkdirs(parent, err, err_len) != 0) {
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
        /* The new case and the old one swap names in one step, so the name
         * holds a whole case at every moment, even if the process is
         * killed; the old one, now under the temporary name, is removed
         * after.  The temporary stays tracked through the swap: on a
         * signal, what it holds (the new case before, the old one after)
         * is what must go. */
        if (golden_rename_exchange(tmp, path) == 0) {
            rc = drop_replaced(path, tmp, err, err_len);
            goto done;
        }
        int swap_error = errno;
        if (swap_error == ENOENT && lstat(path, &st) != 0) {
            /* Another writer took the old case away meanwhile: the name is
             * free, as for a new case. */
            exists = false;
        } else if (swap_error != EINVAL && swap_error != ENOSYS && swap_error != EOPNOTSUPP) {
            snprintf(err, err_len, "cannot put %s in place: %s", path, strerror(swap_error));
            golden_remove_tree(tmp);
            goto done;
        }
    }
    if (exists) {
        /* No exchange on this file system or kernel.  rename() replaces only
         * an empty directory, so park the old case under a fresh empty
         * name, put the new one in place, then drop the old; if the second
         * rename fails the old case goes back.  Between the two renames
         * the name is absent (docs/reliability.md). */
        sigprocmask(SIG_BLOCK, &all, &unblocked);
        bool made = mkdtemp(old) != NULL;
        bool parked = made && rename(path, old) == 0;
        int saved = errno;
        if (parked)
            old_slot = golden_temp_track(GOLDEN_TEMP_PARKED, old, path);
        else if (made)
            rmdir(old);
        sigprocmask(SIG_SETMASK, &unblocked, NULL);
        /* Another writer parked it first: the name is free for now. */
        if (!parked && made && saved == ENOENT)
            goto put_new;
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
            if (back || (taken && golden_remove_case_dir(old) == 0)) {
                snprintf(err, err_len, "cannot put %s in place: %s", path,
                         strerror(saved_put));
            } else {
                char left[1024];
                describe_left(old, left, sizeof left);
                snprintf(err, err_len, "cannot put %s in place: %s; of the case that was there, %s",
                         path, strerror(saved_put), left);
            }
            goto done;
        }
        golden_temp_untrack(tmp_slot);
        tmp_slot = -1;
        rc = drop_replaced(path, old, err, err_len);
        goto done;
    }
put_new:
    if (rename(tmp, path) != 0) {
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

