/*
 * outputs.h - what `run`, `compare` and `check` share: buffers for a
 * case's outputs, the case as a backend problem writing into them, and
 * where output files go or come from.  The verdict on the outputs is the
 * golden library's (moeperm_golden_judge()).
 */
#ifndef MOEPERM_TOOLS_OUTPUTS_H
#define MOEPERM_TOOLS_OUTPUTS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <moeperm/golden.h>

#include "backend.h"

/* Buffers for c's outputs (role output), zeroed, one per output in c's
 * order: what the operator leaves untouched stays 0, as in golden files. */
typedef struct case_outputs {
    void *data[MOEPERM_GOLDEN_MAX_TENSORS];
    const moeperm_golden_tensor *like[MOEPERM_GOLDEN_MAX_TENSORS]; /* the golden tensor each stands for */
    size_t count;
} case_outputs;

/* Allocates them.  Returns 0, or -1 with a sentence in err. */
int case_outputs_alloc(const moeperm_golden_case *c, case_outputs *o, char *err, size_t err_len);

/* The number of outputs of c: more than one go into a directory. */
size_t case_output_count(const moeperm_golden_case *c);
void case_outputs_free(case_outputs *o);

/* The backend problem of c (its inputs loaded) writing into o. */
void case_problem(const moeperm_golden_case *c, const case_outputs *o, backend_problem *p);

/* Where output i of o goes or comes from, given the path the user named
 * (--out, compare's PATH, an --outputs directory): the path itself unless
 * dir, else path/<output name>.bin (or .npy when that exists and the .bin
 * does not).  malloc'd. */
char *case_output_path(const case_outputs *o, size_t i, const char *path,
                       bool dir);

#endif
