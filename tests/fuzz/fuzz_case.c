/*
 * fuzz_case.c - libFuzzer target for the golden case reader.
 *
 * An input is up to four parts separated by the line "--8<--": case.json,
 * then the bytes of permuted_output_grad.bin, sorted_indices.bin and
 * input_grad.bin.  The target writes them into a scratch case directory and
 * reads it back with golden_case_read().  So that mutated tensor files
 * still get past the sha256 check (and the fuzzer reaches what comes after
 * it), the manifest may write @grad@, @idx@ and @out@ where a digest goes;
 * the target substitutes the real sha256 of that part.
 *
 * Checked: the reader never crashes or overruns (AddressSanitizer), a
 * refusal comes with a message and an empty case, and an accepted case is
 * self-consistent (tensor sizes from its shape) and runs through the
 * operator's two phases without harm; when the indices are valid, the
 * result matches tests/naive.c.
 */
#define _GNU_SOURCE /* memmem */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <moeperm/moeperm.h>

#include "../call.h"
#include "../naive.h"
#include "golden/case.h"
#include "golden/fileio.h"

#define CHECK(cond, ...)                                                                     \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            fprintf(stderr, "fuzz_case: %s failed: ", #cond);                                \
            fprintf(stderr, __VA_ARGS__);                                                    \
            fprintf(stderr, "\n");                                                           \
            abort();                                                                         \
        }                                                                                    \
    } while (0)

static const char separator[] = "\n--8<--\n";
static const char *const files[4] = {"case.json", "permuted_output_grad.bin",
                                     "sorted_indices.bin", "input_grad.bin"};
static char dir[4096];

/* The scratch directory goes when the process exits normally. */
static void remove_dir(void)
{
    for (int i = 0; i < 4; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
}

static void put(const char *name, const void *data, size_t size)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0)
        abort();
}

/* Replaces every `tag` in text (of *len bytes, owned) with `value`. */
static char *substitute(char *text, size_t *len, const char *tag, const char *value)
{
    size_t tl = strlen(tag), vl = strlen(value);
    for (;;) {
        char *hit = memmem(text, *len, tag, tl);
        if (!hit)
            return text;
        size_t at = (size_t)(hit - text), rest = *len - at - tl;
        char *grown = malloc(*len - tl + vl + 1);
        if (!grown)
            abort();
        memcpy(grown, text, at);
        memcpy(grown + at, value, vl);
        memcpy(grown + at + vl, hit + tl, rest);
        *len = *len - tl + vl;
        free(text);
        text = grown;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dir[0]) {
        /* libFuzzer ends with _Exit(), past atexit(): tools/ci-fuzz points
         * TMPDIR at a directory it removes afterwards. */
        const char *tmp = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/moeperm-fuzz-case-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(dir))
            abort();
        atexit(remove_dir);
    }
    const uint8_t *part[4] = {NULL, NULL, NULL, NULL};
    size_t part_len[4] = {0, 0, 0, 0};
    const uint8_t *p = data;
    size_t left = size;
    int parts = 0;
    while (parts < 4) {
        const uint8_t *cut = parts < 3 ? memmem(p, left, separator, sizeof separator - 1) : NULL;
        part[parts] = p;
        part_len[parts] = cut ? (size_t)(cut - p) : left;
        parts++;
        if (!cut)
            break;
        left -= (size_t)(cut - p) + sizeof separator - 1;
        p = cut + sizeof separator - 1;
    }

    static const char *const tags[3] = {"@grad@", "@idx@", "@out@"};
    size_t mlen = part_len[0];
    char *manifest = malloc(mlen + 1);
    if (!manifest)
        abort();
    if (mlen)
        memcpy(manifest, part[0], mlen);
    for (int i = 1; i < 4; i++) {
        char hex[GOLDEN_SHA256_HEX];
        golden_sha256_hex(part[i] ? (const void *)part[i] : "", part_len[i], hex);
        manifest = substitute(manifest, &mlen, tags[i - 1], hex);
    }
    put(files[0], manifest, mlen);
    free(manifest);
    for (int i = 1; i < 4; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
        if (i < parts)
            put(files[i], part[i], part_len[i]);
    }

    golden_case c;
    char err[1024] = "";
    memset(&c, 0x5a, sizeof c); /* the reader must not rely on a zeroed case */
    if (golden_case_read(dir, true, &c, err, sizeof err) != 0) {
        CHECK(err[0] != '\0', "a refusal without a message");
        CHECK(memchr(err, '\0', sizeof err) != NULL, "an unterminated message");
        CHECK(!c.permuted_output_grad && !c.sorted_indices && !c.input_grad && !c.name,
              "a refused case still owns memory");
        golden_case_free(&c);
        return 0;
    }

    CHECK(c.num_rows <= c.tokens_num * c.top_k, "num_rows %lld above T*K", (long long)c.num_rows);
    CHECK(golden_grad_bytes(&c) == part_len[1], "grad bytes %zu, file %zu",
          golden_grad_bytes(&c), part_len[1]);
    CHECK(golden_indices_bytes(&c) == part_len[2], "index bytes disagree");
    CHECK(golden_output_bytes(&c) == part_len[3], "output bytes disagree");

    /* The case as a backend sees it: small ones go through the operator. */
    int64_t t = c.tokens_num, k = c.top_k, h = c.hidden_size;
    size_t e = golden_dtype_size(c.dtype);
    if (t * h <= (1 << 16) && t * k <= (1 << 16)) {
        void *out = malloc((size_t)(t * h) * e + 1), *want = malloc((size_t)(t * h) * e + 1);
        if (!out || !want)
            abort();
        moeperm_status status = call_permute_grad(c.dtype, c.permuted_output_grad, c.num_rows,
                                                  h, c.sorted_indices, t, k, out);
        if (status == MOEPERM_SUCCESS) {
            naive_permute_grad(c.dtype, c.permuted_output_grad, c.num_rows, h, c.sorted_indices,
                               t, k, want);
            CHECK(naive_equal(c.dtype, want, out, t * h, NULL), "case differs from the model");
        } else {
            CHECK(moeperm_last_error()[0] != '\0', "operator refusal without a message");
        }
        free(out);
        free(want);
    }
    golden_case_free(&c);
    return 0;
}
