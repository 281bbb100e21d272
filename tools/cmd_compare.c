/*
 * cmd_compare.c - `moeperm compare CASE_DIR PATH`: judges outputs produced
 * anywhere (a device run, another framework, a harness) against the case's
 * golden ones, bit for bit, and prints where the differences lie.  PATH is
 * the output file when the case has one output, else a directory holding
 * <output>.bin or <output>.npy for each.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "judge.h"

static void usage(FILE *to)
{
    fprintf(to, "usage: moeperm compare CASE_DIR PATH [--strict-nan]\n"
                "  compare outputs with the case's golden ones, bit for bit: PATH is the\n"
                "  output file (raw or .npy) when the case has one output, else a\n"
                "  directory holding <output>.bin or <output>.npy for each\n"
                "  --strict-nan  NaNs must match bit for bit too (default: any NaN\n"
                "                equals any NaN)\n");
}

int cmd_compare(int argc, char **argv)
{
    static const struct option options[] = {
        {"strict-nan", no_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    bool strict_nan = false;
    int opt;
    while ((opt = getopt_long(argc, argv, "sh", options, NULL)) != -1) {
        switch (opt) {
        case 's':
            strict_nan = true;
            break;
        case 'h':
            usage(stdout);
            return EXIT_OK;
        default:
            usage(stderr);
            return EXIT_BAD_INPUT;
        }
    }
    if (optind + 2 != argc) {
        fprintf(stderr, "moeperm compare: expected two arguments, CASE_DIR and FILE, got %d\n",
                argc - optind);
        usage(stderr);
        return EXIT_BAD_INPUT;
    }
    const char *case_dir = argv[optind], *path = argv[optind + 1];
    char err[1024] = "";
    golden_case c;
    if (golden_case_read(case_dir, GOLDEN_LOAD_ALL, &c, err, sizeof err) != 0) {
        fprintf(stderr, "moeperm compare: %s\n", err);
        return EXIT_BAD_INPUT;
    }
    case_outputs actual;
    memset(&actual, 0, sizeof actual);
    int rc = EXIT_OK;
    bool dir = case_output_count(&c) > 1;
    for (size_t i = 0; i < c.tensor_count && rc == EXIT_OK; i++) {
        const golden_tensor *t = &c.tensors[i];
        if (t->role != GOLDEN_ROLE_OUTPUT)
            continue;
        actual.like[actual.count] = t;
        char *file = case_output_path(&c, &actual, actual.count, path, dir);
        if (!file) {
            fprintf(stderr, "moeperm compare: out of memory\n");
            rc = EXIT_BACKEND;
        } else if (golden_tensor_read_file(file, t, &actual.data[actual.count], err,
                                           sizeof err) != 0) {
            fprintf(stderr, "moeperm compare: %s\n", err);
            rc = EXIT_BAD_INPUT;
        }
        actual.count++;
        free(file);
    }
    verdict v;
    judge_options judging = {strict_nan};
    if (rc == EXIT_OK && judge(&c, &actual, &judging, &v) != 0) {
        fprintf(stderr, "moeperm compare: out of memory\n");
        rc = EXIT_BACKEND;
    } else if (rc == EXIT_OK) {
        uint64_t elements = 0;
        for (size_t i = 0; i < v.count; i++)
            elements += v.result[i].elements;
        if (v.differing == 0) {
            printf("%s: ok, all %llu elements equal\n", case_dir, (unsigned long long)elements);
        } else {
            printf("%s: MISMATCH\n", case_dir);
            verdict_report(stdout, &v, "  ");
            rc = EXIT_MISMATCH;
        }
        verdict_free(&v);
    }
    case_outputs_free(&actual);
    golden_case_free(&c);
    return rc;
}
