/*
 * fileio.h - whole-file reads and writes that never leave a partial output.
 *
 * Golden tensors can exceed 4 GiB and read()/write() may move fewer bytes
 * than asked, so every transfer loops with 64-bit sizes.  Outputs go to a
 * temporary name in the destination directory and are renamed into place
 * only when complete: a reader, or a later run, sees either the old file or
 * the whole new one, never a torn one.
 */
#ifndef MOEPERM_GOLDEN_FILEIO_H
#define MOEPERM_GOLDEN_FILEIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Length in bytes of a SHA-256 digest as lower-case hex, plus the NUL. */
#define GOLDEN_SHA256_HEX 65

/* Lower-case hex SHA-256 of size bytes at data into hex. */
void golden_sha256_hex(const void *data, size_t size, char hex[GOLDEN_SHA256_HEX]);

/* A SHA-256 digest (32 bytes) as lower-case hex into hex. */
void golden_sha256_digest_hex(const uint8_t digest[32], char hex[GOLDEN_SHA256_HEX]);

/*
 * golden_read_file() reads exactly `size` bytes of the file at path into
 * *data (malloc'd; NULL when size is 0), hashing them as it goes into hex.
 * The file must be a regular file of exactly that size.  Returns 0, or -1
 * with a sentence in err (prefixed by what, e.g. "tensors.input_grad").
 */
int golden_read_file(const char *path, const char *what, uint64_t size, void **data,
                     char hex[GOLDEN_SHA256_HEX], char *err, size_t err_len);

/* Reads a small text file (at most max_size bytes) into a NUL-terminated
 * malloc'd string.  Returns 0 or -1 with a sentence in err. */
int golden_read_text(const char *path, size_t max_size, char **text, char *err, size_t err_len);

/* Writes all of size bytes to fd, looping on short writes and EINTR.
 * Returns 0 or -1 with errno set. */
int golden_write_all(int fd, const void *data, size_t size);

/* moeperm_golden_write_file_atomic() (golden.h) with header_size bytes of header
 * written before the data (a .npy header), so a large tensor is not copied
 * to prepend a few bytes.  Like it, it never replaces what is not a
 * regular file. */
int golden_write_file_atomic_with_header(const char *path, const void *header,
                                         size_t header_size, const void *data, size_t size,
                                         char *err, size_t err_len);

/*
 * Cleanup of temporaries when a signal ends the process.
 *
 * An output appears only by rename(), so a process killed mid-write never
 * leaves a torn output; what it can leave is its temporary, or (for a case
 * directory replaced with --force) the old case under a temporary name.
 * golden_temp_track() registers such a path; on the first call it
 * installs, for every signal whose default action ends the process (all
 * but SIGKILL and SIGSTOP, which cannot be caught: SIGINT, SIGTERM, SIGHUP,
 * SIGQUIT, SIGPIPE, SIGALRM, SIGUSR1, SIGUSR2, SIGXCPU, SIGVTALRM, SIGPROF,
 * the real-time signals, the fault signals ...) whose disposition is still
 * the default, a handler that removes every tracked temporary, moves a
 * parked case back where it was (unless a new one already took its
 * place), prints one line on stderr naming the signal when it removed
 * anything, and re-raises the signal, so the process still ends by it
 * (shell status 128+N).  A signal the caller ignores or handles is left
 * alone.  It also ignores SIGXFSZ, so that a write past RLIMIT_FSIZE fails
 * with EFBIG and the ordinary error path reports it and cleans up, instead
 * of the process dying silently.
 *
 * kind: GOLDEN_TEMP_FILE (unlinked), GOLDEN_TEMP_CASE_DIR (a case
 * directory: its four files unlinked, then removed) or GOLDEN_TEMP_PARKED
 * (a case directory renamed back to target, or removed like a
 * GOLDEN_TEMP_CASE_DIR when target exists again).  Returns a slot for
 * golden_temp_untrack(), or -1 when the path is too long or all slots are
 * taken (the write still works; only the cleanup on a signal is lost).
 * Not thread safe: the tool writes outputs from one thread.
 */
enum { GOLDEN_TEMP_FILE = 1, GOLDEN_TEMP_CASE_DIR = 2, GOLDEN_TEMP_PARKED = 3 };
int golden_temp_track(int kind, const char *path, const char *target);
/* Forgets a slot (after a rename or removal made it moot); -1 is a no-op. */
void golden_temp_untrack(int slot);

/* golden_rename_exchange() swaps the names a and b atomically
 * (renameat2(RENAME_EXCHANGE)): both must exist, and at every moment each
 * name holds one of the two.  Returns 0, or -1 with errno set: EINVAL,
 * ENOSYS or EOPNOTSUPP where the file system or the kernel cannot exchange
 * (the caller then falls back to two renames). */
int golden_rename_exchange(const char *a, const char *b);

/* Removes path and, if it is a directory, everything below it (no links
 * followed).  Returns 0 or -1 with errno set.  Only for directories this
 * process created itself: a directory that was already there goes through
 * golden_remove_case_dir(). */
int golden_remove_tree(const char *path);

/* Every file name a case directory may hold (moeperm_golden_case_file_name()):
 * the tensor files of every operator, then case.json, so a removal cut
 * short never leaves a manifest whose files are gone.  The list is static;
 * the first call builds it (call it before any signal handler needs it). */
size_t golden_case_file_list(const char *const **names);

/* golden_remove_case_dir() removes a case directory without recursing: the
 * files of golden_case_file_list() that it holds, in that list's order
 * (case.json last), then the directory.  A directory holding anything else
 * is left untouched, case files included (ENOTEMPTY), so it never removes
 * what is not part of a case.  Returns 0 or -1 with errno set (an unlink
 * failing partway, e.g. EACCES, can still leave part of the case). */
int golden_remove_case_dir(const char *dir);

/* The directory part of path: "." when there is none, "/" for a file at
 * the root (malloc'd; NULL when memory runs out). */
char *golden_dir_of(const char *path);

/* Creates dir and its missing parents (mode 0777 less umask).  Returns 0 or
 * -1 with a sentence in err. */
int golden_mkdirs(const char *dir, char *err, size_t err_len);

/* snprintf into a malloc'd string; NULL when memory runs out. */
char *golden_strdup_printf(const char *format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

#endif
