/*
 * suites.c - the built-in golden suites: which shapes, routings and value
 * kinds the committed corpus holds, and why each case is there.  Every
 * case is named for what it exercises; the shapes come from the device
 * facts of spec section 5 (core counts, chunk limits, 32-byte alignment)
 * and the value kinds from the open device questions of spec section 2.
 * docs/golden-format.md lists the same suites for readers of the data.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden/internal.h"

static const golden_suite suites[] = {
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
};

const golden_suite *golden_suites(size_t *count)
{
    *count = sizeof suites / sizeof suites[0];
    return suites;
}

const golden_suite *golden_suite_find(const char *name)
{
    for (size_t i = 0; i < sizeof suites / sizeof suites[0]; i++)
        if (strcmp(suites[i].name, name) == 0)
            return &suites[i];
    return NULL;
}

typedef struct spec_list {
    golden_spec *items;
    size_t count, capacity;
    uint64_t seed;
    bool failed;
} spec_list;

/* The dtypes in the order every suite lists them. */
static const moeperm_dtype dtypes[] = {MOEPERM_BF16, MOEPERM_FLOAT16, MOEPERM_FLOAT};

static golden_spec spec(moeperm_dtype dtype, int64_t t, int64_t k, int64_t h,
                        golden_values values, golden_routing routing)
{
    golden_spec s;
    memset(&s, 0, sizeof s);
    s.dtype = dtype;
    s.tokens_num = t;
    s.top_k = k;
    s.hidden_size = h;
    s.num_rows = -1;
    s.hot_percent = 50;
    s.values = values;
    s.routing = routing;
    return s;
}

static void add(spec_list *l, golden_spec s, const char *name, const char *description, ...)
    __attribute__((format(printf, 4, 5)));

static void add(spec_list *l, golden_spec s, const char *name, const char *description, ...)
{
    if (l->failed)
        return;
    if (l->count == l->capacity) {
        size_t cap = l->capacity ? 2 * l->capacity : 32;
        golden_spec *grown = realloc(l->items, cap * sizeof *grown);
        if (!grown) {
            l->failed = true;
            return;
        }
        l->items = grown;
        l->capacity = cap;
    }
    s.seed = l->seed;
    snprintf(s.name, sizeof s.name, "%s-%s", golden_dtype_name(s.dtype), name);
    va_list ap;
    va_start(ap, description);
    vsnprintf(s.description, sizeof s.description, description, ap);
    va_end(ap);
    l->items[l->count++] = s;
}

static void suite_dtype_topk(spec_list *l)
{
    static const int64_t top_ks[] = {1, 2, 8};
    char name[64];
    for (size_t d = 0; d < 3; d++) {
        for (size_t i = 0; i < 3; i++) {
            snprintf(name, sizeof name, "k%" PRId64 "-t33-h24", top_ks[i]);
            add(l, spec(dtypes[d], 33, top_ks[i], 24, GOLDEN_VALUES_NORMAL, GOLDEN_ROUTING_ROUTED),
                name, "top_k %" PRId64 ": gradient-like values routed over 64 experts, "
                      "summed in k order in fp32",
                top_ks[i]);
        }
        golden_spec s = spec(dtypes[d], 3, 512, 17, GOLDEN_VALUES_NORMAL, GOLDEN_ROUTING_ROUTED);
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
            add(l, spec(dtype, 5, 2, h, GOLDEN_VALUES_NORMAL, GOLDEN_ROUTING_ROUTED), name,
                "hidden_size %" PRId64 ": %s", h,
                h % align ? "rows are not a whole number of 32-byte blocks (the tail path)"
                          : "rows are whole 32-byte blocks");
        }
        for (size_t i = 0; i < 3; i++) {
            snprintf(name, sizeof name, "h%" PRId64, model[i]);
            add(l, spec(dtype, 1, 2, model[i], GOLDEN_VALUES_NORMAL, GOLDEN_ROUTING_ROUTED),
                name, "hidden_size %" PRId64 " of production models, in one on-core chunk",
                model[i]);
        }
        for (int64_t h = chunk - 1; h <= chunk + 1; h++) {
            snprintf(name, sizeof name, "h%" PRId64, h);
            add(l, spec(dtype, 1, 2, h, GOLDEN_VALUES_NORMAL, GOLDEN_ROUTING_ROUTED), name,
                "hidden_size %" PRId64 ": %s the %" PRId64
                "-element single-chunk limit of a 192 KiB buffer%s",
                h, h < chunk ? "one below" : h == chunk ? "exactly" : "one above (chunked path)",
                chunk, h % align ? ", with a tail" : "");
        }
    }
    add(l, spec(MOEPERM_BF16, 4, 8, 7168, GOLDEN_VALUES_NORMAL, GOLDEN_ROUTING_ROUTED),
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
        add(l, spec(MOEPERM_BF16, t, 8, 17, GOLDEN_VALUES_NORMAL, GOLDEN_ROUTING_ROUTED), name,
            "%" PRId64 " tokens: %s", t, why);
    }
    add(l, spec(MOEPERM_FLOAT16, 49, 8, 17, GOLDEN_VALUES_NORMAL, GOLDEN_ROUTING_ROUTED),
        "t49-k8-h17", "49 tokens: 48n+1, one core takes an extra token on a 48-core part");
    add(l, spec(MOEPERM_FLOAT, 97, 8, 9, GOLDEN_VALUES_NORMAL, GOLDEN_ROUTING_ROUTED),
        "t97-k8-h9", "97 tokens: 48n+1, with a one-element fp32 tail");
}

static void suite_dropped(spec_list *l)
{
    for (size_t d = 0; d < 3; d++) {
        golden_spec s = spec(dtypes[d], 10, 3, 19, GOLDEN_VALUES_NORMAL, GOLDEN_ROUTING_ROUTED);
        s.num_rows = 19;
        add(l, s, "rows19-of-30-routed",
            "19 of 30 rows: slots routed to rows 19..29 (the last experts) are skipped");
        s = spec(dtypes[d], 10, 3, 19, GOLDEN_VALUES_NORMAL, GOLDEN_ROUTING_REVERSE);
        s.num_rows = 25;
        add(l, s, "rows25-reverse-slot0-dropped",
            "reverse routing, 25 of 30 rows: token 0 loses every slot (output +0.0), token 1 "
            "loses slots 0 and 1 (its sum starts from +0.0, not from slot 0)");
        s = spec(dtypes[d], 10, 3, 19, GOLDEN_VALUES_NEGZERO, GOLDEN_ROUTING_REVERSE);
        s.num_rows = 28;
        add(l, s, "rows28-negzero-slot0-dropped",
            "every value -0.0, token 0 loses slots 0 and 1: +0.0 + -0.0 = +0.0 there, "
            "-0.0 for every other token");
        s = spec(dtypes[d], 4, 2, 17, GOLDEN_VALUES_NORMAL, GOLDEN_ROUTING_IDENTITY);
        s.num_rows = 0;
        add(l, s, "rows0", "no rows at all: every slot is dropped, every output +0.0");
    }
}

static void suite_routing(spec_list *l)
{
    golden_spec s;
    add(l, spec(MOEPERM_BF16, 64, 8, 16, GOLDEN_VALUES_NORMAL, GOLDEN_ROUTING_IDENTITY),
        "identity-t64-k8-h16", "sorted_indices[i] = i: token t reads rows t*8..t*8+7");
    add(l, spec(MOEPERM_BF16, 64, 8, 16, GOLDEN_VALUES_NORMAL, GOLDEN_ROUTING_REVERSE),
        "reverse-t64-k8-h16", "sorted_indices[i] = 511-i: rows read backwards");
    add(l, spec(MOEPERM_BF16, 64, 8, 16, GOLDEN_VALUES_NORMAL, GOLDEN_ROUTING_RANDOM),
        "random-t64-k8-h16", "a uniformly random permutation (Fisher-Yates)");
    s = spec(MOEPERM_BF16, 64, 8, 16, GOLDEN_VALUES_NORMAL, GOLDEN_ROUTING_ROUTED);
    s.hot_percent = 0;
    add(l, s, "routed-uniform-t64-k8-h16", "top-8 of 64 experts drawn uniformly");
    s.hot_percent = 90;
    s.num_experts = 256;
    add(l, s, "routed-hot-t64-k8-h16",
        "top-8 of 256 experts, 90%% of picks among the hot 32: uneven expert loads");
    add(l, spec(MOEPERM_FLOAT16, 64, 8, 16, GOLDEN_VALUES_NORMAL, GOLDEN_ROUTING_RANDOM),
        "random-t64-k8-h16", "a uniformly random permutation (Fisher-Yates)");
    add(l, spec(MOEPERM_FLOAT, 64, 8, 16, GOLDEN_VALUES_NORMAL, GOLDEN_ROUTING_RANDOM),
        "random-t64-k8-h16", "a uniformly random permutation (Fisher-Yates)");
}

static void suite_values(spec_list *l, golden_values values, const char *what)
{
    char name[64];
    static const int64_t top_ks[] = {2, 4, 8};
    int64_t hidden = values == GOLDEN_VALUES_NAN_INF    ? 16
                     : values == GOLDEN_VALUES_ROUNDING ? 22
                                                        : 12;
    for (size_t d = 0; d < 3; d++)
        for (size_t i = 0; i < 3; i++) {
            snprintf(name, sizeof name, "%s-t16-k%" PRId64 "-h%" PRId64,
                     golden_values_name(values), top_ks[i], hidden);
            add(l, spec(dtypes[d], 16, top_ks[i], hidden, values, GOLDEN_ROUTING_ROUTED), name,
                "%s; top_k %" PRId64 ", one scenario per column (docs/golden-format.md)", what,
                top_ks[i]);
        }
}

static void suite_nan_inf(spec_list *l)
{
    suite_values(l, GOLDEN_VALUES_NAN_INF,
                 "NaN (quiet, signalling, payloads) and +-inf among numbers, inf - inf");
    for (size_t d = 0; d < 3; d++)
        add(l, spec(dtypes[d], 16, 8, 32, GOLDEN_VALUES_BITS, GOLDEN_ROUTING_ROUTED),
            "bits-t16-k8-h32", "uniformly random bit patterns: NaNs, infinities, subnormals "
                               "and normals of every magnitude mixed");
}

static void suite_subnormal(spec_list *l)
{
    suite_values(l, GOLDEN_VALUES_SUBNORMAL,
                 "subnormal inputs, normals cancelling into subnormals, subnormal sums "
                 "growing into normals");
}

static void suite_overflow(spec_list *l)
{
    suite_values(l, GOLDEN_VALUES_OVERFLOW,
                 "max + max, max plus a quarter and half an ulp, max + max - max");
}

static void suite_rounding(spec_list *l)
{
    suite_values(l, GOLDEN_VALUES_ROUNDING,
                 "ties to even in the narrowing and the fp32 adds, absorption and "
                 "cancellation in k order, +0/-0");
    for (size_t d = 0; d < 3; d++)
        add(l, spec(dtypes[d], 4, 8, 16, GOLDEN_VALUES_NEGZERO, GOLDEN_ROUTING_ROUTED),
            "negzero-t4-k8-h16",
            "every slot -0.0: the sum starts from slot 0, so every output is -0.0");
}

static void suite_large(spec_list *l)
{
    golden_spec s = spec(MOEPERM_BF16, 524289, 8, 16, GOLDEN_VALUES_NORMAL,
                         GOLDEN_ROUTING_ROUTED);
    s.num_experts = 256;
    add(l, s, "t524289-k8-h16-index-batching",
        "4 Mi slots, about 87000 per core on 48 cores: more indices than a 192 KiB buffer "
        "holds, so each core loads them in batches");
    add(l, spec(MOEPERM_BF16, 4096, 8, 7168, GOLDEN_VALUES_NORMAL, GOLDEN_ROUTING_ROUTED),
        "t4096-k8-h7168-deepseek", "DeepSeek-V3 sizes at 4096 tokens (about 450 MiB of input)");
    add(l, spec(MOEPERM_FLOAT16, 1025, 8, 13313, GOLDEN_VALUES_NORMAL, GOLDEN_ROUTING_ROUTED),
        "t1025-k8-h13313-chunked", "the chunked path (hidden one past the 16-bit chunk limit) "
                                   "at 1025 tokens");
    add(l, spec(MOEPERM_FLOAT, 512, 8, 15873, GOLDEN_VALUES_NORMAL, GOLDEN_ROUTING_ROUTED),
        "t512-k8-h15873-chunked", "the chunked path (hidden one past the fp32 chunk limit) "
                                  "at 512 tokens");
}

int golden_suite_specs(const golden_suite *suite, uint64_t seed, golden_spec **specs,
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
