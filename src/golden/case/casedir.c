/*
 * casedir.c - a case directory on disk: written whole into a temporary
 * sibling and put in place atomically (an old case swaps names with the
 * new one), replacing an existing case only when it is one (--force never
 * takes anything else with it).
 */
/* realpath() is an XSI name. */
#define _XOPEN_SOURCE 700
#include "golden/case/casedir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "golden/case/ops.h"
#include "golden/common/fileio.h"
#include "golden/common/path.h"
#include "golden/common/tempfiles.h"
#include "golden/common/text.h"

int golden_remove_case_dir(const char *dir)
{
    const char *const *files;
    size_t count = golden_case_file_list(&files);
    return golden_remove_listed_dir(dir, files, count);
}

/* Tracks dir, a case directory this process made or parked, for the
 * cleanup on a signal (tempfiles.h). */
static int track(int kind, const char *dir, const char *target)
{
    const char *const *files;
    size_t count = golden_case_file_list(&files);
    return golden_temp_track(kind, dir, target, files, count);
}

int golden_case_dir_write_file(const golden_case_dir *d, const char *file, const void *data,
                               size_t size, char *err, size_t err_len)
{
    const char *dir = d->tmp;
    char *path = golden_join(dir, file);
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
        if (golden_pwrite_all(fd, data, size, 0) != 0 || fsync(fd) != 0)
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
 * files a case holds (moeperm_golden_case_file_name()), or nothing at all (an empty
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
        bool known = moeperm_golden_case_file_name(e->d_name);
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
            first = golden_strdup_printf("%s", e->d_name);
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
    moeperm_golden_case c;
    char err[512];
    if (moeperm_golden_case_read(dir, MOEPERM_GOLDEN_LOAD_NONE, &c, err, sizeof err) != 0)
        return false;
    bool whole = true;
    struct stat st;
    for (size_t i = 0; whole && i < c.tensor_count; i++)
        whole = c.tensors[i].path && lstat(c.tensors[i].path, &st) == 0;
    moeperm_golden_case_free(&c);
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
        char *file = golden_join(dir, files[i]);
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

/* A case is never written inside another: discovery would find one case
 * in another's directory, and a case directory holds only its own files.
 * So no directory above path may hold a case.json (any entry by that
 * name, as discovery counts it).  The directories are those of the
 * deepest one that exists, resolved (links and ".." followed), up to the
 * root; the ones still to be made hold nothing.  Returns 0, or -1 with a
 * sentence in err. */
static int check_not_inside_a_case(const char *path, const char *parent, char *err,
                                   size_t err_len)
{
    char *dir = golden_strdup_printf("%s", parent);
    char *real = NULL;
    struct stat st;
    while (dir && !(real = realpath(dir, NULL)) && errno == ENOENT && strcmp(dir, ".") != 0 &&
           strcmp(dir, "/") != 0) {
        char *up = golden_dir_of(dir);
        free(dir);
        dir = up;
    }
    free(dir);
    int rc = 0;
    /* A directory that cannot be resolved (EACCES ...) is the mkdir's to
     * report; only what can be seen is looked at. */
    for (char *at = real; at && rc == 0;) {
        char *manifest = golden_join(at, "case.json");
        if (!manifest) {
            snprintf(err, err_len, "out of memory writing %s", path);
            rc = -1;
        } else if (lstat(manifest, &st) == 0) {
            snprintf(err, err_len, "%s would be a case inside the case %s; a case directory "
                     "holds only its own files, so nothing was written (write it beside that "
                     "case, not in it)", path, at);
            rc = -1;
        }
        free(manifest);
        if (strcmp(at, "/") == 0)
            break;
        char *slash = strrchr(at, '/'); /* realpath() gives an absolute path */
        if (slash == at)
            slash[1] = '\0'; /* "/x" -> "/" */
        else
            *slash = '\0';
    }
    free(real);
    return rc;
}

/* The checks golden_case_dir_open() makes before it creates anything, on
 * path without its trailing slashes; *exists says whether path held
 * something.  Returns 0, or -1 with a sentence in err. */
static int check_target(const char *path, bool force, bool *exists, char *err, size_t err_len)
{
    if (strcmp(path, "/") == 0) {
        snprintf(err, err_len, "cannot write a case as the root directory /");
        return -1;
    }
    struct stat st;
    *exists = lstat(path, &st) == 0;
    if (*exists && !force) {
        snprintf(err, err_len, "%s already exists; pass --force to replace it", path);
        return -1;
    }
    if (*exists && check_replaceable(path, &st, err, err_len) != 0)
        return -1;
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    char *parent = golden_dir_of(path);
    if (!parent) {
        snprintf(err, err_len, "out of memory writing %s", path);
        return -1;
    }
    int rc = temp_name_fits(path, parent, base, err, err_len) != 0 ||
                     check_not_inside_a_case(path, parent, err, err_len) != 0
                 ? -1
                 : 0;
    free(parent);
    return rc;
}

/* Without a trailing slash: "out/c1/" names c1, whose parent is "out". */
static char *strip_slashes(const char *path_arg)
{
    char *path = golden_strdup_printf("%s", path_arg);
    for (size_t n = path ? strlen(path) : 0; n > 1 && path[n - 1] == '/'; n--)
        path[n - 1] = '\0';
    return path;
}

int moeperm_golden_case_target_check(const char *path_arg, bool force, char *err,
                                     size_t err_len)
{
    char *path = strip_slashes(path_arg);
    if (!path) {
        snprintf(err, err_len, "out of memory checking %s", path_arg);
        return -1;
    }
    bool exists;
    int rc = check_target(path, force, &exists, err, err_len);
    free(path);
    return rc;
}

int golden_case_dir_open(golden_case_dir *d, const char *path_arg, bool force, char *err,
                         size_t err_len)
{
    memset(d, 0, sizeof *d);
    d->tmp_slot = -1;
    d->path = strip_slashes(path_arg);
    if (!d->path) {
        snprintf(err, err_len, "out of memory writing %s", path_arg);
        goto fail;
    }
    char *path = d->path;
    if (check_target(path, force, &d->exists, err, err_len) != 0)
        goto fail;
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    d->parent = golden_dir_of(path);
    if (!d->parent) {
        snprintf(err, err_len, "out of memory writing %s", path);
        goto fail;
    }
    if (golden_mkdirs(d->parent, err, err_len) != 0)
        goto fail;
    d->tmp = golden_strdup_printf("%s/.%s.tmp.XXXXXX", d->parent, base);
    d->old = golden_strdup_printf("%s/.%s.old.XXXXXX", d->parent, base);
    if (!d->tmp || !d->old) {
        snprintf(err, err_len, "out of memory writing %s", path);
        goto fail;
    }
    /* Each step that creates or parks a directory runs with signals held
     * and registers it before they are let in, so that a signal's cleanup
     * (tempfiles.h) always knows every temporary and the parked old case. */
    sigset_t all, unblocked;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &unblocked);
    if (mkdtemp(d->tmp))
        d->tmp_slot = track(GOLDEN_TEMP_DIR, d->tmp, NULL);
    else
        d->tmp[0] = '\0';
    sigprocmask(SIG_SETMASK, &unblocked, NULL);
    if (!d->tmp[0]) {
        snprintf(err, err_len, "cannot create a temporary directory beside %s: %s", path,
                 strerror(errno));
        goto fail;
    }
    /* mkdtemp makes 0700; a case directory is an ordinary directory. */
    mode_t mask = umask(0);
    umask(mask);
    if (chmod(d->tmp, 0777 & ~mask) != 0) {
        snprintf(err, err_len, "cannot write %s: %s", path, strerror(errno));
        goto fail;
    }
    return 0;
fail:
    golden_case_dir_close(d, true);
    return -1;
}

void golden_case_dir_close(golden_case_dir *d, bool remove_tmp)
{
    if (remove_tmp && d->tmp && d->tmp[0])
        golden_remove_tree(d->tmp);
    golden_temp_untrack(d->tmp_slot);
    free(d->path);
    free(d->parent);
    free(d->tmp);
    free(d->old);
    memset(d, 0, sizeof *d);
    d->tmp_slot = -1;
}

/* Moves the finished temporary directory to d->path, swapping it with an
 * existing case (or, where the file system cannot swap, parking the old
 * case and renaming the new one in), then removes the old case.  Returns
 * as moeperm_golden_case_write(); on -1 the temporary directory is left for
 * golden_case_dir_close() to remove (or already removed, d->tmp emptied). */
int golden_case_dir_commit(golden_case_dir *d, char *err, size_t err_len)
{
    const char *path = d->path;
    struct stat st;
    bool exists = d->exists;
    if (exists) {
        /* The new case and the old one swap names in one step, so the name
         * holds a whole case at every moment, even if the process is
         * killed; the old one, now under the temporary name, is removed
         * after.  The temporary stays tracked through the swap: on a
         * signal, what it holds (the new case before, the old one after)
         * is what must go. */
        if (golden_rename_exchange(d->tmp, path) == 0)
            return drop_replaced(path, d->tmp, err, err_len);
        int swap_error = errno;
        if (swap_error == ENOENT && lstat(path, &st) != 0) {
            /* Another writer took the old case away meanwhile: the name is
             * free, as for a new case. */
            exists = false;
        } else if (swap_error != EINVAL && swap_error != ENOSYS && swap_error != EOPNOTSUPP) {
            snprintf(err, err_len, "cannot put %s in place: %s", path, strerror(swap_error));
            return -1;
        }
    }
    if (exists) {
        /* No exchange on this file system or kernel.  rename() replaces only
         * an empty directory, so park the old case under a fresh empty
         * name, put the new one in place, then drop the old; if the second
         * rename fails the old case goes back.  Between the two renames
         * the name is absent (docs/reliability.md). */
        sigset_t all, unblocked;
        sigfillset(&all);
        sigprocmask(SIG_BLOCK, &all, &unblocked);
        bool made = mkdtemp(d->old) != NULL;
        bool parked = made && rename(path, d->old) == 0;
        int saved = errno;
        int old_slot = -1;
        if (parked)
            old_slot = track(GOLDEN_TEMP_PARKED, d->old, path);
        else if (made)
            rmdir(d->old);
        sigprocmask(SIG_SETMASK, &unblocked, NULL);
        /* Another writer parked it first: the name is free for now. */
        if (!parked && made && saved == ENOENT)
            goto put_new;
        if (!parked) {
            snprintf(err, err_len, "cannot move the existing %s aside: %s", path,
                     strerror(saved));
            return -1;
        }
        int rc;
        if (rename(d->tmp, path) != 0) {
            int saved_put = errno;
            golden_remove_tree(d->tmp);
            d->tmp[0] = '\0';
            /* The old case goes back.  Only when another writer's case
             * holds the name now is the old one (checked above to be a
             * case) dropped instead of left behind under the temporary
             * name, and only if nothing else got into it meanwhile; any
             * other failure (a full disk, an I/O error) keeps it where it
             * is and says so. */
            bool back = rename(d->old, path) == 0;
            bool taken = !back && (errno == EEXIST || errno == ENOTEMPTY);
            if (back || (taken && golden_remove_case_dir(d->old) == 0)) {
                snprintf(err, err_len, "cannot put %s in place: %s", path,
                         strerror(saved_put));
            } else {
                char left[1024];
                describe_left(d->old, left, sizeof left);
                snprintf(err, err_len, "cannot put %s in place: %s; of the case that was there, %s",
                         path, strerror(saved_put), left);
            }
            rc = -1;
        } else {
            golden_temp_untrack(d->tmp_slot);
            d->tmp_slot = -1;
            rc = drop_replaced(path, d->old, err, err_len);
        }
        golden_temp_untrack(old_slot);
        return rc;
    }
put_new:
    if (rename(d->tmp, path) != 0) {
        snprintf(err, err_len, "cannot put %s in place: %s", path, strerror(errno));
        return -1;
    }
    golden_temp_untrack(d->tmp_slot);
    d->tmp_slot = -1;
    return 0;
}

