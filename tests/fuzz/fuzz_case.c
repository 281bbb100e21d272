/*
 * fuzz_case.c - libFuzzer target for the golden case reader, both manifest
 * formats and every operator.
 *
 * An input is parts separated by the line "--8<--": case.json, then the
 * bytes of the operator's tensor files in its argument order
 * (moeperm_golden_op_slots(): for MoeTokenPermuteGrad permuted_output_grad.bin,
 * sorted_indices.bin, input_grad.bin).  The operator is the first of the
 * family whose quoted name the manifest holds, MoeTokenPermuteGrad when
 * none.  The target writes the parts into a scratch case directory and
 * reads it back with moeperm_golden_case_read().  So that mutated tensor files
 * still get past the sha256 check (and the fuzzer reaches what comes after
 * it), the manifest may write @N@ where a digest goes, N the part's number
 * from 1 (format 1's corpus writes @grad@, @idx@ and @out@ for parts 1 to
 * 3); the target substitutes the real sha256 of that part.
 *
 * Checked: the reader never crashes or overruns (AddressSanitizer), a
 * refusal comes with a message and an empty case, and an accepted case is
 * self-consistent (each tensor's size from its shape, equal to its file's)
 * and, the reader having put it to the operator's first phase, runs
 * through the reference without a refusal; small ones match the tests' own
 * models (naive_permute_grad.c, naive_family.c, naive_unpermute_grad.c).
 */
#define _GNU_SOURCE /* memmem */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <moeperm/golden.h>

#include "naive.h"
#include "naive_permute_grad.h"
#include "naive_family.h"
#include "naive_unpermute_grad.h"
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

/* Cases up to this many bytes in all go through the operator. */
#define RUN_LIMIT (1u << 20)

static const char separator[] = "\n--8<--\n";
static char dir[4096];

/* Removes every file a case directory may hold: the scratch directory is
 * reused, and the last input's files must not stand in for this one's. */
static void clear_dir(void)
{
    const char *const *names;
    size_t count = golden_case_file_list(&names);
    for (size_t i = 0; i < count; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
}

/* The scratch directory goes when the process exits normally. */
static void remove_dir(void)
{
    clear_dir();
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

/* The operator whose file names the parts take. */
static moeperm_op op_of(const uint8_t *manifest, size_t len)
{
    static const moeperm_op ops[] = {MOEPERM_OP_PERMUTE_GRAD, MOEPERM_OP_PERMUTE,
                                     MOEPERM_OP_UNPERMUTE, MOEPERM_OP_UNPERMUTE_GRAD};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        char quoted[64];
        snprintf(quoted, sizeof quoted, "\"%s\"", moeperm_op_name(ops[i]));
        if (memmem(manifest, len, quoted, strlen(quoted)))
            return ops[i];
    }
    return MOEPERM_OP_PERMUTE_GRAD;
}

static const moeperm_golden_tensor *tensor(const moeperm_golden_case *c, const char *name)
{
    return moeperm_golden_case_tensor_const(c, name);
}

static bool shaped(const moeperm_golden_tensor *t, uint64_t ndim)
{
    return t && t->ndim == ndim;
}

/* The outputs the reference gave against the tests' own model of c's
 * operator, where c's tensors have the plain shapes the model takes. */
static void check_against_model(const moeperm_golden_case *c, void *const *out)
{
    const moeperm_golden_tensor *t;
    switch (c->op) {
    case MOEPERM_OP_PERMUTE_GRAD: {
        const moeperm_golden_tensor *grad = tensor(c, "permuted_output_grad");
        const moeperm_golden_tensor *idx = tensor(c, "sorted_indices");
        t = tensor(c, "input_grad");
        if (!shaped(grad, 2) || !shaped(idx, 1) || !shaped(t, 2) || c->attrs.top_k <= 0)
            return;
        int64_t tokens = t->shape[0], hidden = t->shape[1];
        void *want = calloc(1, t->bytes + 1);
        CHECK(want, "out of memory");
        naive_permute_grad(t->dtype, grad->data, grad->shape[0], hidden, idx->data, tokens,
                           c->attrs.top_k, want);
        CHECK(naive_equal(t->dtype, want, out[0], tokens * hidden, NULL),
              "MoeTokenPermuteGrad differs from the model");
        free(want);
        return;
    }
    case MOEPERM_OP_PERMUTE: {
        const moeperm_golden_tensor *tokens = tensor(c, "tokens"), *ids = tensor(c, "indices");
        const moeperm_golden_tensor *sorted = tensor(c, "sorted_indices");
        t = tensor(c, "permuted_tokens");
        if (!shaped(tokens, 2) || !shaped(ids, 2) || !shaped(t, 2) || !shaped(sorted, 1))
            return;
        int64_t n = ids->shape[0] * ids->shape[1];
        int64_t *wide = malloc((size_t)n * sizeof *wide + 1);
        void *want = calloc(1, t->bytes + 1);
        int32_t *want_sorted = calloc(1, sorted->bytes + 1);
        CHECK(wide && want && want_sorted, "out of memory");
        for (int64_t i = 0; i < n; i++)
            wide[i] = ids->dtype == MOEPERM_INT64 ? ((const int64_t *)ids->data)[i]
                                                  : ((const int32_t *)ids->data)[i];
        naive_permute(moeperm_dtype_size(tokens->dtype), tokens->data, tokens->shape[0],
                      tokens->shape[1], wide, ids->shape[1], t->shape[0], want, want_sorted);
        CHECK(memcmp(want, out[0], t->bytes) == 0, "permuted_tokens differ from the model");
        CHECK(memcmp(want_sorted, out[1], sorted->bytes) == 0,
              "sorted_indices differ from the model");
        free(wide);
        free(want);
        free(want_sorted);
        return;
    }
    case MOEPERM_OP_UNPERMUTE: {
        const moeperm_golden_tensor *in = tensor(c, "permuted_tokens");
        const moeperm_golden_tensor *idx = tensor(c, "sorted_indices"), *probs = tensor(c, "probs");
        t = tensor(c, "unpermuted_tokens");
        if (!shaped(in, 2) || !shaped(idx, 1) || !shaped(t, 2) || (probs && !shaped(probs, 2)) ||
            t->shape[0] == 0 || c->attrs.restore_shape_len)
            return;
        int64_t tokens = t->shape[0], hidden = t->shape[1];
        int64_t top_k = probs ? probs->shape[1] : idx->shape[0] / tokens;
        void *want = calloc(1, t->bytes + 1);
        CHECK(want, "out of memory");
        naive_unpermute(t->dtype, in->data, in->shape[0], hidden, idx->data, tokens, top_k,
                        probs ? probs->dtype : t->dtype, probs ? probs->data : NULL, want);
        CHECK(naive_equal(t->dtype, want, out[0], tokens * hidden, NULL),
              "MoeTokenUnpermute differs from the model");
        free(want);
        return;
    }
    case MOEPERM_OP_UNPERMUTE_GRAD: {
        const moeperm_golden_tensor *in = tensor(c, "permuted_tokens");
        const moeperm_golden_tensor *grad = tensor(c, "unpermuted_tokens_grad");
        const moeperm_golden_tensor *idx = tensor(c, "sorted_indices"), *probs = tensor(c, "probs");
        const moeperm_golden_tensor *probs_grad = tensor(c, "probs_grad");
        t = tensor(c, "permuted_tokens_grad");
        if (!shaped(in, 2) || !shaped(grad, 2) || !shaped(idx, 1) || !shaped(t, 2) ||
            (probs && !shaped(probs, 2)) || grad->shape[0] == 0 || c->attrs.restore_shape_len)
            return;
        int64_t tokens = grad->shape[0], hidden = grad->shape[1];
        int64_t top_k = probs ? probs->shape[1] : idx->shape[0] / tokens;
        moeperm_chip chip = {c->attrs.ub_bytes ? c->attrs.ub_bytes : MOEPERM_CHIP_A2_UB_BYTES,
                             c->attrs.vector_cores ? c->attrs.vector_cores
                                                   : MOEPERM_CHIP_A2_VECTOR_CORES};
        /* Without probs nothing is reduced: any chunk gives the same. */
        int64_t chunk = hidden > 0 ? naive_ug_chunk_for(tokens, top_k, hidden, t->dtype,
                                                        probs ? probs->dtype : t->dtype,
                                                        chip.ub_bytes, chip.vector_cores)
                                   : 1;
        void *want = calloc(1, t->bytes + 1);
        void *want_probs = calloc(1, (probs_grad ? probs_grad->bytes : 0) + 1);
        CHECK(want && want_probs, "out of memory");
        naive_unpermute_grad(t->dtype, probs ? probs->dtype : t->dtype, in->data, in->shape[0],
                             hidden, grad->data, tokens, idx->data, probs ? probs->data : NULL,
                             top_k, chunk, want, want_probs);
        CHECK(naive_equal(t->dtype, want, out[0], t->shape[0] * hidden, NULL),
              "permuted_tokens_grad differs from the model");
        if (probs_grad)
            CHECK(naive_equal(probs_grad->dtype, want_probs, out[1], tokens * top_k, NULL),
                  "probs_grad differs from the model");
        free(want);
        free(want_probs);
        return;
    }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dir[0]) {
        /* libFuzzer ends with _Exit(), past atexit(): scripts/ci-fuzz points
         * TMPDIR at a directory it removes afterwards. */
        const char *tmp = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/moeperm-fuzz-case-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(dir))
            abort();
        atexit(remove_dir);
    }
    /* Part 0 is the manifest, parts 1.. the operator's tensor files. */
    const uint8_t *part[1 + MOEPERM_GOLDEN_MAX_TENSORS] = {NULL};
    size_t part_len[1 + MOEPERM_GOLDEN_MAX_TENSORS] = {0};
    const uint8_t *p = data;
    size_t left = size;
    size_t parts = 0;
    while (parts < 1 + MOEPERM_GOLDEN_MAX_TENSORS) {
        const uint8_t *cut = parts < MOEPERM_GOLDEN_MAX_TENSORS
                                 ? memmem(p, left, separator, sizeof separator - 1)
                                 : NULL;
        part[parts] = p;
        part_len[parts] = cut ? (size_t)(cut - p) : left;
        parts++;
        if (!cut)
            break;
        left -= (size_t)(cut - p) + sizeof separator - 1;
        p = cut + sizeof separator - 1;
    }
    moeperm_op op = op_of(part[0], part_len[0]);
    size_t slot_count;
    const moeperm_golden_slot *slots = moeperm_golden_op_slots(op, &slot_count);
    char files[MOEPERM_GOLDEN_MAX_TENSORS][64];
    for (size_t i = 0; i < slot_count; i++)
        snprintf(files[i], sizeof files[i], "%s.bin", slots[i].name);

    static const char *const legacy[3] = {"@grad@", "@idx@", "@out@"};
    size_t mlen = part_len[0];
    char *manifest = malloc(mlen + 1);
    if (!manifest)
        abort();
    if (mlen)
        memcpy(manifest, part[0], mlen);
    for (size_t i = 1; i < 1 + MOEPERM_GOLDEN_MAX_TENSORS; i++) {
        char hex[GOLDEN_SHA256_HEX], tag[16];
        golden_sha256_hex(part[i] ? (const void *)part[i] : "", part_len[i], hex);
        snprintf(tag, sizeof tag, "@%zu@", i);
        manifest = substitute(manifest, &mlen, tag, hex);
        if (i <= 3)
            manifest = substitute(manifest, &mlen, legacy[i - 1], hex);
    }
    clear_dir();
    put("case.json", manifest, mlen);
    free(manifest);
    for (size_t i = 1; i < parts && i <= slot_count; i++)
        put(files[i - 1], part[i], part_len[i]);

    moeperm_golden_case c;
    char err[1024] = "";
    memset(&c, 0x5a, sizeof c); /* the reader must not rely on a zeroed case */
    if (moeperm_golden_case_read(dir, MOEPERM_GOLDEN_LOAD_ALL, &c, err, sizeof err) != 0) {
        CHECK(err[0] != '\0', "a refusal without a message");
        CHECK(memchr(err, '\0', sizeof err) != NULL, "an unterminated message");
        CHECK(c.tensor_count == 0 && !c.name && !c.dir, "a refused case still owns memory");
        moeperm_golden_case_free(&c);
        return 0;
    }

    size_t total = 0;
    for (size_t i = 0; i < c.tensor_count; i++) {
        const moeperm_golden_tensor *t = &c.tensors[i];
        uint64_t bytes = moeperm_golden_tensor_elements(t) * moeperm_dtype_size(t->dtype);
        CHECK(bytes == t->bytes, "%s: %zu bytes for %llu from its shape", t->name, t->bytes,
              (unsigned long long)bytes);
        CHECK(t->bytes == 0 || t->data, "%s is not loaded", t->name);
        /* Its file is one of the parts: the manifest may give any tensor
         * any part's file name. */
        for (size_t f = 0; f < slot_count; f++)
            if (strcmp(t->file, files[f]) == 0)
                CHECK(t->bytes == part_len[f + 1], "%s: %zu bytes, its file %s %zu", t->name,
                      t->bytes, t->file, part_len[f + 1]);
        total += t->bytes;
    }

    /* The case as a backend sees it: small ones go through the operator,
     * which must take what the reader took. */
    if (total <= RUN_LIMIT) {
        void *out[MOEPERM_GOLDEN_MAX_TENSORS] = {NULL}, *exact[MOEPERM_GOLDEN_MAX_TENSORS] = {NULL};
        size_t outs = 0, exacts = 0;
        for (size_t i = 0; i < c.tensor_count; i++) {
            const moeperm_golden_tensor *t = &c.tensors[i];
            void *buf = calloc(1, t->bytes + 1);
            CHECK(buf, "out of memory");
            if (t->role == MOEPERM_GOLDEN_ROLE_OUTPUT)
                out[outs++] = buf;
            else if (t->role == MOEPERM_GOLDEN_ROLE_EXACT)
                exact[exacts++] = buf;
            else
                free(buf);
        }
        moeperm_status status = moeperm_golden_run_reference(&c, out, exact, err, sizeof err);
        CHECK(status == MOEPERM_SUCCESS, "a case the reader took was refused: %s", err);
        check_against_model(&c, out);
        for (size_t i = 0; i < outs; i++)
            free(out[i]);
        for (size_t i = 0; i < exacts; i++)
            free(exact[i]);
    }
    moeperm_golden_case_free(&c);
    return 0;
}
