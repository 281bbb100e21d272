/*
 * check_my_kernel.c - how a kernel test in C (a gtest harness, a simulator
 * driver) uses libmoeperm-golden: load every golden case below a
 * directory, run your own kernel on each case's inputs, and judge its
 * output in-process, bit for bit, with the same report `moeperm check`
 * prints.  Only the two public headers are used.
 *
 * The "kernel" here is a stand-in: a plain loop of MoeTokenPermuteGrad
 * (sum each token's top_k rows in fp32, in slot order, then round once).
 * With --accumulate-in-output-dtype it makes a classic porting mistake
 * instead, rounding the running sum to bf16/fp16 after every add, to show
 * what a mismatch report and its diagnosis look like.  Replace my_kernel()
 * with a call into yours.
 *
 *   cc check_my_kernel.c $(pkg-config --cflags --libs moeperm-golden) -o check_my_kernel
 *   ./check_my_kernel golden/          # exit 0: every case the same
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <moeperm/golden.h>
#include <moeperm/moeperm.h>

static float load(moeperm_dtype dtype, const void *data, size_t i)
{
    if (dtype == MOEPERM_FLOAT)
        return ((const float *)data)[i];
    uint16_t bits = ((const uint16_t *)data)[i];
    return dtype == MOEPERM_BF16 ? moeperm_bf16_to_float(bits) : moeperm_fp16_to_float(bits);
}

static void store(moeperm_dtype dtype, void *data, size_t i, float value)
{
    if (dtype == MOEPERM_FLOAT)
        ((float *)data)[i] = value;
    else if (dtype == MOEPERM_BF16)
        ((uint16_t *)data)[i] = moeperm_float_to_bf16(value);
    else
        ((uint16_t *)data)[i] = moeperm_float_to_fp16(value);
}

/* The kernel under test: out[t, h] = sum over k of grad[idx[t*K + k], h]. */
static void my_kernel(const moeperm_golden_tensor *grad, const moeperm_golden_tensor *indices, int64_t top_k,
                      bool round_each_add, void *out)
{
    if (top_k == -1) /* the device's tiling takes num_topk -1 as 1 */
        top_k = 1;
    /* floor(L / K) tokens: entries past them are never read */
    int64_t rows = grad->shape[0], hidden = grad->shape[1];
    int64_t tokens = indices->shape[0] / top_k;
    const int32_t *idx = indices->data;
    for (int64_t t = 0; t < tokens; t++)
        for (int64_t h = 0; h < hidden; h++) {
            float acc = 0.0f;
            for (int64_t k = 0; k < top_k; k++) {
                int32_t r = idx[t * top_k + k];
                if (r >= rows)
                    continue; /* a dropped slot */
                float x = load(grad->dtype, grad->data, (size_t)(r * hidden + h));
                acc = k == 0 ? x : acc + x;
                if (round_each_add) { /* the bug: the sum kept in the output dtype */
                    store(grad->dtype, out, (size_t)(t * hidden + h), acc);
                    acc = load(grad->dtype, out, (size_t)(t * hidden + h));
                }
            }
            store(grad->dtype, out, (size_t)(t * hidden + h), acc);
        }
}

int main(int argc, char **argv)
{
    bool buggy = argc == 3 && strcmp(argv[1], "--accumulate-in-output-dtype") == 0;
    if (argc != 2 + buggy) {
        fprintf(stderr, "usage: %s [--accumulate-in-output-dtype] GOLDEN_DIR\n", argv[0]);
        return 2;
    }
    char err[1024];
    char **dirs;
    size_t count;
    if (moeperm_golden_find_cases(argv[argc - 1], &dirs, &count, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    int status = 0;
    size_t judged = 0;
    for (size_t i = 0; i < count; i++) {
        moeperm_golden_case c;
        if (moeperm_golden_case_read(dirs[i], MOEPERM_GOLDEN_LOAD_ALL, &c, err, sizeof err) != 0) {
            fprintf(stderr, "%s\n", err);
            status = 2;
            continue;
        }
        if (c.op != MOEPERM_OP_PERMUTE_GRAD) { /* this kernel implements one operator */
            moeperm_golden_case_free(&c);
            continue;
        }
        const moeperm_golden_tensor *expected = moeperm_golden_case_tensor_const(&c, "input_grad");
        void *out = calloc(1, expected->bytes ? expected->bytes : 1);
        if (!out) {
            fprintf(stderr, "out of memory\n");
            return 3;
        }
        my_kernel(moeperm_golden_case_tensor_const(&c, "permuted_output_grad"),
                  moeperm_golden_case_tensor_const(&c, "sorted_indices"), c.attrs.top_k, buggy, out);
        /* The judgement: bits, statistics, and a diagnosis of what differs. */
        moeperm_golden_judge_options options = {.diagnose = true};
        moeperm_golden_judgement *j;
        if (moeperm_golden_judge(&c, &out, &options, &j, err, sizeof err) != 0) {
            fprintf(stderr, "%s\n", err);
            return 3;
        }
        bool same = moeperm_golden_judgement_verdict(j) == MOEPERM_GOLDEN_VERDICT_SAME;
        printf("%-8s %s\n", same ? "pass" : "MISMATCH", dirs[i]);
        moeperm_golden_judgement_report(stdout, j, "    ");
        if (!same && status == 0)
            status = 1;
        judged++;
        moeperm_golden_judgement_free(j);
        free(out);
        moeperm_golden_case_free(&c);
    }
    moeperm_golden_free_paths(dirs, count);
    printf("%zu MoeTokenPermuteGrad cases judged\n", judged);
    return judged == 0 && status == 0 ? 2 : status;
}
