/*
 * unpermute_grad.c - MoeTokenUnpermuteGrad: the two-phase API, its
 * validation, the chip a plan's tiling follows, and the kernel that runs
 * the model of unpermute_grad_model.h over a plan.
 *
 * The kernel works token by token (threads take runs of tokens, so no
 * output element depends on how many there are).  For a token it walks
 * the chunks of the tiling in column order; per chunk it widens the chunk
 * of g once, then takes the slots four at a time, 256 columns at a time:
 * one loop computes a block's products and its row of permuted_tokens_grad
 * (so that the misses of the permuted_tokens rows overlap arithmetic), the
 * block goes through the chunk's first reduction step at once, and the
 * rest of the reduction follows per slot, its sum added to the slot's
 * accumulator.  The portable C is compiled once more for AVX2 and once for
 * AVX-512 (the same source with another target, chosen at run time like
 * the permute-grad kernel's paths), so the folds and the pairwise levels
 * vectorise without a line of the model being written twice; only the
 * fp16 conversions of a row use the F16C instructions, whose bits equal
 * fp.h's (src/permute_grad_x86.c says why, tests/test_fast_paths.c checks),
 * and only the x86 paths stream large outputs with non-temporal stores.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "fp.h"
#include "fp_env.h"
#include "internal.h"
#include "kernel.h"
#include "unpermute_grad_model.h"

#ifdef MOEPERM_HAVE_X86_PATH
#include <immintrin.h>
#endif

/* ---------------------------------------------------------------------- */
/* Validation                                                             */
/* ---------------------------------------------------------------------- */

typedef struct ug_shape {
    int64_t tokens, top_k, hidden, rows;
} ug_shape;

static moeperm_status same_dtype(const moeperm_tensor *t, const char *what,
                                 const moeperm_tensor *like, const char *like_what)
{
    if (t->dtype == like->dtype)
        return MOEPERM_SUCCESS;
    return moeperm_fail(MOEPERM_ERR_PARAM_INVALID, "%s dtype %d (%s) differs from %s dtype %d (%s)",
                        what, (int)t->dtype, moeperm_dtype_name(t->dtype), like_what,
                        (int)like->dtype, moeperm_dtype_name(like->dtype));
}

/* Two non-empty views whose byte ranges meet. */
static moeperm_status check_apart(const moeperm_tensor *a, const char *a_what,
                                  const moeperm_tensor *b, const char *b_what)
{
    int64_t a_lo, a_hi, b_lo, b_hi;
    moeperm_status status;
    if (element_count(a) == 0 || element_count(b) == 0)
        return MOEPERM_SUCCESS;
    if ((status = byte_span(a, a_what, &a_lo, &a_hi)) != MOEPERM_SUCCESS ||
        (status = byte_span(b, b_what, &b_lo, &b_hi)) != MOEPERM_SUCCESS)
        return status;
    uintptr_t pa = (uintptr_t)a->data, pb = (uintptr_t)b->data;
    if (pa + (uintptr_t)a_lo < pb + (uintptr_t)b_hi && pb + (uintptr_t)b_lo < pa + (uintptr_t)a_hi)
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID, "%s overlaps %s in memory", a_what, b_what);
    return MOEPERM_SUCCESS;
}

/* Everything about the inputs but the values of sorted_indices (checked
 * last, once the cheap checks have passed).  probs may be NULL. */
static moeperm_status check_inputs(const moeperm_tensor *tokens, const moeperm_tensor *grad,
                                   const moeperm_tensor *indices, const moeperm_tensor *probs,
                                   ug_shape *shape)
{
    moeperm_status status;
    if ((status = check_float_dtype(tokens, "permuted_tokens")) ||
        (status = same_dtype(grad, "unpermuted_tokens_grad", tokens, "permuted_tokens")))
        return status;
    if (indices->dtype != MOEPERM_INT32)
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                            "sorted_indices dtype %d (%s) is not INT32 (3)", (int)indices->dtype,
                            moeperm_dtype_name(indices->dtype));
    if (probs && (status = check_float_dtype(probs, "probs")))
        return status;

    if ((status = check_ndim(tokens, "permuted_tokens", 2, "[num_out_tokens, hidden_size]")) ||
        (status = check_ndim(grad, "unpermuted_tokens_grad", 2, "[tokens_num, hidden_size]")) ||
        (status = check_ndim(indices, "sorted_indices", 1, "[tokens_num * top_k]")) ||
        (probs && (status = check_ndim(probs, "probs", 2, "[tokens_num, top_k]"))))
        return status;

    int64_t tokens_num = grad->dims[0], hidden = grad->dims[1], rows = tokens->dims[0];
    if (tokens->dims[1] != hidden)
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                            "permuted_tokens has hidden_size %lld but unpermuted_tokens_grad has "
                            "%lld",
                            (long long)tokens->dims[1], (long long)hidden);
    int64_t top_k = 1;
    if (probs) {
        top_k = probs->dims[1];
        if (probs->dims[0] != tokens_num)
            return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                                "probs has %lld rows but unpermuted_tokens_grad has %lld "
                                "(tokens_num)",
                                (long long)probs->dims[0], (long long)tokens_num);
        if (top_k < 1 || top_k > MOEPERM_MAX_TOP_K)
            return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                                "top_k = %lld (the columns of probs) is outside [1, %d]",
                                (long long)top_k, MOEPERM_MAX_TOP_K);
    }
    int64_t count = indices->dims[0], slots;
    if (__builtin_mul_overflow(tokens_num, top_k, &slots) || slots != count)
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                            "sorted_indices has %lld entries, expected tokens_num * top_k = "
                            "%lld * %lld",
                            (long long)count, (long long)tokens_num, (long long)top_k);
    if (count > (INT64_C(1) << 31))
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                            "sorted_indices has %lld entries, more than the 2^31 that int32 "
                            "indices can address",
                            (long long)count);
    if (rows > count)
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                            "permuted_tokens has %lld rows (num_out_tokens), more than the %lld "
                            "entries of sorted_indices",
                            (long long)rows, (long long)count);

    if ((status = check_data(tokens, "permuted_tokens")) ||
        (status = check_data(grad, "unpermuted_tokens_grad")) ||
        (status = check_data(indices, "sorted_indices")) ||
        (probs && (status = check_data(probs, "probs"))))
        return status;
    const moeperm_tensor *views[4] = {tokens, grad, indices, probs};
    const char *names[4] = {"permuted_tokens", "unpermuted_tokens_grad", "sorted_indices", "probs"};
    for (int i = 0; i < 4; i++) {
        int64_t lo, hi;
        if (views[i] && element_count(views[i]) > 0 &&
            (status = byte_span(views[i], names[i], &lo, &hi)))
            return status;
    }
    shape->tokens = tokens_num;
    shape->top_k = top_k;
    shape->hidden = hidden;
    shape->rows = rows;
    return MOEPERM_SUCCESS;
}

static moeperm_status check_shape2(const moeperm_tensor *t, const char *what, int64_t d0,
                                   int64_t d1, const char *like)
{
    if (t->dims[0] == d0 && t->dims[1] == d1)
        return MOEPERM_SUCCESS;
    return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                        "%s shape is [%lld, %lld], expected [%lld, %lld] (the shape of %s)", what,
                        (long long)t->dims[0], (long long)t->dims[1], (long long)d0, (long long)d1,
                        like);
}

static moeperm_status check_output(const moeperm_tensor *out, const char *what,
                                   const moeperm_tensor *const inputs[4],
                                   const char *const input_names[4])
{
    moeperm_status status;
    int64_t lo, hi;
    if ((status = check_data(out, what)))
        return status;
    if (element_count(out) == 0)
        return MOEPERM_SUCCESS;
    if ((status = byte_span(out, what, &lo, &hi)))
        return status;
    if (overlaps_itself(out))
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                            "%s strides [%lld, %lld] make distinct elements share memory", what,
                            (long long)out->strides[0], (long long)out->strides[1]);
    for (int i = 0; i < 4; i++)
        if (inputs[i] && (status = check_apart(out, what, inputs[i], input_names[i])))
            return status;
    return MOEPERM_SUCCESS;
}

static moeperm_status validate(const moeperm_tensor *tokens, const moeperm_tensor *grad,
                               const moeperm_tensor *indices, const moeperm_tensor *probs,
                               bool padded_mode, const moeperm_tensor *tokens_grad,
                               const moeperm_tensor *probs_grad, ug_shape *shape)
{
    moeperm_status status;
    if (padded_mode)
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                            "padded_mode = true is not supported; only false is");
    if ((status = check_inputs(tokens, grad, indices, probs, shape)))
        return status;
    if ((status = same_dtype(tokens_grad, "permuted_tokens_grad_out", tokens, "permuted_tokens")) ||
        (probs && (status = same_dtype(probs_grad, "probs_grad_out", probs, "probs"))))
        return status;
    if ((status = check_ndim(tokens_grad, "permuted_tokens_grad_out", 2,
                             "[num_out_tokens, hidden_size]")) ||
        (probs && (status = check_ndim(probs_grad, "probs_grad_out", 2, "[tokens_num, top_k]"))))
        return status;
    if ((status = check_shape2(tokens_grad, "permuted_tokens_grad_out", shape->rows, shape->hidden,
                               "permuted_tokens")) ||
        (probs && (status = check_shape2(probs_grad, "probs_grad_out", shape->tokens, shape->top_k,
                                         "probs"))))
        return status;

    const moeperm_tensor *const inputs[4] = {tokens, grad, indices, probs};
    const char *const names[4] = {"permuted_tokens", "unpermuted_tokens_grad", "sorted_indices",
                                  "probs"};
    if ((status = check_output(tokens_grad, "permuted_tokens_grad_out", inputs, names)) ||
        (probs && (status = check_output(probs_grad, "probs_grad_out", inputs, names))) ||
        (probs && (status = check_apart(tokens_grad, "permuted_tokens_grad_out", probs_grad,
                                        "probs_grad_out"))))
        return status;
    return check_indices(indices);
}

/* ---------------------------------------------------------------------- */
/* The kernel                                                             */
/* ---------------------------------------------------------------------- */

/* A plan resolved to pointers at element 0 and strides in elements. */
typedef struct ug_ctx {
    const char *tokens, *grad, *probs;
    const int32_t *indices;
    char *tokens_grad, *probs_grad;
    int64_t tokens_s0, tokens_s1, grad_s0, grad_s1, probs_s0, probs_s1;
    int64_t tokens_grad_s0, tokens_grad_s1, probs_grad_s0, probs_grad_s1, indices_s;
    int64_t tokens_num, top_k, hidden, rows, size, probs_size;
    moeperm_dtype dtype, probs_dtype;
    int64_t chunk, loops, tail; /* the tiling's cut of the hidden dimension */
} ug_ctx;

/* The first element of a view, or NULL for one without elements (its data
 * may be NULL and its offset was never checked). */
static char *origin(const struct moeperm_tensor *t)
{
    if (!t->data || element_count(t) == 0)
        return NULL;
    return (char *)t->data + t->offset * (int64_t)moeperm_dtype_size(t->dtype);
}

/* The instruction-set specific pieces of a path: fp16 rows (x86 has F16C
 * for them, whose bits equal fp.h's), and the non-temporal copy of a
 * finished row (NULL where the path has none). */
typedef struct ug_isa {
    void (*widen16)(const uint16_t *src, float *dst, int64_t n);
    void (*narrow16)(const float *src, uint16_t *dst, int64_t n);
    /* fused_block() for fp16 rows */
    void (*fused16)(const uint16_t *in, const float *g, float p, float *x, uint16_t *dst,
                    int64_t n);
    void (*stream)(char *dst, const char *src, size_t bytes);
    /* fused_block() for an fp32 row streamed straight from registers: dst
     * 64-byte aligned (NULL where the path has none) */
    void (*fused32_stream)(const float *in, const float *g, float p, float *x, float *dst,
                           int64_t n);
} ug_isa;

static void widen_fp16_portable(const uint16_t *src, float *dst, int64_t n)
{
    for (int64_t j = 0; j < n; j++)
        dst[j] = fp_fp16_to_float(src[j]);
}

static void narrow_fp16_portable(const float *src, uint16_t *dst, int64_t n)
{
    for (int64_t j = 0; j < n; j++)
        dst[j] = fp_float_to_fp16(src[j]);
}

static void fused_fp16_portable(const uint16_t *in, const float *g, float p, float *x,
                                uint16_t *dst, int64_t n)
{
    for (int64_t j = 0; j < n; j++) {
        x[j] = fp_fp16_to_float(in[j]) * g[j];
        dst[j] = fp_float_to_fp16(g[j] * p);
    }
}

#define UG_ALWAYS_INLINE static inline __attribute__((always_inline))

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
UG_ALWAYS_INLINE void widen_row(moeperm_dtype dtype, const char *src, int64_t stride,
                                float *restrict dst, int64_t n, const ug_isa *isa)
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
        if (stride == 1)
            isa->widen16(s, dst, n);
        else
            for (int64_t j = 0; j < n; j++)
                dst[j] = fp_fp16_to_float(s[j * stride]);
    }
}

/* dst[j * stride] = narrow(src[j]). */
UG_ALWAYS_INLINE void narrow_row(moeperm_dtype dtype, const float *restrict src, char *dst,
                                 int64_t stride, int64_t n, const ug_isa *isa)
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
        if (stride == 1)
            isa->narrow16(src, d, n);
        else
            for (int64_t j = 0; j < n; j++)
                d[j * stride] = fp_float_to_fp16(src[j]);
    }
}

/* x[j] = fl(widen(row[j * stride]) * g[j]): the products of one block. */
UG_ALWAYS_INLINE void products(moeperm_dtype dtype, const char *row, int64_t stride,
                               const float *restrict g, float *restrict x, int64_t n,
                               const ug_isa *isa)
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
        widen_row(dtype, row, stride, x, n, isa);
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
UG_ALWAYS_INLINE void scale_pinned(float *restrict t, const float *restrict g, float p, int64_t n)
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
UG_ALWAYS_INLINE void fused_block(moeperm_dtype dtype, const char *in, const float *restrict g,
                                  float p, float *restrict x, char *to, int64_t n,
                                  const ug_isa *isa)
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
        isa->fused16((const uint16_t *)in, g, p, x, (uint16_t *)to, n);
    }
}

/* Slots computed side by side: several rows of permuted_tokens read at
 * once keep more of the memory's latency in flight than one. */
#define SLOTS_AT_ONCE 4

/* Per-thread scratch, in floats: the slots' widened probs and
 * accumulators, one block of products, then chunk-long rows: g, the tree's
 * second buffer (which first holds a block of g * p when that may hold
 * NaNs), and for each slot computed at once its first-step sums and its
 * row of permuted_tokens_grad on the way to memory.  Rows start on 64-byte
 * boundaries. */
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
    return 2 * round16(c->top_k) + SLOT_BLOCK + (2 + 2 * SLOTS_AT_ONCE) * scratch_row(c);
}

/*
 * Puts the products p[0..width) of columns [b0, b0 + width) of a chunk
 * into x through the chunk's first reduction step (ug_first_fold()), so
 * that the step costs no pass of its own: with a first fold at distance d,
 * x[i] = p[i] below d and x[i - d] = x[i - d] + p[i] from d on; without
 * one, x[j] = p[2j] + p[2j + 1], and an odd last column moves up alone.
 * Blocks come in column order and b0 is even.
 */
UG_ALWAYS_INLINE void first_step(const float *restrict p, int64_t b0, int64_t width, int64_t d,
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

/* A row of permuted_tokens_grad going out with non-temporal stores as its
 * blocks are done: only whole, aligned cache lines are streamed; the
 * partial lines at either end are stored normally. */
typedef struct ug_out_row {
    char *dst;
    const char *src;
    int64_t bytes, head, done;
} ug_out_row;

static inline void out_row_start(ug_out_row *o, char *dst, const char *src, int64_t bytes)
{
    o->dst = dst;
    o->src = src;
    o->bytes = bytes;
    o->head = (int64_t)(-(uintptr_t)dst & 63u);
    o->head = o->head < bytes ? o->head : bytes;
    o->done = 0;
}

/* The first `ready` bytes of src are final: store the partial line before
 * the first boundary, then stream the whole lines. */
static inline void out_row_advance(ug_out_row *o, int64_t ready, const ug_isa *isa)
{
    if (o->done < o->head) {
        if (ready < o->head)
            return;
        memcpy(o->dst, o->src, (size_t)o->head);
        o->done = o->head;
    }
    int64_t end = o->done + (ready - o->done) / 64 * 64;
    if (end > o->done) {
        isa->stream(o->dst + o->done, o->src + o->done, (size_t)(end - o->done));
        o->done = end;
    }
}

static inline void out_row_finish(ug_out_row *o)
{
    memcpy(o->dst + o->done, o->src + o->done, (size_t)(o->bytes - o->done));
}

/* One token of a plan with probs: the model of unpermute_grad_model.h. */
UG_ALWAYS_INLINE void token_with_probs(const ug_ctx *c, int64_t n, float *scratch,
                                       const ug_isa *isa)
{
    int64_t top_k = c->top_k, row = scratch_row(c);
    float *p = scratch, *acc = p + round16(top_k);
    float *block = acc + round16(top_k), *g_buf = block + SLOT_BLOCK, *t = g_buf + row;
    float *x[SLOTS_AT_ONCE];
    char *out_buf[SLOTS_AT_ONCE];
    for (int i = 0; i < SLOTS_AT_ONCE; i++) {
        x[i] = t + row + 2 * i * row;
        out_buf[i] = (char *)(x[i] + row);
    }
    uint64_t rows = (uint64_t)c->rows;
    int64_t size = c->size, out_s1 = c->tokens_grad_s1;
    bool stream = isa->stream && out_s1 == 1;

    for (int64_t k = 0; k < top_k; k++) {
        const char *pk = c->probs + (n * c->probs_s0 + k * c->probs_s1) * c->probs_size;
        uint16_t h = 0;
        if (c->probs_dtype == MOEPERM_FLOAT)
            memcpy(&p[k], pk, sizeof p[k]);
        else
            memcpy(&h, pk, sizeof h);
        if (c->probs_dtype == MOEPERM_BF16)
            p[k] = fp_bf16_to_float(h);
        else if (c->probs_dtype == MOEPERM_FLOAT16)
            p[k] = fp_fp16_to_float(h);
        acc[k] = 0.0f;
    }
    for (int64_t q = 0; q < c->loops; q++) {
        int64_t c0 = q * c->chunk, len = q == c->loops - 1 ? c->tail : c->chunk;
        const char *g_row = c->grad + (n * c->grad_s0 + c0 * c->grad_s1) * size;
        const float *g = g_buf;
        if (c->dtype == MOEPERM_FLOAT && c->grad_s1 == 1)
            g = (const float *)g_row;
        else
            widen_row(c->dtype, g_row, c->grad_s1, g_buf, len, isa);
        /* A dropped slot multiplies a row of zeros: its chunk sums to +-0,
         * which leaves the accumulator as it is, unless g holds an inf or
         * a NaN (0 * inf). */
        uint32_t nan_seen = 0, special_seen = 0;
        for (int64_t j = 0; j < len; j++) {
            uint32_t magnitude = fp_bits(g[j]) & 0x7fffffffu;
            nan_seen |= (uint32_t)(magnitude > 0x7f800000u);
            special_seen |= (uint32_t)(magnitude >= 0x7f800000u);
        }
        for (int64_t k = 0; k < top_k;) {
            /* The next slots whose rows exist; each slot's accumulator
             * takes its chunks in order, whatever the grouping.  Unsigned
             * compare: a negative index is dropped like a large one. */
            int64_t slot[SLOTS_AT_ONCE], count = 0;
            for (; k < top_k && count < SLOTS_AT_ONCE; k++) {
                uint64_t s = (uint64_t)(int64_t)c->indices[(n * top_k + k) * c->indices_s];
                if (s >= rows)
                    acc[k] = acc[k] + (special_seen ? NAN : 0.0f);
                else
                    slot[count++] = k;
            }
            const char *in[SLOTS_AT_ONCE];
            char *out[SLOTS_AT_ONCE];
            bool nan_product[SLOTS_AT_ONCE], direct[SLOTS_AT_ONCE];
            ug_out_row streamed[SLOTS_AT_ONCE];
            for (int64_t i = 0; i < count; i++) {
                int64_t s = (int64_t)c->indices[(n * top_k + slot[i]) * c->indices_s];
                in[i] = c->tokens + (s * c->tokens_s0 + c0 * c->tokens_s1) * size;
                out[i] = c->tokens_grad + (s * c->tokens_grad_s0 + c0 * out_s1) * size;
                /* g * p is a NaN only from a NaN operand or 0 * inf */
                uint32_t p_magnitude = fp_bits(p[slot[i]]) & 0x7fffffffu;
                nan_product[i] =
                    nan_seen || p_magnitude >= 0x7f800000u || (special_seen && p_magnitude == 0);
                /* an aligned fp32 row needs no narrowing, so it can be
                 * streamed from the registers that compute it */
                direct[i] = stream && isa->fused32_stream && c->dtype == MOEPERM_FLOAT &&
                            !nan_product[i] && c->tokens_s1 == 1 && ((uintptr_t)out[i] & 63u) == 0;
                if (stream && !direct[i])
                    out_row_start(&streamed[i], out[i], out_buf[i], len * size);
            }
            int64_t d = ug_first_fold(len);
            for (int64_t b0 = 0; b0 < len; b0 += SLOT_BLOCK) {
                int64_t width = len - b0 < SLOT_BLOCK ? len - b0 : SLOT_BLOCK;
                for (int64_t i = 0; i < count; i++) {
                    const char *from = in[i] + b0 * c->tokens_s1 * size;
                    char *to = stream ? out_buf[i] + b0 * size : out[i] + b0 * out_s1 * size;
                    if (direct[i]) {
                        isa->fused32_stream((const float *)from, g + b0, p[slot[i]], block,
                                            (float *)(out[i] + b0 * size), width);
                    } else if (nan_product[i] || out_s1 != 1 || c->tokens_s1 != 1) {
                        scale_pinned(t, g + b0, p[slot[i]], width);
                        narrow_row(c->dtype, t, to, stream ? 1 : out_s1, width, isa);
                        products(c->dtype, from, c->tokens_s1, g + b0, block, width, isa);
                    } else {
                        fused_block(c->dtype, from, g + b0, p[slot[i]], block, to, width, isa);
                    }
                    first_step(block, b0, width, d, x[i]);
                    if (stream && !direct[i])
                        out_row_advance(&streamed[i], (b0 + width) * size, isa);
                }
            }
            for (int64_t i = 0; i < count; i++) {
                if (stream && !direct[i])
                    out_row_finish(&streamed[i]);
                float sum =
                    d ? ug_reduce_folded(x[i], t, len, d) : ug_pairwise(x[i], t, (len + 1) / 2);
                acc[slot[i]] = acc[slot[i]] + sum;
            }
        }
    }
    for (int64_t k = 0; k < top_k; k++) {
        float value = isnan(acc[k]) ? fp_from_bits(0x7fc00000u) : acc[k];
        char *out = c->probs_grad + (n * c->probs_grad_s0 + k * c->probs_grad_s1) * c->probs_size;
        if (c->probs_dtype == MOEPERM_FLOAT) {
            memcpy(out, &value, sizeof value);
        } else {
            uint16_t h =
                c->probs_dtype == MOEPERM_BF16 ? fp_float_to_bf16(value) : fp_float_to_fp16(value);
            memcpy(out, &h, sizeof h);
        }
    }
}

/* One token of a plan without probs: its row of g, bits unchanged, into
 * the row its index names. */
static void token_copy(const ug_ctx *c, int64_t n)
{
    uint64_t s = (uint64_t)(int64_t)c->indices[n * c->indices_s];
    if (s >= (uint64_t)c->rows)
        return;
    const char *from = c->grad + n * c->grad_s0 * c->size;
    char *to = c->tokens_grad + (int64_t)s * c->tokens_grad_s0 * c->size;
    if (c->grad_s1 == 1 && c->tokens_grad_s1 == 1) {
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
    static const ug_isa isa = {widen_fp16_portable, narrow_fp16_portable, fused_fp16_portable, NULL,
                               NULL};
    (void)stream;
    for (int64_t n = first; n < end; n++)
        token_with_probs(c, n, scratch, &isa);
}

#ifdef MOEPERM_HAVE_X86_PATH
#define UG_AVX2 "avx2,f16c"
#define UG_AVX512 "avx512f,avx512bw,avx512vl,avx2,f16c"

__attribute__((target(UG_AVX2))) static void widen_fp16_avx2(const uint16_t *src, float *dst,
                                                             int64_t n)
{
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        _mm256_storeu_ps(dst + j, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + j))));
    for (; j < n; j++)
        dst[j] = fp_fp16_to_float(src[j]);
}

__attribute__((target(UG_AVX2))) static void narrow_fp16_avx2(const float *src, uint16_t *dst,
                                                              int64_t n)
{
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        _mm_storeu_si128((__m128i *)(dst + j),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + j), _MM_FROUND_TO_NEAREST_INT));
    for (; j < n; j++)
        dst[j] = fp_float_to_fp16(src[j]);
}

__attribute__((target(UG_AVX2))) static void
fused_fp16_avx2(const uint16_t *in, const float *g, float p, float *x, uint16_t *dst, int64_t n)
{
    __m256 factor = _mm256_set1_ps(p);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 gv = _mm256_loadu_ps(g + j);
        __m256 xv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(in + j)));
        _mm256_storeu_ps(x + j, _mm256_mul_ps(xv, gv));
        _mm_storeu_si128((__m128i *)(dst + j),
                         _mm256_cvtps_ph(_mm256_mul_ps(gv, factor), _MM_FROUND_TO_NEAREST_INT));
    }
    for (; j < n; j++) {
        x[j] = fp_fp16_to_float(in[j]) * g[j];
        dst[j] = fp_float_to_fp16(g[j] * p);
    }
}

/* Non-temporal stores of whole 64-byte lines, dst aligned: a row of
 * permuted_tokens_grad is not read again soon, and skipping the read for
 * ownership saves a third of its traffic. */
__attribute__((target(UG_AVX2))) static void stream_avx2(char *dst, const char *src, size_t bytes)
{
    for (size_t i = 0; i < bytes; i += 32)
        _mm256_stream_si256((__m256i *)(dst + i), _mm256_loadu_si256((const __m256i *)(src + i)));
}

__attribute__((target(UG_AVX512))) static void widen_fp16_avx512(const uint16_t *src, float *dst,
                                                                 int64_t n)
{
    int64_t j = 0;
    for (; j + 16 <= n; j += 16)
        _mm512_storeu_ps(dst + j, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + j))));
    if (j < n) {
        __mmask16 m = (__mmask16)((1u << (n - j)) - 1u);
        _mm512_mask_storeu_ps(dst + j, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, src + j)));
    }
}

__attribute__((target(UG_AVX512))) static void narrow_fp16_avx512(const float *src, uint16_t *dst,
                                                                  int64_t n)
{
    int64_t j = 0;
    for (; j + 16 <= n; j += 16)
        _mm256_storeu_si256((__m256i *)(dst + j),
                            _mm512_cvtps_ph(_mm512_loadu_ps(src + j), _MM_FROUND_TO_NEAREST_INT));
    if (j < n) {
        __mmask16 m = (__mmask16)((1u << (n - j)) - 1u);
        _mm256_mask_storeu_epi16(
            dst + j, m,
            _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, src + j), _MM_FROUND_TO_NEAREST_INT));
    }
}

__attribute__((target(UG_AVX512))) static void
fused_fp16_avx512(const uint16_t *in, const float *g, float p, float *x, uint16_t *dst, int64_t n)
{
    __m512 factor = _mm512_set1_ps(p);
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        __m512 gv = _mm512_loadu_ps(g + j);
        __m512 xv = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(in + j)));
        _mm512_storeu_ps(x + j, _mm512_mul_ps(xv, gv));
        _mm256_storeu_si256((__m256i *)(dst + j),
                            _mm512_cvtps_ph(_mm512_mul_ps(gv, factor), _MM_FROUND_TO_NEAREST_INT));
    }
    if (j < n) {
        __mmask16 m = (__mmask16)((1u << (n - j)) - 1u);
        __m512 gv = _mm512_maskz_loadu_ps(m, g + j);
        __m512 xv = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, in + j));
        _mm512_mask_storeu_ps(x + j, m, _mm512_mul_ps(xv, gv));
        _mm256_mask_storeu_epi16(
            dst + j, m, _mm512_cvtps_ph(_mm512_mul_ps(gv, factor), _MM_FROUND_TO_NEAREST_INT));
    }
}

__attribute__((target(UG_AVX512))) static void stream_avx512(char *dst, const char *src,
                                                             size_t bytes)
{
    for (size_t i = 0; i < bytes; i += 64)
        _mm512_stream_si512((void *)(dst + i), _mm512_loadu_si512(src + i));
}

__attribute__((target(UG_AVX2))) static void
fused32_stream_avx2(const float *in, const float *g, float p, float *x, float *dst, int64_t n)
{
    __m256 factor = _mm256_set1_ps(p);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 gv = _mm256_loadu_ps(g + j);
        _mm256_storeu_ps(x + j, _mm256_mul_ps(_mm256_loadu_ps(in + j), gv));
        _mm256_stream_ps(dst + j, _mm256_mul_ps(gv, factor));
    }
    for (; j < n; j++) {
        x[j] = in[j] * g[j];
        dst[j] = g[j] * p;
    }
}

__attribute__((target(UG_AVX512))) static void
fused32_stream_avx512(const float *in, const float *g, float p, float *x, float *dst, int64_t n)
{
    __m512 factor = _mm512_set1_ps(p);
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        __m512 gv = _mm512_loadu_ps(g + j);
        _mm512_storeu_ps(x + j, _mm512_mul_ps(_mm512_loadu_ps(in + j), gv));
        _mm512_stream_ps(dst + j, _mm512_mul_ps(gv, factor));
    }
    for (; j < n; j++) {
        x[j] = in[j] * g[j];
        dst[j] = g[j] * p;
    }
}

__attribute__((target(UG_AVX2))) static void range_avx2(const ug_ctx *c, int64_t first, int64_t end,
                                                        float *scratch, bool stream)
{
    const ug_isa isa = {widen_fp16_avx2, narrow_fp16_avx2, fused_fp16_avx2,
                        stream ? stream_avx2 : NULL, stream ? fused32_stream_avx2 : NULL};
    for (int64_t n = first; n < end; n++)
        token_with_probs(c, n, scratch, &isa);
    if (stream)
        _mm_sfence();
}

__attribute__((target(UG_AVX512))) static void
range_avx512(const ug_ctx *c, int64_t first, int64_t end, float *scratch, bool stream)
{
    const ug_isa isa = {widen_fp16_avx512, narrow_fp16_avx512, fused_fp16_avx512,
                        stream ? stream_avx512 : NULL, stream ? fused32_stream_avx512 : NULL};
    for (int64_t n = first; n < end; n++)
        token_with_probs(c, n, scratch, &isa);
    if (stream)
        _mm_sfence();
}
#endif

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
                                int path)
{
    ug_ctx c;
    resolve(plan, &c);
    int64_t tokens = c.tokens_num;
    if (tokens == 0)
        return true;
    int team = team_size(&c, threads);

    if (!plan->has_probs) {
        if (c.hidden == 0)
            return true;
#ifdef _OPENMP
#pragma omp parallel for num_threads(team) schedule(static) if (team > 1)
#endif
        for (int64_t n = 0; n < tokens; n++)
            token_copy(&c, n);
        return true;
    }

    ug_range range = range_portable;
#ifdef MOEPERM_HAVE_X86_PATH
    moeperm_kernel_path resolved = moeperm_kernel_resolve_path((moeperm_kernel_path)path);
    if (resolved == MOEPERM_PATH_X86_AVX512)
        range = range_avx512;
    else if (resolved == MOEPERM_PATH_X86_AVX2)
        range = range_avx2;
#else
    (void)path;
#endif
    bool stream = (double)c.rows * (double)c.hidden * (double)c.size >= (double)STREAM_MIN_BYTES;
    /* Every thread's scratch is taken before any output is written, so
     * running out of memory leaves the outputs untouched. */
    int64_t per_thread = scratch_floats(&c);
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

/* ---------------------------------------------------------------------- */
/* The API                                                                */
/* ---------------------------------------------------------------------- */

moeperm_status moeperm_token_unpermute_grad_get_workspace_size(
    const moeperm_tensor *permuted_tokens, const moeperm_tensor *unpermuted_tokens_grad,
    const moeperm_tensor *sorted_indices, const moeperm_tensor *probs, bool padded_mode,
    const int64_t *restore_shape, uint64_t restore_shape_len,
    moeperm_tensor *permuted_tokens_grad_out, moeperm_tensor *probs_grad_out,
    uint64_t *workspace_size, moeperm_executor **executor)
{
    (void)restore_shape; /* the Atlas A2/A3 host code never reads it */
    (void)restore_shape_len;
    if (executor)
        *executor = NULL;
    if (!permuted_tokens)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR, "permuted_tokens is NULL");
    if (!unpermuted_tokens_grad)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR, "unpermuted_tokens_grad is NULL");
    if (!sorted_indices)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR, "sorted_indices is NULL");
    if (!permuted_tokens_grad_out)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR, "permuted_tokens_grad_out is NULL");
    if (probs && !probs_grad_out)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR, "probs_grad_out is NULL but probs is given");
    if (!probs && probs_grad_out)
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                            "probs_grad_out is given but probs is NULL: without probs there is "
                            "no probs gradient");
    if (!workspace_size)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR, "workspace_size is NULL");
    if (!executor)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR, "executor is NULL");

    ug_shape shape;
    moeperm_status status = validate(permuted_tokens, unpermuted_tokens_grad, sorted_indices, probs,
                                     padded_mode, permuted_tokens_grad_out, probs_grad_out, &shape);
    if (status != MOEPERM_SUCCESS)
        return status;

    struct moeperm_executor *plan = calloc(1, sizeof *plan);
    if (!plan)
        return moeperm_fail(MOEPERM_ERR_INNER, "out of memory allocating the executor");
    plan->op = MOEPERM_OP_UNPERMUTE_GRAD;
    struct moeperm_unpermute_grad_plan *ug = &plan->unpermute_grad;
    ug->permuted_tokens = *permuted_tokens;
    ug->grad = *unpermuted_tokens_grad;
    ug->indices = *sorted_indices;
    ug->tokens_grad = *permuted_tokens_grad_out;
    ug->has_probs = probs != NULL;
    if (probs) {
        ug->probs = *probs;
        ug->probs_grad = *probs_grad_out;
    }
    ug->top_k = shape.top_k;
    ug->chip.ub_bytes = MOEPERM_CHIP_A2_UB_BYTES;
    ug->chip.vector_cores = MOEPERM_CHIP_A2_VECTOR_CORES;
    *workspace_size = 0;
    *executor = plan;
    return MOEPERM_SUCCESS;
}

static moeperm_status check_chip(const moeperm_chip *chip)
{
    if (chip->ub_bytes < MOEPERM_CHIP_MIN_UB_BYTES || chip->ub_bytes > MOEPERM_CHIP_MAX_UB_BYTES)
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID, "chip ub_bytes = %lld is outside [%d, %d]",
                            (long long)chip->ub_bytes, MOEPERM_CHIP_MIN_UB_BYTES,
                            MOEPERM_CHIP_MAX_UB_BYTES);
    if (chip->vector_cores < 1 || chip->vector_cores > MOEPERM_CHIP_MAX_VECTOR_CORES)
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                            "chip vector_cores = %lld is outside [1, %d]",
                            (long long)chip->vector_cores, MOEPERM_CHIP_MAX_VECTOR_CORES);
    return MOEPERM_SUCCESS;
}



moeperm_status moeperm_executor_set_chip(moeperm_executor *executor, const moeperm_chip *chip)
{
    if (!executor)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR, "executor is NULL");
    if (!chip)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR, "chip is NULL");
    if (executor->op != MOEPERM_OP_UNPERMUTE_GRAD)
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                            "the executor was planned by %s, whose arithmetic does not depend "
                            "on the chip",
                            moeperm_executor_planner(executor->op));
    moeperm_status status = check_chip(chip);
    if (status != MOEPERM_SUCCESS)
        return status;
    executor->unpermute_grad.chip = *chip;
    return MOEPERM_SUCCESS;
}

moeperm_status moeperm_token_unpermute_grad(void *workspace, uint64_t workspace_size,
                                            moeperm_executor *executor, void *stream)
{
    (void)workspace;
    (void)workspace_size; /* the CPU plan needs no workspace, so any size is enough */
    moeperm_status status = moeperm_executor_accept(executor, stream, MOEPERM_OP_UNPERMUTE_GRAD);
    if (status != MOEPERM_SUCCESS)
        return status;
    bool done = moeperm_unpermute_grad_run(&executor->unpermute_grad, 0, MOEPERM_PATH_AUTO);
    free(executor);
    if (!done)
        return moeperm_fail(MOEPERM_ERR_INNER, "out of memory allocating the kernel's scratch");
    return MOEPERM_SUCCESS;
}

moeperm_status moeperm_token_unpermute_grad_tiling(int64_t tokens_num, int64_t top_k,
                                                   int64_t hidden_size, int64_t num_out_tokens,
                                                   moeperm_dtype tokens_dtype, bool has_probs,
                                                   moeperm_dtype probs_dtype,
                                                   const moeperm_chip *chip,
                                                   moeperm_unpermute_grad_tiling *tiling)
{
    static const moeperm_chip a2 = {MOEPERM_CHIP_A2_UB_BYTES, MOEPERM_CHIP_A2_VECTOR_CORES};
    moeperm_status status;
    if (!tiling)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR, "tiling is NULL");
    if (!chip)
        chip = &a2;
    if ((status = check_chip(chip)))
        return status;
    if (tokens_num < 1)
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                            "tokens_num = %lld; the kernel's tiling needs at least 1",
                            (long long)tokens_num);
    if (hidden_size < 1)
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                            "hidden_size = %lld; the kernel's tiling needs at least 1",
                            (long long)hidden_size);
    if (top_k < 1 || top_k > MOEPERM_MAX_TOP_K)
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID, "top_k = %lld is outside [1, %d]",
                            (long long)top_k, MOEPERM_MAX_TOP_K);
    if (!has_probs && top_k != 1)
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                            "top_k = %lld without probs; the kernel then takes top_k = 1",
                            (long long)top_k);
    if (num_out_tokens < 0)
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID, "num_out_tokens = %lld is negative",
                            (long long)num_out_tokens);
    moeperm_tensor tokens_view = {.dtype = tokens_dtype}, probs_view = {.dtype = probs_dtype};
    if ((status = check_float_dtype(&tokens_view, "tokens_dtype")) ||
        (has_probs && (status = check_float_dtype(&probs_view, "probs_dtype"))))
        return status;
    moeperm_ug_tiling(tokens_num, top_k, hidden_size, num_out_tokens,
                      (int64_t)moeperm_dtype_size(tokens_dtype), has_probs,
                      has_probs ? (int64_t)moeperm_dtype_size(probs_dtype) : 0, chip, tiling);
    return MOEPERM_SUCCESS;
}

moeperm_status moeperm_token_unpermute_grad_exact_probs_grad(
    const moeperm_tensor *permuted_tokens, const moeperm_tensor *unpermuted_tokens_grad,
    const moeperm_tensor *sorted_indices, const moeperm_tensor *probs, double *exact,
    uint64_t exact_len)
{
    if (!permuted_tokens)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR, "permuted_tokens is NULL");
    if (!unpermuted_tokens_grad)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR, "unpermuted_tokens_grad is NULL");
    if (!sorted_indices)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR, "sorted_indices is NULL");
    if (!probs)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR,
                            "probs is NULL; without probs there is no probs gradient");
    ug_shape shape;
    moeperm_status status =
        check_inputs(permuted_tokens, unpermuted_tokens_grad, sorted_indices, probs, &shape);
    if (status != MOEPERM_SUCCESS)
        return status;
    int64_t slots = shape.tokens * shape.top_k;
    if (exact_len != (uint64_t)slots)
        return moeperm_fail(MOEPERM_ERR_PARAM_INVALID,
                            "exact_len = %llu, expected tokens_num * top_k = %lld",
                            (unsigned long long)exact_len, (long long)slots);
    if (slots > 0 && !exact)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR, "exact is NULL");
    /* exact as a view of 8-byte elements, for the overlap checks */
    moeperm_tensor view = {
        .dtype = MOEPERM_INT64, .ndim = 1, .dims = {slots}, .strides = {1}, .data = exact};
    const moeperm_tensor *inputs[4] = {permuted_tokens, unpermuted_tokens_grad, sorted_indices,
                                       probs};
    const char *names[4] = {"permuted_tokens", "unpermuted_tokens_grad", "sorted_indices", "probs"};
    for (int i = 0; i < 4; i++)
        if ((status = check_apart(&view, "exact", inputs[i], names[i])))
            return status;
    if ((status = check_indices(sorted_indices)))
        return status;
    return moeperm_ug_exact(permuted_tokens, unpermuted_tokens_grad, sorted_indices, shape.top_k,
                            exact);
}
