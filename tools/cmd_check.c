/*
 * cmd_check.c - `moeperm check DIR...`: runs every case below the given
 * directories on one backend and compares, printing one line per case, the
 * mismatch reports, and a summary table per suite; optionally a JUnit XML
 * report for CI, the JSON report and the HTML page.  The exit code is the
 * worst outcome: 3 if the backend failed anywhere, else 2 if a case was bad or refused, else 1 on any
 * mismatch, else 0.
 *
 * A backend that knows its chip (npu: the runtime's aclrtGetSocName())
 * judges only the cases of that chip: a MoeTokenUnpermuteGrad case with
 * probs made for another chip, whose probs_grad follows that chip's
 * reduction order, is reported OTHER-CHIP ("for another chip") and not
 * run; it counts as neither a pass nor a failure, and the reports say so
 * (JSON verdict "other-chip" with both chips, JUnit <skipped>).  Every
 * other case is the same on every chip and is judged.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend.h"
#include "cli.h"
#include "commands.h"
#include "outputs.h"

static void usage(FILE *to)
{
    fprintf(to,
            "usage: moeperm check DIR ... [--backend cpu|npu] [--device N] [--outputs OUTDIR]\n"
            "                     [--op OP] [--shard I/N] [--strict-nan] [--max-ulp N]\n"
            "                     [--junit FILE] [--json FILE|-] [--html FILE]\n"
            "  judge every case below each DIR: run it on a backend, or read the outputs\n"
            "  a harness wrote, and compare with the golden outputs bit for bit; one\n"
            "  line per case, the mismatch reports, a summary per suite\n"
            "  --backend B       cpu (default) or npu\n"
            "  --device N        the npu device (default: MOEPERM_NPU_DEVICE, else 0)\n"
            "  --outputs OUTDIR  judge files instead of running a backend: the outputs of\n"
            "                    DIR/CASE are OUTDIR/CASE/<output>.bin or .npy; a missing\n"
            "                    file fails the case (MISSING)\n"
            "  --op OP           judge only the cases of operator OP (MoeTokenPermuteGrad,\n"
            "                    MoeTokenPermute, MoeTokenUnpermute, MoeTokenUnpermuteGrad,\n"
            "                    or permute-grad, permute, unpermute, unpermute-grad); may\n"
            "                    be repeated; the summary counts the cases left out\n"
            "  --shard I/N       judge only shard I of N (1 <= I <= N <= 65536): the\n"
            "                    cases whose path below DIR hashes (FNV-1a 64) to I-1\n"
            "                    modulo N\n"
            "  --max-ulp N       accept elements within N ulp (default 0: bit-exact);\n"
            "                    such a case is WITHIN: \"within N ulp, not bit-exact\"\n"
            "  --strict-nan      NaNs must match bit for bit (default: any NaN equals any)\n"
            "  --junit FILE      also write a JUnit XML report\n"
            "  --json FILE       also write the machine-readable report (- : stdout, which\n"
            "                    then carries the JSON alone)\n"
            "  --html FILE       also write a page for people: the verdicts, and per output\n"
            "                    that differs a map of where, the first differences, the\n"
            "                    diagnosis and the statistics (one self-contained file)\n"
            "a backend that names its chip (npu: aclrtGetSocName) judges only the cases of\n"
            "that chip: a MoeTokenUnpermuteGrad case with probs made for another chip is\n"
            "OTHER-CHIP, \"for another chip\", and not run (JSON verdict \"other-chip\",\n"
            "JUnit <skipped>)\n"
            "exit status: 0 all same (or within --max-ulp), 1 a mismatch or missing\n"
            "output, 2 a bad case or usage, 3 the backend failed\n");
}

enum outcome { PASS, WITHIN, MISMATCH, MISSING, BAD_INPUT, BACKEND_FAILED, OTHER_CHIP, OUTCOMES };
static const char *const outcome_names[] = {"pass",      "WITHIN",          "MISMATCH",  "MISSING",
                                            "BAD-INPUT", "BACKEND-FAILURE", "OTHER-CHIP"};

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

static void print_summary(const summary *s, uint64_t left_out, FILE *to)
{
    size_t width = 5;
    unsigned total[OUTCOMES] = {0};
    for (size_t i = 0; i < s->count; i++)
        if (strlen(s->rows[i].suite) > width)
            width = strlen(s->rows[i].suite);
    fprintf(to, "\n%-*s %6s %6s %7s %9s %8s %10s %16s %11s\n", (int)width, "suite", "cases",
            "pass", "within", "mismatch", "missing", "bad-input", "backend-failure",
            "other-chip");
    for (size_t i = 0; i <= s->count; i++) {
        const unsigned *c = i < s->count ? s->rows[i].counts : total;
        unsigned cases = 0;
        for (int o = 0; o < OUTCOMES; o++)
            cases += c[o];
        fprintf(to, "%-*s %6u %6u %7u %9u %8u %10u %16u %11u\n", (int)width,
                i < s->count ? s->rows[i].suite : "total", cases, c[PASS], c[WITHIN],
                c[MISMATCH], c[MISSING], c[BAD_INPUT], c[BACKEND_FAILED], c[OTHER_CHIP]);
        for (int o = 0; i < s->count && o < OUTCOMES; o++)
            total[o] += c[o];
    }
    if (left_out)
        fprintf(to, "left out: %llu case%s of other operators (--op)\n",
                (unsigned long long)left_out, left_out == 1 ? "" : "s");
}

/* Where a case's outputs come from: a backend, or files a harness wrote
 * below outputs_root, mirroring the case tree. */
typedef struct source {
    const backend_ops *ops;
    backend *b;
    const char *outputs_root; /* NULL: run the backend */
    bool chip_known;          /* the backend computes for chip alone */
    moeperm_chip chip;
    const char *chip_name;
} source;

/* Whether case c's golden outputs follow another chip than the backend's
 * (only MoeTokenUnpermuteGrad's probs_grad depends on the chip); then err
 * says which. */
static bool for_another_chip(const source *from, const moeperm_golden_case *c, char *err,
                             size_t err_len)
{
    if (!from->chip_known || c->op != MOEPERM_OP_UNPERMUTE_GRAD ||
        moeperm_golden_case_tensor_const(c, "probs") == NULL)
        return false;
    int64_t ub = c->attrs.ub_bytes ? c->attrs.ub_bytes : MOEPERM_CHIP_A2_UB_BYTES;
    int64_t cores = c->attrs.vector_cores ? c->attrs.vector_cores : MOEPERM_CHIP_A2_VECTOR_CORES;
    if (ub == from->chip.ub_bytes && cores == from->chip.vector_cores)
        return false;
    char named[MOEPERM_GOLDEN_CHIP_NAME_MAX + 2] = "";
    if (c->attrs.chip[0])
        snprintf(named, sizeof named, "%s, ", c->attrs.chip);
    snprintf(err, err_len,
             "for another chip: the case's probs_grad follows %sa chip with %lld unified-buffer "
             "bytes and %lld vector cores; the backend runs %s (%lld bytes, %lld cores); not "
             "judged",
             named, (long long)ub, (long long)cores, from->chip_name ? from->chip_name : "its chip",
             (long long)from->chip.ub_bytes, (long long)from->chip.vector_cores);
    return true;
}

/* Records case c, made for another chip, as such in the reports that
 * take it: the JSON report's verdict "other-chip" with both chips.  (The
 * JUnit report gets it as skipped from the caller.)  Returns OTHER_CHIP,
 * or BACKEND_FAILED when memory runs out. */
static enum outcome report_other_chip(const source *from, const moeperm_golden_case *c,
                                      const char *dir, moeperm_golden_json_report *json,
                                      const char *sentence)
{
    moeperm_chip mine = {c->attrs.ub_bytes ? c->attrs.ub_bytes : MOEPERM_CHIP_A2_UB_BYTES,
                         c->attrs.vector_cores ? c->attrs.vector_cores
                                               : MOEPERM_CHIP_A2_VECTOR_CORES};
    if (json && (moeperm_golden_json_report_add_case(json, dir, moeperm_op_name(c->op)) != 0 ||
                 moeperm_golden_json_report_set_other_chip(json, from->chip_name, &from->chip,
                                                           c->attrs.chip, &mine,
                                                           sentence) != 0))
        return BACKEND_FAILED;
    return OTHER_CHIP;
}

/* Reads case c's outputs from dir/<output>.bin or .npy.  A file that is
 * absent is MISSING; one of the wrong size, dtype or shape, or one that
 * cannot be looked for (EACCES, ELOOP, ENOTDIR), BAD_INPUT. */
static enum outcome read_outputs(const moeperm_golden_case *c, case_outputs *o, const char *dir,
                                 char *err, size_t err_len)
{
    for (size_t i = 0; i < o->count; i++) {
        char *path;
        int got = case_output_path(o, i, dir, true, &path, err, err_len);
        if (got != 0)
            return got == -1 ? BAD_INPUT : BACKEND_FAILED;
        free(o->data[i]);
        o->data[i] = NULL;
        int absent = case_output_absent(path, err, err_len);
        if (absent < 0 || (absent == 0 && case_output_is_golden(c, path, err, err_len))) {
            free(path);
            return BAD_INPUT;
        }
        bool missing = absent > 0;
        int rc = missing ? -1 : moeperm_golden_tensor_read_file(path, o->like[i], &o->data[i], err,
                                                        err_len);
        if (missing)
            snprintf(err, err_len, "no output file %s (nor %s.npy): the harness wrote no %s",
                     path, o->like[i]->name, o->like[i]->name);
        free(path);
        if (rc != 0)
            return missing ? MISSING : BAD_INPUT;
    }
    return PASS;
}

/* Judges one case; err receives the reason for anything but PASS, report
 * (malloc'd) the full mismatch report.  rel is the case's path below the
 * directory it was found in.  The case goes into json and html when there
 * are. */
static enum outcome check_one(const source *from, const char *dir, const char *rel,
                              const moeperm_golden_judge_options *options, moeperm_golden_json_report *json,
                              moeperm_golden_html_report *html, char *err, size_t err_len,
                              char **report)
{
    moeperm_golden_case c;
    *report = NULL;
    /* The diagnosis models the kernel from the inputs, so they are read
     * even when the outputs come from files. */
    if (moeperm_golden_case_read(dir, MOEPERM_GOLDEN_LOAD_ALL, &c, err, err_len) != 0) {
        if ((json && (moeperm_golden_json_report_add_case(json, dir, NULL) != 0 ||
                      moeperm_golden_json_report_set_failure(
                          json, MOEPERM_GOLDEN_FAILURE_BAD_INPUT, err) != 0)) ||
            (html && (moeperm_golden_html_report_add_case(html, dir, NULL) != 0 ||
                      moeperm_golden_html_report_set_failure(
                          html, MOEPERM_GOLDEN_FAILURE_BAD_INPUT, err) != 0)))
            return BACKEND_FAILED;
        return BAD_INPUT;
    }
    /* Not judged: in the text, the JSON and the JUnit reports as such. */
    if (!from->outputs_root && for_another_chip(from, &c, err, err_len)) {
        enum outcome o = report_other_chip(from, &c, dir, json, err);
        if (o != OTHER_CHIP)
            snprintf(err, err_len, "out of memory");
        moeperm_golden_case_free(&c);
        return o;
    }
    if ((json && moeperm_golden_json_report_add_case(json, dir, moeperm_op_name(c.op)) != 0) ||
        (html && moeperm_golden_html_report_add_case(html, dir, moeperm_op_name(c.op)) != 0)) {
        moeperm_golden_case_free(&c);
        snprintf(err, err_len, "out of memory");
        return BACKEND_FAILED;
    }
    case_outputs outputs;
    if (case_outputs_alloc(&c, &outputs, err, err_len) != 0) {
        moeperm_golden_case_free(&c);
        return BACKEND_FAILED;
    }
    enum outcome o = PASS;
    if (from->outputs_root) {
        char *at = cli_format("%s%s%s", from->outputs_root, rel[0] ? "/" : "", rel);
        o = at ? read_outputs(&c, &outputs, at, err, err_len) : BACKEND_FAILED;
        free(at);
    } else {
        backend_problem problem;
        case_problem(&c, &outputs, &problem);
        int rc = from->ops->run(from->b, &problem, err, err_len);
        if (rc != BACKEND_OK)
            o = rc == BACKEND_BAD_INPUT ? BAD_INPUT : BACKEND_FAILED;
    }
    moeperm_golden_judgement *j = NULL;
    if (o == PASS && moeperm_golden_judge(&c, outputs.data, options, &j, err, err_len) != 0)
        o = BACKEND_FAILED;
    if (j) {
        moeperm_golden_verdict v = moeperm_golden_judgement_verdict(j);
        o = v == MOEPERM_GOLDEN_VERDICT_SAME ? PASS : v == MOEPERM_GOLDEN_VERDICT_WITHIN_TOLERANCE ? WITHIN
                                                                                  : MISMATCH;
        if (o != PASS) {
            char *line = moeperm_golden_judgement_summary(j);
            snprintf(err, err_len, "%s", line ? line : "elements differ");
            free(line);
            size_t size = 0;
            FILE *f = open_memstream(report, &size);
            if (f) {
                moeperm_golden_judgement_report(f, j, "    ");
                fclose(f);
            }
        }
        if (json && moeperm_golden_json_report_add_judgement(json, j) != 0)
            o = BACKEND_FAILED;
        if (html &&
            moeperm_golden_html_report_add_judgement(html, &c, outputs.data, options, j) != 0)
            o = BACKEND_FAILED;
        moeperm_golden_judgement_free(j);
    } else {
        moeperm_golden_failure why = o == MISSING     ? MOEPERM_GOLDEN_FAILURE_MISSING
                                     : o == BAD_INPUT ? MOEPERM_GOLDEN_FAILURE_BAD_INPUT
                                                      : MOEPERM_GOLDEN_FAILURE_BACKEND;
        if ((json && moeperm_golden_json_report_set_failure(json, why, err) != 0) ||
            (html && moeperm_golden_html_report_set_failure(html, why, err) != 0))
            o = BACKEND_FAILED;
    }
    case_outputs_free(&outputs);
    moeperm_golden_case_free(&c);
    return o;
}

/* FNV-1a, 64 bits: the hash of --shard (docs/judging.md), chosen for being
 * a few lines anyone can reproduce in a CI script. */
static uint64_t fnv1a(const char *s)
{
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        h ^= *p;
        h *= UINT64_C(0x100000001b3);
    }
    return h;
}

/* The most shards --shard takes: far more runners than a CI matrix has,
 * and small enough that I and N are plain decimal numbers. */
#define MAX_SHARDS 65536

/* A decimal number of at most five digits and nothing else, at most
 * MAX_SHARDS: strtoull would skip spaces, take a sign and wrap "-2"
 * around to 2^64 - 2. */
static bool shard_number(const char *text, size_t len, uint64_t *out)
{
    uint64_t v = 0;
    if (len == 0 || len > 5)
        return false;
    for (size_t i = 0; i < len; i++) {
        if (text[i] < '0' || text[i] > '9')
            return false;
        v = v * 10 + (uint64_t)(text[i] - '0');
    }
    *out = v;
    return v <= MAX_SHARDS;
}

/* Parses "I/N": digits only, 1 <= I <= N <= MAX_SHARDS. */
static bool parse_shard(const char *text, uint64_t *index, uint64_t *count)
{
    const char *slash = strchr(text, '/');
    uint64_t i, n;
    if (!slash || !shard_number(text, (size_t)(slash - text), &i) ||
        !shard_number(slash + 1, strlen(slash + 1), &n) || i < 1 || i > n)
        return false;
    *index = i;
    *count = n;
    return true;
}

int cmd_check(int argc, char **argv)
{
    static const struct option options[] = {
        {"backend", required_argument, NULL, 'b'},
        {"device", required_argument, NULL, 'd'},
        {"strict-nan", no_argument, NULL, 's'},
        {"junit", required_argument, NULL, 'j'},
        {"outputs", required_argument, NULL, 'o'},
        {"json", required_argument, NULL, 'J'},
        {"html", required_argument, NULL, 'H'},
        {"max-ulp", required_argument, NULL, 'u'},
        {"shard", required_argument, NULL, 'S'},
        {"op", required_argument, NULL, 'O'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *backend_name = "cpu", *device_flag = NULL, *junit_path = NULL;
    const char *outputs_root = NULL, *json_path = NULL, *html_path = NULL;
    moeperm_golden_judge_options judging = {false, 0, true};
    uint64_t shard = 1, shards = 1;
    bool want_op[MOEPERM_OP_UNPERMUTE_GRAD + 1] = {false}, some_op = false;
    int opt;
    while ((opt = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        switch (opt) {
        case 'b':
            backend_name = optarg;
            break;
        case 'd':
            device_flag = optarg;
            break;
        case 's':
            judging.strict_nan = true;
            break;
        case 'j':
            junit_path = optarg;
            break;
        case 'o':
            outputs_root = optarg;
            break;
        case 'J':
            json_path = optarg;
            break;
        case 'H':
            if (!cli_html_path("check", optarg))
                return EXIT_BAD_INPUT;
            html_path = optarg;
            break;
        case 'u':
            if (!cli_uint64("check", "--max-ulp", optarg, &judging.max_ulp))
                return EXIT_BAD_INPUT;
            break;
        case 'S':
            if (!parse_shard(optarg, &shard, &shards)) {
                fprintf(stderr, "moeperm check: --shard is \"%s\", expected I/N, two "
                                "decimal numbers with 1 <= I <= N <= %d, e.g. 2/4\n",
                        optarg, MAX_SHARDS);
                return EXIT_BAD_INPUT;
            }
            break;
        case 'O': {
            moeperm_op op = moeperm_golden_op_parse(optarg);
            if (op == 0) {
                fprintf(stderr, "moeperm check: --op is \"%s\", expected MoeTokenPermuteGrad, "
                                "MoeTokenPermute, MoeTokenUnpermute, MoeTokenUnpermuteGrad or "
                                "permute-grad, permute, unpermute, unpermute-grad\n", optarg);
                return EXIT_BAD_INPUT;
            }
            want_op[op] = some_op = true;
            break;
        }
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
    bool json_stdout = json_path && strcmp(json_path, "-") == 0;
    const char *report_flags[] = {"--junit", "--json", "--html"};
    const char *report_paths[] = {junit_path, json_path, html_path};
    if (!cli_distinct_outputs("check", report_flags, report_paths, 3))
        return EXIT_BAD_INPUT;
    backend_options bopts;
    const backend_ops *ops = cli_backend("check", backend_name, device_flag, &bopts);
    if (!ops)
        return EXIT_BAD_INPUT;
    struct stat st;
    if (outputs_root && (stat(outputs_root, &st) != 0 || !S_ISDIR(st.st_mode))) {
        fprintf(stderr, "moeperm check: --outputs \"%s\" is not a directory\n", outputs_root);
        return EXIT_BAD_INPUT;
    }

    /* Every directory is listed before anything runs, so a typo in the last
     * DIR fails fast instead of after an hour of device time. */
    char err[2048] = "";
    char **all = NULL;
    size_t total = 0;
    /* rel[i]: where all[i] lies below the DIR it was found in (an offset
     * into all[i]), the path --outputs mirrors and --shard hashes */
    size_t *rel = NULL;
    uint64_t left_out = 0; /* cases of operators --op did not name */
    for (int i = optind; i < argc; i++) {
        char **dirs;
        size_t count;
        if (moeperm_golden_find_cases(argv[i], &dirs, &count, err, sizeof err) != 0) {
            fprintf(stderr, "moeperm check: %s\n", err);
            moeperm_golden_free_paths(all, total);
            free(rel);
            return EXIT_BAD_INPUT;
        }
        if (count == 0) {
            fprintf(stderr, "moeperm check: no case.json below %s\n", argv[i]);
            moeperm_golden_free_paths(dirs, count);
            moeperm_golden_free_paths(all, total);
            free(rel);
            return EXIT_BAD_INPUT;
        }
        /* The walk strips the trailing slashes of the DIR it was given. */
        size_t root = strlen(argv[i]);
        while (root > 1 && argv[i][root - 1] == '/')
            root--;
        /* The reports' paths are checked now, not when they are written
         * after the last case: a typo must not cost the whole run, and a
         * report must not replace a file of any case below DIR, nor an
         * output below --outputs, whichever shard it falls in. */
        char **reads = NULL;
        size_t read_count = 0;
        bool reads_ok = true;
        bool reports = junit_path || (json_path && !json_stdout) || html_path;
        for (size_t j = 0; outputs_root && reports && reads_ok && j < count; j++) {
            size_t at = strlen(dirs[j]) > root ? root + 1 : strlen(dirs[j]);
            char *where = cli_format("%s%s%s", outputs_root, dirs[j][at] ? "/" : "", dirs[j] + at);
            reads_ok = where && case_output_files(dirs[j], where, true, &reads, &read_count) == 0;
            free(where);
        }
        if (!reads_ok ||
            (junit_path &&
             !cli_output_path("check", "--junit", junit_path, dirs, count, reads, read_count)) ||
            (json_path && !json_stdout &&
             !cli_output_path("check", "--json", json_path, dirs, count, reads, read_count)) ||
            (html_path &&
             !cli_output_path("check", "--html", html_path, dirs, count, reads, read_count))) {
            if (!reads_ok)
                fprintf(stderr, "moeperm check: out of memory\n");
            moeperm_golden_free_paths(reads, read_count);
            moeperm_golden_free_paths(dirs, count);
            moeperm_golden_free_paths(all, total);
            free(rel);
            return reads_ok ? EXIT_BAD_INPUT : EXIT_BACKEND;
        }
        moeperm_golden_free_paths(reads, read_count);
        char **grown = realloc(all, (total + count) * sizeof *grown);
        size_t *grown_rel = grown ? realloc(rel, (total + count) * sizeof *grown_rel) : NULL;
        if (grown)
            all = grown;
        if (grown_rel)
            rel = grown_rel;
        if (!grown || !grown_rel) {
            fprintf(stderr, "moeperm check: out of memory\n");
            moeperm_golden_free_paths(dirs, count);
            moeperm_golden_free_paths(all, total);
            free(rel);
            return EXIT_BACKEND;
        }
        size_t kept = 0;
        for (size_t j = 0; j < count; j++) {
            size_t at = strlen(dirs[j]) > root ? root + 1 : strlen(dirs[j]);
            if (fnv1a(dirs[j] + at) % shards != shard - 1) {
                free(dirs[j]);
                continue;
            }
            /* --op: the manifest says the operator; a case that cannot be
             * read stays, to be reported as the bad case it is */
            moeperm_golden_case m;
            char why[256];
            if (some_op &&
                moeperm_golden_case_read(dirs[j], MOEPERM_GOLDEN_LOAD_NONE, &m, why, sizeof why) ==
                    0) {
                bool wanted = m.op > 0 && m.op <= MOEPERM_OP_UNPERMUTE_GRAD && want_op[m.op];
                moeperm_golden_case_free(&m);
                if (!wanted) {
                    left_out++;
                    free(dirs[j]);
                    continue;
                }
            }
            all[total + kept] = dirs[j];
            rel[total + kept] = at;
            kept++;
        }
        total += kept;
        free(dirs);
    }

    /* Outputs read from files need no backend. */
    backend *b = NULL;
    if (!outputs_root && ops->open(&bopts, &b, err, sizeof err) != BACKEND_OK) {
        fprintf(stderr, "moeperm check: cannot open the %s backend: %s\n", ops->name, err);
        moeperm_golden_free_paths(all, total);
        free(rel);
        return EXIT_BACKEND;
    }
    source from = {ops, b, outputs_root, false, {0, 0}, NULL};
    if (b && ops->chip) {
        from.chip_known = ops->chip(b, &from.chip, &from.chip_name);
        if (!from.chip_known && from.chip_name)
            fprintf(stderr, "moeperm check: the %s backend runs %s, a chip moeperm does not know: "
                            "every case is judged, and a MoeTokenUnpermuteGrad case of another "
                            "chip may differ in probs_grad by the order of its sums\n",
                    ops->name, from.chip_name);
    }
    moeperm_golden_junit *junit = junit_path ? moeperm_golden_junit_new("moeperm check") : NULL;
    moeperm_golden_json_report *json = json_path ? moeperm_golden_json_report_new() : NULL;
    moeperm_golden_html_report *html = html_path ? moeperm_golden_html_report_new("moeperm check") : NULL;
    /* With the JSON on standard output, the text goes to standard error. */
    FILE *text = json_stdout ? stderr : stdout;
    summary sum = {0};
    unsigned seen[OUTCOMES] = {0};
    int rc = EXIT_OK;
    for (size_t i = 0; i < total; i++) {
        char *report = NULL;
        err[0] = '\0';
        double start = cli_now();
        enum outcome o = check_one(&from, all[i], all[i] + rel[i], &judging, json, html, err,
                                   sizeof err, &report);
        double seconds = cli_now() - start;
        seen[o]++;
        if (o == PASS)
            fprintf(text, "%-8s %s\n", outcome_names[o], all[i]);
        else
            fprintf(text, "%-8s %s: %s\n", outcome_names[o], all[i], err);
        if (report)
            fputs(report, text);
        fflush(text);
        if (tally(&sum, all[i], o) != 0)
            rc = EXIT_BACKEND;
        if (junit) {
            moeperm_golden_outcome jo = o == PASS || o == WITHIN       ? MOEPERM_GOLDEN_PASS
                                : o == MISMATCH || o == MISSING ? MOEPERM_GOLDEN_MISMATCH
                                : o == OTHER_CHIP               ? MOEPERM_GOLDEN_SKIPPED
                                                                : MOEPERM_GOLDEN_ERROR;
            if (moeperm_golden_junit_add(junit, all[i], seconds, jo, o == PASS ? NULL : err, report) != 0)
                rc = EXIT_BACKEND;
        }
        free(report);
    }
    if (b)
        ops->close(b);
    print_summary(&sum, left_out, text);
    if (json)
        moeperm_golden_json_report_note_left_out(json, left_out);
    if (json && moeperm_golden_json_report_write_path(json, json_path, err, sizeof err) != 0) {
        fprintf(stderr, "moeperm check: cannot write the JSON report: %s\n", err);
        rc = EXIT_BAD_INPUT;
    } else if (json_path && !json) {
        fprintf(stderr, "moeperm check: out of memory for the JSON report\n");
        rc = EXIT_BAD_INPUT;
    }
    moeperm_golden_json_report_free(json);
    if (html_path &&
        (!html || moeperm_golden_html_report_write_path(html, html_path, err, sizeof err) != 0)) {
        fprintf(stderr, "moeperm check: cannot write the HTML report: %s\n",
                html ? err : "out of memory");
        rc = EXIT_BAD_INPUT;
    }
    moeperm_golden_html_report_free(html);
    if (junit_path) {
        if (!junit || moeperm_golden_junit_write(junit, junit_path, err, sizeof err) != 0) {
            fprintf(stderr, "moeperm check: cannot write the JUnit report: %s\n",
                    junit ? err : "out of memory");
            rc = EXIT_BAD_INPUT;
        }
    }
    moeperm_golden_junit_free(junit);
    for (size_t i = 0; i < sum.count; i++)
        free(sum.rows[i].suite);
    free(sum.rows);
    moeperm_golden_free_paths(all, total);
    free(rel);

    if (seen[BACKEND_FAILED] || rc == EXIT_BACKEND)
        return EXIT_BACKEND;
    if (seen[BAD_INPUT] || rc == EXIT_BAD_INPUT)
        return EXIT_BAD_INPUT;
    return seen[MISMATCH] || seen[MISSING] ? EXIT_MISMATCH : EXIT_OK;
}
