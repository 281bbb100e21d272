/*
 * runner.c - the operator on rearranged data: the models never redo the
 * operator's arithmetic, they choose which rows go into which slot, in
 * what order, with a +0.0 row or a gap, and let libmoeperm's public
 * two-phase API do every addition and narrowing.
 */
#include "golden/judge/diagnose/runner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Runs MoeTokenPermuteGrad in dtype c on n tokens of kp slots: the rows
 * the operands name are copied (converted to c) into a fresh
 * permuted_output_grad, dropped slots get indices past its rows. */
int golden_diag_run(moeperm_dtype c, int64_t h, int64_t n, int64_t kp,
                    const golden_diag_operand *ops, void *out, char *err, size_t err_len)
{
    int64_t total = n * kp, rows = 0;
    size_t es = moeperm_dtype_size(c);
    for (int64_t i = 0; i < total; i++)
        rows += ops[i].src != NULL || ops[i].row >= 0;
    uint8_t *grad = malloc(rows > 0 ? (size_t)rows * (size_t)h * es : 1);
    int32_t *idx = malloc((size_t)total * sizeof *idx);
    if (!grad || !idx) {
        free(grad);
        free(idx);
        snprintf(err, err_len, "out of memory for a diagnosis model");
        return -1;
    }
    int64_t next = 0, dropped = rows;
    for (int64_t i = 0; i < total; i++) {
        const golden_diag_operand *o = &ops[i];
        if (!o->src && o->row < 0) {
            idx[i] = (int32_t)dropped++;
            continue;
        }
        uint8_t *dst = grad + (size_t)next * (size_t)h * es;
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
        idx[i] = (int32_t)next++;
    }
    int64_t gd[2] = {rows, h}, id[1] = {total}, od[2] = {n, h};
    moeperm_tensor *gt = moeperm_tensor_create(gd, 2, c, NULL, 0, rows > 0 ? grad : NULL);
    moeperm_tensor *it = moeperm_tensor_create(id, 1, MOEPERM_INT32, NULL, 0, idx);
    moeperm_tensor *ot = moeperm_tensor_create(od, 2, c, NULL, 0, out);
    moeperm_status st = MOEPERM_ERR_INNER;
    if (gt && it && ot) {
        uint64_t ws;
        moeperm_executor *plan;
        st = moeperm_token_permute_grad_get_workspace_size(gt, it, kp, false, ot, &ws, &plan);
        if (st == MOEPERM_SUCCESS)
            st = moeperm_token_permute_grad(NULL, ws, plan, NULL);
    }
    moeperm_tensor_destroy(gt);
    moeperm_tensor_destroy(it);
    moeperm_tensor_destroy(ot);
    free(grad);
    free(idx);
    if (st != MOEPERM_SUCCESS) {
        snprintf(err, err_len, "a diagnosis model could not run the operator: %s",
                 moeperm_last_error());
        return -1;
    }
    return 0;
}

/* out = a + b row by row, one addition in dtype c per element (a top_k = 2
 * run); a row present on one side only is copied, on neither side it is
 * +0.0 and absent.  pout may alias pa. */
int golden_diag_add_rows(moeperm_dtype c, int64_t h, int64_t n, const void *a, const bool *pa,
                         const void *b, const bool *pb, void *out, bool *pout, char *err,
                         size_t err_len)
{
    golden_diag_operand *ops = malloc((size_t)n * 2 * sizeof *ops);
    if (!ops) {
        snprintf(err, err_len, "out of memory for a diagnosis model");
        return -1;
    }
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

