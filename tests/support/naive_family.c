/* naive_family.c - see naive_family.h. */
#include "naive_family.h"

#include <string.h>

#include "naive.h"

void naive_stable_rank(const int64_t *ids, int64_t n, int32_t *rank)
{
    for (int64_t i = 0; i < n; i++) {
        int64_t position = 0;
        for (int64_t j = 0; j < n; j++)
            if (ids[j] < ids[i] || (ids[j] == ids[i] && j < i))
                position++;
        rank[i] = (int32_t)position;
    }
}

int64_t naive_num_out(int64_t num_out_tokens, int64_t count)
{
    int64_t rows = num_out_tokens;
    if (rows <= 0)
        rows = count + rows;
    if (rows < 0)
        return 0;
    if (rows > count)
        return count;
    return rows;
}

void naive_permute(size_t size, const void *tokens, int64_t tokens_num, int64_t hidden,
                   const int64_t *ids, int64_t top_k, int64_t num_out, void *out,
                   int32_t *sorted)
{
    naive_stable_rank(ids, tokens_num * top_k, sorted);
    size_t row_bytes = (size_t)hidden * size;
    for (int64_t i = 0; i < tokens_num * top_k; i++) {
        if (sorted[i] >= num_out)
            continue;
        memcpy((char *)out + (size_t)sorted[i] * row_bytes,
               (const char *)tokens + (size_t)(i / top_k) * row_bytes, row_bytes);
    }
}

static void store(moeperm_dtype dtype, void *base, int64_t i, float value)
{
    if (dtype == MOEPERM_FLOAT)
        ((float *)base)[i] = value;
    else if (dtype == MOEPERM_BF16)
        ((uint16_t *)base)[i] = naive_float_to_bf16(value);
    else
        ((uint16_t *)base)[i] = naive_float_to_fp16(value);
}

void naive_unpermute(moeperm_dtype dtype, const void *permuted_tokens, int64_t rows,
                     int64_t hidden, const int32_t *sorted_indices, int64_t tokens_num,
                     int64_t top_k, moeperm_dtype probs_dtype, const void *probs, void *out)
{
    for (int64_t n = 0; n < tokens_num; n++) {
        for (int64_t h = 0; h < hidden; h++) {
            /* volatile: one binary32 rounding per multiply and per add */
            volatile float acc = 0.0f;
            for (int64_t k = 0; k < top_k; k++) {
                int32_t row = sorted_indices[n * top_k + k];
                if (row >= rows)
                    continue; /* a dropped slot */
                float x = naive_load(dtype, permuted_tokens, (int64_t)row * hidden + h);
                volatile float term = x;
                if (probs) {
                    float p = naive_load(probs_dtype, probs, n * top_k + k);
                    if (p == 0.0f)
                        continue; /* +0 and -0 both leave the slot out */
                    term = x * p;
                }
                if (k == 0)
                    acc = term;
                else
                    acc = acc + term;
            }
            store(dtype, out, n * hidden + h, acc);
        }
    }
}
