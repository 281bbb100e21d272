/*
 * sha256.h - the SHA-256 a manifest records for every tensor file, from
 * OpenSSL's libcrypto, computed in one place: whole buffers, or a file's
 * bytes as they arrive (a read loop, the case writer's hashing thread).
 */
#ifndef MOEPERM_GOLDEN_COMMON_SHA256_H
#define MOEPERM_GOLDEN_COMMON_SHA256_H

#include <stdbool.h>
#include <stddef.h>

#include <openssl/evp.h>

/* Length in bytes of a SHA-256 digest as lower-case hex, plus the NUL. */
#define GOLDEN_SHA256_HEX 65

/* A hash in progress.  Not thread safe: one per thread. */
typedef struct golden_sha256 {
    EVP_MD_CTX *ctx;
    bool failed;
} golden_sha256;

/* Starts a hash.  Returns 0, or -1 when memory runs out (then finish()
 * still must be called, and fails). */
int golden_sha256_init(golden_sha256 *h);
/* Adds size bytes at data, any size (taken in pieces of at most 1 GiB). */
void golden_sha256_update(golden_sha256 *h, const void *data, size_t size);
/* The digest of everything added, as lower-case hex into hex; frees what
 * init() took.  Returns 0, or -1 when the hash could not be made (hex is
 * then the empty string). */
int golden_sha256_finish(golden_sha256 *h, char hex[GOLDEN_SHA256_HEX]);

/* Lower-case hex SHA-256 of size bytes at data into hex.  Returns 0 or -1
 * (as finish()). */
int golden_sha256_hex(const void *data, size_t size, char hex[GOLDEN_SHA256_HEX]);

#endif
