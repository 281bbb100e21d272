/*
 * cli.c - parsing helpers shared by the subcommands, so every bad number
 * or path on the command line gets the same kind of sentence and the same
 * exit code.
 */
/* S_ISVTX, the sticky bit, is an XSI name. */
#define _XOPEN_SOURCE 700
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
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

bool cli_chip(const char *cmd, const char *name, moeperm_chip *chip)
{
    moeperm_chip found;
    if (strlen(name) >= MOEPERM_GOLDEN_CHIP_NAME_MAX ||
        moeperm_chip_by_name(name, &found) != MOEPERM_SUCCESS) {
        fprintf(stderr, "moeperm %s: --chip is \"%s\", expected one of %s (a chip without a name: "
                        "--ub-bytes and --vector-cores)\n", cmd, name, moeperm_chip_names());
        return false;
    }
    if (chip)
        *chip = found;
    return true;
}

/* What the entry st describes is, for a refusal: "a symbolic link", ... */
static const char *kind_of(const struct stat *st)
{
    if (S_ISLNK(st->st_mode))
        return "a symbolic link";
    if (S_ISDIR(st->st_mode))
        return "a directory";
    if (S_ISCHR(st->st_mode))
        return "a character device";
    if (S_ISBLK(st->st_mode))
        return "a block device";
    if (S_ISFIFO(st->st_mode))
        return "a FIFO (named pipe)";
    if (S_ISSOCK(st->st_mode))
        return "a socket";
    return "not a regular file";
}

bool cli_same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* Whether the entry at path and the output (out_st its stat() when
 * have_out; dir_st its directory's, base its last component) are one file:
 * the same device and inode however either is spelled, or, for an entry
 * not there yet, the same name in the same directory. */
static bool same_entry(const char *path, bool have_out, const struct stat *out_st,
                       const struct stat *dir_st, const char *base)
{
    struct stat st;
    if (have_out && stat(path, &st) == 0 && cli_same_file(&st, out_st))
        return true;
    const char *slash = strrchr(path, '/');
    if (strcmp(slash ? slash + 1 : path, base) != 0)
        return false;
    char *dir = cli_dir_of(path);
    bool same = dir && stat(dir, &st) == 0 && cli_same_file(&st, dir_st);
    free(dir);
    return same;
}

/* Refuses path when it is, or would become, a file of the case in
 * case_dir: out_st is stat() of path (links followed) when have_out, and
 * dir_st stat() of path's directory.  A manifest that cannot be read
 * leaves unknown which files are golden data, so then the whole
 * directory is off limits.  Returns false after printing the message. */
static bool not_a_case_file(const char *cmd, const char *flag, const char *path,
                            const char *base, bool have_out, const struct stat *out_st,
                            const struct stat *dir_st, const char *case_dir)
{
    struct stat st;
    bool in_case_dir = stat(case_dir, &st) == 0 && cli_same_file(&st, dir_st);
    moeperm_golden_case c;
    char err[1024];
    if (moeperm_golden_case_read(case_dir, MOEPERM_GOLDEN_LOAD_NONE, &c, err, sizeof err) != 0) {
        if (!in_case_dir)
            return true;
        fprintf(stderr,
                "moeperm %s: %s \"%s\" is in the directory of the case %s, whose manifest "
                "cannot be read (%s); refusing to write beside files that may be golden data\n",
                cmd, flag, path, case_dir, err);
        return false;
    }
    bool ok = true;
    /* i == 0 is the manifest, then each tensor's file. */
    for (size_t i = 0; ok && i <= c.tensor_count; i++) {
        const char *file = i == 0 ? c.manifest_path : c.tensors[i - 1].path;
        /* By name, for a file of the case that is missing (writing it
         * would complete the case with foreign data), else by device and
         * inode, however the output is spelled. */
        if (same_entry(file, have_out, out_st, dir_st, base)) {
            fprintf(stderr,
                    "moeperm %s: %s \"%s\" is %s, the %s%s of the case %s; refusing to "
                    "overwrite the golden case\n",
                    cmd, flag, path, file, i == 0 ? "manifest" : c.tensors[i - 1].name,
                    i == 0 ? "" : " file", c.dir);
            ok = false;
        }
    }
    moeperm_golden_case_free(&c);
    return ok;
}

bool cli_output_path(const char *cmd, const char *flag, const char *path,
                     char *const *case_dirs, size_t case_count, char *const *reads,
                     size_t read_count)
{
    size_t len = strlen(path);
    struct stat st, dir_st;
    if (len == 0) {
        fprintf(stderr, "moeperm %s: %s is \"\", expected a file name\n", cmd, flag);
        return false;
    }
    if (path[len - 1] == '/') {
        bool is_dir = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
        fprintf(stderr, "moeperm %s: %s \"%s\" %s, expected a file name\n", cmd, flag, path,
                is_dir ? "is a directory" : "ends with /");
        return false;
    }
    /* The output is written to a temporary beside it and renamed into
     * place, so what has to exist and take new files is its directory. */
    char *dir = cli_dir_of(path);
    if (!dir) {
        fprintf(stderr, "moeperm %s: out of memory checking %s \"%s\"\n", cmd, flag, path);
        return false;
    }
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    const char *problem = NULL;
    if (stat(dir, &dir_st) != 0)
        problem = strerror(errno);
    else if (!S_ISDIR(dir_st.st_mode))
        problem = "not a directory";
    else if (access(dir, W_OK | X_OK) != 0)
        problem = errno == EROFS ? strerror(errno) : "not writable";
    if (problem) {
        fprintf(stderr, "moeperm %s: %s \"%s\" cannot be written: its directory %s: %s\n", cmd,
                flag, path, dir, problem);
        free(dir);
        return false;
    }
    /* The temporary is ".NAME.tmp.XXXXXX": a name that fits but whose
     * temporary does not would fail only after all the work. */
    const size_t extra = strlen(".") + strlen(".tmp.XXXXXX");
    errno = 0;
    long name_max = pathconf(dir, _PC_NAME_MAX);
    if (name_max <= 0)
        name_max = NAME_MAX;
    if (strlen(base) + extra > (size_t)name_max || len + extra >= PATH_MAX) {
        bool name = strlen(base) + extra > (size_t)name_max;
        fprintf(stderr,
                "moeperm %s: %s \"%s\" is too long: its %s is %zu bytes, and the "
                "temporary written beside it (.NAME.tmp.XXXXXX) adds %zu, past the %ld bytes "
                "allowed%s%s\n",
                cmd, flag, path, name ? "file name" : "path", name ? strlen(base) : len, extra,
                name ? name_max : (long)PATH_MAX - 1, name ? " in " : " (PATH_MAX)",
                name ? dir : "");
        free(dir);
        return false;
    }

    struct stat out_st;
    bool exists = lstat(path, &st) == 0;
    if (!exists && errno != ENOENT) {
        fprintf(stderr, "moeperm %s: %s \"%s\" cannot be examined: %s\n", cmd, flag, path,
                strerror(errno));
        free(dir);
        return false;
    }
    bool have_out = exists && stat(path, &out_st) == 0;

    /* Golden data first: the most specific reason.  The cases judged, and
     * a case that lives in the output's own directory. */
    bool ok = true;
    for (size_t i = 0; ok && i < case_count; i++)
        ok = not_a_case_file(cmd, flag, path, base, have_out, &out_st, &dir_st, case_dirs[i]);
    char *manifest = cli_format("%s/case.json", dir);
    struct stat manifest_st;
    bool in_a_case = manifest && lstat(manifest, &manifest_st) == 0;
    if (ok && in_a_case)
        ok = not_a_case_file(cmd, flag, path, base, have_out, &out_st, &dir_st, dir);
    free(manifest);
    /* A file named case.json makes its directory a case to every command
     * that finds cases (check would then judge a tree it cannot read). */
    if (ok && strcmp(base, "case.json") == 0) {
        fprintf(stderr, "moeperm %s: %s \"%s\" is named case.json, which would make %s a "
                "golden case to every command that finds cases; name it otherwise\n", cmd,
                flag, path, dir);
        ok = false;
    }
    /* The outputs the command judges: a report written over one would be
     * judged, or read, in its place. */
    for (size_t i = 0; ok && i < read_count; i++) {
        if (same_entry(reads[i], have_out, &out_st, &dir_st, base)) {
            fprintf(stderr, "moeperm %s: %s \"%s\" is %s, an output this command reads to "
                    "judge; refusing to replace it with the report\n", cmd, flag, path,
                    reads[i]);
            ok = false;
        }
    }

    /* What a rename would destroy, or fail to write to, that a shell
     * redirect would have written through or refused. */
    if (ok && exists && S_ISDIR(st.st_mode)) {
        fprintf(stderr, "moeperm %s: %s \"%s\" is a directory, expected a file name\n", cmd, flag,
                path);
        ok = false;
    } else if (ok && exists && !S_ISREG(st.st_mode)) {
        char target[256] = "";
        ssize_t n = S_ISLNK(st.st_mode) ? readlink(path, target, sizeof target - 1) : -1;
        if (n > 0)
            target[n] = '\0';
        fprintf(stderr,
                "moeperm %s: %s \"%s\" is %s%s%s%s; moeperm writes a new regular file and "
                "renames it into place, which would replace %s; name a regular file\n",
                cmd, flag, path, kind_of(&st), n > 0 ? " (to " : "", n > 0 ? target : "",
                n > 0 ? ")" : "",
                S_ISLNK(st.st_mode) ? "the link, not write through it"
                                    : "it instead of writing to it");
        ok = false;
    } else if (ok && exists) {
        /* A shell redirect opens the file for writing: refused without
         * write permission for the caller (and on a read-only file system,
         * or for an immutable file).  Root may write anything, but a file
         * with no write bit at all is someone's "do not change". */
        if (faccessat(AT_FDCWD, path, W_OK, AT_EACCESS) != 0) {
            fprintf(stderr, "moeperm %s: %s \"%s\" is a file you cannot write (mode %04o): %s; "
                    "refusing to replace it\n", cmd, flag, path, (unsigned)(st.st_mode & 07777),
                    strerror(errno));
            ok = false;
        } else if (geteuid() == 0 && (st.st_mode & 0222) == 0) {
            fprintf(stderr, "moeperm %s: %s \"%s\" is a read-only file (mode %04o); refusing "
                    "to replace it, even as root (chmod u+w it first)\n", cmd, flag, path,
                    (unsigned)(st.st_mode & 07777));
            ok = false;
        } else if ((dir_st.st_mode & S_ISVTX) && geteuid() != 0 && st.st_uid != geteuid() &&
                   dir_st.st_uid != geteuid()) {
            fprintf(stderr, "moeperm %s: %s \"%s\" belongs to another user in the sticky "
                    "directory %s, where only its owner may replace it\n", cmd, flag, path,
                    dir);
            ok = false;
        }
    }
    free(dir);
    return ok;
}

bool cli_html_path(const char *cmd, const char *path)
{
    if (strcmp(path, "-") != 0)
        return true;
    fprintf(stderr, "moeperm %s: --html is \"-\", expected a file name: the page is one file "
                    "(./- names a file called -)\n", cmd);
    return false;
}

bool cli_output_dir(const char *cmd, const char *flag, const char *path, char **made)
{
    struct stat st;
    *made = NULL;
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
        if (mkdir(copy, 0777) == 0) {
            if (!*made && !(*made = strdup(copy))) {
                fprintf(stderr, "moeperm %s: out of memory\n", cmd);
                ok = false;
            }
        } else if (errno != EEXIST) {
            fprintf(stderr, "moeperm %s: %s \"%s\": cannot create the directory %s: %s\n", cmd,
                    flag, path, copy, strerror(errno));
            ok = false;
        }
        *p = saved;
        if (saved == '\0')
            break;
    }
    free(copy);
    if (!ok)
        cli_output_dir_undo(path, *made);
    return ok;
}

void cli_output_dir_undo(const char *path, char *made)
{
    char *copy = made ? strdup(path) : NULL;
    size_t stop = made ? strlen(made) : 0;
    /* made is a leading part of path; each directory from path up to it
     * goes only if empty: rmdir() never removes what another process put
     * there meanwhile. */
    while (copy) {
        size_t n = strlen(copy);
        while (n > 1 && copy[n - 1] == '/')
            copy[--n] = '\0';
        char *slash = strrchr(copy, '/');
        if (n < stop || rmdir(copy) != 0 || n == stop || !slash)
            break;
        *slash = '\0';
    }
    free(copy);
    free(made);
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

bool cli_distinct_outputs(const char *cmd, const char *const *flags, const char *const *paths,
                          size_t count)
{
    for (size_t i = 0; i < count; i++) {
        struct stat st, dir_st;
        if (!paths[i] || strcmp(paths[i], "-") == 0)
            continue;
        char *dir = cli_dir_of(paths[i]);
        bool known = dir && stat(dir, &dir_st) == 0;
        free(dir);
        if (!known)
            continue; /* cli_output_path() says what is wrong with it */
        bool have = stat(paths[i], &st) == 0;
        const char *slash = strrchr(paths[i], '/');
        for (size_t j = i + 1; j < count; j++) {
            if (paths[j] && strcmp(paths[j], "-") != 0 &&
                same_entry(paths[j], have, &st, &dir_st, slash ? slash + 1 : paths[i])) {
                fprintf(stderr, "moeperm %s: %s \"%s\" and %s \"%s\" name the same file; "
                        "each report needs its own\n", cmd, flags[i], paths[i], flags[j],
                        paths[j]);
                return false;
            }
        }
    }
    return true;
}
