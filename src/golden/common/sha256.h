/*
 * sha256.h - the SHA-256 a manifest records for every tensor file, from
 * Nettle, computed in one place: whole buffers, or a file's bytes as they
 * arrive (a read loop, the case writer's hashing thread).
 */
#ifndef MOEPERM_GOLDEN_COMMON_SHA256_H
#define MOEPERM_GOLDEN_COMMON_SHA256_H

#include <stddef.h>

#include <nettle/sha2.h>

/* Length in bytes of a SHA-256 digest as lower-case hex, plus the NUL. */
#define GOLDEN_SHA256_HEX 65

/* A hash in progress.  Not thread safe: one per thread. */
typedef struct golden_sha256 {
    struct sha256_ctx ctx;
} golden_sha256;

void golden_sha256_init(golden_sha256 *h);
/* Adds size bytes at data, any size (taken in pieces Nettle accepts). */
void golden_sha256_update(golden_sha256 *h, const void *data, size_t size);
/* The digest of everything added, as lower-case hex into hex. */
void golden_sha256_finish(golden_sha256 *h, char hex[GOLDEN_SHA256_HEX]);

/* Lower-case hex SHA-256 of size bytes at data into hex. */
void golden_sha256_hex(const void *data, size_t size, char hex[GOLDEN_SHA256_HEX]);

#endif
