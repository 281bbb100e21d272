/*
 * sha256.c - OpenSSL's SHA-256 (libcrypto, through its EVP interface),
 * fed in pieces of at most 1 GiB (a golden tensor may exceed 4 GiB),
 * printed as the lower-case hex of manifests.
 *
 * libcrypto rather than Nettle: a tensor's hash is one serial stream, on
 * the critical path of writing a large case, and libcrypto's SHA-NI code
 * hashes several blocks per call where Nettle 3.8 (Debian bookworm) calls
 * its SHA-NI compression once per 64-byte block: 2.0 against 1.8 GB/s of
 * CPU time on the machine of docs/performance.md.
 */
#include "golden/common/sha256.h"

#include <stdint.h>

/* One update takes at most this much: the largest piece every read and
 * write of the library moves (fileio.c), so no length ever nears the
 * limits of older interfaces. */
#define HASH_PIECE ((size_t)1 << 30)

enum { DIGEST_BYTES = 32 };

int golden_sha256_init(golden_sha256 *h)
{
    h->ctx = EVP_MD_CTX_new();
    h->failed = !h->ctx || EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL) != 1;
    return h->failed ? -1 : 0;
}

void golden_sha256_update(golden_sha256 *h, const void *data, size_t size)
{
    const uint8_t *p = data;
    while (size > 0 && !h->failed) {
        size_t n = size < HASH_PIECE ? size : HASH_PIECE;
        h->failed = EVP_DigestUpdate(h->ctx, p, n) != 1;
        p += n;
        size -= n;
    }
}

int golden_sha256_finish(golden_sha256 *h, char hex[GOLDEN_SHA256_HEX])
{
    static const char digits[] = "0123456789abcdef";
    uint8_t digest[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    bool ok = !h->failed && EVP_DigestFinal_ex(h->ctx, digest, &length) == 1 &&
              length == DIGEST_BYTES;
    EVP_MD_CTX_free(h->ctx);
    h->ctx = NULL;
    hex[0] = '\0';
    if (!ok)
        return -1;
    for (size_t i = 0; i < DIGEST_BYTES; i++) {
        hex[2 * i] = digits[digest[i] >> 4];
        hex[2 * i + 1] = digits[digest[i] & 15];
    }
    hex[2 * DIGEST_BYTES] = '\0';
    return 0;
}

int golden_sha256_hex(const void *data, size_t size, char hex[GOLDEN_SHA256_HEX])
{
    golden_sha256 h;
    golden_sha256_init(&h);
    golden_sha256_update(&h, data, size);
    return golden_sha256_finish(&h, hex);
}
