/*
 * writer.h - the case directory writer behind moeperm_golden_case_write():
 * it hashes and writes tensors in two threads of its own while the caller
 * makes the next ones, or the rest of the one it is making.
 *
 * golden_case_writer_open() checks path as moeperm_golden_case_write() does
 * and creates the temporary directory the case is written into.  Returns
 * the writer, or NULL with a sentence in err (nothing at path changed).
 *
 * golden_case_writer_ready() says that the first `ready` bytes of t's data
 * are final: the first call for t creates its file (on the calling thread,
 * so a signal's cleanup never races a new file) and hands t to the
 * threads, which write and hash up to `ready` and wait for more.  t and its
 * data must stay in place until the writer is closed or aborted.
 *
 * golden_case_writer_close() hands over every tensor of c not yet complete,
 * waits for the threads, writes the manifest with the hashes they made and
 * puts the case in place; it returns as moeperm_golden_case_write() does
 * and frees w.  golden_case_writer_close_releasing() does the same and,
 * on a thread of its own, frees the data of each tensor of c (setting it
 * to NULL) as soon as it is written and hashed: the memory of a large
 * case goes back to the system while the hash, the disk and the case's
 * replacement finish, not after.  golden_case_writer_abort() stops the threads, removes the
 * temporary directory and frees w.  Calls for a tensor already handed over
 * may come from any thread (the generator's threads report the rows they
 * finish); every other call comes from the thread that opened the writer.
 */
#ifndef MOEPERM_GOLDEN_CASE_WRITER_H
#define MOEPERM_GOLDEN_CASE_WRITER_H

#include <stdbool.h>
#include <stddef.h>

#include <moeperm/golden.h>

typedef struct golden_case_writer golden_case_writer;

/* A tensor of at least GOLDEN_DIRECT_MIN bytes whose data is aligned to
 * GOLDEN_IO_ALIGN bytes (the generator allocates its inputs so) goes from
 * memory to the disk without a copy into the page cache, where the
 * platform can (O_DIRECT). */
#define GOLDEN_IO_ALIGN ((size_t)4096)
#define GOLDEN_DIRECT_MIN ((size_t)1 << 20)

/* golden_tensor_alloc() allocates the data of a tensor of `bytes` bytes
 * (zeroed when zero is true), for free(): one of GOLDEN_DIRECT_MIN bytes or
 * more aligned so that the writer hands it to the disk as it is.  Returns
 * NULL when memory runs out (or bytes is 0). */
void *golden_tensor_alloc(size_t bytes, bool zero);

/* golden_tensor_prefault() maps in the whole pages inside [data, data +
 * bytes) before they are first written (Linux's MADV_POPULATE_WRITE;
 * elsewhere nothing): for a stretch of a large tensor, one call costs
 * about 70 % of the CPU time of a fault per page (docs/performance.md,
 * "Writing golden data").  The pages keep what they hold. */
void golden_tensor_prefault(void *data, size_t bytes);

golden_case_writer *golden_case_writer_open(const char *path, bool force, char *err,
                                            size_t err_len);
void golden_case_writer_ready(golden_case_writer *w, const moeperm_golden_tensor *t, size_t ready);
int golden_case_writer_close(golden_case_writer *w, const moeperm_golden_case *c, char *err,
                             size_t err_len);
int golden_case_writer_close_releasing(golden_case_writer *w, moeperm_golden_case *c, char *err,
                                       size_t err_len);
void golden_case_writer_abort(golden_case_writer *w);

/* golden_case_writer_help() gives w's hashing thread work for the times
 * it has nothing to hash: it calls help(arg), which does a piece of the
 * caller's work and returns whether there was any, until help returns
 * false or the caller calls golden_case_writer_help(w, NULL, NULL), which
 * returns once no call of help is under way.  help runs with every signal
 * blocked, beside the caller's own threads. */
void golden_case_writer_help(golden_case_writer *w, bool (*help)(void *), void *arg);

/* The threads a caller should put on its own work (making tensors,
 * working out values) while w hashes and writes: OpenMP's, one less (and
 * at least one) when w is not NULL.  The hashing thread is one serial
 * stream that must see every byte, on the critical path of a large case,
 * so it gets a core of its own. */
int golden_case_writer_team(const golden_case_writer *w);

/*
 * moeperm_golden_case_finish(), handing each output of c to w (when not
 * NULL) as soon as the operator has made it, while the exact values the
 * case also holds are worked out.
 *
 * With route_only, a MoeTokenPermute case gets its sorted_indices alone
 * from the operator (a run over views of the tokens and of permuted_tokens
 * with no columns, after the first phase has taken the case's own shapes),
 * and its permuted_tokens allocated, neither zeroed nor handed to w: the
 * caller fills every row of it by the operator's definition,
 * permuted_tokens[sorted_indices[i]] = tokens[i / top_k] for each i whose
 * sorted_indices[i] is below its rows, and hands it to w.  That is what
 * lets the generator make the largest output of a case in order, a
 * stretch at a time, for the writer to hash and write while it makes the
 * rest (docs/performance.md, "Writing golden data").  route_only changes
 * nothing for the other operators.
 */
int golden_case_finish_writing(moeperm_golden_case *c, golden_case_writer *w, bool route_only,
                               char *err, size_t err_len);

/*
 * golden_case_check_writable() refuses, with a sentence naming path and
 * the bad value, a case its reader would refuse: a manifest string that
 * is not UTF-8, a shape beyond the format's limits (MOEPERM_GOLDEN_MAX_DIM),
 * a tensor whose byte count is not its shape's, anything else
 * golden_manifest_parse() refuses in the manifest the writer would write,
 * and, when the inputs are loaded, inputs the operator refuses.  Both
 * writers call it before the case is put in place.  Returns 0 or -1.
 */
int golden_case_check_writable(const char *path, const moeperm_golden_case *c, char *err,
                               size_t err_len);

#endif
