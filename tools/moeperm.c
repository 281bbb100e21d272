/*
 * moeperm.c - the moeperm command-line tool: dispatch to one subcommand per
 * file (commands.h), usage, and `version`.  The contract is interfaces.md
 * section 3: exit 0 ok, 1 mismatch, 2 bad usage or bad input, 3 backend
 * failure.
 */
#include <stdio.h>
#include <string.h>

#include <moeperm/moeperm.h>

#include "commands.h"

static const char usage_text[] =
    "usage: moeperm COMMAND [OPTIONS]\n"
    "\n"
    "  golden --out DIR [--suite NAME ...] [--seed N] [--force] [--list]\n"
    "      write the named built-in suites (default: every default suite)\n"
    "  golden --out DIR --tokens T --topk K --hidden H --dtype D [--rows R]\n"
    "         [--experts E] [--hot P] [--values KIND] [--routing R] [--seed N]\n"
    "         [--name NAME] [--force]\n"
    "      write one custom case\n"
    "  run CASE_DIR --out FILE [--backend cpu|npu] [--device N]\n"
    "      compute input_grad from the case's inputs into a raw .bin\n"
    "  compare CASE_DIR FILE [--strict-nan]\n"
    "      compare FILE with the case's golden input_grad, bit for bit\n"
    "  check DIR ... [--backend cpu|npu] [--device N] [--strict-nan] [--junit FILE]\n"
    "      run and compare every case below each DIR\n"
    "  bench [--tokens T --topk K --hidden H --dtype D --threads N]\n"
    "        [--reps N] [--json] [--path auto|portable|avx2|avx512]\n"
    "      time the operator in-process against memory bandwidth\n"
    "  version\n"
    "      print the tool's and the library's versions\n"
    "\n"
    "exit status: 0 ok, 1 mismatch, 2 bad usage or bad input, 3 backend failure\n";

static int cmd_version(int argc, char **argv)
{
    (void)argv;
    if (argc > 1) {
        fprintf(stderr, "moeperm version: takes no arguments\n");
        return EXIT_BAD_INPUT;
    }
    printf("moeperm %s (libmoeperm %s)\n", MOEPERM_VERSION_STRING, moeperm_version());
    return EXIT_OK;
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*run)(int, char **);
    } commands[] = {
        {"golden", cmd_golden},   {"run", cmd_run},     {"compare", cmd_compare},
        {"check", cmd_check},     {"bench", cmd_bench}, {"version", cmd_version},
    };
    if (argc < 2) {
        fputs(usage_text, stderr);
        return EXIT_BAD_INPUT;
    }
    if (strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 ||
        strcmp(argv[1], "-h") == 0) {
        fputs(usage_text, stdout);
        return EXIT_OK;
    }
    if (strcmp(argv[1], "--version") == 0)
        return cmd_version(1, argv + 1);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "moeperm: \"%s\" is not a command\n\n%s", argv[1], usage_text);
    return EXIT_BAD_INPUT;
}
