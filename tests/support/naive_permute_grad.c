/*
 * naive_permute_grad.c - the tests' own model of MoeTokenPermuteGrad (see
 * naive_permute_grad.h), the plain triple loop of docs/arithmetic.md with
 * naive.c's conversions.
 */
#include "naive_permute_grad.h"

#include "naive.h"

void naive_permute_grad(moeperm_dtype dtype, const void *grad, int64_t rows, int64_t hidden,
                        const int32_t *indices, int64_t tokens, int64_t top_k, void *out)
{
    for (int64_t t = 0; t < tokens; t++) {
        for (int64_t h = 0; h < hidden; h++) {
            /* volatile: one binary32 rounding per addition, whatever the
             * compiler would like to keep in registers. */
            volatile float acc = 0.0f;
            for (int64_t k = 0; k < top_k; k++) {
                int32_t r = indices[t * top_k + k];
                if (r >= rows)
                    continue;
                float x = naive_load(dtype, grad, (int64_t)r * hidden + h);
                if (k == 0)
                    acc = x;
                else
                    acc = acc + x;
            }
            int64_t o = t * hidden + h;
            if (dtype == MOEPERM_FLOAT)
                ((float *)out)[o] = acc;
            else if (dtype == MOEPERM_BF16)
                ((uint16_t *)out)[o] = naive_float_to_bf16(acc);
            else
                ((uint16_t *)out)[o] = naive_float_to_fp16(acc);
        }
    }
}

