/*
 * permute_grad_models.h - MoeTokenPermuteGrad's models of known kernel
 * bugs: the run they rearrange (pg_ctx) and the models themselves, which
 * the operator's entry in the diagnosis (permute_grad.c) lists.
 */
#ifndef MOEPERM_GOLDEN_JUDGE_DIAGNOSE_PERMUTE_GRAD_MODELS_H
#define MOEPERM_GOLDEN_JUDGE_DIAGNOSE_PERMUTE_GRAD_MODELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "golden/judge/diagnose/model.h"

/* A MoeTokenPermuteGrad run, as its models see it. */
typedef struct pg_ctx {
    golden_diag_sum s;  /* first: the shared variants take it */
    const void *grad;   /* permuted_output_grad [R, H] */
    int32_t *owner; /* owner[row]: a slot position t*K+k that reads it, or -1 (owned) */
    bool x_found;   /* rows-ignored-from: X in [x_lo, x_hi] */
    int64_t x_lo, x_hi;
} pg_ctx;

/* The models (golden_diag_model.compute): each writes the output the buggy
 * kernel would give for the n tokens into out ([n, H] of the case's
 * dtype); ctx is a pg_ctx. */
int golden_pg_acc_in_output_dtype(void *ctx, int variant, const int64_t *tokens, size_t n,
                                  void *out, char *err, size_t err_len);
int golden_pg_truncate(void *ctx, int variant, const int64_t *tokens, size_t n, void *out,
                       char *err, size_t err_len);
int golden_pg_half_away(void *ctx, int variant, const int64_t *tokens, size_t n, void *out,
                        char *err, size_t err_len);
int golden_pg_reversed(void *ctx, int variant, const int64_t *tokens, size_t n, void *out,
                       char *err, size_t err_len);
int golden_pg_pairwise(void *ctx, int variant, const int64_t *tokens, size_t n, void *out,
                       char *err, size_t err_len);
int golden_pg_zero_start(void *ctx, int variant, const int64_t *tokens, size_t n, void *out,
                         char *err, size_t err_len);
int golden_pg_dropped(void *ctx, int variant, const int64_t *tokens, size_t n, void *out,
                      char *err, size_t err_len);
int golden_pg_missing(void *ctx, int variant, const int64_t *tokens, size_t n, void *out,
                      char *err, size_t err_len);
int golden_pg_rows_ignored(void *ctx, int variant, const int64_t *tokens, size_t n, void *out,
                           char *err, size_t err_len);
int golden_pg_ftz(void *ctx, int variant, const int64_t *tokens, size_t n, void *out, char *err,
                  size_t err_len);
int golden_pg_saturate(void *ctx, int variant, const int64_t *tokens, size_t n, void *out,
                       char *err, size_t err_len);

/* rows-ignored-from's search on the sample (golden_diag_model.prepare):
 * the X for which the sample's tokens match, into x_found, x_lo, x_hi. */
int golden_pg_prepare_rows_ignored(void *ctx, const golden_diag_data *d, const int64_t *sample,
                                   size_t n, char *err, size_t err_len);

#endif
