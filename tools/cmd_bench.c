/*
 * cmd_bench.c - `moeperm bench`: times an operator through the public API,
 * both phases as a framework calls them, against the memory bandwidth of
 * the same process, so that "how fast" reads as a fraction of what the
 * machine can move (docs/performance.md).
 *
 * For each dtype it times, repetition by repetition and interleaved so that
 * a noisy neighbour hits all of them alike:
 * - the operator (validation and planning included), with the bytes it
 *   must move: every input read and every output written once;
 * - three yardsticks over MEMCPY_BYTES (MEMCPY_SMALL_BYTES for small
 *   shapes), split over the same threads: memcpy, one call per thread,
 *   counted as bytes read plus written (for large calls glibc streams the
 *   writes past the caches: its fastest copy); the same copy in
 *   COPY_CALL_BYTES calls, which glibc makes with ordinary stores; and a
 *   read alone, eight pages at a time (an operator that reads top_k bytes
 *   for each one it writes has that as its ceiling).
 * - the same operator on the portable loops (moeperm_isa_choose()), so that
 *   what the vector code buys is measured beside it.
 * It reports medians (and the best sample), and the ratios of the
 * operator's median to the others'.  Inputs come from the golden
 * generator, as a model's would look: tokens routed over many experts
 * (the routed routing), gradient-like values (the normal kind), and for
 * the operators with probs a row of bf16 tokens with float32 probs as
 * well.  Which kernel path runs otherwise is the library's choice;
 * MOEPERM_FORCE_PORTABLE=1 in the environment makes it the portable loop
 * (docs/performance.md).
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include <moeperm/golden.h>
#include <moeperm/moeperm.h>

#include "cli.h"
#include "commands.h"

/* memcpy moves this much per repetition, whatever the shape, so that its
 * figure is the same yardstick for every large shape: far outside the caches
 * (with source and destination together), and taken from the grad and into
 * the output where they are that large, so the largest shapes need no
 * extra memory. */
#define MEMCPY_BYTES (INT64_C(256) << 20)
/* ... except below this much grad, where the shape is about latency, not
 * bandwidth, and memcpy moves just this much. */
#define MEMCPY_SMALL_BYTES (INT64_C(32) << 20)
/* The piece size of the ordinary-store copy: far below glibc's
 * non-temporal threshold (a fraction of the last-level cache), far above
 * the per-call cost. */
#define COPY_CALL_BYTES (INT64_C(1) << 20)
/* A timed sample repeats the call until it lasts this long, so that small
 * shapes are not measured at the clock's resolution. */
#define MIN_SAMPLE_SECONDS 2e-3

/* Keeps the read baseline's sums alive. */
static volatile uint64_t read_sink;

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Sorts the samples; returns the median, *best gets the smallest. */
static double median(double *samples, int n, double *best)
{
    qsort(samples, (size_t)n, sizeof *samples, compare_doubles);
    *best = samples[0];
    return n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
}

static int team_size(int threads)
{
#ifdef _OPENMP
    return threads > 0 ? threads : omp_get_max_threads();
#else
    (void)threads;
    return 1;
#endif
}

/* The calling thread's part of `bytes` split over the team: page-aligned
 * shares, so the copy and the read below split their buffers alike. */
static void thread_share(int64_t bytes, int64_t *lo, int64_t *hi)
{
    int64_t id = 0, count = 1;
#ifdef _OPENMP
    id = omp_get_thread_num();
    count = omp_get_num_threads();
#endif
    int64_t share = ((bytes + count - 1) / count + 4095) & ~INT64_C(4095);
    *lo = id * share;
    *hi = *lo + share < bytes ? *lo + share : bytes;
}

/* memcpy on each thread's share, in one call (call_bytes 0) or in calls of
 * call_bytes.  For a large call glibc switches to non-temporal stores (its
 * x86_non_temporal_threshold), which skip the read for ownership of the
 * destination: its fastest copy.  Small calls copy with ordinary stores. */
static void parallel_memcpy(char *dst, const char *src, int64_t bytes, int64_t call_bytes,
                            int team)
{
    (void)team;
#ifdef _OPENMP
#pragma omp parallel num_threads(team) if (team > 1)
#endif
    {
        int64_t lo, hi;
        thread_share(bytes, &lo, &hi);
        int64_t step = call_bytes > 0 ? call_bytes : hi - lo;
        for (int64_t at = lo; at < hi; at += step)
            memcpy(dst + at, src + at, (size_t)(hi - at < step ? hi - at : step));
    }
}

/* READ_PAGES consecutive 4 KiB pages read in lockstep, 64 bytes of each per
 * step, into one vector of sums per page.  A read of one stream at a time
 * reaches only half to two thirds of this on the machine of
 * docs/performance.md: a core's bandwidth is bound by how many lines it has
 * in flight, and the hardware prefetcher keeps a few streams going at once,
 * as it does for the operator's K rows.  Built for AVX-512 and AVX2 as well where GCC can pick
 * the variant at load time: with SSE2's narrow vectors the loop issues too
 * many instructions to keep enough lines in flight. */
#define READ_PAGES 8
#define READ_PAGE_BYTES 4096
/* target_clones needs ifunc: glibc has it, musl does not */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__GLIBC__)
#define READ_VARIANTS __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define READ_VARIANTS
#endif
READ_VARIANTS static uint64_t read_pages(const char *src, int64_t lo, int64_t hi)
{
    uint64_t sums[READ_PAGES][8] = {{0}};
    int64_t group = READ_PAGES * READ_PAGE_BYTES, at = lo;
    for (; at + group <= hi; at += group)
        for (int64_t j = 0; j < READ_PAGE_BYTES; j += 64)
            for (int page = 0; page < READ_PAGES; page++) {
                uint64_t words[8];
                memcpy(words, src + at + page * READ_PAGE_BYTES + j, sizeof words);
                for (int w = 0; w < 8; w++)
                    sums[page][w] += words[w];
            }
    for (; at + 8 <= hi; at += 8) {
        uint64_t word;
        memcpy(&word, src + at, sizeof word);
        sums[0][0] += word;
    }
    uint64_t total = 0;
    for (int page = 0; page < READ_PAGES; page++)
        for (int w = 0; w < 8; w++)
            total += sums[page][w];
    return total;
}

/* The read alone over the copy's source, split like the copy. */
static uint64_t parallel_read(const char *src, int64_t bytes, int team)
{
    uint64_t total = 0;
    (void)team;
#ifdef _OPENMP
#pragma omp parallel num_threads(team) if (team > 1) reduction(^ : total)
#endif
    {
        int64_t lo, hi;
        thread_share(bytes, &lo, &hi);
        total ^= read_pages(src, lo, hi);
    }
    return total;
}

static void usage(FILE *to)
{
    fprintf(to,
            "usage: moeperm bench [--op OP] [--tokens T] [--top-k K] [--hidden H]\n"
            "                     [--dtype D] [--probs-dtype D] [--values KIND]\n"
            "                     [--threads N] [--reps N] [--json FILE]\n"
            "  time an operator through the public API against memcpy and a read\n"
            "  of the same process, and against its own portable loop\n"
            "  --op OP          MoeTokenPermuteGrad (default), MoeTokenPermute,\n"
            "                   MoeTokenUnpermute, MoeTokenUnpermuteGrad, or all\n"
            "                   (or permute-grad, permute, unpermute, unpermute-grad)\n"
            "  --tokens T       default 4096\n"
            "  --top-k K        default 8 (--topk is accepted too)\n"
            "  --hidden H       default 4096\n"
            "  --dtype D        float32 (fp32), float16 (fp16), bf16 (bfloat16) or all\n"
            "                   (default all: the three, and for the operators with\n"
            "                   probs bf16 tokens with float32 probs too)\n"
            "  --probs-dtype D  probs of MoeTokenUnpermute(Grad) (default: --dtype)\n"
            "  --values KIND    the inputs' value kind (default normal, gradient-like):\n"
            "                   %s\n"
            "  --threads N      default 0: the OpenMP default\n"
            "  --reps N         repetitions, default 10\n"
            "  --json FILE      also write the figures as one JSON document (- : stdout,\n"
            "                   the table then going to stderr)\n"
            "  MOEPERM_FORCE_PORTABLE=1 in the environment times the portable loop as\n"
            "  the operator\n",
            moeperm_golden_values_names());
}

typedef struct shape {
    int64_t tokens, top_k, hidden;
} shape;

/* One row of the table: an operator, its tokens' dtype and its probs'. */
typedef struct row {
    moeperm_op op;
    moeperm_dtype dtype, probs_dtype;
} row;

typedef struct result {
    row row;
    int64_t bytes, memcpy_bytes;
    int reps, calls_per_sample, team;
    double op_median, op_best, memcpy_median, memcpy_best;
    double read_median, read_best, copy_median, copy_best;
    double portable_median, portable_best;
} result;

static bool has_probs(moeperm_op op)
{
    return op == MOEPERM_OP_UNPERMUTE || op == MOEPERM_OP_UNPERMUTE_GRAD;
}

/* The operator once, both phases, into outputs. */
static bool run_once(const moeperm_golden_case *c, void *const *outputs)
{
    char err[512];
    moeperm_status st = moeperm_golden_run_reference(c, outputs, NULL, err, sizeof err);
    if (st != MOEPERM_SUCCESS)
        fprintf(stderr, "moeperm bench: the operator failed: %s\n", err);
    return st == MOEPERM_SUCCESS;
}

/* One sample: calls runs of the operator on the instruction set isa (after
 * one untimed run when calls > 1, so that a small shape starts warm), the
 * seconds of one. */
static double sample(const moeperm_golden_case *c, void *const *outputs, int calls,
                     moeperm_isa isa)
{
    moeperm_isa_choose(isa);
    if (calls > 1)
        run_once(c, outputs);
    double t0 = cli_now();
    for (int k = 0; k < calls; k++)
        run_once(c, outputs);
    double seconds = (cli_now() - t0) / calls;
    moeperm_isa_choose(MOEPERM_ISA_AUTO);
    return seconds;
}

static int bench_case(const shape *s, row rw, moeperm_golden_values values, int team, int reps,
                      result *res)
{
    char err[1024];
    moeperm_golden_spec spec =
        moeperm_golden_spec_default(rw.op, rw.dtype, s->tokens, s->top_k, s->hidden);
    snprintf(spec.name, sizeof spec.name, "bench");
    spec.probs_dtype = rw.probs_dtype;
    spec.values = values;
    moeperm_golden_case c;
    if (moeperm_golden_generate(&spec, NULL, &c, err, sizeof err) != 0) {
        fprintf(stderr, "moeperm bench: %s\n", err);
        return EXIT_BAD_INPUT;
    }
    void *outputs[MOEPERM_GOLDEN_MAX_TENSORS];
    size_t n_out = 0;
    int64_t bytes = 0, largest = 0;
    for (size_t i = 0; i < c.tensor_count; i++) {
        const moeperm_golden_tensor *t = &c.tensors[i];
        if (t->role == MOEPERM_GOLDEN_ROLE_EXACT)
            continue;
        bytes += (int64_t)t->bytes;
        largest = (int64_t)t->bytes > largest ? (int64_t)t->bytes : largest;
        if (t->role == MOEPERM_GOLDEN_ROLE_OUTPUT)
            outputs[n_out++] = t->data; /* the golden outputs are rewritten alike */
    }
    int64_t memcpy_bytes = largest >= MEMCPY_SMALL_BYTES ? MEMCPY_BYTES : MEMCPY_SMALL_BYTES;
    char *source = malloc((size_t)memcpy_bytes), *copy = malloc((size_t)memcpy_bytes);
    double *samples = calloc((size_t)reps * 5, sizeof *samples);
    int status = EXIT_OK;
    if (!source || !copy || !samples) {
        fprintf(stderr, "moeperm bench: out of memory for the yardsticks\n");
        status = EXIT_BACKEND;
        goto done;
    }
    /* distinct pages: a hypervisor may merge pages of equal content, and
     * reading merged pages measures its cache, not the memory */
    for (int64_t i = 0; i < memcpy_bytes; i += 8) {
        uint64_t v = (uint64_t)i * UINT64_C(0x9E3779B97F4A7C15);
        memcpy(source + i, &v, 8);
    }
    memset(copy, 0, (size_t)memcpy_bytes);
    if (!run_once(&c, outputs)) {
        status = EXIT_BACKEND;
        goto done;
    }
    /* Calls per sample, from one timed call. */
    double t0 = cli_now();
    run_once(&c, outputs);
    double once = cli_now() - t0;
    int calls = once >= MIN_SAMPLE_SECONDS ? 1 : (int)(MIN_SAMPLE_SECONDS / (once + 1e-9)) + 1;
    double *op_s = samples, *mc = samples + reps, *cp = samples + 2 * reps,
           *rd = samples + 3 * reps, *po = samples + 4 * reps;
    for (int r = 0; r < reps; r++) {
        t0 = cli_now();
        parallel_memcpy(copy, source, memcpy_bytes, 0, team);
        mc[r] = cli_now() - t0;
        t0 = cli_now();
        parallel_memcpy(copy, source, memcpy_bytes, COPY_CALL_BYTES, team);
        cp[r] = cli_now() - t0;
        t0 = cli_now();
        read_sink ^= parallel_read(source, memcpy_bytes, team);
        rd[r] = cli_now() - t0;
        /* A shape that repeats calls in a sample is about latency, so each
         * of its samples starts warm, after one untimed call; a large
         * shape's samples start cold, like memcpy's. */
        op_s[r] = sample(&c, outputs, calls, MOEPERM_ISA_AUTO);
        po[r] = sample(&c, outputs, calls, MOEPERM_ISA_PORTABLE);
    }
    res->row = rw;
    res->bytes = bytes;
    res->memcpy_bytes = 2 * memcpy_bytes;
    res->reps = reps;
    res->calls_per_sample = calls;
    res->team = team;
    res->op_median = median(op_s, reps, &res->op_best);
    res->memcpy_median = median(mc, reps, &res->memcpy_best);
    res->read_median = median(rd, reps, &res->read_best);
    res->copy_median = median(cp, reps, &res->copy_best);
    res->portable_median = median(po, reps, &res->portable_best);
done:
    free(source);
    free(copy);
    free(samples);
    moeperm_golden_case_free(&c);
    return status;
}

static double gbps(int64_t bytes, double seconds)
{
    return seconds > 0 ? (double)bytes / seconds * 1e-9 : 0.0;
}

/* "bf16", or "bf16/float32" for tokens and probs of two dtypes. */
static const char *row_dtypes(const row *rw, char *buf, size_t len)
{
    if (!has_probs(rw->op) || rw->probs_dtype == rw->dtype)
        return moeperm_dtype_name(rw->dtype);
    snprintf(buf, len, "%s/%s", moeperm_dtype_name(rw->dtype), moeperm_dtype_name(rw->probs_dtype));
    return buf;
}

static void print_result(const result *r, FILE *text, FILE *json, bool first)
{
    double op_med = gbps(r->bytes, r->op_median), op_best = gbps(r->bytes, r->op_best);
    double mc_med = gbps(r->memcpy_bytes, r->memcpy_median);
    double mc_best = gbps(r->memcpy_bytes, r->memcpy_best);
    double cp_med = gbps(r->memcpy_bytes, r->copy_median);
    double cp_best = gbps(r->memcpy_bytes, r->copy_best);
    double rd_med = gbps(r->memcpy_bytes / 2, r->read_median);
    double rd_best = gbps(r->memcpy_bytes / 2, r->read_best);
    double po_med = gbps(r->bytes, r->portable_median), po_best = gbps(r->bytes, r->portable_best);
    double ratio = mc_med > 0 ? op_med / mc_med : 0.0;
    double ratio_copy = cp_med > 0 ? op_med / cp_med : 0.0;
    double ratio_read = rd_med > 0 ? op_med / rd_med : 0.0;
    double ratio_portable = po_med > 0 ? op_med / po_med : 0.0;
    if (json) {
        fprintf(json,
                "%s{\"op\": \"%s\", \"dtype\": \"%s\", ", first ? "" : ", ",
                moeperm_op_name(r->row.op), moeperm_dtype_name(r->row.dtype));
        if (has_probs(r->row.op))
            fprintf(json, "\"probs_dtype\": \"%s\", ", moeperm_dtype_name(r->row.probs_dtype));
        fprintf(json,
                "\"bytes\": %" PRId64 ", \"seconds_median\": %.9g, \"seconds_best\": %.9g, "
                "\"gbps_median\": %.4f, \"gbps_best\": %.4f, \"memcpy_bytes\": %" PRId64
                ", \"memcpy_gbps_median\": %.4f, \"memcpy_gbps_best\": %.4f, "
                "\"ratio_memcpy\": %.4f, \"copy_gbps_median\": %.4f, \"copy_gbps_best\": %.4f, "
                "\"ratio_copy\": %.4f, \"read_gbps_median\": %.4f, \"read_gbps_best\": %.4f, "
                "\"ratio_read\": %.4f, \"portable_seconds_median\": %.9g, "
                "\"portable_seconds_best\": %.9g, \"portable_gbps_median\": %.4f, "
                "\"portable_gbps_best\": %.4f, \"ratio_portable\": %.4f, "
                "\"calls_per_sample\": %d}",
                r->bytes, r->op_median, r->op_best, op_med, op_best, r->memcpy_bytes, mc_med,
                mc_best, ratio, cp_med, cp_best, ratio_copy, rd_med, rd_best, ratio_read,
                r->portable_median, r->portable_best, po_med, po_best, ratio_portable,
                r->calls_per_sample);
    }
    char dtypes[64];
    fprintf(text,
            "%-22s %-16s %7.1f %7.2f / %6.2f %7.2f / %6.2f %6.3f %7.2f %6.3f %7.2f %6.3f "
            "%8.2f %6.2f\n",
            moeperm_op_name(r->row.op), row_dtypes(&r->row, dtypes, sizeof dtypes),
            (double)r->bytes / (1 << 20), op_med, op_best, mc_med, mc_best, ratio, cp_med,
            ratio_copy, rd_med, ratio_read, po_med, ratio_portable);
}

/* The JSON document, kept in memory until every row is measured, then
 * written at once (stdout, or path through a temporary). */
static int write_json(const char *path, const char *text, size_t size)
{
    char err[1024];
    if (strcmp(path, "-") == 0) {
        if (fwrite(text, 1, size, stdout) != size || fflush(stdout) != 0) {
            fprintf(stderr, "moeperm bench: writing the JSON to standard output failed\n");
            return EXIT_BACKEND;
        }
        return EXIT_OK;
    }
    if (moeperm_golden_write_file_atomic(path, text, size, err, sizeof err) != 0) {
        fprintf(stderr, "moeperm bench: cannot write the JSON: %s\n", err);
        return EXIT_BACKEND;
    }
    return EXIT_OK;
}

int cmd_bench(int argc, char **argv)
{
    enum {
        O_TOKENS = 1,
        O_TOPK,
        O_HIDDEN,
        O_DTYPE,
        O_PROBS_DTYPE,
        O_VALUES,
        O_THREADS,
        O_REPS,
        O_JSON,
        O_OP,
        O_HELP
    };
    static const struct option options[] = {
        {"op", required_argument, NULL, O_OP},
        {"tokens", required_argument, NULL, O_TOKENS},
        {"topk", required_argument, NULL, O_TOPK},
        {"top-k", required_argument, NULL, O_TOPK},
        {"hidden", required_argument, NULL, O_HIDDEN},
        {"dtype", required_argument, NULL, O_DTYPE},
        {"probs-dtype", required_argument, NULL, O_PROBS_DTYPE},
        {"values", required_argument, NULL, O_VALUES},
        {"threads", required_argument, NULL, O_THREADS},
        {"reps", required_argument, NULL, O_REPS},
        {"json", required_argument, NULL, O_JSON},
        {"help", no_argument, NULL, O_HELP},
        {NULL, 0, NULL, 0},
    };
    static const moeperm_op all_ops[] = {MOEPERM_OP_PERMUTE_GRAD, MOEPERM_OP_PERMUTE,
                                         MOEPERM_OP_UNPERMUTE, MOEPERM_OP_UNPERMUTE_GRAD};
    static const moeperm_dtype all_dtypes[] = {MOEPERM_BF16, MOEPERM_FLOAT16, MOEPERM_FLOAT};
    shape s = {4096, 8, 4096};
    int64_t threads = 0, reps = 10;
    moeperm_op ops[4] = {MOEPERM_OP_PERMUTE_GRAD};
    size_t op_count = 1;
    moeperm_dtype dtype = MOEPERM_BF16, probs_dtype = MOEPERM_BF16;
    bool all_dtypes_asked = true, probs_given = false;
    moeperm_golden_values values = MOEPERM_GOLDEN_VALUES_NORMAL;
    const char *json_path = NULL;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        bool ok = true;
        switch (c) {
        case O_OP:
            if (strcmp(optarg, "all") == 0) {
                memcpy(ops, all_ops, sizeof ops);
                op_count = 4;
            } else if ((ops[0] = moeperm_golden_op_parse(optarg)) != 0) {
                op_count = 1;
            } else {
                ok = false;
                fprintf(stderr, "moeperm bench: --op is \"%s\", expected MoeTokenPermuteGrad, "
                                "MoeTokenPermute, MoeTokenUnpermute, MoeTokenUnpermuteGrad or "
                                "all\n", optarg);
            }
            break;
        case O_TOKENS:
            ok = cli_int64("bench", "--tokens", optarg, 1, INT32_MAX, &s.tokens);
            break;
        case O_TOPK:
            ok = cli_int64("bench", "--top-k", optarg, 1, MOEPERM_MAX_TOP_K, &s.top_k);
            break;
        case O_HIDDEN:
            ok = cli_int64("bench", "--hidden", optarg, 1, INT32_MAX, &s.hidden);
            break;
        case O_DTYPE:
        case O_PROBS_DTYPE: {
            moeperm_dtype d;
            const char *flag = c == O_DTYPE ? "--dtype" : "--probs-dtype";
            if (c == O_DTYPE && strcmp(optarg, "all") == 0) {
                all_dtypes_asked = true;
            } else if (moeperm_golden_dtype_parse(optarg, &d) &&
                       (d == MOEPERM_FLOAT || d == MOEPERM_FLOAT16 || d == MOEPERM_BF16)) {
                if (c == O_DTYPE) {
                    all_dtypes_asked = false;
                    dtype = d;
                } else {
                    probs_given = true;
                    probs_dtype = d;
                }
            } else {
                ok = false;
                fprintf(stderr, "moeperm bench: %s is \"%s\", expected float32 (fp32), "
                                "float16 (fp16), bf16 (bfloat16)%s\n", flag, optarg,
                        c == O_DTYPE ? " or all" : "");
            }
            break;
        }
        case O_VALUES:
            if (!moeperm_golden_values_parse(optarg, &values)) {
                ok = false;
                fprintf(stderr, "moeperm bench: --values is \"%s\", expected one of %s\n",
                        optarg, moeperm_golden_values_names());
            }
            break;
        case O_THREADS:
            ok = cli_int64("bench", "--threads", optarg, 0, 4096, &threads);
            break;
        case O_REPS:
            ok = cli_int64("bench", "--reps", optarg, 1, 100000, &reps);
            break;
        case O_JSON:
            json_path = optarg;
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
        fprintf(stderr, "moeperm bench: unexpected argument \"%s\"\n", argv[optind]);
        usage(stderr);
        return EXIT_BAD_INPUT;
    }
    if (s.tokens * s.top_k > INT32_MAX) {
        fprintf(stderr, "moeperm bench: --tokens * --top-k = %" PRId64 " exceeds 2^31 - 1\n",
                s.tokens * s.top_k);
        return EXIT_BAD_INPUT;
    }
    int64_t grad_bytes;
    if (__builtin_mul_overflow(s.tokens * s.top_k, s.hidden, &grad_bytes) ||
        __builtin_mul_overflow(grad_bytes, (int64_t)4, &grad_bytes) ||
        grad_bytes > INT64_MAX / 4) {
        fprintf(stderr,
                "moeperm bench: --tokens %" PRId64 " * --top-k %" PRId64 " * --hidden %" PRId64
                " elements are too large to address\n",
                s.tokens, s.top_k, s.hidden);
        return EXIT_BAD_INPUT;
    }
    if (json_path && strcmp(json_path, "-") != 0 &&
        !cli_output_path("bench", "--json", json_path, NULL, 0, NULL, 0))
        return EXIT_BAD_INPUT;

    /* The rows: each operator in each dtype (probs in the tokens' dtype
     * unless --probs-dtype says otherwise), and with --dtype all, for the
     * operators with probs, bf16 tokens with float32 probs as well: a
     * model's router usually keeps its probs in float32. */
    row rows[4 * 4];
    size_t row_count = 0;
    for (size_t o = 0; o < op_count; o++) {
        for (size_t d = 0; d < (all_dtypes_asked ? 3 : 1); d++) {
            moeperm_dtype t = all_dtypes_asked ? all_dtypes[d] : dtype;
            rows[row_count++] = (row){ops[o], t, probs_given ? probs_dtype : t};
        }
        if (all_dtypes_asked && !probs_given && has_probs(ops[o]))
            rows[row_count++] = (row){ops[o], MOEPERM_BF16, MOEPERM_FLOAT};
    }

#ifdef _OPENMP
    if (threads > 0)
        omp_set_num_threads((int)threads);
#endif
    int team = team_size((int)threads);
    bool json_stdout = json_path && strcmp(json_path, "-") == 0;
    FILE *text = json_stdout ? stderr : stdout;
    char *doc = NULL;
    size_t doc_size = 0;
    FILE *json = json_path ? open_memstream(&doc, &doc_size) : NULL;
    if (json_path && !json) {
        fprintf(stderr, "moeperm bench: out of memory for the JSON\n");
        return EXIT_BACKEND;
    }
    const char *isa = moeperm_isa_name(moeperm_isa_in_use());
    if (json)
        fprintf(json,
                "{\"tool\": \"moeperm bench\", \"version\": \"%s\", \"isa\": \"%s\", "
                "\"threads\": %d, \"tokens\": %" PRId64 ", \"top_k\": %" PRId64
                ", \"hidden_size\": %" PRId64 ", \"values\": \"%s\", \"reps\": %" PRId64
                ", \"results\": [",
                moeperm_version(), isa, team, s.tokens, s.top_k, s.hidden,
                moeperm_golden_values_name(values), reps);
    fprintf(text,
            "moeperm bench: T=%" PRId64 " K=%" PRId64 " H=%" PRId64 ", %s values, %d thread%s, "
            "%s, %" PRId64 " reps (median / best)\n"
            "%-22s %-16s %7s %16s %16s %6s %7s %6s %7s %6s %8s %6s\n",
            s.tokens, s.top_k, s.hidden, moeperm_golden_values_name(values), team,
            team == 1 ? "" : "s", isa, reps, "operator", "dtype", "MiB", "operator GB/s",
            "memcpy GB/s", "ratio", "copy", "ratio", "read", "ratio", "portable", "speed-up");
    fflush(text);
    int status = EXIT_OK;
    for (size_t i = 0; i < row_count && status == EXIT_OK; i++) {
        result r;
        status = bench_case(&s, rows[i], values, team, (int)reps, &r);
        if (status == EXIT_OK) {
            print_result(&r, text, json, i == 0);
            fflush(text);
        }
    }
    if (json) {
        fprintf(json, "]}\n");
        fclose(json);
        if (status == EXIT_OK)
            status = write_json(json_path, doc, doc_size);
        free(doc);
    }
    return status;
}
