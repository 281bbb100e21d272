/*
 * casedir.c - a case directory on disk: written whole into a temporary
 * sibling and put in place atomically (an old case swaps names with the
 * new one), replacing an existing case only when it is one (--force never
 * takes anything else with it).
 *
 * Two threads of the writer take the tensors as they are handed over, a
 * stretch at a time: one writes them, starting the disk on each stretch at
 * once, the other hashes them for the manifest.  Each reads every byte
 * once, while the caller makes the next stretch or runs the reference, so
 * that writing a large case costs about what the disk takes.
 */
#define _GNU_SOURCE /* sync_file_range() */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <dirent.h>
#include <unistd.h>

#include <nettle/sha2.h>

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

/* ---------------------------------------------------------------------- */
/* The writer                                                             */
/* ---------------------------------------------------------------------- */

/* At most this much per write(): the disk starts on each piece as soon as
 * it is written, so a tensor handed over whole streams too. */
#define WRITE_PIECE ((size_t)4 << 20)

/* How much of a file may sit in the page cache behind the last write. */
#define CACHE_WINDOW ((size_t)32 << 20)

typedef struct tensor_job {
    const moeperm_golden_tensor *t;
    int fd;
    bool direct;                 /* fd was opened with O_DIRECT */
    size_t ready;                /* bytes final, under the lock */
    char hex[GOLDEN_SHA256_HEX]; /* the hash thread's, once it is past the end */
} tensor_job;

struct golden_case_writer {
    char *path;   /* the case directory, without trailing slashes */
    char *parent; /* its directory */
    char *tmp;    /* the temporary directory the case is written into */
    char *old;    /* the name an existing case is parked under */
    bool exists;
    int tmp_slot; /* golden_temp_track() slot of tmp */

    pthread_mutex_t lock;
    pthread_cond_t changed; /* a tensor or bytes arrived, or the end */
    tensor_job jobs[MOEPERM_GOLDEN_MAX_TENSORS];
    size_t count;
    bool closing;  /* no tensor comes after the count there are */
    bool stopping; /* aborted, or something failed: the threads quit */
    int error;     /* errno of the first failure, 0 while none */
    const moeperm_golden_tensor *error_tensor;
    pthread_t threads[2];
    int started;
};

/* The first failure stops both threads; close() reports it. */
static void writer_fail(golden_case_writer *w, const moeperm_golden_tensor *t, int error)
{
    pthread_mutex_lock(&w->lock);
    if (!w->error) {
        w->error = error ? error : EIO;
        w->error_tensor = t;
    }
    w->stopping = true;
    pthread_cond_broadcast(&w->changed);
    pthread_mutex_unlock(&w->lock);
}

/* Waits until tensor i has `want` final bytes past done, or all that are
 * left; returns how many it has (0 when done is its end), or -1 when there
 * is no tensor i and will be none, or the writer stops. */
static int64_t wait_bytes(golden_case_writer *w, size_t i, size_t done, size_t want)
{
    pthread_mutex_lock(&w->lock);
    while (!w->stopping &&
           (i < w->count ? w->jobs[i].ready - done < want && w->jobs[i].ready < w->jobs[i].t->bytes
                         : !w->closing))
        pthread_cond_wait(&w->changed, &w->lock);
    int64_t n = w->stopping || i >= w->count ? -1 : (int64_t)(w->jobs[i].ready - done);
    pthread_mutex_unlock(&w->lock);
    return n;
}

/*
 * Where the platform has the calls (Linux), the written pages of a file
 * are handled in two steps behind the writes:
 *
 * - the disk starts on each piece at once, rather than at the fsync: the
 *   kernel holds dirty pages back up to a share of memory that a case of a
 *   few GiB never reaches, and the disk would idle while the rest is made
 *   and hashed;
 * - once the disk has the pieces more than CACHE_WINDOW behind, they leave
 *   the page cache, so the pages of the next writes are pages just freed.
 *   A case of a few GiB would otherwise take as many fresh pages again as
 *   its own memory, and first touching a page can cost several times the
 *   copy into it (on the virtual machine of docs/performance.md, writing
 *   a 1 GiB case that way took one to two seconds more CPU time).  It
 *   also paces the writer to the disk, which is the point.
 *
 * Both are hints: fsync() at the end reports any error.
 */
static void after_write(int fd, size_t written, size_t piece, size_t *released)
{
#ifdef SYNC_FILE_RANGE_WRITE
    size_t end = written + piece;
    sync_file_range(fd, (off_t)written, (off_t)piece, SYNC_FILE_RANGE_WRITE);
    if (end >= *released + 2 * CACHE_WINDOW) {
        size_t upto = end - CACHE_WINDOW;
        sync_file_range(fd, (off_t)*released, (off_t)(upto - *released),
                        SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                            SYNC_FILE_RANGE_WAIT_AFTER);
        posix_fadvise(fd, (off_t)*released, (off_t)(upto - *released), POSIX_FADV_DONTNEED);
        *released = upto;
    }
#else
    (void)fd, (void)written, (void)piece, (void)released;
#endif
}

/* pwrite() of all size bytes at offset, looping on short writes and
 * EINTR.  Returns 0 or -1 with errno set. */
static int pwrite_all(int fd, const uint8_t *data, size_t size, size_t offset)
{
    while (size > 0) {
        ssize_t put = pwrite(fd, data, size, (off_t)offset);
        if (put < 0 && errno == EINTR)
            continue;
        if (put <= 0) {
            if (put == 0)
                errno = EIO;
            return -1;
        }
        data += put;
        offset += (size_t)put;
        size -= (size_t)put;
    }
    return 0;
}

/* Turns O_DIRECT off for the rest of a file: for its last bytes when they
 * are less than a block, or when the file system refuses it. */
static void stop_direct(int fd, bool *direct)
{
#ifdef O_DIRECT
    int flags = fcntl(fd, F_GETFL);
    if (flags != -1)
        fcntl(fd, F_SETFL, flags & ~O_DIRECT);
#endif
    *direct = false;
}

/*
 * Each piece of a file opened with O_DIRECT (whole blocks: the thread
 * waits for a block's worth of final bytes) goes from the tensor's memory
 * to the disk: no copy into the page cache, nothing left there, and the
 * write returns when the disk has it.  Any other piece goes through the
 * page cache and after_write().  A piece refused under O_DIRECT (EINVAL:
 * the file system wants other alignments) is written again through the
 * page cache.
 */
static void *write_thread(void *arg)
{
    golden_case_writer *w = arg;
    for (size_t i = 0;; i++) {
        int64_t n = wait_bytes(w, i, 0, 1); /* tensor i is there, or the end */
        if (n < 0)
            return NULL;
        const tensor_job *job = &w->jobs[i];
        const uint8_t *data = job->t->data;
        bool direct = job->direct;
        size_t released = 0;
        for (size_t done = 0; (n = wait_bytes(w, i, done, direct ? GOLDEN_IO_ALIGN : 1)) > 0;) {
            size_t piece = (size_t)n < WRITE_PIECE ? (size_t)n : WRITE_PIECE;
            if (direct && piece % GOLDEN_IO_ALIGN != 0) {
                if (piece > GOLDEN_IO_ALIGN)
                    piece -= piece % GOLDEN_IO_ALIGN;
                else
                    stop_direct(job->fd, &direct);
            }
            int rc = pwrite_all(job->fd, data + done, piece, done);
            if (rc != 0 && direct && errno == EINVAL) {
                stop_direct(job->fd, &direct);
                rc = pwrite_all(job->fd, data + done, piece, done);
            }
            if (rc != 0) {
                writer_fail(w, job->t, errno);
                return NULL;
            }
            if (!direct)
                after_write(job->fd, done, piece, &released);
            done += piece;
        }
        if (n < 0)
            return NULL;
    }
}

static void *hash_thread(void *arg)
{
    golden_case_writer *w = arg;
    for (size_t i = 0;; i++) {
        struct sha256_ctx ctx;
        uint8_t digest[SHA256_DIGEST_SIZE];
        int64_t n;
        sha256_init(&ctx);
        for (size_t done = 0; (n = wait_bytes(w, i, done, 1)) > 0; done += (size_t)n)
            sha256_update(&ctx, (size_t)n, (const uint8_t *)w->jobs[i].t->data + done);
        if (n < 0)
            return NULL;
        sha256_digest(&ctx, SHA256_DIGEST_SIZE, digest);
        golden_sha256_digest_hex(digest, w->jobs[i].hex);
    }
}

/* Tells the threads that nothing more comes (or, with stop, to quit now)
 * and waits for them. */
static void writer_join(golden_case_writer *w, bool stop)
{
    pthread_mutex_lock(&w->lock);
    w->closing = true;
    w->stopping = w->stopping || stop;
    pthread_cond_broadcast(&w->changed);
    pthread_mutex_unlock(&w->lock);
    for (int i = 0; i < w->started; i++)
        pthread_join(w->threads[i], NULL);
    w->started = 0;
}

/* Closes the files, removes the temporary directory unless it was put in
 * place, and frees w. */
static void writer_free(golden_case_writer *w, bool remove_tmp)
{
    for (size_t i = 0; i < w->count; i++)
        if (w->jobs[i].fd >= 0)
            close(w->jobs[i].fd);
    if (remove_tmp && w->tmp && w->tmp[0])
        golden_remove_tree(w->tmp);
    golden_temp_untrack(w->tmp_slot);
    pthread_cond_destroy(&w->changed);
    pthread_mutex_destroy(&w->lock);
    free(w->path);
    free(w->parent);
    free(w->tmp);
    free(w->old);
    free(w);
}

golden_case_writer *golden_case_writer_open(const char *path_arg, bool force, char *err,
                                            size_t err_len)
{
    if (path_arg[0] == '\0') {
        snprintf(err, err_len, "the case directory to write is an empty string");
        return NULL;
    }
    golden_case_writer *w = calloc(1, sizeof *w);
    if (!w) {
        snprintf(err, err_len, "out of memory writing %s", path_arg);
        return NULL;
    }
    w->tmp_slot = -1;
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->changed, NULL);
    /* "out/c1/" names c1: without the slash its parent is "out", not "out/c1". */
    w->path = dup_string(path_arg);
    if (!w->path) {
        snprintf(err, err_len, "out of memory writing %s", path_arg);
        goto fail;
    }
    char *path = w->path;
    for (size_t n = strlen(path); n > 1 && path[n - 1] == '/'; n--)
        path[n - 1] = '\0';
    if (strcmp(path, "/") == 0) {
        snprintf(err, err_len, "cannot write a case as the root directory /");
        goto fail;
    }

    struct stat st;
    w->exists = lstat(path, &st) == 0;
    if (w->exists && !force) {
        snprintf(err, err_len, "%s already exists; pass --force to replace it", path);
        goto fail;
    }
    if (w->exists && check_replaceable(path, &st, err, err_len) != 0)
        goto fail;

    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    w->parent = golden_dir_of(path);
    if (!w->parent) {
        snprintf(err, err_len, "out of memory writing %s", path);
        goto fail;
    }
    if (temp_name_fits(path, w->parent, base, err, err_len) != 0 ||
        golden_mkdirs(w->parent, err, err_len) != 0)
        goto fail;
    w->tmp = golden_strdup_printf("%s/.%s.tmp.XXXXXX", w->parent, base);
    w->old = golden_strdup_printf("%s/.%s.old.XXXXXX", w->parent, base);
    if (!w->tmp || !w->old) {
        snprintf(err, err_len, "out of memory writing %s", path);
        goto fail;
    }
    /* Each step that creates or parks a directory runs with signals held
     * and registers it before they are let in, so that a signal's cleanup
     * (fileio.h) always knows every temporary and the parked old case. */
    sigset_t all, unblocked;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &unblocked);
    if (mkdtemp(w->tmp))
        w->tmp_slot = golden_temp_track(GOLDEN_TEMP_CASE_DIR, w->tmp, NULL);
    else
        w->tmp[0] = '\0';
    sigprocmask(SIG_SETMASK, &unblocked, NULL);
    if (!w->tmp[0]) {
        snprintf(err, err_len, "cannot create a temporary directory beside %s: %s", path,
                 strerror(errno));
        goto fail;
    }
    /* mkdtemp makes 0700; a case directory is an ordinary directory. */
    mode_t mask = umask(0);
    umask(mask);
    if (chmod(w->tmp, 0777 & ~mask) != 0) {
        snprintf(err, err_len, "cannot write %s: %s", path, strerror(errno));
        goto fail;
    }
    /* The threads start with every signal blocked, so a signal's cleanup
     * runs on the caller's thread, the one that creates the files. */
    sigprocmask(SIG_BLOCK, &all, &unblocked);
    void *(*const bodies[2])(void *) = {write_thread, hash_thread};
    int started = 0;
    for (; started < 2; started++)
        if (pthread_create(&w->threads[started], NULL, bodies[started], w) != 0)
            break;
    w->started = started;
    sigprocmask(SIG_SETMASK, &unblocked, NULL);
    if (started < 2) {
        snprintf(err, err_len, "cannot start a thread to write %s", path);
        writer_join(w, true);
        goto fail;
    }
    return w;
fail:
    writer_free(w, true);
    return NULL;
}

void golden_case_writer_ready(golden_case_writer *w, const moeperm_golden_tensor *t, size_t ready)
{
    pthread_mutex_lock(&w->lock);
    size_t i = 0;
    while (i < w->count && w->jobs[i].t != t)
        i++;
    if (i < w->count) {
        if (ready > w->jobs[i].ready)
            w->jobs[i].ready = ready;
        pthread_cond_broadcast(&w->changed);
        pthread_mutex_unlock(&w->lock);
        return;
    }
    bool stopped = w->stopping;
    pthread_mutex_unlock(&w->lock);
    if (stopped)
        return;
    if (i == MOEPERM_GOLDEN_MAX_TENSORS || (t->bytes > 0 && !t->data)) {
        writer_fail(w, t, EINVAL);
        return;
    }
    char *file = golden_strdup_printf("%s/%s.bin", w->tmp, t->name);
    int flags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, fd = -1;
    bool direct = false;
#ifdef O_DIRECT
    direct = t->bytes >= GOLDEN_DIRECT_MIN && (uintptr_t)t->data % GOLDEN_IO_ALIGN == 0;
    if (file && direct)
        fd = open(file, flags | O_DIRECT, 0666);
    direct = fd >= 0;
#endif
    if (file && fd < 0)
        fd = open(file, flags, 0666);
    int error = file ? errno : ENOMEM;
    free(file);
    if (fd < 0) {
        writer_fail(w, t, error);
        return;
    }
    pthread_mutex_lock(&w->lock);
    w->jobs[i] = (tensor_job){.t = t, .fd = fd, .direct = direct, .ready = ready};
    w->count = i + 1;
    pthread_cond_broadcast(&w->changed);
    pthread_mutex_unlock(&w->lock);
}

void golden_case_writer_abort(golden_case_writer *w)
{
    writer_join(w, true);
    writer_free(w, true);
}

/* Moves the finished temporary directory to w->path, swapping it with an
 * existing case (or, where the file system cannot swap, parking the old
 * case and renaming the new one in), then removes the old case.  Returns
 * as moeperm_golden_case_write(); on -1 the temporary directory is left for
 * writer_free() to remove (or already removed, w->tmp emptied). */
static int put_in_place(golden_case_writer *w, char *err, size_t err_len)
{
    const char *path = w->path;
    struct stat st;
    bool exists = w->exists;
    if (exists) {
        /* The new case and the old one swap names in one step, so the name
         * holds a whole case at every moment, even if the process is
         * killed; the old one, now under the temporary name, is removed
         * after.  The temporary stays tracked through the swap: on a
         * signal, what it holds (the new case before, the old one after)
         * is what must go. */
        if (golden_rename_exchange(w->tmp, path) == 0)
            return drop_replaced(path, w->tmp, err, err_len);
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
        bool made = mkdtemp(w->old) != NULL;
        bool parked = made && rename(path, w->old) == 0;
        int saved = errno;
        int old_slot = -1;
        if (parked)
            old_slot = golden_temp_track(GOLDEN_TEMP_PARKED, w->old, path);
        else if (made)
            rmdir(w->old);
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
        if (rename(w->tmp, path) != 0) {
            int saved_put = errno;
            golden_remove_tree(w->tmp);
            w->tmp[0] = '\0';
            /* The old case goes back.  Only when another writer's case
             * holds the name now is the old one (checked above to be a
             * case) dropped instead of left behind under the temporary
             * name, and only if nothing else got into it meanwhile; any
             * other failure (a full disk, an I/O error) keeps it where it
             * is and says so. */
            bool back = rename(w->old, path) == 0;
            bool taken = !back && (errno == EEXIST || errno == ENOTEMPTY);
            if (back || (taken && golden_remove_case_dir(w->old) == 0)) {
                snprintf(err, err_len, "cannot put %s in place: %s", path,
                         strerror(saved_put));
            } else {
                char left[1024];
                describe_left(w->old, left, sizeof left);
                snprintf(err, err_len, "cannot put %s in place: %s; of the case that was there, %s",
                         path, strerror(saved_put), left);
            }
            rc = -1;
        } else {
            golden_temp_untrack(w->tmp_slot);
            w->tmp_slot = -1;
            rc = drop_replaced(path, w->old, err, err_len);
        }
        golden_temp_untrack(old_slot);
        return rc;
    }
put_new:
    if (rename(w->tmp, path) != 0) {
        snprintf(err, err_len, "cannot put %s in place: %s", path, strerror(errno));
        return -1;
    }
    golden_temp_untrack(w->tmp_slot);
    w->tmp_slot = -1;
    return 0;
}

int golden_case_writer_close(golden_case_writer *w, const moeperm_golden_case *c, char *err,
                             size_t err_len)
{
    for (size_t i = 0; i < c->tensor_count; i++)
        golden_case_writer_ready(w, &c->tensors[i], c->tensors[i].bytes);
    writer_join(w, false);

    /* The hashes in the case's order; fsync before the directory is
     * renamed into place, so that after a power loss a case that looks
     * complete is complete.  The disk has had each file since it was
     * written, so this mostly waits for the last pieces. */
    char sha[MOEPERM_GOLDEN_MAX_TENSORS][GOLDEN_SHA256_HEX];
    for (size_t i = 0; i < c->tensor_count && !w->error; i++) {
        const tensor_job *job = NULL;
        for (size_t j = 0; j < w->count && !job; j++)
            if (w->jobs[j].t == &c->tensors[i])
                job = &w->jobs[j];
        if (!job)
            writer_fail(w, &c->tensors[i], EIO);
        else if (fsync(job->fd) != 0)
            writer_fail(w, job->t, errno);
        else
            memcpy(sha[i], job->hex, GOLDEN_SHA256_HEX);
    }
    if (!w->error && w->count != c->tensor_count)
        writer_fail(w, w->jobs[w->count - 1].t, EINVAL); /* a tensor not of c */
    if (w->error) {
        const moeperm_golden_tensor *t = w->error_tensor;
        if (t->bytes > 0 && !t->data)
            snprintf(err, err_len, "cannot write %s/%s.bin: the tensor has no data", w->path,
                     t->name);
        else
            snprintf(err, err_len, "writing %s/%s.bin failed: %s", w->tmp, t->name,
                     strerror(w->error));
        writer_free(w, true);
        return -1;
    }
    /* The tensors first and the manifest last, so a removal cut short
     * never leaves a case.json whose files are gone. */
    size_t manifest_size = 0;
    char *manifest = golden_manifest_text(c, (const char(*)[GOLDEN_SHA256_HEX])sha,
                                          &manifest_size);
    int rc = -1;
    if (!manifest)
        snprintf(err, err_len, "out of memory writing %s", w->path);
    else if (write_in(w->tmp, "case.json", manifest, manifest_size, err, err_len) == 0)
        rc = put_in_place(w, err, err_len);
    free(manifest);
    writer_free(w, rc < 0);
    return rc;
}

int moeperm_golden_case_write(const char *path, const moeperm_golden_case *c, bool force, char *err,
                      size_t err_len)
{
    golden_case_writer *w = golden_case_writer_open(path, force, err, err_len);
    return w ? golden_case_writer_close(w, c, err, err_len) : -1;
}
