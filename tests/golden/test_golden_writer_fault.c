/*
 * The writer's hashing thread runs the generator's code while it has
 * nothing to hash (golden_case_writer_help()).  A fault there must still
 * reach the cleanup, which removes the unfinished case, and the process
 * must die of that fault.  The writer's threads block the asynchronous
 * signals, so that their cleanup runs on the thread that creates the
 * files; a fault whose signal is blocked kills the process without any
 * handler, which left the temporary directory behind.
 *
 * Not a cmocka program: cmocka catches SIGSEGV in its tests, and the
 * cleanup leaves a signal alone that a handler already takes.  Exit 0
 * when the case is removed, 1 when not, 77 (skipped) under a sanitizer,
 * whose own SIGSEGV handler comes first.
 */
#define _XOPEN_SOURCE 700
#include <dirent.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "golden/case/writer.h"
#include "golden/common/path.h"

/* A help function that faults, as a bug in the generator's code would. */
static bool help_that_faults(void *arg)
{
    volatile int *volatile nowhere = arg;
    *nowhere = 1;
    return false;
}

int main(void)
{
#if defined(__SANITIZE_ADDRESS__)
    puts("skipped: the sanitizer's SIGSEGV handler comes first");
    return 77;
#endif
    char dir[] = "/tmp/moeperm-test-fault-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 1;
    }
    if (pid == 0) {
        char path[128], err[512];
        snprintf(path, sizeof path, "%s/case", dir);
        golden_case_writer *w = golden_case_writer_open(path, false, err, sizeof err);
        if (!w) {
            fprintf(stderr, "%s\n", err);
            _exit(3);
        }
        golden_case_writer_help(w, help_that_faults, NULL);
        sleep(10); /* the hashing thread has nothing to hash: it helps, and faults */
        _exit(4);
    }
    int status;
    if (waitpid(pid, &status, 0) != pid) {
        perror("waitpid");
        return 1;
    }
    int left = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));)
        if (e->d_name[0] != '.' || (e->d_name[1] && (e->d_name[1] != '.' || e->d_name[2]))) {
            printf("left behind: %s/%s\n", dir, e->d_name);
            left++;
        }
    if (d)
        closedir(d);
    bool died_of_it = WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV;
    golden_remove_tree(dir);
    if (!died_of_it) {
        printf("FAIL: the writer's process ended with status 0x%x, not by SIGSEGV\n",
               (unsigned)status);
        return 1;
    }
    if (left) {
        printf("FAIL: the unfinished case was not removed\n");
        return 1;
    }
    puts("ok: a fault in the hashing thread removed the unfinished case");
    return 0;
}
