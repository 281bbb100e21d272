/*
 * naive_unpermute_grad.c - see naive_unpermute_grad.h.  Written from the
 * vendor's kernel and host code and the AscendC documentation, not from
 * the library: the library folds with a generic pairwise tree, this file
 * replays the instructions one by one.
 */
#include "naive_unpermute_grad.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "naive.h"

/* ---- tiling: the host code's types are kept (uint64 UB size, uint32
 * type lengths), so a quantity the vendor computes unsigned is unsigned
 * here too. */

static int64_t up(int64_t a, int64_t b)
{
    return b == 0 ? 0 : (a + b - 1) / b * b;
}

static int64_t down(int64_t a, int64_t b)
{
    return b == 0 ? 0 : a / b * b;
}

void naive_ug_tiling(int64_t tokens_num, int64_t top_k, int64_t hidden_size, int64_t num_out_tokens,
                     moeperm_dtype tokens_dtype, int probs_dtype, int64_t ub_bytes, int64_t cores,
                     naive_tiling *t)
{
    const uint32_t buffers = 2;
    uint64_t ub = (uint64_t)ub_bytes;
    uint32_t in_len = tokens_dtype == MOEPERM_FLOAT ? 4 : 2;
    memset(t, 0, sizeof *t);
    t->tokens_num = tokens_num;
    t->top_k = probs_dtype < 0 ? 1 : top_k;
    t->hidden_size = hidden_size;
    t->num_out_tokens = num_out_tokens;
    t->token_num_tail_core = tokens_num / cores;
    t->former_core_num = tokens_num % cores;
    t->token_num_each_core =
        t->former_core_num == 0 ? t->token_num_tail_core : t->token_num_tail_core + 1;
    t->tail_core_num = cores - t->former_core_num;
    t->row_id_map_each_core = t->token_num_each_core * t->top_k;
    t->row_id_map_tail_core = t->token_num_tail_core * t->top_k;
    t->total_ub_size = ub_bytes;

    if (probs_dtype < 0) {
        const uint32_t idx_len = 4;
        uint32_t in_block = 32 / in_len, idx_block = 32 / idx_len;
        int64_t align = up(hidden_size, (int64_t)in_block);
        int64_t reserve = (int64_t)(ub / (buffers * ((uint64_t)align * in_len + idx_len)));
        reserve = down(reserve, (int64_t)idx_block);
        if (reserve < (int64_t)idx_block)
            reserve = idx_block;
        int64_t tmp_max = (int64_t)((ub - (uint64_t)reserve * buffers * idx_len) /
                                    ((uint64_t)buffers * in_len * (uint64_t)reserve));
        if (tmp_max < align)
            align = down(tmp_max, (int64_t)in_block);
        int64_t loops = (hidden_size + align - 1) / align;
        t->hidden_size_align = align;
        t->hidden_size_loop_times = loops;
        t->hidden_size_tail = hidden_size - (loops - 1) * align;
        t->input_reserve_num = t->indices_reserve_num = t->indices_reserve_num_align = reserve;
        return;
    }

    uint32_t prob_len = probs_dtype == MOEPERM_FLOAT ? 4 : 2;
    uint32_t in_512 = 512 / in_len, prob_32 = 32 / prob_len, f32 = 4;
    int64_t align = up(hidden_size, (int64_t)in_512);
    int64_t reserve_max = t->token_num_each_core * top_k;
    int64_t reserve;
    if (top_k <= 256) {
        reserve = down(256, top_k);
        if (reserve_max < reserve)
            reserve = reserve_max;
    } else {
        reserve = top_k;
    }
    int64_t reserve_align = up(reserve, (int64_t)prob_32);
    uint64_t head = ub - (uint64_t)buffers * prob_len * (uint64_t)reserve_align * 2 -
                    (uint64_t)reserve_align * f32 * 3 - 256;
    int64_t rows_max =
        (int64_t)(head - ((uint64_t)buffers * in_len * 2 + 3 * f32) * (uint64_t)align) /
        (int64_t)((uint64_t)buffers * in_len * (uint64_t)align);
    int64_t input_reserve = 1, loops = 1, tail = hidden_size;
    if (rows_max < 1) {
        int64_t loop_max = (int64_t)(head / (3 * buffers * in_len + 3 * f32));
        loop_max = down(loop_max, (int64_t)in_512);
        loops = (hidden_size + loop_max - 1) / loop_max;
        tail = hidden_size - (loops - 1) * loop_max;
        align = loop_max;
    } else {
        int64_t limit = rows_max < top_k ? rows_max : top_k;
        input_reserve = limit;
        while (top_k % input_reserve != 0)
            input_reserve--;
    }
    t->hidden_size_align = align;
    t->hidden_size_loop_times = loops;
    t->hidden_size_tail = tail;
    t->input_reserve_num = input_reserve;
    t->indices_reserve_num = reserve;
    t->indices_reserve_num_align = reserve_align;
}

int64_t naive_ug_chunk(const naive_tiling *t)
{
    return t->hidden_size_loop_times == 1 ? t->hidden_size : t->hidden_size_align;
}

int64_t naive_ug_chunk_for(int64_t tokens_num, int64_t top_k, int64_t hidden, moeperm_dtype dtype,
                           moeperm_dtype probs_dtype, int64_t ub_bytes, int64_t cores)
{
    naive_tiling t;
    naive_ug_tiling(tokens_num, top_k, hidden, 0, dtype, (int)probs_dtype, ub_bytes, cores, &t);
    return naive_ug_chunk(&t);
}

/* ---- the reduction, instruction by instruction.  volatile keeps every
 * addition a separate binary32 rounding. */

static float add(float a, float b)
{
    volatile float sum = a + b;
    return sum;
}

/* Add(dst, src0, src1, count) with dst = src0 = buf, src1 = buf + from. */
static void vector_add(float *buf, int64_t from, int64_t count)
{
    for (int64_t i = 0; i < count; i++)
        buf[i] = add(buf[i], buf[from + i]);
}

static int64_t ceil_div(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

/* BinaryAddFunc(buf, len, threshold, offset). */
static void binary_add(float *buf, int64_t len, int64_t threshold, int64_t offset)
{
    int64_t total = len;
    int64_t half = up(ceil_div(total, 2), 8);
    while (total > threshold) {
        vector_add(buf, half, total - half);
        total = half;
        half = up(ceil_div(total, 2), 8);
    }
    vector_add(buf, offset, total - offset);
}

/* The documented tree of one 32-byte block. */
static float block8(const float *b)
{
    return add(add(add(b[0], b[1]), add(b[2], b[3])), add(add(b[4], b[5]), add(b[6], b[7])));
}

/* BlockReduceSum(buf, buf, repeat, 64, 1, 1, 8): each repeat reads 64
 * floats (8 blocks) and writes their 8 block sums next to the previous
 * repeat's. */
static void block_reduce_sum(float *buf, int64_t repeat)
{
    float out[512];
    for (int64_t r = 0; r < repeat; r++)
        for (int64_t b = 0; b < 8; b++)
            out[r * 8 + b] = block8(buf + r * 64 + b * 8);
    memcpy(buf, out, (size_t)repeat * 8 * sizeof *out);
}

/* WholeReduceSum(dst, buf, mask, 1, ...): one repeat of 64 lanes, the
 * first `mask` active, summed pairwise level by level; an inactive lane
 * adds nothing. */
static float whole_reduce_sum(const float *buf, int64_t mask)
{
    float lane[64];
    bool on[64];
    for (int l = 0; l < 64; l++) {
        on[l] = l < mask;
        lane[l] = on[l] ? buf[l] : 0.0f;
    }
    for (int width = 64; width > 1; width /= 2) {
        for (int j = 0; j < width / 2; j++) {
            int a = 2 * j, b = 2 * j + 1;
            if (on[a] && on[b])
                lane[j] = add(lane[a], lane[b]);
            else if (on[a])
                lane[j] = lane[a];
            else
                lane[j] = lane[b];
            on[j] = on[a] || on[b];
        }
    }
    return lane[0];
}

float naive_ug_reduce_sum_func(float *buf, int64_t len)
{
    if (len >= 4096) {
        binary_add(buf, len, 8192, 4096);
        block_reduce_sum(buf, 64);
        block_reduce_sum(buf, 8);
        block_reduce_sum(buf, 1);
        return whole_reduce_sum(buf, 8);
    }
    if (len >= 512) {
        binary_add(buf, len, 1024, 512);
        block_reduce_sum(buf, 8);
        block_reduce_sum(buf, 1);
        return whole_reduce_sum(buf, 8);
    }
    if (len >= 64) {
        binary_add(buf, len, 128, 64);
        block_reduce_sum(buf, 1);
        return whole_reduce_sum(buf, 8);
    }
    return whole_reduce_sum(buf, len);
}

/* ---- the operator */

static float load(moeperm_dtype dtype, const void *base, int64_t i)
{
    if (dtype == MOEPERM_FLOAT)
        return ((const float *)base)[i];
    uint16_t h = ((const uint16_t *)base)[i];
    return dtype == MOEPERM_BF16 ? naive_bf16_to_float(h) : naive_fp16_to_float(h);
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

static bool nan_bits(uint32_t b)
{
    return (b & 0x7fffffffu) > 0x7f800000u;
}

/* g * p with x86's NaN rule, g the first operand. */
static float times(float g, float p)
{
    uint32_t gb = naive_bits(g), pb = naive_bits(p);
    if (nan_bits(gb))
        return naive_float(gb | 0x00400000u);
    if (nan_bits(pb))
        return naive_float(pb | 0x00400000u);
    volatile float product = g * p;
    return product;
}

void naive_unpermute_grad(moeperm_dtype dtype, moeperm_dtype probs_dtype, const void *tokens,
                          int64_t rows, int64_t hidden, const void *grad, int64_t tokens_num,
                          const int32_t *indices, const void *probs, int64_t top_k, int64_t chunk,
                          void *tokens_grad, void *probs_grad)
{
    size_t size = naive_size(dtype);
    if (!probs) {
        for (int64_t n = 0; n < tokens_num; n++) {
            int32_t s = indices[n];
            if (s < rows)
                memcpy((char *)tokens_grad + (size_t)s * hidden * size,
                       (const char *)grad + (size_t)n * hidden * size, (size_t)hidden * size);
        }
        return;
    }
    float *products = malloc((size_t)(chunk > 0 ? chunk : 1) * sizeof *products);
    if (!products)
        abort();
    for (int64_t n = 0; n < tokens_num; n++) {
        for (int64_t k = 0; k < top_k; k++) {
            int64_t i = n * top_k + k;
            int32_t s = indices[i];
            float p = load(probs_dtype, probs, i);
            if (s < rows)
                for (int64_t h = 0; h < hidden; h++)
                    store(dtype, tokens_grad, (int64_t)s * hidden + h,
                          times(load(dtype, grad, n * hidden + h), p));
            volatile float acc = 0.0f;
            for (int64_t c0 = 0; c0 < hidden; c0 += chunk) {
                int64_t len = hidden - c0 < chunk ? hidden - c0 : chunk;
                for (int64_t j = 0; j < len; j++) {
                    float x = s < rows ? load(dtype, tokens, (int64_t)s * hidden + c0 + j) : 0.0f;
                    volatile float product = x * load(dtype, grad, n * hidden + c0 + j);
                    products[j] = product;
                }
                acc = acc + naive_ug_reduce_sum_func(products, len);
            }
            float result = isnan(acc) ? naive_float(0x7fc00000u) : acc;
            store(probs_dtype, probs_grad, i, result);
        }
    }
    free(products);
}
