/*
 * x86/permute_grad_template.h - the vectorised segments of
 * MoeTokenPermuteGrad, the scaled segments of MoeTokenUnpermute, and the
 * conversions alone, for one instruction set.
 *
 * isa_template.h includes this once per instruction set, after the
 * primitives of vec_avx2.h or vec_avx512.h.  The same loop, with a
 * multiplier per row, is MoeTokenUnpermute's: each row's values are
 * multiplied by it before they are added (`scaled` below, a constant, so
 * MoeTokenPermuteGrad's segments hold no trace of it).  It uses:
 *
 * vec_t:
 *	A vector of binary32 lanes (__m256, __m512).
 * VL:
 *	Lanes of vec_t (8, 16).  A segment steps over 2 * VL columns at a
 *	time, as a pair of vectors.
 * USE_MASKING:
 *	1 when the primitives have masked forms (AVX-512): the columns
 *	left after the last pair step are then summed as one masked pair;
 *	0: one at a time with fp.h (AVX2).
 *
 * and the primitives, each `static MOEPERM_FORCE_INLINE ATTRIBUTES`:
 *
 *	vec_t vzero(void);
 *	vec_t vaccumulate(vec_t acc, vec_t x);  moeperm_accumulate(), per lane
 *	vec_t vset1(float p);                   p in every lane
 *	vec_t vscale(vec_t x, vec_t p);         x * p, x the first operand
 *	vec_t vloadu(const float *p);
 *	void vstoreu(float *p, vec_t v);
 *	void widen_f32(const void *p, vec_t *lo, vec_t *hi);
 *	void widen_f16(const void *p, vec_t *lo, vec_t *hi);
 *	void widen_bf16(const void *p, vec_t *lo, vec_t *hi);
 *	void addend_bf16(const void *p, vec_t *lo, vec_t *hi);
 *	void narrow_f32(vec_t lo, vec_t hi, void *p, int stream);
 *	void narrow_f16(vec_t lo, vec_t hi, void *p, int stream);
 *	void narrow_bf16(vec_t lo, vec_t hi, void *p, int stream);
 *
 * widen_* read 2 * VL elements at p into binary32 lanes, exactly as fp.h
 * widens them; which column sits in which lane is theirs to choose, as long
 * as narrow_* (which write 2 * VL elements at p, exactly as fp.h narrows,
 * non-temporally when stream and p is aligned for it) put it back.  The bf16
 * pair holds element 2i in lane i of lo and element 2i + 1 in lane i of hi.
 * addend_bf16 is widen_bf16 without making signalling NaNs quiet, for
 * values that are only ever added or multiplied (x86 addition and
 * multiplication make them quiet with the same bit 22).  vscale is one
 * binary32 multiplication per lane with x as the first source: when x and
 * p are both NaNs, x86 returns x made quiet, which is the order
 * unpermute.c's portable loop pins (nan_product()); any other product has
 * the same bits whatever the order.  With USE_MASKING, mask_t (one bit per
 * column of a pair), vset1_lanes(p, lanes) (p in the first `lanes` lanes,
 * +0.0 in the others) and the same widen_masked_*, addend_masked_bf16 and
 * narrow_masked_* with a mask_t argument in place of stream, whose lanes
 * outside the mask are neither read nor written.
 */

/* The primitives of one dtype.  dtype is a constant wherever these are
 * inlined, so each switch folds to one primitive. */
static MOEPERM_FORCE_INLINE ATTRIBUTES void widen(moeperm_dtype dtype, const void *p, vec_t *lo,
                                                  vec_t *hi)
{
    switch (dtype) {
    case MOEPERM_FLOAT:
        widen_f32(p, lo, hi);
        break;
    case MOEPERM_FLOAT16:
        widen_f16(p, lo, hi);
        break;
    default:
        widen_bf16(p, lo, hi);
        break;
    }
}

static MOEPERM_FORCE_INLINE ATTRIBUTES void addend(moeperm_dtype dtype, const void *p,
                                                   vec_t *lo, vec_t *hi)
{
    if (dtype == MOEPERM_BF16)
        addend_bf16(p, lo, hi);
    else
        widen(dtype, p, lo, hi);
}

static MOEPERM_FORCE_INLINE ATTRIBUTES void narrow(moeperm_dtype dtype, vec_t lo, vec_t hi,
                                                   void *p, bool stream)
{
    switch (dtype) {
    case MOEPERM_FLOAT:
        narrow_f32(lo, hi, p, stream);
        break;
    case MOEPERM_FLOAT16:
        narrow_f16(lo, hi, p, stream);
        break;
    default:
        narrow_bf16(lo, hi, p, stream);
        break;
    }
}

#if USE_MASKING
static MOEPERM_FORCE_INLINE ATTRIBUTES void widen_masked(moeperm_dtype dtype, const void *p,
                                                         mask_t mask, vec_t *lo, vec_t *hi)
{
    switch (dtype) {
    case MOEPERM_FLOAT:
        widen_masked_f32(p, mask, lo, hi);
        break;
    case MOEPERM_FLOAT16:
        widen_masked_f16(p, mask, lo, hi);
        break;
    default:
        widen_masked_bf16(p, mask, lo, hi);
        break;
    }
}

static MOEPERM_FORCE_INLINE ATTRIBUTES void addend_masked(moeperm_dtype dtype, const void *p,
                                                          mask_t mask, vec_t *lo, vec_t *hi)
{
    if (dtype == MOEPERM_BF16)
        addend_masked_bf16(p, mask, lo, hi);
    else
        widen_masked(dtype, p, mask, lo, hi);
}

static MOEPERM_FORCE_INLINE ATTRIBUTES void narrow_masked(moeperm_dtype dtype, vec_t lo,
                                                          vec_t hi, void *p, mask_t mask)
{
    switch (dtype) {
    case MOEPERM_FLOAT:
        narrow_masked_f32(lo, hi, p, mask);
        break;
    case MOEPERM_FLOAT16:
        narrow_masked_f16(lo, hi, p, mask);
        break;
    default:
        narrow_masked_bf16(lo, hi, p, mask);
        break;
    }
}
#endif

/* Row r's multiplier in every lane; nothing when not scaled. */
static MOEPERM_FORCE_INLINE ATTRIBUTES vec_t multiplier(bool scaled, const moeperm_x86_task *task,
                                                        int64_t r)
{
    return scaled ? vset1(task->scales[r]) : vzero();
}

/* Row values to add: the row as it is, or times its multiplier s. */
static MOEPERM_FORCE_INLINE ATTRIBUTES void term(moeperm_dtype dtype, bool scaled, vec_t s,
                                                 const void *p, vec_t *lo, vec_t *hi)
{
    addend(dtype, p, lo, hi);
    if (scaled) {
        *lo = vscale(*lo, s);
        *hi = vscale(*hi, s);
    }
}

/* The values a sum starts from: the first row widened, or its product
 * (which makes a NaN quiet itself). */
static MOEPERM_FORCE_INLINE ATTRIBUTES void start(moeperm_dtype dtype, bool scaled, vec_t s,
                                                  const void *p, vec_t *lo, vec_t *hi)
{
    if (scaled)
        term(dtype, scaled, s, p, lo, hi);
    else
        widen(dtype, p, lo, hi);
}

#if USE_MASKING
static MOEPERM_FORCE_INLINE ATTRIBUTES void term_masked(moeperm_dtype dtype, bool scaled,
                                                        vec_t s_lo, vec_t s_hi, const void *p,
                                                        mask_t mask, vec_t *lo, vec_t *hi)
{
    addend_masked(dtype, p, mask, lo, hi);
    if (scaled) {
        *lo = vscale(*lo, s_lo);
        *hi = vscale(*hi, s_hi);
    }
}

/* Row r's multiplier in the lanes of the first `columns` columns of a pair
 * and +0.0 in the others, where the values load as zero: 0 * 0 raises no
 * exception flag that the columns themselves would not (0 * inf would). */
static MOEPERM_FORCE_INLINE ATTRIBUTES void multiplier_masked(moeperm_dtype dtype, bool scaled,
                                                              const moeperm_x86_task *task,
                                                              int64_t r, int64_t columns,
                                                              vec_t *lo, vec_t *hi)
{
    if (!scaled) {
        *lo = *hi = vzero();
    } else if (dtype == MOEPERM_BF16) { /* even columns in lo, odd ones in hi */
        *lo = vset1_lanes(task->scales[r], (columns + 1) / 2);
        *hi = vset1_lanes(task->scales[r], columns / 2);
    } else {
        *lo = vset1_lanes(task->scales[r], columns < VL ? columns : VL);
        *hi = vset1_lanes(task->scales[r], columns < VL ? 0 : columns - VL);
    }
}
#endif

/*
 * One segment (x86.h): two pairs of vectors (4 * VL columns)
 * at a time, then one pair, then the rest as one masked pair (USE_MASKING)
 * and whatever is left one column at a time with fp.h and
 * moeperm_accumulate().  Each lane owns one column, and the listed rows
 * are added to it one at a time, in order; scaled, each row's values are
 * first multiplied by its multiplier.  The rows of the next task are
 * prefetched one cache line per row at a time, a step ahead of where they
 * will be read.
 */
static MOEPERM_FORCE_INLINE ATTRIBUTES void segment(moeperm_dtype dtype, bool scaled,
                                                    const moeperm_x86_task *task,
                                                    const moeperm_x86_task *next, bool stream)
{
    const int64_t size = dtype == MOEPERM_FLOAT ? 4 : 2, cols = 2 * VL;
    const void *const *rows = task->rows;
    int64_t count = task->count, n = task->width;
    int64_t first = task->zero_start ? 0 : 1;
    bool zero_start = task->zero_start;
    char *out = task->out;
    int64_t next_count = next ? next->count : 0, next_n = next ? next->width : 0;
    int64_t j = 0;

    for (; j + 2 * cols <= n; j += 2 * cols) {
        vec_t a0, a1, a2, a3, x0, x1, x2, x3;
        if (j < next_n)
            for (int64_t r = 0; r < next_count; r++)
                for (int64_t b = 0; b < 2 * cols * size; b += 64)
                    _mm_prefetch(at(next->rows[r], j, size) + b, _MM_HINT_T1);
        if (zero_start) {
            a0 = a1 = a2 = a3 = vzero();
        } else {
            vec_t s = multiplier(scaled, task, 0);
            start(dtype, scaled, s, at(rows[0], j, size), &a0, &a1);
            start(dtype, scaled, s, at(rows[0], j + cols, size), &a2, &a3);
        }
        for (int64_t r = first; r < count; r++) {
            vec_t s = multiplier(scaled, task, r);
            term(dtype, scaled, s, at(rows[r], j, size), &x0, &x1);
            term(dtype, scaled, s, at(rows[r], j + cols, size), &x2, &x3);
            a0 = vaccumulate(a0, x0);
            a1 = vaccumulate(a1, x1);
            a2 = vaccumulate(a2, x2);
            a3 = vaccumulate(a3, x3);
        }
        narrow(dtype, a0, a1, out + j * size, stream);
        narrow(dtype, a2, a3, out + (j + cols) * size, stream);
    }
    for (; j + cols <= n; j += cols) {
        vec_t a0, a1, x0, x1;
        if (zero_start)
            a0 = a1 = vzero();
        else
            start(dtype, scaled, multiplier(scaled, task, 0), at(rows[0], j, size), &a0, &a1);
        for (int64_t r = first; r < count; r++) {
            term(dtype, scaled, multiplier(scaled, task, r), at(rows[r], j, size), &x0, &x1);
            a0 = vaccumulate(a0, x0);
            a1 = vaccumulate(a1, x1);
        }
        narrow(dtype, a0, a1, out + j * size, stream);
    }
#if USE_MASKING
    /* The lanes past the end load as zero and are never stored, and a
     * masked load does not fault on them. */
    if (j < n) {
        mask_t mask = (mask_t)((UINT64_C(1) << (n - j)) - 1);
        vec_t a0, a1, x0, x1, s_lo, s_hi;
        if (zero_start) {
            a0 = a1 = vzero();
        } else if (scaled) {
            multiplier_masked(dtype, scaled, task, 0, n - j, &s_lo, &s_hi);
            term_masked(dtype, scaled, s_lo, s_hi, at(rows[0], j, size), mask, &a0, &a1);
        } else {
            widen_masked(dtype, at(rows[0], j, size), mask, &a0, &a1);
        }
        for (int64_t r = first; r < count; r++) {
            multiplier_masked(dtype, scaled, task, r, n - j, &s_lo, &s_hi);
            term_masked(dtype, scaled, s_lo, s_hi, at(rows[r], j, size), mask, &x0, &x1);
            a0 = vaccumulate(a0, x0);
            a1 = vaccumulate(a1, x1);
        }
        narrow_masked(dtype, a0, a1, out + j * size, mask);
        j = n;
    }
#endif
    for (; j < n; j++) {
        float sum = 0.0f;
        if (!zero_start && scaled)
            sum = scale_one(moeperm_widen(dtype, rows[0], j), task->scales[0]);
        else if (!zero_start)
            sum = moeperm_widen(dtype, rows[0], j);
        for (int64_t r = first; r < count; r++) {
            float x = moeperm_widen(dtype, rows[r], j);
            sum = moeperm_accumulate(sum, scaled ? scale_one(x, task->scales[r]) : x);
        }
        moeperm_narrow(dtype, out, j, sum);
    }
}

static ATTRIBUTES void segment_f32(const moeperm_x86_task *task,
                                                    const moeperm_x86_task *next, bool stream)
{
    segment(MOEPERM_FLOAT, false, task, next, stream);
}

static ATTRIBUTES void segment_f16(const moeperm_x86_task *task,
                                                    const moeperm_x86_task *next, bool stream)
{
    segment(MOEPERM_FLOAT16, false, task, next, stream);
}

static ATTRIBUTES void segment_bf16(const moeperm_x86_task *task,
                                                     const moeperm_x86_task *next, bool stream)
{
    segment(MOEPERM_BF16, false, task, next, stream);
}

static ATTRIBUTES void scaled_segment_f32(const moeperm_x86_task *task,
                                                           const moeperm_x86_task *next,
                                                           bool stream)
{
    segment(MOEPERM_FLOAT, true, task, next, stream);
}

static ATTRIBUTES void scaled_segment_f16(const moeperm_x86_task *task,
                                                           const moeperm_x86_task *next,
                                                           bool stream)
{
    segment(MOEPERM_FLOAT16, true, task, next, stream);
}

static ATTRIBUTES void scaled_segment_bf16(const moeperm_x86_task *task,
                                                            const moeperm_x86_task *next,
                                                            bool stream)
{
    segment(MOEPERM_BF16, true, task, next, stream);
}

/* The conversions alone, through the same widen and narrow steps; the
 * bf16 ones undo and redo the pair's even / odd layout through memory. */
static ATTRIBUTES void bf16_to_float(const uint16_t *src, float *dst, size_t n)
{
    size_t i = 0;
    for (; i + 2 * VL <= n; i += 2 * VL) {
        vec_t even, odd;
        float e[VL], o[VL];
        widen_bf16(src + i, &even, &odd);
        vstoreu(e, even);
        vstoreu(o, odd);
        for (size_t w = 0; w < VL; w++) {
            dst[i + 2 * w] = e[w];
            dst[i + 2 * w + 1] = o[w];
        }
    }
    for (; i < n; i++)
        dst[i] = fp_bf16_to_float(src[i]);
}

static ATTRIBUTES void fp16_to_float(const uint16_t *src, float *dst, size_t n)
{
    size_t i = 0;
    for (; i + 2 * VL <= n; i += 2 * VL) {
        vec_t lo, hi;
        widen_f16(src + i, &lo, &hi);
        vstoreu(dst + i, lo);
        vstoreu(dst + i + VL, hi);
    }
    for (; i < n; i++)
        dst[i] = fp_fp16_to_float(src[i]);
}

static ATTRIBUTES void float_to_bf16(const float *src, uint16_t *dst, size_t n)
{
    size_t i = 0;
    for (; i + 2 * VL <= n; i += 2 * VL) {
        float e[VL], o[VL];
        for (size_t w = 0; w < VL; w++) {
            e[w] = src[i + 2 * w];
            o[w] = src[i + 2 * w + 1];
        }
        narrow_bf16(vloadu(e), vloadu(o), dst + i, false);
    }
    for (; i < n; i++)
        dst[i] = fp_float_to_bf16(src[i]);
}

static ATTRIBUTES void float_to_fp16(const float *src, uint16_t *dst, size_t n)
{
    size_t i = 0;
    for (; i + 2 * VL <= n; i += 2 * VL)
        narrow_f16(vloadu(src + i), vloadu(src + i + VL), dst + i, false);
    for (; i < n; i++)
        dst[i] = fp_float_to_fp16(src[i]);
}
