/*
 * cmd_compare.c - `moeperm compare CASE_DIR FILE`: judges an input_grad
 * produced anywhere (a device run, another framework) against the case's
 * golden one, bit for bit, and prints where the differences lie.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "commands.h"
#include "golden/case.h"
#include "golden/compare.h"
#include "golden/fileio.h"

static void usage(FILE *to)
{
    fprintf(to, "usage: moeperm compare CASE_DIR FILE [--strict-nan]\n");
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
    const char *case_dir = argv[optind], *file = argv[optind + 1];
    char err[1024] = "";
    golden_case c;
    if (golden_case_read(case_dir, true, &c, err, sizeof err) != 0) {
        fprintf(stderr, "moeperm compare: %s\n", err);
        return EXIT_BAD_INPUT;
    }
    size_t bytes = golden_output_bytes(&c);
    struct stat st;
    if (stat(file, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size != bytes) {
        fprintf(stderr,
                "moeperm compare: %s is %llu bytes, expected %zu (tokens_num %lld * "
                "hidden_size %lld * %zu-byte %s)\n",
                file, (unsigned long long)st.st_size, bytes, (long long)c.tokens_num,
                (long long)c.hidden_size, golden_dtype_size(c.dtype),
                golden_dtype_name(c.dtype));
        golden_case_free(&c);
        return EXIT_BAD_INPUT;
    }
    void *actual = NULL;
    char hex[GOLDEN_SHA256_HEX];
    if (golden_read_file(file, "the output", bytes, &actual, hex, err, sizeof err) != 0) {
        fprintf(stderr, "moeperm compare: %s\n", err);
        golden_case_free(&c);
        return EXIT_BAD_INPUT;
    }
    golden_compare_result r;
    if (golden_compare(c.dtype, c.tokens_num, c.hidden_size, c.input_grad, actual, strict_nan,
                       &r) != 0) {
        fprintf(stderr, "moeperm compare: out of memory\n");
        free(actual);
        golden_case_free(&c);
        return EXIT_BACKEND;
    }
    int rc = EXIT_OK;
    if (r.differing == 0) {
        printf("%s: ok, all %llu elements equal\n", case_dir, (unsigned long long)r.elements);
    } else {
        printf("%s: MISMATCH\n", case_dir);
        golden_compare_report(stdout, c.dtype, &r, "  ");
        rc = EXIT_MISMATCH;
    }
    golden_compare_free(&r);
    free(actual);
    golden_case_free(&c);
    return rc;
}
