/*
 * cli.c - parsing helpers shared by the subcommands, so every bad number
 * on the command line gets the same kind of sentence and the same exit code.
 */
#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"

bool cli_int64(const char *cmd, const char *flag, const char *text, int64_t min, int64_t max,
               int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (text[0] == '\0' || *end != '\0' || errno == ERANGE || v < min || v > max) {
        fprintf(stderr, "moeperm %s: %s is \"%s\", expected an integer from %" PRId64
                        " to %" PRId64 "\n", cmd, flag, text, min, max);
        return false;
    }
    *out = (int64_t)v;
    return true;
}

bool cli_uint64(const char *cmd, const char *flag, const char *text, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (text[0] < '0' || text[0] > '9' || *end != '\0' || errno == ERANGE) {
        fprintf(stderr, "moeperm %s: %s is \"%s\", expected an integer from 0 to %" PRIu64 "\n",
                cmd, flag, text, UINT64_MAX);
        return false;
    }
    *out = (uint64_t)v;
    return true;
}

const backend_ops *cli_backend(const char *cmd, const char *backend_name,
                               const char *device_flag, backend_options *options)
{
    const backend_ops *ops = backend_find(backend_name);
    if (!ops) {
        fprintf(stderr, "moeperm %s: --backend is \"%s\", expected cpu or npu\n", cmd,
                backend_name);
        return NULL;
    }
    int64_t v = 0;
    if (device_flag) {
        if (!cli_int64(cmd, "--device", device_flag, 0, INT_MAX, &v))
            return NULL;
    } else {
        const char *env = getenv("MOEPERM_NPU_DEVICE");
        if (env && env[0] && !cli_int64(cmd, "MOEPERM_NPU_DEVICE", env, 0, INT_MAX, &v))
            return NULL;
    }
    memset(options, 0, sizeof *options);
    options->device_id = (int)v;
    return ops;
}

double cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
