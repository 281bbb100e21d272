/*
 * bench_family - how fast MoeTokenPermute and MoeTokenUnpermute run beside
 * what bounds them, in one process and one run:
 *
 *   permute:   GB/s of the bytes it moves (num_out_tokens rows read and
 *              written, the ids read, sorted_indices_out written; the sort
 *              is inside the timed call) against memcpy of the same row
 *              bytes on the same number of threads;
 *   unpermute: GB/s against MoeTokenPermuteGrad on the same shape (both
 *              move tokens*(top_k + 1)*hidden_size elements).
 *
 * Both phases of each operator are timed, as a caller runs them.  Not a
 * test: meson builds it but never runs it.
 *
 * usage: bench_family [--tokens T] [--topk K] [--hidden H] [--reps R]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "bench_time.h"
#include "core/dispatch.h"
#include "core/internal.h"

static void *must_alloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "bench_family: out of memory for %zu bytes\n", bytes);
        exit(1);
    }
    memset(p, 0, bytes); /* fault the pages in before timing */
    return p;
}

static void check(moeperm_status status, const char *what)
{
    if (status != MOEPERM_SUCCESS) {
        fprintf(stderr, "bench_family: %s: %s\n", what, moeperm_last_error());
        exit(1);
    }
}

static void parallel_memcpy(char *dst, const char *src, int64_t bytes, int team)
{
    (void)team;
#ifdef _OPENMP
#pragma omp parallel num_threads(team)
#endif
    {
        int64_t id = 0, count = 1;
#ifdef _OPENMP
        id = omp_get_thread_num();
        count = omp_get_num_threads();
#endif
        int64_t lo = bytes * id / count, hi = bytes * (id + 1) / count;
        memcpy(dst + lo, src + lo, (size_t)(hi - lo));
    }
}

/* Expert ids of a skewed routing: each token's K distinct experts of 256,
 * the low ones chosen more often. */
static void route(int32_t *ids, int64_t tokens, int64_t top_k)
{
    uint64_t state = 12345;
    for (int64_t t = 0; t < tokens; t++)
        for (int64_t k = 0; k < top_k; k++) {
            state = state * 6364136223846793005u + 1442695040888963407u;
            uint32_t r = (uint32_t)(state >> 33);
            ids[t * top_k + k] = (int32_t)(((r % 256) * (r % 256)) / 256);
        }
}

static void bench_permute(int64_t tokens, int64_t top_k, int64_t hidden, moeperm_dtype dtype,
                          int reps)
{
    int64_t count = tokens * top_k, num_out = count;
    size_t es = moeperm_dtype_size(dtype);
    size_t row_bytes = (size_t)(num_out * hidden) * es;
    char *x = must_alloc((size_t)(tokens * hidden) * es);
    int32_t *ids = must_alloc((size_t)count * 4), *sorted = must_alloc((size_t)count * 4);
    char *y = must_alloc(row_bytes), *copy_src = must_alloc(row_bytes);
    for (size_t i = 0; i < (size_t)(tokens * hidden) * es; i++)
        x[i] = (char)(i * 131);
    route(ids, tokens, top_k);
    int64_t xd[2] = {tokens, hidden}, id_dims[2] = {tokens, top_k}, yd[2] = {num_out, hidden},
            sd[1] = {count};
    moeperm_tensor *tx = moeperm_tensor_create(xd, 2, dtype, NULL, 0, x);
    moeperm_tensor *ti = moeperm_tensor_create(id_dims, 2, MOEPERM_INT32, NULL, 0, ids);
    moeperm_tensor *ty = moeperm_tensor_create(yd, 2, dtype, NULL, 0, y);
    moeperm_tensor *ts = moeperm_tensor_create(sd, 1, MOEPERM_INT32, NULL, 0, sorted);
    int team = moeperm_threads_for_bytes(0, (double)(tokens + num_out) * (double)hidden *
                                                (double)es);
    double *op = malloc(sizeof(double) * (size_t)reps), *mc = malloc(sizeof(double) * (size_t)reps);
    for (int r = -1; r < reps; r++) {
        double t0 = bench_now();
        uint64_t ws;
        moeperm_executor *plan;
        check(moeperm_token_permute_get_workspace_size(tx, ti, 0, false, ty, ts, &ws, &plan),
              "permute plan");
        check(moeperm_token_permute(NULL, ws, plan, NULL), "permute run");
        double t1 = bench_now();
        parallel_memcpy(copy_src, y, (int64_t)row_bytes, team);
        double t2 = bench_now();
        if (r >= 0) {
            op[r] = t1 - t0;
            mc[r] = t2 - t1;
        }
    }
    double moved = 2.0 * (double)row_bytes + 8.0 * (double)count;
    double op_gbps = moved / bench_median(op, reps) / 1e9;
    double mc_gbps = 2.0 * (double)row_bytes / bench_median(mc, reps) / 1e9;
    printf("permute    %-8s T=%lld K=%lld H=%lld threads %d: %7.2f GB/s, memcpy %7.2f GB/s, "
           "ratio %.3f\n",
           moeperm_dtype_name(dtype), (long long)tokens, (long long)top_k, (long long)hidden,
           team, op_gbps, mc_gbps, op_gbps / mc_gbps);
    moeperm_tensor_destroy(tx);
    moeperm_tensor_destroy(ti);
    moeperm_tensor_destroy(ty);
    moeperm_tensor_destroy(ts);
    free(op);
    free(mc);
    free(x);
    free(ids);
    free(sorted);
    free(y);
    free(copy_src);
}

static void bench_unpermute(int64_t tokens, int64_t top_k, int64_t hidden, moeperm_dtype dtype,
                            moeperm_dtype probs_dtype, int reps)
{
    int64_t count = tokens * top_k;
    size_t es = moeperm_dtype_size(dtype), ps = moeperm_dtype_size(probs_dtype);
    char *x = must_alloc((size_t)(count * hidden) * es);
    char *p = must_alloc((size_t)count * ps);
    int32_t *ids = must_alloc((size_t)count * 4), *sorted = must_alloc((size_t)count * 4);
    char *y = must_alloc((size_t)(tokens * hidden) * es);
    /* ordinary finite values: 0x3c.. / 0x3f.. patterns in every dtype */
    for (size_t i = 0; i < (size_t)(count * hidden) * es; i++)
        x[i] = (char)(i % 2 ? 0x3c : (char)(i * 7));
    for (size_t i = 0; i < (size_t)count * ps; i++)
        p[i] = (char)(i % 2 ? 0x3c : 0x11);
    route(ids, tokens, top_k);
    check(moeperm_route_sorted_indices(ids, (size_t)count, 256, sorted), "route");
    int64_t xd[2] = {count, hidden}, sd[1] = {count}, pd[2] = {tokens, top_k},
            yd[2] = {tokens, hidden};
    moeperm_tensor *tx = moeperm_tensor_create(xd, 2, dtype, NULL, 0, x);
    moeperm_tensor *ts = moeperm_tensor_create(sd, 1, MOEPERM_INT32, NULL, 0, sorted);
    moeperm_tensor *tp = moeperm_tensor_create(pd, 2, probs_dtype, NULL, 0, p);
    moeperm_tensor *ty = moeperm_tensor_create(yd, 2, dtype, NULL, 0, y);
    double *op = malloc(sizeof(double) * (size_t)reps), *pg = malloc(sizeof(double) * (size_t)reps);
    for (int r = -1; r < reps; r++) {
        uint64_t ws;
        moeperm_executor *plan;
        double t0 = bench_now();
        check(moeperm_token_unpermute_get_workspace_size(tx, ts, tp, false, NULL, 0, ty, &ws,
                                                         &plan),
              "unpermute plan");
        check(moeperm_token_unpermute(NULL, ws, plan, NULL), "unpermute run");
        double t1 = bench_now();
        check(moeperm_token_permute_grad_get_workspace_size(tx, ts, top_k, false, ty, &ws, &plan),
              "permute grad plan");
        check(moeperm_token_permute_grad(NULL, ws, plan, NULL), "permute grad run");
        double t2 = bench_now();
        if (r >= 0) {
            op[r] = t1 - t0;
            pg[r] = t2 - t1;
        }
    }
    double moved = (double)tokens * (double)(top_k + 1) * (double)hidden * (double)es;
    double op_gbps = moved / bench_median(op, reps) / 1e9;
    double pg_gbps = moved / bench_median(pg, reps) / 1e9;
    printf("unpermute  %-8s probs %-8s T=%lld K=%lld H=%lld: %7.2f GB/s, permute grad %7.2f "
           "GB/s, ratio %.3f\n",
           moeperm_dtype_name(dtype), moeperm_dtype_name(probs_dtype), (long long)tokens,
           (long long)top_k, (long long)hidden, op_gbps, pg_gbps, op_gbps / pg_gbps);
    moeperm_tensor_destroy(tx);
    moeperm_tensor_destroy(ts);
    moeperm_tensor_destroy(tp);
    moeperm_tensor_destroy(ty);
    free(op);
    free(pg);
    free(x);
    free(p);
    free(ids);
    free(sorted);
    free(y);
}

int main(int argc, char **argv)
{
    int64_t tokens = 4096, top_k = 8, hidden[2] = {4096, 7168};
    int hidden_count = 2, reps = 7;
    const char *only = "all";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--tokens"))
            tokens = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--topk"))
            top_k = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--hidden"))
            hidden[0] = atoll(argv[i + 1]), hidden_count = 1;
        else if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--op"))
            only = argv[i + 1];
        else {
            fprintf(stderr, "usage: bench_family [--tokens T] [--topk K] [--hidden H] "
                            "[--reps R] [--op permute|unpermute|all]\n");
            return 2;
        }
    }
    const moeperm_dtype tokens_dtypes[4] = {MOEPERM_BF16, MOEPERM_FLOAT16, MOEPERM_FLOAT,
                                            MOEPERM_INT8};
    for (int h = 0; h < hidden_count; h++) {
        if (strcmp(only, "unpermute"))
            for (int d = 0; d < 4; d++)
                bench_permute(tokens, top_k, hidden[h], tokens_dtypes[d], reps);
        if (strcmp(only, "permute"))
            for (int d = 0; d < 3; d++)
                for (int q = 0; q < 3; q++)
                    bench_unpermute(tokens, top_k, hidden[h], tokens_dtypes[d],
                                    tokens_dtypes[q], reps);
    }
    return 0;
}
