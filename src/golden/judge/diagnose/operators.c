/*
 * operators.c - the operators that have models, one line each, and the
 * catalogue: every operator's models followed by the shape-level ones.
 */
#include <pthread.h>
#include <string.h>

#include "golden/judge/diagnose/model.h"

/* Each operator's entry, defined in a file of its own. */
extern const golden_diag_operator golden_diag_permute_grad;
extern const golden_diag_operator golden_diag_permute_tokens;
extern const golden_diag_operator golden_diag_permute_indices;
extern const golden_diag_operator golden_diag_unpermute_op;
extern const golden_diag_operator golden_diag_unpermute_grad_tokens;
extern const golden_diag_operator golden_diag_unpermute_grad_probs;

static const golden_diag_operator *const operators[] = {
    &golden_diag_permute_grad,
    &golden_diag_permute_tokens,
    &golden_diag_permute_indices,
    &golden_diag_unpermute_op,
    &golden_diag_unpermute_grad_tokens,
    &golden_diag_unpermute_grad_probs,
};

const golden_diag_operator *const *golden_diag_operators(size_t *count)
{
    *count = sizeof operators / sizeof operators[0];
    return operators;
}

/* Room for every entry; catalogue_build() stops short of overflowing it. */
#define CATALOGUE_MAX 128

static golden_hypothesis_info catalogue[CATALOGUE_MAX];
static size_t catalogue_count;
static pthread_once_t catalogue_once = PTHREAD_ONCE_INIT;

static void catalogue_build(void)
{
    size_t n = 0, shapes;
    for (size_t o = 0; o < sizeof operators / sizeof operators[0]; o++)
        for (size_t m = 0; m < operators[o]->count && n < CATALOGUE_MAX; m++) {
            /* An operator with models for two outputs lists an id once. */
            const golden_hypothesis_info *info = &operators[o]->models[m].info;
            bool listed = false;
            for (size_t i = 0; i < n && !listed; i++)
                listed = strcmp(catalogue[i].id, info->id) == 0 && catalogue[i].op &&
                         strcmp(catalogue[i].op, info->op) == 0;
            if (!listed)
                catalogue[n++] = *info;
        }
    const golden_hypothesis_info *shape = golden_diag_shape_catalogue(&shapes);
    for (size_t i = 0; i < shapes && n < CATALOGUE_MAX; i++)
        catalogue[n++] = shape[i];
    catalogue_count = n;
}

const golden_hypothesis_info *golden_diagnosis_catalogue(size_t *count)
{
    pthread_once(&catalogue_once, catalogue_build);
    *count = catalogue_count;
    return catalogue;
}
