/*
 * suites.c - the built-in golden suites: which shapes, routings and value
 * kinds the committed corpus holds, and why each case is there.  Every
 * case is named for what it exercises and its description says why; the
 * shapes come from how the device kernels split the work (core counts,
 * chunk limits of the unified buffer, 32-byte and 512-byte alignment, the
 * tiling of MoeTokenUnpermuteGrad's reduction) and the value kinds from
 * the questions only a device can answer (docs/arithmetic.md,
 * docs/unpermute-grad.md).  docs/golden-format.md lists the same suites
 * for readers of the data.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <moeperm/golden.h>

static const moeperm_golden_suite suites[] = {
    {"dtype-topk", "every dtype with top_k 1, 2, 8 and 512", true},
    {"hidden", "hidden sizes at the 32-byte alignment tail and at the on-core chunk limits", true},
    {"tokens", "token counts below the vector-core count and one past multiples of it", true},
    {"dropped", "num_rows < tokens_num*top_k: dropped slots, a dropped slot 0, no rows at all",
     true},
    {"routing", "identity, reverse, random, uniform and skewed expert routings", true},
    {"nan-inf", "NaN and infinity propagation and random bit patterns (which NaN bits)", true},
    {"subnormal", "fp32 subnormals in the sum, subnormal bf16/fp16 inputs (flush to zero?)",
     true},
    {"overflow", "overflow in the fp32 sum and in the narrowing (inf or saturation?)", true},
    {"rounding", "RNE ties, cancellation in k order, signed zero", true},
    {"large", "on demand: index batching and full-size shapes (hundreds of MiB)", false},
    {"permute-routing", "MoeTokenPermute: skewed and uniform routings, DeepSeek-V3 sizes, "
                        "top_k 1 to 512, int8 tokens", true},
    {"permute-num-out-tokens", "MoeTokenPermute: num_out_tokens 0, negative, positive, and "
                               "beyond N*K either way (clamped)", true},
    {"permute-indices", "MoeTokenPermute: int64 ids, the min/max sentinel ids, ties and ids "
                        "spread over [0, 16777215)", true},
    {"permute-hidden", "MoeTokenPermute: hidden sizes at the 32-byte and 512-byte alignment, "
                       "every dtype with int8", true},
    {"permute-bits", "MoeTokenPermute: random bit patterns (NaN payloads, signalling NaNs, -0) "
                     "copied unchanged", true},
    {"unpermute-routing", "MoeTokenUnpermute: routings, DeepSeek-V3 sizes, top_k 1 to 512, no "
                          "probs, dropped rows", true},
    {"unpermute-probs", "MoeTokenUnpermute: every token/probs dtype pair; +0/-0 probs masking "
                        "rows of inf and NaN", true},
    {"unpermute-products", "MoeTokenUnpermute: fp32 product ties, cancelling, subnormal and "
                           "overflowing products; sums through probs of 1.0", true},
    {"unpermute-hidden", "MoeTokenUnpermute: hidden sizes at the 32-byte and 512-byte "
                         "alignment", true},
    {"unpermute-grad-reduction", "MoeTokenUnpermuteGrad: one chunk of each length class of the "
                                 "probs_grad reduction on the Atlas A2", true},
    {"unpermute-grad-ub261888", "MoeTokenUnpermuteGrad for a chip with a 261888-byte unified "
                                "buffer (not the A2): chunks over 8192 columns", true},
    {"unpermute-grad-chunks", "MoeTokenUnpermuteGrad: hidden sizes the tiling cuts into "
                              "chunks, with short last chunks", true},
    {"unpermute-grad-values", "MoeTokenUnpermuteGrad: order-dependent sums, signed zeros, inf "
                              "and NaN meeting dropped rows, product edge cases", true},
    {"unpermute-grad-chips", "MoeTokenUnpermuteGrad for a named chip: a probs_grad that "
                             "differs between 48 and 40 vector cores", true},
    {"permute-grad-domain", "MoeTokenPermuteGrad at the input domain's edge: rows read twice "
                            "or never, huge indices, R > N*K, num_topk -1, unread entries, "
                            "padded_mode", true},
    {"permute-domain", "MoeTokenPermute at the input domain's edge: tokens of rank 3", true},
    {"unpermute-domain", "MoeTokenUnpermute at the input domain's edge: rows read twice or "
                         "never, huge indices, R > N*K, unread entries, padded_mode", true},
    {"unpermute-grad-domain", "MoeTokenUnpermuteGrad at the input domain's edge: rows no slot "
                              "names (left as they were), huge indices, unread entries, "
                              "padded_mode", true},
    {"permute-large", "on demand: MoeTokenPermute at DeepSeek-V3 sizes on 4096 tokens, 4 Mi "
                      "copies", false},
    {"unpermute-large", "on demand: MoeTokenUnpermute at DeepSeek-V3 sizes on 4096 tokens",
     false},
    {"unpermute-grad-large", "on demand: MoeTokenUnpermuteGrad at DeepSeek-V3 sizes on 1024 "
                             "tokens, many chunks on every core", false},
};

const moeperm_golden_suite *moeperm_golden_suites(size_t *count)
{
    *count = sizeof suites / sizeof suites[0];
    return suites;
}

const moeperm_golden_suite *moeperm_golden_suite_find(const char *name)
{
    for (size_t i = 0; i < sizeof suites / sizeof suites[0]; i++)
        if (strcmp(suites[i].name, name) == 0)
            return &suites[i];
    return NULL;
}

typedef struct spec_list {
    moeperm_golden_spec *items;
    size_t count, capacity;
    uint64_t seed;
    bool failed;
} spec_list;

/* The dtypes in the order every suite lists them. */
static const moeperm_dtype dtypes[] = {MOEPERM_BF16, MOEPERM_FLOAT16, MOEPERM_FLOAT};

/* A MoeTokenPermuteGrad case (op 0 reads as it) with the tool's defaults
 * but values and routing. */
static moeperm_golden_spec spec(moeperm_dtype dtype, int64_t t, int64_t k, int64_t h,
                                moeperm_golden_values values, moeperm_golden_routing routing)
{
    moeperm_golden_spec s = moeperm_golden_spec_default((moeperm_op)0, dtype, t, k, h);
    s.values = values;
    s.routing = routing;
    return s;
}

static void vadd(spec_list *l, moeperm_golden_spec s, bool dtype_prefix, const char *name,
                 const char *description, va_list ap)
{
    if (l->failed)
        return;
    if (l->count == l->capacity) {
        size_t cap = l->capacity ? 2 * l->capacity : 32;
        moeperm_golden_spec *grown = realloc(l->items, cap * sizeof *grown);
        if (!grown) {
            l->failed = true;
            return;
        }
        l->items = grown;
        l->capacity = cap;
    }
    s.seed = l->seed;
    if (dtype_prefix)
        snprintf(s.name, sizeof s.name, "%s-%s", moeperm_dtype_name(s.dtype), name);
    else
        snprintf(s.name, sizeof s.name, "%s", name);
    vsnprintf(s.description, sizeof s.description, description, ap);
    l->items[l->count++] = s;
}

/* A MoeTokenPermuteGrad case, named "<dtype>-<name>". */
static void add(spec_list *l, moeperm_golden_spec s, const char *name, const char *description, ...)
    __attribute__((format(printf, 4, 5)));

static void add(spec_list *l, moeperm_golden_spec s, const char *name, const char *description, ...)
{
    va_list ap;
    va_start(ap, description);
    vadd(l, s, true, name, description, ap);
    va_end(ap);
}

/* A case of the other operators, named in full by the caller. */
static void add_named(spec_list *l, moeperm_golden_spec s, const char *name, const char *description,
                      ...) __attribute__((format(printf, 4, 5)));

static void add_named(spec_list *l, moeperm_golden_spec s, const char *name, const char *description,
                      ...)
{
    va_list ap;
    va_start(ap, description);
    vadd(l, s, false, name, description, ap);
    va_end(ap);
}

static void suite_dtype_topk(spec_list *l)
{
    static const int64_t top_ks[] = {1, 2, 8};
    char name[64];
    for (size_t d = 0; d < 3; d++) {
        for (size_t i = 0; i < 3; i++) {
            snprintf(name, sizeof name, "k%" PRId64 "-t33-h24", top_ks[i]);
            add(l, spec(dtypes[d], 33, top_ks[i], 24, MOEPERM_GOLDEN_VALUES_NORMAL, MOEPERM_GOLDEN_ROUTING_ROUTED),
                name, "top_k %" PRId64 ": gradient-like values routed over 64 experts, "
                      "summed in k order in fp32",
                top_ks[i]);
        }
        moeperm_golden_spec s = spec(dtypes[d], 3, 512, 17, MOEPERM_GOLDEN_VALUES_NORMAL, MOEPERM_GOLDEN_ROUTING_ROUTED);
        s.num_experts = 1024;
        add(l, s, "k512-t3-h17",
            "top_k 512, the most the device accepts: 512 slots per token over 1024 experts");
    }
}

static void suite_hidden(spec_list *l)
{
    static const int64_t small[] = {1, 15, 16, 17};
    static const int64_t model[] = {4096, 5120, 7168};
    char name[64];
    for (size_t d = 0; d < 3; d++) {
        moeperm_dtype dtype = dtypes[d];
        int64_t align = dtype == MOEPERM_FLOAT ? 8 : 16;
        int64_t chunk = dtype == MOEPERM_FLOAT ? 15872 : 13312;
        for (size_t i = 0; i < 4; i++) {
            int64_t h = small[i];
            snprintf(name, sizeof name, "h%" PRId64, h);
            add(l, spec(dtype, 5, 2, h, MOEPERM_GOLDEN_VALUES_NORMAL, MOEPERM_GOLDEN_ROUTING_ROUTED), name,
                "hidden_size %" PRId64 ": %s", h,
                h % align ? "rows are not a whole number of 32-byte blocks (the tail path)"
                          : "rows are whole 32-byte blocks");
        }
        for (size_t i = 0; i < 3; i++) {
            snprintf(name, sizeof name, "h%" PRId64, model[i]);
            add(l, spec(dtype, 1, 2, model[i], MOEPERM_GOLDEN_VALUES_NORMAL, MOEPERM_GOLDEN_ROUTING_ROUTED),
                name, "hidden_size %" PRId64 " of production models, in one on-core chunk",
                model[i]);
        }
        for (int64_t h = chunk - 1; h <= chunk + 1; h++) {
            snprintf(name, sizeof name, "h%" PRId64, h);
            add(l, spec(dtype, 1, 2, h, MOEPERM_GOLDEN_VALUES_NORMAL, MOEPERM_GOLDEN_ROUTING_ROUTED), name,
                "hidden_size %" PRId64 ": %s the %" PRId64
                "-element single-chunk limit of a 192 KiB buffer%s",
                h, h < chunk ? "one below" : h == chunk ? "exactly" : "one above (chunked path)",
                chunk, h % align ? ", with a tail" : "");
        }
    }
    add(l, spec(MOEPERM_BF16, 4, 8, 7168, MOEPERM_GOLDEN_VALUES_NORMAL, MOEPERM_GOLDEN_ROUTING_ROUTED),
        "t4-k8-h7168-deepseek", "DeepSeek-V3 sizes (top_k 8, hidden 7168) on a few tokens");
}

static void suite_tokens(spec_list *l)
{
    static const int64_t counts[] = {1, 7, 39, 40, 41, 47, 48, 49, 97};
    char name[64];
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        int64_t t = counts[i];
        const char *why = t < 40    ? "fewer tokens than vector cores (40 to 48): cores idle"
                          : t == 40 ? "one token per core on a 40-core part"
                          : t == 41 ? "40n+1: one core takes an extra token on a 40-core part"
                          : t == 47 ? "one core idle on a 48-core part"
                          : t == 48 ? "one token per core on a 48-core part"
                                    : "48n+1: one core takes an extra token on a 48-core part";
        snprintf(name, sizeof name, "t%" PRId64 "-k8-h17", t);
        add(l, spec(MOEPERM_BF16, t, 8, 17, MOEPERM_GOLDEN_VALUES_NORMAL, MOEPERM_GOLDEN_ROUTING_ROUTED), name,
            "%" PRId64 " tokens: %s", t, why);
    }
    add(l, spec(MOEPERM_FLOAT16, 49, 8, 17, MOEPERM_GOLDEN_VALUES_NORMAL, MOEPERM_GOLDEN_ROUTING_ROUTED),
        "t49-k8-h17", "49 tokens: 48n+1, one core takes an extra token on a 48-core part");
    add(l, spec(MOEPERM_FLOAT, 97, 8, 9, MOEPERM_GOLDEN_VALUES_NORMAL, MOEPERM_GOLDEN_ROUTING_ROUTED),
        "t97-k8-h9", "97 tokens: 48n+1, with a one-element fp32 tail");
}

static void suite_dropped(spec_list *l)
{
    for (size_t d = 0; d < 3; d++) {
        moeperm_golden_spec s = spec(dtypes[d], 10, 3, 19, MOEPERM_GOLDEN_VALUES_NORMAL, MOEPERM_GOLDEN_ROUTING_ROUTED);
        s.num_rows = 19;
        add(l, s, "rows19-of-30-routed",
            "19 of 30 rows: slots routed to rows 19..29 (the last experts) are skipped");
        s = spec(dtypes[d], 10, 3, 19, MOEPERM_GOLDEN_VALUES_NORMAL, MOEPERM_GOLDEN_ROUTING_REVERSE);
        s.num_rows = 25;
        add(l, s, "rows25-reverse-slot0-dropped",
            "reverse routing, 25 of 30 rows: token 0 loses every slot (output +0.0), token 1 "
            "loses slots 0 and 1 (its sum starts from +0.0, not from slot 0)");
        s = spec(dtypes[d], 10, 3, 19, MOEPERM_GOLDEN_VALUES_NEGZERO, MOEPERM_GOLDEN_ROUTING_REVERSE);
        s.num_rows = 28;
        add(l, s, "rows28-negzero-slot0-dropped",
            "every value -0.0, token 0 loses slots 0 and 1: +0.0 + -0.0 = +0.0 there, "
            "-0.0 for every other token");
        s = spec(dtypes[d], 4, 2, 17, MOEPERM_GOLDEN_VALUES_NORMAL, MOEPERM_GOLDEN_ROUTING_IDENTITY);
        s.num_rows = 0;
        add(l, s, "rows0", "no rows at all: every slot is dropped, every output +0.0");
    }
}

static void suite_routing(spec_list *l)
{
    moeperm_golden_spec s;
    add(l, spec(MOEPERM_BF16, 64, 8, 16, MOEPERM_GOLDEN_VALUES_NORMAL, MOEPERM_GOLDEN_ROUTING_IDENTITY),
        "identity-t64-k8-h16", "sorted_indices[i] = i: token t reads rows t*8..t*8+7");
    add(l, spec(MOEPERM_BF16, 64, 8, 16, MOEPERM_GOLDEN_VALUES_NORMAL, MOEPERM_GOLDEN_ROUTING_REVERSE),
        "reverse-t64-k8-h16", "sorted_indices[i] = 511-i: rows read backwards");
    add(l, spec(MOEPERM_BF16, 64, 8, 16, MOEPERM_GOLDEN_VALUES_NORMAL, MOEPERM_GOLDEN_ROUTING_RANDOM),
        "random-t64-k8-h16", "a uniformly random permutation (Fisher-Yates)");
    s = spec(MOEPERM_BF16, 64, 8, 16, MOEPERM_GOLDEN_VALUES_NORMAL, MOEPERM_GOLDEN_ROUTING_ROUTED);
    s.hot_percent = 0;
    add(l, s, "routed-uniform-t64-k8-h16", "top-8 of 64 experts drawn uniformly");
    s.hot_percent = 90;
    s.num_experts = 256;
    add(l, s, "routed-hot-t64-k8-h16",
        "top-8 of 256 experts, 90%% of picks among the hot 32: uneven expert loads");
    add(l, spec(MOEPERM_FLOAT16, 64, 8, 16, MOEPERM_GOLDEN_VALUES_NORMAL, MOEPERM_GOLDEN_ROUTING_RANDOM),
        "random-t64-k8-h16", "a uniformly random permutation (Fisher-Yates)");
    add(l, spec(MOEPERM_FLOAT, 64, 8, 16, MOEPERM_GOLDEN_VALUES_NORMAL, MOEPERM_GOLDEN_ROUTING_RANDOM),
        "random-t64-k8-h16", "a uniformly random permutation (Fisher-Yates)");
}

static void suite_values(spec_list *l, moeperm_golden_values values, const char *what)
{
    char name[64];
    static const int64_t top_ks[] = {2, 4, 8};
    int64_t hidden = values == MOEPERM_GOLDEN_VALUES_NAN_INF    ? 16
                     : values == MOEPERM_GOLDEN_VALUES_ROUNDING ? 22
                                                        : 12;
    for (size_t d = 0; d < 3; d++)
        for (size_t i = 0; i < 3; i++) {
            snprintf(name, sizeof name, "%s-t16-k%" PRId64 "-h%" PRId64,
                     moeperm_golden_values_name(values), top_ks[i], hidden);
            add(l, spec(dtypes[d], 16, top_ks[i], hidden, values, MOEPERM_GOLDEN_ROUTING_ROUTED), name,
                "%s; top_k %" PRId64 ", one scenario per column (docs/golden-format.md)", what,
                top_ks[i]);
        }
}

static void suite_nan_inf(spec_list *l)
{
    suite_values(l, MOEPERM_GOLDEN_VALUES_NAN_INF,
                 "NaN (quiet, signalling, payloads) and +-inf among numbers, inf - inf");
    for (size_t d = 0; d < 3; d++)
        add(l, spec(dtypes[d], 16, 8, 32, MOEPERM_GOLDEN_VALUES_BITS, MOEPERM_GOLDEN_ROUTING_ROUTED),
            "bits-t16-k8-h32", "uniformly random bit patterns: NaNs, infinities, subnormals "
                               "and normals of every magnitude mixed");
}

static void suite_subnormal(spec_list *l)
{
    suite_values(l, MOEPERM_GOLDEN_VALUES_SUBNORMAL,
                 "subnormal inputs, normals cancelling into subnormals, subnormal sums "
                 "growing into normals");
}

static void suite_overflow(spec_list *l)
{
    suite_values(l, MOEPERM_GOLDEN_VALUES_OVERFLOW,
                 "max + max, max plus a quarter and half an ulp, max + max - max");
}

static void suite_rounding(spec_list *l)
{
    suite_values(l, MOEPERM_GOLDEN_VALUES_ROUNDING,
                 "ties to even in the narrowing and the fp32 adds, absorption and "
                 "cancellation in k order, +0/-0");
    for (size_t d = 0; d < 3; d++)
        add(l, spec(dtypes[d], 4, 8, 16, MOEPERM_GOLDEN_VALUES_NEGZERO, MOEPERM_GOLDEN_ROUTING_ROUTED),
            "negzero-t4-k8-h16",
            "every slot -0.0: the sum starts from slot 0, so every output is -0.0");
}

static void suite_large(spec_list *l)
{
    moeperm_golden_spec s = spec(MOEPERM_BF16, 524289, 8, 16, MOEPERM_GOLDEN_VALUES_NORMAL,
                         MOEPERM_GOLDEN_ROUTING_ROUTED);
    s.num_experts = 256;
    add(l, s, "t524289-k8-h16-index-batching",
        "4 Mi slots, about 87000 per core on 48 cores: more indices than a 192 KiB buffer "
        "holds, so each core loads them in batches");
    add(l, spec(MOEPERM_BF16, 4096, 8, 7168, MOEPERM_GOLDEN_VALUES_NORMAL, MOEPERM_GOLDEN_ROUTING_ROUTED),
        "t4096-k8-h7168-deepseek", "DeepSeek-V3 sizes at 4096 tokens (about 450 MiB of input)");
    add(l, spec(MOEPERM_FLOAT16, 1025, 8, 13313, MOEPERM_GOLDEN_VALUES_NORMAL, MOEPERM_GOLDEN_ROUTING_ROUTED),
        "t1025-k8-h13313-chunked", "the chunked path (hidden one past the 16-bit chunk limit) "
                                   "at 1025 tokens");
    add(l, spec(MOEPERM_FLOAT, 512, 8, 15873, MOEPERM_GOLDEN_VALUES_NORMAL, MOEPERM_GOLDEN_ROUTING_ROUTED),
        "t512-k8-h15873-chunked", "the chunked path (hidden one past the fp32 chunk limit) "
                                  "at 512 tokens");
}

/* ---------------------------------------------------------------------- */
/* MoeTokenPermute, MoeTokenUnpermute, MoeTokenUnpermuteGrad              */
/* ---------------------------------------------------------------------- */

/* probs_dtype of a case without probs (int32 is never a probs dtype). */
#define NO_PROBS MOEPERM_INT32

/* A routed case of op; probs of probs_dtype (or NO_PROBS) for the two
 * unpermute operators, normal values unless the caller says otherwise. */
static moeperm_golden_spec op_spec(moeperm_op op, moeperm_dtype dtype, moeperm_dtype probs_dtype,
                           int64_t t, int64_t k, int64_t h)
{
    moeperm_golden_spec s = spec(dtype, t, k, h, MOEPERM_GOLDEN_VALUES_NORMAL, MOEPERM_GOLDEN_ROUTING_ROUTED);
    s.op = op;
    s.index_dtype = MOEPERM_INT32;
    s.has_probs = (op == MOEPERM_OP_UNPERMUTE || op == MOEPERM_OP_UNPERMUTE_GRAD) &&
                  probs_dtype != NO_PROBS;
    s.probs_dtype = s.has_probs ? probs_dtype : dtype;
    s.probs_values = MOEPERM_GOLDEN_VALUES_NORMAL;
    return s;
}

/* "bf16-pfloat32", or "bf16-noprobs": the dtypes a case name starts with. */
static void pair_name(char *buf, size_t len, const moeperm_golden_spec *s)
{
    if (s->has_probs)
        snprintf(buf, len, "%s-p%s", moeperm_dtype_name(s->dtype),
                 moeperm_dtype_name(s->probs_dtype));
    else
        snprintf(buf, len, "%s-noprobs", moeperm_dtype_name(s->dtype));
}

/* The token/probs dtype pairs, tokens first. */
typedef struct pair {
    moeperm_dtype tokens, probs;
} pair;

/* Elements of one 32-byte block and one 512-byte block of a row. */
static int64_t per_bytes(moeperm_dtype dtype, int64_t bytes)
{
    return bytes / (int64_t)moeperm_dtype_size(dtype);
}

static void suite_permute_routing(spec_list *l)
{
    moeperm_golden_spec s = op_spec(MOEPERM_OP_PERMUTE, MOEPERM_BF16, NO_PROBS, 2, 8, 7168);
    s.num_experts = 256;
    s.hot_percent = 30;
    add_named(l, s, "bf16-t2-k8-h7168-deepseek",
              "DeepSeek-V3 sizes (top_k 8 of 256 experts, hidden 7168) on 2 tokens: 16 rows of "
              "14 KiB");
    s = op_spec(MOEPERM_OP_PERMUTE, MOEPERM_BF16, NO_PROBS, 64, 8, 16);
    s.num_experts = 256;
    s.hot_percent = 90;
    add_named(l, s, "bf16-t64-k8-h16-hot",
              "top-8 of 256 experts, 90%% of picks among the hot 32: long runs of equal ids, "
              "uneven groups");
    s.num_experts = 64;
    s.hot_percent = 0;
    add_named(l, s, "bf16-t64-k8-h16-uniform", "top-8 of 64 experts drawn uniformly");
    s = op_spec(MOEPERM_OP_PERMUTE, MOEPERM_FLOAT16, NO_PROBS, 33, 1, 24);
    add_named(l, s, "float16-t33-k1-h24", "top_k 1: one copy per token, indices [N, 1]");
    s = op_spec(MOEPERM_OP_PERMUTE, MOEPERM_FLOAT, NO_PROBS, 33, 2, 24);
    add_named(l, s, "float32-t33-k2-h24", "top_k 2 over 64 experts");
    s = op_spec(MOEPERM_OP_PERMUTE, MOEPERM_BF16, NO_PROBS, 3, 512, 17);
    s.num_experts = 1024;
    add_named(l, s, "bf16-t3-k512-h17",
              "top_k 512, the most the device accepts: 1536 copies over 1024 experts");
    s = op_spec(MOEPERM_OP_PERMUTE, MOEPERM_BF16, NO_PROBS, 97, 8, 17);
    add_named(l, s, "bf16-t97-k8-h17",
              "97 tokens (48n+1): one core takes an extra token on a 48-core part");
    s = op_spec(MOEPERM_OP_PERMUTE, MOEPERM_INT8, NO_PROBS, 64, 8, 64);
    s.num_experts = 256;
    s.hot_percent = 90;
    add_named(l, s, "int8-t64-k8-h64-hot",
              "int8 tokens (quantised activations), top-8 of 256 experts, skewed: random bytes "
              "copied unchanged");
}

static void suite_permute_num_out_tokens(spec_list *l)
{
    /* T = 10, K = 3: 30 copies. */
    static const struct {
        int64_t n;
        const char *name, *why;
    } counts[] = {
        {0, "n0", "0: every copy kept (0 + N*K = 30 rows)"},
        {-1, "n-1", "-1: N*K - 1 = 29 rows, the last copy of the sorted order dropped"},
        {-29, "n-29", "-29: 1 row, the first copy only"},
        {-30, "n-30", "-30: 0 rows (-30 + N*K), sorted_indices still complete"},
        {-31, "n-31-clamped", "-31: -1 clamped to 0 rows"},
        {1, "n1", "1: one row"},
        {29, "n29", "29: one copy dropped, as -1"},
        {30, "n30", "30 = N*K: every copy kept"},
        {31, "n31-clamped", "31 > N*K: clamped to 30 rows"},
        {INT32_MAX, "n2147483647-clamped", "INT32_MAX: clamped to 30 rows"},
    };
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        moeperm_golden_spec s = op_spec(MOEPERM_OP_PERMUTE, MOEPERM_BF16, NO_PROBS, 10, 3, 17);
        s.num_out_tokens = counts[i].n;
        char name[64];
        snprintf(name, sizeof name, "bf16-t10-k3-h17-%s", counts[i].name);
        add_named(l, s, name, "num_out_tokens %s", counts[i].why);
    }
    moeperm_golden_spec s = op_spec(MOEPERM_OP_PERMUTE, MOEPERM_INT8, NO_PROBS, 10, 3, 33);
    s.num_out_tokens = -7;
    add_named(l, s, "int8-t10-k3-h33-n-7", "num_out_tokens -7 with int8 tokens: 23 rows of 33 "
                                            "bytes (one past a 32-byte block)");
    s = op_spec(MOEPERM_OP_PERMUTE, MOEPERM_FLOAT, NO_PROBS, 10, 3, 9);
    s.num_out_tokens = 12;
    add_named(l, s, "float32-t10-k3-h9-n12", "num_out_tokens 12 of 30 with fp32 tokens");
}

static void suite_permute_indices(spec_list *l)
{
    moeperm_golden_spec s = op_spec(MOEPERM_OP_PERMUTE, MOEPERM_BF16, NO_PROBS, 16, 4, 16);
    s.index_dtype = MOEPERM_INT64;
    add_named(l, s, "bf16-int64-t16-k4-h16", "int64 expert ids, the same routing as int32");
    s.index_dtype = MOEPERM_INT32;
    s.sentinels = true;
    add_named(l, s, "bf16-int32-sentinels-t16-k4-h16",
              "every 7th id INT32_MIN or INT32_MAX (alternately): the minimum sorts before "
              "every id, the maximum after, each in entry order");
    s.index_dtype = MOEPERM_INT64;
    add_named(l, s, "bf16-int64-sentinels-t16-k4-h16",
              "every 7th id INT64_MIN or INT64_MAX (alternately), sorted as the int32 ones");
    s.num_out_tokens = -5;
    add_named(l, s, "bf16-int64-sentinels-t16-k4-h16-n-5",
              "int64 sentinels with num_out_tokens -5: the copies sorted last (INT64_MAX ids) "
              "are the ones dropped");
    s = op_spec(MOEPERM_OP_PERMUTE, MOEPERM_BF16, NO_PROBS, 16, 4, 16);
    s.num_experts = 4;
    add_named(l, s, "bf16-t16-k4-h16-four-experts",
              "4 experts for top_k 4: every token takes every expert in its own order, so "
              "each group is 16 equal ids kept in entry order");
    s = op_spec(MOEPERM_OP_PERMUTE, MOEPERM_BF16, NO_PROBS, 16, 2, 16);
    s.num_experts = 16777215;
    s.hot_percent = 0;
    add_named(l, s, "bf16-t16-k2-h16-wide-ids",
              "ids drawn from all of [0, 16777215): large float keys, exact only below 2^24");
    s.index_dtype = MOEPERM_INT64;
    add_named(l, s, "bf16-int64-t16-k2-h16-wide-ids",
              "int64 ids drawn from all of [0, 16777215)");
}

static void suite_permute_hidden(spec_list *l)
{
    static const moeperm_dtype with_int8[] = {MOEPERM_BF16, MOEPERM_FLOAT16, MOEPERM_FLOAT,
                                              MOEPERM_INT8};
    char name[64];
    for (size_t d = 0; d < 4; d++) {
        moeperm_dtype dtype = with_int8[d];
        int64_t a = per_bytes(dtype, 32), b = per_bytes(dtype, 512);
        const int64_t sizes[] = {1, a - 1, a, a + 1, b - 1, b, b + 1};
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            int64_t h = sizes[i];
            moeperm_golden_spec s = op_spec(MOEPERM_OP_PERMUTE, dtype, NO_PROBS, 5, 2, h);
            snprintf(name, sizeof name, "%s-h%" PRId64, moeperm_dtype_name(dtype), h);
            add_named(l, s, name, "hidden_size %" PRId64 ": rows of %" PRId64 " bytes, %s", h,
                      h * (int64_t)moeperm_dtype_size(dtype),
                      h % a == 0 ? (h % b == 0 ? "whole 512-byte blocks" : "whole 32-byte blocks")
                                 : "a partial 32-byte block at the end");
        }
    }
}

static void suite_permute_bits(spec_list *l)
{
    char name[64];
    for (size_t d = 0; d < 3; d++) {
        moeperm_golden_spec s = op_spec(MOEPERM_OP_PERMUTE, dtypes[d], NO_PROBS, 16, 8, 32);
        s.values = MOEPERM_GOLDEN_VALUES_BITS;
        snprintf(name, sizeof name, "%s-bits-t16-k8-h32", moeperm_dtype_name(dtypes[d]));
        add_named(l, s, name,
                  "uniformly random bit patterns (NaN payloads, signalling NaNs, -0, "
                  "subnormals): a copy never changes a bit");
    }
}

static void suite_unpermute_routing(spec_list *l)
{
    moeperm_golden_spec s = op_spec(MOEPERM_OP_UNPERMUTE, MOEPERM_BF16, MOEPERM_FLOAT, 2, 8, 7168);
    s.num_experts = 256;
    s.hot_percent = 30;
    add_named(l, s, "bf16-pfloat32-t2-k8-h7168-deepseek",
              "DeepSeek-V3 sizes (top_k 8 of 256 experts, hidden 7168), bf16 tokens and fp32 "
              "probs, on 2 tokens");
    s = op_spec(MOEPERM_OP_UNPERMUTE, MOEPERM_BF16, MOEPERM_BF16, 64, 8, 16);
    s.num_experts = 256;
    s.hot_percent = 90;
    add_named(l, s, "bf16-pbf16-t64-k8-h16-hot",
              "top-8 of 256 experts, 90%% of picks among the hot 32");
    static const moeperm_golden_routing fixed[] = {MOEPERM_GOLDEN_ROUTING_IDENTITY, MOEPERM_GOLDEN_ROUTING_REVERSE,
                                           MOEPERM_GOLDEN_ROUTING_RANDOM};
    char name[64];
    for (size_t i = 0; i < 3; i++) {
        s = op_spec(MOEPERM_OP_UNPERMUTE, MOEPERM_BF16, MOEPERM_BF16, 64, 8, 16);
        s.routing = fixed[i];
        snprintf(name, sizeof name, "bf16-pbf16-t64-k8-h16-%s", moeperm_golden_routing_name(fixed[i]));
        add_named(l, s, name, "%s",
                  i == 0   ? "sorted_indices[i] = i: token t reads rows t*8..t*8+7"
                  : i == 1 ? "sorted_indices[i] = 511-i: rows read backwards"
                           : "a uniformly random permutation (Fisher-Yates)");
    }
    s = op_spec(MOEPERM_OP_UNPERMUTE, MOEPERM_FLOAT, MOEPERM_FLOAT, 1, 512, 17);
    s.num_experts = 1024;
    add_named(l, s, "float32-pfloat32-t1-k512-h17",
              "top_k 512: 512 products summed per element, in k order");
    s = op_spec(MOEPERM_OP_UNPERMUTE, MOEPERM_FLOAT16, MOEPERM_FLOAT16, 97, 8, 9);
    add_named(l, s, "float16-pfloat16-t97-k8-h9",
              "97 tokens (48n+1) with a 9-column row (a partial 32-byte block)");
    for (size_t d = 0; d < 3; d++) {
        s = op_spec(MOEPERM_OP_UNPERMUTE, dtypes[d], NO_PROBS, 33, 1, 24);
        snprintf(name, sizeof name, "%s-noprobs-t33-k1-h24", moeperm_dtype_name(dtypes[d]));
        add_named(l, s, name, "no probs (top_k 1): each token is its one row, widened and "
                              "narrowed");
    }
    s = op_spec(MOEPERM_OP_UNPERMUTE, MOEPERM_BF16, NO_PROBS, 16, 1, 32);
    s.values = MOEPERM_GOLDEN_VALUES_BITS;
    add_named(l, s, "bf16-noprobs-bits-t16-k1-h32",
              "no probs, random bit patterns: NaNs come out quiet with their payload, -0 stays");
    s = op_spec(MOEPERM_OP_UNPERMUTE, MOEPERM_BF16, MOEPERM_FLOAT, 10, 3, 19);
    s.num_rows = 19;
    add_named(l, s, "bf16-pfloat32-rows19-of-30",
              "19 of 30 rows (a num_out_tokens cut): slots routed to rows 19..29 are left out");
    s = op_spec(MOEPERM_OP_UNPERMUTE, MOEPERM_BF16, MOEPERM_FLOAT, 10, 3, 19);
    s.routing = MOEPERM_GOLDEN_ROUTING_REVERSE;
    s.num_rows = 25;
    add_named(l, s, "bf16-pfloat32-rows25-reverse-slot0-dropped",
              "reverse routing, 25 of 30 rows: token 0 loses every slot (+0.0), token 1 slots "
              "0 and 1 (its sum starts from +0.0)");
    s = op_spec(MOEPERM_OP_UNPERMUTE, MOEPERM_FLOAT, MOEPERM_FLOAT, 4, 2, 17);
    s.routing = MOEPERM_GOLDEN_ROUTING_IDENTITY;
    s.num_rows = 0;
    add_named(l, s, "float32-pfloat32-rows0", "no rows at all: every output +0.0");
}

static void suite_unpermute_probs(spec_list *l)
{
    char name[96], pn[48];
    for (size_t d = 0; d < 3; d++)
        for (size_t p = 0; p < 3; p++) {
            moeperm_golden_spec s = op_spec(MOEPERM_OP_UNPERMUTE, dtypes[d], dtypes[p], 16, 4, 24);
            pair_name(pn, sizeof pn, &s);
            snprintf(name, sizeof name, "%s-t16-k4-h24", pn);
            add_named(l, s, name, "%s tokens, %s probs: both widened, multiplied and summed in "
                                  "fp32, narrowed to the tokens' dtype",
                      moeperm_dtype_name(dtypes[d]), moeperm_dtype_name(dtypes[p]));
        }
    static const pair masking[] = {{MOEPERM_BF16, MOEPERM_FLOAT}, {MOEPERM_BF16, MOEPERM_BF16},
                                   {MOEPERM_FLOAT16, MOEPERM_FLOAT16},
                                   {MOEPERM_FLOAT16, MOEPERM_FLOAT},
                                   {MOEPERM_FLOAT, MOEPERM_FLOAT}};
    for (size_t i = 0; i < sizeof masking / sizeof masking[0]; i++) {
        moeperm_golden_spec s = op_spec(MOEPERM_OP_UNPERMUTE, masking[i].tokens, masking[i].probs, 16,
                                8, 16);
        s.values = MOEPERM_GOLDEN_VALUES_MASKING;
        s.probs_values = MOEPERM_GOLDEN_VALUES_MASKING;
        pair_name(pn, sizeof pn, &s);
        snprintf(name, sizeof name, "%s-masking-t16-k8-h16", pn);
        add_named(l, s, name,
                  "a quarter of the probs +0 or -0, their rows inf, -inf and NaN: a zero prob "
                  "leaves its slot out, so 0 * inf never forms and every output is finite");
    }
    moeperm_golden_spec s = op_spec(MOEPERM_OP_UNPERMUTE, MOEPERM_BF16, MOEPERM_FLOAT, 16, 8, 16);
    s.values = MOEPERM_GOLDEN_VALUES_MASKING;
    add_named(l, s, "bf16-pfloat32-masked-rows-normal-probs-t16-k8-h16",
              "control: the same inf and NaN rows with non-zero probs reach the sums");
    s = op_spec(MOEPERM_OP_UNPERMUTE, MOEPERM_BF16, MOEPERM_FLOAT, 16, 8, 16);
    s.probs_values = MOEPERM_GOLDEN_VALUES_MASKING;
    add_named(l, s, "bf16-pfloat32-zero-probs-t16-k8-h16",
              "zero probs over finite rows: a token whose slot 0 has a zero prob starts its "
              "sum from +0.0");
    s = op_spec(MOEPERM_OP_UNPERMUTE, MOEPERM_BF16, MOEPERM_BF16, 8, 8, 16);
    s.values = MOEPERM_GOLDEN_VALUES_NEGZERO;
    s.probs_values = MOEPERM_GOLDEN_VALUES_MASKING;
    add_named(l, s, "bf16-pbf16-negzero-zero-probs-t8-k8-h16",
              "every token value -0.0, a quarter of the probs +-0: -0 when slot 0 is in the "
              "sum (its product is -0 or +0 by the prob's sign), +0 when it is left out");
    s.probs_values = MOEPERM_GOLDEN_VALUES_ONE;
    add_named(l, s, "bf16-pbf16-negzero-one-probs-t8-k8-h16",
              "every token value -0.0, every prob 1.0: each product -0, the sum -0");
}

static void suite_unpermute_products(spec_list *l)
{
    static const pair rounding[] = {
        {MOEPERM_FLOAT, MOEPERM_FLOAT},   {MOEPERM_BF16, MOEPERM_FLOAT},
        {MOEPERM_FLOAT16, MOEPERM_FLOAT}, {MOEPERM_FLOAT, MOEPERM_BF16},
        {MOEPERM_FLOAT, MOEPERM_FLOAT16}, {MOEPERM_BF16, MOEPERM_BF16}};
    static const pair subnormal[] = {
        {MOEPERM_FLOAT, MOEPERM_FLOAT},   {MOEPERM_BF16, MOEPERM_FLOAT},
        {MOEPERM_BF16, MOEPERM_BF16},     {MOEPERM_FLOAT, MOEPERM_FLOAT16},
        {MOEPERM_BF16, MOEPERM_FLOAT16},  {MOEPERM_FLOAT16, MOEPERM_FLOAT16}};
    static const pair overflow[] = {
        {MOEPERM_BF16, MOEPERM_BF16},     {MOEPERM_BF16, MOEPERM_FLOAT},
        {MOEPERM_FLOAT, MOEPERM_FLOAT},   {MOEPERM_FLOAT16, MOEPERM_FLOAT16},
        {MOEPERM_FLOAT16, MOEPERM_FLOAT}};
    static const struct {
        moeperm_golden_values kind;
        const pair *pairs;
        size_t count;
        int64_t hidden;
        const char *why;
    } kinds[] = {
        {MOEPERM_GOLDEN_VALUES_PRODUCT_ROUNDING, rounding, 6, 24,
         "fp32 products that are ties (to even: stays or rounds up), alone and cancelled by "
         "their negation under another prob (the residue shows the rounding in any dtype); "
         "exact when both dtypes are 16-bit"},
        {MOEPERM_GOLDEN_VALUES_PRODUCT_SUBNORMAL, subnormal, 6, 12,
         "products in the fp32 subnormal range (gradual underflow, ties at the bottom), "
         "subnormal fp16 probs; flush to zero? (fp16 tokens: the narrowing underflows)"},
        {MOEPERM_GOLDEN_VALUES_PRODUCT_OVERFLOW, overflow, 5, 16,
         "largest finite tokens times probs 2 to 16: fp32 products overflow to inf (bf16, "
         "fp32), or the fp16 narrowing does; inf - inf; a product exactly the largest finite"},
    };
    char name[96], pn[48];
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (size_t i = 0; i < kinds[k].count; i++) {
            moeperm_golden_spec s = op_spec(MOEPERM_OP_UNPERMUTE, kinds[k].pairs[i].tokens,
                                    kinds[k].pairs[i].probs, 16, 4, kinds[k].hidden);
            s.values = kinds[k].kind;
            s.probs_values = kinds[k].kind;
            pair_name(pn, sizeof pn, &s);
            snprintf(name, sizeof name, "%s-%s-t16-k4-h%" PRId64, pn,
                     moeperm_golden_values_name(kinds[k].kind), kinds[k].hidden);
            add_named(l, s, name, "%s", kinds[k].why);
        }
    /* Probs of 1.0 make every product exact: the sum scenarios of
     * MoeTokenPermuteGrad's kinds pass through the multiply unchanged. */
    static const moeperm_golden_values sums[] = {MOEPERM_GOLDEN_VALUES_ROUNDING, MOEPERM_GOLDEN_VALUES_SUBNORMAL,
                                         MOEPERM_GOLDEN_VALUES_OVERFLOW, MOEPERM_GOLDEN_VALUES_NAN_INF};
    for (size_t d = 0; d < 3; d++)
        for (size_t i = 0; i < 4; i++) {
            int64_t h = sums[i] == MOEPERM_GOLDEN_VALUES_ROUNDING ? 22
                        : sums[i] == MOEPERM_GOLDEN_VALUES_NAN_INF ? 16
                                                            : 12;
            moeperm_golden_spec s = op_spec(MOEPERM_OP_UNPERMUTE, dtypes[d], dtypes[d], 16, 4, h);
            s.values = sums[i];
            s.probs_values = MOEPERM_GOLDEN_VALUES_ONE;
            pair_name(pn, sizeof pn, &s);
            snprintf(name, sizeof name, "%s-%s-one-probs-t16-k4-h%" PRId64, pn,
                     moeperm_golden_values_name(sums[i]), h);
            add_named(l, s, name,
                      "every prob 1.0 and the %s scenarios of MoeTokenPermuteGrad: the same "
                      "sums through an exact multiply",
                      moeperm_golden_values_name(sums[i]));
        }
}

static void suite_unpermute_hidden(spec_list *l)
{
    char name[64], pn[48];
    for (size_t d = 0; d < 3; d++) {
        moeperm_dtype dtype = dtypes[d];
        int64_t a = per_bytes(dtype, 32), b = per_bytes(dtype, 512);
        const int64_t sizes[] = {1, a - 1, a, a + 1, b - 1, b, b + 1};
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            int64_t h = sizes[i];
            moeperm_golden_spec s = op_spec(MOEPERM_OP_UNPERMUTE, dtype, dtype, 5, 2, h);
            pair_name(pn, sizeof pn, &s);
            snprintf(name, sizeof name, "%s-h%" PRId64, pn, h);
            add_named(l, s, name, "hidden_size %" PRId64 ": rows of %" PRId64 " bytes, %s", h,
                      h * (int64_t)moeperm_dtype_size(dtype),
                      h % a == 0 ? (h % b == 0 ? "whole 512-byte blocks" : "whole 32-byte blocks")
                                 : "a partial 32-byte block at the end");
        }
    }
}

/* MoeTokenUnpermuteGrad cases: bf16 tokens with fp32 probs unless said
 * otherwise, so probs_grad keeps every bit of the reduction.  The names
 * and descriptions say which question a mismatch answers
 * (docs/golden-format.md has the same per case).  Long rows come with one
 * token of two slots, one of them dropped (num_rows 1): the kept slot
 * carries the question, the dropped one is a +0 dot product, and the
 * corpus stays small. */
static moeperm_golden_spec grad_spec(moeperm_dtype dtype, moeperm_dtype probs, int64_t t, int64_t k,
                             int64_t h)
{
    return op_spec(MOEPERM_OP_UNPERMUTE_GRAD, dtype, probs, t, k, h);
}

#define UB_261888 261888

static void suite_unpermute_grad_reduction(spec_list *l)
{
    static const struct {
        int64_t h;
        const char *name, *why;
    } lengths[] = {
        {1, "h1-whole-reduce", "one column: the chunk is a single product"},
        {7, "h7-whole-reduce", "7 columns (< 64): one WholeReduceSum over 7 lanes, the tree "
                               "with an odd element"},
        {63, "h63-whole-reduce", "63 columns (< 64): the pairwise tree alone"},
        {64, "h64-block-tree", "64 columns exactly: no halving, the tree over 64"},
        {100, "h100-one-fold", "100 columns (64..128): one fold of 36 onto the first 64, then "
                               "the tree; not a multiple of 8"},
        {200, "h200-halving-loop", "200 columns (> 128): the halving loop (to 104, a multiple "
                                   "of 8, then 64)"},
        {511, "h511-halving-loop", "511 columns, the last of the 64 class"},
        {512, "h512-block-tree", "512 columns exactly: the tree over 512, no halving"},
        {1000, "h1000-halving-loop", "1000 columns (512..4095): fold onto 512, then the tree"},
        {4095, "h4095-halving-loop", "4095 columns, the last of the 512 class"},
        {4096, "h4096-block-tree", "4096 columns exactly: the tree over 4096"},
        {5000, "h5000-one-fold", "5000 columns (4096..8192): one fold onto 4096"},
        {7936, "h7936-a2-largest-chunk", "7936 columns: the longest single chunk of bf16 "
                                         "tokens on the Atlas A2"},
    };
    char name[96];
    for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++) {
        moeperm_golden_spec s = grad_spec(MOEPERM_BF16, MOEPERM_FLOAT, 1, 2, lengths[i].h);
        s.num_rows = 1;
        snprintf(name, sizeof name, "bf16-pfloat32-%s", lengths[i].name);
        add_named(l, s, name, "Atlas A2, one chunk of %s. A mismatch: this length class is "
                              "reduced in another order than the model's",
                  lengths[i].why);
    }
}

/* Cases for a chip whose unified buffer holds chunks longer than 8192
 * columns, the one the vendor's tiling tests use: on an Atlas A2 their
 * probs_grad is not the device's (it tiles otherwise), so they have a
 * suite of their own, named for the chip. */
static void suite_unpermute_grad_ub261888(spec_list *l)
{
    char name[96];
    static const struct {
        int64_t h;
        const char *name, *why;
    } big[] = {
        {8193, "h8193-ub261888-halving-loop", "8193 columns: the > 8192 halving loop (to 4104, "
                                              "then 4096)"},
        {9001, "h9001-ub261888-halving-loop", "9001 columns: the > 8192 halving loop with a "
                                              "tail that is not a multiple of 8"},
        {10752, "h10752-ub261888-largest-chunk", "10752 columns: the longest single chunk of "
                                                 "bf16 tokens there"},
    };
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
        moeperm_golden_spec s = grad_spec(MOEPERM_BF16, MOEPERM_FLOAT, 1, 2, big[i].h);
        s.num_rows = 1;
        s.ub_bytes = UB_261888;
        s.vector_cores = 48;
        snprintf(name, sizeof name, "bf16-pfloat32-%s", big[i].name);
        add_named(l, s, name, "for a chip with a 261888-byte unified buffer (48 cores), not the "
                              "A2: one chunk of %s. A mismatch there: that loop's order differs",
                  big[i].why);
    }
    moeperm_golden_spec s = grad_spec(MOEPERM_BF16, MOEPERM_FLOAT, 1, 2, 9001);
    s.num_rows = 1;
    s.values = MOEPERM_GOLDEN_VALUES_CANCEL;
    s.ub_bytes = UB_261888;
    s.vector_cores = 48;
    add_named(l, s, "bf16-pfloat32-cancel-h9001-ub261888",
              "for a 261888-byte unified buffer: g is +-2^-24, +-1, +-2^24 by pairs of columns, "
              "the tokens near 1, one chunk of 9001. A mismatch within a few ulp of the exact "
              "value: another order of a long chunk");
}

static void suite_unpermute_grad_chunks(spec_list *l)
{
    moeperm_golden_spec s = grad_spec(MOEPERM_FLOAT, MOEPERM_FLOAT, 1, 2, 5000);
    s.num_rows = 1;
    add_named(l, s, "float32-pfloat32-k2-h5000-one-chunk",
              "fp32, top_k 2, hidden 5000: one chunk on the A2, where top_k 512 cuts two. A "
              "mismatch in one of the pair only: the chunking depends on top_k otherwise");
    s = grad_spec(MOEPERM_FLOAT, MOEPERM_FLOAT, 1, 512, 5000);
    s.num_rows = 2;
    s.num_experts = 1024;
    add_named(l, s, "float32-pfloat32-k512-h5000-rows2-two-chunks",
              "fp32, top_k 512 (2 rows kept), hidden 5000: chunks of 4992 and 8 on the A2. A "
              "mismatch: the tiling cuts differently at this top_k");
    s = grad_spec(MOEPERM_FLOAT, MOEPERM_FLOAT, 1, 2, 5377);
    s.num_rows = 1;
    add_named(l, s, "float32-pfloat32-h5377-chunks-5376-1",
              "fp32 hidden 5377: chunks of 5376 and 1 on the A2. A mismatch: the fp32 chunk "
              "limit or the one-column last chunk");
    s = grad_spec(MOEPERM_BF16, MOEPERM_FLOAT, 1, 2, 7999);
    s.num_rows = 1;
    add_named(l, s, "bf16-pfloat32-h7999-chunks-7936-63",
              "bf16 hidden 7999: chunks of 7936 (the bf16 limit) and 63 (the < 64 class, not a "
              "multiple of 8). A mismatch: the bf16 chunk limit, or masked lanes of a short "
              "last chunk");
    s = grad_spec(MOEPERM_BF16, MOEPERM_FLOAT, 1, 2, 13000);
    s.num_rows = 1;
    add_named(l, s, "bf16-pfloat32-h13000-chunks-7936-5064",
              "chunks of 7936 and 5064 (not a multiple of 64): two long chunks. A mismatch "
              "here but not in the one-chunk cases: how chunks meet");
    s = grad_spec(MOEPERM_BF16, MOEPERM_FLOAT, 1, 2, 16000);
    s.num_rows = 1;
    add_named(l, s, "bf16-pfloat32-h16000-chunks-7936-7936-128",
              "three chunks, the last 128 columns: with three chunk sums the order of their "
              "adds shows (two commute). A mismatch: the chunk sums are added in another "
              "order");
    s = grad_spec(MOEPERM_BF16, MOEPERM_FLOAT, 1, 8, 7168);
    s.num_experts = 256;
    add_named(l, s, "bf16-pfloat32-k8-h7168-deepseek",
              "DeepSeek-V3 sizes (top_k 8, hidden 7168): one chunk of 7168 on the A2. A "
              "mismatch: the production shape is reduced in another order");
    s = grad_spec(MOEPERM_FLOAT16, MOEPERM_FLOAT16, 2, 2, 4097);
    add_named(l, s, "float16-pfloat16-t2-h4097",
              "fp16 tokens and probs, hidden 4097: one chunk, one fold of a single column. A "
              "mismatch that vanishes in the bf16 cases: fp16 narrowing");
}

static void suite_unpermute_grad_values(spec_list *l)
{
    char name[96], pn[48];
    static const struct {
        moeperm_dtype tokens, probs;
        int64_t h;
    } cancel[] = {{MOEPERM_BF16, MOEPERM_FLOAT, 63},
                  {MOEPERM_BF16, MOEPERM_FLOAT, 200},
                  {MOEPERM_BF16, MOEPERM_FLOAT, 1000},
                  {MOEPERM_FLOAT, MOEPERM_FLOAT, 5000}};
    for (size_t i = 0; i < sizeof cancel / sizeof cancel[0]; i++) {
        moeperm_golden_spec s = grad_spec(cancel[i].tokens, cancel[i].probs, 1, 2, cancel[i].h);
        s.num_rows = 1;
        s.values = MOEPERM_GOLDEN_VALUES_CANCEL;
        pair_name(pn, sizeof pn, &s);
        snprintf(name, sizeof name, "%s-cancel-h%" PRId64, pn, cancel[i].h);
        add_named(l, s, name,
                  "g is +-2^-24, +-1, +-2^24 by pairs of columns, the tokens near 1: pairs "
                  "cancel, small products are absorbed or not by the order. A mismatch within a "
                  "few ulp of the exact value: another order%s",
                  cancel[i].h >= 4096 ? " of a long chunk" : "");
    }
    static const pair tiny[] = {{MOEPERM_BF16, MOEPERM_BF16},
                                {MOEPERM_BF16, MOEPERM_FLOAT16},
                                {MOEPERM_FLOAT16, MOEPERM_FLOAT16},
                                {MOEPERM_BF16, MOEPERM_FLOAT}};
    for (size_t i = 0; i < sizeof tiny / sizeof tiny[0]; i++) {
        moeperm_golden_spec s = grad_spec(tiny[i].tokens, tiny[i].probs, 8, 4, 64);
        s.values = MOEPERM_GOLDEN_VALUES_TINY;
        pair_name(pn, sizeof pn, &s);
        snprintf(name, sizeof name, "%s-tiny-t8-k4-h64", pn);
        add_named(l, s, name, "%s",
                  tiny[i].probs == MOEPERM_FLOAT
                      ? "dot products in the fp32 subnormals: kept, and never -0 in fp32. A "
                        "mismatch of zeros: the device flushes subnormal products or sums"
                      : "dot products too small for the probs dtype: narrowed to -0 when "
                        "negative. A mismatch of +0 for -0: the narrowing or a flush loses "
                        "the sign");
    }
    moeperm_golden_spec s = grad_spec(MOEPERM_BF16, MOEPERM_FLOAT, 4, 4, 16);
    s.values = MOEPERM_GOLDEN_VALUES_GRAD_INF;
    s.num_rows = 5;
    add_named(l, s, "bf16-pfloat32-grad-inf-rows5-of-16",
              "inf and NaN in the gradient of odd tokens, 11 of 16 slots dropped: a dropped "
              "slot's probs_grad is 0 * g, NaN there (+0 for even tokens). A mismatch of a "
              "number for NaN: the device skips dropped rows");
    s = grad_spec(MOEPERM_FLOAT16, MOEPERM_FLOAT16, 4, 4, 16);
    s.values = MOEPERM_GOLDEN_VALUES_GRAD_INF;
    add_named(l, s, "float16-pfloat16-grad-inf-t4-k4-h16",
              "inf and NaN in the gradient of odd tokens, no row dropped: inf times probs in "
              "permuted_tokens_grad, inf - inf in probs_grad. A mismatch: inf and NaN do not "
              "pass through the product and the sum as in IEEE arithmetic");
    s = grad_spec(MOEPERM_BF16, MOEPERM_FLOAT, 8, 4, 16);
    s.values = MOEPERM_GOLDEN_VALUES_MASKING;
    s.probs_values = MOEPERM_GOLDEN_VALUES_MASKING;
    add_named(l, s, "bf16-pfloat32-masking-t8-k4-h16",
              "probs +0/-0 whose rows hold inf and NaN: permuted_tokens_grad is g * +-0, a "
              "signed zero; probs_grad is the dot product with that row, inf or NaN. A "
              "mismatch: a zero prob skips work it should not");
    s = grad_spec(MOEPERM_BF16, MOEPERM_BF16, 8, 4, 16);
    s.values = MOEPERM_GOLDEN_VALUES_NAN_INF;
    add_named(l, s, "bf16-pbf16-nan-inf-t8-k4-h16",
              "NaN and inf in the permuted tokens and the gradient. A mismatch that vanishes "
              "without --strict-nan: NaN bits only (the model gives the quiet NaN)");
    static const pair products[] = {{MOEPERM_FLOAT, MOEPERM_FLOAT},
                                    {MOEPERM_FLOAT, MOEPERM_BF16},
                                    {MOEPERM_BF16, MOEPERM_FLOAT},
                                    {MOEPERM_FLOAT16, MOEPERM_FLOAT16}};
    static const moeperm_golden_values kinds[] = {MOEPERM_GOLDEN_VALUES_PRODUCT_ROUNDING,
                                          MOEPERM_GOLDEN_VALUES_PRODUCT_SUBNORMAL,
                                          MOEPERM_GOLDEN_VALUES_PRODUCT_OVERFLOW};
    static const char *const why[] = {
        "g * p ties in fp32 (stay or round up to even), seen in fp32 permuted_tokens_grad "
        "(16-bit tokens: exact or hidden by the narrowing). A mismatch there: the product is "
        "not one RNE multiply",
        "g * p in the fp32 subnormals (fp16 tokens: underflowing the narrowing). A mismatch of "
        "zeros in permuted_tokens_grad: the device flushes subnormal products",
        "g * p beyond the largest finite: inf (or, for fp16, an overflowing narrowing). A "
        "mismatch of the largest finite for inf: the device saturates"};
    for (size_t k = 0; k < 3; k++)
        for (size_t i = 0; i < sizeof products / sizeof products[0]; i++) {
            s = grad_spec(products[i].tokens, products[i].probs, 8, 4, 24);
            s.values = kinds[k];
            s.probs_values = kinds[k];
            pair_name(pn, sizeof pn, &s);
            snprintf(name, sizeof name, "%s-%s-t8-k4-h24", pn, moeperm_golden_values_name(kinds[k]));
            add_named(l, s, name, "%s", why[k]);
        }
    for (size_t d = 0; d < 3; d++) {
        s = grad_spec(dtypes[d], NO_PROBS, 16, 1, 32);
        s.values = MOEPERM_GOLDEN_VALUES_BITS;
        snprintf(name, sizeof name, "%s-noprobs-bits-t16-h32", moeperm_dtype_name(dtypes[d]));
        add_named(l, s, name,
                  "no probs: permuted_tokens_grad is a scatter copy of g, every bit kept (NaN "
                  "payloads, signalling NaNs). A mismatch: the copy converts");
    }
    s = grad_spec(MOEPERM_BF16, MOEPERM_FLOAT, 10, 3, 19);
    s.num_rows = 19;
    add_named(l, s, "bf16-pfloat32-rows19-of-30",
              "19 of 30 rows: dropped slots write no row and their probs_grad is +0 (a dot "
              "product with zeros). A mismatch at those slots: dropped slots are handled "
              "otherwise");
}

/* A case for a named chip whose tiling differs from the Atlas A2's: with
 * 41 tokens a 40-core part gives each core 2 (an A2 core 1), so its
 * buffer holds twice the indices, and 7685 bf16 columns no longer fit in
 * one chunk beside 101 slots' worth of them (checked with
 * moeperm_token_unpermute_grad_tiling(): one chunk of 7685 on the A2,
 * 7680 + 5 on the Ascend910B3).  8 rows keep the corpus small. */
static void suite_unpermute_grad_chips(spec_list *l)
{
    moeperm_golden_spec s = grad_spec(MOEPERM_BF16, MOEPERM_FLOAT, 41, 101, 7685);
    s.num_rows = 8;
    snprintf(s.chip, sizeof s.chip, "Ascend910B3");
    add_named(l, s, "bf16-pfloat32-t41-k101-h7685-ascend910b3",
              "for the Ascend910B3 (40 vector cores, \"chip\" in the manifest), not the A2: "
              "probs_grad in chunks of 7680 and 5 (one of 7685 on 48 cores). A mismatch on "
              "that chip: the chunks are summed otherwise");
}

/* ---------------------------------------------------------------------- */
/* The input domain's edge (docs/operators.md, "The input domain")        */
/* ---------------------------------------------------------------------- */

/* The domain fields of a spec: rows R, routing, huge entries, extra
 * entries, padded_mode. */
static moeperm_golden_spec domain(moeperm_golden_spec s, int64_t rows, moeperm_golden_routing routing,
                                  bool huge, int64_t extra, bool padded)
{
    s.num_rows = rows;
    s.routing = routing;
    s.huge_indices = huge;
    s.extra_indices = extra;
    s.padded_mode = padded;
    return s;
}

#define HUGE_WORDS "every third slot's row huge (1.0f's bits 1065353216, INT32_MAX, R, " \
                   "+inf's bits, 2^24): dropped"

static void suite_permute_grad_domain(spec_list *l)
{
    const moeperm_golden_routing REPEATS = MOEPERM_GOLDEN_ROUTING_REPEATS,
                                 SPARSE = MOEPERM_GOLDEN_ROUTING_SPARSE,
                                 ROUTED = MOEPERM_GOLDEN_ROUTING_ROUTED;
    moeperm_golden_spec s = spec(MOEPERM_BF16, 16, 4, 24, MOEPERM_GOLDEN_VALUES_NORMAL, ROUTED);
    add(l, domain(s, 64, REPEATS, false, 0, false), "repeats-t16-k4-h24",
        "not a permutation: every slot's row drawn from the 64 rows, so rows are summed by "
        "several slots (or twice by one token) and rows no slot names are never read");
    s.dtype = MOEPERM_FLOAT16;
    add(l, domain(s, 100, REPEATS, false, 0, false), "repeats-rows100-t16-k4-h24",
        "R = 100 > N*K = 64, rows drawn from all 100: rows read twice, rows never read");
    s = spec(MOEPERM_FLOAT, 16, 4, 17, MOEPERM_GOLDEN_VALUES_NORMAL, ROUTED);
    add(l, domain(s, 100, SPARSE, false, 0, false), "sparse-rows100-t16-k4-h17",
        "R = 100 > N*K = 64: every slot its own row, 36 rows no slot names (never read)");
    s = spec(MOEPERM_BF16, 16, 4, 24, MOEPERM_GOLDEN_VALUES_NORMAL, ROUTED);
    add(l, domain(s, -1, ROUTED, true, 0, false), "huge-t16-k4-h24",
        "routed, " HUGE_WORDS " (a kernel that reads them reads far outside the tensor)");
    s = spec(MOEPERM_FLOAT16, 16, 4, 16, MOEPERM_GOLDEN_VALUES_NORMAL, ROUTED);
    add(l, domain(s, 20, REPEATS, true, 0, false), "huge-repeats-rows20-t16-k4-h16",
        "rows drawn from 20 (R < N*K), read many times over, and " HUGE_WORDS);
    s = spec(MOEPERM_BF16, 33, 1, 24, MOEPERM_GOLDEN_VALUES_NORMAL, ROUTED);
    s.num_topk = -1;
    add(l, s, "num-topk-minus1-t33-h24",
        "num_topk -1 (\"top_k\": -1 in the manifest), which the device's tiling takes as 1: "
        "one slot per token, a copy of its row");
    s = spec(MOEPERM_FLOAT, 24, 1, 16, MOEPERM_GOLDEN_VALUES_NORMAL, ROUTED);
    s.num_topk = -1;
    add(l, domain(s, 40, REPEATS, true, 0, true), "num-topk-minus1-huge-repeats-padded-t24-h16",
        "num_topk -1 and padded_mode true (both as given to the device, which takes 1 and "
        "ignores the mode), rows from 40 drawn with repeats, " HUGE_WORDS);
    s = spec(MOEPERM_FLOAT, 10, 4, 19, MOEPERM_GOLDEN_VALUES_NORMAL, ROUTED);
    add(l, domain(s, -1, ROUTED, false, 3, false), "extra3-t10-k4-h19",
        "sorted_indices of 43 = N*K + 3 entries: floor(43 / 4) = 10 tokens, the last 3 "
        "entries (rows in range) never read");
    s = spec(MOEPERM_BF16, 8, 2, 16, MOEPERM_GOLDEN_VALUES_NORMAL, MOEPERM_GOLDEN_ROUTING_RANDOM);
    add(l, domain(s, -1, MOEPERM_GOLDEN_ROUTING_RANDOM, false, 0, true), "padded-t8-k2-h16",
        "padded_mode true, as given to the device: Atlas A2/A3 ignore it");
}

static void suite_permute_domain(spec_list *l)
{
    static const struct {
        moeperm_dtype dtype;
        moeperm_dtype index;
        int64_t t, k, outer, inner, num_out;
        bool sentinels;
        const char *why;
    } cases[] = {
        {MOEPERM_BF16, MOEPERM_INT32, 6, 4, 4, 8, 0, false, "every copy kept"},
        {MOEPERM_FLOAT16, MOEPERM_INT32, 6, 4, 3, 5, -5, false,
         "num_out_tokens -5: the last 5 copies dropped"},
        {MOEPERM_INT8, MOEPERM_INT32, 7, 2, 2, 16, 9, false, "int8 tokens, 9 rows kept"},
        {MOEPERM_FLOAT, MOEPERM_INT64, 8, 4, 2, 3, 0, true,
         "int64 ids with the sentinels (every 7th the dtype's minimum or maximum)"},
        {MOEPERM_BF16, MOEPERM_INT32, 4, 8, 8, 7, -32, false,
         "num_out_tokens -32 = -N*K: no row, permuted_tokens [0, 8, 7]"},
    };
    char name[96];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        moeperm_golden_spec s = op_spec(MOEPERM_OP_PERMUTE, cases[i].dtype, NO_PROBS, cases[i].t,
                                        cases[i].k, cases[i].outer * cases[i].inner);
        s.index_dtype = cases[i].index;
        s.hidden_outer = cases[i].outer;
        s.num_out_tokens = cases[i].num_out;
        s.sentinels = cases[i].sentinels;
        snprintf(name, sizeof name, "%s-rank3-t%" PRId64 "-k%" PRId64 "-h%" PRId64 "x%" PRId64
                 "%s%s", moeperm_dtype_name(cases[i].dtype), cases[i].t, cases[i].k,
                 cases[i].outer, cases[i].inner,
                 cases[i].index == MOEPERM_INT64 ? "-int64" : "",
                 cases[i].num_out ? (cases[i].num_out < 0 ? "-cut" : "-keep") : "");
        add_named(l, s, name,
                  "tokens of rank 3, [%" PRId64 ", %" PRId64 ", %" PRId64
                  "]: a token is its %" PRId64 " elements in row-major order, permuted_tokens "
                  "[num_out, %" PRId64 ", %" PRId64 "]; %s",
                  cases[i].t, cases[i].outer, cases[i].inner, cases[i].outer * cases[i].inner,
                  cases[i].outer, cases[i].inner, cases[i].why);
    }
}

static void suite_unpermute_domain(spec_list *l)
{
    const moeperm_golden_routing REPEATS = MOEPERM_GOLDEN_ROUTING_REPEATS,
                                 SPARSE = MOEPERM_GOLDEN_ROUTING_SPARSE,
                                 ROUTED = MOEPERM_GOLDEN_ROUTING_ROUTED;
    moeperm_golden_spec s = op_spec(MOEPERM_OP_UNPERMUTE, MOEPERM_BF16, MOEPERM_FLOAT, 16, 4, 24);
    add_named(l, domain(s, 64, REPEATS, false, 0, false), "bf16-pfloat32-repeats-t16-k4-h24",
              "not a permutation: rows drawn from the 64, read by several slots (weighted by "
              "each slot's prob), rows no slot names never read");
    s = op_spec(MOEPERM_OP_UNPERMUTE, MOEPERM_FLOAT16, MOEPERM_BF16, 16, 4, 16);
    add_named(l, domain(s, 100, REPEATS, false, 0, false),
              "float16-pbf16-repeats-rows100-t16-k4-h16",
              "R = 100 > N*K = 64, rows drawn from all 100: rows read twice, rows never read");
    s = op_spec(MOEPERM_OP_UNPERMUTE, MOEPERM_FLOAT, MOEPERM_FLOAT, 16, 4, 17);
    add_named(l, domain(s, 90, SPARSE, false, 0, false), "float32-pfloat32-sparse-rows90-t16-k4-h17",
              "R = 90 > N*K = 64: every slot its own row, 26 rows no slot names");
    s = op_spec(MOEPERM_OP_UNPERMUTE, MOEPERM_BF16, MOEPERM_BF16, 16, 4, 24);
    add_named(l, domain(s, -1, ROUTED, true, 0, false), "bf16-pbf16-huge-t16-k4-h24",
              "routed, " HUGE_WORDS " (left out of the sums as rows >= R are)");
    s = op_spec(MOEPERM_OP_UNPERMUTE, MOEPERM_BF16, NO_PROBS, 32, 1, 16);
    add_named(l, domain(s, 40, REPEATS, false, 0, false), "bf16-noprobs-repeats-rows40-t32-h16",
              "no probs (K = 1, a copy): rows drawn from 40 > N = 32, copied to several tokens");
    s = op_spec(MOEPERM_OP_UNPERMUTE, MOEPERM_FLOAT16, NO_PROBS, 24, 1, 16);
    add_named(l, domain(s, -1, MOEPERM_GOLDEN_ROUTING_RANDOM, true, 0, false),
              "float16-noprobs-huge-t24-h16",
              "no probs, a random permutation with " HUGE_WORDS ": those tokens +0");
    s = op_spec(MOEPERM_OP_UNPERMUTE, MOEPERM_FLOAT, MOEPERM_FLOAT16, 10, 3, 19);
    add_named(l, domain(s, -1, ROUTED, false, 7, false), "float32-pfloat16-extra7-t10-k3-h19",
              "sorted_indices of N*K + 7 = 37 entries: the tokens are probs' 10, the last 7 "
              "entries (rows in range) never read");
    s = op_spec(MOEPERM_OP_UNPERMUTE, MOEPERM_BF16, MOEPERM_FLOAT, 8, 2, 16);
    add_named(l, domain(s, -1, ROUTED, false, 0, true), "bf16-pfloat32-padded-t8-k2-h16",
              "padded_mode true, as given to the device: Atlas A2/A3 ignore it");
}

#define UNTOUCHED "; rows no slot names are left as the caller had them: the golden output " \
                  "has +0 there, so a harness must start permuted_tokens_grad as zeros"

static void suite_unpermute_grad_domain(spec_list *l)
{
    const moeperm_golden_routing SPARSE = MOEPERM_GOLDEN_ROUTING_SPARSE,
                                 ROUTED = MOEPERM_GOLDEN_ROUTING_ROUTED;
    moeperm_golden_spec s = grad_spec(MOEPERM_BF16, MOEPERM_FLOAT, 16, 4, 24);
    add_named(l, domain(s, 100, SPARSE, false, 0, false), "bf16-pfloat32-sparse-rows100-t16-k4-h24",
              "R = 100 > N*K = 64, each slot its own row" UNTOUCHED);
    s = grad_spec(MOEPERM_FLOAT16, NO_PROBS, 20, 1, 16);
    add_named(l, domain(s, 50, SPARSE, false, 0, false), "float16-noprobs-sparse-rows50-t20-h16",
              "no probs (a scatter copy of g), R = 50 > N = 20" UNTOUCHED);
    s = grad_spec(MOEPERM_BF16, MOEPERM_FLOAT, 16, 4, 24);
    add_named(l, domain(s, -1, ROUTED, true, 0, false), "bf16-pfloat32-huge-t16-k4-h24",
              "routed; every third slot's row huge (repeated: dropped slots may share one), "
              "its probs_grad +0" UNTOUCHED);
    s = grad_spec(MOEPERM_FLOAT, MOEPERM_BF16, 12, 4, 17);
    add_named(l, domain(s, 80, SPARSE, true, 0, false),
              "float32-pbf16-huge-sparse-rows80-t12-k4-h17",
              "R = 80 > N*K = 48, distinct rows, and every third slot's row huge" UNTOUCHED);
    s = grad_spec(MOEPERM_BF16, MOEPERM_FLOAT, 10, 3, 19);
    add_named(l, domain(s, -1, ROUTED, false, 9, false), "bf16-pfloat32-extra9-t10-k3-h19",
              "sorted_indices of N*K + 9 = 39 entries: the last 9 (rows in range, some named "
              "by slots too) never read, so never written");
    s = grad_spec(MOEPERM_FLOAT, MOEPERM_FLOAT, 8, 2, 16);
    add_named(l, domain(s, -1, ROUTED, false, 0, true), "float32-pfloat32-padded-t8-k2-h16",
              "padded_mode true, as given to the device: the Atlas A2/A3 tiling runs the "
              "non-padded kernel");
}

static void suite_permute_large(spec_list *l)
{
    moeperm_golden_spec s = op_spec(MOEPERM_OP_PERMUTE, MOEPERM_BF16, NO_PROBS, 4096, 8, 7168);
    s.num_experts = 256;
    add_named(l, s, "bf16-t4096-k8-h7168-deepseek",
              "DeepSeek-V3 sizes at 4096 tokens (about 500 MiB)");
    s = op_spec(MOEPERM_OP_PERMUTE, MOEPERM_BF16, NO_PROBS, 524289, 8, 16);
    s.num_experts = 256;
    add_named(l, s, "bf16-t524289-k8-h16-many-ids",
              "4 Mi copies: the sort at scale, more ids than a core's buffer holds");
}

static void suite_unpermute_large(spec_list *l)
{
    moeperm_golden_spec s = op_spec(MOEPERM_OP_UNPERMUTE, MOEPERM_BF16, MOEPERM_FLOAT, 4096, 8, 7168);
    s.num_experts = 256;
    add_named(l, s, "bf16-pfloat32-t4096-k8-h7168-deepseek",
              "DeepSeek-V3 sizes at 4096 tokens (about 500 MiB)");
}

static void suite_unpermute_grad_large(spec_list *l)
{
    moeperm_golden_spec s = grad_spec(MOEPERM_BF16, MOEPERM_FLOAT, 1024, 8, 7168);
    s.num_experts = 256;
    add_named(l, s, "bf16-pfloat32-t1024-k8-h7168-deepseek",
              "DeepSeek-V3 sizes at 1024 tokens (about 250 MiB): every core busy, many "
              "indices loads");
    s = grad_spec(MOEPERM_BF16, MOEPERM_FLOAT, 96, 2, 20000);
    add_named(l, s, "bf16-pfloat32-t96-k2-h20000-chunks",
              "96 tokens of 20000 columns (chunks 7936, 7936, 4128) on every core");
}

int moeperm_golden_suite_specs(const moeperm_golden_suite *suite, uint64_t seed, moeperm_golden_spec **specs,
                       size_t *count)
{
    static const struct {
        const char *name;
        void (*build)(spec_list *);
    } builders[] = {
        {"dtype-topk", suite_dtype_topk}, {"hidden", suite_hidden},
        {"tokens", suite_tokens},         {"dropped", suite_dropped},
        {"routing", suite_routing},       {"nan-inf", suite_nan_inf},
        {"subnormal", suite_subnormal},   {"overflow", suite_overflow},
        {"rounding", suite_rounding},     {"large", suite_large},
        {"permute-routing", suite_permute_routing},
        {"permute-num-out-tokens", suite_permute_num_out_tokens},
        {"permute-indices", suite_permute_indices},
        {"permute-hidden", suite_permute_hidden},
        {"permute-bits", suite_permute_bits},
        {"unpermute-routing", suite_unpermute_routing},
        {"unpermute-probs", suite_unpermute_probs},
        {"unpermute-products", suite_unpermute_products},
        {"unpermute-hidden", suite_unpermute_hidden},
        {"unpermute-grad-reduction", suite_unpermute_grad_reduction},
        {"unpermute-grad-ub261888", suite_unpermute_grad_ub261888},
        {"unpermute-grad-chunks", suite_unpermute_grad_chunks},
        {"unpermute-grad-values", suite_unpermute_grad_values},
        {"unpermute-grad-chips", suite_unpermute_grad_chips},
        {"permute-grad-domain", suite_permute_grad_domain},
        {"permute-domain", suite_permute_domain},
        {"unpermute-domain", suite_unpermute_domain},
        {"unpermute-grad-domain", suite_unpermute_grad_domain},
        {"permute-large", suite_permute_large},
        {"unpermute-large", suite_unpermute_large},
        {"unpermute-grad-large", suite_unpermute_grad_large},
    };
    spec_list l = {.seed = seed};
    *specs = NULL;
    *count = 0;
    for (size_t i = 0; i < sizeof builders / sizeof builders[0]; i++)
        if (strcmp(builders[i].name, suite->name) == 0)
            builders[i].build(&l);
    if (l.failed) {
        free(l.items);
        return -1;
    }
    *specs = l.items;
    *count = l.count;
    return 0;
}
