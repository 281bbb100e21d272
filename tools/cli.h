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

/* Checks, before any work is done, that path can take an output file
 * (flag names the option, e.g. "--out"): not empty, not a directory, and
 * in a directory that exists and is writable.  Returns false after
 * printing a message that names the option and the path. */
bool cli_output_path(const char *cmd, const char *flag, const char *path);

/* Makes sure path is a directory that can take output files, creating it
 * and its missing parents.  Returns false after
 * printing a message that names the option and the path. */
bool cli_output_dir(const char *cmd, const char *flag, const char *path);

/* Refuses an output path that names one of the files of case c (its
 * manifest or a tensor file, as golden_case_read() or
 * golden_case_read_manifest() noted them), however spelled: compared by
 * device and inode, so a run or a report never replaces the golden data it
 * reads.  A path that does not exist yet is fine.  Returns false after
 * printing a message naming the path and the case file. */
bool cli_not_case_file(const char *cmd, const char *flag, const char *path,
                       const golden_case *c);

/* Refuses an output path in the directory case_dir (compared by device and
 * inode): for a case whose manifest cannot be read, so that which of its
 * files are golden data is unknown.  Returns false after printing a
 * message naming the path and the case. */
bool cli_not_in_dir(const char *cmd, const char *flag, const char *path, const char *case_dir);

/* The backend named by --backend (backend_name) with its options: the
 * device is --device N when given (device_flag != NULL), else, for the npu
 * backend only, MOEPERM_NPU_DEVICE, else 0.  Returns NULL after printing a
 * message that names the bad value. */
struct backend_ops;
struct backend_options;
const struct backend_ops *cli_backend(const char *cmd, const char *backend_name,
                                      const char *device_flag,
                                      struct backend_options *options);

/* The operator a user names: the vendor's name ("MoeTokenPermute") or the
 * short one ("permute", "permute-grad", "unpermute", "unpermute-grad");
 * 0 when it is neither. */
moeperm_op cli_op(const char *name);

/* printf into a malloc'd string; NULL when memory runs out. */
char *cli_format(const char *format, ...) __attribute__((format(printf, 1, 2)));

/* The directory part of path ("." when there is none), malloc'd; NULL
 * when memory runs out. */
char *cli_dir_of(const char *path);

/* Seconds on a monotonic clock. */
double cli_now(void);

#endif
