/*
 * x86/unpermute_grad_template.h - MoeTokenUnpermuteGrad's kernel for one
 * instruction set: the rows of a run of tokens, in one pass per row.
 *
 * isa_template.h includes this once per instruction set, after the
 * primitives of vec_avx2.h or vec_avx512.h (widen_f32, widen_f16,
 * columns_bf16 and their narrowing and masked forms, vscale, vmul, vadd,
 * vpair, vmagnitude_max).  The arithmetic is the model's
 * (unpermute_grad/model.h) and kernel.c's portable loop's, bit for bit:
 *
 * - per token and chunk of the tiling, g's chunk is widened once (and
 *   searched for an infinity or a NaN, which a dropped slot turns into a
 *   NaN);
 * - per slot with a row, one pass over the row's chunk reads the permuted
 *   token, writes permuted_tokens_grad = narrow(g * p) (g the first
 *   operand of vmulps, which fixes the NaN that comes out as the portable
 *   loop's scale_pinned() does), and puts the products widen(x) * g
 *   straight through the first steps of the chunk's reduction
 *   (ug_first_fold()): the first three levels of the pairwise tree in
 *   registers when the chunk is exactly T columns, its one fold to T and
 *   those levels when the fold's strides allow, else the first fold; the
 *   rest of the reduction (folds and the tree, fixed strides over an
 *   L1-sized buffer) follows at once;
 * - the chunk sums go into the slot's accumulator in chunk order.
 *
 * Every sum of the reduction is one binary32 addition of the same two
 * values as in the model; only which NaN comes out may differ, and the
 * operator turns any NaN sum into 0x7fc00000.  While a row is worked on,
 * the next one (the next slot's, or the next chunk's first with its g, or
 * the next token's first with its g) is prefetched into L2 as the row is
 * worked on, so that the random rows of permuted_tokens arrive without a
 * miss each.
 */

/* Where the products of a pass go, as the chunk's first step wants them:
 * as they are, added to what is there (a fold), or through the first
 * level of the pairwise tree, or its first three levels, or the chunk's
 * one fold to T and then the tree's first three levels. */
enum { UG_STORE, UG_FOLD, UG_PAIR, UG_TREE3, UG_FOLD3 };

/* What to prefetch while a row is worked on: the bytes of the next row and
 * of the next token's g, `scale` bytes of them for each byte of the row
 * worked on (more than 1 when they are longer: the last, short chunk of a
 * row cut in two before the next token's first). */
typedef struct ug_ahead {
    const char *row, *g;
    int64_t row_bytes, g_bytes, scale;
} ug_ahead;

/*
 * bf16 rows whose first step is a level of the tree are read with the even
 * and the odd columns of each pair of vectors apart (addend_bf16(), no
 * shuffle), and g is widened the same way: then the first level is one
 * addition lane by lane, and its sums come out in column order.  Other
 * rows, and float32 and float16 ones, are read in column order.
 */
static MOEPERM_FORCE_INLINE bool ug_split(moeperm_dtype dtype, int mode)
{
    return dtype == MOEPERM_BF16 && mode >= UG_PAIR;
}

/* A pair of vectors of a row, widened (a signalling NaN may stay as it is:
 * the value is only multiplied, which makes it quiet). */
static MOEPERM_FORCE_INLINE ATTRIBUTES void ug_load(moeperm_dtype dtype, bool split, const void *p,
                                                    vec_t *lo, vec_t *hi)
{
    if (dtype == MOEPERM_FLOAT)
        widen_f32(p, lo, hi);
    else if (dtype == MOEPERM_FLOAT16)
        widen_f16(p, lo, hi);
    else if (split)
        addend_bf16(p, lo, hi);
    else
        columns_bf16(p, lo, hi);
}

/* A pair of vectors narrowed into p; finite: no lane is a NaN. */
static MOEPERM_FORCE_INLINE ATTRIBUTES void ug_narrow(moeperm_dtype dtype, bool split,
                                                      bool finite, vec_t lo, vec_t hi, void *p,
                                                      int stream)
{
    if (dtype == MOEPERM_FLOAT)
        narrow_f32(lo, hi, p, stream);
    else if (dtype == MOEPERM_FLOAT16)
        narrow_f16(lo, hi, p, stream);
    else if (split)
        narrow_bf16_as(lo, hi, p, stream, finite);
    else
        narrow_columns_bf16_as(lo, hi, p, stream, finite);
}

/* The first level of the tree over a pair of vectors of products: the
 * sums of neighbouring columns, in column order. */
static MOEPERM_FORCE_INLINE ATTRIBUTES vec_t ug_level(bool split, vec_t x0, vec_t x1)
{
    return split ? vadd(x0, x1) : vpair(x0, x1);
}

#if USE_MASKING
static MOEPERM_FORCE_INLINE ATTRIBUTES void ug_load_masked(moeperm_dtype dtype, const void *p,
                                                           mask_t mask, vec_t *lo, vec_t *hi)
{
    if (dtype == MOEPERM_FLOAT)
        widen_masked_f32(p, mask, lo, hi);
    else if (dtype == MOEPERM_FLOAT16)
        widen_masked_f16(p, mask, lo, hi);
    else
        columns_masked_bf16(p, mask, lo, hi);
}

static MOEPERM_FORCE_INLINE ATTRIBUTES void ug_narrow_masked(moeperm_dtype dtype, vec_t lo,
                                                             vec_t hi, void *p, mask_t mask)
{
    if (dtype == MOEPERM_FLOAT)
        narrow_masked_f32(lo, hi, p, mask);
    else if (dtype == MOEPERM_FLOAT16)
        narrow_masked_f16(lo, hi, p, mask);
    else
        narrow_columns_masked_bf16(lo, hi, p, mask);
}
#endif

/* Prefetches the lines of the rows ahead that go with bytes
 * [from, from + bytes) of the row worked on. */
static MOEPERM_FORCE_INLINE void ug_prefetch(const ug_ahead *ahead, int64_t from, int64_t bytes)
{
    for (int64_t b = from * ahead->scale; b < (from + bytes) * ahead->scale; b += 64) {
        if (b < ahead->row_bytes)
            _mm_prefetch(ahead->row + b, _MM_HINT_T1);
        if (b < ahead->g_bytes)
            _mm_prefetch(ahead->g + b, _MM_HINT_T1);
    }
}

/*
 * One step of a pass: columns [j, j + 2 * VL) of a row.  Writes
 * out = narrow(g * p) (factor is p in every lane, g the first operand) and
 * returns the products widen(in) * g in *x0 and *x1.
 */
static MOEPERM_FORCE_INLINE ATTRIBUTES void ug_step(moeperm_dtype dtype, bool split, bool finite,
                                                    const char *in, const float *g, vec_t factor,
                                                    char *out, int64_t j, int stream, vec_t *x0,
                                                    vec_t *x1)
{
    const int64_t size = dtype == MOEPERM_FLOAT ? 4 : 2;
    vec_t g0 = vloadu(g + j), g1 = vloadu(g + j + VL);
    ug_load(dtype, split, in + j * size, x0, x1);
    ug_narrow(dtype, split, finite, vscale(g0, factor), vscale(g1, factor), out + j * size,
              stream);
    *x0 = vmul(*x0, g0);
    *x1 = vmul(*x1, g1);
}

/* Four steps from column j: the products of 8 * VL columns in x[0..8). */
static MOEPERM_FORCE_INLINE ATTRIBUTES void ug_steps4(moeperm_dtype dtype, bool split, bool finite,
                                                      const char *in, const float *g,
                                                      vec_t factor, char *out, int64_t j,
                                                      int stream, vec_t *x)
{
    for (int s = 0; s < 4; s++)
        ug_step(dtype, split, finite, in, g, factor, out, j + s * 2 * VL, stream, &x[2 * s],
                &x[2 * s + 1]);
}

/* The tree's first three levels over the products of 8 * VL columns: the
 * sums of eight neighbouring columns, in column order. */
static MOEPERM_FORCE_INLINE ATTRIBUTES vec_t ug_levels3(bool split, const vec_t *x)
{
    vec_t ab = vpair(ug_level(split, x[0], x[1]), ug_level(split, x[2], x[3]));
    vec_t cd = vpair(ug_level(split, x[4], x[5]), ug_level(split, x[6], x[7]));
    return vpair(ab, cd);
}

/*
 * Columns [0, n) of one row: out[j] = narrow(g[j] * p), and the products
 * x_j = widen(in[j]) * g[j] into dst as mode says: UG_STORE dst[j] = x_j,
 * UG_FOLD dst[j] = dst[j] + x_j, UG_PAIR dst[j / 2] = x_j + x_{j+1} (n a
 * multiple of 2 * VL), UG_TREE3 the sums of eight neighbouring columns as
 * the tree's first three levels make them (n a multiple of 8 * VL),
 * UG_FOLD3 the same over y_j = x_j + x_{j+t} (x_j alone from n - t on)
 * for j < t = ug_target(n) (t and n - t multiples of 8 * VL).  in and out
 * hold the row's columns, g the chunk's widened g (split for a bf16 row in
 * a tree mode), all from the same first column; stream is a narrowing's
 * (0, 1, or STREAM_ALIGNED when out is 64-byte aligned); finite says
 * g * p is never a NaN.  Each step of the loop prefetches the bytes of the
 * rows ahead that go with its own, base bytes into the chunk.
 */
static MOEPERM_FORCE_INLINE ATTRIBUTES void ug_pass(moeperm_dtype dtype, int mode, bool finite,
                                                    int stream, const char *in, const float *g,
                                                    float p, char *out, float *dst, int64_t n,
                                                    const ug_ahead *ahead, int64_t base)
{
    const bool split = ug_split(dtype, mode);
    const int64_t cols = 2 * VL, size = dtype == MOEPERM_FLOAT ? 4 : 2;
    const vec_t factor = vset1(p);
    int64_t j = 0;
    if (mode == UG_TREE3) {
        for (; j + 4 * cols <= n; j += 4 * cols) {
            vec_t x[8];
            ug_prefetch(ahead, base + j * size, 4 * cols * size);
            ug_steps4(dtype, split, finite, in, g, factor, out, j, stream, x);
            vstoreu(dst + j / 8, ug_levels3(split, x));
        }
        return;
    }
    if (mode == UG_FOLD3) {
        const int64_t t = ug_target(n);
        for (; j < t; j += 4 * cols) {
            vec_t x[8], y[8];
            ug_prefetch(ahead, base + j * size, 4 * cols * size);
            ug_steps4(dtype, split, finite, in, g, factor, out, j, stream, x);
            if (j + t < n) {
                ug_prefetch(ahead, base + (j + t) * size, 4 * cols * size);
                ug_steps4(dtype, split, finite, in, g, factor, out, j + t, stream, y);
                for (int s = 0; s < 8; s++)
                    x[s] = vadd(x[s], y[s]);
            }
            vstoreu(dst + j / 8, ug_levels3(split, x));
        }
        return;
    }
    for (; j + cols <= n; j += cols) {
        vec_t x0, x1;
        ug_prefetch(ahead, base + j * size, cols * size);
        ug_step(dtype, split, finite, in, g, factor, out, j, stream, &x0, &x1);
        if (mode == UG_PAIR) {
            vstoreu(dst + j / 2, ug_level(split, x0, x1));
        } else if (mode == UG_FOLD) {
            vstoreu(dst + j, vadd(vloadu(dst + j), x0));
            vstoreu(dst + j + VL, vadd(vloadu(dst + j + VL), x1));
        } else {
            vstoreu(dst + j, x0);
            vstoreu(dst + j + VL, x1);
        }
    }
    /* the tree modes never have a tail */
#if USE_MASKING
    /* The lanes past the end load as zero and multiply +0.0 by +0.0 (not
     * by p, which may be infinite): no exception flag the columns
     * themselves would not raise. */
    if (j < n) {
        ug_prefetch(ahead, base + j * size, cols * size);
        mask_t mask = (mask_t)((UINT64_C(1) << (n - j)) - 1);
        vec_t x0, x1, g0, g1;
        widen_masked_f32(g + j, mask, &g0, &g1);
        ug_load_masked(dtype, in + j * size, mask, &x0, &x1);
        vec_t f0 = vset1_lanes(p, n - j < VL ? n - j : VL);
        vec_t f1 = vset1_lanes(p, n - j < VL ? 0 : n - j - VL);
        ug_narrow_masked(dtype, vscale(g0, f0), vscale(g1, f1), out + j * size, mask);
        x0 = vmul(x0, g0);
        x1 = vmul(x1, g1);
        if (mode == UG_FOLD) {
            vec_t d0, d1;
            widen_masked_f32(dst + j, mask, &d0, &d1);
            x0 = vadd(d0, x0);
            x1 = vadd(d1, x1);
        }
        narrow_masked_f32(x0, x1, dst + j, mask);
        j = n;
    }
#endif
    for (; j < n; j++) {
        float x = moeperm_widen(dtype, in, j) * g[j];
        moeperm_narrow(dtype, out, j, scale_one(g[j], p));
        dst[j] = mode == UG_FOLD ? dst[j] + x : x;
    }
}

/* ug_pass() with the way of storing out decided once for the pass (every
 * store of a step is aligned when out is: a step writes a multiple of 32
 * bytes), and finite kept only where it changes the code (bf16). */
static MOEPERM_FORCE_INLINE ATTRIBUTES void ug_pass_out(moeperm_dtype dtype, int mode, bool finite,
                                                        bool stream, const char *in,
                                                        const float *g, float p, char *out,
                                                        float *dst, int64_t n,
                                                        const ug_ahead *ahead, int64_t base)
{
    int how = !stream ? 0 : ((uintptr_t)out & 63u) == 0 ? STREAM_ALIGNED : 1;
    if (dtype == MOEPERM_BF16 && finite) {
        if (how == STREAM_ALIGNED)
            ug_pass(dtype, mode, true, STREAM_ALIGNED, in, g, p, out, dst, n, ahead, base);
        else
            ug_pass(dtype, mode, true, how, in, g, p, out, dst, n, ahead, base);
    } else {
        if (how == STREAM_ALIGNED)
            ug_pass(dtype, mode, false, STREAM_ALIGNED, in, g, p, out, dst, n, ahead, base);
        else
            ug_pass(dtype, mode, false, how, in, g, p, out, dst, n, ahead, base);
    }
}

/* buf[i] = buf[i] + hi[i] for i < n: one halving step of BinaryAddFunc
 * (ug_fold()), hi at least n floats after buf. */
static MOEPERM_FORCE_INLINE ATTRIBUTES void ug_vfold(float *buf, const float *hi, int64_t n)
{
    int64_t i = 0;
    for (; i + VL <= n; i += VL)
        vstoreu(buf + i, vadd(vloadu(buf + i), vloadu(hi + i)));
    for (; i < n; i++)
        buf[i] = buf[i] + hi[i];
}

/* The pairwise tree over buf[0..n), n a power of two and at least VL
 * (ug_pairwise()), in place: each level's sums overwrite the front of the
 * buffer, and the last VL sums are added up in a register (the front
 * lanes of vpair(v, v) are the sums of neighbouring lanes of v). */
static MOEPERM_FORCE_INLINE ATTRIBUTES float ug_vtree(float *buf, int64_t n)
{
    for (; n > VL; n /= 2)
        for (int64_t j = 0; j < n / 2; j += VL)
            vstoreu(buf + j, vpair(vloadu(buf + 2 * j), vloadu(buf + 2 * j + VL)));
    vec_t v = vloadu(buf);
    for (; n > 1; n /= 2)
        v = vpair(v, v);
    return vfirst(v);
}

/* How a chunk of len columns (len >= 64) starts its reduction: the
 * first levels of the tree when len is T, its one fold to T and those
 * levels in one pass when the strides allow, else the first fold. */
static MOEPERM_FORCE_INLINE int ug_mode(int64_t len)
{
    int64_t d = ug_first_fold(len), t = ug_target(len);
    if (d == 0)
        return len % (8 * VL) == 0 ? UG_TREE3 : UG_PAIR;
    if (d == t && t % (8 * VL) == 0 && (len - t) % (8 * VL) == 0)
        return UG_FOLD3;
    return UG_FOLD;
}

/* One slot's row over one chunk of len columns: its permuted_tokens_grad
 * columns, and the chunk's sum in ug_reduce_chunk()'s order.  x and tmp
 * are the chunk-long reduction buffers; g is split (ug_split()) when the
 * chunk's mode asks. */
static MOEPERM_FORCE_INLINE ATTRIBUTES float ug_row(moeperm_dtype dtype, bool finite, bool stream,
                                                    const char *in, const float *g, float p,
                                                    char *out, int64_t len, float *x, float *tmp,
                                                    const ug_ahead *ahead)
{
    if (len < 64) {
        ug_pass_out(dtype, UG_STORE, finite, stream, in, g, p, out, x, len, ahead, 0);
        return ug_pairwise(x, tmp, len);
    }
    int mode = ug_mode(len);
    if (mode == UG_TREE3) { /* len is T, a power of two */
        ug_pass_out(dtype, UG_TREE3, finite, stream, in, g, p, out, x, len, ahead, 0);
        return ug_vtree(x, len / 8);
    }
    if (mode == UG_FOLD3) {
        ug_pass_out(dtype, UG_FOLD3, finite, stream, in, g, p, out, x, len, ahead, 0);
        return ug_vtree(x, ug_target(len) / 8);
    }
    if (mode == UG_PAIR) {
        ug_pass_out(dtype, UG_PAIR, finite, stream, in, g, p, out, x, len, ahead, 0);
        return ug_vtree(x, len / 2);
    }
    const int64_t size = dtype == MOEPERM_FLOAT ? 4 : 2, d = ug_first_fold(len);
    ug_pass_out(dtype, UG_STORE, finite, stream, in, g, p, out, x, d, ahead, 0);
    ug_pass_out(dtype, UG_FOLD, finite, stream, in + d * size, g + d, p, out + d * size, x,
                len - d, ahead, d * size);
    /* the rest of ug_reduce_folded() */
    int64_t target = ug_target(len), total = d;
    while (total > 2 * target) {
        int64_t half = ug_half(total);
        ug_vfold(x, x + half, total - half);
        total = half;
    }
    ug_vfold(x, x + target, total - target);
    return ug_vtree(x, target);
}

/* g's chunk [c0, c0 + len) of token n widened into buf, split as
 * ug_split() says (or, for float32, read where it is); *special says it
 * holds an infinity or a NaN. */
static MOEPERM_FORCE_INLINE ATTRIBUTES const float *ug_widen_g(moeperm_dtype dtype, bool split,
                                                               const moeperm_ug_ctx *c, int64_t n,
                                                               int64_t c0, int64_t len,
                                                               float *buf, bool *special)
{
    const int64_t size = dtype == MOEPERM_FLOAT ? 4 : 2;
    const char *row = c->grad + (n * c->grad_s0 + c0) * size;
    const float *g = dtype == MOEPERM_FLOAT ? (const float *)row : buf;
    vec_t seen = vzero();
    int64_t j = 0;
    for (; j + 2 * VL <= len; j += 2 * VL) {
        vec_t lo, hi;
        ug_load(dtype, split, row + j * size, &lo, &hi);
        if (dtype != MOEPERM_FLOAT) {
            vstoreu(buf + j, lo);
            vstoreu(buf + j + VL, hi);
        }
        seen = vmagnitude_max(vmagnitude_max(seen, lo), hi);
    }
    uint32_t most = vmagnitude_reduce(seen);
    for (; j < len; j++) {
        float v = moeperm_widen(dtype, row, j);
        if (dtype != MOEPERM_FLOAT)
            buf[j] = v;
        uint32_t magnitude = fp_bits(v) & 0x7fffffffu;
        most = magnitude > most ? magnitude : most;
    }
    *special = most >= 0x7f800000u;
    return g;
}

/* The first row token n works on, for prefetching: its first slot with a
 * row, at column 0 (NULL when every slot is dropped). */
static inline const char *ug_first_row(const moeperm_ug_ctx *c, int64_t n)
{
    for (int64_t k = 0; k < c->top_k; k++) {
        int64_t s = moeperm_ug_row(c, n, k);
        if (s >= 0)
            return c->tokens + s * c->tokens_s0 * c->size;
    }
    return NULL;
}

/*
 * Tokens [first, end) of a plan with probs and unit column strides, with
 * one thread's scratch of moeperm_x86_ug_scratch_floats() floats; stream
 * asks for non-temporal stores of permuted_tokens_grad (then a fence at
 * the end).
 */
static MOEPERM_FORCE_INLINE ATTRIBUTES void ug_range(moeperm_dtype dtype, const moeperm_ug_ctx *c,
                                                     int64_t first, int64_t end, float *scratch,
                                                     bool stream)
{
    const int64_t size = dtype == MOEPERM_FLOAT ? 4 : 2, top_k = c->top_k;
    int64_t row_floats = moeperm_x86_ug_row_floats(c);
    float *p = scratch, *acc = p + moeperm_x86_ug_round16(top_k);
    float *g_buf = acc + moeperm_x86_ug_round16(top_k), *x = g_buf + row_floats,
          *tmp = x + row_floats;
    int64_t slot[MOEPERM_MAX_TOP_K], row[MOEPERM_MAX_TOP_K];
    for (int64_t n = first; n < end; n++) {
        moeperm_ug_read_probs(c, n, p);
        int64_t count = 0;
        for (int64_t k = 0; k < top_k; k++) {
            acc[k] = 0.0f;
            int64_t s = moeperm_ug_row(c, n, k);
            if (s >= 0) {
                slot[count] = k;
                row[count++] = s;
            }
        }
        for (int64_t q = 0; q < c->loops; q++) {
            int64_t c0 = q * c->chunk, len = q == c->loops - 1 ? c->tail : c->chunk;
            bool special, split = len >= 64 && ug_split(dtype, ug_mode(len));
            const float *g = ug_widen_g(dtype, split, c, n, c0, len, g_buf, &special);
            if (count < top_k)
                for (int64_t k = 0, i = 0; k < top_k; k++) {
                    if (i < count && slot[i] == k)
                        i++;
                    else
                        acc[k] = acc[k] + moeperm_ug_dropped_chunk(special);
                }
            for (int64_t i = 0; i < count; i++) {
                /* the next row: this chunk's next slot, or the next
                 * chunk's first with its g, or the next token's first
                 * with its g */
                ug_ahead ahead = {NULL, NULL, 0, 0, 1};
                if (i + 1 < count) {
                    ahead.row = c->tokens + (row[i + 1] * c->tokens_s0 + c0) * size;
                    ahead.row_bytes = len * size;
                } else if (q + 1 < c->loops) {
                    int64_t next_len = q + 2 == c->loops ? c->tail : c->chunk;
                    ahead.row = c->tokens + (row[0] * c->tokens_s0 + c0 + c->chunk) * size;
                    ahead.g = c->grad + (n * c->grad_s0 + c0 + c->chunk) * size;
                    ahead.row_bytes = ahead.g_bytes = next_len * size;
                } else if (n + 1 < end) {
                    ahead.row = ug_first_row(c, n + 1);
                    ahead.g = c->grad + (n + 1) * c->grad_s0 * size;
                    ahead.g_bytes = (c->loops == 1 ? c->tail : c->chunk) * size;
                    ahead.row_bytes = ahead.row ? ahead.g_bytes : 0;
                }
                int64_t most = ahead.row_bytes > ahead.g_bytes ? ahead.row_bytes : ahead.g_bytes;
                ahead.scale = most > len * size ? (most + len * size - 1) / (len * size) : 1;
                const char *in = c->tokens + (row[i] * c->tokens_s0 + c0) * size;
                char *out = c->tokens_grad + (row[i] * c->tokens_grad_s0 + c0) * size;
                /* g * p is a NaN only from a NaN operand or 0 * inf */
                bool finite = !special && fabsf(p[slot[i]]) < INFINITY;
                float sum = ug_row(dtype, finite, stream, in, g, p[slot[i]], out, len, x, tmp,
                                   &ahead);
                acc[slot[i]] = acc[slot[i]] + sum;
            }
        }
        moeperm_ug_write_probs_grad(c, n, acc);
    }
    if (stream)
        _mm_sfence();
}

static ATTRIBUTES void unpermute_grad_range(const moeperm_ug_ctx *c, int64_t first, int64_t end,
                                            float *scratch, bool stream)
{
    if (c->dtype == MOEPERM_FLOAT)
        ug_range(MOEPERM_FLOAT, c, first, end, scratch, stream);
    else if (c->dtype == MOEPERM_FLOAT16)
        ug_range(MOEPERM_FLOAT16, c, first, end, scratch, stream);
    else
        ug_range(MOEPERM_BF16, c, first, end, scratch, stream);
}

/* The rows' bf16 conversions alone, for the tests. */
static ATTRIBUTES void bf16_columns_to_float(const uint16_t *src, float *dst, size_t n)
{
    size_t i = 0;
    for (; i + 2 * VL <= n; i += 2 * VL) {
        vec_t lo, hi;
        ug_load(MOEPERM_BF16, false, src + i, &lo, &hi);
        vstoreu(dst + i, lo);
        vstoreu(dst + i + VL, hi);
    }
    for (; i < n; i++)
        dst[i] = fp_from_bits((uint32_t)src[i] << 16);
}

static ATTRIBUTES void float_to_bf16_columns(const float *src, uint16_t *dst, size_t n)
{
    size_t i = 0;
    for (; i + 2 * VL <= n; i += 2 * VL)
        ug_narrow(MOEPERM_BF16, false, false, vloadu(src + i), vloadu(src + i + VL), dst + i, 0);
    for (; i < n; i++)
        dst[i] = fp_float_to_bf16(src[i]);
}
