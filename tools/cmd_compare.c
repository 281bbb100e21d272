/*
 * cmd_compare.c - `moeperm compare CASE_DIR PATH`: judges outputs produced
 * anywhere (a device run, another framework, a harness) against the case's
 * golden ones, bit for bit, and prints where the differences lie.  PATH is
 * the output file when the case has one output and PATH is not a
 * directory (nor ends in '/'), else a directory holding <output>.bin or
 * <output>.npy for each.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "outputs.h"

static void usage(FILE *to)
{
    fprintf(to, "usage: moeperm compare CASE_DIR PATH [--max-ulp N] [--json FILE] [--html FILE]\n"
                "                       [--strict-nan]\n"
                "  compare outputs with the case's golden ones, bit for bit: PATH is the\n"
                "  output file (raw or .npy) when the case has one output and PATH is\n"
                "  not a directory, else a directory holding <output>.bin or\n"
                "  <output>.npy for each (not both; not the case's own files); a mismatch\n"
                "  report leads with the diagnosis (docs/judging.md)\n"
                "  --max-ulp N    accept elements within N ulp (default 0: bit-exact);\n"
                "                 the verdict then says \"within N ulp, not bit-exact\"\n"
                "  --json FILE    also write the machine-readable report (- : stdout, the\n"
                "                 text report then going to stderr)\n"
                "  --html FILE    also write a page for people: per output that differs, a\n"
                "                 map of where, the first differences, the diagnosis and the\n"
                "                 statistics (one self-contained file)\n"
                "  --strict-nan   NaNs must match bit for bit too (default: any NaN\n"
                "                 equals any NaN)\n"
                "exit status: 0 same (or within --max-ulp), 1 different or an output file\n"
                "missing, 2 bad input\n");
}

int cmd_compare(int argc, char **argv)
{
    static const struct option options[] = {
        {"strict-nan", no_argument, NULL, 's'},
        {"max-ulp", required_argument, NULL, 'u'},
        {"json", required_argument, NULL, 'j'},
        {"html", required_argument, NULL, 'H'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    moeperm_golden_judge_options judging = {false, 0, true};
    const char *json_path = NULL, *html_path = NULL;
    int opt;
    while ((opt = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        switch (opt) {
        case 's':
            judging.strict_nan = true;
            break;
        case 'u':
            if (!cli_uint64("compare", "--max-ulp", optarg, &judging.max_ulp))
                return EXIT_BAD_INPUT;
            break;
        case 'j':
            json_path = optarg;
            break;
        case 'H':
            if (!cli_html_path("compare", optarg))
                return EXIT_BAD_INPUT;
            html_path = optarg;
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
    /* A report must not replace a file of the case it judges, nor the
     * outputs it judges, nor the other report. */
    const char *case_dir = argv[optind], *path = argv[optind + 1];
    const char *report_flags[] = {"--json", "--html"};
    const char *report_paths[] = {json_path, html_path};
    /* PATH names a directory (it is one, or ends in '/'): the directory
     * form, <output>.bin or .npy inside, whatever the number of outputs
     * (what run --out DIR/ writes). */
    size_t path_len = strlen(path);
    struct stat st;
    bool path_is_dir = (path_len > 0 && path[path_len - 1] == '/') ||
                       (stat(path, &st) == 0 && S_ISDIR(st.st_mode));
    char **reads = NULL;
    size_t read_count = 0;
    if (case_output_files(case_dir, path, path_is_dir, &reads, &read_count) != 0) {
        fprintf(stderr, "moeperm compare: out of memory\n");
        moeperm_golden_free_paths(reads, read_count);
        return EXIT_BACKEND;
    }
    bool refused =
        !cli_distinct_outputs("compare", report_flags, report_paths, 2) ||
        (json_path && strcmp(json_path, "-") != 0 &&
         !cli_output_path("compare", "--json", json_path, &argv[optind], 1, reads, read_count)) ||
        (html_path &&
         !cli_output_path("compare", "--html", html_path, &argv[optind], 1, reads, read_count));
    moeperm_golden_free_paths(reads, read_count);
    if (refused)
        return EXIT_BAD_INPUT;
    char err[1024] = "";
    moeperm_golden_case c;
    case_outputs actual;
    memset(&actual, 0, sizeof actual);
    int rc = EXIT_OK;
    moeperm_golden_failure failure = MOEPERM_GOLDEN_FAILURE_BACKEND;
    /* A case that cannot be read is bad input, and the reports still say
     * so (as check's do). */
    bool have_case =
        moeperm_golden_case_read(case_dir, MOEPERM_GOLDEN_LOAD_ALL, &c, err, sizeof err) == 0;
    if (!have_case) {
        fprintf(stderr, "moeperm compare: %s\n", err);
        failure = MOEPERM_GOLDEN_FAILURE_BAD_INPUT;
        rc = EXIT_BAD_INPUT;
    }
    bool dir = have_case && (path_is_dir || case_output_count(&c) > 1);
    for (size_t i = 0; have_case && i < c.tensor_count && rc == EXIT_OK; i++) {
        const moeperm_golden_tensor *t = &c.tensors[i];
        if (t->role != MOEPERM_GOLDEN_ROLE_OUTPUT)
            continue;
        actual.like[actual.count] = t;
        char *file = NULL;
        int got = case_output_path(&actual, actual.count, path, dir, &file, err, sizeof err);
        /* Absent is missing, as in moeperm check (a mismatch: the harness
         * wrote no output); what cannot be looked for, a link to nothing,
         * and the golden file itself are bad input. */
        int absent = got == 0 ? case_output_absent(file, err, sizeof err) : -1;
        if (got == -2) {
            fprintf(stderr, "moeperm compare: %s\n", err);
            rc = EXIT_BACKEND;
        } else if (absent < 0 || (absent == 0 && case_output_is_golden(&c, file, err, sizeof err))) {
            fprintf(stderr, "moeperm compare: %s\n", err);
            failure = MOEPERM_GOLDEN_FAILURE_BAD_INPUT;
            rc = EXIT_BAD_INPUT;
        } else if (absent > 0) {
            snprintf(err, sizeof err, "no output file %s: the harness wrote no %s", file,
                     t->name);
            fprintf(stderr, "moeperm compare: %s\n", err);
            failure = MOEPERM_GOLDEN_FAILURE_MISSING;
            rc = EXIT_MISMATCH;
        } else if (moeperm_golden_tensor_read_file(file, t, &actual.data[actual.count], err,
                                           sizeof err) != 0) {
            fprintf(stderr, "moeperm compare: %s\n", err);
            failure = MOEPERM_GOLDEN_FAILURE_BAD_INPUT;
            rc = EXIT_BAD_INPUT;
        }
        actual.count++;
        free(file);
    }
    moeperm_golden_judgement *j = NULL;
    if (rc == EXIT_OK && moeperm_golden_judge(&c, actual.data, &judging, &j, err, sizeof err) != 0) {
        fprintf(stderr, "moeperm compare: %s\n", err);
        rc = EXIT_BACKEND;
    } else if (rc == EXIT_OK) {
        uint64_t elements = 0;
        for (size_t i = 0; i < moeperm_golden_judgement_output_count(j); i++)
            elements += moeperm_golden_judgement_output_compare(j, i)->elements;
        moeperm_golden_verdict verdict = moeperm_golden_judgement_verdict(j);
        /* With the JSON on standard output, the text goes to standard error. */
        FILE *text = json_path && strcmp(json_path, "-") == 0 ? stderr : stdout;
        if (verdict == MOEPERM_GOLDEN_VERDICT_SAME) {
            fprintf(text, "%s: ok, all %llu elements equal\n", case_dir,
                    (unsigned long long)elements);
        } else {
            fprintf(text, "%s: %s\n", case_dir,
                    verdict == MOEPERM_GOLDEN_VERDICT_WITHIN_TOLERANCE ? "WITHIN TOLERANCE" : "MISMATCH");
            moeperm_golden_judgement_report(text, j, "  ");
            rc = verdict == MOEPERM_GOLDEN_VERDICT_WITHIN_TOLERANCE ? EXIT_OK : EXIT_MISMATCH;
        }
    }
    if (json_path) {
        /* The document is written whatever the verdict: an error case says
         * why in it. */
        moeperm_golden_json_report *report = moeperm_golden_json_report_new();
        bool ok = report && moeperm_golden_json_report_add_case(
                                report, case_dir, have_case ? moeperm_op_name(c.op) : NULL) == 0;
        if (ok && j)
            ok = moeperm_golden_json_report_add_judgement(report, j) == 0;
        else if (ok)
            ok = moeperm_golden_json_report_set_failure(report, failure, err) == 0;
        if (!ok || moeperm_golden_json_report_write_path(report, json_path, err, sizeof err) != 0) {
            fprintf(stderr, "moeperm compare: cannot write the JSON report: %s\n",
                    ok ? err : "out of memory");
            rc = rc == EXIT_OK ? EXIT_BAD_INPUT : rc;
        }
        moeperm_golden_json_report_free(report);
    }
    if (html_path) {
        moeperm_golden_html_report *page = moeperm_golden_html_report_new("moeperm compare");
        bool ok = page && moeperm_golden_html_report_add_case(
                              page, case_dir, have_case ? moeperm_op_name(c.op) : NULL) == 0;
        if (ok && j)
            ok = moeperm_golden_html_report_add_judgement(page, &c, actual.data, &judging, j) == 0;
        else if (ok)
            ok = moeperm_golden_html_report_set_failure(page, failure, err) == 0;
        if (!ok || moeperm_golden_html_report_write_path(page, html_path, err, sizeof err) != 0) {
            fprintf(stderr, "moeperm compare: cannot write the HTML report: %s\n",
                    ok ? err : "out of memory");
            rc = rc == EXIT_OK ? EXIT_BAD_INPUT : rc;
        }
        moeperm_golden_html_report_free(page);
    }
    moeperm_golden_judgement_free(j);
    case_outputs_free(&actual);
    if (have_case)
        moeperm_golden_case_free(&c);
    return rc;
}
