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
 * (--out, compare's PATH, an --outputs directory), into *out (malloc'd):
 * the path itself unless dir, else path/<output name>.bin (or .npy when
 * that exists and the .bin does not).  Returns 0; -1 with a sentence in
 * err when both path/<output>.bin and .npy exist (bad input); -2 when
 * memory runs out. */
int case_output_path(const case_outputs *o, size_t i, const char *path, bool dir, char **out,
                     char *err, size_t err_len);

/* Whether the output file at path is absent: 1 when nothing is there (no
 * file, or a directory above it missing), 0 when something is (the
 * reader then says whether it is an output), -1 with a sentence in err
 * when that cannot be known (a directory that may not be searched, a link
 * loop, a file where a directory should be) or a symbolic link leads
 * nowhere: "missing" means absent and nothing else. */
int case_output_absent(const char *path, char *err, size_t err_len);

/* Whether file is one of c's own golden files (an output or exact
 * tensor, however spelled: a link, another path, the case directory as
 * the outputs directory): 1 with a sentence in err, else 0.  Judging the
 * golden outputs against themselves always passes. */
int case_output_is_golden(const moeperm_golden_case *c, const char *file, char *err,
                          size_t err_len);

/* Appends to *files (*count malloc'd paths, the array realloc'd) the files
 * a command reads as the outputs of the case in case_dir from at: at
 * itself for a case of one output, unless always_dir; else
 * at/<output>.bin and at/<output>.npy for each output the manifest names
 * (at alone when the manifest cannot be read).  They are what no report
 * may replace (cli_output_path()).  Returns 0, or -1 when memory runs
 * out. */
int case_output_files(const char *case_dir, const char *at, bool always_dir, char ***files,
                      size_t *count);

#endif
