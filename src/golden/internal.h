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
int golden_manifest_parse(const char *manifest_path, const char *text, moeperm_golden_case *c,
                          char sha[][GOLDEN_SHA256_HEX], char *err, size_t err_len);

/* c's manifest as a malloc'd string of *size bytes, sha[i] the hash of
 * c->tensors[i] (NULL when memory runs out). */
char *golden_manifest_text(const moeperm_golden_case *c, const char sha[][GOLDEN_SHA256_HEX],
                           size_t *size);

/*
 * The case directory writer behind moeperm_golden_case_write(): it hashes and
 * writes tensors in two threads of its own while the caller makes the next
 * ones, or the rest of the one it is making.
 *
 * golden_case_writer_open() checks path as moeperm_golden_case_write() does and
 * creates the temporary directory the case is written into.  Returns the
 * writer, or NULL with a sentence in err (nothing at path changed).
 *
 * golden_case_writer_ready() says that the first `ready` bytes of t's data
 * are final: the first call for t creates its file (on the calling thread,
 * so a signal's cleanup never races a new file) and hands t to the
 * threads, which write and hash up to `ready` and wait for more.  t and its
 * data must stay in place until the writer is closed or aborted.
 *
 * golden_case_writer_close() hands over every tensor of c not yet complete,
 * waits for the threads, writes the manifest with the hashes they made and
 * puts the case in place; it returns as moeperm_golden_case_write() does and frees
 * w.  golden_case_writer_abort() stops the threads, removes the temporary
 * directory and frees w.  Calls for a tensor already handed over may come
 * from any thread (the generator's threads report the rows they finish);
 * every other call comes from the thread that opened the writer.
 */
typedef struct golden_case_writer golden_case_writer;

/* A tensor of at least GOLDEN_DIRECT_MIN bytes whose data is aligned to
 * GOLDEN_IO_ALIGN bytes (the generator allocates its inputs so) goes from
 * memory to the disk without a copy into the page cache, where the
 * platform can (O_DIRECT). */
#define GOLDEN_IO_ALIGN ((size_t)4096)
#define GOLDEN_DIRECT_MIN ((size_t)1 << 20)

golden_case_writer *golden_case_writer_open(const char *path, bool force, char *err,
                                            size_t err_len);
void golden_case_writer_ready(golden_case_writer *w, const moeperm_golden_tensor *t, size_t ready);
int golden_case_writer_close(golden_case_writer *w, const moeperm_golden_case *c, char *err,
                             size_t err_len);
void golden_case_writer_abort(golden_case_writer *w);

/* A shape as the manifest writes it, "[64, 7168]". */
void golden_format_shape(char *buf, size_t len, const int64_t *dims, size_t ndim);

/* moeperm_golden_dtype_parse() without the aliases: the names files carry. */
bool golden_dtype_parse_canonical(const char *name, moeperm_dtype *dtype);

/* The tensors that come and go together (probs, probs_grad and its exact
 * values): refuses a case that has one without the other, with a sentence
 * starting with where. */
int golden_check_optional_tensors(const moeperm_golden_case *c, char *err, size_t err_len,
                                  const char *where);

/* The chip of a MoeTokenUnpermuteGrad case: its attributes, the library's
 * defaults where they are 0. */
moeperm_chip golden_chip_of(const moeperm_golden_attrs *attrs);

/* Whether path names a numpy file (it ends in ".npy"). */
bool golden_is_npy_name(const char *path);

/* Reads a tensor file (raw, or .npy by its name) shaped and typed like
 * `like`, hashing the whole file into hex; what prefixes messages. */
int golden_tensor_file_read(const char *path, const char *what, const moeperm_golden_tensor *like,
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
