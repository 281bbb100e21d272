/*
 * manifest.h - case.json both ways: parsed into a moeperm_golden_case with
 * every claim checked that can be checked without the tensor files, and
 * written byte-stable.
 */
#ifndef MOEPERM_GOLDEN_CASE_MANIFEST_H
#define MOEPERM_GOLDEN_CASE_MANIFEST_H

#include <stddef.h>

#include <moeperm/golden.h>

#include "golden/common/sha256.h"

/*
 * golden_manifest_parse() parses the manifest text read from
 * manifest_path into *c (op, attributes, names, tensors without data);
 * sha[i] receives the hash the manifest gives c->tensors[i].  Returns 0 or
 * -1 with a sentence in err starting with manifest_path.
 */
int golden_manifest_parse(const char *manifest_path, const char *text, moeperm_golden_case *c,
                          char sha[][GOLDEN_SHA256_HEX], char *err, size_t err_len);

/* Whether a case's chip attributes hold together: a chip name, when
 * there is one, is one moeperm_chip_by_name() knows, and ub_bytes and
 * vector_cores are its numbers.  The reader refuses a manifest that breaks
 * this, and the writers refuse to write one.  Returns 0, or -1 with a
 * sentence (starting "attrs.chip") in err. */
int golden_attrs_check_chip(const moeperm_golden_attrs *attrs, char *err, size_t err_len);

/* c's manifest as a malloc'd string of *size bytes, sha[i] the hash of
 * c->tensors[i] (NULL when memory runs out). */
char *golden_manifest_text(const moeperm_golden_case *c, const char sha[][GOLDEN_SHA256_HEX],
                           size_t *size);

#endif
