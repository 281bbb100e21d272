/*
 * bench_aclnn - what the host runtime (libmoeperm-aclnn) adds to an
 * operator: the second phase through aclnnXxx() against libmoeperm's two
 * phases called directly, on the same device buffers, in one process.
 *
 * Each repetition times both, in alternating order (A B, then B A, ...) so
 * that a drift of the machine's speed falls on both, and takes their
 * ratio; the report gives the median ratio, its quartiles, the lowest and
 * highest, and the median times.  aclnnXxx() runs libmoeperm's first phase (the index
 * checks) and its run, so the direct call times the same two; aclnn's own
 * first phase (metadata only) is outside the timing, as libmoeperm's
 * tensor creation is.  Not a test: meson builds it but never runs it.
 *
 * usage: bench_aclnn [--op all|permute|unpermute|permute-grad|unpermute-grad]
 *                    [--tokens T] [--topk K] [--hidden H] [--reps R]
 *                    [--only direct|aclnn] [--cpu]
 *        (default: all, T 4096, K 8, H 4096, R 21; bf16, probs bf16)
 *
 * --only runs one side R times and prints nothing, for a tool that times
 * whole processes in pairs (one process per side, the same set-up in both).
 * --cpu times the process's CPU seconds (all threads) instead of the wall
 * clock: on a shared machine a repetition that waits for a core then costs
 * nothing extra.  At T=K=H=1 the difference of the two medians is what the
 * host runtime adds per call.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <moeperm/moeperm.h>

#include "acl/acl.h"
#include "aclnnop/aclnn_moe_token_permute.h"
#include "aclnnop/aclnn_moe_token_permute_grad.h"
#include "aclnnop/aclnn_moe_token_unpermute.h"
#include "aclnnop/aclnn_moe_token_unpermute_grad.h"
#include "bench_time.h"

static bool cpu_clock;

static double clock_now(void)
{
    if (!cpu_clock)
        return bench_now();
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void must(int status, const char *what)
{
    if (status != 0) {
        const char *acl = aclGetRecentErrMsg();
        fprintf(stderr, "bench_aclnn: %s failed with %d: %s\n", what, status,
                acl ? acl : moeperm_last_error());
        exit(1);
    }
}

/* One tensor in device memory, seen both ways: an aclTensor for the host
 * runtime and a moeperm_tensor over the same bytes for libmoeperm. */
typedef struct both {
    void *memory;
    aclTensor *acl;
    moeperm_tensor *direct;
} both;

static uint64_t rng = 88172645463325252u;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static both make(moeperm_dtype dtype, int64_t rows, int64_t cols)
{
    both b;
    int64_t dims[2] = {rows, cols};
    uint64_t ndim = cols > 0 ? 2 : 1;
    size_t count = (size_t)rows * (size_t)(cols > 0 ? cols : 1), size = moeperm_dtype_size(dtype);
    must(aclrtMalloc(&b.memory, count * size, ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMalloc");
    if (size == 2)
        for (size_t i = 0; i < count; i++) /* finite bf16 around 1 */
            ((uint16_t *)b.memory)[i] = (uint16_t)(0x3f00 | (next() & 0x80ff));
    else
        memset(b.memory, 0, count * size); /* indices: filled by the caller */
    b.acl = aclCreateTensor(dims, ndim, (aclDataType)dtype, NULL, 0, ACL_FORMAT_ND, dims, ndim,
                            b.memory);
    b.direct = moeperm_tensor_create(dims, ndim, dtype, NULL, 0, b.memory);
    if (b.acl == NULL || b.direct == NULL)
        must(-1, "making a tensor");
    return b;
}

static void release(both *b)
{
    aclDestroyTensor(b->acl);
    moeperm_tensor_destroy(b->direct);
    aclrtFree(b->memory);
}

/* A permutation of 0..n-1. */
static void permutation(int32_t *p, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        p[i] = (int32_t)i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(next() % (uint64_t)(i + 1));
        int32_t v = p[i];
        p[i] = p[j];
        p[j] = v;
    }
}

typedef struct problem {
    const char *name;
    both t[6];
    int count;
    int64_t top_k;
} problem;

/* The operator through libmoeperm directly: both phases. */
static void run_direct(const char *op, problem *p)
{
    uint64_t ws;
    moeperm_executor *e = NULL;
    both *t = p->t;
    moeperm_status st;
    if (strcmp(op, "permute") == 0)
        st = moeperm_token_permute_get_workspace_size(t[0].direct, t[1].direct, 0, false,
                                                      t[2].direct, t[3].direct, &ws, &e);
    else if (strcmp(op, "unpermute") == 0)
        st = moeperm_token_unpermute_get_workspace_size(t[0].direct, t[1].direct, t[2].direct,
                                                        false, NULL, 0, t[3].direct, &ws, &e);
    else if (strcmp(op, "permute-grad") == 0)
        st = moeperm_token_permute_grad_get_workspace_size(t[0].direct, t[1].direct, p->top_k,
                                                           false, t[2].direct, &ws, &e);
    else
        st = moeperm_token_unpermute_grad_get_workspace_size(
            t[0].direct, t[1].direct, t[2].direct, t[3].direct, false, NULL, 0, t[4].direct,
            t[5].direct, &ws, &e);
    must(st, "libmoeperm's first phase");
    must(moeperm_executor_run(NULL, 0, e, NULL), "libmoeperm's run");
}

/* The host runtime's first phase (not timed). */
static aclOpExecutor *plan_aclnn(const char *op, problem *p)
{
    uint64_t ws;
    aclOpExecutor *e = NULL;
    both *t = p->t;
    aclnnStatus st;
    if (strcmp(op, "permute") == 0)
        st = aclnnMoeTokenPermuteGetWorkspaceSize(t[0].acl, t[1].acl, 0, false, t[2].acl,
                                                  t[3].acl, &ws, &e);
    else if (strcmp(op, "unpermute") == 0)
        st = aclnnMoeTokenUnpermuteGetWorkspaceSize(t[0].acl, t[1].acl, t[2].acl, false, NULL,
                                                    t[3].acl, &ws, &e);
    else if (strcmp(op, "permute-grad") == 0)
        st = aclnnMoeTokenPermuteGradGetWorkspaceSize(t[0].acl, t[1].acl, p->top_k, false,
                                                      t[2].acl, &ws, &e);
    else
        st = aclnnMoeTokenUnpermuteGradGetWorkspaceSize(t[0].acl, t[1].acl, t[2].acl, t[3].acl,
                                                        false, NULL, t[4].acl, t[5].acl, &ws,
                                                        &e);
    must(st, "the aclnn first phase");
    return e;
}

/* The host runtime's second phase: what is timed. */
static void run_aclnn(const char *op, aclOpExecutor *e, aclrtStream stream)
{
    aclnnStatus st;
    if (strcmp(op, "permute") == 0)
        st = aclnnMoeTokenPermute(NULL, 0, e, stream);
    else if (strcmp(op, "unpermute") == 0)
        st = aclnnMoeTokenUnpermute(NULL, 0, e, stream);
    else if (strcmp(op, "permute-grad") == 0)
        st = aclnnMoeTokenPermuteGrad(NULL, 0, e, stream);
    else
        st = aclnnMoeTokenUnpermuteGrad(NULL, 0, e, stream);
    must(st, "the aclnn second phase");
    must(aclrtSynchronizeStream(stream), "aclrtSynchronizeStream");
}

static problem make_problem(const char *op, int64_t n, int64_t k, int64_t h)
{
    problem p = {op, {{0}}, 0, k};
    int64_t slots = n * k;
    if (strcmp(op, "permute") == 0) {
        p.t[0] = make(MOEPERM_BF16, n, h);
        p.t[1] = make(MOEPERM_INT32, n, k);
        for (int64_t i = 0; i < slots; i++)
            ((int32_t *)p.t[1].memory)[i] = (int32_t)(next() % 64); /* 64 experts */
        p.t[2] = make(MOEPERM_BF16, slots, h);
        p.t[3] = make(MOEPERM_INT32, slots, 0);
        p.count = 4;
    } else if (strcmp(op, "unpermute") == 0) {
        p.t[0] = make(MOEPERM_BF16, slots, h);
        p.t[1] = make(MOEPERM_INT32, slots, 0);
        permutation(p.t[1].memory, slots);
        p.t[2] = make(MOEPERM_BF16, n, k);
        p.t[3] = make(MOEPERM_BF16, n, h);
        p.count = 4;
    } else if (strcmp(op, "permute-grad") == 0) {
        p.t[0] = make(MOEPERM_BF16, slots, h);
        p.t[1] = make(MOEPERM_INT32, slots, 0);
        permutation(p.t[1].memory, slots);
        p.t[2] = make(MOEPERM_BF16, n, h);
        p.count = 3;
    } else {
        p.t[0] = make(MOEPERM_BF16, slots, h);
        p.t[1] = make(MOEPERM_BF16, n, h);
        p.t[2] = make(MOEPERM_INT32, slots, 0);
        permutation(p.t[2].memory, slots);
        p.t[3] = make(MOEPERM_BF16, n, k);
        p.t[4] = make(MOEPERM_BF16, slots, h);
        p.t[5] = make(MOEPERM_BF16, n, k);
        p.count = 6;
    }
    return p;
}

int main(int argc, char **argv)
{
    const char *which = "all", *only = NULL;
    int64_t n = 4096, k = 8, h = 4096;
    int reps = 21;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--cpu") == 0) {
            cpu_clock = true;
            continue;
        }
        if (i + 1 == argc) {
            fprintf(stderr, "bench_aclnn: %s needs a value\n", argv[i]);
            return 2;
        }
        const char *option = argv[i], *value = argv[++i];
        if (strcmp(option, "--op") == 0)
            which = value;
        else if (strcmp(option, "--tokens") == 0)
            n = atoll(value);
        else if (strcmp(option, "--topk") == 0)
            k = atoll(value);
        else if (strcmp(option, "--hidden") == 0)
            h = atoll(value);
        else if (strcmp(option, "--reps") == 0)
            reps = atoi(value);
        else if (strcmp(option, "--only") == 0)
            only = value;
        else {
            fprintf(stderr, "bench_aclnn: unknown option %s\n", option);
            return 2;
        }
    }
    if (only != NULL && strcmp(only, "direct") != 0 && strcmp(only, "aclnn") != 0) {
        fprintf(stderr, "bench_aclnn: --only takes direct or aclnn\n");
        return 2;
    }
    if (reps < 1 || reps > 1000 || n < 1 || k < 1 || h < 1) {
        fprintf(stderr, "bench_aclnn: sizes and --reps must be positive (reps <= 1000)\n");
        return 2;
    }
    must(aclInit(NULL), "aclInit");
    must(aclrtSetDevice(0), "aclrtSetDevice");
    aclrtStream stream;
    must(aclrtCreateStream(&stream), "aclrtCreateStream");

    static const char *const ops[] = {"permute", "unpermute", "permute-grad", "unpermute-grad"};
    if (only == NULL) {
        printf("T=%lld K=%lld H=%lld bf16, %d repetitions, %s; ratio = aclnn second phase / "
               "libmoeperm's two phases\n",
               (long long)n, (long long)k, (long long)h, reps,
               cpu_clock ? "CPU seconds" : "wall clock");
        printf("%-16s %10s %10s %8s %8s %8s %8s %8s\n", "operator", "direct ms", "aclnn ms",
               "ratio", "q1", "q3", "lowest", "highest");
    }
    double *ta = malloc((size_t)reps * sizeof *ta), *tb = malloc((size_t)reps * sizeof *tb);
    double *ratio = malloc((size_t)reps * sizeof *ratio);
    if (!ta || !tb || !ratio)
        must(-1, "allocating the timings");
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
        if (strcmp(which, "all") != 0 && strcmp(which, ops[o]) != 0)
            continue;
        problem p = make_problem(ops[o], n, k, h);
        if (only != NULL) {
            for (int r = 0; r < reps; r++)
                if (strcmp(only, "direct") == 0)
                    run_direct(ops[o], &p);
                else
                    run_aclnn(ops[o], plan_aclnn(ops[o], &p), stream);
            for (int i = 0; i < p.count; i++)
                release(&p.t[i]);
            continue;
        }
        /* One untimed run of each warms the pages and the caches. */
        run_direct(ops[o], &p);
        run_aclnn(ops[o], plan_aclnn(ops[o], &p), stream);
        for (int r = 0; r < reps; r++) {
            aclOpExecutor *e = plan_aclnn(ops[o], &p);
            for (int turn = 0; turn < 2; turn++) {
                bool direct = (turn == 0) == (r % 2 == 0);
                double start = clock_now();
                if (direct)
                    run_direct(ops[o], &p);
                else
                    run_aclnn(ops[o], e, stream);
                *(direct ? &ta[r] : &tb[r]) = clock_now() - start;
            }
            ratio[r] = tb[r] / ta[r];
        }
        double mid = bench_median(ratio, reps); /* sorts ratio */
        printf("%-16s %10.4f %10.4f %8.4f %8.4f %8.4f %8.4f %8.4f\n", ops[o],
               1e3 * bench_median(ta, reps), 1e3 * bench_median(tb, reps), mid,
               ratio[reps / 4], ratio[(3 * reps) / 4], ratio[0], ratio[reps - 1]);
        fflush(stdout);
        for (int i = 0; i < p.count; i++)
            release(&p.t[i]);
    }
    free(ta);
    free(tb);
    free(ratio);
    aclrtDestroyStream(stream);
    aclrtResetDevice(0);
    aclFinalize();
    return 0;
}
