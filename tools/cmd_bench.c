/*
 * cmd_bench.c - `moeperm bench`: times the operator in-process against the
 * memory bandwidth of the same process, so that "how fast" reads as a
 * fraction of what the machine can move (docs/performance.md).
 *
 * For each dtype it times, repetition by repetition and interleaved so that
 * a noisy neighbour hits all of them alike:
 * - the operator through the public two-phase API (validation and planning
 *   included), with the bytes it must move: the R*H grad elements read, the
 *   T*H output elements written and the T*K indices read;
 * - three yardsticks over MEMCPY_BYTES (MEMCPY_SMALL_BYTES for small
 *   shapes), split over the threads the kernel takes for the shape:
 *   memcpy, one call per thread, counted as bytes read plus written (for
 *   large calls glibc streams the writes past the caches: its fastest
 *   copy); the same copy in COPY_CALL_BYTES calls, which glibc makes with
 *   ordinary stores (what a copy below its non-temporal threshold gets);
 *   and a read alone, eight pages at a time (the operator reads top_k bytes
 *   for each one it writes, so this is its ceiling);
 * - the kernel alone on one thread (the same path, no validation, no
 *   thread team): the single-threaded loop that small shapes must not lose
 *   to, so that thread start-up and planning never dominate; and for small
 *   shapes the portable C loop on one thread too.
 * It reports medians (and the best sample of the operator and the copies),
 * the ratios of the operator's median to the others', and whether the
 * default path gave the portable loop's bits (up to LOOP_MAX_BYTES of grad;
 * past it the loop is skipped).
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include <moeperm/moeperm.h>

#include "cli.h"
#include "commands.h"
#include "internal.h"
#include "kernel.h"

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
/* The one-thread loop and the bit check run up to this much grad. */
#define LOOP_MAX_BYTES (INT64_C(1) << 30)
/* The portable loop is timed up to this much grad. */
#define PORTABLE_MAX_BYTES (INT64_C(64) << 20)

/* Keeps the read baseline's sums alive. */
static volatile uint64_t read_sink;

static void usage(FILE *to)
{
    fputs("usage: moeperm bench [--tokens T] [--topk K] [--hidden H] [--dtype D]\n"
          "                     [--threads N] [--reps N] [--json]\n"
          "                     [--path auto|portable|avx2|avx512]\n"
          "  defaults: --tokens 4096 --topk 8 --hidden 4096 --dtype all --reps 10,\n"
          "            --threads 0 (the OpenMP default)\n"
          "  dtypes: float32 (fp32), float16 (fp16), bf16, all\n"
          "  --path times one kernel path (a path this CPU lacks runs the portable one);\n"
          "  MOEPERM_FORCE_PORTABLE=1 makes auto the portable path\n",
          to);
}

static uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

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

typedef struct shape {
    int64_t tokens, top_k, hidden;
} shape;

typedef struct result {
    moeperm_dtype dtype;
    int64_t bytes, memcpy_bytes;
    int reps, calls_per_sample, kernel_threads;
    double op_median, op_best, memcpy_median, memcpy_best, loop_median, loop_best;
    double read_median, read_best, copy_median, copy_best, portable_median, portable_best;
    bool bits_match, with_loop;
} result;

/* Both phases of the public API, as a caller runs them. */
static bool run_operator(moeperm_tensor *grad, moeperm_tensor *indices, int64_t top_k,
                         moeperm_tensor *out)
{
    uint64_t workspace = 0;
    moeperm_executor *plan = NULL;
    if (moeperm_token_permute_grad_get_workspace_size(grad, indices, top_k, false, out,
                                                      &workspace, &plan) != MOEPERM_SUCCESS)
        return false;
    return moeperm_token_permute_grad(NULL, workspace, plan, NULL) == MOEPERM_SUCCESS;
}

static void fill_grad(moeperm_dtype dtype, void *data, int64_t count)
{
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
    for (int64_t block = 0; block < (count + 4095) / 4096; block++) {
        uint64_t state = (uint64_t)block;
        int64_t end = (block + 1) * 4096 < count ? (block + 1) * 4096 : count;
        for (int64_t i = block * 4096; i < end; i++) {
            uint32_t r = (uint32_t)next_random(&state);
            /* ordinary values of both signs around 1 */
            if (dtype == MOEPERM_FLOAT)
                ((uint32_t *)data)[i] = (r & 0x807fffffu) | 0x3f000000u;
            else if (dtype == MOEPERM_FLOAT16)
                ((uint16_t *)data)[i] = (uint16_t)((r & 0x83ffu) | 0x3800u);
            else
                ((uint16_t *)data)[i] = (uint16_t)((r & 0x807fu) | 0x3f00u);
        }
    }
}

static int bench_dtype(const shape *s, moeperm_dtype dtype, int threads, int reps, result *res)
{
    int64_t size = (int64_t)moeperm_dtype_size(dtype);
    int64_t rows = s->tokens * s->top_k, count = rows;
    int64_t grad_bytes = rows * s->hidden * size, out_bytes = s->tokens * s->hidden * size;
    int64_t memcpy_bytes = grad_bytes >= MEMCPY_SMALL_BYTES ? MEMCPY_BYTES : MEMCPY_SMALL_BYTES;
    int team = team_size(threads);
    int status = EXIT_OK;

    char *grad = malloc((size_t)grad_bytes + 1);
    int32_t *indices = malloc((size_t)count * sizeof *indices + 1);
    int32_t *experts = malloc((size_t)count * sizeof *experts + 1);
    char *out = malloc((size_t)out_bytes + 1);
    /* Past LOOP_MAX_BYTES the one-thread loop would take seconds, and its
     * output buffer would push the largest runs past the memory they fit in. */
    bool with_loop = grad_bytes <= LOOP_MAX_BYTES;
    char *reference = with_loop ? malloc((size_t)out_bytes + 1) : NULL;
    /* memcpy's destination: out itself when it is big enough (the operator
     * rewrites it anyway), so that the largest runs need no extra buffer. */
    bool own_source = grad_bytes < memcpy_bytes, own_copy = out_bytes < memcpy_bytes;
    char *source = own_source ? malloc((size_t)memcpy_bytes + 1) : grad;
    char *copy = own_copy ? malloc((size_t)memcpy_bytes + 1) : out;
    double *op = calloc((size_t)reps, sizeof *op), *mc = calloc((size_t)reps, sizeof *mc);
    double *loop = calloc((size_t)reps, sizeof *loop), *rd = calloc((size_t)reps, sizeof *rd);
    double *portable = calloc((size_t)reps, sizeof *portable);
    double *cp = calloc((size_t)reps, sizeof *cp);
    moeperm_tensor *g = NULL, *ix = NULL, *o = NULL;
    if (!grad || !indices || !experts || !out || (with_loop && !reference) || !source || !copy ||
        !op ||
        !mc || !loop || !rd || !portable || !cp) {
        fprintf(stderr, "moeperm bench: out of memory for T=%" PRId64 " K=%" PRId64
                        " H=%" PRId64 " %s (%" PRId64 " MiB of grad)\n",
                s->tokens, s->top_k, s->hidden, moeperm_dtype_name(dtype), grad_bytes >> 20);
        status = EXIT_BAD_INPUT;
        goto done;
    }

    /* A realistic permutation: the forward's routing over 64 experts. */
    uint64_t state = 42;
    for (int64_t i = 0; i < count; i++)
        experts[i] = (int32_t)(next_random(&state) % 64);
    if (count > 0 &&
        moeperm_route_sorted_indices(experts, (size_t)count, 64, indices) != MOEPERM_SUCCESS) {
        fprintf(stderr, "moeperm bench: routing failed: %s\n", moeperm_last_error());
        status = EXIT_BACKEND;
        goto done;
    }
    fill_grad(dtype, grad, rows * s->hidden);
    memset(out, 0, (size_t)out_bytes);
    if (with_loop)
        memset(reference, 0, (size_t)out_bytes);
    /* distinct pages: a hypervisor may merge pages of equal content, and
     * reading merged pages measures its cache, not the memory */
    if (own_source)
        fill_grad(MOEPERM_FLOAT, source, memcpy_bytes / 4);
    memset(copy, 0, (size_t)memcpy_bytes);

    int64_t grad_dims[2] = {rows, s->hidden}, index_dims[1] = {count},
            out_dims[2] = {s->tokens, s->hidden};
    g = moeperm_tensor_create(grad_dims, 2, dtype, NULL, 0, grad);
    ix = moeperm_tensor_create(index_dims, 1, MOEPERM_INT32, NULL, 0, indices);
    o = moeperm_tensor_create(out_dims, 2, dtype, NULL, 0, out);
    if (!g || !ix || !o || !run_operator(g, ix, s->top_k, o)) {
        fprintf(stderr, "moeperm bench: the operator failed: %s\n", moeperm_last_error());
        status = EXIT_BACKEND;
        goto done;
    }

    /* The portable loop's bits, on its own copy of the plan, for the check. */
    struct moeperm_executor loop_plan = {.grad = *g, .indices = *ix, .out = *o, .top_k = s->top_k};
    res->kernel_threads = moeperm_kernel_threads(&loop_plan, threads);
    res->with_loop = with_loop;
    res->bits_match = true;
    if (with_loop) {
        loop_plan.out.data = reference;
        moeperm_kernel_run_path(&loop_plan, 1, MOEPERM_PATH_PORTABLE);
        res->bits_match = memcmp(out, reference, (size_t)out_bytes) == 0;
    }

    /* Calls per sample, from one timed call. */
    double t0 = cli_now();
    run_operator(g, ix, s->top_k, o);
    double once = cli_now() - t0;
    int calls = once >= MIN_SAMPLE_SECONDS ? 1 : (int)(MIN_SAMPLE_SECONDS / (once + 1e-9)) + 1;
    /* The one-thread loop is slow on big shapes; a few samples suffice. */
    int loop_reps = !with_loop ? 0 : grad_bytes >= (INT64_C(64) << 20) && reps > 3 ? 3 : reps;
    /* The portable loop, a plain C loop on one thread, only for small shapes
     * (it is the yardstick there; on large ones it takes seconds). */
    int portable_reps = grad_bytes < PORTABLE_MAX_BYTES ? reps : 0;

    /* memcpy gets the threads the kernel takes for this shape */
    team = res->kernel_threads;
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
        /* The operator and the loop take turns going first after the copy,
         * which leaves the caches cold.  A shape that repeats calls in a
         * sample (one that takes under MIN_SAMPLE_SECONDS) is about
         * latency, so each of its samples starts warm, after one untimed
         * call; a large shape's samples start cold, like memcpy's. */
        bool warm = calls > 1;
        for (int turn = 0; turn < 3; turn++) {
            int which = (turn + r) % 3;
            if (which == 0) {
                if (warm)
                    run_operator(g, ix, s->top_k, o);
                t0 = cli_now();
                for (int c = 0; c < calls; c++)
                    run_operator(g, ix, s->top_k, o);
                op[r] = (cli_now() - t0) / calls;
            } else if (which == 1 && r < loop_reps) {
                if (warm)
                    moeperm_kernel_run_path(&loop_plan, 1, MOEPERM_PATH_AUTO);
                t0 = cli_now();
                for (int c = 0; c < calls; c++)
                    moeperm_kernel_run_path(&loop_plan, 1, MOEPERM_PATH_AUTO);
                loop[r] = (cli_now() - t0) / calls;
            } else if (which == 2 && r < portable_reps) {
                if (warm)
                    moeperm_kernel_run_path(&loop_plan, 1, MOEPERM_PATH_PORTABLE);
                t0 = cli_now();
                for (int c = 0; c < calls; c++)
                    moeperm_kernel_run_path(&loop_plan, 1, MOEPERM_PATH_PORTABLE);
                portable[r] = (cli_now() - t0) / calls;
            }
        }
    }
    res->dtype = dtype;
    res->bytes = grad_bytes + out_bytes + count * (int64_t)sizeof(int32_t);
    res->memcpy_bytes = 2 * memcpy_bytes;
    res->reps = reps;
    res->calls_per_sample = calls;
    res->op_median = median(op, reps, &res->op_best);
    res->memcpy_median = median(mc, reps, &res->memcpy_best);
    res->read_median = median(rd, reps, &res->read_best);
    res->copy_median = median(cp, reps, &res->copy_best);
    if (with_loop)
        res->loop_median = median(loop, loop_reps, &res->loop_best);
    if (portable_reps > 0)
        res->portable_median = median(portable, portable_reps, &res->portable_best);

done:
    moeperm_tensor_destroy(g);
    moeperm_tensor_destroy(ix);
    moeperm_tensor_destroy(o);
    free(grad);
    free(indices);
    free(experts);
    free(out);
    free(reference);
    if (own_source)
        free(source);
    if (own_copy)
        free(copy);
    free(op);
    free(mc);
    free(loop);
    free(rd);
    free(portable);
    free(cp);
    return status;
}

static double gbps(int64_t bytes, double seconds)
{
    return seconds > 0 ? (double)bytes / seconds * 1e-9 : 0.0;
}

static bool parse_dtype(const char *text, int *mask)
{
    if (!strcmp(text, "all"))
        *mask = 7;
    else if (!strcmp(text, "float32") || !strcmp(text, "fp32"))
        *mask = 1;
    else if (!strcmp(text, "float16") || !strcmp(text, "fp16"))
        *mask = 2;
    else if (!strcmp(text, "bf16") || !strcmp(text, "bfloat16"))
        *mask = 4;
    else
        return false;
    return true;
}

int cmd_bench(int argc, char **argv)
{
    enum { O_TOKENS = 1, O_TOPK, O_HIDDEN, O_DTYPE, O_THREADS, O_REPS, O_JSON, O_PATH, O_HELP };
    static const struct option options[] = {
        {"tokens", required_argument, NULL, O_TOKENS},
        {"topk", required_argument, NULL, O_TOPK},
        {"hidden", required_argument, NULL, O_HIDDEN},
        {"dtype", required_argument, NULL, O_DTYPE},
        {"threads", required_argument, NULL, O_THREADS},
        {"reps", required_argument, NULL, O_REPS},
        {"json", no_argument, NULL, O_JSON},
        {"path", required_argument, NULL, O_PATH},
        {"help", no_argument, NULL, O_HELP},
        {NULL, 0, NULL, 0},
    };
    shape s = {4096, 8, 4096};
    int64_t threads = 0, reps = 10;
    int mask = 7;
    bool json = false;
    moeperm_kernel_path forced = MOEPERM_PATH_AUTO;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        bool ok = true;
        switch (c) {
        case O_TOKENS:
            ok = cli_int64("bench", "--tokens", optarg, 1, INT32_MAX, &s.tokens);
            break;
        case O_TOPK:
            ok = cli_int64("bench", "--topk", optarg, 1, MOEPERM_MAX_TOP_K, &s.top_k);
            break;
        case O_HIDDEN:
            ok = cli_int64("bench", "--hidden", optarg, 1, INT32_MAX, &s.hidden);
            break;
        case O_DTYPE:
            if (!(ok = parse_dtype(optarg, &mask)))
                fprintf(stderr, "moeperm bench: --dtype is \"%s\", expected float32, float16, "
                                "bf16 or all\n", optarg);
            break;
        case O_THREADS:
            ok = cli_int64("bench", "--threads", optarg, 0, 4096, &threads);
            break;
        case O_REPS:
            ok = cli_int64("bench", "--reps", optarg, 1, 100000, &reps);
            break;
        case O_JSON:
            json = true;
            break;
        case O_PATH:
            if (!strcmp(optarg, "portable"))
                forced = MOEPERM_PATH_PORTABLE;
            else if (!strcmp(optarg, "avx2"))
                forced = MOEPERM_PATH_X86_AVX2;
            else if (!strcmp(optarg, "avx512"))
                forced = MOEPERM_PATH_X86_AVX512;
            else if (strcmp(optarg, "auto"))
                ok = false;
            if (!ok)
                fprintf(stderr, "moeperm bench: --path is \"%s\", expected auto, portable, "
                                "avx2 or avx512\n", optarg);
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
        fprintf(stderr, "moeperm bench: --tokens * --topk = %" PRId64 " exceeds 2^31 - 1\n",
                s.tokens * s.top_k);
        return EXIT_BAD_INPUT;
    }
    /* The grad of the widest dtype asked for, in bytes, and bench_dtype()'s
     * sums of it must stay far inside int64. */
    int64_t widest = (mask & 1) ? 4 : 2, grad_bytes;
    if (__builtin_mul_overflow(s.tokens * s.top_k, s.hidden, &grad_bytes) ||
        __builtin_mul_overflow(grad_bytes, widest, &grad_bytes) ||
        grad_bytes > INT64_MAX / 4) {
        fprintf(stderr,
                "moeperm bench: --tokens %" PRId64 " * --topk %" PRId64 " * --hidden %" PRId64
                " elements of %" PRId64 " bytes are too large to address\n",
                s.tokens, s.top_k, s.hidden, widest);
        return EXIT_BAD_INPUT;
    }
#ifdef _OPENMP
    if (threads > 0)
        omp_set_num_threads((int)threads);
#endif
    int team = team_size((int)threads);
    moeperm_kernel_choose_path(forced);
    /* the path that runs: one this CPU lacks gives way to the portable one */
    const char *path = moeperm_kernel_path_name(moeperm_kernel_resolve_path(forced));

    static const moeperm_dtype order[3] = {MOEPERM_BF16, MOEPERM_FLOAT16, MOEPERM_FLOAT};
    static const int bits[3] = {4, 2, 1};
    result results[3];
    int n = 0;
    for (int i = 0; i < 3; i++) {
        if (!(mask & bits[i]))
            continue;
        int status = bench_dtype(&s, order[i], (int)threads, (int)reps, &results[n]);
        if (status != EXIT_OK)
            return status;
        n++;
    }

    bool all_match = true;
    if (json) {
        printf("{\"tool\": \"moeperm bench\", \"version\": \"%s\", \"path\": \"%s\", "
               "\"threads\": %d, \"tokens\": %" PRId64
               ", \"topk\": %" PRId64 ", \"hidden\": %" PRId64 ", \"reps\": %" PRId64
               ", \"results\": [",
               moeperm_version(), path, team, s.tokens, s.top_k, s.hidden, reps);
    } else {
        printf("moeperm bench: T=%" PRId64 " K=%" PRId64 " H=%" PRId64 ", %d thread%s, path %s, "
               "%" PRId64 " reps (median / best)\n",
               s.tokens, s.top_k, s.hidden, team, team == 1 ? "" : "s", path, reps);
        printf("%-8s %7s %16s %16s %6s %16s %6s %9s %6s %8s %s\n", "dtype", "MiB",
               "operator GB/s", "memcpy GB/s", "ratio", "copy GB/s", "ratio", "read GB/s",
               "ratio", "1-thread", "bits");
    }
    for (int i = 0; i < n; i++) {
        const result *r = &results[i];
        double op_med = gbps(r->bytes, r->op_median), op_best = gbps(r->bytes, r->op_best);
        double mc_med = gbps(r->memcpy_bytes, r->memcpy_median);
        double mc_best = gbps(r->memcpy_bytes, r->memcpy_best);
        double cp_med = gbps(r->memcpy_bytes, r->copy_median);
        double cp_best = gbps(r->memcpy_bytes, r->copy_best);
        double rd_med = gbps(r->memcpy_bytes / 2, r->read_median);
        double rd_best = gbps(r->memcpy_bytes / 2, r->read_best);
        double ratio = mc_med > 0 ? op_med / mc_med : 0.0;
        double ratio_copy = cp_med > 0 ? op_med / cp_med : 0.0;
        double ratio_read = rd_med > 0 ? op_med / rd_med : 0.0;
        double speedup = r->op_median > 0 ? r->loop_median / r->op_median : 0.0;
        all_match = all_match && r->bits_match;
        if (json) {
            printf("%s{\"dtype\": \"%s\", \"bytes\": %" PRId64 ", \"seconds_median\": %.9g, "
                   "\"seconds_best\": %.9g, \"gbps_median\": %.4f, \"gbps_best\": %.4f, "
                   "\"memcpy_bytes\": %" PRId64 ", \"memcpy_gbps_median\": %.4f, "
                   "\"memcpy_gbps_best\": %.4f, \"ratio_memcpy\": %.4f, "
                   "\"copy_gbps_median\": %.4f, \"copy_gbps_best\": %.4f, "
                   "\"ratio_copy\": %.4f, "
                   "\"read_gbps_median\": %.4f, \"read_gbps_best\": %.4f, "
                   "\"ratio_read\": %.4f, "
                   "\"loop_seconds_median\": %.9g, \"speedup_vs_loop\": %.4f, "
                   "\"loop_checked\": %s, \"portable_seconds_median\": %.9g, "
                   "\"speedup_vs_portable_loop\": %.4f, "
                   "\"calls_per_sample\": %d, \"kernel_threads\": %d, "
                   "\"bits_match_portable\": %s}",
                   i ? ", " : "", moeperm_dtype_name(r->dtype), r->bytes, r->op_median,
                   r->op_best, op_med, op_best, r->memcpy_bytes, mc_med, mc_best, ratio, cp_med,
                   cp_best, ratio_copy, rd_med, rd_best, ratio_read,
                   r->loop_median, speedup, r->with_loop ? "true" : "false",
                   r->portable_median,
                   r->op_median > 0 ? r->portable_median / r->op_median : 0.0,
                   r->calls_per_sample, r->kernel_threads,
                   r->bits_match ? "true" : "false");
        } else {
            char versus[32] = "-";
            if (r->with_loop)
                snprintf(versus, sizeof versus, "%.2fx", speedup);
            printf("%-8s %7.1f %7.2f / %6.2f %7.2f / %6.2f %6.3f %7.2f / %6.2f %6.3f %9.2f "
                   "%6.3f %8s %s\n",
                   moeperm_dtype_name(r->dtype), (double)r->bytes / (1 << 20), op_med, op_best,
                   mc_med, mc_best, ratio, cp_med, cp_best, ratio_copy, rd_med, ratio_read,
                   versus, !r->with_loop ? "unchecked" : r->bits_match ? "same" : "DIFFER");
        }
    }
    if (json)
        printf("]}\n");
    if (!all_match)
        fprintf(stderr, "moeperm bench: the fast path's bits differ from the portable loop's\n");
    return all_match ? EXIT_OK : EXIT_MISMATCH;
}
