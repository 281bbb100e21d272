/*
 * cli.c - parsing helpers shared by the subcommands, so every bad number
 * or path on the command line gets the same kind of sentence and the same
 * exit code.
 */
#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"

char *cli_format(const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    int n = vsnprintf(NULL, 0, format, ap);
    va_end(ap);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!s)
        return NULL;
    va_start(ap, format);
    vsnprintf(s, (size_t)n + 1, format, ap);
    va_end(ap);
    return s;
}

moeperm_op cli_op(const char *name)
{
    static const struct {
        const char *short_name;
        moeperm_op op;
    } short_names[] = {{"permute-grad", MOEPERM_OP_PERMUTE_GRAD},
                       {"permute", MOEPERM_OP_PERMUTE},
                       {"unpermute", MOEPERM_OP_UNPERMUTE},
                       {"unpermute-grad", MOEPERM_OP_UNPERMUTE_GRAD}};
    for (size_t i = 0; i < sizeof short_names / sizeof short_names[0]; i++)
        if (strcmp(name, short_names[i].short_name) == 0)
            return short_names[i].op;
    return moeperm_op_parse(name);
}

char *cli_dir_of(const char *path)
{
    /* dirname() may modify its argument and return static storage */
    char *copy = strdup(path);
    char *dir = copy ? strdup(dirname(copy)) : NULL;
    free(copy);
    return dir;
}

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

bool cli_output_path(const char *cmd, const char *flag, const char *path)
{
    size_t len = strlen(path);
    struct stat st;
    if (len == 0) {
        fprintf(stderr, "moeperm %s: %s is \"\", expected a file name\n", cmd, flag);
        return false;
    }
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        fprintf(stderr, "moeperm %s: %s \"%s\" is a directory, expected a file name\n", cmd,
                flag, path);
        return false;
    }
    if (path[len - 1] == '/') {
        fprintf(stderr, "moeperm %s: %s \"%s\" ends with /, expected a file name\n", cmd, flag,
                path);
        return false;
    }
    /* The output is written to a temporary beside it and renamed into
     * place, so what has to exist and take new files is its directory. */
    char *dir = cli_dir_of(path);
    if (!dir) {
        fprintf(stderr, "moeperm %s: out of memory checking %s \"%s\"\n", cmd, flag, path);
        return false;
    }
    const char *problem = NULL;
    if (stat(dir, &st) != 0)
        problem = strerror(errno);
    else if (!S_ISDIR(st.st_mode))
        problem = "not a directory";
    else if (access(dir, W_OK | X_OK) != 0)
        problem = errno == EROFS ? strerror(errno) : "not writable";
    if (problem)
        fprintf(stderr, "moeperm %s: %s \"%s\" cannot be written: its directory %s: %s\n", cmd,
                flag, path, dir, problem);
    free(dir);
    return problem == NULL;
}

bool cli_output_dir(const char *cmd, const char *flag, const char *path)
{
    struct stat st;
    if (path[0] == '\0') {
        fprintf(stderr, "moeperm %s: %s is \"\", expected a directory\n", cmd, flag);
        return false;
    }
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode))
            return true;
        fprintf(stderr, "moeperm %s: %s \"%s\" exists and is not a directory; this case has "
                        "several outputs, written as %s/<output>.bin\n",
                cmd, flag, path, path);
        return false;
    }
    /* Missing parents too, as `mkdir -p`: a harness's output tree is
     * usually made case by case. */
    char *copy = strdup(path);
    if (!copy) {
        fprintf(stderr, "moeperm %s: out of memory\n", cmd);
        return false;
    }
    bool ok = true;
    for (char *p = copy + 1; ok; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char saved = *p;
        *p = '\0';
        if (mkdir(copy, 0777) != 0 && errno != EEXIST) {
            fprintf(stderr, "moeperm %s: %s \"%s\": cannot create the directory %s: %s\n", cmd,
                    flag, path, copy, strerror(errno));
            ok = false;
        }
        *p = saved;
        if (saved == '\0')
            break;
    }
    free(copy);
    return ok;
}

bool cli_not_case_file(const char *cmd, const char *flag, const char *path,
                       const golden_case *c)
{
    struct stat out, st;
    if (stat(path, &out) != 0)
        return true; /* nothing there yet, nothing to lose */
    const char *what = "manifest", *file = c->manifest_path;
    bool same = file && stat(file, &st) == 0 && st.st_dev == out.st_dev && st.st_ino == out.st_ino;
    for (size_t i = 0; !same && i < c->tensor_count; i++) {
        file = c->tensors[i].path;
        what = c->tensors[i].name;
        same = file && stat(file, &st) == 0 && st.st_dev == out.st_dev &&
               st.st_ino == out.st_ino;
    }
    if (same)
        fprintf(stderr,
                "moeperm %s: %s \"%s\" is %s, the %s%s of the case %s; refusing to "
                "overwrite the golden case\n",
                cmd, flag, path, file, what, file == c->manifest_path ? "" : " file", c->dir);
    return !same;
}

bool cli_not_in_dir(const char *cmd, const char *flag, const char *path, const char *case_dir)
{
    char *dir = cli_dir_of(path);
    struct stat a, b;
    bool inside = dir && stat(dir, &a) == 0 && stat(case_dir, &b) == 0 && a.st_dev == b.st_dev &&
                  a.st_ino == b.st_ino;
    if (!dir)
        fprintf(stderr, "moeperm %s: out of memory checking %s \"%s\"\n", cmd, flag, path);
    else if (inside)
        fprintf(stderr,
                "moeperm %s: %s \"%s\" is in the directory of the case %s, whose manifest "
                "cannot be read; refusing to write beside files that may be golden data\n",
                cmd, flag, path, case_dir);
    free(dir);
    return dir && !inside;
}

const backend_ops *cli_backend(const char *cmd, const char *backend_name,
                               const char *device_flag, backend_options *options)
{
    const backend_ops *ops = backend_find(backend_name);
    if (!ops) {
        fprintf(stderr, "moeperm %s: --backend is \"%s\", expected one of %s\n", cmd,
                backend_name, backend_names());
        return NULL;
    }
    int64_t v = 0;
    if (device_flag) {
        if (!cli_int64(cmd, "--device", device_flag, 0, INT_MAX, &v))
            return NULL;
    } else if (strcmp(ops->name, "npu") == 0) {
        /* The variable is the npu backend's: a bad value must not stop a
         * cpu run in a shell set up for the device. */
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
