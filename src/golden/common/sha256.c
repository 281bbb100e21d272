/*
 * sha256.c - Nettle's SHA-256, fed in pieces of at most 1 GiB (a golden
 * tensor may exceed 4 GiB), printed as the lower-case hex of manifests.
 */
#include "golden/common/sha256.h"

#include <stdint.h>

/* One update takes at most this much: the largest piece every read and
 * write of the library moves (fileio.c), so no length ever nears the
 * limits of older interfaces. */
#define HASH_PIECE ((size_t)1 << 30)

void golden_sha256_init(golden_sha256 *h)
{
    sha256_init(&h->ctx);
}

void golden_sha256_update(golden_sha256 *h, const void *data, size_t size)
{
    const uint8_t *p = data;
    while (size > 0) {
        size_t n = size < HASH_PIECE ? size : HASH_PIECE;
        sha256_update(&h->ctx, n, p);
        p += n;
        size -= n;
    }
}

void golden_sha256_finish(golden_sha256 *h, char hex[GOLDEN_SHA256_HEX])
{
    static const char digits[] = "0123456789abcdef";
    uint8_t digest[SHA256_DIGEST_SIZE];
    sha256_digest(&h->ctx, SHA256_DIGEST_SIZE, digest);
    for (size_t i = 0; i < SHA256_DIGEST_SIZE; i++) {
        hex[2 * i] = digits[digest[i] >> 4];
        hex[2 * i + 1] = digits[digest[i] & 15];
    }
    hex[2 * SHA256_DIGEST_SIZE] = '\0';
}

void golden_sha256_hex(const void *data, size_t size, char hex[GOLDEN_SHA256_HEX])
{
    golden_sha256 h;
    golden_sha256_init(&h);
    golden_sha256_update(&h, data, size);
    golden_sha256_finish(&h, hex);
}
