/*
 * case.h - one golden case in memory: the manifest of "moeperm-golden/1"
 * (docs/golden-format.md) and its three tensors.
 *
 * Reading checks everything a manifest claims (format, dtypes, shapes,
 * file sizes, sha256) and refuses file names that leave the case
 * directory, so a backend never sees a case that lies about itself.
 */
#ifndef MOEPERM_GOLDEN_CASE_H
#define MOEPERM_GOLDEN_CASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <moeperm/moeperm.h>

#define GOLDEN_FORMAT "moeperm-golden/1"
#define GOLDEN_OP "MoeTokenPermuteGrad"

/* The largest value a manifest may give tokens_num, hidden_size or num_rows
 * (2^40): far above anything a device holds, low enough that the products
 * of two of them and an element size cannot overflow int64 or size_t. */
#define GOLDEN_MAX_DIM (INT64_C(1) << 40)

typedef struct golden_case {
    char *dir;         /* the case directory as given (owned) */
    char *name;        /* manifest "name" (owned) */
    char *description; /* manifest "description" (owned) */
    char *generator;   /* manifest "generator" (owned) */
    char *command;     /* manifest "command": how to regenerate it (owned, may be NULL) */
    moeperm_dtype dtype; /* of permuted_output_grad and input_grad */
    int64_t tokens_num;  /* T */
    int64_t top_k;       /* K */
    int64_t hidden_size; /* H */
    int64_t num_rows;    /* R <= T*K */
    bool padded_mode;
    uint64_t seed;

    /* The generator's recipe, manifest "recipe" (optional; NULL and 0 for a
     * case written elsewhere): what a re-implementation needs besides the
     * seed to rebuild the inputs (docs/golden-format.md, section 3). */
    char *routing;       /* "routed", "identity", "reverse", "random" (owned) */
    char *values;        /* the value kind, e.g. "normal" (owned) */
    int64_t num_experts; /* routed only */
    int64_t hot_percent; /* routed only */

    /* The files golden_case_read() took the manifest and the tensors from
     * (owned; NULL for a case the generator filled in): what a command
     * writing an output must not overwrite. */
    char *manifest_path, *grad_path, *indices_path, *output_path;

    /* Loaded tensors, contiguous row-major, owned (NULL when empty). */
    void *permuted_output_grad; /* [R, H] of dtype */
    int32_t *sorted_indices;    /* [T*K] */
    void *input_grad;           /* [T, H] of dtype: the golden output */
} golden_case;

/* Bytes of one element of a case's dtype (2 or 4), 0 for another dtype. */
size_t golden_dtype_size(moeperm_dtype dtype);
/* The manifest name of dtype ("float32", "float16", "bf16", "int32"). */
const char *golden_dtype_name(moeperm_dtype dtype);
/* Parses a manifest dtype name of a gradient tensor; false if unknown. */
bool golden_dtype_parse(const char *name, moeperm_dtype *dtype);

/* Element counts and byte sizes of the three tensors; valid after a
 * successful read or for a case the generator filled in. */
size_t golden_grad_bytes(const golden_case *c);    /* permuted_output_grad */
size_t golden_indices_bytes(const golden_case *c); /* sorted_indices */
size_t golden_output_bytes(const golden_case *c);  /* input_grad */

/*
 * golden_case_read() reads the case in directory dir into *c: the manifest
 * and, when load_output is true, the golden input_grad too (run needs only
 * the inputs).  An empty dir is refused, not read as "/case.json".
 * Returns 0, or -1 with one sentence in err naming the file, field and bad
 * value; *c is then empty (golden_case_free() is harmless).
 */
int golden_case_read(const char *dir, bool load_output, golden_case *c, char *err,
                     size_t err_len);
/* The manifest alone, checked as golden_case_read() checks it, with the
 * tensor files' paths noted but the files neither read nor hashed (the
 * tensor pointers stay NULL): cheap enough to do for a whole corpus before
 * anything runs. */
int golden_case_read_manifest(const char *dir, golden_case *c, char *err, size_t err_len);

/* golden_case_free() frees what *c owns and empties it. */
void golden_case_free(golden_case *c);

/*
 * golden_case_write() writes c (manifest and the three tensors) as the case
 * directory path, atomically: into a temporary sibling directory first,
 * then renamed.  An existing path is replaced only when force is true and
 * it is a case: a directory holding case.json and nothing but the files
 * this function writes (golden_case_files), or an empty directory; anything
 * else is refused with a sentence naming the directory and its first
 * (byte order) unexpected entry.  The old case is parked under a dot name
 * beside path and removed, file by file, after the new one is in place.
 *
 * Returns 0 on success; -1 with a sentence in err on failure, when nothing
 * at path changed and the temporary directory is removed; or 1 when the new
 * case is in place but the old one could not be removed: err then names
 * the dot-directory it is kept under (readers skip it), for the caller to
 * report.  Nothing that was there is ever lost.
 */
int golden_case_write(const char *path, const golden_case *c, bool force, char *err,
                      size_t err_len);

/*
 * golden_find_cases() finds every directory at or below root that holds a
 * case.json, in byte order of their paths (deterministic whatever the file
 * system's order).  Symbolic links to directories and to case.json are
 * followed; each directory is entered once, by its (st_dev, st_ino), so a
 * link loop ends and a directory reachable under two names is listed under
 * the one met first when each directory's entries are taken in byte order.
 * Names starting with '.' are skipped.  *dirs receives a malloc'd array of
 * *count malloc'd paths (free with golden_free_paths()).  Returns 0 or -1
 * with a sentence in err.
 */
int golden_find_cases(const char *root, char ***dirs, size_t *count, char *err, size_t err_len);
void golden_free_paths(char **paths, size_t count);

#endif
