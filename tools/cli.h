/*
 * cli.h - what the subcommands share: strict number parsing with messages
 * that name the flag and the bad value, and the device choice of the npu
 * backend.
 */
#ifndef MOEPERM_TOOLS_CLI_H
#define MOEPERM_TOOLS_CLI_H

#include <stdbool.h>
#include <stdint.h>

/* Parses all of text as a decimal integer in [min, max]; on failure prints
 * "moeperm CMD: FLAG is "TEXT", expected ..." and returns false. */
bool cli_int64(const char *cmd, const char *flag, const char *text, int64_t min, int64_t max,
               int64_t *out);
bool cli_uint64(const char *cmd, const char *flag, const char *text, uint64_t *out);

/* The backend named by --backend (backend_name) with its options: the
 * device is --device N when given (device_flag != NULL), else
 * MOEPERM_NPU_DEVICE, else 0.  Returns NULL after printing a message that
 * names the bad value. */
struct backend_ops;
struct backend_options;
const struct backend_ops *cli_backend(const char *cmd, const char *backend_name,
                                      const char *device_flag,
                                      struct backend_options *options);

/* Seconds on a monotonic clock. */
double cli_now(void);

#endif
