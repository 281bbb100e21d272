/*
 * fileio.c - whole-file transfers for golden data: 64-bit sizes, loops on
 * short reads and writes, SHA-256 while reading, and outputs that appear
 * atomically (temporary name + rename) so no failure leaves a torn file.
 */
/* renameat2() and RENAME_EXCHANGE (glibc 2.28 and later). */
#define _GNU_SOURCE
#include "golden/internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/syscall.h>
#endif

#include <nettle/sha2.h>

/* One read() or write() moves at most this much: some kernels refuse or
 * truncate single transfers near 2 GiB. */
#define IO_CHUNK ((size_t)1 << 30)

void golden_sha256_digest_hex(const uint8_t digest[32], char hex[GOLDEN_SHA256_HEX])
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < SHA256_DIGEST_SIZE; i++) {
        hex[2 * i] = digits[digest[i] >> 4];
        hex[2 * i + 1] = digits[digest[i] & 15];
    }
    hex[2 * SHA256_DIGEST_SIZE] = '\0';
}

void golden_sha256_hex(const void *data, size_t size, char hex[GOLDEN_SHA256_HEX])
{
    struct sha256_ctx ctx;
    uint8_t digest[SHA256_DIGEST_SIZE];
    const uint8_t *p = data;

    sha256_init(&ctx);
    while (size > 0) {
        size_t n = size < IO_CHUNK ? size : IO_CHUNK;
        sha256_update(&ctx, n, p);
        p += n;
        size -= n;
    }
    sha256_digest(&ctx, SHA256_DIGEST_SIZE, digest);
    golden_sha256_digest_hex(digest, hex);
}

int golden_read_file(const char *path, const char *what, uint64_t size, void **data,
                     char hex[GOLDEN_SHA256_HEX], char *err, size_t err_len)
{
    struct sha256_ctx ctx;
    uint8_t digest[SHA256_DIGEST_SIZE];
    struct stat st;
    uint8_t *buffer = NULL;
    uint64_t done = 0;
    int fd;

    *data = NULL;
    if (size > SIZE_MAX) {
        snprintf(err, err_len, "%s: %s needs %llu bytes, more than this machine can address",
                 path, what, (unsigned long long)size);
        return -1;
    }
    /* O_NONBLOCK: opening a FIFO (or a device that waits on open) must not
     * hang; the fstat below then refuses it.  Regular files ignore it. */
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        snprintf(err, err_len, "%s: cannot open %s: %s", what, path, strerror(errno));
        return -1;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, err_len, "%s: %s is not a regular file", what, path);
        close(fd);
        return -1;
    }
    if ((uint64_t)st.st_size != size) {
        snprintf(err, err_len, "%s: %s is %llu bytes, expected %llu", what, path,
                 (unsigned long long)st.st_size, (unsigned long long)size);
        close(fd);
        return -1;
    }
    if (size > 0) {
        buffer = malloc((size_t)size);
        if (!buffer) {
            snprintf(err, err_len, "%s: out of memory for %llu bytes of %s", what,
                     (unsigned long long)size, path);
            close(fd);
            return -1;
        }
    }
    sha256_init(&ctx);
    while (done < size) {
        uint64_t left = size - done;
        size_t want = left < IO_CHUNK ? (size_t)left : IO_CHUNK;
        ssize_t got = read(fd, buffer + done, want);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            snprintf(err, err_len, "%s: reading %s failed after %llu of %llu bytes: %s", what,
                     path, (unsigned long long)done, (unsigned long long)size,
                     got < 0 ? strerror(errno) : "unexpected end of file");
            free(buffer);
            close(fd);
            return -1;
        }
        sha256_update(&ctx, (size_t)got, buffer + done);
        done += (uint64_t)got;
    }
    close(fd);
    sha256_digest(&ctx, SHA256_DIGEST_SIZE, digest);
    golden_sha256_digest_hex(digest, hex);
    *data = buffer;
    return 0;
}

int golden_read_text(const char *path, size_t max_size, char **text, char *err, size_t err_len)
{
    struct stat st;
    char *buffer;
    size_t done = 0;
    int fd;

    *text = NULL;
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* see golden_read_file() */
    if (fd < 0) {
        snprintf(err, err_len, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, err_len, "%s is not a regular file", path);
        close(fd);
        return -1;
    }
    if ((uint64_t)st.st_size > max_size) {
        snprintf(err, err_len, "%s is %llu bytes, more than the %zu a manifest may have", path,
                 (unsigned long long)st.st_size, max_size);
        close(fd);
        return -1;
    }
    buffer = malloc((size_t)st.st_size + 1);
    if (!buffer) {
        snprintf(err, err_len, "out of memory reading %s", path);
        close(fd);
        return -1;
    }
    while (done < (size_t)st.st_size) {
        ssize_t got = read(fd, buffer + done, (size_t)st.st_size - done);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            snprintf(err, err_len, "reading %s failed: %s", path,
                     got < 0 ? strerror(errno) : "unexpected end of file");
            free(buffer);
            close(fd);
            return -1;
        }
        done += (size_t)got;
    }
    close(fd);
    /* A NUL would end the text early for every string function after this
     * one, so whatever follows it would be silently ignored. */
    const char *nul = memchr(buffer, '\0', done);
    if (nul) {
        snprintf(err, err_len, "%s holds a NUL byte at offset %zu; it must be text", path,
                 (size_t)(nul - buffer));
        free(buffer);
        return -1;
    }
    buffer[done] = '\0';
    *text = buffer;
    return 0;
}

int golden_write_all(int fd, const void *data, size_t size)
{
    const uint8_t *p = data;
    while (size > 0) {
        size_t want = size < IO_CHUNK ? size : IO_CHUNK;
        ssize_t put = write(fd, p, want);
        if (put < 0 && errno == EINTR)
            continue;
        if (put <= 0) {
            if (put == 0)
                errno = EIO;
            return -1;
        }
        p += put;
        size -= (size_t)put;
    }
    return 0;
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

static const char *base_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

int moeperm_golden_write_file_atomic(const char *path, const void *data, size_t size, char *err,
                             size_t err_len)
{
    return golden_write_file_atomic_with_header(path, NULL, 0, data, size, err, err_len);
}

int golden_write_file_atomic_with_header(const char *path, const void *header,
                                         size_t header_size, const void *data, size_t size,
                                         char *err, size_t err_len)
{
    char *dir = golden_dir_of(path);
    char *tmp = dir ? golden_strdup_printf("%s/.%s.tmp.XXXXXX", dir, base_of(path)) : NULL;
    int fd;

    free(dir);
    if (!tmp) {
        snprintf(err, err_len, "out of memory writing %s", path);
        return -1;
    }
    /* Signals held between mkstemp() and tracking: a temporary exists
     * only once it is tracked. */
    sigset_t all, saved;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &saved);
    fd = mkstemp(tmp);
    int slot = fd >= 0 ? golden_temp_track(GOLDEN_TEMP_FILE, tmp, NULL) : -1;
    sigprocmask(SIG_SETMASK, &saved, NULL);
    if (fd < 0) {
        snprintf(err, err_len, "cannot create a temporary file beside %s: %s", path,
                 strerror(errno));
        free(tmp);
        return -1;
    }
    /* mkstemp makes 0600; outputs are ordinary files, readable as any other. */
    mode_t mask = umask(0);
    umask(mask);
    if (fchmod(fd, 0666 & ~mask) != 0 || golden_write_all(fd, header, header_size) != 0 ||
        golden_write_all(fd, data, size) != 0 ||
        fsync(fd) != 0) {
        snprintf(err, err_len, "writing %s failed: %s", path, strerror(errno));
        close(fd);
        unlink(tmp);
        golden_temp_untrack(slot);
        free(tmp);
        return -1;
    }
    /* The caller checked path before the work (tools/cli.c); whatever took
     * its place meanwhile is refused the same way: a rename would replace
     * a device, FIFO, socket or link instead of writing through it. */
    struct stat st;
    if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        snprintf(err, err_len, "%s is no longer a regular file; it was left as it is", path);
        close(fd);
        unlink(tmp);
        golden_temp_untrack(slot);
        free(tmp);
        return -1;
    }
    if (close(fd) != 0 || rename(tmp, path) != 0) {
        snprintf(err, err_len, "cannot put %s in place: %s", path, strerror(errno));
        unlink(tmp);
        golden_temp_untrack(slot);
        free(tmp);
        return -1;
    }
    golden_temp_untrack(slot);
    free(tmp);
    return 0;
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
        char *child = golden_strdup_printf("%s/%s", path, e->d_name);
        if (!child || golden_remove_tree(child) != 0)
            rc = -1;
        free(child);
    }
    closedir(d);
    if (rmdir(path) != 0)
        rc = -1;
    return rc;
}

int golden_remove_case_dir(const char *dir)
{
    const char *const *files;
    size_t count = golden_case_file_list(&files);
    bool *present = calloc(count, sizeof *present);
    if (!present) {
        errno = ENOMEM;
        return -1;
    }
    /* Anything but the case's files keeps the whole case: nothing is
     * unlinked, so what is reported as kept is kept whole.  Only the files
     * the directory holds are unlinked, so each unlink removes a file. */
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
            if (strcmp(e->d_name, files[i]) == 0)
                known = present[i] = true;
        foreign = !known;
    }
    closedir(d);
    if (foreign) {
        free(present);
        errno = ENOTEMPTY;
        return -1;
    }
    /* In the list's order: the tensors first and case.json last, so a
     * removal cut short never leaves a manifest whose files are gone. */
    for (size_t i = 0; i < count; i++) {
        if (!present[i])
            continue;
        char *path = golden_strdup_printf("%s/%s", dir, files[i]);
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

char *golden_strdup_printf(const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    int n = vsnprintf(NULL, 0, format, ap);
    va_end(ap);
    if (n < 0)
        return NULL;
    char *s = malloc((size_t)n + 1);
    if (!s)
        return NULL;
    va_start(ap, format);
    vsnprintf(s, (size_t)n + 1, format, ap);
    va_end(ap);
    return s;
}
