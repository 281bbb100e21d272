/*
 * candidates.c - the bookkeeping of a diagnosis: how much of what differs
 * a model reproduces and how much it contradicts, and the best finding of
 * each hypothesis so far.
 */
#include <stdio.h>
#include <string.h>

#include "golden/judge/diagnose/model.h"

static GOLDEN_BITS_INLINE void tally_row(moeperm_dtype dt, const golden_diag_data *d,
                                          uint64_t base, const void *m_row, golden_diag_tally *t)
{
    for (int64_t c = 0; c < d->cols; c++) {
        uint64_t e = golden_bits_load(dt, d->expected, base + (uint64_t)c);
        uint64_t a = golden_bits_load(dt, d->actual, base + (uint64_t)c);
        uint64_t m = golden_bits_load(dt, m_row, (uint64_t)c);
        if (!golden_bits_same(dt, m, a, d->strict_nan))
            t->contradicted++;
        else if (!golden_bits_same(dt, a, e, d->strict_nan))
            t->explained++;
    }
}

void golden_diag_tally_rows(const golden_diag_data *d, const int64_t *rows, size_t n,
                            const void *model, golden_diag_tally *t)
{
    size_t es = moeperm_dtype_size(d->dtype), row_bytes = (size_t)d->cols * es;
    for (size_t i = 0; i < n; i++) {
        uint64_t base = (uint64_t)rows[i] * (uint64_t)d->cols;
        const uint8_t *m_row = (const uint8_t *)model + i * row_bytes;
        /* A row the model reproduces bit for bit explains all its
         * differing elements and contradicts nothing. */
        if (memcmp(m_row, (const uint8_t *)d->actual + base * es, row_bytes) == 0)
            t->explained += d->row_differ[rows[i]];
        else
            GOLDEN_BITS_SPECIALISE(d->dtype, tally_row, d, base, m_row, t);
    }
}

static bool better(const golden_finding *a, const golden_finding *b)
{
    if (a->exact != b->exact)
        return a->exact;
    if (a->explained != b->explained)
        return a->explained > b->explained;
    return a->contradicted < b->contradicted;
}

void golden_diag_offer(golden_diag_candidates *cs, const char *id, int rank, const char *detail,
                       golden_diag_tally t)
{
    golden_finding f;
    memset(&f, 0, sizeof f);
    snprintf(f.id, sizeof f.id, "%s", id);
    snprintf(f.detail, sizeof f.detail, "%s", detail);
    f.explained = t.explained;
    f.contradicted = t.contradicted;
    f.exact = t.contradicted == 0;
    if (f.explained == 0)
        return; /* a model equal to the expected output explains nothing */
    for (size_t i = 0; i < cs->n; i++) {
        if (strcmp(cs->c[i].f.id, id) == 0) {
            if (better(&f, &cs->c[i].f))
                cs->c[i].f = f;
            if (rank < cs->c[i].rank)
                cs->c[i].rank = rank;
            return;
        }
    }
    if (cs->n < GOLDEN_DIAG_MAX_CANDIDATES)
        cs->c[cs->n++] = (golden_diag_candidate){f, rank};
}

void golden_diag_pick_slots(const golden_diag_data *d, const void *ctx, int64_t top_k,
                            golden_diag_contribution contribution, const int64_t *sample,
                            size_t n, int *list, size_t *count)
{
    size_t cap = *count, found = 0;
    for (size_t i = 0, tried = 0; i < n && tried < 8 && found < cap; i++) {
        int64_t t = sample[i];
        if (d->row_differ[t] == 0)
            continue;
        tried++;
        double best = -1;
        int best_k = -1;
        for (int64_t k = 0; k < top_k; k++) {
            double score = 0;
            bool adds = false;
            for (int64_t c = 0; c < d->cols; c++) {
                double g = contribution(ctx, t, k, c);
                if (g != g)
                    continue;
                adds = true;
                uint64_t at = (uint64_t)t * (uint64_t)d->cols + (uint64_t)c;
                double e = golden_bits_double(d->dtype, golden_bits_load(d->dtype, d->expected, at));
                double a = golden_bits_double(d->dtype, golden_bits_load(d->dtype, d->actual, at));
                double diff = (e - a) - g;
                if (diff == diff)
                    score += diff < 0 ? -diff : diff;
            }
            if (adds && (best_k < 0 || score < best)) {
                best = score;
                best_k = (int)k;
            }
        }
        bool known = best_k < 0;
        for (size_t j = 0; j < found && !known; j++)
            known = list[j] == best_k;
        if (!known)
            list[found++] = best_k;
    }
    *count = found;
}

bool golden_diag_probs(const golden_diag_problem *p, int64_t tokens, int64_t *top_k,
                       moeperm_dtype *dtype, const void **data)
{
    const golden_diag_tensor *pr = golden_diag_input(p, "probs");
    *top_k = 1;
    *dtype = MOEPERM_FLOAT;
    *data = NULL;
    if (!pr)
        return true;
    if (pr->ndim != 2 || pr->dims[0] != tokens || !golden_bits_is_float(pr->dtype) ||
        pr->dims[1] < 1 || pr->dims[1] > MOEPERM_MAX_TOP_K || !pr->data)
        return false;
    *top_k = pr->dims[1];
    *dtype = pr->dtype;
    *data = pr->data;
    return true;
}
