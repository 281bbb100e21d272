/*
 * fileio.c - whole-file transfers for golden data: 64-bit sizes, loops on
 * short reads and writes, SHA-256 while reading, and outputs that appear
 * atomically (temporary name + rename) so no failure leaves a torn file.
 */
#include "golden/common/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <moeperm/golden.h>

#include "golden/common/path.h"
#include "golden/common/tempfiles.h"
#include "golden/common/text.h"

/* One read() or write() moves at most this much: some kernels refuse or
 * truncate single transfers near 2 GiB. */
#define IO_CHUNK ((size_t)1 << 30)

/* What a file that is not a regular one is, for a sentence. */
static const char *kind_of(mode_t mode)
{
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISFIFO(mode))
        return "a FIFO (named pipe)";
    if (S_ISCHR(mode))
        return "a character device";
    if (S_ISBLK(mode))
        return "a block device";
    if (S_ISSOCK(mode))
        return "a socket";
    return "of an unknown kind";
}

int golden_open_regular(int dirfd, const char *path, const char *what, struct stat *st,
                        char *err, size_t err_len)
{
    const char *sep = what ? ": " : "";
    what = what ? what : "";
    /* O_NONBLOCK: opening a FIFO (or a device that waits on open) must not
     * hang; the fstat below then refuses it.  Regular files ignore it. */
    int fd = openat(dirfd, dirfd == AT_FDCWD ? path : golden_base_of(path),
                    O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        int error = errno;
        struct stat lst;
        /* A socket cannot be opened at all (ENXIO): say what it is. */
        if (error == ENXIO &&
            fstatat(dirfd, dirfd == AT_FDCWD ? path : golden_base_of(path), &lst, 0) == 0 &&
            !S_ISREG(lst.st_mode))
            snprintf(err, err_len, "%s%s%s is not a regular file: it is %s", what, sep, path,
                     kind_of(lst.st_mode));
        else
            snprintf(err, err_len, "%s%scannot open %s: %s", what, sep, path, strerror(error));
        return -1;
    }
    if (fstat(fd, st) != 0) {
        snprintf(err, err_len, "%s%scannot examine %s: %s", what, sep, path, strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st->st_mode)) {
        snprintf(err, err_len, "%s%s%s is not a regular file: it is %s", what, sep, path,
                 kind_of(st->st_mode));
        close(fd);
        return -1;
    }
    return fd;
}

int golden_read_file(const char *path, const char *what, uint64_t size, void **data,
                     char hex[GOLDEN_SHA256_HEX], char *err, size_t err_len)
{
    return golden_read_file_at(AT_FDCWD, path, what, size, data, hex, err, err_len);
}

int golden_read_file_at(int dirfd, const char *path, const char *what, uint64_t size,
                        void **data, char hex[GOLDEN_SHA256_HEX], char *err, size_t err_len)
{
    golden_sha256 hash;
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
    fd = golden_open_regular(dirfd, path, what, &st, err, err_len);
    if (fd < 0)
        return -1;
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
    golden_sha256_init(&hash);
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
            golden_sha256_finish(&hash, hex);
            free(buffer);
            close(fd);
            return -1;
        }
        golden_sha256_update(&hash, buffer + done, (size_t)got);
        done += (uint64_t)got;
    }
    close(fd);
    if (golden_sha256_finish(&hash, hex) != 0) {
        snprintf(err, err_len, "%s: out of memory hashing %s", what, path);
        free(buffer);
        return -1;
    }
    *data = buffer;
    return 0;
}

int golden_read_text(const char *path, size_t max_size, char **text, char *err, size_t err_len)
{
    return golden_read_text_at(AT_FDCWD, path, max_size, text, err, err_len);
}

int golden_read_text_at(int dirfd, const char *path, size_t max_size, char **text, char *err,
                        size_t err_len)
{
    struct stat st;
    char *buffer;
    size_t done = 0;
    int fd;

    *text = NULL;
    fd = golden_open_regular(dirfd, path, NULL, &st, err, err_len);
    if (fd < 0)
        return -1;
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

/* pread() or pwrite() of all size bytes at offset. */
static int transfer_all(int fd, void *data, size_t size, uint64_t offset, bool write)
{
    uint8_t *p = data;
    while (size > 0) {
        size_t want = size < IO_CHUNK ? size : IO_CHUNK;
        ssize_t moved = write ? pwrite(fd, p, want, (off_t)offset)
                              : pread(fd, p, want, (off_t)offset);
        if (moved < 0 && errno == EINTR)
            continue;
        if (moved <= 0) {
            if (moved == 0)
                errno = EIO;
            return -1;
        }
        p += moved;
        offset += (uint64_t)moved;
        size -= (size_t)moved;
    }
    return 0;
}

int golden_pread_all(int fd, void *data, size_t size, uint64_t offset)
{
    return transfer_all(fd, data, size, offset, false);
}

int golden_pwrite_all(int fd, const void *data, size_t size, uint64_t offset)
{
    /* Never written through: the cast only shares the loop with reads. */
    return transfer_all(fd, (void *)data, size, offset, true);
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
    char *tmp = dir ? golden_strdup_printf("%s/.%s.tmp.XXXXXX", dir, golden_base_of(path))
                    : NULL;
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
    int slot = fd >= 0 ? golden_temp_track(GOLDEN_TEMP_FILE, tmp, NULL, NULL, 0) : -1;
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
    if (fchmod(fd, 0666 & ~mask) != 0 || golden_pwrite_all(fd, header, header_size, 0) != 0 ||
        golden_pwrite_all(fd, data, size, header_size) != 0 ||
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
        snprintf(err, err_len, "%s is not a regular file (it is %s); it was left as it is", path,
                 S_ISLNK(st.st_mode)   ? "a symbolic link"
                 : S_ISDIR(st.st_mode) ? "a directory"
                                       : "a device, FIFO or socket");
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
