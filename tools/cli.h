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

/* --device N when given (device_flag != NULL), else MOEPERM_NPU_DEVICE,
 * else 0.  Returns false after printing a message for a bad value. */
bool cli_device(const char *cmd, const char *device_flag, int *device);

/* Seconds on a monotonic clock. */
double cli_now(void);

#endif
