/*
 * signal_shim.c - an LD_PRELOAD library that sends the process a signal at
 * the worst moments of an atomic write: just before (or just after) its
 * Nth rename, when the temporary output is complete and not yet in place,
 * or in the middle of removing a replaced case.
 *
 *   SHIM_SIGNAL_AT_RENAME=N     before the Nth rename (1 = the first)
 *   SHIM_SIGNAL_AFTER_RENAME=N  after the Nth rename has returned
 *   SHIM_SIGNAL_AT_UNLINK=N     before the Nth unlink()
 *   SHIM_SIGNAL=NAME            INT (default), TERM, HUP, QUIT, PIPE, ALRM,
 *                               USR1, USR2, XCPU, VTALRM, PROF, ABRT, RTMIN
 *                               or KILL
 *
 * To open a race window exactly where it matters, it can also pause:
 *
 *   SHIM_SLEEP=SECONDS          how long (a decimal number)
 *   SHIM_SLEEP_AFTER_RENAME=N   after the Nth rename has returned
 *   SHIM_SLEEP_AT_READDIR=N     before the Nth readdir() returns
 *
 * "Rename" counts rename(), renameat() and renameat2() together, in call
 * order.  Timing a kill from outside can only hope to land in those
 * windows; this lands in them every time, so the fault tests are
 * deterministic.  It also makes calls fail:
 *
 *   SHIM_FAIL_RENAME_AT=N     the Nth rename fails with ENOSPC, nothing moved
 *   SHIM_FAIL_RENAME_FROM=N   the Nth and every later one
 *   SHIM_NO_EXCHANGE=1        renameat2(RENAME_EXCHANGE) fails with EINVAL,
 *                             as on a file system without it (not counted)
 *   SHIM_FAIL_UNLINK_AT=N     the Nth unlink() fails with EIO, nothing removed
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

static int renames, unlinks, readdirs;

static int env_is(const char *name, int count)
{
    const char *v = getenv(name);
    return v && atoi(v) == count;
}

static void send_signal(void)
{
    static const struct {
        const char *name;
        int sig;
    } known[] = {
        {"INT", SIGINT},   {"TERM", SIGTERM}, {"HUP", SIGHUP},       {"QUIT", SIGQUIT},
        {"PIPE", SIGPIPE}, {"ALRM", SIGALRM}, {"USR1", SIGUSR1},     {"USR2", SIGUSR2},
        {"XCPU", SIGXCPU}, {"PROF", SIGPROF}, {"VTALRM", SIGVTALRM}, {"ABRT", SIGABRT},
        {"KILL", SIGKILL},
    };
    const char *name = getenv("SHIM_SIGNAL");
    int sig = SIGINT;
    if (name && strcmp(name, "RTMIN") == 0)
        sig = SIGRTMIN;
    for (size_t i = 0; name && i < sizeof known / sizeof known[0]; i++)
        if (strcmp(name, known[i].name) == 0)
            sig = known[i].sig;
    raise(sig);
}

static void pause_here(void)
{
    const char *v = getenv("SHIM_SLEEP");
    double seconds = v ? atof(v) : 1.0;
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Called before each counted rename: 0 to go on, -1 (errno set) to fail. */
static int before_rename(void)
{
    renames++;
    const char *fail_from = getenv("SHIM_FAIL_RENAME_FROM");
    if (env_is("SHIM_FAIL_RENAME_AT", renames) || (fail_from && renames >= atoi(fail_from))) {
        errno = ENOSPC;
        return -1;
    }
    if (env_is("SHIM_SIGNAL_AT_RENAME", renames))
        send_signal();
    return 0;
}

static int after_rename(int rc)
{
    int saved = errno;
    if (env_is("SHIM_SLEEP_AFTER_RENAME", renames))
        pause_here();
    if (env_is("SHIM_SIGNAL_AFTER_RENAME", renames))
        send_signal();
    errno = saved;
    return rc;
}

typedef int (*rename_fn)(const char *, const char *);
typedef int (*renameat_fn)(int, const char *, int, const char *);
typedef int (*renameat2_fn)(int, const char *, int, const char *, unsigned);
typedef int (*unlink_fn)(const char *);
typedef struct dirent *(*readdir_fn)(DIR *);

/* POSIX's way to store dlsym()'s object pointer in a function pointer. */
#define REAL(type, name)                                                                       \
    type real;                                                                                 \
    *(void **)&real = dlsym(RTLD_NEXT, name)

int rename(const char *from, const char *to)
{
    REAL(rename_fn, "rename");
    if (before_rename() != 0)
        return -1;
    return after_rename(real(from, to));
}

int renameat(int from_dir, const char *from, int to_dir, const char *to)
{
    REAL(renameat_fn, "renameat");
    if (before_rename() != 0)
        return -1;
    return after_rename(real(from_dir, from, to_dir, to));
}

int renameat2(int from_dir, const char *from, int to_dir, const char *to, unsigned flags)
{
    REAL(renameat2_fn, "renameat2");
    const char *no_exchange = getenv("SHIM_NO_EXCHANGE");
    if ((flags & RENAME_EXCHANGE) && no_exchange && no_exchange[0] == '1') {
        errno = EINVAL;
        return -1;
    }
    if (before_rename() != 0)
        return -1;
    return after_rename(real(from_dir, from, to_dir, to, flags));
}

int unlink(const char *path)
{
    REAL(unlink_fn, "unlink");
    unlinks++;
    if (env_is("SHIM_FAIL_UNLINK_AT", unlinks)) {
        errno = EIO;
        return -1;
    }
    if (env_is("SHIM_SIGNAL_AT_UNLINK", unlinks))
        send_signal();
    return real(path);
}

struct dirent *readdir(DIR *d)
{
    REAL(readdir_fn, "readdir");
    struct dirent *e = real(d);
    int saved = errno;
    if (env_is("SHIM_SLEEP_AT_READDIR", ++readdirs))
        pause_here();
    errno = saved;
    return e;
}
