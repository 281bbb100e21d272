/*
 * moeperm.c - the moeperm command-line tool: dispatch to one subcommand per
 * file (commands.h), usage, and `version`.  Exit status, as the README
 * says: 0 ok, 1 mismatch, 2 bad usage or bad input, 3 backend failure.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <moeperm/moeperm.h>

#include "commands.h"

static const char usage_text[] =
    "usage: moeperm COMMAND [OPTIONS]\n"
    "\n"
    "  golden --out DIR [--suite NAME ...] [--seed N] [--force] [--list]\n"
    "      write the named built-in suites (default: every default suite, and\n"
    "      DIR/README.md listing them); --suite takes one or more names, and may\n"
    "      be repeated\n"
    "  golden --out DIR [--op OP] --tokens T --top-k K --hidden H --dtype D [...]\n"
    "      write one custom case of any operator (see moeperm golden --help)\n"
    "  run CASE_DIR --out PATH [--backend cpu|npu] [--device N]\n"
    "      compute the case's outputs into PATH (a file, .bin or .npy, or a\n"
    "      directory for several outputs)\n"
    "  compare CASE_DIR PATH [--max-ulp N] [--json FILE] [--html FILE] [--strict-nan]\n"
    "      compare outputs with the case's golden ones, bit for bit, with a diagnosis\n"
    "  check DIR ... [--backend cpu|npu] [--device N] [--outputs OUTDIR] [--op OP ...]\n"
    "        [--shard I/N] [--max-ulp N] [--json FILE] [--junit FILE] [--html FILE]\n"
    "        [--strict-nan]\n"
    "      judge every case below each DIR: run it, or read a harness's outputs\n"
    "  make-case --out DIR --op OP --name NAME --input NAME=FILE[:DTYPE:SHAPE] ...\n"
    "      a case from your own tensors, outputs from the reference\n"
    "  bench [--op OP|all] [--tokens T] [--top-k K] [--hidden H] [--dtype D]\n"
    "        [--probs-dtype D] [--values KIND] [--threads N] [--reps N] [--json FILE]\n"
    "      time an operator through the public API against memory bandwidth and\n"
    "      against its portable loop\n"
    "  version\n"
    "      print the tool's and the library's versions\n"
    "\n"
    "moeperm COMMAND --help describes every option and its default.\n"
    "exit status: 0 ok, 1 mismatch, 2 bad usage or bad input, 3 backend failure\n";

static int cmd_version(int argc, char **argv)
{
    /* --help as every command takes it (README: "moeperm COMMAND --help"). */
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        printf("usage: moeperm version\n"
               "  print the tool's and the library's versions\n");
        return EXIT_OK;
    }
    if (argc > 1) {
        fprintf(stderr, "moeperm version: takes no arguments, got \"%s\"\n", argv[1]);
        return EXIT_BAD_INPUT;
    }
    printf("moeperm %s (libmoeperm %s)\n", MOEPERM_VERSION_STRING, moeperm_version());
    return EXIT_OK;
}

/*
 * Standard output is buffered, so a failed write (a full disk, a file
 * over its size limit, >/dev/full) shows only here, when the buffer is
 * flushed, or as the stream's error flag.  A report that did not arrive must not read
 * as success: status 0 becomes 2, the status `run` gives when it cannot
 * write its --out file.  Any other status already says the command failed
 * and is kept: 1 is the verdict on the data (a mismatch stays a mismatch
 * when its report is lost, so a script that tells 1 from 2 still learns
 * the kernel is wrong), 2 and 3 are already failures, and the sentence on
 * stderr says the output was lost.
 */
static int finish_stdout(int rc)
{
    errno = 0;
    bool failed = fflush(stdout) != 0;
    failed = ferror(stdout) || failed;
    if (!failed)
        return rc;
    /* errno is meaningful only when fflush() itself failed; an earlier
     * failure left only the error flag. */
    fprintf(stderr, "moeperm: writing to standard output failed%s%s\n", errno ? ": " : "",
            errno ? strerror(errno) : "");
    return rc == EXIT_OK ? EXIT_BAD_INPUT : rc;
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*run)(int, char **);
    } commands[] = {
        {"golden", cmd_golden},   {"run", cmd_run},     {"compare", cmd_compare},
        {"check", cmd_check},     {"make-case", cmd_make_case},
        {"bench", cmd_bench},     {"version", cmd_version},
    };
    if (argc < 2) {
        fputs(usage_text, stderr);
        return EXIT_BAD_INPUT;
    }
    if (strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 ||
        strcmp(argv[1], "-h") == 0) {
        fputs(usage_text, stdout);
        return finish_stdout(EXIT_OK);
    }
    if (strcmp(argv[1], "--version") == 0)
        return finish_stdout(cmd_version(1, argv + 1));
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0) {
            /* getopt names argv[0] in its messages: "moeperm golden:
             * unrecognized option", like every other message of the tool */
            char name[32];
            snprintf(name, sizeof name, "moeperm %s", commands[i].name);
            argv[1] = name;
            return finish_stdout(commands[i].run(argc - 1, argv + 1));
        }
    fprintf(stderr, "moeperm: \"%s\" is not a command\n\n%s", argv[1], usage_text);
    return EXIT_BAD_INPUT;
}
