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

/* ---------------------------------------------------------------------- */
/* Temporaries removed on SIGINT, SIGTERM, SIGHUP (see fileio.h)          */
/* ---------------------------------------------------------------------- */

/* A case directory being written plus the old one parked, or one output
 * file: two slots are in use at most; four leave room. */
#define TEMP_SLOTS 4
#define TEMP_PATH_MAX 4096

typedef struct temp_slot {
    volatile sig_atomic_t kind; /* 0 = free; written last, after the paths */
    char path[TEMP_PATH_MAX];
    char target[TEMP_PATH_MAX];
} temp_slot;

static temp_slot temp_slots[TEMP_SLOTS];

/* The handler may only use async-signal-safe calls: no snprintf, no
 * malloc, so paths are joined by hand into a stack buffer. */
static size_t append(char *out, size_t size, size_t n, const char *s)
{
    for (; *s && n + 1 < size; s++)
        out[n++] = *s;
    out[n] = '\0';
    return n;
}

static void join_path(char *out, const char *dir, const char *file)
{
    size_t n = append(out, TEMP_PATH_MAX, 0, dir);
    append(out, TEMP_PATH_MAX, append(out, TEMP_PATH_MAX, n, "/"), file);
}

/* Every file a case may hold, from the list made before any handler was
 * installed (golden_case_file_list()): the handler may not allocate or
 * read directories. */
static const char *const *case_files;
static size_t case_file_count;

static void remove_case_dir(const char *dir)
{
    char path[TEMP_PATH_MAX];
    for (size_t i = 0; i < case_file_count; i++) {
        join_path(path, dir, case_files[i]);
        unlink(path);
    }
    rmdir(dir);
}

/* Every signal whose default action ends the process, except SIGKILL
 * and SIGSTOP, which cannot be caught, and SIGXFSZ, which is ignored
 * (install_cleanup()); the real-time signals are added at run time. */
static const struct {
    int sig;
    const char *name;
} fatal_signals[] = {
    {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},       {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},
    {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"},     {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},
    {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"},     {SIGUSR2, "SIGUSR2"}, {SIGPIPE, "SIGPIPE"},
    {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"},     {SIGXCPU, "SIGXCPU"}, {SIGVTALRM, "SIGVTALRM"},
    {SIGPROF, "SIGPROF"}, {SIGSYS, "SIGSYS"},
#ifdef SIGSTKFLT
    {SIGSTKFLT, "SIGSTKFLT"},
#endif
#ifdef SIGPOLL
    {SIGPOLL, "SIGPOLL"},
#endif
#ifdef SIGPWR
    {SIGPWR, "SIGPWR"},
#endif
#ifdef SIGLOST
    {SIGLOST, "SIGLOST"},
#endif
};
#define NUM_FATAL_SIGNALS (sizeof fatal_signals / sizeof fatal_signals[0])

static void on_fatal_signal(int sig)
{
    int saved = errno;
    bool cleaned = false;
    for (int i = 0; i < TEMP_SLOTS; i++) {
        temp_slot *s = &temp_slots[i];
        cleaned = cleaned || s->kind != 0;
        if (s->kind == GOLDEN_TEMP_FILE)
            unlink(s->path);
        else if (s->kind == GOLDEN_TEMP_CASE_DIR)
            remove_case_dir(s->path);
    }
    /* Parked cases last: the new case directory is gone by now unless it
     * was already renamed into place, and then the old one is dropped. */
    for (int i = 0; i < TEMP_SLOTS; i++) {
        temp_slot *s = &temp_slots[i];
        /* A parked case goes back; it is dropped only when another
         * writer's case took its name (any other failure keeps it). */
        if (s->kind == GOLDEN_TEMP_PARKED && rename(s->path, s->target) != 0 &&
            (errno == EEXIST || errno == ENOTEMPTY))
            remove_case_dir(s->path);
        s->kind = 0;
    }
    /* Silent when no output was being written: then the signal only does
     * what it would have done without this handler. */
    if (cleaned) {
        char message[160], number[16] = "";
        const char *name = NULL;
        for (size_t i = 0; i < NUM_FATAL_SIGNALS; i++)
            if (fatal_signals[i].sig == sig)
                name = fatal_signals[i].name;
        if (!name) {
            /* A real-time signal: SIGRTMIN+N, the number written by hand. */
            int offset = sig - SIGRTMIN;
            char digits[12];
            size_t d = 0;
            do
                digits[d++] = (char)('0' + offset % 10);
            while ((offset /= 10) > 0 && d < sizeof digits);
            number[0] = '+';
            for (size_t i = 0; i < d; i++)
                number[1 + i] = digits[d - 1 - i];
            number[1 + d] = '\0';
            name = "SIGRTMIN";
        }
        size_t n = append(message, sizeof message, 0, "moeperm: interrupted by ");
        n = append(message, sizeof message, n, name);
        if (number[1] != '0')
            n = append(message, sizeof message, n, number);
        n = append(message, sizeof message, n,
                   "; the unfinished output was removed, earlier outputs are kept\n");
        ssize_t ignored = write(STDERR_FILENO, message, n);
        (void)ignored;
    }
    signal(sig, SIG_DFL);
    errno = saved;
    raise(sig);
}

static void install_one(int sig)
{
    struct sigaction old, sa;
    /* Leave alone a signal the caller handles or ignores (a background
     * job's SIGINT, nohup's SIGHUP, a sanitizer's SIGSEGV). */
    if (sigaction(sig, NULL, &old) != 0 || old.sa_handler != SIG_DFL)
        return;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fatal_signal;
    sigfillset(&sa.sa_mask); /* one cleanup at a time */
    sigaction(sig, &sa, NULL);
}

static void install_cleanup(void)
{
    static bool installed;
    if (installed)
        return;
    installed = true;
    case_file_count = golden_case_file_list(&case_files);
    for (size_t i = 0; i < NUM_FATAL_SIGNALS; i++)
        install_one(fatal_signals[i].sig);
#if defined(SIGRTMIN) && defined(SIGRTMAX)
    for (int sig = SIGRTMIN; sig <= SIGRTMAX; sig++)
        install_one(sig);
#endif
    struct sigaction old;
    if (sigaction(SIGXFSZ, NULL, &old) == 0 && old.sa_handler == SIG_DFL)
        signal(SIGXFSZ, SIG_IGN);
}

int golden_temp_track(int kind, const char *path, const char *target)
{
    install_cleanup();
    if (strlen(path) >= TEMP_PATH_MAX || (target && strlen(target) >= TEMP_PATH_MAX))
        return -1;
    for (int i = 0; i < TEMP_SLOTS; i++) {
        temp_slot *s = &temp_slots[i];
        if (s->kind != 0)
            continue;
        strcpy(s->path, path);
        strcpy(s->target, target ? target : "");
        /* The handler must never see the kind before the paths. */
        atomic_signal_fence(memory_order_seq_cst);
        s->kind = kind;
        return i;
    }
    return -1;
}

void golden_temp_untrack(int slot)
{
    if (slot >= 0 && slot < TEMP_SLOTS)
        temp_slots[slot].kind = 0;
}

int golden_write_file_atomic(const char *path, const void *data, size_t size, char *err,
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
