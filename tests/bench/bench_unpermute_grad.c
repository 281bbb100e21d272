/*
 * bench_unpermute_grad - MoeTokenUnpermuteGrad against memcpy of the bytes
 * it moves, in one process, repetitions interleaved.
 *
 *   bench_unpermute_grad [tokens_num top_k hidden_size reps [only]]
 *
 * (default 4096 8 4096 5), for every tokens dtype with probs of the same
 * dtype, and bf16 without probs; `only` (bf16, float16, float32 or
 * no-probs) runs one of them.  The operator is counted as the bytes it
 * must read and write: permuted_tokens (R*H) read (with probs only),
 * permuted_tokens_grad (R*H) written, unpermuted_tokens_grad (N*H) read,
 * and the indices, probs and probs_grad; memcpy copies half that many
 * bytes, split over the same threads, and is counted as read plus written.
 * After two untimed rounds it prints medians of `reps` and the ratio of
 * the best times (on a shared machine the median moves with the
 * neighbours' load).
 * Not a test: its figures depend on the machine and its load.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include <moeperm/moeperm.h>

#include "bench_time.h"

static uint64_t state = 12345;
static uint32_t next(void)
{
    state = state * 6364136223846793005u + 1442695040888963407u;
    return (uint32_t)(state >> 32);
}

/* Finite values of moderate size: sums neither overflow nor turn NaN. */
static void fill(moeperm_dtype dtype, void *data, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t r = next();
        float v = ((float)(r & 0xffff) / 65536.0f - 0.5f) * 4.0f;
        if (dtype == MOEPERM_FLOAT)
            ((float *)data)[i] = v;
        else if (dtype == MOEPERM_BF16)
            ((uint16_t *)data)[i] = moeperm_float_to_bf16(v);
        else
            ((uint16_t *)data)[i] = moeperm_float_to_fp16(v);
    }
}

static void *aligned(int64_t bytes)
{
    return aligned_alloc(64, (size_t)(bytes + 63) / 64 * 64);
}

static void copy(char *dst, const char *src, size_t bytes, int threads)
{
#ifdef _OPENMP
#pragma omp parallel num_threads(threads)
    {
        int id = omp_get_thread_num(), team = omp_get_num_threads();
        size_t share = bytes / (size_t)team, lo = share * (size_t)id;
        size_t len = id == team - 1 ? bytes - lo : share;
        memcpy(dst + lo, src + lo, len);
    }
#else
    (void)threads;
    memcpy(dst, src, bytes);
#endif
}

int main(int argc, char **argv)
{
    int64_t tokens_num = argc > 1 ? atoll(argv[1]) : 4096;
    int64_t top_k = argc > 2 ? atoll(argv[2]) : 8;
    int64_t hidden = argc > 3 ? atoll(argv[3]) : 4096;
    int reps = argc > 4 ? atoi(argv[4]) : 5;
    const char *only = argc > 5 ? argv[5] : NULL;
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    int64_t slots = tokens_num * top_k, rows = slots;
    printf("N=%lld K=%lld H=%lld R=%lld threads=%d reps=%d\n", (long long)tokens_num,
           (long long)top_k, (long long)hidden, (long long)rows, threads, reps);
    struct {
        moeperm_dtype dtype;
        bool probs;
    } runs[4] = {{MOEPERM_BF16, true},
                 {MOEPERM_FLOAT16, true},
                 {MOEPERM_FLOAT, true},
                 {MOEPERM_BF16, false}};
    for (int r = 0; r < 4; r++) {
        moeperm_dtype dtype = runs[r].dtype;
        bool with_probs = runs[r].probs;
        const char *name = !with_probs                 ? "no-probs"
                           : dtype == MOEPERM_FLOAT   ? "float32"
                           : dtype == MOEPERM_BF16    ? "bf16"
                                                       : "float16";
        if (only && strcmp(only, name) != 0)
            continue;
        int64_t k = with_probs ? top_k : 1, n_slots = tokens_num * k, n_rows = n_slots;
        size_t size = dtype == MOEPERM_FLOAT ? 4 : 2;
        /* 64-byte aligned, as framework allocators give tensors */
        void *tokens = aligned(n_rows * hidden * (int64_t)size);
        void *grad = aligned(tokens_num * hidden * (int64_t)size);
        void *tokens_grad = aligned(n_rows * hidden * (int64_t)size);
        void *probs = malloc((size_t)n_slots * size), *probs_grad = malloc((size_t)n_slots * size);
        int32_t *indices = malloc((size_t)n_slots * sizeof *indices);
        if (!tokens || !grad || !tokens_grad || !probs || !probs_grad || !indices) {
            fprintf(stderr, "out of memory\n");
            return 1;
        }
        fill(dtype, tokens, (size_t)(n_rows * hidden));
        fill(dtype, grad, (size_t)(tokens_num * hidden));
        fill(dtype, probs, (size_t)n_slots);
        memset(tokens_grad, 0, (size_t)(n_rows * hidden) * size);
        for (int64_t i = 0; i < n_slots; i++)
            indices[i] = (int32_t)i;
        for (int64_t i = n_slots - 1; i > 0; i--) {
            int64_t j = (int64_t)(next() % (uint32_t)(i + 1));
            int32_t t = indices[i];
            indices[i] = indices[j];
            indices[j] = t;
        }
        /* without probs permuted_tokens is not read */
        double bytes = (double)((with_probs ? 2 : 1) * n_rows + tokens_num) * (double)hidden *
                           (double)size +
                       (double)n_slots * (4.0 + (with_probs ? 2.0 * (double)size : 0.0));
        size_t half = (size_t)(bytes / 2) / 64 * 64;
        char *src = aligned((int64_t)half), *dst = aligned((int64_t)half);
        if (!src || !dst) {
            fprintf(stderr, "out of memory\n");
            return 1;
        }
        /* random bits: pages of equal content may be merged by a
         * hypervisor, and reading merged pages measures its cache */
        for (size_t i = 0; i + 4 <= half; i += 4) {
            uint32_t r = next();
            memcpy(src + i, &r, 4);
        }
        memcpy(dst, src, half);

        int64_t tdims[2] = {n_rows, hidden}, gdims[2] = {tokens_num, hidden}, idims[1] = {n_slots},
                pdims[2] = {tokens_num, k};
        moeperm_tensor *t = moeperm_tensor_create(tdims, 2, dtype, NULL, 0, tokens);
        moeperm_tensor *g = moeperm_tensor_create(gdims, 2, dtype, NULL, 0, grad);
        moeperm_tensor *ix = moeperm_tensor_create(idims, 1, MOEPERM_INT32, NULL, 0, indices);
        moeperm_tensor *tg = moeperm_tensor_create(tdims, 2, dtype, NULL, 0, tokens_grad);
        moeperm_tensor *p =
            with_probs ? moeperm_tensor_create(pdims, 2, dtype, NULL, 0, probs) : NULL;
        moeperm_tensor *pg =
            with_probs ? moeperm_tensor_create(pdims, 2, dtype, NULL, 0, probs_grad) : NULL;

        double *op = malloc(sizeof(double) * (size_t)reps),
               *mc = malloc(sizeof(double) * (size_t)reps);
        for (int rep = -2; rep < reps; rep++) {
            double t0 = bench_now();
            uint64_t workspace;
            moeperm_executor *plan;
            if (moeperm_token_unpermute_grad_get_workspace_size(t, g, ix, p, false, NULL, 0, tg, pg,
                                                                &workspace, &plan) ||
                moeperm_token_unpermute_grad(NULL, workspace, plan, NULL)) {
                fprintf(stderr, "%s\n", moeperm_last_error());
                return 1;
            }
            double t1 = bench_now();
            copy(dst, src, half, threads);
            double t2 = bench_now();
            if (rep >= 0) {
                op[rep] = t1 - t0;
                mc[rep] = t2 - t1;
            }
        }
        double op_s = bench_median(op, reps), mc_s = bench_median(mc, reps);
        double op_best = op[0], mc_best = mc[0]; /* sorted by bench_median() */
        printf("%-8s %-8s %7.1f MiB  operator %6.2f GB/s (%7.2f ms)  memcpy %6.2f GB/s  "
               "ratio %.2f  (best %.2f)\n",
               with_probs ? "probs" : "no-probs",
               dtype == MOEPERM_FLOAT  ? "float32"
               : dtype == MOEPERM_BF16 ? "bf16"
                                       : "float16",
               bytes / 1048576.0, bytes / op_s * 1e-9, op_s * 1e3, bytes / mc_s * 1e-9, mc_s / op_s,
               mc_best / op_best);
        moeperm_tensor_destroy(t);
        moeperm_tensor_destroy(g);
        moeperm_tensor_destroy(ix);
        moeperm_tensor_destroy(tg);
        moeperm_tensor_destroy(p);
        moeperm_tensor_destroy(pg);
        free(op);
        free(mc);
        free(src);
        free(dst);
        free(tokens);
        free(grad);
        free(tokens_grad);
        free(probs);
        free(probs_grad);
        free(indices);
    }
    return 0;
}
