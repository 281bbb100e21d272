/*
 * cmd_check.c - `moeperm check DIR...`: runs every case below the given
 * directories on one backend and compares, printing one line per case, the
 * mismatch reports, and a summary table per suite; optionally a JUnit XML
 * report for CI.  The exit code is the worst outcome: 3 if the backend
 * failed anywhere, else 2 if a case was bad or refused, else 1 on any
 * mismatch, else 0.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cli.h"
#include "commands.h"
#include "judge.h"

static void usage(FILE *to)
{
    fprintf(to, "usage: moeperm check DIR ... [--backend cpu|npu] [--device N] "
                    "[--strict-nan] [--junit FILE]\n");
}

enum outcome { PASS, MISMATCH, BAD_INPUT, BACKEND_FAILED, OUTCOMES };
static const char *const outcome_names[] = {"pass", "MISMATCH", "BAD-INPUT", "BACKEND-FAILURE"};

typedef struct suite_row {
    char *suite; /* the directory holding the case */
    unsigned counts[OUTCOMES];
} suite_row;

typedef struct summary {
    suite_row *rows;
    size_t count, capacity;
} summary;

static int tally(summary *s, const char *case_dir, enum outcome o)
{
    const char *slash = strrchr(case_dir, '/');
    int len = slash ? (int)(slash - case_dir) : 1;
    const char *suite = slash ? case_dir : ".";
    if (s->count == 0 || strlen(s->rows[s->count - 1].suite) != (size_t)len ||
        strncmp(s->rows[s->count - 1].suite, suite, (size_t)len) != 0) {
        if (s->count == s->capacity) {
            size_t cap = s->capacity ? 2 * s->capacity : 16;
            suite_row *grown = realloc(s->rows, cap * sizeof *grown);
            if (!grown)
                return -1;
            s->rows = grown;
            s->capacity = cap;
        }
        suite_row *row = &s->rows[s->count];
        memset(row, 0, sizeof *row);
        row->suite = strndup(suite, (size_t)len);
        if (!row->suite)
            return -1;
        s->count++;
    }
    s->rows[s->count - 1].counts[o]++;
    return 0;
}

static void print_summary(const summary *s)
{
    size_t width = 5;
    unsigned total[OUTCOMES] = {0};
    for (size_t i = 0; i < s->count; i++)
        if (strlen(s->rows[i].suite) > width)
            width = strlen(s->rows[i].suite);
    printf("\n%-*s %6s %6s %9s %10s %16s\n", (int)width, "suite", "cases", "pass", "mismatch",
           "bad-input", "backend-failure");
    for (size_t i = 0; i < s->count; i++) {
        const unsigned *c = s->rows[i].counts;
        printf("%-*s %6u %6u %9u %10u %16u\n", (int)width, s->rows[i].suite,
               c[0] + c[1] + c[2] + c[3], c[PASS], c[MISMATCH], c[BAD_INPUT], c[BACKEND_FAILED]);
        for (int o = 0; o < OUTCOMES; o++)
            total[o] += c[o];
    }
    printf("%-*s %6u %6u %9u %10u %16u\n", (int)width, "total",
           total[0] + total[1] + total[2] + total[3], total[PASS], total[MISMATCH],
           total[BAD_INPUT], total[BACKEND_FAILED]);
}

/* Runs one case; err receives the reason for anything but PASS, report
 * (malloc'd) the full mismatch report. */
static enum outcome check_one(const backend_ops *ops, backend *b, const char *dir,
                              const judge_options *options, char *err, size_t err_len,
                              char **report)
{
    golden_case c;
    *report = NULL;
    if (golden_case_read(dir, GOLDEN_LOAD_ALL, &c, err, err_len) != 0)
        return BAD_INPUT;
    case_outputs outputs;
    if (case_outputs_alloc(&c, &outputs, err, err_len) != 0) {
        golden_case_free(&c);
        return BACKEND_FAILED;
    }
    backend_problem problem;
    case_problem(&c, &outputs, &problem);
    enum outcome o;
    int rc = ops->run(b, &problem, err, err_len);
    verdict v;
    if (rc != BACKEND_OK) {
        o = rc == BACKEND_BAD_INPUT ? BAD_INPUT : BACKEND_FAILED;
    } else if (judge(&c, &outputs, options, &v) != 0) {
        snprintf(err, err_len, "out of memory comparing");
        o = BACKEND_FAILED;
    } else {
        o = v.differing == 0 ? PASS : MISMATCH;
        if (o == MISMATCH) {
            char *line = verdict_summary(&v);
            snprintf(err, err_len, "%s", line ? line : "elements differ");
            free(line);
            size_t size = 0;
            FILE *f = open_memstream(report, &size);
            if (f) {
                verdict_report(f, &v, "    ");
                fclose(f);
            }
        }
        verdict_free(&v);
    }
    case_outputs_free(&outputs);
    golden_case_free(&c);
    return o;
}

int cmd_check(int argc, char **argv)
{
    static const struct option options[] = {
        {"backend", required_argument, NULL, 'b'},
        {"device", required_argument, NULL, 'd'},
        {"strict-nan", no_argument, NULL, 's'},
        {"junit", required_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *backend_name = "cpu", *device_flag = NULL, *junit_path = NULL;
    bool strict_nan = false;
    int opt;
    while ((opt = getopt_long(argc, argv, "b:d:sj:h", options, NULL)) != -1) {
        switch (opt) {
        case 'b':
            backend_name = optarg;
            break;
        case 'd':
            device_flag = optarg;
            break;
        case 's':
            strict_nan = true;
            break;
        case 'j':
            junit_path = optarg;
            break;
        case 'h':
            usage(stdout);
            return EXIT_OK;
        default:
            usage(stderr);
            return EXIT_BAD_INPUT;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "moeperm check: missing DIR\n");
        usage(stderr);
        return EXIT_BAD_INPUT;
    }
    /* The report's path is checked now, not when it is written after the
     * last case: a typo must not cost the whole run. */
    if (junit_path && !cli_output_path("check", "--junit", junit_path))
        return EXIT_BAD_INPUT;
    backend_options bopts;
    const backend_ops *ops = cli_backend("check", backend_name, device_flag, &bopts);
    if (!ops)
        return EXIT_BAD_INPUT;

    /* Every directory is listed before anything runs, so a typo in the last
     * DIR fails fast instead of after an hour of device time. */
    char err[2048] = "";
    char **all = NULL;
    size_t total = 0;
    for (int i = optind; i < argc; i++) {
        char **dirs;
        size_t count;
        if (golden_find_cases(argv[i], &dirs, &count, err, sizeof err) != 0) {
            fprintf(stderr, "moeperm check: %s\n", err);
            golden_free_paths(all, total);
            return EXIT_BAD_INPUT;
        }
        if (count == 0) {
            fprintf(stderr, "moeperm check: no case.json below %s\n", argv[i]);
            golden_free_paths(dirs, count);
            golden_free_paths(all, total);
            return EXIT_BAD_INPUT;
        }
        char **grown = realloc(all, (total + count) * sizeof *grown);
        if (!grown) {
            fprintf(stderr, "moeperm check: out of memory\n");
            golden_free_paths(dirs, count);
            golden_free_paths(all, total);
            return EXIT_BACKEND;
        }
        all = grown;
        memcpy(all + total, dirs, count * sizeof *dirs);
        total += count;
        free(dirs);
    }

    /* The report replaces whatever is at its path; that must not be a
     * file of one of the cases it judges. */
    for (size_t i = 0; junit_path && i < total; i++) {
        golden_case c;
        bool ok;
        if (golden_case_read(all[i], GOLDEN_LOAD_NONE, &c, err, sizeof err) == 0) {
            ok = cli_not_case_file("check", "--junit", junit_path, &c);
            golden_case_free(&c);
        } else {
            /* Which files are this case's is unknown when the reader
             * refuses its manifest (the case is reported as bad input
             * later), and its tensors may still be golden data: keep the
             * report out of its directory altogether. */
            ok = cli_not_in_dir("check", "--junit", junit_path, all[i]);
        }
        if (!ok) {
            golden_free_paths(all, total);
            return EXIT_BAD_INPUT;
        }
    }

    backend *b = NULL;
    if (ops->open(&bopts, &b, err, sizeof err) != BACKEND_OK) {
        fprintf(stderr, "moeperm check: cannot open the %s backend: %s\n", ops->name, err);
        golden_free_paths(all, total);
        return EXIT_BACKEND;
    }
    golden_junit *junit = junit_path ? golden_junit_new("moeperm check") : NULL;
    judge_options judge_opts = {strict_nan};
    summary sum = {0};
    unsigned seen[OUTCOMES] = {0};
    int rc = EXIT_OK;
    for (size_t i = 0; i < total; i++) {
        char *report = NULL;
        err[0] = '\0';
        double start = cli_now();
        enum outcome o = check_one(ops, b, all[i], &judge_opts, err, sizeof err, &report);
        double seconds = cli_now() - start;
        seen[o]++;
        if (o == PASS)
            printf("%-8s %s\n", outcome_names[o], all[i]);
        else
            printf("%-8s %s: %s\n", outcome_names[o], all[i], err);
        if (report)
            fputs(report, stdout);
        fflush(stdout);
        if (tally(&sum, all[i], o) != 0)
            rc = EXIT_BACKEND;
        if (junit) {
            golden_outcome jo = o == PASS       ? GOLDEN_PASS
                                : o == MISMATCH ? GOLDEN_MISMATCH
                                                : GOLDEN_ERROR;
            if (golden_junit_add(junit, all[i], seconds, jo, o == PASS ? NULL : err, report) != 0)
                rc = EXIT_BACKEND;
        }
        free(report);
    }
    ops->close(b);
    print_summary(&sum);
    if (junit_path) {
        if (!junit || golden_junit_write(junit, junit_path, err, sizeof err) != 0) {
            fprintf(stderr, "moeperm check: cannot write the JUnit report: %s\n",
                    junit ? err : "out of memory");
            rc = EXIT_BAD_INPUT;
        }
    }
    golden_junit_free(junit);
    for (size_t i = 0; i < sum.count; i++)
        free(sum.rows[i].suite);
    free(sum.rows);
    golden_free_paths(all, total);

    if (seen[BACKEND_FAILED] || rc == EXIT_BACKEND)
        return EXIT_BACKEND;
    if (seen[BAD_INPUT] || rc == EXIT_BAD_INPUT)
        return EXIT_BAD_INPUT;
    return seen[MISMATCH] ? EXIT_MISMATCH : EXIT_OK;
}
