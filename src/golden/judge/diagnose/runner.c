/*
 * runner.c - the operators on rearranged data: the models never redo the
 * operators' arithmetic, they choose which rows go into which slot, in
 * what order, with which prob, a +0.0 row or a gap, and let libmoeperm's
 * public two-phase API do every multiplication, addition and narrowing.
 */
#include "golden/judge/diagnose/runner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden/judge/bits.h"

static int oom(char *err, size_t err_len)
{
    snprintf(err, err_len, "out of memory for a diagnosis model");
    return -1;
}

moeperm_tensor *golden_diag_tensor_add(golden_diag_tensors *ts, const int64_t *dims,
                                       uint64_t ndim, moeperm_dtype dtype, const void *data)
{
    moeperm_tensor *t = ts->n < GOLDEN_DIAG_TENSORS
                            ? moeperm_tensor_create(dims, ndim, dtype, NULL, 0, (void *)data)
                            : NULL;
    if (t)
        ts->t[ts->n++] = t;
    else
        ts->made = false;
    return t;
}

int golden_diag_tensors_run(golden_diag_tensors *ts, moeperm_status first, uint64_t ws,
                            moeperm_executor *plan, char *err, size_t err_len)
{
    moeperm_status st = first;
    if (st == MOEPERM_SUCCESS)
        st = moeperm_executor_run(NULL, ws, plan, NULL);
    for (size_t i = 0; i < ts->n; i++)
        moeperm_tensor_destroy(ts->t[i]);
    ts->n = 0;
    if (st == MOEPERM_SUCCESS)
        return 0;
    snprintf(err, err_len, "a diagnosis model could not run the operator: %s",
             moeperm_last_error());
    return -1;
}

/* A problem's rows gathered: the rows the operands name, copied (converted
 * to c) into a fresh [rows, h] tensor in operand order, and indices that
 * are a permutation of 0..total-1 with the skipped operands past the rows,
 * as the operators' sorted_indices want. */
typedef struct gathered {
    uint8_t *data;
    int32_t *idx;
    int64_t rows;
    bool owned; /* data is a copy (else the operands' own buffer) */
} gathered;

static int gather(moeperm_dtype c, int64_t h, int64_t total, const golden_diag_operand *ops,
                  gathered *g, char *err, size_t err_len)
{
    size_t es = moeperm_dtype_size(c);
    /* Rows 0, 1, 2, ... of one buffer of dtype c are already the tensor:
     * no copy. */
    bool identity = total > 0 && ops[0].src && ops[0].dtype == c;
    for (int64_t i = 0; i < total && identity; i++)
        identity = ops[i].src == ops[0].src && ops[i].dtype == c && ops[i].row == i;
    g->idx = malloc(total > 0 ? (size_t)total * sizeof *g->idx : 1);
    if (!g->idx)
        return oom(err, err_len);
    if (identity) {
        g->data = (uint8_t *)ops[0].src;
        g->owned = false;
        g->rows = total;
        for (int64_t i = 0; i < total; i++)
            g->idx[i] = (int32_t)i;
        return 0;
    }
    g->owned = true;
    g->rows = 0;
    for (int64_t i = 0; i < total; i++)
        g->rows += !golden_diag_is_skip(ops[i]);
    g->data = malloc(g->rows > 0 ? (size_t)g->rows * (size_t)h * es : 1);
    if (!g->data) {
        free(g->idx);
        return oom(err, err_len);
    }
    int64_t next = 0, dropped = g->rows;
    for (int64_t i = 0; i < total; i++) {
        const golden_diag_operand *o = &ops[i];
        if (golden_diag_is_skip(*o)) {
            g->idx[i] = (int32_t)dropped++;
            continue;
        }
        uint8_t *dst = g->data + (size_t)next * (size_t)h * es;
        if (!o->src) {
            memset(dst, 0, (size_t)h * es);
        } else {
            size_t ses = moeperm_dtype_size(o->dtype);
            const uint8_t *src = (const uint8_t *)o->src + (size_t)o->row * (size_t)h * ses;
            if (o->dtype == c)
                memcpy(dst, src, (size_t)h * es);
            else
                moeperm_convert(src, o->dtype, dst, c, (size_t)h);
        }
        g->idx[i] = (int32_t)next++;
    }
    return 0;
}

static void gathered_free(gathered *g)
{
    if (g->owned)
        free(g->data);
    free(g->idx);
}

int golden_diag_run(moeperm_dtype c, int64_t h, int64_t n, int64_t kp,
                    const golden_diag_operand *ops, void *out, char *err, size_t err_len)
{
    gathered g;
    if (gather(c, h, n * kp, ops, &g, err, err_len) != 0)
        return -1;
    int64_t gd[2] = {g.rows, h}, id[1] = {n * kp}, od[2] = {n, h};
    golden_diag_tensors ts = GOLDEN_DIAG_TENSORS_INIT;
    moeperm_tensor *gt = golden_diag_tensor_add(&ts, gd, 2, c, g.rows > 0 ? g.data : NULL);
    moeperm_tensor *it = golden_diag_tensor_add(&ts, id, 1, MOEPERM_INT32, g.idx);
    moeperm_tensor *ot = golden_diag_tensor_add(&ts, od, 2, c, out);
    uint64_t ws = 0;
    moeperm_executor *plan = NULL;
    moeperm_status st =
        ts.made ? moeperm_token_permute_grad_get_workspace_size(gt, it, kp, false, ot, &ws, &plan)
                : MOEPERM_ERR_INNER;
    int rc = golden_diag_tensors_run(&ts, st, ws, plan, err, err_len);
    gathered_free(&g);
    return rc;
}

/* MoeTokenUnpermute on gathered rows. */
static int unpermute_gathered(moeperm_dtype c, moeperm_dtype pd, int64_t h, int64_t n, int64_t kp,
                              const gathered *g, const void *probs, void *out, char *err,
                              size_t err_len)
{
    int64_t gd[2] = {g->rows, h}, id[1] = {n * kp}, pdims[2] = {n, kp}, od[2] = {n, h};
    golden_diag_tensors ts = GOLDEN_DIAG_TENSORS_INIT;
    moeperm_tensor *gt = golden_diag_tensor_add(&ts, gd, 2, c, g->rows > 0 ? g->data : NULL);
    moeperm_tensor *it = golden_diag_tensor_add(&ts, id, 1, MOEPERM_INT32, g->idx);
    moeperm_tensor *pt = golden_diag_tensor_add(&ts, pdims, 2, pd, probs);
    moeperm_tensor *ot = golden_diag_tensor_add(&ts, od, 2, c, out);
    uint64_t ws = 0;
    moeperm_executor *plan = NULL;
    moeperm_status st = ts.made ? moeperm_token_unpermute_get_workspace_size(
                                      gt, it, pt, false, NULL, 0, ot, &ws, &plan)
                                : MOEPERM_ERR_INNER;
    return golden_diag_tensors_run(&ts, st, ws, plan, err, err_len);
}

int golden_diag_unpermute(moeperm_dtype c, moeperm_dtype pd, int64_t h, int64_t n, int64_t kp,
                          const golden_diag_operand *ops, const void *probs, void *out,
                          char *err, size_t err_len)
{
    if (!probs)
        return golden_diag_run(c, h, n, kp, ops, out, err, err_len);
    gathered g;
    if (gather(c, h, n * kp, ops, &g, err, err_len) != 0)
        return -1;
    int rc = unpermute_gathered(c, pd, h, n, kp, &g, probs, out, err, err_len);
    gathered_free(&g);
    return rc;
}

/* The rows whose prob is +-0, through MoeTokenUnpermuteGrad with top_k = 1:
 * its permuted_tokens_grad is row * p, never skipped.  The rows stand in
 * for permuted_tokens too: probs_grad, computed on the way, is not read. */
static int scale_by_zero(moeperm_dtype c, moeperm_dtype pd, int64_t h, int64_t n,
                         const golden_diag_operand *ops, const void *probs, void *out,
                         char *err, size_t err_len)
{
    gathered g;
    if (gather(c, h, n, ops, &g, err, err_len) != 0)
        return -1;
    size_t ps = moeperm_dtype_size(pd);
    void *pg = malloc((size_t)n * ps + 1);
    if (!pg) {
        gathered_free(&g);
        return oom(err, err_len);
    }
    int64_t rd[2] = {n, h}, id[1] = {n}, pdims[2] = {n, 1};
    golden_diag_tensors ts = GOLDEN_DIAG_TENSORS_INIT;
    moeperm_tensor *xt = golden_diag_tensor_add(&ts, rd, 2, c, g.data);
    moeperm_tensor *gt = golden_diag_tensor_add(&ts, rd, 2, c, g.data);
    moeperm_tensor *it = golden_diag_tensor_add(&ts, id, 1, MOEPERM_INT32, g.idx);
    moeperm_tensor *pt = golden_diag_tensor_add(&ts, pdims, 2, pd, probs);
    moeperm_tensor *ot = golden_diag_tensor_add(&ts, rd, 2, c, out);
    moeperm_tensor *pgt = golden_diag_tensor_add(&ts, pdims, 2, pd, pg);
    uint64_t ws = 0;
    moeperm_executor *plan = NULL;
    moeperm_status st = ts.made ? moeperm_token_unpermute_grad_get_workspace_size(
                                      xt, gt, it, pt, false, NULL, 0, ot, pgt, &ws, &plan)
                                : MOEPERM_ERR_INNER;
    int rc = golden_diag_tensors_run(&ts, st, ws, plan, err, err_len);
    free(pg);
    gathered_free(&g);
    return rc;
}

/* The rows of out whose prob is +-0 (and whose operand is not skipped),
 * redone through scale_by_zero(). */
static int redo_zero_probs(moeperm_dtype c, moeperm_dtype pd, int64_t h, int64_t n,
                           const golden_diag_operand *ops, const void *rows, const void *probs,
                           void *out, char *err, size_t err_len)
{
    size_t es = moeperm_dtype_size(c), ps = moeperm_dtype_size(pd), row = (size_t)h * es;
    uint64_t magnitude = golden_bits_sign(pd) - 1;
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++)
        m += (!ops || !golden_diag_is_skip(ops[i])) &&
             (golden_bits_load(pd, probs, (uint64_t)i) & magnitude) == 0;
    if (m == 0)
        return 0;
    golden_diag_operand *sub = malloc((size_t)m * sizeof *sub);
    uint8_t *sub_probs = malloc((size_t)m * ps);
    int64_t *where = malloc((size_t)m * sizeof *where);
    uint8_t *res = malloc((size_t)m * row);
    int rc = -1;
    if (!sub || !sub_probs || !where || !res) {
        oom(err, err_len);
        goto done;
    }
    m = 0;
    for (int64_t i = 0; i < n; i++) {
        uint64_t p = golden_bits_load(pd, probs, (uint64_t)i);
        if ((ops && golden_diag_is_skip(ops[i])) || (p & magnitude) != 0)
            continue;
        sub[m] = ops ? ops[i] : (golden_diag_operand){rows, c, i};
        golden_bits_store(pd, sub_probs, (uint64_t)m, p);
        where[m++] = i;
    }
    if (scale_by_zero(c, pd, h, m, sub, sub_probs, res, err, err_len) != 0)
        goto done;
    for (int64_t j = 0; j < m; j++)
        memcpy((uint8_t *)out + (size_t)where[j] * row, res + (size_t)j * row, row);
    rc = 0;
done:
    free(sub);
    free(sub_probs);
    free(where);
    free(res);
    return rc;
}

int golden_diag_scale_rows(moeperm_dtype c, moeperm_dtype pd, int64_t h, int64_t n,
                           const golden_diag_operand *ops, const void *probs, void *out,
                           char *err, size_t err_len)
{
    size_t es = moeperm_dtype_size(c), ps = moeperm_dtype_size(pd), row = (size_t)h * es;
    int64_t kept = 0;
    for (int64_t i = 0; i < n; i++)
        kept += !golden_diag_is_skip(ops[i]);
    if (kept == n) {
        /* every row at once (its own buffer when the rows are one in
         * order); a zero prob gives +0.0 here and is redone below */
        if (golden_diag_unpermute(c, pd, h, n, 1, ops, probs, out, err, err_len) != 0)
            return -1;
        return redo_zero_probs(c, pd, h, n, ops, NULL, probs, out, err, err_len);
    }
    if (kept == 0)
        return 0;
    golden_diag_operand *sub = malloc((size_t)kept * sizeof *sub);
    uint8_t *sub_probs = malloc((size_t)kept * ps);
    uint8_t *res = malloc((size_t)kept * row);
    int rc = -1;
    if (!sub || !sub_probs || !res) {
        oom(err, err_len);
        goto done;
    }
    for (int64_t i = 0, m = 0; i < n; i++) {
        if (golden_diag_is_skip(ops[i]))
            continue;
        sub[m] = ops[i];
        golden_bits_store(pd, sub_probs, (uint64_t)m++, golden_bits_load(pd, probs, (uint64_t)i));
    }
    if (golden_diag_scale_rows(c, pd, h, kept, sub, sub_probs, res, err, err_len) != 0)
        goto done;
    for (int64_t i = 0, m = 0; i < n; i++)
        if (!golden_diag_is_skip(ops[i]))
            memcpy((uint8_t *)out + (size_t)i * row, res + (size_t)m++ * row, row);
    rc = 0;
done:
    free(sub);
    free(sub_probs);
    free(res);
    return rc;
}

int golden_diag_scale_block(moeperm_dtype c, moeperm_dtype pd, int64_t h, int64_t n,
                            const void *rows, moeperm_dtype rd, const void *probs, void *out,
                            char *err, size_t err_len)
{
    size_t count = (size_t)n * (size_t)h;
    gathered g = {(uint8_t *)rows, malloc((size_t)(n > 0 ? n : 1) * sizeof(int32_t)), n, false};
    if (g.idx && rd != c) {
        g.data = malloc(count * moeperm_dtype_size(c) + 1);
        g.owned = true;
        if (g.data)
            moeperm_convert(rows, rd, g.data, c, count);
    }
    if (!g.idx || !g.data) {
        gathered_free(&g);
        return oom(err, err_len);
    }
    for (int64_t i = 0; i < n; i++)
        g.idx[i] = (int32_t)i;
    int rc = unpermute_gathered(c, pd, h, n, 1, &g, probs, out, err, err_len);
    if (rc == 0)
        rc = redo_zero_probs(c, pd, h, n, NULL, g.data, probs, out, err, err_len);
    gathered_free(&g);
    return rc;
}

int golden_diag_add_rows(moeperm_dtype c, int64_t h, int64_t n, const void *a, const bool *pa,
                         const void *b, const bool *pb, void *out, bool *pout, char *err,
                         size_t err_len)
{
    golden_diag_operand *ops = malloc((size_t)n * 2 * sizeof *ops + 1);
    if (!ops)
        return oom(err, err_len);
    for (int64_t i = 0; i < n; i++) {
        golden_diag_operand oa = {a, c, i}, ob = {b, c, i};
        bool ha = !pa || pa[i], hb = !pb || pb[i];
        ops[2 * i] = ha ? oa : hb ? ob : GOLDEN_DIAG_SKIP;
        ops[2 * i + 1] = ha && hb ? ob : GOLDEN_DIAG_SKIP;
        if (pout)
            pout[i] = ha || hb;
    }
    int rc = golden_diag_run(c, h, n, 2, ops, out, err, err_len);
    free(ops);
    return rc;
}

int golden_diag_tree(int variant, int64_t kp, int64_t n, int64_t h, float *slots, bool *present,
                     float *out, char *err, size_t err_len)
{
    size_t block = (size_t)n * (size_t)h;
    if (kp == 0) {
        memset(out, 0, block * sizeof *out);
        return 0;
    }
    float *scratch = malloc((size_t)kp * block * sizeof(float) + 1);
    bool *scratch_present = malloc((size_t)kp * (size_t)n * sizeof(bool) + 1);
    float *cur = slots, *other = scratch;
    bool *pcur = present, *pother = scratch_present;
    int rc = -1;
    if (!scratch || !scratch_present) {
        oom(err, err_len);
        goto done;
    }
    for (int64_t m = kp; m > 1;) {
        int64_t half = variant == 0 ? m / 2 : (m + 1) / 2, next = (m + 1) / 2;
        for (int64_t i = 0; i < next; i++) {
            int64_t a = variant == 0 ? 2 * i : i, b = variant == 0 ? 2 * i + 1 : i + half;
            float *dst = other + (size_t)i * block;
            bool *pdst = pother + (size_t)i * (size_t)n;
            if (b >= m) { /* the odd one out goes up alone */
                memcpy(dst, cur + (size_t)a * block, block * sizeof(float));
                memcpy(pdst, pcur + (size_t)a * (size_t)n, (size_t)n * sizeof(bool));
                continue;
            }
            if (golden_diag_add_rows(MOEPERM_FLOAT, h, n, cur + (size_t)a * block,
                                     pcur + (size_t)a * (size_t)n, cur + (size_t)b * block,
                                     pcur + (size_t)b * (size_t)n, dst, pdst, err, err_len) != 0)
                goto done;
        }
        float *sw = cur;
        cur = other;
        other = sw;
        bool *pw = pcur;
        pcur = pother;
        pother = pw;
        m = next;
    }
    /* A row with nothing present came out of add_rows as +0.0; a lone
     * absent slot 0 was zeroed by the caller. */
    for (int64_t i = 0; i < n; i++) {
        if (pcur[i])
            memcpy(out + (size_t)i * (size_t)h, cur + (size_t)i * (size_t)h,
                   (size_t)h * sizeof(float));
        else
            memset(out + (size_t)i * (size_t)h, 0, (size_t)h * sizeof(float));
    }
    rc = 0;
done:
    free(scratch);
    free(scratch_present);
    return rc;
}

static uint16_t narrow_rne(moeperm_dtype dtype, float v)
{
    return dtype == MOEPERM_BF16 ? moeperm_float_to_bf16(v) : moeperm_float_to_fp16(v);
}

static double widen(moeperm_dtype dtype, uint16_t bits)
{
    return dtype == MOEPERM_BF16 ? moeperm_bf16_to_float(bits) : moeperm_fp16_to_float(bits);
}

static uint16_t narrow_truncate(moeperm_dtype dtype, float v)
{
    uint16_t r = narrow_rne(dtype, v);
    if (v != v)
        return r;
    double w = widen(dtype, r);
    /* Rounded away from zero: one step back (infinity steps back to the
     * largest finite value, as truncation never overflows). */
    if ((w < 0 ? -w : w) > (v < 0 ? -(double)v : (double)v))
        r--;
    return r;
}

static uint16_t narrow_half_away(moeperm_dtype dtype, float v)
{
    uint16_t r = narrow_rne(dtype, v);
    if (v != v || golden_bits_is_inf(dtype, r))
        return r;
    double w = widen(dtype, r), x = v;
    double aw = w < 0 ? -w : w, ax = x < 0 ? -x : x;
    if (aw >= ax)
        return r; /* exact, or already rounded away */
    uint16_t up = (uint16_t)(r + 1);
    double au = widen(dtype, up);
    au = au < 0 ? -au : au;
    return ax - aw == au - ax ? up : r; /* a tie RNE sent toward zero */
}

void golden_diag_narrow(moeperm_dtype dtype, golden_diag_rule rule, const float *in, void *out,
                        size_t n)
{
    for (size_t i = 0; i < n; i++)
        golden_bits_store(dtype, out, i,
                          rule == GOLDEN_DIAG_TRUNCATE ? narrow_truncate(dtype, in[i])
                                                       : narrow_half_away(dtype, in[i]));
}

uint64_t golden_diag_one(moeperm_dtype dtype)
{
    return dtype == MOEPERM_FLOAT ? 0x3f800000u : dtype == MOEPERM_FLOAT16 ? 0x3c00u : 0x3f80u;
}
