/*
 * internal.h - what the files of libmoeperm-golden share and golden.h does
 * not show: manifest parsing and emitting, the per-operator checks, and
 * the small helpers every file reports through.
 */
#ifndef MOEPERM_GOLDEN_INTERNAL_H
#define MOEPERM_GOLDEN_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <moeperm/golden.h>

#include "golden/fileio.h"

/*
 * golden_manifest_parse() parses the manifest text read from
 * manifest_path into *c (op, attributes, names, tensors without data);
 * sha[i] receives the hash the manifest gives c->tensors[i].  Returns 0 or
 * -1 with a sentence in err starting with manifest_path.
 */
int golden_manifest_parse(const char *manifest_path, const char *text, golden_case *c,
                          char sha[][GOLDEN_SHA256_HEX], char *err, size_t err_len);

/* c's manifest as a malloc'd string of *size bytes, hashing every tensor's
 * data (NULL when memory runs out). */
char *golden_manifest_text(const golden_case *c, size_t *size);

/* A shape as the manifest writes it, "[64, 7168]". */
void golden_format_shape(char *buf, size_t len, const int64_t *dims, size_t ndim);

/* golden_dtype_parse() without the aliases: the names files carry. */
bool golden_dtype_parse_canonical(const char *name, moeperm_dtype *dtype);

/* The tensors that come and go together (probs, probs_grad and its exact
 * values): refuses a case that has one without the other, with a sentence
 * starting with where. */
int golden_check_optional_tensors(const golden_case *c, char *err, size_t err_len,
                                  const char *where);

/* The chip of a MoeTokenUnpermuteGrad case: its attributes, the library's
 * defaults where they are 0. */
moeperm_chip golden_chip_of(const golden_attrs *attrs);

/* Whether path names a numpy file (it ends in ".npy"). */
bool golden_is_npy_name(const char *path);

/* Reads a tensor file (raw, or .npy by its name) shaped and typed like
 * `like`, hashing the whole file into hex; what prefixes messages. */
int golden_tensor_file_read(const char *path, const char *what, const golden_tensor *like,
                            void **data, char hex[GOLDEN_SHA256_HEX], char *err, size_t err_len);

/* For a case made with one of the adversarial value kinds (values, the
 * recipe's name for it), which scenario column h holds: its number in
 * *scenario and a few words on what it tests; NULL for other kinds. */
const char *golden_scenario_name(const char *values, int64_t column, int *scenario);

/* The length of the well-formed UTF-8 sequence at p (no overlong forms, no
 * surrogates, nothing above U+10FFFF), its code point in *cp; 0 when p does
 * not start one.  Never reads past a NUL. */
size_t golden_utf8_sequence(const unsigned char *p, uint32_t *cp);

#endif
