/*
 * cmd_golden.c - `moeperm golden`: writes the built-in suites (one
 * directory per suite, one per case; the default ones with README.md, the
 * listing of their cases) or one custom case.  Existing cases are
 * replaced only with --force, each case appears atomically, and every
 * manifest records the command that regenerates it (the library's),
 * relative to the case directory so it stays true wherever the corpus
 * lives.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"

static void usage(FILE *to)
{
    fprintf(to,
            "usage: moeperm golden --out DIR [--suite NAME ...] [--seed N] [--force] [--list]\n"
            "       moeperm golden --out DIR [--op OP] --tokens T --top-k K --hidden H\n"
            "              --dtype D [options of a custom case]\n"
            "\n"
            "Writes the built-in suites (default: every default suite, see --list, and\n"
            "DIR/README.md, the list of their cases), or one custom case, each as a case\n"
            "directory below DIR.\n"
            "  --suite NAME ...   suites to write; takes one or more names (--suite a b)\n"
            "                     and may be repeated (--suite a --suite b)\n"
            "  --seed N           base seed (default %d)\n"
            "  --force            replace existing cases (only cases) and a README.md\n"
            "                     moeperm wrote (only that)\n"
            "  --list             list the built-in suites and exit\n"
            "A custom case:\n"
            "  --op OP            MoeTokenPermuteGrad (default), MoeTokenPermute,\n"
            "                     MoeTokenUnpermute, MoeTokenUnpermuteGrad (or permute-grad,\n"
            "                     permute, unpermute, unpermute-grad)\n"
            "  --tokens T --top-k K --hidden H   sizes (--topk is accepted too); for\n"
            "                     MoeTokenPermuteGrad --top-k -1 is recorded as num_topk -1,\n"
            "                     which the device takes as 1\n"
            "  --dtype D          float32|fp32, float16|fp16, bf16|bfloat16 (and int8 for\n"
            "                     MoeTokenPermute's tokens)\n"
            "  --rows R           rows of the permuted tensor (default T*K: none dropped;\n"
            "                     above T*K: rows no slot names)\n"
            "  --num-out-tokens N MoeTokenPermute's num_out_tokens (default 0: all)\n"
            "  --index-dtype D    MoeTokenPermute's expert ids: int32 (default) or int64\n"
            "  --sentinels        MoeTokenPermute: every 7th id the index dtype's min/max\n"
            "  --probs-dtype D    probs of MoeTokenUnpermute(Grad) (default: --dtype)\n"
            "  --no-probs         MoeTokenUnpermute(Grad) without probs (then top_k is 1)\n"
            "  --probs-values KIND  value kind of probs (default normal)\n"
            "  --chip NAME        MoeTokenUnpermuteGrad's chip by name, recorded as such:\n"
            "                     %s\n"
            "  --ub-bytes N --vector-cores N   MoeTokenUnpermuteGrad's chip by its numbers,\n"
            "                     for a chip without a name (default the Atlas A2: %lld\n"
            "                     bytes, %lld cores)\n"
            "  --padded-mode      record padded_mode true (MoeTokenPermute refuses it, the\n"
            "                     other three ignore it)\n"
            "  --extra-indices N  N entries of sorted_indices past T*K, never read\n"
            "  --huge-indices     every third slot's row far above the rows (up to\n"
            "                     INT32_MAX): dropped slots\n"
            "  --hidden-outer N   MoeTokenPermute: tokens of rank 3, [T, N, H/N]\n"
            "  --experts E        routed: experts to choose from (default max(64, 2K))\n"
            "  --hot P            routed: percent of picks among the hot eighth (default 50)\n"
            "  --values KIND      value kind (default normal): %s\n"
            "  --routing ROUTING  (default routed): %s\n"
            "  --name NAME        the case directory's name (default from the options)\n"
            "An attribute option of another operator than --op's is refused.\n",
            MOEPERM_GOLDEN_DEFAULT_SEED, moeperm_chip_names(), (long long)MOEPERM_CHIP_A2_UB_BYTES,
            (long long)MOEPERM_CHIP_A2_VECTOR_CORES, moeperm_golden_values_names(),
            moeperm_golden_routing_names());
}

static void list_suites(void)
{
    size_t n, width = 0;
    const moeperm_golden_suite *suites = moeperm_golden_suites(&n);
    for (size_t i = 0; i < n; i++)
        width = strlen(suites[i].name) > width ? strlen(suites[i].name) : width;
    for (size_t i = 0; i < n; i++)
        printf("%-*s %s%s\n", (int)width, suites[i].name, suites[i].description,
               suites[i].in_default ? "" : " [not in the default set]");
}

/* Adds a --suite name; false after a message when it is not a built-in
 * suite or there are too many. */
static bool add_suite(const char *name, const char **names, size_t *count, size_t max)
{
    if (!moeperm_golden_suite_find(name)) {
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
    moeperm_golden_spec spec;
} job;

static void free_jobs(job *jobs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(jobs[i].path);
        free(jobs[i].command);
    }
    free(jobs);
}

/* Whether readme_path, which exists, is a README.md moeperm wrote: a
 * regular file whose first line is readme's.  false after a sentence in
 * err when it is not. */
static bool readme_is_ours(const char *readme_path, const char *readme, char *err, size_t len)
{
    struct stat st = {0};
    if (lstat(readme_path, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, len, "%s is %s, not a README.md moeperm wrote; --force replaces only "
                 "that, so nothing was changed", readme_path,
                 S_ISLNK(st.st_mode) ? "a symbolic link" : S_ISDIR(st.st_mode) ? "a directory"
                                                                               : "not a regular file");
        return false;
    }
    size_t first = strcspn(readme, "\n") + 1; /* the generated first line, with its newline */
    char line[256] = "";
    FILE *f = fopen(readme_path, "rb");
    size_t got = f ? fread(line, 1, first < sizeof line ? first : sizeof line - 1, f) : 0;
    if (f)
        fclose(f);
    if (!f) {
        snprintf(err, len, "cannot read %s to check that moeperm wrote it: %s", readme_path,
                 strerror(errno));
        return false;
    }
    if (got != first || memcmp(line, readme, first) != 0) {
        snprintf(err, len, "%s does not begin with the line moeperm writes (\"%.*s\"), so it "
                 "is not one moeperm wrote; --force replaces only that, so nothing was changed",
                 readme_path, (int)(first - 1), readme);
        return false;
    }
    return true;
}

/* Writes the cases of jobs, then (when readme_path is not NULL) readme
 * as the listing beside them. */
static int write_jobs(job *jobs, size_t n, const char *readme_path, const char *readme,
                      bool force)
{
    /* Refuse before any work when a target cannot be written, with or
     * without --force: half a corpus written and half refused is worse
     * than nothing written. */
    size_t existing = 0;
    const char *first = NULL;
    struct stat st;
    char err[1024];
    for (size_t i = 0; !force && i < n; i++)
        if (lstat(jobs[i].path, &st) == 0 && existing++ == 0)
            first = jobs[i].path;
    if (!force && readme_path && lstat(readme_path, &st) == 0 && existing++ == 0)
        first = readme_path;
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
    for (size_t i = 0; i < n; i++) {
        if (moeperm_golden_case_target_check(jobs[i].path, force, err, sizeof err) != 0) {
            fprintf(stderr, "moeperm golden: %s\n", err);
            return EXIT_BAD_INPUT;
        }
    }
    if (readme_path && lstat(readme_path, &st) == 0 &&
        !readme_is_ours(readme_path, readme, err, sizeof err)) {
        fprintf(stderr, "moeperm golden: %s\n", err);
        return EXIT_BAD_INPUT;
    }
    bool progress = isatty(2);
    bool shown = false;
    double start = cli_now();
    for (size_t i = 0; i < n; i++) {
        err[0] = '\0';
        int rc = moeperm_golden_generate_write(&jobs[i].spec, jobs[i].command, jobs[i].path, force, err,
                                       sizeof err);
        if (rc != 0) {
            if (shown)
                fputc('\n', stderr);
            fprintf(stderr, "moeperm golden: %s\n", err);
            /* The spec was checked; a refusal to generate now is the
             * library's. */
            return rc == -2 ? EXIT_BACKEND : EXIT_BAD_INPUT;
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
    if (readme_path &&
        moeperm_golden_write_file_atomic(readme_path, readme, strlen(readme), err, sizeof err) != 0) {
        fprintf(stderr, "moeperm golden: %s\n", err);
        return EXIT_BAD_INPUT;
    }
    return EXIT_OK;
}

int cmd_golden(int argc, char **argv)
{
    enum { O_OUT = 256, O_SUITE, O_SEED, O_FORCE, O_LIST, O_TOKENS, O_TOPK, O_HIDDEN, O_DTYPE,
           O_ROWS, O_EXPERTS, O_HOT, O_VALUES, O_ROUTING, O_NAME, O_HELP, O_OP, O_NUM_OUT,
           O_INDEX_DTYPE, O_SENTINELS, O_PROBS_DTYPE, O_NO_PROBS, O_PROBS_VALUES, O_UB_BYTES,
           O_VECTOR_CORES, O_CHIP, O_PADDED, O_EXTRA, O_HUGE, O_HIDDEN_OUTER };
    static const struct option options[] = {
        {"out", required_argument, NULL, O_OUT},
        {"suite", required_argument, NULL, O_SUITE},
        {"seed", required_argument, NULL, O_SEED},
        {"force", no_argument, NULL, O_FORCE},
        {"list", no_argument, NULL, O_LIST},
        {"tokens", required_argument, NULL, O_TOKENS},
        {"topk", required_argument, NULL, O_TOPK},
        {"top-k", required_argument, NULL, O_TOPK},
        {"op", required_argument, NULL, O_OP},
        {"num-out-tokens", required_argument, NULL, O_NUM_OUT},
        {"index-dtype", required_argument, NULL, O_INDEX_DTYPE},
        {"sentinels", no_argument, NULL, O_SENTINELS},
        {"probs-dtype", required_argument, NULL, O_PROBS_DTYPE},
        {"no-probs", no_argument, NULL, O_NO_PROBS},
        {"probs-values", required_argument, NULL, O_PROBS_VALUES},
        {"ub-bytes", required_argument, NULL, O_UB_BYTES},
        {"vector-cores", required_argument, NULL, O_VECTOR_CORES},
        {"chip", required_argument, NULL, O_CHIP},
        {"padded-mode", no_argument, NULL, O_PADDED},
        {"extra-indices", required_argument, NULL, O_EXTRA},
        {"huge-indices", no_argument, NULL, O_HUGE},
        {"hidden-outer", required_argument, NULL, O_HIDDEN_OUTER},
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
    uint64_t seed = MOEPERM_GOLDEN_DEFAULT_SEED;
    bool force = false, one_off = false, have_dtype = false, have_probs_dtype = false;
    int64_t tokens = -1, top_k = -2, hidden = -1, rows = -1, experts = 0, hot = 50;
    int64_t num_out = 0, ub_bytes = 0, vector_cores = 0;
    moeperm_golden_spec spec = moeperm_golden_spec_default(MOEPERM_OP_PERMUTE_GRAD, MOEPERM_BF16, 0, 0, 0);
    bool no_probs = false;
    /* The attribute options of one operator or two: given for another,
     * they would change nothing and leave no trace, so they are refused
     * (as make-case refuses them). */
    enum { P = 1u << MOEPERM_OP_PERMUTE, U = 1u << MOEPERM_OP_UNPERMUTE,
           UG = 1u << MOEPERM_OP_UNPERMUTE_GRAD };
    struct {
        int opt;
        const char *flag;
        unsigned ops;
        bool given;
    } attrs[] = {
        {O_NUM_OUT, "--num-out-tokens", P, false},  {O_INDEX_DTYPE, "--index-dtype", P, false},
        {O_SENTINELS, "--sentinels", P, false},     {O_HIDDEN_OUTER, "--hidden-outer", P, false},
        {O_PROBS_DTYPE, "--probs-dtype", U | UG, false}, {O_NO_PROBS, "--no-probs", U | UG, false},
        {O_PROBS_VALUES, "--probs-values", U | UG, false}, {O_UB_BYTES, "--ub-bytes", UG, false},
        {O_VECTOR_CORES, "--vector-cores", UG, false}, /* --chip: the spec's own check */
    };
    const size_t attr_count = sizeof attrs / sizeof attrs[0];
    int opt;
    while ((opt = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        bool ok = true;
        for (size_t i = 0; i < attr_count; i++)
            attrs[i].given = attrs[i].given || attrs[i].opt == opt;
        switch (opt) {
        case O_OUT:
            out = optarg;
            break;
        case O_SUITE:
            /* The usage writes "--suite NAME ...": the words after
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
            ok = cli_int64("golden", "--tokens", optarg, 1, MOEPERM_GOLDEN_MAX_DIM, &tokens);
            one_off = true;
            break;
        case O_TOPK:
            ok = cli_int64("golden", "--top-k", optarg, -1, MOEPERM_MAX_TOP_K, &top_k);
            if (ok && top_k == 0) {
                fprintf(stderr, "moeperm golden: --top-k is \"0\", expected an integer from 1 "
                                "to %d, or -1 (MoeTokenPermuteGrad's num_topk, taken as 1)\n",
                        MOEPERM_MAX_TOP_K);
                ok = false;
            }
            one_off = true;
            break;
        case O_HIDDEN:
            ok = cli_int64("golden", "--hidden", optarg, 1, MOEPERM_GOLDEN_MAX_DIM, &hidden);
            one_off = true;
            break;
        case O_DTYPE:
            if (!moeperm_golden_dtype_parse(optarg, &spec.dtype)) {
                fprintf(stderr, "moeperm golden: --dtype is \"%s\", expected float32 (fp32), "
                                "float16 (fp16), bf16 (bfloat16) or int8\n", optarg);
                return EXIT_BAD_INPUT;
            }
            have_dtype = true;
            one_off = true;
            break;
        case O_OP:
            spec.op = moeperm_golden_op_parse(optarg);
            if (!spec.op) {
                fprintf(stderr, "moeperm golden: --op is \"%s\", expected MoeTokenPermuteGrad, "
                                "MoeTokenPermute, MoeTokenUnpermute or MoeTokenUnpermuteGrad\n",
                        optarg);
                return EXIT_BAD_INPUT;
            }
            one_off = true;
            break;
        case O_NUM_OUT:
            ok = cli_int64("golden", "--num-out-tokens", optarg, -INT32_MAX, INT32_MAX, &num_out);
            one_off = true;
            break;
        case O_INDEX_DTYPE:
            if (!moeperm_golden_dtype_parse(optarg, &spec.index_dtype) ||
                (spec.index_dtype != MOEPERM_INT32 && spec.index_dtype != MOEPERM_INT64)) {
                fprintf(stderr, "moeperm golden: --index-dtype is \"%s\", expected int32 or "
                                "int64\n", optarg);
                return EXIT_BAD_INPUT;
            }
            one_off = true;
            break;
        case O_SENTINELS:
            spec.sentinels = true;
            one_off = true;
            break;
        case O_PROBS_DTYPE:
            if (!moeperm_golden_dtype_parse(optarg, &spec.probs_dtype)) {
                fprintf(stderr, "moeperm golden: --probs-dtype is \"%s\", expected float32 "
                                "(fp32), float16 (fp16) or bf16 (bfloat16)\n", optarg);
                return EXIT_BAD_INPUT;
            }
            have_probs_dtype = true;
            one_off = true;
            break;
        case O_NO_PROBS:
            no_probs = true;
            one_off = true;
            break;
        case O_PROBS_VALUES:
            if (!moeperm_golden_values_parse(optarg, &spec.probs_values)) {
                fprintf(stderr, "moeperm golden: --probs-values is \"%s\", expected one of "
                                "%s\n", optarg, moeperm_golden_values_names());
                return EXIT_BAD_INPUT;
            }
            one_off = true;
            break;
        case O_UB_BYTES:
            ok = cli_int64("golden", "--ub-bytes", optarg, MOEPERM_CHIP_MIN_UB_BYTES,
                           MOEPERM_CHIP_MAX_UB_BYTES, &ub_bytes);
            one_off = true;
            break;
        case O_VECTOR_CORES:
            ok = cli_int64("golden", "--vector-cores", optarg, 1, MOEPERM_CHIP_MAX_VECTOR_CORES,
                           &vector_cores);
            one_off = true;
            break;
        case O_CHIP:
            if (!cli_chip("golden", optarg, NULL))
                return EXIT_BAD_INPUT;
            snprintf(spec.chip, sizeof spec.chip, "%s", optarg);
            one_off = true;
            break;
        case O_PADDED:
            spec.padded_mode = true;
            one_off = true;
            break;
        case O_EXTRA:
            ok = cli_int64("golden", "--extra-indices", optarg, 0, INT32_MAX, &spec.extra_indices);
            one_off = true;
            break;
        case O_HUGE:
            spec.huge_indices = true;
            one_off = true;
            break;
        case O_HIDDEN_OUTER:
            ok = cli_int64("golden", "--hidden-outer", optarg, 1, MOEPERM_GOLDEN_MAX_DIM,
                           &spec.hidden_outer);
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
            if (!moeperm_golden_values_parse(optarg, &spec.values)) {
                fprintf(stderr, "moeperm golden: --values is \"%s\", expected one of %s\n",
                        optarg, moeperm_golden_values_names());
                return EXIT_BAD_INPUT;
            }
            one_off = true;
            break;
        case O_ROUTING:
            if (!moeperm_golden_routing_parse(optarg, &spec.routing)) {
                fprintf(stderr, "moeperm golden: --routing is \"%s\", expected one of %s\n",
                        optarg, moeperm_golden_routing_names());
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
    /* The default suites, and only they, come with the listing of their
     * cases: a run of chosen suites into the same directory would list
     * only those. */
    char *readme_path = NULL, *readme = NULL;
    if (one_off) {
        const char *missing = tokens < 0 ? "--tokens" : top_k < -1 ? "--top-k"
                              : hidden < 0 ? "--hidden" : !have_dtype ? "--dtype" : NULL;
        if (missing) {
            fprintf(stderr, "moeperm golden: a custom case needs %s (and --tokens, --top-k, "
                            "--hidden, --dtype)\n", missing);
            return EXIT_BAD_INPUT;
        }
        if (!spec.op)
            spec.op = MOEPERM_OP_PERMUTE_GRAD;
        for (size_t i = 0; i < attr_count; i++) {
            if (attrs[i].given && !(attrs[i].ops & 1u << spec.op)) {
                fprintf(stderr, "moeperm golden: %s is not an option of %s, which has no such "
                                "attribute (see --help)\n", attrs[i].flag,
                        moeperm_op_name(spec.op));
                return EXIT_BAD_INPUT;
            }
        }
        spec.has_probs = !no_probs && (spec.op == MOEPERM_OP_UNPERMUTE ||
                                       spec.op == MOEPERM_OP_UNPERMUTE_GRAD);
        if (!have_probs_dtype)
            spec.probs_dtype = spec.dtype;
        spec.num_out_tokens = num_out;
        spec.ub_bytes = ub_bytes;
        spec.vector_cores = vector_cores;
        spec.tokens_num = tokens;
        spec.top_k = top_k == -1 ? 1 : top_k;
        spec.num_topk = top_k == -1 ? -1 : 0;
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
            moeperm_golden_spec_default_name(&spec);
        }
        if (moeperm_golden_spec_check(&spec, err, sizeof err) != 0) {
            fprintf(stderr, "moeperm golden: %s\n", err);
            return EXIT_BAD_INPUT;
        }
        snprintf(spec.description, sizeof spec.description,
                 "custom case: %s values, %s routing", moeperm_golden_values_name(spec.values),
                 moeperm_golden_routing_name(spec.routing));
        jobs = calloc(1, sizeof *jobs);
        if (!jobs)
            goto oom;
        n = 1;
        jobs[0].spec = spec;
        jobs[0].path = cli_format("%s/%s", out, spec.name);
        jobs[0].command = moeperm_golden_spec_command(&spec);
        if (!jobs[0].path || !jobs[0].command)
            goto oom;
    } else {
        if (suite_count == 0 && (!(readme_path = cli_format("%s/README.md", out)) ||
                                 !(readme = moeperm_golden_corpus_readme(seed))))
            goto oom;
        size_t all_count;
        const moeperm_golden_suite *all = moeperm_golden_suites(&all_count);
        for (size_t s = 0; s < all_count; s++) {
            bool wanted = suite_count == 0 ? all[s].in_default : false;
            for (size_t i = 0; i < suite_count; i++)
                wanted = wanted || strcmp(suite_names[i], all[s].name) == 0;
            if (!wanted)
                continue;
            moeperm_golden_spec *specs;
            size_t count;
            if (moeperm_golden_suite_specs(&all[s], seed, &specs, &count) != 0)
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
                j->path = cli_format("%s/%s/%s", out, all[s].name, specs[i].name);
                j->command = moeperm_golden_suite_command(&all[s], seed);
                if (!j->path || !j->command) {
                    free(specs);
                    goto oom;
                }
            }
            free(specs);
        }
    }
    int rc = write_jobs(jobs, n, readme_path, readme, force);
    if (rc == EXIT_OK)
        printf("moeperm golden: wrote %zu case%s under %s\n", n, n == 1 ? "" : "s", out);
    free_jobs(jobs, n);
    free(readme_path);
    free(readme);
    return rc;
oom:
    fprintf(stderr, "moeperm golden: out of memory\n");
    free_jobs(jobs, n);
    free(readme_path);
    free(readme);
    return EXIT_BACKEND;
}
