/*
 * commands.h - the subcommands of the moeperm tool, one file each, so that
 * moeperm.c is only dispatch and usage and a new subcommand (bench) can be
 * added without touching the others.  Each returns the process exit code
 * of the README.
 */
#ifndef MOEPERM_TOOLS_COMMANDS_H
#define MOEPERM_TOOLS_COMMANDS_H

/* Exit codes (README, "The command line"). */
enum {
    EXIT_OK = 0,
    EXIT_MISMATCH = 1,
    EXIT_BAD_INPUT = 2, /* bad usage or bad input */
    EXIT_BACKEND = 3    /* the backend failed */
};

/* argv[0] is the subcommand's name; options follow. */
int cmd_run(int argc, char **argv);
int cmd_golden(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_make_case(int argc, char **argv);

/* Owned by the benchmark (tools/cmd_bench.c): times the operator
 * in-process against memory bandwidth. */
int cmd_bench(int argc, char **argv);

#endif
