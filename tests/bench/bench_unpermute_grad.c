/*
 * bench_unpermute_grad - MoeTokenUnpermuteGrad against memcpy of the bytes
 * it moves, in one process, repetitions interleaved.
 *
 *   bench_unpermute_grad [--probs same|float32|float16|bf16] [--experts E]
 *                        [--values normal|uniform|subnormal]
 *                        [tokens_num top_k hidden_size reps [only]]
 *
 * (default 4096 8 4096 5), for every tokens dtype with probs of the same
 * dtype (--probs: of that dtype for every tokens dtype), and bf16 without
 * probs; `only` (bf16, float16, float32 or no-probs) runs one of them.
 * The inputs are gradient-like: normal values with mean 0 and deviation 1
 * (--values uniform: uniform in [-2, 2); --values subnormal: the permuted
 * tokens normal values times 2^-130, subnormal in float32 and bf16, which
 * x86 multiplies and adds through microcode assists), probs in (0, 1), and
 * a routing
 * of each token to top_k distinct experts of E = 64 (--experts 0: a
 * random permutation as sorted_indices, which scatters every row).  The
 * operator is counted as the bytes it must read and write:
 * permuted_tokens (R*H) read (with probs only), permuted_tokens_grad (R*H)
 * written, unpermuted_tokens_grad (N*H) read, and the indices, probs and
 * probs_grad; memcpy copies half that many bytes, split over the same
 * threads, and is counted as read plus written.  After two untimed rounds
 * it prints medians of `reps` and the ratio of the best times (on a shared
 * machine the median moves with the neighbours' load).
 * Not a test: its figures depend on the machine and its load.
 */
#include <math.h>
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

/* A value drawn as --values says: normal (the sum of four uniforms,
 * scaled to deviation 1: no subnormal, no overflow), uniform in [-2, 2),
 * subnormal (normal times 2^-130), or for probs uniform in (0, 1). */
enum values { NORMAL, UNIFORM, SUBNORMAL, PROBS };

static float draw(enum values kind)
{
    if (kind == SUBNORMAL)
        return draw(NORMAL) * 0x1p-130f;
    if (kind == NORMAL) {
        float sum = 0.0f;
        for (int i = 0; i < 4; i++)
            sum += (float)(next() >> 8) / 16777216.0f - 0.5f;
        return sum * sqrtf(3.0f);
    }
    float u = ((float)(next() >> 8) + 0.5f) / 16777216.0f;
    return kind == PROBS ? u : (u - 0.5f) * 4.0f;
}

static void fill(moeperm_dtype dtype, void *data, size_t n, enum values kind)
{
    for (size_t i = 0; i < n; i++) {
        float v = draw(kind);
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

/* sorted_indices of n_slots slots: each token's top_k slots routed to
 * distinct experts of `experts` drawn at random (then the rows of an
 * expert are consecutive and in token order), or with experts 0 a random
 * permutation. */
static int route(int32_t *indices, int64_t tokens_num, int64_t top_k, int64_t experts)
{
    int64_t n_slots = tokens_num * top_k;
    if (experts <= 0) {
        for (int64_t i = 0; i < n_slots; i++)
            indices[i] = (int32_t)i;
        for (int64_t i = n_slots - 1; i > 0; i--) {
            int64_t j = (int64_t)(next() % (uint32_t)(i + 1));
            int32_t t = indices[i];
            indices[i] = indices[j];
            indices[j] = t;
        }
        return 0;
    }
    if (experts < top_k) {
        fprintf(stderr, "--experts %lld: fewer experts than top_k\n", (long long)experts);
        return 1;
    }
    int32_t *ids = malloc((size_t)n_slots * sizeof *ids);
    if (!ids)
        return 1;
    for (int64_t n = 0; n < tokens_num; n++)
        for (int64_t k = 0; k < top_k; k++) {
            int32_t e;
            bool taken;
            do {
                e = (int32_t)(next() % (uint32_t)experts);
                taken = false;
                for (int64_t j = 0; j < k; j++)
                    taken |= ids[n * top_k + j] == e;
            } while (taken);
            ids[n * top_k + k] = e;
        }
    moeperm_status status =
        moeperm_route_sorted_indices(ids, (size_t)n_slots, (uint64_t)experts, indices);
    free(ids);
    if (status != MOEPERM_SUCCESS)
        fprintf(stderr, "%s\n", moeperm_last_error());
    return status != MOEPERM_SUCCESS;
}

static int usage(void)
{
    fprintf(stderr, "usage: bench_unpermute_grad [--probs same|float32|float16|bf16] "
                    "[--experts E] [--values normal|uniform|subnormal]\n"
                    "                            [tokens_num top_k hidden_size reps "
                    "[bf16|float16|float32|no-probs]]\n");
    return 2;
}

int main(int argc, char **argv)
{
    int64_t tokens_num = 4096, top_k = 8, hidden = 4096, experts = 64;
    int reps = 5, positional = 0;
    const char *only = NULL, *probs_name = "same";
    enum values values = NORMAL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--probs") && i + 1 < argc) {
            probs_name = argv[++i];
        } else if (!strcmp(argv[i], "--experts") && i + 1 < argc) {
            experts = atoll(argv[++i]);
        } else if (!strcmp(argv[i], "--values") && i + 1 < argc) {
            ++i;
            values = !strcmp(argv[i], "normal")      ? NORMAL
                     : !strcmp(argv[i], "uniform")   ? UNIFORM
                     : !strcmp(argv[i], "subnormal") ? SUBNORMAL
                                                     : PROBS;
            if (values == PROBS)
                return usage();
        } else if (argv[i][0] == '-' && argv[i][1] == '-') {
            return usage();
        } else {
            switch (positional++) {
            case 0:
                tokens_num = atoll(argv[i]);
                break;
            case 1:
                top_k = atoll(argv[i]);
                break;
            case 2:
                hidden = atoll(argv[i]);
                break;
            case 3:
                reps = atoi(argv[i]);
                break;
            case 4:
                only = argv[i];
                break;
            default:
                return usage();
            }
        }
    }
    bool same_probs = !strcmp(probs_name, "same");
    moeperm_dtype fixed_probs = !strcmp(probs_name, "float32")   ? MOEPERM_FLOAT
                                : !strcmp(probs_name, "float16") ? MOEPERM_FLOAT16
                                                                 : MOEPERM_BF16;
    if (!same_probs && strcmp(probs_name, "float32") && strcmp(probs_name, "float16") &&
        strcmp(probs_name, "bf16"))
        return usage();
    if (tokens_num < 1 || top_k < 1 || hidden < 1 || reps < 1)
        return usage();
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    int64_t slots = tokens_num * top_k, rows = slots;
    printf("N=%lld K=%lld H=%lld R=%lld threads=%d reps=%d probs=%s values=%s experts=%lld\n",
           (long long)tokens_num, (long long)top_k, (long long)hidden, (long long)rows, threads,
           reps, probs_name,
           values == NORMAL ? "normal" : values == UNIFORM ? "uniform" : "subnormal",
           (long long)experts);
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
        moeperm_dtype probs_dtype = same_probs ? dtype : fixed_probs;
        size_t psize = probs_dtype == MOEPERM_FLOAT ? 4 : 2;
        /* 64-byte aligned, as framework allocators give tensors */
        void *tokens = aligned(n_rows * hidden * (int64_t)size);
        void *grad = aligned(tokens_num * hidden * (int64_t)size);
        void *tokens_grad = aligned(n_rows * hidden * (int64_t)size);
        void *probs = malloc((size_t)n_slots * psize),
             *probs_grad = malloc((size_t)n_slots * psize);
        int32_t *indices = malloc((size_t)n_slots * sizeof *indices);
        if (!tokens || !grad || !tokens_grad || !probs || !probs_grad || !indices) {
            fprintf(stderr, "out of memory\n");
            return 1;
        }
        fill(dtype, tokens, (size_t)(n_rows * hidden), values);
        fill(dtype, grad, (size_t)(tokens_num * hidden), values == SUBNORMAL ? NORMAL : values);
        fill(probs_dtype, probs, (size_t)n_slots, PROBS);
        memset(tokens_grad, 0, (size_t)(n_rows * hidden) * size);
        if (route(indices, tokens_num, k, with_probs ? experts : 0))
            return 1;
        /* without probs permuted_tokens is not read */
        double bytes = (double)((with_probs ? 2 : 1) * n_rows + tokens_num) * (double)hidden *
                           (double)size +
                       (double)n_slots * (4.0 + (with_probs ? 2.0 * (double)psize : 0.0));
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
            with_probs ? moeperm_tensor_create(pdims, 2, probs_dtype, NULL, 0, probs) : NULL;
        moeperm_tensor *pg =
            with_probs ? moeperm_tensor_create(pdims, 2, probs_dtype, NULL, 0, probs_grad) : NULL;

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
        printf("%-8s probs %-8s %7.1f MiB  operator %6.2f GB/s (%7.2f ms)  memcpy %6.2f GB/s  "
               "ratio %.2f  (best %.2f)\n",
               dtype == MOEPERM_FLOAT  ? "float32"
               : dtype == MOEPERM_BF16 ? "bf16"
                                       : "float16",
               with_probs ? moeperm_dtype_name(probs_dtype) : "none",
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
