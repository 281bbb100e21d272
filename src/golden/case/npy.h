/*
 * npy.h - numpy's .npy files: what np.save writes and np.load reads.
 *
 * A .npy file is a header (the magic "\x93NUMPY", a version, a length and a
 * Python dict literal naming the dtype, the memory order and the shape)
 * followed by the raw elements.  Harnesses write tensors this way far more
 * often than as bare .bin files, so every tensor a case or a harness hands
 * over may come as .npy.  Only what maps onto a moeperm tensor is read:
 * versions 1.0, 2.0 and 3.0, little-endian, C order, one of the dtypes
 * below; anything else is refused with a sentence naming it.
 *
 * numpy has no bf16, so a bf16 tensor travels as its 16-bit patterns under
 * '<u2' (what this writer uses), '<i2', or '<V2' / '|V2' (what ml_dtypes'
 * bfloat16 arrays save as).  The caller says which dtype it expects; the
 * descr only has to be one that carries it.
 *
 * The parser is written for hostile bytes: every length is checked against
 * the bytes given, products of dims against overflow, the dict against
 * truncation, and it never reads past `size`.
 */
#ifndef MOEPERM_GOLDEN_CASE_NPY_H
#define MOEPERM_GOLDEN_CASE_NPY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <moeperm/moeperm.h>

/* The largest header (magic to the end of the dict) this reader accepts:
 * numpy itself refuses headers above 10000 bytes unless told otherwise. */
#define GOLDEN_NPY_MAX_HEADER ((size_t)1 << 16)

/* Bytes golden_npy_format_header() may write: the dict for
 * MOEPERM_MAX_DIMS dims of 19 digits each, padded to 64. */
#define GOLDEN_NPY_HEADER_CAP 384

typedef struct golden_npy_header {
    unsigned major, minor; /* format version: 1.0, 2.0 or 3.0 */
    char descr[16];        /* the dtype string as written, e.g. "<f4" (cut at 15 chars) */
    size_t itemsize;       /* bytes per element that descr names */
    bool fortran_order;    /* as written; accepted only where it equals C order */
    uint64_t ndim;
    int64_t shape[MOEPERM_MAX_DIMS];
    uint64_t elements;    /* product of shape */
    uint64_t data_offset; /* bytes from the start of the file to the first element */
    uint64_t data_bytes;  /* elements * itemsize */
} golden_npy_header;

/*
 * golden_npy_looks_like() returns whether the first size bytes of a file
 * start with numpy's magic, for a hint when a raw .bin file has the wrong
 * size ("it looks like .npy; name it .npy").  Thread safe.
 */
bool golden_npy_looks_like(const void *bytes, size_t size);

/*
 * golden_npy_parse() reads the header at the start of a .npy file of
 * file_size bytes, of which the first size are at bytes (pass at least
 * min(file_size, GOLDEN_NPY_MAX_HEADER)).  name is the file's name for
 * messages.  It refuses, with a sentence naming the bad value: a missing
 * magic, a version other than 1.0/2.0/3.0, a header longer than
 * GOLDEN_NPY_MAX_HEADER or than the file, a dict that is not the three
 * keys 'descr', 'fortran_order' and 'shape' with values of the right kind,
 * a structured or big-endian descr, Fortran order on an array whose memory
 * order differs from C order, more than MOEPERM_MAX_DIMS dims, a shape
 * whose byte size overflows, and data that does not fill the rest of the
 * file exactly.  A descr that is well-formed but names no moeperm dtype
 * (say '<f8') is accepted here and refused by golden_npy_check().
 * Returns 0 and fills *h, or -1 with a sentence in err.  Thread safe.
 */
int golden_npy_parse(const void *bytes, size_t size, uint64_t file_size, const char *name,
                     golden_npy_header *h, char *err, size_t err_len);

/*
 * golden_npy_check() checks a parsed header against the tensor the caller
 * expects: dtype (the descrs that carry it: float32 '<f4', float16 '<f2',
 * bf16 '<u2'/'<i2'/'<V2'/'|V2', int32 '<i4', int64 '<i8', int8 '|i1') and,
 * when shape is not NULL, the ndim dims of shape.  Returns 0, or -1 with a
 * sentence such as "x.npy holds '<f4' data, expected bf16 ('<u2', '<i2'
 * or '<V2')" or "x.npy has shape (3, 4), expected (4, 3)".  Thread safe.
 */
int golden_npy_check(const golden_npy_header *h, const char *name, moeperm_dtype dtype,
                     const int64_t *shape, uint64_t ndim, char *err, size_t err_len);

/* golden_npy_format_shape() writes shape as Python writes a tuple,
 * "(8, 4)", "(5,)" or "()", into out (cap bytes; 256 hold any shape). */
void golden_npy_format_shape(char *out, size_t cap, const int64_t *shape, uint64_t ndim);

/* golden_npy_descr() returns the descr this writer uses for dtype ("<u2"
 * for bf16), or NULL for a dtype with no .npy form.  Thread safe. */
const char *golden_npy_descr(moeperm_dtype dtype);

/*
 * golden_npy_format_header() writes into out the version 1.0 header for a
 * C-order array of dtype and shape, byte for byte as numpy 1.24's np.save
 * writes it (the dict, room for the first dim to grow to 21 digits, spaces
 * to a multiple of 64 bytes, a newline).  Returns its length, or 0 for a
 * dtype with no .npy form, ndim above MOEPERM_MAX_DIMS or a negative dim.
 * Thread safe.
 */
size_t golden_npy_format_header(moeperm_dtype dtype, const int64_t *shape, uint64_t ndim,
                                char out[GOLDEN_NPY_HEADER_CAP]);

/*
 * golden_npy_read_file() reads the .npy file at path as a tensor of dtype
 * and (when shape is not NULL) of the ndim dims of shape: the header is
 * parsed and checked as above, then the elements are read into *data
 * (malloc'd; NULL when there are none) and their byte count stored in
 * *data_bytes.  When hex is not NULL it receives the SHA-256 of the whole
 * file, as a manifest records it.  Returns 0, or -1 with a sentence in err
 * (*data is then NULL).
 */
int golden_npy_read_file(const char *path, moeperm_dtype dtype, const int64_t *shape, uint64_t ndim,
                         void **data, uint64_t *data_bytes, char hex[65], char *err,
                         size_t err_len);

/* The same, the file whose last component is path's in the directory
 * open at dirfd (fileio.h's golden_read_file_at()). */
int golden_npy_read_file_at(int dirfd, const char *path, moeperm_dtype dtype,
                            const int64_t *shape, uint64_t ndim, void **data,
                            uint64_t *data_bytes, char hex[65], char *err, size_t err_len);

/* golden_npy_read_header() reads and parses the header of the .npy file at
 * path into *h, as golden_npy_read_file() does before it reads the data:
 * a file that cannot be opened, is not a regular file or has no valid
 * header is refused with a sentence.  Returns 0 or -1. */
int golden_npy_read_header(const char *path, golden_npy_header *h, char *err, size_t err_len);

/*
 * golden_npy_write_file() writes the elements at data as a .npy file at
 * path (C order, version 1.0 header), atomically as
 * moeperm_golden_write_file_atomic() does.  Returns 0, or -1 with a sentence in
 * err.
 */
int golden_npy_write_file(const char *path, moeperm_dtype dtype, const int64_t *shape,
                          uint64_t ndim, const void *data, char *err, size_t err_len);

#endif
