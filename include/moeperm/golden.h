/*
 * golden.h - the public API of libmoeperm-golden: golden cases of the
 * moeperm operators on disk and in memory, their generator and built-in
 * suites, and the judge that compares an output with a case's golden one
 * bit for bit and reports where and how they differ.
 *
 * A kernel test harness (a gtest program, a simulator driver) links this
 * library to load a case, run its own kernel on the case's inputs and
 * compare in-process, without shelling out to the `moeperm` tool; the tool
 * and the Python package use the same functions.  docs/golden-format.md
 * describes the files, docs/judging.md the reports.
 *
 * Conventions: a function that can fail returns 0 (or a count) on success
 * and -1 on failure, with one sentence naming the file, field and bad value
 * in the caller's err buffer (err_len bytes, always NUL-terminated).
 * Structures are the caller's; functions that fill them say how to free
 * them.  Every function is safe to call from several threads on distinct
 * objects, except the writers, which install process-wide signal handlers
 * to clean up temporaries (see moeperm_golden_case_write()).
 *
 * Depends on libmoeperm (moeperm.h), json-c and OpenSSL's libcrypto.
 */
#ifndef MOEPERM_GOLDEN_H
#define MOEPERM_GOLDEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <moeperm/moeperm.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Everything declared here is the library's interface (its other symbols
 * are hidden). */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

/* ---------------------------------------------------------------------- */
/* Cases                                                                  */
/* ---------------------------------------------------------------------- */

/* The format a manifest's "format" key names.  Version 2 names the operator
 * and every tensor's role; version 1 cases (MoeTokenPermuteGrad only) are
 * read as they are. */
#define MOEPERM_GOLDEN_FORMAT "moeperm-golden/2"
#define MOEPERM_GOLDEN_FORMAT_V1 "moeperm-golden/1"

/* The largest extent a manifest may give a dimension (2^40): far above
 * anything a device holds, low enough that products of two of them and an
 * element size cannot overflow 64 bits. */
#define MOEPERM_GOLDEN_MAX_DIM (INT64_C(1) << 40)

/* The most tensors a case has (MoeTokenUnpermuteGrad has seven). */
#define MOEPERM_GOLDEN_MAX_TENSORS 8

/* The room for a chip's name in a case (moeperm_chip_names() spells the
 * longest in 14 bytes), its terminating NUL included. */
#define MOEPERM_GOLDEN_CHIP_NAME_MAX 32

/* What a tensor of a case is to the operator. */
typedef enum moeperm_golden_role {
    MOEPERM_GOLDEN_ROLE_INPUT = 1,  /* read by the operator */
    MOEPERM_GOLDEN_ROLE_OUTPUT = 2, /* written by it: judged bit for bit */
    MOEPERM_GOLDEN_ROLE_EXACT = 3   /* float64 values of an output before rounding: they
                             * inform a report, they are never judged */
} moeperm_golden_role;

/* "input", "output", "exact" (the manifest's words). */
const char *moeperm_golden_role_name(moeperm_golden_role role);

typedef struct moeperm_golden_tensor {
    const char *name;  /* the operator's name for it, e.g. "sorted_indices" (static) */
    moeperm_golden_role role;
    moeperm_dtype dtype;
    uint64_t ndim;
    int64_t shape[MOEPERM_MAX_DIMS];
    char *file;  /* the file name in the case directory (owned) */
    char *path;  /* the file read (owned), NULL for a case built in memory */
    void *data;  /* contiguous row-major elements (owned), NULL when not loaded or empty */
    size_t bytes; /* of data: the product of shape and the element size */
} moeperm_golden_tensor;

/* The operator's attributes: what is not a tensor.  Only the fields of the
 * case's operator mean anything; the others are 0. */
typedef struct moeperm_golden_attrs {
    int64_t top_k;          /* MoeTokenPermuteGrad: num_topk, as given (-1 means 1) */
    int64_t num_out_tokens; /* MoeTokenPermute, as given (<= 0 counts from N*K) */
    bool padded_mode;       /* as given: MoeTokenPermute refuses true, the others ignore it */
    uint64_t restore_shape_len; /* MoeTokenUnpermute(Grad): 0 when absent */
    int64_t restore_shape[MOEPERM_MAX_DIMS];
    /* MoeTokenUnpermuteGrad with probs: the chip whose reduction order the
     * golden probs_grad follows (docs/unpermute-grad.md); 0 = the default */
    int64_t ub_bytes, vector_cores;
    /* MoeTokenUnpermuteGrad: the name of that chip when the case was made
     * for a named one (moeperm_chip_names()), "" otherwise.  ub_bytes and
     * vector_cores then hold its numbers; a manifest whose name and numbers
     * disagree is refused, by the reader and by the writers. */
    char chip[MOEPERM_GOLDEN_CHIP_NAME_MAX];
} moeperm_golden_attrs;

/* How the generator made the inputs, besides the seed (informative: read
 * leniently, never needed to judge).  NULL / 0 when unknown. */
typedef struct moeperm_golden_recipe {
    char *routing;       /* "routed", "identity", "reverse", "random" */
    char *values;        /* the value kind of the first input, e.g. "normal" */
    char *probs_values;  /* the value kind of probs, when the case has them */
    int64_t num_experts; /* routed only */
    int64_t hot_percent; /* routed only */
    bool sentinels;      /* MoeTokenPermute: some expert ids are the index dtype's min/max */
    bool huge_indices;   /* every third entry of sorted_indices far above the rows */
} moeperm_golden_recipe;

typedef struct moeperm_golden_case {
    char *dir;           /* the case directory as given (owned) */
    char *manifest_path; /* its case.json (owned) */
    int format_version;  /* 1 or 2 */
    moeperm_op op;
    char *name;        /* manifest "name" (owned) */
    char *description; /* manifest "description" (owned) */
    char *generator;   /* manifest "generator" (owned) */
    char *command;     /* manifest "command": how to regenerate it (owned, may be NULL) */
    uint64_t seed;
    moeperm_golden_attrs attrs;
    moeperm_golden_recipe recipe;
    /* In the operator's argument order: inputs, outputs, then exact values. */
    moeperm_golden_tensor tensors[MOEPERM_GOLDEN_MAX_TENSORS];
    size_t tensor_count;
} moeperm_golden_case;

/* What moeperm_golden_case_read() loads besides the manifest. */
enum {
    MOEPERM_GOLDEN_LOAD_INPUTS = 1,  /* the input tensors' data */
    MOEPERM_GOLDEN_LOAD_OUTPUTS = 2, /* the golden outputs' (and exact values') data */
    MOEPERM_GOLDEN_LOAD_ALL = 3,
    MOEPERM_GOLDEN_LOAD_NONE = 0 /* the manifest alone: every file's path is noted, none is read */
};

/*
 * moeperm_golden_case_read() reads the case in directory dir into *c: the manifest,
 * checked in full (format, operator, attributes, every tensor's role,
 * dtype, shape and file name), and the tensors that load asks for, each
 * checked for size and sha256.  The shapes are then put to the operator's
 * own first phase (libmoeperm), so a case the reference would refuse is
 * refused here with the library's sentence.  Files may be raw .bin or
 * numpy .npy (docs/golden-format.md).  Every file is opened through one
 * handle on dir, opened first, so a case replaced meanwhile by
 * moeperm_golden_case_write(), which swaps the directory's name, is read
 * whole, the old one or the new one, never the manifest of one with the
 * tensors of the other; a read that fails because the replacement removed
 * the old case's files is made again on the new one.  Returns 0, or -1
 * with a sentence in err; *c is then empty (moeperm_golden_case_free() is
 * harmless).
 */
int moeperm_golden_case_read(const char *dir, unsigned load, moeperm_golden_case *c, char *err, size_t err_len);

/* moeperm_golden_case_free() frees what *c owns and empties it. */
void moeperm_golden_case_free(moeperm_golden_case *c);

/* The tensor of c called name, or NULL when c has none. */
moeperm_golden_tensor *moeperm_golden_case_tensor(moeperm_golden_case *c, const char *name);
const moeperm_golden_tensor *moeperm_golden_case_tensor_const(const moeperm_golden_case *c, const char *name);

/* The number of elements of t (the product of its shape). */
uint64_t moeperm_golden_tensor_elements(const moeperm_golden_tensor *t);

/*
 * moeperm_golden_case_write() writes c (manifest and every tensor with data) as the
 * case directory path, atomically: into a temporary sibling directory
 * (".NAME.tmp.XXXXXX") first, then put in place, so the name holds either
 * the old case or the new one, whole.  An existing path is replaced only
 * when force is true and it is a case: a directory holding case.json and
 * nothing but files a case can hold (moeperm_golden_case_file_name()), or an empty
 * directory; anything else is refused with a sentence naming the directory
 * and its first (byte order) unexpected entry.  The new case and the old
 * one swap names in one step (renameat2 RENAME_EXCHANGE), so path holds a
 * whole case at every moment, and the old one is then removed, file by
 * file; where the file system cannot swap, the old case is parked under
 * ".NAME.old.XXXXXX" and the new one renamed in (docs/reliability.md says
 * what each step leaves if the process is killed).  A name whose temporary
 * would not fit (NAME_MAX, PATH_MAX) is refused before anything is made,
 * and so is a path inside another case (a directory above it holding a
 * case.json: a case directory holds only its own files), and a case that
 * moeperm_golden_case_read() would refuse: a string that is not UTF-8
 * (name, description, generator, command, recipe), a dimension beyond
 * MOEPERM_GOLDEN_MAX_DIM (an empty tensor too), a tensor whose bytes are
 * not its shape's, anything else its manifest reader refuses, and inputs
 * the operator refuses.
 * While it runs, a signal that ends the process removes the temporaries
 * and leaves the old case or the new one in place.
 *
 * Returns 0 on success; -1 with a sentence in err when nothing at path
 * changed; or 1 when the new case is in place but the old one could not be
 * removed entirely: err then says which of its files are left and under
 * which dot name (readers skip it).  Not thread safe (signal handlers and
 * a process-wide table of temporaries).
 */
int moeperm_golden_case_write(const char *path, const moeperm_golden_case *c, bool force, char *err,
                      size_t err_len);

/*
 * moeperm_golden_case_target_check() makes the checks of path that
 * moeperm_golden_case_write() makes before it writes anything (an existing
 * path without force; with force, one that is not a case; a name whose
 * temporary would not fit; a path inside another case), and creates
 * nothing: a writer of many cases checks every one of them first, so that
 * a refusal comes before any case is written.  Returns 0, or -1 with a
 * sentence in err.
 */
int moeperm_golden_case_target_check(const char *path, bool force, char *err, size_t err_len);

/* Whether name is a file a case directory may hold: case.json, or a
 * tensor file ("<tensor>.bin" or "<tensor>.npy") of any operator. */
bool moeperm_golden_case_file_name(const char *name);

/*
 * moeperm_golden_find_cases() finds every directory at or below root that holds a
 * case.json (any kind of entry by that name, a dangling link included: the
 * reader then says what is wrong with it), in byte order of their paths
 * (the same whatever the file system's order).  Symbolic links to
 * directories and to case.json are followed; each directory is entered
 * once, by its (st_dev, st_ino), so a link loop back up the tree ends.
 * Names starting with '.' are skipped (the temporaries of interrupted
 * writes), and so are dangling links and entries removed while the walk
 * runs.  Anything else that keeps the walk from seeing into a directory
 * (EACCES, ELOOP, ENAMETOOLONG, an I/O error) fails it, as does a case
 * parked by an interrupted replacement (".NAME.old.XXXXXX") whose NAME is
 * absent, and a case inside another case's directory (the walk looks
 * below case directories too; the writers never put one there): a corpus
 * is never judged with a case silently missing.  *dirs
 * receives a malloc'd array of *count malloc'd paths (free with
 * moeperm_golden_free_paths()).  Returns 0 or -1 with a sentence in err naming the
 * path and the reason.
 */
int moeperm_golden_find_cases(const char *root, char ***dirs, size_t *count, char *err, size_t err_len);
void moeperm_golden_free_paths(char **paths, size_t count);

/* ---------------------------------------------------------------------- */
/* Tensor files                                                           */
/* ---------------------------------------------------------------------- */

/*
 * moeperm_golden_tensor_read_file() reads the file at path as a tensor shaped and
 * typed like `like` (its dtype and shape; its data is not used): a raw
 * little-endian file of exactly that many bytes, or a numpy .npy file
 * (format 1.0, 2.0 or 3.0, little-endian, C order) of that dtype (bf16 as
 * '<u2', '<i2' or '<V2') and shape.  *data receives the elements
 * (malloc'd; NULL for an empty tensor).  A wrong size, dtype, shape or
 * order is refused with a sentence naming the file and what it holds; a
 * raw file that starts like a numpy file gets the hint to name it .npy.
 * Returns 0 or -1 with a sentence in err.
 */
int moeperm_golden_tensor_read_file(const char *path, const moeperm_golden_tensor *like, void **data,
                            char *err, size_t err_len);

/*
 * moeperm_golden_tensor_from_file() reads a user's own tensor file into t (its
 * dtype, ndim, shape, bytes and data; name, role and file are left to the
 * caller): a .npy file, whose header gives the shape and, when dtype is
 * negative, the dtype ('<f4' float32, '<f2' float16, '<u2', '<i2' or '<V2'
 * bf16, '|i1' int8, '<i4' int32, '<i8' int64); or a raw file, for which
 * dtype and the ndim dims of shape must be given.  With ndim > 0 a .npy
 * file must have exactly that shape, and with dtype >= 0 a descr that
 * carries that dtype: a header that disagrees is refused.  Any dimension
 * beyond MOEPERM_GOLDEN_MAX_DIM is refused, an empty tensor's too (no
 * case could hold it).  A file that cannot be opened or is not a regular
 * file (a directory, a FIFO) is refused with the reason.  Returns 0, or
 * -1 with a sentence in err (t->data is then NULL).
 */
int moeperm_golden_tensor_from_file(const char *path, int dtype, const int64_t *shape, uint64_t ndim,
                            moeperm_golden_tensor *t, char *err, size_t err_len);

/*
 * moeperm_golden_tensor_write_file() writes the elements at data, shaped and typed
 * like `like`, to path: as a .npy file (format 1.0; bf16 as '<u2') when
 * path ends in ".npy", else raw.  The file appears atomically (a temporary
 * beside it, then renamed) and only whole.  Returns 0 or -1 with a
 * sentence in err.
 */
int moeperm_golden_tensor_write_file(const char *path, const moeperm_golden_tensor *like, const void *data,
                             char *err, size_t err_len);

/* moeperm_golden_write_file_atomic() writes size bytes to path through a temporary
 * file in the same directory and rename(): on failure the temporary is
 * removed and any earlier file at path is untouched.  Something at path
 * that is not a regular file (a link, device, FIFO, socket, directory) is
 * never replaced: that is a failure too.  Returns 0 or -1 with a sentence
 * in err. */
int moeperm_golden_write_file_atomic(const char *path, const void *data, size_t size, char *err,
                             size_t err_len);

/* ---------------------------------------------------------------------- */
/* Operators                                                              */
/* ---------------------------------------------------------------------- */

/* One tensor an operator takes or gives, in its argument order. */
typedef struct moeperm_golden_slot {
    const char *name; /* manifest key and file stem, e.g. "permuted_tokens" */
    moeperm_golden_role role;
    bool optional;    /* probs and what comes with them */
} moeperm_golden_slot;

/* The tensors of op (*count of them), or NULL for an unknown op. */
const moeperm_golden_slot *moeperm_golden_op_slots(moeperm_op op, size_t *count);

/*
 * moeperm_golden_run_reference() computes c's outputs with libmoeperm's public
 * two-phase API: outputs[i] receives the i-th tensor of c whose role is
 * MOEPERM_GOLDEN_ROLE_OUTPUT (contiguous, its shape and dtype), and, where c has
 * exact values, exact[i] the i-th MOEPERM_GOLDEN_ROLE_EXACT tensor (exact may be
 * NULL to skip them).  c's inputs must be loaded.  Returns MOEPERM_SUCCESS
 * or the operator's status with its sentence in err.  Every backend and the
 * generator share this one call of the library per operator.
 */
moeperm_status moeperm_golden_run_reference(const moeperm_golden_case *c, void *const *outputs,
                                    void *const *exact, char *err, size_t err_len);

/*
 * moeperm_golden_case_finish() completes a case whose operator, attributes and
 * inputs are set (a case made from a user's own tensors, or by the
 * generator): it adds the outputs, shaped as the operator shapes them
 * (and, for MoeTokenUnpermuteGrad with probs, the exact values of
 * probs_grad), and computes them with moeperm_golden_run_reference().  Outputs
 * start zeroed, so elements the operator leaves untouched read 0.  Returns
 * 0, or -1 with a sentence in err: the library's, naming the bad value,
 * when the operator refuses the inputs.  c keeps what was added either
 * way; moeperm_golden_case_free() frees it.
 */
int moeperm_golden_case_finish(moeperm_golden_case *c, char *err, size_t err_len);

/* The first phase alone: whether the operator takes c's shapes, dtypes,
 * attributes (and, when they are loaded, indices), with the library's
 * status and sentence when it does not.  Nothing is written. */
moeperm_status moeperm_golden_check_reference(const moeperm_golden_case *c, char *err, size_t err_len);

/* ---------------------------------------------------------------------- */
/* The generator                                                          */
/* ---------------------------------------------------------------------- */

/* How sorted_indices (or, for MoeTokenPermute, the expert ids) are made. */
typedef enum moeperm_golden_routing {
    MOEPERM_GOLDEN_ROUTING_ROUTED,   /* top_k distinct experts per token, some hot */
    MOEPERM_GOLDEN_ROUTING_IDENTITY, /* sorted_indices[i] = i */
    MOEPERM_GOLDEN_ROUTING_REVERSE,  /* sorted_indices[i] = T*K-1-i */
    MOEPERM_GOLDEN_ROUTING_RANDOM,   /* a uniformly random permutation */
    /* Not a permutation (the input domain's edge, docs/operators.md): */
    MOEPERM_GOLDEN_ROUTING_REPEATS,  /* every slot a row drawn from [0, R): rows read by
                                      * several slots, rows no slot names */
    MOEPERM_GOLDEN_ROUTING_SPARSE    /* distinct rows drawn from [0, R), R >= T*K: rows no
                                      * slot names */
} moeperm_golden_routing;

/* The values of a floating-point input, each kind one device question
 * (docs/golden-format.md). */
typedef enum moeperm_golden_values {
    MOEPERM_GOLDEN_VALUES_NORMAL,    /* gradient-like values in (-1, 1), mixed magnitudes */
    MOEPERM_GOLDEN_VALUES_NAN_INF,   /* NaN and infinity propagation */
    MOEPERM_GOLDEN_VALUES_SUBNORMAL, /* subnormal inputs and subnormal sums */
    MOEPERM_GOLDEN_VALUES_OVERFLOW,  /* overflow in the sum and in the narrowing */
    MOEPERM_GOLDEN_VALUES_ROUNDING,  /* RNE ties, cancellation, signed zero */
    MOEPERM_GOLDEN_VALUES_NEGZERO,   /* every element -0.0 */
    MOEPERM_GOLDEN_VALUES_BITS,      /* uniformly random bit patterns */
    /* Kinds whose tensors are made together, keyed by the same draws, so
     * that a token value meets the prob it is meant for: */
    MOEPERM_GOLDEN_VALUES_MASKING,   /* probs +0/-0 exactly where the permuted rows hold inf and NaN */
    MOEPERM_GOLDEN_VALUES_GRAD_INF,  /* inf and NaN in the gradient of every odd token */
    MOEPERM_GOLDEN_VALUES_PRODUCT_ROUNDING,  /* fp32 product ties, cancelling products */
    MOEPERM_GOLDEN_VALUES_PRODUCT_SUBNORMAL, /* products in the fp32 subnormal range */
    MOEPERM_GOLDEN_VALUES_PRODUCT_OVERFLOW,  /* products and sums beyond the largest finite */
    MOEPERM_GOLDEN_VALUES_CANCEL,    /* dot products that cancel: the sum depends on its order */
    MOEPERM_GOLDEN_VALUES_TINY,      /* dot products too small for bf16/fp16: signed zeros */
    MOEPERM_GOLDEN_VALUES_ONE        /* probs: every one 1.0 (the other tensors normal) */
} moeperm_golden_values;

/* Everything that decides a generated case: the same spec gives the same
 * bytes on any machine and any number of threads. */
typedef struct moeperm_golden_spec {
    moeperm_op op;             /* 0 is read as MOEPERM_OP_PERMUTE_GRAD */
    char name[96];             /* the case directory's name */
    char description[256];
    moeperm_dtype dtype;       /* of the tokens or gradients and the outputs */
    bool has_probs;            /* MoeTokenUnpermute(Grad): with routing weights */
    moeperm_dtype probs_dtype; /* their dtype, when has_probs */
    moeperm_dtype index_dtype; /* MoeTokenPermute's expert ids: INT32 or INT64 */
    int64_t tokens_num, top_k, hidden_size;
    int64_t num_rows;          /* rows of the permuted tensor; -1: tokens_num*top_k */
    int64_t num_out_tokens;    /* MoeTokenPermute's attribute, as the device takes it */
    int64_t num_experts;       /* routed only; 0: the default (max(64, 2*top_k)) */
    int hot_percent;           /* routed only: share of picks among the hot eighth */
    bool sentinels;            /* MoeTokenPermute: some ids are the index dtype's min/max */
    moeperm_golden_values values;      /* of the first floating-point input */
    moeperm_golden_values probs_values; /* of probs */
    moeperm_golden_routing routing;
    int64_t ub_bytes, vector_cores; /* MoeTokenUnpermuteGrad's chip; 0: the default */
    uint64_t seed;
    /* The input domain's edge (docs/golden-format.md, "The domain suites"): */
    bool padded_mode;          /* recorded as given: MoeTokenPermute refuses true */
    int64_t num_topk;          /* MoeTokenPermuteGrad's num_topk as recorded: 0 for top_k,
                                * or -1 (which means 1) with top_k 1 */
    int64_t extra_indices;     /* entries of sorted_indices after the first tokens_num*top_k,
                                * which the operator never reads */
    bool huge_indices;         /* every third slot's row far above num_rows (up to
                                * INT32_MAX): dropped slots */
    int64_t hidden_outer;      /* MoeTokenPermute: tokens [T, hidden_outer, H/hidden_outer]
                                * (rank 3); 0 for [T, H] */
    char chip[MOEPERM_GOLDEN_CHIP_NAME_MAX]; /* MoeTokenUnpermuteGrad: a named chip
                                * (moeperm_chip_names()) instead of ub_bytes and
                                * vector_cores; "" for none */
} moeperm_golden_spec;

/* Names as the command line takes them; parse returns false if unknown. */
const char *moeperm_golden_routing_name(moeperm_golden_routing routing);
bool moeperm_golden_routing_parse(const char *name, moeperm_golden_routing *routing);
const char *moeperm_golden_values_name(moeperm_golden_values values);
bool moeperm_golden_values_parse(const char *name, moeperm_golden_values *values);
/* Comma-separated lists of all the names, for usage messages. */
const char *moeperm_golden_routing_names(void);
const char *moeperm_golden_values_names(void);

/* A spec with the defaults of `moeperm golden`: op, dtype and sizes as
 * given, routed over the default experts, normal values, seed 1. */
moeperm_golden_spec moeperm_golden_spec_default(moeperm_op op, moeperm_dtype dtype, int64_t tokens_num,
                                int64_t top_k, int64_t hidden_size);

/* A name for a one-off case from its spec ("bf16-t4-k2-h16-routed-normal-s1"). */
void moeperm_golden_spec_default_name(moeperm_golden_spec *spec);

/*
 * moeperm_golden_spec_check() validates a spec before any work: sizes positive and
 * bounded, num_rows within tokens_num*top_k, enough experts for top_k, the
 * chip (ub_bytes, vector_cores) within the operator's bounds
 * (moeperm_executor_set_chip()), the name a plain directory name, name and
 * description UTF-8 text, dtypes the operator takes.  Returns 0 or -1
 * with a sentence in err.
 */
int moeperm_golden_spec_check(const moeperm_golden_spec *spec, char *err, size_t err_len);

/*
 * moeperm_golden_generate() builds the case of spec in *c: inputs from the
 * counter-based PRNG (docs/golden-format.md), and the outputs from
 * libmoeperm's public API, the bytes moeperm_golden_run_reference() makes.
 * MoeTokenPermute's permuted_tokens is copied from the tokens by the
 * operator's definition (permuted_tokens[sorted_indices[i]] =
 * tokens[i / top_k]) with the sorted_indices libmoeperm makes, a row at a
 * time in order, so that moeperm_golden_generate_write() writes it as it
 * is made.  command, when not NULL, is recorded as the command that
 * regenerates the case.  Returns 0 or -1 with a sentence in err (*c is
 * then empty).
 */
int moeperm_golden_generate(const moeperm_golden_spec *spec, const char *command, moeperm_golden_case *c, char *err,
                    size_t err_len);

/*
 * moeperm_golden_generate_write() is moeperm_golden_generate() then moeperm_golden_case_write(c,
 * path, force): the same files, byte for byte, but each tensor is hashed
 * and written (by two threads of its own) while its later rows and the
 * next tensors are made and while the reference runs, so that making a
 * large case overlaps writing it.  path is checked (and refused without
 * force when it exists) before anything is made.  Returns as moeperm_golden_case_write() does: 0, 1, or
 * -1 when writing failed; or -2 with a sentence in err when spec is
 * refused or generating fails (the library refuses the case, memory runs
 * out).  Nothing at path changes on -1 or -2.  Not thread safe, as
 * moeperm_golden_case_write().
 */
int moeperm_golden_generate_write(const moeperm_golden_spec *spec, const char *command, const char *path,
                          bool force, char *err, size_t err_len);

/*
 * moeperm_golden_spec_command() returns the `moeperm golden` command that
 * regenerates the custom case of spec, as `moeperm golden` and
 * moeperm.golden.Case.generate() record it in the manifest's "command": to
 * be run from the case directory (--out ..), every option spelled out with
 * its documented name (--top-k, --rows, --experts ...) so that it stays
 * true when the defaults change, and the name quoted as one word of a
 * POSIX shell.  The command informs; no reader parses it.  Malloc'd
 * (free()); NULL when memory runs out.  Thread safe.
 */
char *moeperm_golden_spec_command(const moeperm_golden_spec *spec);

/* A built-in suite: a named list of specs, each there for a reason. */
typedef struct moeperm_golden_suite {
    const char *name;
    const char *description;
    bool in_default; /* written by `moeperm golden` without --suite */
} moeperm_golden_suite;

/* The built-in suites, *count of them, in their fixed order. */
const moeperm_golden_suite *moeperm_golden_suites(size_t *count);
const moeperm_golden_suite *moeperm_golden_suite_find(const char *name);

/*
 * moeperm_golden_suite_specs() lists the cases of a suite with the given base seed:
 * *specs is a malloc'd array of *count specs (free()).  Returns 0 or -1
 * when memory runs out.
 */
int moeperm_golden_suite_specs(const moeperm_golden_suite *suite, uint64_t seed, moeperm_golden_spec **specs,
                       size_t *count);

/* moeperm_golden_suite_command() returns the command recorded in the
 * cases of suite written with seed (below DIR/<suite>/<case>): "moeperm
 * golden --out ../.. --suite NAME --seed N --force", run from the case
 * directory.  Malloc'd (free()); NULL when memory runs out. */
char *moeperm_golden_suite_command(const moeperm_golden_suite *suite, uint64_t seed);

/*
 * moeperm_golden_corpus_readme() returns the README.md that `moeperm
 * golden` writes beside the default suites it writes with seed (the
 * repository's golden/README.md): how the corpus is made, checked and
 * regenerated, and every case of every default suite, one line each with
 * its sizes and its description, the suites in their fixed order and the
 * cases in byte order of their names.  Made from the suites' specs, so it
 * lists exactly what is written.  Malloc'd (free()); NULL when memory runs
 * out.  Thread safe.
 */
char *moeperm_golden_corpus_readme(uint64_t seed);

/* The seed `moeperm golden` uses without --seed. */
#define MOEPERM_GOLDEN_DEFAULT_SEED 1

/* ---------------------------------------------------------------------- */
/* The judge                                                              */
/* ---------------------------------------------------------------------- */

/* How many differing elements a report lists one by one. */
#define MOEPERM_GOLDEN_COMPARE_FIRST 8

typedef struct moeperm_golden_diff {
    int64_t token, column;
    uint32_t expected, actual; /* raw bits (16 or 32 of them) */
} moeperm_golden_diff;

struct moeperm_golden_where; /* where the differences lie, as groups (internal) */

typedef struct moeperm_golden_compare_result {
    uint64_t elements;     /* compared */
    uint64_t differing;    /* elements whose bits differ (NaN-aware unless strict) */
    uint64_t nan_mismatch; /* of those, a NaN against a number */
    uint64_t max_ulp;      /* largest ULP distance among differing elements (see below) */
    /* Of the differing elements, those where either value is a NaN or an
     * infinity: never within an ULP tolerance, however close their bits. */
    uint64_t nonfinite_differing;
    moeperm_golden_diff first[MOEPERM_GOLDEN_COMPARE_FIRST];
    size_t first_count;
    char *where; /* malloc'd summary of token and column ranges, NULL if none */
    struct moeperm_golden_where *ranges; /* the same as groups, for the reports (owned) */
    /* What the report calls a row and a column ("token", "column"; static
     * strings; column_noun NULL for a tensor of one dimension). */
    const char *row_noun, *column_noun;
} moeperm_golden_compare_result;

/* What a comparison concludes, given an ULP tolerance. */
typedef enum moeperm_golden_verdict {
    MOEPERM_GOLDEN_VERDICT_SAME,             /* bit for bit (any NaN equals any NaN unless strict) */
    MOEPERM_GOLDEN_VERDICT_WITHIN_TOLERANCE, /* differs, every difference finite and within max_ulp */
    MOEPERM_GOLDEN_VERDICT_DIFFERENT         /* anything further */
} moeperm_golden_verdict;

/*
 * moeperm_golden_compare_verdict() judges r with a tolerance of max_ulp units in
 * the last place: SAME when nothing differs; WITHIN_TOLERANCE when
 * max_ulp > 0 and every differing element is a pair of finite values at
 * most max_ulp apart on the ordered line of moeperm_golden_ulp_distance() (so +0
 * against -0 is 1 ulp, and the largest finite value against infinity is
 * never within); DIFFERENT otherwise.  With max_ulp = 0 it is SAME or
 * DIFFERENT, the bit-exact contract.  Thread safe.
 */
moeperm_golden_verdict moeperm_golden_compare_verdict(const moeperm_golden_compare_result *r, uint64_t max_ulp);

/* "same", "within-tolerance" or "different": the names reports use. */
const char *moeperm_golden_verdict_name(moeperm_golden_verdict verdict);

/*
 * moeperm_golden_ulp_distance() is the distance between two values of dtype on the
 * ordered integer line of the format: bits with sign s and magnitude m map
 * to m when s = 0 and to -m - 1 when s = 1, so +0 and -0 are 1 apart, the
 * largest finite value and infinity are 1 apart, and adjacent values are
 * always 1 apart.  NaNs sit beyond infinity on this line.
 */
uint64_t moeperm_golden_ulp_distance(moeperm_dtype dtype, uint32_t a, uint32_t b);

/*
 * moeperm_golden_compare() compares tokens*hidden elements of dtype (expected is
 * the golden output; tokens and hidden are its rows and columns: a tensor
 * of more dimensions is compared as [shape[0], the product of the rest],
 * one of a single dimension as [shape[0], 1]).  Two NaNs are equal whatever their bits unless
 * strict_nan.  Returns 0 and fills *r, or -1 when memory runs out.  Free
 * with moeperm_golden_compare_free().
 */
int moeperm_golden_compare(moeperm_dtype dtype, int64_t tokens, int64_t hidden, const void *expected,
                   const void *actual, bool strict_nan, moeperm_golden_compare_result *r);
/* moeperm_golden_compare() with the words the report uses for a row and a column
 * (static strings: "row", "slot"...; column_noun NULL when the tensor has
 * one dimension). */
int moeperm_golden_compare_named(moeperm_dtype dtype, int64_t rows, int64_t cols, const void *expected,
                         const void *actual, bool strict_nan, const char *row_noun,
                         const char *column_noun, moeperm_golden_compare_result *r);
void moeperm_golden_compare_free(moeperm_golden_compare_result *r);

/* The value of raw bits of dtype as a float (for messages). */
float moeperm_golden_bits_value(moeperm_dtype dtype, uint32_t bits);

/* moeperm_golden_compare_report() prints the mismatch report (nothing when equal),
 * each line starting with indent. */
void moeperm_golden_compare_report(FILE *f, moeperm_dtype dtype, const moeperm_golden_compare_result *r,
                           const char *indent);

/* A one-line summary ("3 of 4096 elements differ, max 1 ulp, ..."),
 * malloc'd, for JUnit failure messages. */
char *moeperm_golden_compare_summary(moeperm_dtype dtype, const moeperm_golden_compare_result *r);

/* ---------------------------------------------------------------------- */
/* JUnit XML                                                              */
/* ---------------------------------------------------------------------- */

typedef enum moeperm_golden_outcome {
    MOEPERM_GOLDEN_PASS,
    MOEPERM_GOLDEN_MISMATCH, /* a <failure>: bits differ */
    MOEPERM_GOLDEN_ERROR,    /* an <error>: bad case or backend failure */
    MOEPERM_GOLDEN_SKIPPED   /* a <skipped>: not judged (a case made for another chip);
                              * the message says why */
} moeperm_golden_outcome;

typedef struct moeperm_golden_junit moeperm_golden_junit;

/* A collector of one testcase per golden case; NULL when memory runs out. */
moeperm_golden_junit *moeperm_golden_junit_new(const char *suite_name);
/* Adds a testcase: name is the case directory, message the summary line,
 * details the full report (may be NULL).  Returns 0 or -1 (no memory). */
int moeperm_golden_junit_add(moeperm_golden_junit *j, const char *name, double seconds, moeperm_golden_outcome outcome,
                     const char *message, const char *details);
/* Writes the XML to path atomically.  Returns 0 or -1 with a sentence in
 * err. */
int moeperm_golden_junit_write(const moeperm_golden_junit *j, const char *path, char *err, size_t err_len);
void moeperm_golden_junit_free(moeperm_golden_junit *j);

/* Writes s into f with XML escaping, for attributes and text alike.  The
 * output is always well-formed UTF-8 of XML 1.0 characters: valid UTF-8 in
 * s passes through, while each byte of an invalid sequence and each
 * character XML 1.0 cannot carry (control characters other than tab, line
 * feed and carriage return, which become character references; DEL; U+FFFE,
 * U+FFFF) is written as a visible "\xHH" escape of its bytes. */
void moeperm_golden_xml_escape(FILE *f, const char *s);

/* ---------------------------------------------------------------------- */
/* Judging a case's outputs                                               */
/* ---------------------------------------------------------------------- */

typedef struct moeperm_golden_judge_options {
    bool strict_nan;  /* NaNs must match bit for bit (default: any NaN equals any NaN) */
    uint64_t max_ulp; /* elements within this many ulp count as within tolerance;
                       * 0 is the bit-exact contract */
    bool diagnose;    /* test the catalogue of known kernel bugs on what differs */
} moeperm_golden_judge_options;

/* The judgement of one case's outputs (opaque). */
typedef struct moeperm_golden_judgement moeperm_golden_judgement;

/*
 * moeperm_golden_judge() compares every output of c (loaded: its golden outputs,
 * and its inputs too when options->diagnose) with actual[i], the i-th
 * output of c in c's order, contiguous, of the golden output's dtype and
 * shape; computes the error statistics Ascend's precision tools report;
 * and, for outputs that differ and with options->diagnose, names the known
 * kernel bugs that reproduce the difference (docs/judging.md).  For
 * MoeTokenUnpermuteGrad's probs_grad it also says whether each difference
 * stays within the error any order of the reduction could make around the
 * exact dot product ("order": the device sums in another order) or not
 * ("wrong").  Returns 0 with *j set (free with moeperm_golden_judgement_free()),
 * or -1 with a sentence in err.  Thread safe on distinct objects.
 */
int moeperm_golden_judge(const moeperm_golden_case *c, void *const *actual, const moeperm_golden_judge_options *options,
                 moeperm_golden_judgement **j, char *err, size_t err_len);
void moeperm_golden_judgement_free(moeperm_golden_judgement *j);

/* The case's verdict: the worst of its outputs'. */
moeperm_golden_verdict moeperm_golden_judgement_verdict(const moeperm_golden_judgement *j);
/* Its outputs, in the case's order. */
size_t moeperm_golden_judgement_output_count(const moeperm_golden_judgement *j);
const char *moeperm_golden_judgement_output_name(const moeperm_golden_judgement *j, size_t i);
moeperm_golden_verdict moeperm_golden_judgement_output_verdict(const moeperm_golden_judgement *j, size_t i);
const moeperm_golden_compare_result *moeperm_golden_judgement_output_compare(const moeperm_golden_judgement *j,
                                                              size_t i);
/* The findings of output i, best first: their stable ids ("missing-slot",
 * "token-block-shift", "order", ...), one sentence each, and whether the
 * model reproduces the output exactly. */
size_t moeperm_golden_judgement_finding_count(const moeperm_golden_judgement *j, size_t i);
const char *moeperm_golden_judgement_finding_id(const moeperm_golden_judgement *j, size_t i, size_t k);
const char *moeperm_golden_judgement_finding_detail(const moeperm_golden_judgement *j, size_t i, size_t k);
bool moeperm_golden_judgement_finding_exact(const moeperm_golden_judgement *j, size_t i, size_t k);

/*
 * moeperm_golden_judgement_report() writes the text report `moeperm compare` and
 * `moeperm check` print (nothing when every output is the same): per output
 * that differs, the diagnosis first, then the counts, the first
 * differences and where they lie; each line starts with indent.
 * moeperm_golden_judgement_summary() returns one line for the case (malloc'd; NULL
 * when memory runs out).
 */
void moeperm_golden_judgement_report(FILE *f, const moeperm_golden_judgement *j, const char *indent);
char *moeperm_golden_judgement_summary(const moeperm_golden_judgement *j);

/*
 * The machine-readable report (docs/judging.md): a collector of cases,
 * written as one JSON document.  moeperm_golden_json_report_add_case() opens the
 * next case (case_path as the tool names it, op NULL when unknown);
 * moeperm_golden_json_report_add_judgement() records its outputs;
 * moeperm_golden_json_report_set_failure() says why it could not be judged,
 * with the sentence that says why: an output that was not written (verdict
 * "missing"), a bad case or output file, or a backend that failed (verdict
 * "error", with its kind); moeperm_golden_json_report_set_error() is
 * _set_failure() of a backend failure.  _note_left_out() counts cases a
 * selection left out (moeperm check --op).  _write_path() writes the
 * document atomically to path, or to standard output when path is "-".
 * Functions returning int return 0, or -1 (with a sentence in err where
 * there is one).  Not thread safe: one collector per thread.
 */
typedef struct moeperm_golden_json_report moeperm_golden_json_report;

/* Why a case was not judged, as moeperm check counts it. */
typedef enum moeperm_golden_failure {
    MOEPERM_GOLDEN_FAILURE_BACKEND,   /* "error", error_kind "backend-failure" */
    MOEPERM_GOLDEN_FAILURE_BAD_INPUT, /* "error", error_kind "bad-input" */
    MOEPERM_GOLDEN_FAILURE_MISSING    /* "missing": an output was not written */
} moeperm_golden_failure;

moeperm_golden_json_report *moeperm_golden_json_report_new(void);
int moeperm_golden_json_report_add_case(moeperm_golden_json_report *r, const char *case_path, const char *op);
int moeperm_golden_json_report_add_judgement(moeperm_golden_json_report *r, const moeperm_golden_judgement *j);
int moeperm_golden_json_report_set_failure(moeperm_golden_json_report *r, moeperm_golden_failure why,
                                           const char *sentence);
int moeperm_golden_json_report_set_error(moeperm_golden_json_report *r, const char *sentence);
void moeperm_golden_json_report_note_left_out(moeperm_golden_json_report *r, uint64_t cases);
/* moeperm_golden_json_report_set_other_chip() marks the open case not
 * judged because its golden outputs follow another chip than the device's
 * (verdict "other-chip"): the device's chip (its name, NULL when it has
 * none moeperm knows, and its numbers), the case's chip (its name, NULL or
 * "" for one given by numbers alone, and its numbers) and the sentence
 * that says so. */
int moeperm_golden_json_report_set_other_chip(moeperm_golden_json_report *r,
                                              const char *device_name,
                                              const moeperm_chip *device,
                                              const char *case_name,
                                              const moeperm_chip *case_chip,
                                              const char *sentence);
int moeperm_golden_json_report_write_path(const moeperm_golden_json_report *r, const char *path, char *err,
                                  size_t err_len);
void moeperm_golden_json_report_free(moeperm_golden_json_report *r);

/*
 * The error statistics of output i of a judgement, as the JSON report's
 * "stats" carries them (docs/judging.md, section 4): computed in double
 * over the elements finite in both tensors; a statistic with no element
 * to stand on is NaN.  moeperm_golden_judgement_output_stats() fills *s
 * and returns true, or returns false when i is out of range or the
 * output's dtype has no statistics.  Thread safe.
 */
typedef struct moeperm_golden_stats {
    uint64_t elements; /* compared */
    uint64_t finite;   /* finite in both: the elements the statistics use */
    double max_abs_error, max_rel_error, cosine, mare, mere, rmse;
} moeperm_golden_stats;
bool moeperm_golden_judgement_output_stats(const moeperm_golden_judgement *j, size_t i,
                                           moeperm_golden_stats *s);

/*
 * The report for people (docs/judging.md): one self-contained HTML page
 * (inline style and SVG, no script, nothing fetched) with the verdict
 * table, and for each output that differs a heat map of where the
 * differences lie, its first differences with their bits, the diagnosis
 * and the statistics.  A collector like the JSON one: _new() takes the
 * page's title (NULL: "moeperm report"); _add_case() opens the next case
 * (case_path as the tool names it, op NULL when unknown); _add_judgement()
 * records its outputs: c is the judged case with its golden outputs
 * loaded, actual[i] its i-th output as moeperm_golden_judge() took it, and
 * options the options it was judged with (NULL: the defaults), so that
 * the map counts what the judge counted.  The map is made then, in one
 * pass over the outputs that differ (none over those that do not), with
 * memory that does not grow with the tensors: the collector keeps text
 * only, and c and actual may be freed once the call returns.
 * _set_failure() marks the open case as one that could not be judged, with
 * the sentence that says why (verdict "missing" for an output that was not
 * written, else "error", as in the JSON report); _set_error() is
 * _set_failure() of a backend failure.  _write_path() writes the page to path atomically
 * (moeperm_golden_write_file_atomic()).  Case paths, names and sentences
 * may hold any bytes: the page escapes them and shows each byte of an
 * invalid UTF-8 sequence as the text "\xHH".  Functions returning int
 * return 0, or -1 (with a sentence in err where there is one).  Not
 * thread safe: one collector per thread.
 */
typedef struct moeperm_golden_html_report moeperm_golden_html_report;
moeperm_golden_html_report *moeperm_golden_html_report_new(const char *title);
int moeperm_golden_html_report_add_case(moeperm_golden_html_report *r, const char *case_path,
                                        const char *op);
int moeperm_golden_html_report_add_judgement(moeperm_golden_html_report *r,
                                             const moeperm_golden_case *c, void *const *actual,
                                             const moeperm_golden_judge_options *options,
                                             const moeperm_golden_judgement *j);
int moeperm_golden_html_report_set_failure(moeperm_golden_html_report *r,
                                           moeperm_golden_failure why, const char *sentence);
int moeperm_golden_html_report_set_error(moeperm_golden_html_report *r, const char *sentence);
int moeperm_golden_html_report_write_path(const moeperm_golden_html_report *r, const char *path,
                                          char *err, size_t err_len);
void moeperm_golden_html_report_free(moeperm_golden_html_report *r);

/* ---------------------------------------------------------------------- */
/* Names                                                                  */
/* ---------------------------------------------------------------------- */

/* A manifest names a dtype as moeperm_dtype_name() (moeperm.h) does:
 * "float32", "float16", "bf16", "int8", "int32", "int64", "float64". */

/* Parses a dtype as a user types it: "float32" or "fp32", "float16" or
 * "fp16", "bf16" or "bfloat16", "int8", "int32", "int64", "float64"
 * ("fp64").  Returns false when name is none of them. */
bool moeperm_golden_dtype_parse(const char *name, moeperm_dtype *dtype);

/* The short name the command line and the Python package take for op:
 * "permute-grad", "permute", "unpermute", "unpermute-grad"; NULL for a
 * value that is not an operator of the family.  Static; thread safe. */
const char *moeperm_golden_op_short_name(moeperm_op op);

/* The operator name names: its short name, or its vendor name as
 * moeperm_op_parse() takes it ("MoeTokenPermuteGrad"); 0 when it is
 * neither.  Thread safe. */
moeperm_op moeperm_golden_op_parse(const char *name);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif
