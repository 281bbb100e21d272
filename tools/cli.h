/*
 * cli.h - what the subcommands share: strict number parsing with messages
 * that name the flag and the bad value, the checks of output paths made
 * before any work, and the device choice of the npu backend.
 */
#ifndef MOEPERM_TOOLS_CLI_H
#define MOEPERM_TOOLS_CLI_H

#include <stdbool.h>
#include <stdint.h>

#include <moeperm/golden.h>

/* Parses all of text as a decimal integer in [min, max]; on failure prints
 * "moeperm CMD: FLAG is "TEXT", expected ..." and returns false. */
bool cli_int64(const char *cmd, const char *flag, const char *text, int64_t min, int64_t max,
               int64_t *out);
bool cli_uint64(const char *cmd, const char *flag, const char *text, uint64_t *out);

/* Whether name is a chip moeperm_chip_by_name() knows (its numbers into
 * *chip when chip is not NULL); otherwise prints "moeperm CMD: --chip is
 * "NAME", expected one of ..." and returns false. */
bool cli_chip(const char *cmd, const char *name, moeperm_chip *chip);

/*
 * cli_output_path() is the check every output file of every command goes
 * through, before any work: flag names the option ("--out", "--junit",
 * "--json").  The output is written to a temporary beside path and
 * renamed into place (moeperm_golden_write_file_atomic()), so anything at path is
 * replaced, never written through; what that would destroy, or what a
 * shell redirect could not have written, is refused, each with one
 * sentence naming the path and what it is:
 *   - an empty name, a name ending in '/', a name whose temporary
 *     (".NAME.tmp.XXXXXX", 12 bytes more) would pass the directory's
 *     NAME_MAX or PATH_MAX;
 *   - a directory that is missing, not a directory or not writable;
 *   - an existing directory, symbolic link (even to a regular file),
 *     FIFO, socket or device;
 *   - a regular file the caller cannot write (access(W_OK) with the
 *     effective ids: permissions, a read-only file system, an immutable
 *     file), or, for root, a file with no write bit at all; a file of
 *     another user in a sticky directory;
 *   - a file of a case: of each of the case_count directories in
 *     case_dirs (the cases the command reads or judges), and of a case in
 *     path's own directory, compared by device and inode however path is
 *     spelled, and by name for a file the manifest lists that is missing.
 *     Where such a manifest cannot be read, nothing may be written in its
 *     directory;
 *   - one of the read_count files in reads: the outputs the command
 *     judges (compare's PATH, the files below check --outputs), compared
 *     the same two ways;
 *   - a file named case.json anywhere (it would make its directory a
 *     case).
 * Returns false after printing the message.  Not thread safe.
 */
bool cli_output_path(const char *cmd, const char *flag, const char *path,
                     char *const *case_dirs, size_t case_count, char *const *reads,
                     size_t read_count);

/* Refuses two of the count report paths (flags[i] the option of paths[i];
 * NULL and "-" skipped) that name one file, which the second report would
 * replace.  Returns false after printing the message. */
bool cli_distinct_outputs(const char *cmd, const char *const *flags, const char *const *paths,
                          size_t count);

/* --html takes a file: "-" (standard output for --json) is refused with a
 * sentence saying so.  Returns false after printing it. */
bool cli_html_path(const char *cmd, const char *path);

/* Makes sure path is a directory that can take output files, creating it
 * and its missing parents; *made receives the topmost directory it
 * created (malloc'd), NULL when it created none.  Returns false after
 * printing a message that names the option and the path (then nothing it
 * made is left and *made is NULL). */
bool cli_output_dir(const char *cmd, const char *flag, const char *path, char **made);

/* After a failure: removes what cli_output_dir() made for path, from path
 * up to made, each directory only if it is empty; frees made (NULL: does
 * nothing). */
void cli_output_dir_undo(const char *path, char *made);

/* The backend named by --backend (backend_name) with its options: the
 * device is --device N when given (device_flag != NULL), else, for the npu
 * backend only, MOEPERM_NPU_DEVICE, else 0.  Returns NULL after printing a
 * message that names the bad value. */
struct backend_ops;
struct backend_options;
const struct backend_ops *cli_backend(const char *cmd, const char *backend_name,
                                      const char *device_flag,
                                      struct backend_options *options);

/* printf into a malloc'd string; NULL when memory runs out. */
char *cli_format(const char *format, ...) __attribute__((format(printf, 1, 2)));

/* Whether a and b (from stat()) are one file: the same device and inode,
 * however each was spelled. */
struct stat;
bool cli_same_file(const struct stat *a, const struct stat *b);

/* The directory part of path ("." when there is none), malloc'd; NULL
 * when memory runs out. */
char *cli_dir_of(const char *path);

/* Seconds on a monotonic clock. */
double cli_now(void);

#endif
