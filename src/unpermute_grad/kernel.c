/*
 * unpermute_grad/kernel.c - MoeTokenUnpermuteGrad's kernel: it runs the
 * model of model.h over a validated plan (unpermute_grad.c makes plans).
 *
 * The kernel works token by token (threads take runs of tokens, so no
 * output element depends on how many there are).  This file holds the
 * portable loop, which is the reference every other path is held to, and
 * the choice of path: a plan whose views have unit column strides runs the
 * x86 template of the instruction set the library's one choice resolved to
 * (src/x86/unpermute_grad_template.h, one pass per row), anything else
 * this loop.  For a token the loop walks the chunks of the tiling in
 * column order; per chunk it widens the chunk of g once, then takes the
 * slots four at a time, 256 columns at a time: one loop computes a block's
 * products and its row of permuted_tokens_grad (so that the misses of the
 * permuted_tokens rows overlap arithmetic), the block goes through the
 * chunk's first reduction step at once, and the rest of the reduction
 * follows per slot, its sum added to the slot's accumulator.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/fp.h"
#include "core/fp_env.h"
#include "core/checks.h"
#include "core/internal.h"
#include "core/kernel.h"
#include "unpermute_grad/kernel.h"
#include "unpermute_grad/model.h"
#include "unpermute_grad/unpermute_grad.h"

#ifdef MOEPERM_HAVE_X86_PATH
#include "x86/x86.h"
#endif

/* ---------------------------------------------------------------------- */
/* The kernel                                                             */
/* ---------------------------------------------------------------------- */

typedef moeperm_ug_ctx ug_ctx;

/* The first element of a view, or NULL for one without elements (its data
 * may be NULL and its offset was never checked). */
static char *origin(const struct moeperm_tensor *t)
{
    if (!t->data || moeperm_view_elements(t) == 0)
        return NULL;
    return (char *)t->data + t->offset * (int64_t)moeperm_dtype_size(t->dtype);
}

/*
 * bf16 to float without making a signalling NaN quiet.  The kernel widens
 * with it where the quiet bit cannot show: a NaN product only ever reaches
 * probs_grad, which replaces any NaN by 0x7fc00000, and a NaN of g reaches
 * permuted_tokens_grad only through scale_pinned(), which sets the quiet bit
 * itself.  It is a shift, which vectorises to one instruction.
 */
static inline float bf16_bits_to_float(uint16_t h)
{
    return fp_from_bits((uint32_t)h << 16);
}

/* fp_float_to_bf16() for a value that is not a NaN. */
static inline uint16_t float_to_bf16_no_nan(float value)
{
    uint32_t bits = fp_bits(value);
    return (uint16_t)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

/* dst[j] = widen(src[j * stride]) (see bf16_bits_to_float() for bf16). */
static void widen_row(moeperm_dtype dtype, const char *src, int64_t stride, float *restrict dst,
                      int64_t n)
{
    if (dtype == MOEPERM_FLOAT) {
        const float *s = (const float *)src;
        for (int64_t j = 0; j < n; j++)
            dst[j] = s[j * stride];
    } else if (dtype == MOEPERM_BF16) {
        const uint16_t *s = (const uint16_t *)src;
        if (stride == 1)
            for (int64_t j = 0; j < n; j++)
                dst[j] = bf16_bits_to_float(s[j]);
        else
            for (int64_t j = 0; j < n; j++)
                dst[j] = bf16_bits_to_float(s[j * stride]);
    } else {
        const uint16_t *s = (const uint16_t *)src;
        for (int64_t j = 0; j < n; j++)
            dst[j] = fp_fp16_to_float(s[j * stride]);
    }
}

/* dst[j * stride] = narrow(src[j]). */
static void narrow_row(moeperm_dtype dtype, const float *restrict src, char *dst, int64_t stride,
                       int64_t n)
{
    if (dtype == MOEPERM_FLOAT) {
        float *d = (float *)dst;
        for (int64_t j = 0; j < n; j++)
            d[j * stride] = src[j];
    } else if (dtype == MOEPERM_BF16) {
        uint16_t *d = (uint16_t *)dst;
        for (int64_t j = 0; j < n; j++)
            d[j * stride] = fp_float_to_bf16(src[j]);
    } else {
        uint16_t *d = (uint16_t *)dst;
        for (int64_t j = 0; j < n; j++)
            d[j * stride] = fp_float_to_fp16(src[j]);
    }
}

/* x[j] = fl(widen(row[j * stride]) * g[j]): the products of one block. */
static void products(moeperm_dtype dtype, const char *row, int64_t stride,
                     const float *restrict g, float *restrict x, int64_t n)
{
    if (stride == 1 && dtype == MOEPERM_FLOAT) {
        const float *s = (const float *)row;
        for (int64_t j = 0; j < n; j++)
            x[j] = s[j] * g[j];
    } else if (stride == 1 && dtype == MOEPERM_BF16) {
        const uint16_t *s = (const uint16_t *)row;
        for (int64_t j = 0; j < n; j++)
            x[j] = bf16_bits_to_float(s[j]) * g[j];
    } else {
        widen_row(dtype, row, stride, x, n);
        for (int64_t j = 0; j < n; j++)
            x[j] = x[j] * g[j];
    }
}

static inline bool is_nan_bits(uint32_t bits)
{
    return (bits & 0x7fffffffu) > 0x7f800000u;
}

/*
 * t[j] = fl(g[j] * p), the row of permuted_tokens_grad before narrowing,
 * when a product may be a NaN.  NaN operands give what x86 gives with g as
 * the first operand: g's NaN made quiet, else p's made quiet (0 * inf: the
 * host's default NaN).
 */
static void scale_pinned(float *restrict t, const float *restrict g, float p, int64_t n)
{
    uint32_t p_bits = fp_bits(p);
    uint32_t p_nan = 0u - (uint32_t)is_nan_bits(p_bits);
    for (int64_t j = 0; j < n; j++) {
        uint32_t g_bits = fp_bits(g[j]);
        uint32_t product = fp_bits(g[j] * p);
        uint32_t g_nan = 0u - (uint32_t)is_nan_bits(g_bits);
        product = (product & ~p_nan) | ((p_bits | 0x00400000u) & p_nan);
        product = (product & ~g_nan) | ((g_bits | 0x00400000u) & g_nan);
        t[j] = fp_from_bits(product);
    }
}

/* The common case in one pass: contiguous rows and no NaN product.  The
 * loads of a row of permuted_tokens, which miss the caches, then overlap
 * the arithmetic of the permuted_tokens_grad row instead of stalling a loop
 * of their own: x[j] = fl(widen(in[j]) * g[j]), to[j] = narrow(g[j] * p). */
static void fused_block(moeperm_dtype dtype, const char *in, const float *restrict g, float p,
                        float *restrict x, char *to, int64_t n)
{
    if (dtype == MOEPERM_FLOAT) {
        const float *s = (const float *)in;
        float *d = (float *)to;
        for (int64_t j = 0; j < n; j++) {
            x[j] = s[j] * g[j];
            d[j] = g[j] * p;
        }
    } else if (dtype == MOEPERM_BF16) {
        const uint16_t *s = (const uint16_t *)in;
        uint16_t *d = (uint16_t *)to;
        for (int64_t j = 0; j < n; j++) {
            x[j] = bf16_bits_to_float(s[j]) * g[j];
            d[j] = float_to_bf16_no_nan(g[j] * p);
        }
    } else {
        const uint16_t *s = (const uint16_t *)in;
        uint16_t *d = (uint16_t *)to;
        for (int64_t j = 0; j < n; j++) {
            x[j] = fp_fp16_to_float(s[j]) * g[j];
            d[j] = fp_float_to_fp16(g[j] * p);
        }
    }
}

/* Slots computed side by side: several rows of permuted_tokens read at
 * once keep more of the memory's latency in flight than one. */
#define SLOTS_AT_ONCE 4

/* Per-thread scratch, in floats: the slots' widened probs and
 * accumulators, one block of products, then chunk-long rows: g, the tree's
 * second buffer (which first holds a block of g * p when that may hold
 * NaNs), and for each slot computed at once its first-step sums.  Rows
 * start on 64-byte boundaries. */
static int64_t round16(int64_t n)
{
    return (n + 15) / 16 * 16;
}

static int64_t scratch_row(const ug_ctx *c)
{
    return round16(c->chunk > 64 ? c->chunk : 64);
}

/* Columns a slot works on at a time, so that one block's products are
 * computed while the block is still in L1. */
#define SLOT_BLOCK 256

static int64_t scratch_floats(const ug_ctx *c)
{
    return 2 * round16(c->top_k) + SLOT_BLOCK + (2 + SLOTS_AT_ONCE) * scratch_row(c);
}

/*
 * Puts the products p[0..width) of columns [b0, b0 + width) of a chunk
 * into x through the chunk's first reduction step (ug_first_fold()), so
 * that the step costs no pass of its own: with a first fold at distance d,
 * x[i] = p[i] below d and x[i - d] = x[i - d] + p[i] from d on; without
 * one, x[j] = p[2j] + p[2j + 1], and an odd last column moves up alone.
 * Blocks come in column order and b0 is even.
 */
static void first_step(const float *restrict p, int64_t b0, int64_t width, int64_t d,
                       float *restrict x)
{
    if (d == 0) {
        ug_pair_level(x + b0 / 2, p, width / 2);
        if (width & 1)
            x[(b0 + width) / 2] = p[width - 1];
        return;
    }
    int64_t below = d - b0 < width ? (d - b0 > 0 ? d - b0 : 0) : width;
    for (int64_t j = 0; j < below; j++)
        x[b0 + j] = p[j];
    float *lo = x + b0 + below - d;
    const float *hi = p + below;
    for (int64_t j = 0; j < width - below; j++)
        lo[j] = lo[j] + hi[j];
}

/* One token of a plan with probs: the model of model.h. */
static void token_with_probs(const ug_ctx *c, int64_t n, float *scratch)
{
    int64_t top_k = c->top_k, row = scratch_row(c);
    float *p = scratch, *acc = p + round16(top_k);
    float *block = acc + round16(top_k), *g_buf = block + SLOT_BLOCK, *t = g_buf + row;
    float *x[SLOTS_AT_ONCE];
    for (int i = 0; i < SLOTS_AT_ONCE; i++)
        x[i] = t + row + i * row;
    int64_t size = c->size, out_s1 = c->tokens_grad_s1;

    moeperm_ug_read_probs(c, n, p);
    for (int64_t k = 0; k < top_k; k++)
        acc[k] = 0.0f;
    for (int64_t q = 0; q < c->loops; q++) {
        int64_t c0 = q * c->chunk, len = q == c->loops - 1 ? c->tail : c->chunk;
        const char *g_row = c->grad + (n * c->grad_s0 + c0 * c->grad_s1) * size;
        const float *g = g_buf;
        if (c->dtype == MOEPERM_FLOAT && c->grad_s1 == 1)
            g = (const float *)g_row;
        else
            widen_row(c->dtype, g_row, c->grad_s1, g_buf, len);
        uint32_t nan_seen = 0, special_seen = 0;
        for (int64_t j = 0; j < len; j++) {
            uint32_t magnitude = fp_bits(g[j]) & 0x7fffffffu;
            nan_seen |= (uint32_t)(magnitude > 0x7f800000u);
            special_seen |= (uint32_t)(magnitude >= 0x7f800000u);
        }
        for (int64_t k = 0; k < top_k;) {
            /* The next slots whose rows exist; each slot's accumulator
             * takes its chunks in order, whatever the grouping. */
            int64_t slot[SLOTS_AT_ONCE], rows[SLOTS_AT_ONCE], count = 0;
            for (; k < top_k && count < SLOTS_AT_ONCE; k++) {
                int64_t s = moeperm_ug_row(c, n, k);
                if (s < 0)
                    acc[k] = acc[k] + moeperm_ug_dropped_chunk(special_seen);
                else
                    slot[count] = k, rows[count++] = s;
            }
            const char *in[SLOTS_AT_ONCE];
            char *out[SLOTS_AT_ONCE];
            bool nan_product[SLOTS_AT_ONCE];
            for (int64_t i = 0; i < count; i++) {
                in[i] = c->tokens + (rows[i] * c->tokens_s0 + c0 * c->tokens_s1) * size;
                out[i] = c->tokens_grad + (rows[i] * c->tokens_grad_s0 + c0 * out_s1) * size;
                /* g * p is a NaN only from a NaN operand or 0 * inf */
                uint32_t p_magnitude = fp_bits(p[slot[i]]) & 0x7fffffffu;
                nan_product[i] =
                    nan_seen || p_magnitude >= 0x7f800000u || (special_seen && p_magnitude == 0);
            }
            int64_t d = ug_first_fold(len);
            for (int64_t b0 = 0; b0 < len; b0 += SLOT_BLOCK) {
                int64_t width = len - b0 < SLOT_BLOCK ? len - b0 : SLOT_BLOCK;
                for (int64_t i = 0; i < count; i++) {
                    const char *from = in[i] + b0 * c->tokens_s1 * size;
                    char *to = out[i] + b0 * out_s1 * size;
                    if (nan_product[i] || out_s1 != 1 || c->tokens_s1 != 1) {
                        scale_pinned(t, g + b0, p[slot[i]], width);
                        narrow_row(c->dtype, t, to, out_s1, width);
                        products(c->dtype, from, c->tokens_s1, g + b0, block, width);
                    } else {
                        fused_block(c->dtype, from, g + b0, p[slot[i]], block, to, width);
                    }
                    first_step(block, b0, width, d, x[i]);
                }
            }
            for (int64_t i = 0; i < count; i++) {
                float sum =
                    d ? ug_reduce_folded(x[i], t, len, d) : ug_pairwise(x[i], t, (len + 1) / 2);
                acc[slot[i]] = acc[slot[i]] + sum;
            }
        }
    }
    moeperm_ug_write_probs_grad(c, n, acc);
}

/* One token of a plan without probs: its row of g, bits unchanged, into
 * the row its index names; stream_copy, when not NULL, copies a
 * contiguous row past the caches. */
static void token_copy(const ug_ctx *c, int64_t n,
                       void (*stream_copy)(void *, const void *, size_t))
{
    uint64_t s = (uint64_t)(int64_t)c->indices[n * c->indices_s];
    if (s >= (uint64_t)c->rows)
        return;
    const char *from = c->grad + n * c->grad_s0 * c->size;
    char *to = c->tokens_grad + (int64_t)s * c->tokens_grad_s0 * c->size;
    if (c->grad_s1 == 1 && c->tokens_grad_s1 == 1) {
        if (stream_copy)
            stream_copy(to, from, (size_t)(c->hidden * c->size));
        else
            memcpy(to, from, (size_t)(c->hidden * c->size));
        return;
    }
    for (int64_t j = 0; j < c->hidden; j++)
        memcpy(to + j * c->tokens_grad_s1 * c->size, from + j * c->grad_s1 * c->size,
               (size_t)c->size);
}

/* Tokens [first, end) with one thread's scratch; stream asks for
 * non-temporal stores of permuted_tokens_grad where the path has them. */
typedef void (*ug_range)(const ug_ctx *c, int64_t first, int64_t end, float *scratch, bool stream);

static void range_portable(const ug_ctx *c, int64_t first, int64_t end, float *scratch, bool stream)
{
    (void)stream;
    for (int64_t n = first; n < end; n++)
        token_with_probs(c, n, scratch);
}

/* permuted_tokens_grad at least this large is written with non-temporal
 * stores on the x86 paths: nobody reads it soon. */
#define STREAM_MIN_BYTES (INT64_C(8) << 20)

/* Exactly the threads asked for; by default the library's one rule of as
 * many threads as the bytes to move pay for (moeperm_threads_for_bytes()). */
static int team_size(const ug_ctx *c, int threads)
{
    if (threads > 0)
        return threads;
    /* in double: the product may pass 2^63 */
    double bytes =
        ((double)c->rows * 2.0 + (double)c->tokens_num) * (double)c->hidden * (double)c->size;
    return moeperm_threads_for_bytes(0, bytes);
}

static void resolve(const struct moeperm_unpermute_grad_plan *plan, ug_ctx *c)
{
    const struct moeperm_tensor *tk = &plan->permuted_tokens, *g = &plan->grad,
                                *ix = &plan->indices, *pr = &plan->probs, *tg = &plan->tokens_grad,
                                *pg = &plan->probs_grad;
    memset(c, 0, sizeof *c);
    c->tokens = origin(tk);
    c->grad = origin(g);
    c->indices = (const int32_t *)origin(ix);
    c->tokens_grad = origin(tg);
    c->tokens_s0 = tk->strides[0], c->tokens_s1 = tk->strides[1];
    c->grad_s0 = g->strides[0], c->grad_s1 = g->strides[1];
    c->indices_s = ix->strides[0];
    c->tokens_grad_s0 = tg->strides[0], c->tokens_grad_s1 = tg->strides[1];
    c->tokens_num = g->dims[0];
    c->hidden = g->dims[1];
    c->rows = tk->dims[0];
    c->top_k = plan->top_k;
    c->dtype = tk->dtype;
    c->size = (int64_t)moeperm_dtype_size(tk->dtype);
    if (plan->has_probs) {
        c->probs = origin(pr);
        c->probs_grad = origin(pg);
        c->probs_s0 = pr->strides[0], c->probs_s1 = pr->strides[1];
        c->probs_grad_s0 = pg->strides[0], c->probs_grad_s1 = pg->strides[1];
        c->probs_dtype = pr->dtype;
        c->probs_size = (int64_t)moeperm_dtype_size(pr->dtype);
        if (c->tokens_num > 0 && c->hidden > 0) {
            moeperm_unpermute_grad_tiling tiling;
            moeperm_ug_tiling(c->tokens_num, c->top_k, c->hidden, c->rows, c->size, true,
                              c->probs_size, &plan->chip, &tiling);
            c->chunk = tiling.hidden_size_loop_times == 1 ? c->hidden : tiling.hidden_size_align;
            c->loops = tiling.hidden_size_loop_times;
            c->tail = tiling.hidden_size_tail;
        }
    }
}

bool moeperm_unpermute_grad_run(const struct moeperm_unpermute_grad_plan *plan, int threads,
                                moeperm_isa isa)
{
    ug_ctx c;
    resolve(plan, &c);
    int64_t tokens = c.tokens_num;
    if (tokens == 0)
        return true;
    int team = team_size(&c, threads);

    bool stream = (double)c.rows * (double)c.hidden * (double)c.size >= (double)STREAM_MIN_BYTES;
    ug_range range = range_portable;
    int64_t per_thread = scratch_floats(&c);
    void (*stream_copy)(void *, const void *, size_t) = NULL;
    void (*fence)(void) = NULL;
#ifdef MOEPERM_HAVE_X86_PATH
    /* the x86 template for views with unit column strides */
    const moeperm_x86_kernels *k = moeperm_x86_kernels_for(moeperm_isa_resolve(isa));
    if (k && c.tokens_s1 == 1 && c.grad_s1 == 1 && c.tokens_grad_s1 == 1) {
        range = k->ug_range;
        per_thread = moeperm_x86_ug_scratch_floats(&c);
    }
    if (k && stream)
        stream_copy = k->stream_copy, fence = k->fence;
#else
    (void)isa;
#endif

    if (!plan->has_probs) {
        if (c.hidden == 0)
            return true;
#ifdef _OPENMP
#pragma omp parallel num_threads(team) if (team > 1)
#endif
        {
#ifdef _OPENMP
#pragma omp for schedule(static) nowait
#endif
            for (int64_t n = 0; n < tokens; n++)
                token_copy(&c, n, stream_copy);
            if (fence)
                fence();
        }
        return true;
    }

    /* Every thread's scratch is taken before any output is written, so
     * running out of memory leaves the outputs untouched. */
    float *scratch = aligned_alloc(64, (size_t)(per_thread * team) * sizeof *scratch);
    if (!scratch)
        return false;
    /* Runs of tokens handed out one at a time, so that a thread the OS
     * keeps waiting leaves its share to the others. */
    int64_t run = tokens / ((int64_t)team * 16);
    run = run < 1 ? 1 : run > 64 ? 64 : run;
    int64_t runs = (tokens + run - 1) / run;
    (void)runs;
#ifdef _OPENMP
#pragma omp parallel num_threads(team) if (team > 1)
#endif
    {
        int id = 0;
#ifdef _OPENMP
        id = omp_get_thread_num();
#endif
        float *mine = scratch + per_thread * id;
        fp_env env = fp_env_enter();
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 1) nowait
#endif
        for (int64_t r = 0; r < runs; r++)
            range(&c, r * run, r * run + run < tokens ? r * run + run : tokens, mine, stream);
        fp_env_leave(env);
    }
    free(scratch);
    return true;
}

