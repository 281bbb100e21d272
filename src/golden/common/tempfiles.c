/*
 * tempfiles.c - the temporaries a writer leaves while it works (an output's
 * temporary file, a case directory being written, an old case moved
 * aside), and their cleanup when a signal ends the process: one table the
 * signal handler reads, filled and emptied around each step that creates
 * or parks something (tempfiles.h says what each kind means).
 */
#include "golden/common/tempfiles.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* A case directory being written plus the old one parked, or one output
 * file: two slots are in use at most; four leave room. */
#define TEMP_SLOTS 4
#define TEMP_PATH_MAX 4096

typedef struct temp_slot {
    volatile sig_atomic_t kind; /* 0 = free; written last, after the rest */
    char path[TEMP_PATH_MAX];
    char target[TEMP_PATH_MAX];
    const char *const *files; /* what a directory may hold */
    size_t file_count;
} temp_slot;

static temp_slot temp_slots[TEMP_SLOTS];

/* The handler may only use async-signal-safe calls: no snprintf, no
 * malloc, so paths are joined by hand into a stack buffer. */
static size_t append(char *out, size_t size, size_t n, const char *s)
{
    for (; *s && n + 1 < size; s++)
        out[n++] = *s;
    out[n] = '\0';
    return n;
}

static void join_path(char *out, const char *dir, const char *file)
{
    size_t n = append(out, TEMP_PATH_MAX, 0, dir);
    append(out, TEMP_PATH_MAX, append(out, TEMP_PATH_MAX, n, "/"), file);
}

/* The files the slot's directory may hold, from the list its writer gave
 * (static): the handler may not allocate or read directories. */
static void remove_dir(const temp_slot *s)
{
    char path[TEMP_PATH_MAX];
    for (size_t i = 0; i < s->file_count; i++) {
        join_path(path, s->path, s->files[i]);
        unlink(path);
    }
    rmdir(s->path);
}

/* Every signal whose default action ends the process, except SIGKILL
 * and SIGSTOP, which cannot be caught, and SIGXFSZ, which is ignored
 * (install_cleanup()); the real-time signals are added at run time. */
static const struct {
    int sig;
    const char *name;
} fatal_signals[] = {
    {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},       {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},
    {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"},     {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},
    {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"},     {SIGUSR2, "SIGUSR2"}, {SIGPIPE, "SIGPIPE"},
    {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"},     {SIGXCPU, "SIGXCPU"}, {SIGVTALRM, "SIGVTALRM"},
    {SIGPROF, "SIGPROF"}, {SIGSYS, "SIGSYS"},
#ifdef SIGSTKFLT
    {SIGSTKFLT, "SIGSTKFLT"},
#endif
#ifdef SIGPOLL
    {SIGPOLL, "SIGPOLL"},
#endif
#ifdef SIGPWR
    {SIGPWR, "SIGPWR"},
#endif
#ifdef SIGLOST
    {SIGLOST, "SIGLOST"},
#endif
};
#define NUM_FATAL_SIGNALS (sizeof fatal_signals / sizeof fatal_signals[0])

static void on_fatal_signal(int sig)
{
    int saved = errno;
    bool cleaned = false;
    for (int i = 0; i < TEMP_SLOTS; i++) {
        temp_slot *s = &temp_slots[i];
        cleaned = cleaned || s->kind != 0;
        if (s->kind == GOLDEN_TEMP_FILE)
            unlink(s->path);
        else if (s->kind == GOLDEN_TEMP_DIR)
            remove_dir(s);
    }
    /* Parked cases last: the new case directory is gone by now unless it
     * was already renamed into place, and then the old one is dropped. */
    for (int i = 0; i < TEMP_SLOTS; i++) {
        temp_slot *s = &temp_slots[i];
        /* A parked case goes back; it is dropped only when another
         * writer's case took its name (any other failure keeps it). */
        if (s->kind == GOLDEN_TEMP_PARKED && rename(s->path, s->target) != 0 &&
            (errno == EEXIST || errno == ENOTEMPTY))
            remove_dir(s);
        s->kind = 0;
    }
    /* Silent when no output was being written: then the signal only does
     * what it would have done without this handler. */
    if (cleaned) {
        char message[160], number[16] = "";
        const char *name = NULL;
        for (size_t i = 0; i < NUM_FATAL_SIGNALS; i++)
            if (fatal_signals[i].sig == sig)
                name = fatal_signals[i].name;
        if (!name) {
            /* A real-time signal: SIGRTMIN+N, the number written by hand. */
            int offset = sig - SIGRTMIN;
            char digits[12];
            size_t d = 0;
            do
                digits[d++] = (char)('0' + offset % 10);
            while ((offset /= 10) > 0 && d < sizeof digits);
            number[0] = '+';
            for (size_t i = 0; i < d; i++)
                number[1 + i] = digits[d - 1 - i];
            number[1 + d] = '\0';
            name = "SIGRTMIN";
        }
        size_t n = append(message, sizeof message, 0, "moeperm: interrupted by ");
        n = append(message, sizeof message, n, name);
        if (number[1] != '0')
            n = append(message, sizeof message, n, number);
        n = append(message, sizeof message, n,
                   "; the unfinished output was removed, earlier outputs are kept\n");
        ssize_t ignored = write(STDERR_FILENO, message, n);
        (void)ignored;
    }
    signal(sig, SIG_DFL);
    errno = saved;
    raise(sig);
}

static void install_one(int sig)
{
    struct sigaction old, sa;
    /* Leave alone a signal the caller handles or ignores (a background
     * job's SIGINT, nohup's SIGHUP, a sanitizer's SIGSEGV). */
    if (sigaction(sig, NULL, &old) != 0 || old.sa_handler != SIG_DFL)
        return;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fatal_signal;
    sigfillset(&sa.sa_mask); /* one cleanup at a time */
    sigaction(sig, &sa, NULL);
}

static void install_cleanup(void)
{
    static bool installed;
    if (installed)
        return;
    installed = true;
    for (size_t i = 0; i < NUM_FATAL_SIGNALS; i++)
        install_one(fatal_signals[i].sig);
#if defined(SIGRTMIN) && defined(SIGRTMAX)
    for (int sig = SIGRTMIN; sig <= SIGRTMAX; sig++)
        install_one(sig);
#endif
    struct sigaction old;
    if (sigaction(SIGXFSZ, NULL, &old) == 0 && old.sa_handler == SIG_DFL)
        signal(SIGXFSZ, SIG_IGN);
}

int golden_temp_track(int kind, const char *path, const char *target, const char *const *files,
                      size_t file_count)
{
    install_cleanup();
    if (strlen(path) >= TEMP_PATH_MAX || (target && strlen(target) >= TEMP_PATH_MAX))
        return -1;
    for (int i = 0; i < TEMP_SLOTS; i++) {
        temp_slot *s = &temp_slots[i];
        if (s->kind != 0)
            continue;
        strcpy(s->path, path);
        strcpy(s->target, target ? target : "");
        s->files = files;
        s->file_count = files ? file_count : 0;
        /* The handler must never see the kind before the rest. */
        atomic_signal_fence(memory_order_seq_cst);
        s->kind = kind;
        return i;
    }
    return -1;
}

void golden_temp_untrack(int slot)
{
    if (slot >= 0 && slot < TEMP_SLOTS)
        temp_slots[slot].kind = 0;
}

