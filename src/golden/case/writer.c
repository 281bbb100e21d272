/*
 * writer.c - the case writer behind moeperm_golden_case_write() and the
 * generator: two threads of its own take the tensors as they are handed
 * over, a stretch at a time: one writes them, starting the disk on each
 * stretch at once, the other hashes them for the manifest and, while it
 * has nothing to hash, makes stretches for the caller
 * (golden_case_writer_help()).  Each reads every byte once, while the
 * caller makes the next stretch or runs the reference, so that writing a
 * large case costs about what the disk takes.
 * The directory itself (its temporary, its replacement) is casedir.c's.
 */
#define _GNU_SOURCE /* sync_file_range() */
#include "golden/case/writer.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "golden/case/casedir.h"
#include "golden/case/manifest.h"
#include "golden/common/fileio.h"
#include "golden/common/sha256.h"
#include "golden/common/text.h"

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
    int finished;                /* threads done with it (of 2), under the lock */
    char hex[GOLDEN_SHA256_HEX]; /* the hash thread's, once it is past the end */
} tensor_job;

struct golden_case_writer {
    golden_case_dir dir;

    pthread_mutex_t lock;
    pthread_cond_t changed; /* a tensor or bytes arrived, or the end */
    tensor_job jobs[MOEPERM_GOLDEN_MAX_TENSORS];
    size_t count;
    bool closing;  /* no tensor comes after the count there are */
    bool stopping; /* aborted, or something failed: the threads quit */
    int error;     /* errno of the first failure, 0 while none */
    bool no_data;  /* the failure: a tensor handed over without its data */
    const moeperm_golden_tensor *error_tensor;
    pthread_t threads[2];
    int started;
    /* golden_case_writer_help(): what the hashing thread does while it has
     * nothing to hash, until help says there is nothing left (spent);
     * helping counts its calls under way. */
    bool (*help)(void *);
    void *help_arg;
    bool help_spent;
    int helping;
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

/* One of the two threads is done with tensor i. */
static void job_finished(golden_case_writer *w, size_t i)
{
    pthread_mutex_lock(&w->lock);
    w->jobs[i].finished++;
    pthread_cond_broadcast(&w->changed);
    pthread_mutex_unlock(&w->lock);
}

/* Waits until tensor i has `want` final bytes past done, or all that are
 * left; returns how many it has (0 when done is its end), or -1 when there
 * is no tensor i and will be none, or the writer stops.  The hashing
 * thread (hashing) does the work golden_case_writer_help() gave it, a
 * piece at a time, while it waits. */
static int64_t wait_bytes(golden_case_writer *w, size_t i, size_t done, size_t want,
                          bool hashing)
{
    pthread_mutex_lock(&w->lock);
    while (!w->stopping &&
           (i < w->count ? w->jobs[i].ready - done < want && w->jobs[i].ready < w->jobs[i].t->bytes
                         : !w->closing)) {
        if (!hashing || !w->help || w->help_spent) {
            pthread_cond_wait(&w->changed, &w->lock);
            continue;
        }
        bool (*piece)(void *) = w->help;
        void *arg = w->help_arg;
        w->helping++;
        pthread_mutex_unlock(&w->lock);
        bool more = piece(arg);
        pthread_mutex_lock(&w->lock);
        w->helping--;
        if (!more && w->help == piece && w->help_arg == arg)
            w->help_spent = true;
        pthread_cond_broadcast(&w->changed);
    }
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
        int64_t n = wait_bytes(w, i, 0, 1, false); /* tensor i is there, or the end */
        if (n < 0)
            return NULL;
        const tensor_job *job = &w->jobs[i];
        const uint8_t *data = job->t->data;
        bool direct = job->direct;
        size_t released = 0;
        for (size_t done = 0;
             (n = wait_bytes(w, i, done, direct ? GOLDEN_IO_ALIGN : 1, false)) > 0;) {
            size_t piece = (size_t)n < WRITE_PIECE ? (size_t)n : WRITE_PIECE;
            if (direct && piece % GOLDEN_IO_ALIGN != 0) {
                if (piece > GOLDEN_IO_ALIGN)
                    piece -= piece % GOLDEN_IO_ALIGN;
                else
                    stop_direct(job->fd, &direct);
            }
            int rc = golden_pwrite_all(job->fd, data + done, piece, done);
            if (rc != 0 && direct && errno == EINVAL) {
                stop_direct(job->fd, &direct);
                rc = golden_pwrite_all(job->fd, data + done, piece, done);
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
        job_finished(w, i);
    }
}

static void *hash_thread(void *arg)
{
    golden_case_writer *w = arg;
    for (size_t i = 0;; i++) {
        golden_sha256 hash;
        char hex[GOLDEN_SHA256_HEX];
        int64_t n;
        golden_sha256_init(&hash);
        for (size_t done = 0; (n = wait_bytes(w, i, done, 1, true)) > 0; done += (size_t)n)
            golden_sha256_update(&hash, (const uint8_t *)w->jobs[i].t->data + done, (size_t)n);
        int rc = golden_sha256_finish(&hash, hex); /* frees the hash's memory */
        if (n < 0)
            return NULL;
        if (rc != 0) {
            writer_fail(w, w->jobs[i].t, ENOMEM);
            return NULL;
        }
        memcpy(w->jobs[i].hex, hex, sizeof hex);
        job_finished(w, i);
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
    golden_case_dir_close(&w->dir, remove_tmp);
    pthread_cond_destroy(&w->changed);
    pthread_mutex_destroy(&w->lock);
    free(w);
}

int golden_case_writer_team(const golden_case_writer *w)
{
#ifdef _OPENMP
    int team = omp_get_max_threads();
    return w && team > 1 ? team - 1 : team;
#else
    (void)w;
    return 1;
#endif
}

/* golden_tensor_alloc() zeroes this much at a time. */
#define ZERO_PIECE ((size_t)2 << 20)

void golden_tensor_prefault(void *data, size_t bytes)
{
#ifdef MADV_POPULATE_WRITE
    /* The whole pages inside the range only, whatever the page size: the
     * pages at its ends may belong to other memory too, and fault in when
     * they are written. */
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0)
        return;
    uintptr_t start = ((uintptr_t)data + (uintptr_t)page - 1) / (uintptr_t)page * (uintptr_t)page;
    uintptr_t end = ((uintptr_t)data + bytes) / (uintptr_t)page * (uintptr_t)page;
    if (end > start)
        madvise((void *)start, end - start, MADV_POPULATE_WRITE); /* a hint: errors ignored */
#else
    (void)data, (void)bytes;
#endif
}

void *golden_tensor_alloc(size_t bytes, bool zero)
{
    if (bytes < GOLDEN_DIRECT_MIN)
        return bytes ? calloc(1, bytes) : NULL;
    void *data = aligned_alloc(GOLDEN_IO_ALIGN,
                               (bytes + GOLDEN_IO_ALIGN - 1) / GOLDEN_IO_ALIGN * GOLDEN_IO_ALIGN);
    if (!data || !zero)
        return data;
    /* Zeroing first touches every page of fresh memory, which costs several
     * times the stores themselves: spread over the threads, as the
     * operator's own writes would have been under calloc(), the pages of
     * each piece mapped in by one call first. */
    int64_t pieces = (int64_t)((bytes + ZERO_PIECE - 1) / ZERO_PIECE);
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
    for (int64_t i = 0; i < pieces; i++) {
        size_t at = (size_t)i * ZERO_PIECE;
        size_t piece = bytes - at < ZERO_PIECE ? bytes - at : ZERO_PIECE;
        golden_tensor_prefault((uint8_t *)data + at, piece);
        memset((uint8_t *)data + at, 0, piece);
    }
    return data;
}

int golden_case_check_writable(const char *path, const moeperm_golden_case *c, char *err,
                               size_t err_len)
{
    /* Named fields first, for a sentence that says which one; then the
     * manifest the writer would write, read back by the reader itself
     * (placeholder hashes), so nothing the reader refuses gets written;
     * then the operator's first phase, which the reader runs too. */
    const char *const what[] = {"name", "description", "generator", "command",
                                "recipe's routing", "recipe's values",
                                "recipe's probs_values"};
    const char *const values[] = {c->name,          c->description,   c->generator,
                                  c->command,       c->recipe.routing, c->recipe.values,
                                  c->recipe.probs_values};
    /* The first two, the name and the description, are printed on one line
     * of check's output and of the corpus's README: no control characters
     * in them but the tab, which keeps a line one line. */
    static const char controls[] = "\x01\x02\x03\x04\x05\x06\x07\x08\x0a\x0b\x0c\x0d"
                                   "\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19"
                                   "\x1a\x1b\x1c\x1d\x1e\x1f\x7f";
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        const char *value = values[i];
        if (!value)
            continue;
        size_t at = golden_utf8_invalid_at(value);
        if (at != SIZE_MAX) {
            snprintf(err, err_len, "cannot write the case %s: its %s \"%.*s...\" is not UTF-8 "
                     "text (byte 0x%02x at offset %zu), and a manifest is UTF-8", path, what[i],
                     (int)(at < 60 ? at : 60), value, (unsigned char)value[at], at);
            return -1;
        }
        if (i >= 2)
            continue;
        at = strcspn(value, controls);
        if (value[at] != '\0') {
            snprintf(err, err_len, "cannot write the case %s: its %s \"%.*s...\" holds the "
                     "control character 0x%02x at offset %zu, and it is one line of text", path,
                     what[i], (int)(at < 60 ? at : 60), value, (unsigned char)value[at], at);
            return -1;
        }
    }
    if (c->tensor_count > MOEPERM_GOLDEN_MAX_TENSORS) {
        snprintf(err, err_len, "cannot write the case %s: it has %zu tensors, more than the %d "
                 "a case holds", path, c->tensor_count, MOEPERM_GOLDEN_MAX_TENSORS);
        return -1;
    }
    bool inputs_loaded = true;
    for (size_t i = 0; i < c->tensor_count; i++) {
        const moeperm_golden_tensor *t = &c->tensors[i];
        uint64_t bytes = moeperm_dtype_size(t->dtype);
        bool fits = t->name && t->ndim <= MOEPERM_MAX_DIMS && bytes > 0;
        for (uint64_t d = 0; fits && d < t->ndim; d++)
            fits = t->shape[d] >= 0 && t->shape[d] <= MOEPERM_GOLDEN_MAX_DIM &&
                   !__builtin_mul_overflow(bytes, (uint64_t)t->shape[d], &bytes);
        if (!t->name) {
            snprintf(err, err_len, "cannot write the case %s: its tensor %zu has no name", path,
                     i);
            return -1;
        }
        /* The file holds t->bytes; the reader wants exactly what the
         * shape and dtype make. */
        if (fits && bytes != t->bytes) {
            snprintf(err, err_len, "cannot write the case %s: %s holds %zu bytes, but its "
                     "shape and dtype make %llu", path, t->name, t->bytes,
                     (unsigned long long)bytes);
            return -1;
        }
        if (t->role == MOEPERM_GOLDEN_ROLE_INPUT && t->bytes > 0 && !t->data)
            inputs_loaded = false;
    }
    char zero[MOEPERM_GOLDEN_MAX_TENSORS][GOLDEN_SHA256_HEX];
    for (size_t i = 0; i < MOEPERM_GOLDEN_MAX_TENSORS; i++) {
        memset(zero[i], '0', GOLDEN_SHA256_HEX - 1);
        zero[i][GOLDEN_SHA256_HEX - 1] = '\0';
    }
    size_t size;
    char *text = golden_manifest_text(c, (const char(*)[GOLDEN_SHA256_HEX])zero, &size);
    if (!text) {
        snprintf(err, err_len, "out of memory writing %s", path);
        return -1;
    }
    moeperm_golden_case back;
    memset(&back, 0, sizeof back);
    char sha[MOEPERM_GOLDEN_MAX_TENSORS][GOLDEN_SHA256_HEX], inner[768];
    int rc = golden_manifest_parse("case.json", text, &back, sha, inner, sizeof inner);
    moeperm_golden_case_free(&back);
    free(text);
    if (rc != 0) {
        snprintf(err, err_len, "cannot write the case %s: its reader would refuse it: %s", path,
                 inner);
        return -1;
    }
    if (inputs_loaded) {
        moeperm_status st = moeperm_golden_check_reference(c, inner, sizeof inner);
        if (st != MOEPERM_SUCCESS) {
            snprintf(err, err_len, "cannot write the case %s: the operator refuses it (%s), as "
                     "its reader would: %s", path, moeperm_status_name(st), inner);
            return -1;
        }
    }
    return 0;
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
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->changed, NULL);
    if (golden_case_dir_open(&w->dir, path_arg, force, err, err_len) != 0)
        goto fail;
    const char *path = w->dir.path;
    sigset_t all, unblocked;
    sigfillset(&all);
    /* The threads start with every signal blocked, so a signal's cleanup
     * runs on the caller's thread, the one that creates the files; all
     * but the faults a thread's own code raises, which reach the thread
     * that raised them whatever its mask, and would then kill the process
     * without the cleanup: the hashing thread runs the generator's code
     * too (golden_case_writer_help()). */
    sigdelset(&all, SIGSEGV);
    sigdelset(&all, SIGBUS);
    sigdelset(&all, SIGFPE);
    sigdelset(&all, SIGILL);
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
        pthread_mutex_lock(&w->lock);
        w->no_data = !w->error && i < MOEPERM_GOLDEN_MAX_TENSORS;
        pthread_mutex_unlock(&w->lock);
        writer_fail(w, t, EINVAL);
        return;
    }
    char *file = golden_strdup_printf("%s/%s.bin", w->dir.tmp, t->name);
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

void golden_case_writer_help(golden_case_writer *w, bool (*help)(void *), void *arg)
{
    pthread_mutex_lock(&w->lock);
    w->help = help;
    w->help_arg = arg;
    w->help_spent = false;
    pthread_cond_broadcast(&w->changed); /* a waiting hashing thread may help now */
    while (!help && w->helping > 0)
        pthread_cond_wait(&w->changed, &w->lock);
    pthread_mutex_unlock(&w->lock);
}

void golden_case_writer_abort(golden_case_writer *w)
{
    writer_join(w, true);
    writer_free(w, true);
}

/* What the releasing thread of close_case() needs. */
typedef struct releasing {
    golden_case_writer *w;
    moeperm_golden_case *c;
} releasing;

/* Frees the data of each tensor of c as soon as both threads are done with
 * it, until they are done with all or stop (what is left then is the
 * caller's to free). */
static void *release_written(void *arg)
{
    golden_case_writer *w = ((releasing *)arg)->w;
    moeperm_golden_case *c = ((releasing *)arg)->c;
    for (size_t i = 0; i < w->count; i++) {
        pthread_mutex_lock(&w->lock);
        while (!w->stopping && w->jobs[i].finished < 2)
            pthread_cond_wait(&w->changed, &w->lock);
        bool done = w->jobs[i].finished == 2;
        pthread_mutex_unlock(&w->lock);
        if (!done)
            return NULL;
        for (size_t j = 0; j < c->tensor_count; j++)
            if (&c->tensors[j] == w->jobs[i].t) {
                free(c->tensors[j].data);
                c->tensors[j].data = NULL;
            }
    }
    return NULL;
}

/* golden_case_writer_close(), and with release (c itself) the data of each
 * tensor freed once it is written and hashed. */
static int close_case(golden_case_writer *w, const moeperm_golden_case *c,
                      moeperm_golden_case *release, char *err, size_t err_len)
{
    for (size_t i = 0; i < c->tensor_count; i++)
        golden_case_writer_ready(w, &c->tensors[i], c->tensors[i].bytes);
    /* The streamed case (the generator's) meets the reader's rules too:
     * checked while the threads work and the data are all there. */
    if (golden_case_check_writable(w->dir.path, c, err, err_len) != 0) {
        writer_join(w, true);
        writer_free(w, true);
        return -1;
    }
    /* With release, a thread of its own gives each tensor's memory back as
     * soon as it is written and hashed, the last one's while the case is
     * put in place (which mostly waits for the old case's removal: a file
     * system mounted with discard trims the blocks there). */
    releasing r = {w, release};
    pthread_t releaser;
    bool releasing_started = false;
    if (release) {
        sigset_t all, unblocked; /* signals stay with the caller's thread, as in open() */
        sigfillset(&all);
        sigprocmask(SIG_BLOCK, &all, &unblocked);
        releasing_started = pthread_create(&releaser, NULL, release_written, &r) == 0;
        sigprocmask(SIG_SETMASK, &unblocked, NULL);
    }
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
        if (w->no_data)
            snprintf(err, err_len, "cannot write %s/%s.bin: the tensor has no data", w->dir.path,
                     t->name);
        else
            snprintf(err, err_len, "writing %s/%s.bin failed: %s", w->dir.tmp, t->name,
                     strerror(w->error));
        if (releasing_started)
            pthread_join(releaser, NULL);
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
        snprintf(err, err_len, "out of memory writing %s", w->dir.path);
    else if (golden_case_dir_write_file(&w->dir, "case.json", manifest, manifest_size, err,
                                        err_len) == 0)
        rc = golden_case_dir_commit(&w->dir, err, err_len);
    free(manifest);
    if (releasing_started)
        pthread_join(releaser, NULL);
    writer_free(w, rc < 0);
    return rc;
}

int golden_case_writer_close(golden_case_writer *w, const moeperm_golden_case *c, char *err,
                             size_t err_len)
{
    return close_case(w, c, NULL, err, err_len);
}

int golden_case_writer_close_releasing(golden_case_writer *w, moeperm_golden_case *c, char *err,
                                       size_t err_len)
{
    return close_case(w, c, c, err, err_len);
}

int moeperm_golden_case_write(const char *path, const moeperm_golden_case *c, bool force, char *err,
                      size_t err_len)
{
    /* Nothing a reader would refuse is written. */
    char why[512];
    if (golden_attrs_check_chip(&c->attrs, why, sizeof why) != 0) {
        snprintf(err, err_len, "%s: %s", path, why);
        return -1;
    }
    /* Refused before anything is made: what the reader would refuse. */
    if (golden_case_check_writable(path, c, err, err_len) != 0)
        return -1;
    golden_case_writer *w = golden_case_writer_open(path, force, err, err_len);
    return w ? golden_case_writer_close(w, c, err, err_len) : -1;
}
