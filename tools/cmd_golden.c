/*
 * cmd_golden.c - `moeperm golden`: writes the built-in suites (one
 * directory per suite, one per case) or one custom case.  Existing cases
 * are replaced only with --force, each case appears atomically, and every
 * manifest records the command that regenerates it, relative to the case
 * directory so it stays true wherever the corpus lives.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "golden/case.h"
#include "golden/fileio.h"
#include "golden/generate.h"

static void usage(FILE *to)
{
    fprintf(to,
            "usage: moeperm golden --out DIR [--suite NAME ...] [--seed N] [--force] [--list]\n"
            "       moeperm golden --out DIR --tokens T --topk K --hidden H --dtype D\n"
            "              [--rows R] [--experts E] [--hot P] [--values KIND]\n"
            "              [--routing ROUTING] [--seed N] [--name NAME] [--force]\n"
            "  --suite takes one or more names (--suite a b) and may be repeated\n"
            "  (--suite a --suite b)\n"
            "  dtypes: float32, float16, bf16\n"
            "  values: %s\n"
            "  routing: %s\n",
            golden_values_names(), golden_routing_names());
}

static void list_suites(void)
{
    size_t n;
    const golden_suite *suites = golden_suites(&n);
    for (size_t i = 0; i < n; i++)
        printf("%-12s %s%s\n", suites[i].name, suites[i].description,
               suites[i].in_default ? "" : " [not in the default set]");
}

/* text as one word of a POSIX shell command (malloc'd, NULL when memory
 * runs out): as it is when every character is safe, else in single quotes
 * with each ' written '\''.  The recorded command is meant to be pasted into
 * a shell; a name with a space must come back as one argument, and one
 * with quotes, $(...) or a newline must not run anything. */
static char *shell_quote(const char *text)
{
    static const char safe[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                               "0123456789_-+.,:=@%/";
    if (text[0] && strspn(text, safe) == strlen(text))
        return golden_strdup_printf("%s", text);
    size_t quotes = 0;
    for (const char *p = text; *p; p++)
        quotes += *p == '\'';
    char *out = malloc(strlen(text) + 3 * quotes + 3);
    if (!out)
        return NULL;
    char *o = out;
    *o++ = '\'';
    for (const char *p = text; *p; p++) {
        if (*p == '\'') {
            memcpy(o, "'\\''", 4);
            o += 4;
        } else {
            *o++ = *p;
        }
    }
    *o++ = '\'';
    *o = '\0';
    return out;
}

/* Adds a --suite name; false after a message when it is not a built-in
 * suite or there are too many. */
static bool add_suite(const char *name, const char **names, size_t *count, size_t max)
{
    if (!golden_suite_find(name)) {
        fprintf(stderr, "moeperm golden: --suite is \"%s\", which is not a built-in "
                        "suite (see --list)\n", name);
        return false;
    }
    if (*count == max) {
        fprintf(stderr, "moeperm golden: more than %zu suites given to --suite\n", max);
        return false;
    }
    names[(*count)++] = name;
    return true;
}

/* One case to write: where, what, and the command that regenerates it. */
typedef struct job {
    char *path;
    char *command;
    golden_spec spec;
} job;

static void free_jobs(job *jobs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(jobs[i].path);
        free(jobs[i].command);
    }
    free(jobs);
}

static int write_jobs(job *jobs, size_t n, bool force)
{
    /* Refuse before any work when a target exists: half a corpus written
     * and half refused is worse than nothing written. */
    if (!force) {
        size_t existing = 0;
        const char *first = NULL;
        struct stat st;
        for (size_t i = 0; i < n; i++)
            if (lstat(jobs[i].path, &st) == 0 && existing++ == 0)
                first = jobs[i].path;
        if (existing) {
            if (existing == 1)
                fprintf(stderr, "moeperm golden: %s already exists; pass --force to replace it\n",
                        first);
            else
                fprintf(stderr,
                        "moeperm golden: %s and %zu more cases already exist; pass --force to "
                        "replace them\n",
                        first, existing - 1);
            return EXIT_BAD_INPUT;
        }
    }
    bool progress = isatty(2);
    bool shown = false;
    double start = cli_now();
    char err[1024];
    for (size_t i = 0; i < n; i++) {
        golden_case c;
        err[0] = '\0';
        if (golden_generate(&jobs[i].spec, jobs[i].command, &c, err, sizeof err) != 0) {
            if (shown)
                fputc('\n', stderr);
            fprintf(stderr, "moeperm golden: %s\n", err);
            /* The spec was checked; a refusal now is the library's. */
            return EXIT_BACKEND;
        }
        int rc = golden_case_write(jobs[i].path, &c, force, err, sizeof err);
        golden_case_free(&c);
        if (rc != 0) {
            if (shown)
                fputc('\n', stderr);
            fprintf(stderr, "moeperm golden: %s\n", err);
            return EXIT_BAD_INPUT;
        }
        /* Progress only for a person watching, and only when it is slow
         * enough to wonder. */
        if (progress && cli_now() - start > 1.0) {
            fprintf(stderr, "\rmoeperm golden: %zu of %zu cases written", i + 1, n);
            shown = true;
        }
    }
    if (shown)
        fputc('\n', stderr);
    return EXIT_OK;
}

int cmd_golden(int argc, char **argv)
{
    enum { O_OUT = 256, O_SUITE, O_SEED, O_FORCE, O_LIST, O_TOKENS, O_TOPK, O_HIDDEN, O_DTYPE,
           O_ROWS, O_EXPERTS, O_HOT, O_VALUES, O_ROUTING, O_NAME, O_HELP };
    static const struct option options[] = {
        {"out", required_argument, NULL, O_OUT},
        {"suite", required_argument, NULL, O_SUITE},
        {"seed", required_argument, NULL, O_SEED},
        {"force", no_argument, NULL, O_FORCE},
        {"list", no_argument, NULL, O_LIST},
        {"tokens", required_argument, NULL, O_TOKENS},
        {"topk", required_argument, NULL, O_TOPK},
        {"hidden", required_argument, NULL, O_HIDDEN},
        {"dtype", required_argument, NULL, O_DTYPE},
        {"rows", required_argument, NULL, O_ROWS},
        {"experts", required_argument, NULL, O_EXPERTS},
        {"hot", required_argument, NULL, O_HOT},
        {"values", required_argument, NULL, O_VALUES},
        {"routing", required_argument, NULL, O_ROUTING},
        {"name", required_argument, NULL, O_NAME},
        {"help", no_argument, NULL, O_HELP},
        {NULL, 0, NULL, 0},
    };
    const char *out = NULL, *name = NULL;
    const char *suite_names[64];
    const size_t max_suites = sizeof suite_names / sizeof suite_names[0];
    size_t suite_count = 0;
    uint64_t seed = GOLDEN_DEFAULT_SEED;
    bool force = false, one_off = false, have_dtype = false;
    int64_t tokens = -1, top_k = -1, hidden = -1, rows = -1, experts = 0, hot = 50;
    golden_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.values = GOLDEN_VALUES_NORMAL;
    spec.routing = GOLDEN_ROUTING_ROUTED;
    int opt;
    while ((opt = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        bool ok = true;
        switch (opt) {
        case O_OUT:
            out = optarg;
            break;
        case O_SUITE:
            /* interfaces.md writes "--suite NAME ...": the words after
             * --suite up to the next option are all suite names (golden
             * takes no other plain arguments, so none is taken from
             * elsewhere). */
            ok = add_suite(optarg, suite_names, &suite_count, max_suites);
            while (ok && optind < argc && argv[optind][0] != '-')
                ok = add_suite(argv[optind++], suite_names, &suite_count, max_suites);
            break;
        case O_SEED:
            ok = cli_uint64("golden", "--seed", optarg, &seed);
            break;
        case O_FORCE:
            force = true;
            break;
        case O_LIST:
            list_suites();
            return EXIT_OK;
        case O_TOKENS:
            ok = cli_int64("golden", "--tokens", optarg, 1, GOLDEN_MAX_DIM, &tokens);
            one_off = true;
            break;
        case O_TOPK:
            ok = cli_int64("golden", "--topk", optarg, 1, MOEPERM_MAX_TOP_K, &top_k);
            one_off = true;
            break;
        case O_HIDDEN:
            ok = cli_int64("golden", "--hidden", optarg, 1, GOLDEN_MAX_DIM, &hidden);
            one_off = true;
            break;
        case O_DTYPE:
            if (!golden_dtype_parse(optarg, &spec.dtype)) {
                fprintf(stderr, "moeperm golden: --dtype is \"%s\", expected float32, float16 "
                                "or bf16\n", optarg);
                return EXIT_BAD_INPUT;
            }
            have_dtype = true;
            one_off = true;
            break;
        case O_ROWS:
            ok = cli_int64("golden", "--rows", optarg, 0, INT32_MAX, &rows);
            one_off = true;
            break;
        case O_EXPERTS:
            ok = cli_int64("golden", "--experts", optarg, 1, INT32_MAX, &experts);
            one_off = true;
            break;
        case O_HOT:
            ok = cli_int64("golden", "--hot", optarg, 0, 99, &hot);
            one_off = true;
            break;
        case O_VALUES:
            if (!golden_values_parse(optarg, &spec.values)) {
                fprintf(stderr, "moeperm golden: --values is \"%s\", expected one of %s\n",
                        optarg, golden_values_names());
                return EXIT_BAD_INPUT;
            }
            one_off = true;
            break;
        case O_ROUTING:
            if (!golden_routing_parse(optarg, &spec.routing)) {
                fprintf(stderr, "moeperm golden: --routing is \"%s\", expected one of %s\n",
                        optarg, golden_routing_names());
                return EXIT_BAD_INPUT;
            }
            one_off = true;
            break;
        case O_NAME:
            name = optarg;
            one_off = true;
            break;
        case O_HELP:
        case 'h':
            usage(stdout);
            return EXIT_OK;
        default:
            usage(stderr);
            return EXIT_BAD_INPUT;
        }
        if (!ok)
            return EXIT_BAD_INPUT;
    }
    if (optind < argc) {
        fprintf(stderr, "moeperm golden: unexpected argument \"%s\"\n", argv[optind]);
        usage(stderr);
        return EXIT_BAD_INPUT;
    }
    if (!out) {
        fprintf(stderr, "moeperm golden: missing --out DIR\n");
        usage(stderr);
        return EXIT_BAD_INPUT;
    }
    if (out[0] == '\0') { /* "" would put the cases under / */
        fprintf(stderr, "moeperm golden: --out is \"\", expected a directory\n");
        return EXIT_BAD_INPUT;
    }
    if (one_off && suite_count) {
        fprintf(stderr, "moeperm golden: --suite and the custom-case options (--tokens ...) "
                        "cannot be combined\n");
        return EXIT_BAD_INPUT;
    }

    job *jobs = NULL;
    size_t n = 0;
    char err[1024];
    if (one_off) {
        const char *missing = tokens < 0 ? "--tokens" : top_k < 0 ? "--topk"
                              : hidden < 0 ? "--hidden" : !have_dtype ? "--dtype" : NULL;
        if (missing) {
            fprintf(stderr, "moeperm golden: a custom case needs %s (and --tokens, --topk, "
                            "--hidden, --dtype)\n", missing);
            return EXIT_BAD_INPUT;
        }
        spec.tokens_num = tokens;
        spec.top_k = top_k;
        spec.hidden_size = hidden;
        spec.num_rows = rows;
        spec.num_experts = experts;
        spec.hot_percent = (int)hot;
        spec.seed = seed;
        if (name) {
            if (strlen(name) >= sizeof spec.name) {
                fprintf(stderr, "moeperm golden: --name \"%s\" is longer than %zu characters\n",
                        name, sizeof spec.name - 1);
                return EXIT_BAD_INPUT;
            }
            snprintf(spec.name, sizeof spec.name, "%s", name);
        } else {
            golden_spec_default_name(&spec);
        }
        if (golden_spec_check(&spec, err, sizeof err) != 0) {
            fprintf(stderr, "moeperm golden: %s\n", err);
            return EXIT_BAD_INPUT;
        }
        int64_t resolved_rows = rows < 0 ? tokens * top_k : rows;
        int64_t resolved_experts = experts ? experts : (top_k * 2 > 64 ? top_k * 2 : 64);
        snprintf(spec.description, sizeof spec.description,
                 "custom case: %s values, %s routing", golden_values_name(spec.values),
                 golden_routing_name(spec.routing));
        jobs = calloc(1, sizeof *jobs);
        if (!jobs)
            goto oom;
        n = 1;
        jobs[0].spec = spec;
        jobs[0].path = golden_strdup_printf("%s/%s", out, spec.name);
        /* The name is the one word here that comes from the user; the
         * others are numbers and built-in names, safe as they are. */
        char *quoted_name = shell_quote(spec.name);
        if (quoted_name)
            jobs[0].command = golden_strdup_printf(
                "moeperm golden --out .. --tokens %" PRId64 " --topk %" PRId64
                " --hidden %" PRId64 " --dtype %s --rows %" PRId64 " --experts %" PRId64
                " --hot %" PRId64 " --values %s --routing %s --seed %" PRIu64
                " --name %s --force",
                tokens, top_k, hidden, golden_dtype_name(spec.dtype), resolved_rows,
                resolved_experts, hot, golden_values_name(spec.values),
                golden_routing_name(spec.routing), seed, quoted_name);
        free(quoted_name);
        if (!jobs[0].path || !jobs[0].command)
            goto oom;
    } else {
        size_t all_count;
        const golden_suite *all = golden_suites(&all_count);
        for (size_t s = 0; s < all_count; s++) {
            bool wanted = suite_count == 0 ? all[s].in_default : false;
            for (size_t i = 0; i < suite_count; i++)
                wanted = wanted || strcmp(suite_names[i], all[s].name) == 0;
            if (!wanted)
                continue;
            golden_spec *specs;
            size_t count;
            if (golden_suite_specs(&all[s], seed, &specs, &count) != 0)
                goto oom;
            job *grown = realloc(jobs, (n + count) * sizeof *grown);
            if (!grown) {
                free(specs);
                goto oom;
            }
            jobs = grown;
            for (size_t i = 0; i < count; i++) {
                job *j = &jobs[n++];
                j->spec = specs[i];
                j->path = golden_strdup_printf("%s/%s/%s", out, all[s].name, specs[i].name);
                j->command = golden_strdup_printf(
                    "moeperm golden --out ../.. --suite %s --seed %" PRIu64 " --force",
                    all[s].name, seed);
                if (!j->path || !j->command) {
                    free(specs);
                    goto oom;
                }
            }
            free(specs);
        }
    }
    int rc = write_jobs(jobs, n, force);
    if (rc == EXIT_OK)
        printf("moeperm golden: wrote %zu case%s under %s\n", n, n == 1 ? "" : "s", out);
    free_jobs(jobs, n);
    return rc;
oom:
    fprintf(stderr, "moeperm golden: out of memory\n");
    free_jobs(jobs, n);
    return EXIT_BACKEND;
}
