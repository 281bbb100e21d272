/*
 * case.c - reading a golden case: its manifest (manifest.c), then the
 * tensor files it names, each checked for size and sha256, and finally the
 * operator's own first phase, so that nothing downstream (a backend, the
 * judge) ever sees a case that lies about itself.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "golden/internal.h"

/* A manifest is a few hundred bytes; anything far larger is not one. */
#define MANIFEST_MAX_BYTES ((size_t)1 << 20)

const char *moeperm_golden_dtype_name(moeperm_dtype dtype)
{
    return moeperm_dtype_name(dtype); /* the library's names are the manifest's */
}

bool golden_dtype_parse_canonical(const char *name, moeperm_dtype *dtype)
{
    static const moeperm_dtype known[] = {MOEPERM_FLOAT, MOEPERM_FLOAT16, MOEPERM_BF16,
                                          MOEPERM_INT8,  MOEPERM_INT32,   MOEPERM_INT64,
                                          MOEPERM_FLOAT64};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        if (strcmp(name, moeperm_golden_dtype_name(known[i])) == 0) {
            *dtype = known[i];
            return true;
        }
    }
    return false;
}

bool moeperm_golden_dtype_parse(const char *name, moeperm_dtype *dtype)
{
    static const struct {
        const char *alias;
        moeperm_dtype dtype;
    } aliases[] = {{"fp32", MOEPERM_FLOAT}, {"fp16", MOEPERM_FLOAT16},
                   {"bfloat16", MOEPERM_BF16}, {"fp64", MOEPERM_FLOAT64}};
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (strcmp(name, aliases[i].alias) == 0) {
            *dtype = aliases[i].dtype;
            return true;
        }
    return golden_dtype_parse_canonical(name, dtype);
}

moeperm_chip golden_chip_of(const moeperm_golden_attrs *attrs)
{
    moeperm_chip chip = {MOEPERM_CHIP_A2_UB_BYTES, MOEPERM_CHIP_A2_VECTOR_CORES};
    if (attrs->ub_bytes)
        chip.ub_bytes = attrs->ub_bytes;
    if (attrs->vector_cores)
        chip.vector_cores = attrs->vector_cores;
    return chip;
}

int golden_check_optional_tensors(const moeperm_golden_case *c, char *err, size_t err_len,
                                  const char *where)
{
    if (c->op != MOEPERM_OP_UNPERMUTE_GRAD)
        return 0;
    bool probs = moeperm_golden_case_tensor_const(c, "probs") != NULL;
    bool grad = moeperm_golden_case_tensor_const(c, "probs_grad") != NULL;
    bool exact = moeperm_golden_case_tensor_const(c, "probs_grad_exact") != NULL;
    if (probs != grad) {
        snprintf(err, err_len, "%s: tensors.%s is there without tensors.%s: probs and "
                 "probs_grad come together", where, probs ? "probs" : "probs_grad",
                 probs ? "probs_grad" : "probs");
        return -1;
    }
    if (exact && !grad) {
        snprintf(err, err_len, "%s: tensors.probs_grad_exact is there without "
                 "tensors.probs_grad", where);
        return -1;
    }
    return 0;
}

void moeperm_golden_case_free(moeperm_golden_case *c)
{
    if (!c)
        return;
    free(c->dir);
    free(c->manifest_path);
    free(c->name);
    free(c->description);
    free(c->generator);
    free(c->command);
    free(c->recipe.routing);
    free(c->recipe.values);
    free(c->recipe.probs_values);
    for (size_t i = 0; i < c->tensor_count; i++) {
        free(c->tensors[i].file);
        free(c->tensors[i].path);
        free(c->tensors[i].data);
    }
    memset(c, 0, sizeof *c);
}

/* dir/file, malloc'd, without doubling a slash dir already ends with
 * ("c1/" gives "c1/case.json", not "c1//case.json"). */
static char *join_dir(const char *dir, const char *file)
{
    size_t n = strlen(dir);
    return golden_strdup_printf("%s%s%s", dir, n > 0 && dir[n - 1] == '/' ? "" : "/", file);
}

/* Reads t's file (its path noted before) when load wants its role, and
 * checks its size and hash either way unless nothing is loaded at all: the
 * golden side of a case must be whole even when only the inputs are kept. */
static int load_tensor(const char *manifest, moeperm_golden_tensor *t, const char *sha, unsigned load,
                       char *err, size_t err_len)
{
    bool keep = (t->role == MOEPERM_GOLDEN_ROLE_INPUT && (load & MOEPERM_GOLDEN_LOAD_INPUTS)) ||
                (t->role != MOEPERM_GOLDEN_ROLE_INPUT && (load & MOEPERM_GOLDEN_LOAD_OUTPUTS));
    char hex[GOLDEN_SHA256_HEX], what[96], inner[768];
    void *data = NULL;
    snprintf(what, sizeof what, "tensors.%s", t->name);
    if (golden_tensor_file_read(t->path, what, t, &data, hex, inner, sizeof inner) != 0) {
        snprintf(err, err_len, "%s: %s", manifest, inner);
        return -1;
    }
    if (strcasecmp(hex, sha) != 0) {
        free(data);
        snprintf(err, err_len, "%s: tensors.%s.sha256 is %s, but %s hashes to %s", manifest,
                 t->name, sha, t->file, hex);
        return -1;
    }
    if (keep)
        t->data = data;
    else
        free(data);
    return 0;
}

int moeperm_golden_case_read(const char *dir, unsigned load, moeperm_golden_case *c, char *err, size_t err_len)
{
    memset(c, 0, sizeof *c);
    /* "" would become "/case.json": a case at the root that nobody named. */
    if (dir[0] == '\0') {
        snprintf(err, err_len, "the case directory is an empty string; name a directory "
                               "holding case.json");
        return -1;
    }
    char *manifest = join_dir(dir, "case.json");
    char *text = NULL;
    char sha[MOEPERM_GOLDEN_MAX_TENSORS][GOLDEN_SHA256_HEX];
    if (!manifest) {
        snprintf(err, err_len, "out of memory reading %s", dir);
        return -1;
    }
    if (golden_read_text(manifest, MANIFEST_MAX_BYTES, &text, err, err_len) != 0) {
        free(manifest);
        return -1;
    }
    int rc = golden_manifest_parse(manifest, text, c, sha, err, err_len);
    free(text);
    c->manifest_path = manifest;
    c->dir = golden_strdup_printf("%s", dir);
    if (rc == 0 && !c->dir) {
        snprintf(err, err_len, "out of memory reading %s", dir);
        rc = -1;
    }
    for (size_t i = 0; rc == 0 && i < c->tensor_count; i++) {
        c->tensors[i].path = join_dir(dir, c->tensors[i].file);
        if (!c->tensors[i].path) {
            snprintf(err, err_len, "out of memory reading %s", dir);
            rc = -1;
        }
    }
    for (size_t i = 0; rc == 0 && load != MOEPERM_GOLDEN_LOAD_NONE && i < c->tensor_count; i++)
        rc = load_tensor(manifest, &c->tensors[i], sha[i], load, err, err_len);
    /* The operator's own checks need the inputs (indices are checked for
     * range and uniqueness); without them only the manifest was asked for. */
    if (rc == 0 && (load & MOEPERM_GOLDEN_LOAD_INPUTS)) {
        char inner[768];
        moeperm_status st = moeperm_golden_check_reference(c, inner, sizeof inner);
        if (st != MOEPERM_SUCCESS) {
            snprintf(err, err_len, "%s: the operator refuses the case (%s): %s", manifest,
                     moeperm_status_name(st), inner);
            rc = -1;
        }
    }
    if (rc != 0)
        moeperm_golden_case_free(c);
    return rc;
}
