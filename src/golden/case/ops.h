/*
 * ops.h - what the case room knows about each operator beyond golden.h:
 * every file a case directory may hold, the tensors that come and go
 * together, and MoeTokenUnpermuteGrad's chip.
 */
#ifndef MOEPERM_GOLDEN_CASE_OPS_H
#define MOEPERM_GOLDEN_CASE_OPS_H

#include <stddef.h>

#include <moeperm/golden.h>

/* Every file name a case directory may hold (moeperm_golden_case_file_name()):
 * the tensor files of every operator, then case.json, so a removal cut
 * short never leaves a manifest whose files are gone.  The list is static;
 * the first call builds it (call it before any signal handler needs it). */
size_t golden_case_file_list(const char *const **names);

/* The tensors that come and go together (probs, probs_grad and its exact
 * values): refuses a case that has one without the other, with a sentence
 * starting with where. */
int golden_check_optional_tensors(const moeperm_golden_case *c, char *err, size_t err_len,
                                  const char *where);

/* The chip of a MoeTokenUnpermuteGrad case: its attributes, the library's
 * defaults where they are 0. */
moeperm_chip golden_chip_of(const moeperm_golden_attrs *attrs);

#endif
