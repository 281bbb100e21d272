/*
 * generate.c - builds golden cases of every operator: routings (realistic
 * top-k expert choice through the public moeperm_route_sorted_indices(),
 * or fixed permutations), input values (gradient-like or adversarial, one
 * device question per value kind; some kinds made together across the
 * tokens, probs and gradient of a case, keyed by shared draws, so that a
 * token value meets the prob it was made for), and the golden outputs from
 * the public two-phase API.  Every input bit is a pure function of (seed,
 * position), documented in docs/golden-format.md, so numpy can rebuild any
 * case.
 */
#include "golden/internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden/prng.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define HAVE_AVX512_ROWS 1
#define AVX512_ROWS_TARGET __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,f16c")))
#endif

#if defined(_OPENMP)
#define PARALLEL_FOR _Pragma("omp parallel for schedule(static)")
#else
#define PARALLEL_FOR
#endif

/* ---------------------------------------------------------------------- */
/* Names                                                                  */
/* ---------------------------------------------------------------------- */

static const char *const routing_names[] = {"routed", "identity", "reverse", "random"};
static const char *const values_names[] = {
    "normal",           "nan-inf",           "subnormal",        "overflow",
    "rounding",         "negzero",           "bits",             "masking",
    "grad-inf",         "product-rounding",  "product-subnormal", "product-overflow",
    "cancel",           "tiny",              "one"};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

const char *moeperm_golden_routing_name(moeperm_golden_routing routing)
{
    return (size_t)routing < COUNT(routing_names) ? routing_names[routing] : "unknown";
}

bool moeperm_golden_routing_parse(const char *name, moeperm_golden_routing *routing)
{
    for (size_t i = 0; i < COUNT(routing_names); i++)
        if (strcmp(name, routing_names[i]) == 0) {
            *routing = (moeperm_golden_routing)i;
            return true;
        }
    return false;
}

const char *moeperm_golden_values_name(moeperm_golden_values values)
{
    return (size_t)values < COUNT(values_names) ? values_names[values] : "unknown";
}

bool moeperm_golden_values_parse(const char *name, moeperm_golden_values *values)
{
    for (size_t i = 0; i < COUNT(values_names); i++)
        if (strcmp(name, values_names[i]) == 0) {
            *values = (moeperm_golden_values)i;
            return true;
        }
    return false;
}

const char *moeperm_golden_routing_names(void)
{
    return "routed, identity, reverse, random";
}

const char *moeperm_golden_values_names(void)
{
    return "normal, nan-inf, subnormal, overflow, rounding, negzero, bits, masking, grad-inf, "
           "product-rounding, product-subnormal, product-overflow, cancel, tiny, one";
}

static const char *op_short_name(moeperm_op op)
{
    switch (op) {
    case MOEPERM_OP_PERMUTE:
        return "permute";
    case MOEPERM_OP_UNPERMUTE:
        return "unpermute";
    case MOEPERM_OP_UNPERMUTE_GRAD:
        return "unpermute-grad";
    default:
        return "";
    }
}

static int64_t default_experts(int64_t top_k)
{
    return top_k * 2 > 64 ? top_k * 2 : 64;
}

moeperm_golden_spec moeperm_golden_spec_default(moeperm_op op, moeperm_dtype dtype, int64_t tokens_num,
                                int64_t top_k, int64_t hidden_size)
{
    moeperm_golden_spec s;
    memset(&s, 0, sizeof s);
    s.op = op;
    s.dtype = dtype;
    s.probs_dtype = dtype;
    s.has_probs = op == MOEPERM_OP_UNPERMUTE || op == MOEPERM_OP_UNPERMUTE_GRAD;
    s.index_dtype = MOEPERM_INT32;
    s.tokens_num = tokens_num;
    s.top_k = top_k;
    s.hidden_size = hidden_size;
    s.num_rows = -1;
    s.hot_percent = 50;
    s.values = MOEPERM_GOLDEN_VALUES_NORMAL;
    s.probs_values = MOEPERM_GOLDEN_VALUES_NORMAL;
    s.routing = MOEPERM_GOLDEN_ROUTING_ROUTED;
    s.seed = MOEPERM_GOLDEN_DEFAULT_SEED;
    return s;
}

void moeperm_golden_spec_default_name(moeperm_golden_spec *spec)
{
    char rows[32] = "", op[32] = "", probs[32] = "";
    moeperm_op o = spec->op ? spec->op : MOEPERM_OP_PERMUTE_GRAD;
    if (o == MOEPERM_OP_PERMUTE) {
        if (spec->num_out_tokens != 0)
            snprintf(rows, sizeof rows, "-n%" PRId64, spec->num_out_tokens);
    } else if (spec->num_rows >= 0 && spec->num_rows != spec->tokens_num * spec->top_k) {
        snprintf(rows, sizeof rows, "-r%" PRId64, spec->num_rows);
    }
    if (o != MOEPERM_OP_PERMUTE_GRAD)
        snprintf(op, sizeof op, "%s-", op_short_name(o));
    if ((o == MOEPERM_OP_UNPERMUTE || o == MOEPERM_OP_UNPERMUTE_GRAD) && !spec->has_probs)
        snprintf(probs, sizeof probs, "-noprobs");
    else if ((o == MOEPERM_OP_UNPERMUTE || o == MOEPERM_OP_UNPERMUTE_GRAD) &&
             spec->probs_dtype != spec->dtype)
        snprintf(probs, sizeof probs, "-p%s", moeperm_golden_dtype_name(spec->probs_dtype));
    snprintf(spec->name, sizeof spec->name,
             "%s%s-t%" PRId64 "-k%" PRId64 "-h%" PRId64 "%s%s-%s-%s-s%" PRIu64, op,
             moeperm_golden_dtype_name(spec->dtype), spec->tokens_num, spec->top_k, spec->hidden_size,
             rows, probs, moeperm_golden_routing_name(spec->routing), moeperm_golden_values_name(spec->values),
             spec->seed);
}

static bool float_dtype(moeperm_dtype dtype)
{
    return dtype == MOEPERM_FLOAT || dtype == MOEPERM_FLOAT16 || dtype == MOEPERM_BF16;
}

int moeperm_golden_spec_check(const moeperm_golden_spec *s, char *err, size_t err_len)
{
    moeperm_op op = s->op ? s->op : MOEPERM_OP_PERMUTE_GRAD;
    if (!moeperm_op_name(op)) {
        snprintf(err, err_len, "op %d is not an operator of the family", (int)s->op);
        return -1;
    }
    bool int8_ok = op == MOEPERM_OP_PERMUTE;
    if (!float_dtype(s->dtype) && !(int8_ok && s->dtype == MOEPERM_INT8)) {
        snprintf(err, err_len, "dtype %s is not one %s takes (float32, float16, bf16%s)",
                 moeperm_golden_dtype_name(s->dtype), moeperm_op_name(op), int8_ok ? ", int8" : "");
        return -1;
    }
    if (s->has_probs && !float_dtype(s->probs_dtype)) {
        snprintf(err, err_len, "probs dtype %s is not float32, float16 or bf16",
                 moeperm_golden_dtype_name(s->probs_dtype));
        return -1;
    }
    if (op == MOEPERM_OP_PERMUTE && s->index_dtype != MOEPERM_INT32 &&
        s->index_dtype != MOEPERM_INT64) {
        snprintf(err, err_len, "index dtype %s is not int32 or int64",
                 moeperm_golden_dtype_name(s->index_dtype));
        return -1;
    }
    if (s->tokens_num < 1 || s->tokens_num > MOEPERM_GOLDEN_MAX_DIM) {
        snprintf(err, err_len, "tokens_num is %" PRId64 ", expected 1 to %" PRId64,
                 s->tokens_num, MOEPERM_GOLDEN_MAX_DIM);
        return -1;
    }
    if (s->top_k < 1 || s->top_k > MOEPERM_MAX_TOP_K) {
        snprintf(err, err_len, "top_k is %" PRId64 ", expected 1 to %d", s->top_k,
                 MOEPERM_MAX_TOP_K);
        return -1;
    }
    if (!s->has_probs && (op == MOEPERM_OP_UNPERMUTE || op == MOEPERM_OP_UNPERMUTE_GRAD) &&
        s->top_k != 1) {
        snprintf(err, err_len, "top_k is %" PRId64 ", but without probs %s takes top_k 1",
                 s->top_k, moeperm_op_name(op));
        return -1;
    }
    if (s->hidden_size < 1 || s->hidden_size > MOEPERM_GOLDEN_MAX_DIM) {
        snprintf(err, err_len, "hidden_size is %" PRId64 ", expected 1 to %" PRId64,
                 s->hidden_size, MOEPERM_GOLDEN_MAX_DIM);
        return -1;
    }
    if (s->tokens_num > (int64_t)INT32_MAX / s->top_k) {
        snprintf(err, err_len,
                 "tokens_num %" PRId64 " times top_k %" PRId64
                 " is more than the %d slots int32 sorted_indices can address",
                 s->tokens_num, s->top_k, INT32_MAX);
        return -1;
    }
    int64_t slots = s->tokens_num * s->top_k;
    if (s->num_rows > slots || s->num_rows < -1) {
        snprintf(err, err_len,
                 "num_rows is %" PRId64 ", expected 0 to tokens_num*top_k = %" PRId64,
                 s->num_rows, slots);
        return -1;
    }
    /* Any count is the operator's to resolve (<= 0 counts back from N*K,
     * then a clamp to [0, N*K]); only the manifest's bound applies. */
    if (op == MOEPERM_OP_PERMUTE &&
        (s->num_out_tokens < -MOEPERM_GOLDEN_MAX_DIM || s->num_out_tokens > MOEPERM_GOLDEN_MAX_DIM)) {
        snprintf(err, err_len,
                 "num_out_tokens is %" PRId64 ", expected -%" PRId64 " to %" PRId64,
                 s->num_out_tokens, MOEPERM_GOLDEN_MAX_DIM, MOEPERM_GOLDEN_MAX_DIM);
        return -1;
    }
    uint64_t bytes;
    if (__builtin_mul_overflow((uint64_t)slots, (uint64_t)s->hidden_size, &bytes) ||
        __builtin_mul_overflow(bytes, (uint64_t)moeperm_dtype_size(s->dtype), &bytes) ||
        bytes > SIZE_MAX / 2) {
        snprintf(err, err_len,
                 "a case of %" PRId64 " slots by hidden_size %" PRId64
                 " is too large for this machine",
                 slots, s->hidden_size);
        return -1;
    }
    if (s->routing == MOEPERM_GOLDEN_ROUTING_ROUTED || op == MOEPERM_OP_PERMUTE) {
        int64_t experts = s->num_experts ? s->num_experts : default_experts(s->top_k);
        if (experts < s->top_k || experts > INT32_MAX) {
            snprintf(err, err_len,
                     "experts is %" PRId64 ", but each token needs top_k = %" PRId64
                     " distinct experts",
                     experts, s->top_k);
            return -1;
        }
        if (s->hot_percent < 0 || s->hot_percent > 99) {
            snprintf(err, err_len, "hot_percent is %d, expected 0 to 99", s->hot_percent);
            return -1;
        }
    }
    if (s->ub_bytes < 0 || s->vector_cores < 0) {
        snprintf(err, err_len, "ub_bytes %" PRId64 " and vector_cores %" PRId64
                 " must be positive (0: the default chip)", s->ub_bytes, s->vector_cores);
        return -1;
    }
    if (s->name[0] == '\0' || s->name[0] == '.' || strchr(s->name, '/')) {
        snprintf(err, err_len,
                 "case name \"%s\" is not a plain directory name (empty, leading '.', or '/')",
                 s->name);
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Routing                                                                */
/* ---------------------------------------------------------------------- */

/*
 * Token t draws experts from its own sub-stream (key prng_draw(routing key,
 * t)), one draw per attempt: the low 32 bits decide hot or not, the high 32
 * bits pick the expert among the hot eighth or among all.  A repeat of an
 * expert the token already has is drawn again, so the k-th slot holds the
 * k-th distinct expert drawn.
 */
static void route_token(uint64_t key, int64_t t, int64_t top_k, int64_t experts,
                        int hot_percent, int32_t *ids)
{
    uint64_t token_key = prng_draw(key, (uint64_t)t);
    uint64_t hot = (uint64_t)(experts / 8 > 0 ? experts / 8 : 1);
    uint64_t attempt = 0;
    for (int64_t k = 0; k < top_k;) {
        uint64_t d = prng_draw(token_key, attempt++);
        bool is_hot = ((d & 0xffffffffu) * 100u) >> 32 < (uint64_t)hot_percent;
        int32_t e = (int32_t)prng_below(d, is_hot ? hot : (uint64_t)experts);
        bool seen = false;
        for (int64_t j = 0; j < k && !seen; j++)
            seen = ids[j] == e;
        if (!seen)
            ids[k++] = e;
    }
}

static int make_indices(const moeperm_golden_spec *s, int32_t *indices, char *err, size_t err_len)
{
    int64_t n = s->tokens_num * s->top_k;
    switch (s->routing) {
    case MOEPERM_GOLDEN_ROUTING_IDENTITY:
        for (int64_t i = 0; i < n; i++)
            indices[i] = (int32_t)i;
        return 0;
    case MOEPERM_GOLDEN_ROUTING_REVERSE:
        for (int64_t i = 0; i < n; i++)
            indices[i] = (int32_t)(n - 1 - i);
        return 0;
    case MOEPERM_GOLDEN_ROUTING_RANDOM: {
        /* Fisher-Yates from the identity, i = n-1 down to 1, swap with a
         * j drawn from [0, i] by draw i of the permutation stream. */
        uint64_t key = prng_stream_key(s->seed, PRNG_STREAM_PERMUTATION);
        for (int64_t i = 0; i < n; i++)
            indices[i] = (int32_t)i;
        for (int64_t i = n - 1; i > 0; i--) {
            int64_t j = (int64_t)prng_below(prng_draw(key, (uint64_t)i), (uint64_t)i + 1);
            int32_t tmp = indices[i];
            indices[i] = indices[j];
            indices[j] = tmp;
        }
        return 0;
    }
    case MOEPERM_GOLDEN_ROUTING_ROUTED:
        break;
    }
    int64_t experts = s->num_experts ? s->num_experts : default_experts(s->top_k);
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    if (!ids) {
        snprintf(err, err_len, "out of memory for %" PRId64 " expert ids", n);
        return -1;
    }
    uint64_t key = prng_stream_key(s->seed, PRNG_STREAM_ROUTING);
    PARALLEL_FOR
    for (int64_t t = 0; t < s->tokens_num; t++)
        route_token(key, t, s->top_k, experts, s->hot_percent, ids + t * s->top_k);
    moeperm_status st = moeperm_route_sorted_indices(ids, (size_t)n, (int32_t)experts, indices);
    free(ids);
    if (st != MOEPERM_SUCCESS) {
        snprintf(err, err_len, "moeperm_route_sorted_indices failed (%s): %s",
                 moeperm_status_name(st), moeperm_last_error());
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Values                                                                 */
/* ---------------------------------------------------------------------- */

/* What a value kind needs to know about the format, as raw bits. */
typedef struct format {
    moeperm_dtype dtype;
    int mantissa; /* stored mantissa bits: 23, 10, 7 */
    int emax;     /* exponent of the largest finite value (also the bias) */
    uint32_t sign, inf, max, one, qnan;
} format;

static format format_of(moeperm_dtype dtype)
{
    switch (dtype) {
    case MOEPERM_FLOAT:
        return (format){dtype, 23, 127, 0x80000000u, 0x7f800000u, 0x7f7fffffu, 0x3f800000u,
                        0x7fc00000u};
    case MOEPERM_FLOAT16:
        return (format){dtype, 10, 15, 0x8000u, 0x7c00u, 0x7bffu, 0x3c00u, 0x7e00u};
    default:
        return (format){dtype, 7, 127, 0x8000u, 0x7f80u, 0x7f7fu, 0x3f80u, 0x7fc0u};
    }
}

static uint32_t float_bits(float v)
{
    uint32_t bits;
    memcpy(&bits, &v, 4);
    return bits;
}

static float float_of_bits(uint32_t bits)
{
    float v;
    memcpy(&v, &bits, 4);
    return v;
}

static uint32_t narrow(const format *f, float v)
{
    switch (f->dtype) {
    case MOEPERM_FLOAT:
        return float_bits(v);
    case MOEPERM_FLOAT16:
        return moeperm_float_to_fp16(v);
    default:
        return moeperm_float_to_bf16(v);
    }
}

/* 2^e in the format (exact for every e used here). */
static uint32_t pow2(const format *f, int e)
{
    return narrow(f, ldexpf(1.0f, e));
}

/*
 * The gradient-like value of one element from its two draws: the
 * Irwin-Hall sum of four 24-bit uniforms, centred, scaled into (-1, 1) and
 * further by 2^-e with e from the top 3 bits of d1, computed exactly in
 * double and rounded once to binary32 (then to the format, both RNE).
 */
static double normal_exact(uint64_t d0, uint64_t d1)
{
    int64_t sum = (int64_t)(d0 & 0xffffff) + (int64_t)((d0 >> 24) & 0xffffff) +
                  (int64_t)(d1 & 0xffffff) + (int64_t)((d1 >> 24) & 0xffffff);
    int e = (int)(d1 >> 61);
    return ldexp((double)(sum - (INT64_C(1) << 25)), -25 - e);
}

/* normal_exact() rounded to binary32, without double or ldexp(): the
 * centred sum (an integer of magnitude at most 2^25) converted once to
 * binary32 (round to nearest even, as the conversion from double) and
 * multiplied by 2^(-25-e).  A product by a power of two is exact and
 * commutes with the rounding while nothing overflows or goes subnormal,
 * and every non-zero value here has a magnitude in [2^-32, 1]: the same
 * bits, in a loop the compiler vectorises. */
static inline float normal_value(uint64_t d0, uint64_t d1)
{
    int32_t sum = (int32_t)(d0 & 0xffffff) + (int32_t)((d0 >> 24) & 0xffffff) +
                  (int32_t)(d1 & 0xffffff) + (int32_t)((d1 >> 24) & 0xffffff) - (1 << 25);
    uint32_t e = (uint32_t)(d1 >> 61);
    return (float)sum * float_of_bits((127u - 25u - e) << 23);
}

/* A NaN with random sign and payload; quiet unless signalling is asked,
 * when the quiet bit is clear and the payload non-zero. */
static uint32_t nan_bits(const format *f, uint64_t d, bool signalling)
{
    uint32_t payload_mask = (1u << (f->mantissa - 1)) - 1;
    uint32_t payload = (uint32_t)(d >> 32) & payload_mask;
    uint32_t sign = (d & 1) ? f->sign : 0;
    if (signalling)
        return sign | f->inf | (payload | 1u);
    return sign | f->qnan | payload;
}

/* A subnormal of the format with random sign and non-zero mantissa. */
static uint32_t subnormal_bits(const format *f, uint64_t d)
{
    uint32_t mantissa = 1u + (uint32_t)prng_below(d, (1u << f->mantissa) - 1u);
    return ((d & 1) ? f->sign : 0) | mantissa;
}

typedef struct element {
    int64_t k, top_k;
    int64_t p, q, r; /* distinct slots picked for this (token, column) when top_k allows */
    uint64_t d0, d1, dp;
    int scenario;
} element;

static uint32_t kind_nan_inf(const format *f, const element *e, uint32_t normal)
{
    bool at_p = e->k == e->p, at_q = e->top_k > 1 && e->k == e->q;
    switch (e->scenario) {
    case 1: /* one NaN among numbers */
        return at_p ? nan_bits(f, e->d0, false) : normal;
    case 2: /* one +inf */
        return at_p ? f->inf : normal;
    case 3: /* one -inf */
        return at_p ? (f->sign | f->inf) : normal;
    case 4: /* +inf + -inf = NaN */
        return at_p ? f->inf : at_q ? (f->sign | f->inf) : normal;
    case 5: /* +inf + +inf = +inf */
        return at_p || at_q ? f->inf : normal;
    case 6: /* a signalling NaN input */
        return at_p ? nan_bits(f, e->d0, true) : normal;
    case 7: /* every slot a NaN: whose payload survives */
        return nan_bits(f, e->d0, false);
    default: /* 0: control */
        return normal;
    }
}

static uint32_t kind_subnormal(const format *f, const element *e, uint32_t normal)
{
    uint32_t min_normal = 1u << f->mantissa;
    bool at_p = e->k == e->p, at_q = e->top_k > 1 && e->k == e->q;
    switch (e->scenario) {
    case 1: /* the smallest normal among subnormals */
        return at_p ? (((e->dp & 1) ? f->sign : 0) | min_normal) : subnormal_bits(f, e->d0);
    case 2: /* 1.5 * min_normal - min_normal: two normals, a subnormal sum */
        return at_p ? (min_normal | min_normal >> 1) : at_q ? (f->sign | min_normal) : 0;
    case 3: /* one subnormal repeated: the sum grows into the normals */
        return (uint32_t)prng_below(e->dp, min_normal - 1u) + 1u;
    case 4: /* a normal plus subnormals */
        return at_p ? normal : subnormal_bits(f, e->d0);
    case 5: /* one magnitude, alternating signs: a zero or one subnormal */
        return ((e->k & 1) ? f->sign : 0) | ((uint32_t)prng_below(e->dp, min_normal - 1u) + 1u);
    default: /* 0: subnormals only */
        return subnormal_bits(f, e->d0);
    }
}

static uint32_t kind_overflow(const format *f, const element *e, uint32_t normal)
{
    bool at_p = e->k == e->p, at_q = e->top_k > 1 && e->k == e->q;
    switch (e->scenario) {
    case 0: /* max + max: +inf (IEEE) or +max (saturation) */
        return at_p || at_q ? f->max : normal;
    case 1: /* the negative side */
        return at_p || at_q ? (f->sign | f->max) : normal;
    case 2: /* max + a quarter ulp of max: below the midpoint, stays max */
        return at_p ? f->max : at_q ? pow2(f, f->emax - f->mantissa - 2) : 0;
    case 3: /* max + half an ulp of max: a tie, to even is to infinity */
        return at_p ? f->max : at_q ? pow2(f, f->emax - f->mantissa - 1) : 0;
    case 4: /* max, max, -max: the k-order sum overflows first (fp32 and bf16) */
        if (e->k == 0 || (e->k == 1 && e->top_k > 2))
            return f->max;
        return e->k == (e->top_k > 2 ? 2 : 1) ? (f->sign | f->max) : 0;
    default: /* 5: +-max/2 in every slot */
        return ((e->d0 & 1) ? f->sign : 0) | (f->max - (1u << f->mantissa));
    }
}

static uint32_t kind_rounding(const format *f, const element *e, uint32_t normal)
{
    bool at_p = e->k == e->p, at_q = e->top_k > 1 && e->k == e->q;
    bool at_r = e->top_k > 2 && e->k == e->r;
    uint32_t sign = (e->dp & 1) ? f->sign : 0;
    uint32_t mantissa = (uint32_t)(e->dp >> 40) & ((1u << f->mantissa) - 1u);
    uint32_t neg_zero = f->sign;
    switch (e->scenario) {
    case 0: /* 1 + even ulps, plus half an ulp: a tie that stays (even) */
        return at_p ? sign | f->one | (mantissa & ~1u)
               : at_q ? sign | pow2(f, -f->mantissa - 1)
                      : 0;
    case 1: /* 1 + odd ulps, plus half an ulp: a tie that rounds up (to even) */
        return at_p ? sign | f->one | (mantissa | 1u)
               : at_q ? sign | pow2(f, -f->mantissa - 1)
                      : 0;
    case 2: /* half plus a quarter ulp: above the tie */
        return at_p ? sign | f->one | (mantissa & ~1u)
               : at_q ? sign | pow2(f, -f->mantissa - 1)
               : at_r ? sign | pow2(f, -f->mantissa - 2)
                      : 0;
    case 3: { /* B, small..., -B with small = B * 2^-24: absorbed in k order */
        int eb = f->dtype == MOEPERM_FLOAT16 ? 10 : 24;
        if (e->k == 0)
            return sign | pow2(f, eb);
        if (e->k == e->top_k - 1)
            return (sign ^ f->sign) | pow2(f, eb);
        return sign | pow2(f, eb - 24);
    }
    case 4: /* every slot -0: the sum is -0 */
        return neg_zero;
    case 5: /* every slot +0 */
        return 0;
    case 6: /* -0 first, +0 after: +0 */
        return e->k == 0 ? neg_zero : 0;
    case 7: /* x + -x = +0, then -0s: +0 */
        return e->k == 0 ? normal : e->k == 1 ? (normal ^ f->sign) : neg_zero;
    case 8: /* -0, x, -x, -0...: +0 */
        return e->k == 1 ? normal : e->k == 2 ? (normal ^ f->sign) : neg_zero;
    case 9: /* (1 + ulp) - 1: exact cancellation (Sterbenz) */
        return e->k == 0 ? (f->one | 1u) : e->k == 1 ? (f->sign | f->one) : neg_zero;
    default: /* 10: control */
        return normal;
    }
}

static const int scenario_count[] = {1, 8, 6, 6, 11, 1, 1};

/* What each scenario of the adversarial kinds puts in a column, as the
 * comments of kind_nan_inf() ... kind_rounding() say, for reports. */
static const char *const nan_inf_scenarios[] = {
    "control", "one NaN among numbers", "one +inf", "one -inf", "+inf + -inf = NaN",
    "+inf + +inf = +inf", "a signalling NaN input", "every slot a NaN: whose payload survives"};
static const char *const subnormal_scenarios[] = {
    "subnormals only", "the smallest normal among subnormals",
    "two normals with a subnormal sum", "one subnormal repeated, growing into the normals",
    "a normal plus subnormals", "alternating signs: a zero or one subnormal"};
static const char *const overflow_scenarios[] = {
    "max + max: inf, or max on a saturating device", "-max - max",
    "max + a quarter ulp: stays max", "max + half an ulp: a tie, to even is inf",
    "max, max, -max: the k-order sum overflows first", "+-max/2 in every slot"};
static const char *const rounding_scenarios[] = {
    "a tie that stays (even)", "a tie that rounds up (to even)", "above the tie",
    "absorption and cancellation in k order", "every slot -0: -0", "every slot +0",
    "-0 first, +0 after: +0", "x + -x = +0, then -0s", "-0, x, -x, -0...: +0",
    "(1 + ulp) - 1: exact cancellation", "control"};

const char *golden_scenario_name(const char *values, int64_t column, int *scenario)
{
    moeperm_golden_values v;
    if (!values || !moeperm_golden_values_parse(values, &v) || (size_t)v >= COUNT(scenario_count) ||
        scenario_count[v] <= 1)
        return NULL;
    *scenario = (int)(column % scenario_count[v]);
    switch (v) {
    case MOEPERM_GOLDEN_VALUES_NAN_INF:
        return nan_inf_scenarios[*scenario];
    case MOEPERM_GOLDEN_VALUES_SUBNORMAL:
        return subnormal_scenarios[*scenario];
    case MOEPERM_GOLDEN_VALUES_OVERFLOW:
        return overflow_scenarios[*scenario];
    case MOEPERM_GOLDEN_VALUES_ROUNDING:
        return rounding_scenarios[*scenario];
    default:
        return NULL;
    }
}

/* ---------------------------------------------------------------------- */
/* Rows                                                                   */
/* ---------------------------------------------------------------------- */

/*
 * A tensor is made a row at a time: the elements (t, k, 0..H-1), whose
 * value draws are n + 2h and n + 2h + 1 with n = 2 (t K + k) H.  The kinds
 * that need nothing but an element's own draws (normal values, random
 * bits, int8 bytes, -0), which is what large cases are made of, run as
 * loops over blocks of a row that the compiler vectorises, built a second
 * time for AVX-512, where the PRNG's 64-bit multiplies are vector
 * instructions, and chosen at run time.  The other kinds go element by
 * element through element_bits().  Every path gives an element the bits
 * element_bits() gives it: the same draws, the same value, the same
 * rounding as moeperm_float_to_bf16() and moeperm_float_to_fp16() (see
 * bf16_of_finite(); vcvtps2ph, which the library's own fast paths hold to
 * the same bits, tests/core/test_fast_conversions_exhaustive.c checking every
 * input; or moeperm_convert() itself).
 */
typedef enum row_kind { ROW_ELEMENTS, ROW_NORMAL, ROW_BITS, ROW_INT8, ROW_NEGZERO } row_kind;

static row_kind row_kind_of(moeperm_dtype dtype, moeperm_golden_values values)
{
    if (dtype == MOEPERM_INT8)
        return ROW_INT8;
    switch (values) {
    case MOEPERM_GOLDEN_VALUES_NORMAL:
        return ROW_NORMAL;
    case MOEPERM_GOLDEN_VALUES_BITS:
        return ROW_BITS;
    case MOEPERM_GOLDEN_VALUES_NEGZERO:
        return ROW_NEGZERO;
    default:
        return ROW_ELEMENTS;
    }
}

/* Elements per block: the normal values of a block wait in a float array
 * on the stack before they are narrowed. */
enum { ROW_BLOCK = 256 };

/* moeperm_float_to_bf16() for a finite v: adding 0x7fff plus the lowest
 * kept bit carries into the kept half exactly when round to nearest even
 * rounds up.  Written out here because a call per element would cost as
 * much as making the value; NaNs, the one case it leaves out, are never
 * made by the row loops. */
static inline uint16_t bf16_of_finite(float v)
{
    uint32_t bits = float_bits(v);
    return (uint16_t)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

#ifdef HAVE_AVX512_ROWS
AVX512_ROWS_TARGET static void narrow_fp16_f16c(const float *v, int64_t count, uint16_t *out)
{
    int64_t j = 0;
    for (; j + 16 <= count; j += 16)
        _mm256_storeu_si256((__m256i *)(void *)(out + j),
                            _mm512_cvtps_ph(_mm512_loadu_ps(v + j), _MM_FROUND_TO_NEAREST_INT));
    for (; j < count; j++)
        out[j] = moeperm_float_to_fp16(v[j]);
}
#endif

/* count <= ROW_BLOCK elements of a row_kind other than ROW_ELEMENTS, the
 * first drawing n and n + 1 from key; f16c: narrow fp16 with vcvtps2ph
 * (only where the caller is built for it). */
static inline __attribute__((always_inline)) void row_block(row_kind kind, moeperm_dtype dtype,
                                                            uint64_t key, uint64_t n,
                                                            int64_t count, void *dst, bool f16c)
{
    uint8_t *bytes = dst;
    uint16_t *halves = dst;
    uint32_t *words = dst;
    switch (kind) {
    case ROW_INT8:
        for (int64_t j = 0; j < count; j++)
            bytes[j] = (uint8_t)prng_draw(key, n + 2 * (uint64_t)j);
        return;
    case ROW_BITS:
        for (int64_t j = 0; j < count; j++) {
            uint64_t d = prng_draw(key, n + 2 * (uint64_t)j);
            if (dtype == MOEPERM_FLOAT)
                words[j] = (uint32_t)d;
            else
                halves[j] = (uint16_t)d;
        }
        return;
    case ROW_NEGZERO:
        for (int64_t j = 0; j < count; j++) {
            if (dtype == MOEPERM_FLOAT)
                words[j] = 0x80000000u;
            else
                halves[j] = 0x8000u;
        }
        return;
    default:
        break;
    }
    float v[ROW_BLOCK];
    float *values = dtype == MOEPERM_FLOAT ? dst : v;
    for (int64_t j = 0; j < count; j++)
        values[j] = normal_value(prng_draw(key, n + 2 * (uint64_t)j),
                                 prng_draw(key, n + 2 * (uint64_t)j + 1));
    if (dtype == MOEPERM_BF16) {
        for (int64_t j = 0; j < count; j++)
            halves[j] = bf16_of_finite(v[j]);
    } else if (dtype == MOEPERM_FLOAT16) {
#ifdef HAVE_AVX512_ROWS
        if (f16c) {
            narrow_fp16_f16c(v, count, halves);
            return;
        }
#endif
        moeperm_convert(v, MOEPERM_FLOAT, halves, MOEPERM_FLOAT16, (size_t)count);
    }
}

static inline __attribute__((always_inline)) void row_loop(row_kind kind, moeperm_dtype dtype,
                                                           uint64_t key, uint64_t n,
                                                           int64_t count, void *dst, bool f16c)
{
    size_t size = dtype == MOEPERM_FLOAT ? 4 : dtype == MOEPERM_INT8 ? 1 : 2;
    for (int64_t j = 0; j < count; j += ROW_BLOCK)
        row_block(kind, dtype, key, n + 2 * (uint64_t)j,
                  count - j < ROW_BLOCK ? count - j : ROW_BLOCK,
                  (uint8_t *)dst + (size_t)j * size, f16c);
}

/* count elements of kind (not ROW_ELEMENTS) in dst, the first drawing n
 * and n + 1 from key. */
typedef void row_fn(row_kind kind, moeperm_dtype dtype, uint64_t key, uint64_t n, int64_t count,
                    void *dst);

static void row_portable(row_kind kind, moeperm_dtype dtype, uint64_t key, uint64_t n,
                         int64_t count, void *dst)
{
    row_loop(kind, dtype, key, n, count, dst, false);
}

#ifdef HAVE_AVX512_ROWS
AVX512_ROWS_TARGET static void row_avx512(row_kind kind, moeperm_dtype dtype, uint64_t key,
                                          uint64_t n, int64_t count, void *dst)
{
    row_loop(kind, dtype, key, n, count, dst, true);
}
#endif

/* The row loops for this CPU, chosen once: AVX-512 (F, DQ, BW, VL) with
 * F16C where the CPU has them, unless MOEPERM_FORCE_PORTABLE is set (not
 * to 0), which turns the library's fast paths off too. */
static row_fn *row_loops(void)
{
#ifdef HAVE_AVX512_ROWS
    static atomic_int chosen; /* 0: not yet; 1: portable; 2: AVX-512 */
    int c = atomic_load_explicit(&chosen, memory_order_relaxed);
    if (c == 0) {
        const char *force = getenv("MOEPERM_FORCE_PORTABLE");
        unsigned int eax, ebx, ecx, edx;
        __builtin_cpu_init();
        bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                      __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
        c = avx512 && !(force && *force && strcmp(force, "0") != 0) ? 2 : 1;
        atomic_store_explicit(&chosen, c, memory_order_relaxed);
    }
    if (c == 2)
        return row_avx512;
#endif
    return row_portable;
}

/* Which tensor a generator fills: the coordinated kinds give each its own
 * part of the recipe. */
typedef enum role {
    ROLE_PERMUTED, /* element (t, k, h) of a permuted tensor, stored in a row */
    ROLE_TOKENS,   /* MoeTokenPermute's tokens [T, H] */
    ROLE_GRAD,     /* MoeTokenUnpermuteGrad's unpermuted_tokens_grad [T, H] */
    ROLE_PROBS     /* probs [T, K] */
} role;

typedef struct generator {
    format f;
    moeperm_golden_values values;
    int64_t top_k, hidden; /* of the draw numbering: (t * top_k + k) * hidden + h */
    uint64_t value_key, pick_key;
    role role;
    /* The case, for the coordinated kinds: its top_k and hidden_size, the
     * formats of the tokens and of probs, and the key of the slot draws. */
    int64_t slots, columns;
    format tokens, probs;
    uint64_t slot_key;
    row_kind rows; /* ROW_ELEMENTS: element by element */
    row_fn *row;
} generator;

/* p, q, r: distinct slots of a (token, column) from its pick draw dp (p
 * from the high 32 bits, q and r from the low 32); all p when K = 1. */
static void pick_slots(element *e, int64_t top_k)
{
    e->p = (int64_t)prng_below(e->dp, (uint64_t)top_k);
    e->q = e->p;
    e->r = e->p;
    if (top_k > 1) {
        uint64_t low = (e->dp & 0xffffffffu) << 32;
        e->q = (e->p + 1 + (int64_t)prng_below(low, (uint64_t)top_k - 1)) % top_k;
        e->r = (e->q + 1) % top_k;
        if (e->r == e->p)
            e->r = (e->r + 1) % top_k;
    }
}

/* The draw of slot (t, k) that the coordinated kinds share between probs
 * and the rows that slot owns. */
static uint64_t slot_draw(const generator *g, int64_t t, int64_t k)
{
    return prng_draw(g->slot_key, (uint64_t)t * (uint64_t)g->slots + (uint64_t)k);
}

/* Raw bits sign | 2^e * (1 + mant / 2^m) for a normal exponent e. */
static uint32_t compose(const format *f, bool negative, int e, uint32_t mant)
{
    return (negative ? f->sign : 0) | ((uint32_t)(e + f->emax) << f->mantissa) | mant;
}

static uint32_t random_mantissa(const format *f, uint64_t d)
{
    return (uint32_t)(d >> 40) & ((1u << f->mantissa) - 1u);
}

static int min_normal_exponent(const format *f)
{
    return 1 - f->emax;
}

/* masking: a quarter of the slots (slot draw & 3 == 0) are masked. */
static bool slot_masked(const generator *g, int64_t t, int64_t k)
{
    return (slot_draw(g, t, k) & 3u) == 0;
}

/* inf, -inf, a quiet NaN, a number: the four columns of a poisoned row. */
static uint32_t poisoned(const format *f, int64_t h, uint64_t d0, uint32_t normal)
{
    switch (h % 4) {
    case 0:
        return f->inf;
    case 1:
        return f->sign | f->inf;
    case 2:
        return nan_bits(f, d0, false);
    default:
        return normal;
    }
}

/* product-rounding: prob 1 + 2^-d with d in [lo, hi], where the tokens
 * can hold the 1 + 2^-(24 - d) whose fp32 product with it is a tie. */
static int product_d(const generator *g, int64_t t, int64_t k)
{
    int hi = g->probs.mantissa < 22 ? g->probs.mantissa : 22;
    int lo = 24 - g->tokens.mantissa > 2 ? 24 - g->tokens.mantissa : 2;
    if (lo > hi)
        lo = 2;
    return lo + (int)prng_below(slot_draw(g, t, k), (uint64_t)(hi - lo + 1));
}

/* 1 + 2^-c (a tie with 1 + 2^-d when c + d = 24) and 1 + 2^-(c-1) + 2^-c
 * (a tie that rounds up), c = min(24 - d, m), with the sign from dp. */
static uint32_t product_tie(const format *f, int d, uint64_t dp, bool up)
{
    int c = 24 - d < f->mantissa ? 24 - d : f->mantissa;
    uint32_t bits = ((dp & 1) ? f->sign : 0) | f->one | (1u << (f->mantissa - c));
    return up ? bits | (1u << (f->mantissa - c + 1)) : bits;
}

/* product-subnormal: prob 2^-jp. */
static int subnormal_jp(const generator *g, int64_t t, int64_t k)
{
    int base = g->probs.dtype == MOEPERM_FLOAT16    ? 14
               : g->tokens.dtype == MOEPERM_FLOAT16 ? 122
                                                    : 40;
    return base + (int)prng_below(slot_draw(g, t, k), 8);
}

/* A token value whose product with 2^-jp is (1 + f) 2^te, te drawn from dp
 * in [-149, -127], its exponent raised to the format's smallest normal
 * where the format cannot go that low. */
static uint32_t subnormal_factor(const format *f, int jp, uint64_t dp, uint64_t d0)
{
    int te = -127 - (int)prng_below(dp, 23);
    int e = te + jp > min_normal_exponent(f) ? te + jp : min_normal_exponent(f);
    return compose(f, d0 & 1, e, random_mantissa(f, d0));
}

/* product-overflow: prob 2^jp, jp in [1, 4]. */
static int overflow_jp(const generator *g, int64_t t, int64_t k)
{
    return 1 + (int)prng_below(slot_draw(g, t, k), 4);
}

/* The coordinated kinds.  (t, k, h) is the element; for ROLE_GRAD k is
 * unused and the gradient takes the value of the pick slot p, for
 * ROLE_PROBS h is unused.  d0, d1 are the element's own value draws,
 * normal its normal value. */
static uint32_t coordinated_bits(const generator *g, int64_t t, int64_t k, int64_t h,
                                 uint64_t d0, uint64_t d1, uint32_t normal)
{
    const format *f = &g->f;
    moeperm_golden_values v = g->values;
    if (g->role == ROLE_PROBS) {
        uint64_t ds;
        switch (v) {
        case MOEPERM_GOLDEN_VALUES_MASKING:
            ds = slot_draw(g, t, k);
            return (ds & 3u) == 0 ? ((ds & 4u) ? f->sign : 0) : normal;
        case MOEPERM_GOLDEN_VALUES_PRODUCT_ROUNDING:
            return f->one | (1u << (f->mantissa - product_d(g, t, k)));
        case MOEPERM_GOLDEN_VALUES_PRODUCT_SUBNORMAL:
            return narrow(f, ldexpf(1.0f, -subnormal_jp(g, t, k)));
        case MOEPERM_GOLDEN_VALUES_PRODUCT_OVERFLOW:
            return pow2(f, overflow_jp(g, t, k));
        case MOEPERM_GOLDEN_VALUES_ONE:
            return f->one;
        default:
            return normal;
        }
    }
    if (g->role == ROLE_TOKENS)
        return normal;
    switch (v) {
    case MOEPERM_GOLDEN_VALUES_MASKING:
        return g->role == ROLE_PERMUTED && slot_masked(g, t, k) ? poisoned(f, h, d0, normal)
                                                                : normal;
    case MOEPERM_GOLDEN_VALUES_GRAD_INF:
        return g->role == ROLE_GRAD && (t & 1) ? poisoned(f, h, d0, normal) : normal;
    case MOEPERM_GOLDEN_VALUES_CANCEL:
        if (g->role == ROLE_GRAD) {
            /* +-2^-E, +-1, +-2^E in pairs of columns, E = 24 (fp16: 14):
             * the products span more than 24 bits, so which small ones
             * are absorbed depends on the order of the adds. */
            int e = f->dtype == MOEPERM_FLOAT16 ? 14 : 24;
            return ((h & 1) ? f->sign : 0) | pow2(f, e * ((int)((h >> 1) % 3) - 1));
        }
        return narrow(f, (float)(1.0 + normal_exact(d0, d1) / 4));
    case MOEPERM_GOLDEN_VALUES_TINY:
        return compose(f, d0 & 1, f->dtype == MOEPERM_FLOAT16 ? -14 : -70,
                       random_mantissa(f, d0));
    case MOEPERM_GOLDEN_VALUES_PRODUCT_ROUNDING:
    case MOEPERM_GOLDEN_VALUES_PRODUCT_SUBNORMAL:
    case MOEPERM_GOLDEN_VALUES_PRODUCT_OVERFLOW:
        break;
    default:
        return normal;
    }

    element e = {.k = k, .top_k = g->slots};
    e.dp = prng_draw(g->pick_key, (uint64_t)t * (uint64_t)g->columns + (uint64_t)h);
    pick_slots(&e, g->slots);
    bool grad = g->role == ROLE_GRAD;
    bool at_p = grad || k == e.p, at_q = !grad && g->slots > 1 && k == e.q;
    uint32_t sgn = (e.dp & 1) ? f->sign : 0;
    switch (v) {
    case MOEPERM_GOLDEN_VALUES_PRODUCT_ROUNDING: {
        int s = (int)(h % 6);
        if (s == 5 || (grad && s == 4))
            return normal;
        if (s == 4) { /* N at p, -N at q: the same value, its draws slot p's */
            if (at_p)
                return normal;
            if (!at_q)
                return 0;
            uint64_t n = (((uint64_t)t * (uint64_t)g->slots + (uint64_t)e.p) *
                              (uint64_t)g->columns + (uint64_t)h) * 2;
            return narrow(f, normal_value(prng_draw(g->value_key, n),
                                          prng_draw(g->value_key, n + 1))) ^ f->sign;
        }
        uint32_t x = product_tie(f, product_d(g, t, e.p), e.dp, s & 1);
        return at_p ? x : (s >= 2 && at_q) ? x ^ f->sign : 0;
    }
    case MOEPERM_GOLDEN_VALUES_PRODUCT_SUBNORMAL: {
        int s = (int)(h % 3);
        if (s == 2)
            return normal;
        int jp = subnormal_jp(g, t, grad ? e.p : k);
        return (s == 0 || at_p) ? subnormal_factor(f, jp, e.dp, d0) : 0;
    }
    default: { /* MOEPERM_GOLDEN_VALUES_PRODUCT_OVERFLOW */
        int s = (int)(h % 4);
        switch (s) {
        case 0:
            return sgn | f->max;
        case 1:
            return at_p ? sgn | f->max : at_q ? (sgn ^ f->sign) | f->max : 0;
        case 2:
            return at_p ? sgn | (f->max - ((uint32_t)overflow_jp(g, t, e.p) << f->mantissa))
                        : 0;
        default:
            return normal;
        }
    }
    }
}

static bool coordinated_kind(moeperm_golden_values v)
{
    return v >= MOEPERM_GOLDEN_VALUES_MASKING;
}

static uint32_t element_bits(const generator *g, int64_t t, int64_t k, int64_t h)
{
    const format *f = &g->f;
    uint64_t slot = (uint64_t)(t * g->top_k + k);
    uint64_t n = (slot * (uint64_t)g->hidden + (uint64_t)h) * 2;
    element e = {.k = k, .top_k = g->top_k};
    e.d0 = prng_draw(g->value_key, n);
    /* int8 tokens are copied, never computed with: random bytes. */
    if (f->dtype == MOEPERM_INT8)
        return (uint32_t)(e.d0 & 0xffu);
    e.d1 = prng_draw(g->value_key, n + 1);
    uint32_t normal = narrow(f, normal_value(e.d0, e.d1));

    switch (g->values) {
    case MOEPERM_GOLDEN_VALUES_NORMAL:
        return normal;
    case MOEPERM_GOLDEN_VALUES_NEGZERO:
        return f->sign;
    case MOEPERM_GOLDEN_VALUES_BITS:
        return f->dtype == MOEPERM_FLOAT ? (uint32_t)e.d0 : (uint32_t)(e.d0 & 0xffffu);
    default:
        break;
    }
    if (coordinated_kind(g->values)) {
        /* A plain tensor numbers its draws by (row, column): for probs
         * that is (t, k), for the gradient (t, h). */
        if (g->role == ROLE_PROBS)
            return coordinated_bits(g, t, h, 0, e.d0, e.d1, normal);
        return coordinated_bits(g, t, k, h, e.d0, e.d1, normal);
    }
    /* Per (token, column): the scenario is the column modulo the kind's
     * scenario count; p, q, r are distinct slots drawn from the pick
     * stream. */
    e.scenario = (int)(h % scenario_count[g->values]);
    e.dp = prng_draw(g->pick_key, (uint64_t)t * (uint64_t)g->hidden + (uint64_t)h);
    pick_slots(&e, g->top_k);
    switch (g->values) {
    case MOEPERM_GOLDEN_VALUES_NAN_INF:
        return kind_nan_inf(f, &e, normal);
    case MOEPERM_GOLDEN_VALUES_SUBNORMAL:
        return kind_subnormal(f, &e, normal);
    case MOEPERM_GOLDEN_VALUES_OVERFLOW:
        return kind_overflow(f, &e, normal);
    default:
        return kind_rounding(f, &e, normal);
    }
}

/* ---------------------------------------------------------------------- */
/* A case                                                                 */
/* ---------------------------------------------------------------------- */

static void store(moeperm_dtype dtype, void *data, uint64_t i, uint32_t bits)
{
    switch (moeperm_dtype_size(dtype)) {
    case 4:
        memcpy((uint8_t *)data + 4 * i, &bits, 4);
        break;
    case 2: {
        uint16_t half = (uint16_t)bits;
        memcpy((uint8_t *)data + 2 * i, &half, 2);
        break;
    }
    default:
        ((uint8_t *)data)[i] = (uint8_t)bits;
    }
}

/* Appends an input of the operator's slot `name`.  A large one is aligned
 * for the writer to hand it to the disk without a copy (GOLDEN_IO_ALIGN)
 * and not zeroed: its fill writes every byte.  Returns it, or NULL when
 * memory runs out. */
static moeperm_golden_tensor *add_tensor(moeperm_golden_case *c, const char *name, moeperm_dtype dtype,
                                 uint64_t ndim, int64_t d0, int64_t d1)
{
    size_t count;
    const moeperm_golden_slot *slots = moeperm_golden_op_slots(c->op, &count);
    const moeperm_golden_slot *slot = NULL;
    for (size_t i = 0; i < count && !slot; i++)
        if (strcmp(slots[i].name, name) == 0)
            slot = &slots[i];
    moeperm_golden_tensor *t = &c->tensors[c->tensor_count++];
    t->name = slot->name;
    t->role = slot->role;
    t->dtype = dtype;
    t->ndim = ndim;
    t->shape[0] = d0;
    t->shape[1] = d1;
    t->bytes = (size_t)d0 * (ndim > 1 ? (size_t)d1 : 1) * moeperm_dtype_size(dtype);
    t->file = golden_strdup_printf("%s.bin", name);
    if (t->bytes >= GOLDEN_DIRECT_MIN)
        t->data = aligned_alloc(GOLDEN_IO_ALIGN, (t->bytes + GOLDEN_IO_ALIGN - 1) /
                                                     GOLDEN_IO_ALIGN * GOLDEN_IO_ALIGN);
    else
        t->data = t->bytes ? calloc(1, t->bytes) : NULL;
    if (!t->file || (t->bytes && !t->data))
        return NULL;
    return t;
}

/* Row (t, k) of g, g->hidden elements, into dst. */
static void fill_row(const generator *g, int64_t t, int64_t k, void *dst)
{
    if (g->rows != ROW_ELEMENTS) {
        uint64_t n = (uint64_t)(t * g->top_k + k) * (uint64_t)g->hidden * 2;
        g->row(g->rows, g->f.dtype, g->value_key, n, g->hidden, dst);
        return;
    }
    for (int64_t h = 0; h < g->hidden; h++)
        store(g->f.dtype, dst, (uint64_t)h, element_bits(g, t, k, h));
}

/* A stretch of rows is at most this many bytes: a writer given the tensor
 * (see make_tensors()) hashes and writes each stretch while later ones
 * are made. */
#define STRETCH_BYTES ((size_t)8 << 20)

#if defined(_OPENMP)
#define PARALLEL_FOR_DYNAMIC _Pragma("omp parallel for schedule(dynamic, 1)")
#define CRITICAL_STRETCHES _Pragma("omp critical(golden_stretches)")
#else
#define PARALLEL_FOR_DYNAMIC
#define CRITICAL_STRETCHES
#endif

/*
 * Fills the rows of a [rows, hidden] tensor: row r is row (r, 0) of g, or
 * with owner row (owner[r] / K, owner[r] % K), or zeros where owner[r] is
 * -1 (a row no slot owns).  The threads take stretches of rows
 * in order as they come free, and w (when not NULL) learns after each one
 * how many leading bytes are final.  Handing out stretches, rather than a
 * parallel loop per stretch, keeps the threads from waiting for each other
 * at every stretch, spinning on CPUs the writer's threads need.  Returns 0,
 * or -1 when memory runs out.
 */
static int fill_rows(const generator *g, const int32_t *owner, moeperm_golden_tensor *t,
                     golden_case_writer *w)
{
    int64_t rows = t->shape[0];
    if (rows == 0 || t->bytes == 0)
        return 0;
    size_t row_bytes = t->bytes / (size_t)rows;
    /* At least 16 stretches, so that a tensor of a few MiB is still split. */
    int64_t per = (int64_t)(STRETCH_BYTES / row_bytes);
    per = per < (rows + 15) / 16 ? per : (rows + 15) / 16;
    per = per > 0 ? per : 1;
    int64_t stretches = (rows + per - 1) / per, prefix = 0;
    bool *done = calloc((size_t)stretches, sizeof *done);
    if (!done)
        return -1;
    if (w)
        golden_case_writer_ready(w, t, 0);
    uint8_t *data = t->data;
    PARALLEL_FOR_DYNAMIC
    for (int64_t i = 0; i < stretches; i++) {
        int64_t end = rows - i * per < per ? rows : (i + 1) * per;
        for (int64_t r = i * per; r < end; r++) {
            if (!owner)
                fill_row(g, r, 0, data + (size_t)r * row_bytes);
            else if (owner[r] >= 0)
                fill_row(g, owner[r] / g->top_k, owner[r] % g->top_k,
                         data + (size_t)r * row_bytes);
            else
                memset(data + (size_t)r * row_bytes, 0, row_bytes);
        }
        if (w) {
            CRITICAL_STRETCHES
            {
                done[i] = true;
                while (prefix < stretches && done[prefix])
                    prefix++;
                int64_t final_rows = prefix * per < rows ? prefix * per : rows;
                golden_case_writer_ready(w, t, (size_t)final_rows * row_bytes);
            }
        }
    }
    free(done);
    return 0;
}

/*
 * Fills the [R, H] permuted tensor: the value of token t's slot k at
 * column h lands in row sorted_indices[t*K + k] (nothing for a dropped
 * slot), so each row holds the values of the slot that owns it.  Made row
 * by row in order (each row from its owner) rather than slot by slot, so
 * that a writer can take the tensor in stretches.  Returns 0, or -1 when
 * memory runs out.
 */
static int fill_permuted(const generator *g, const int32_t *indices, int64_t slots,
                         moeperm_golden_tensor *t, golden_case_writer *w)
{
    int64_t rows = t->shape[0];
    int32_t *owner = malloc((size_t)(rows > 0 ? rows : 1) * sizeof *owner);
    if (!owner)
        return -1;
    for (int64_t r = 0; r < rows; r++)
        owner[r] = -1;
    for (int64_t i = 0; i < slots; i++)
        if (indices[i] < rows)
            owner[indices[i]] = (int32_t)i;
    int rc = fill_rows(g, owner, t, w);
    free(owner);
    return rc;
}

/* The generator of one tensor of case s: dtype and value kind, its draws
 * numbered as (t * top_k + k) * hidden + h in stream. */
static generator make_generator(const moeperm_golden_spec *s, moeperm_dtype dtype, moeperm_golden_values values,
                                int64_t top_k, int64_t hidden, int stream, role role)
{
    generator g = {
        .f = format_of(dtype),
        .values = values,
        .top_k = top_k,
        .hidden = hidden,
        .value_key = prng_stream_key(s->seed, (uint64_t)stream),
        .pick_key = prng_stream_key(s->seed, PRNG_STREAM_PICK),
        .role = role,
        .slots = s->top_k,
        .columns = s->hidden_size,
        .tokens = format_of(s->dtype),
        .probs = format_of(s->has_probs ? s->probs_dtype : s->dtype),
        .slot_key = prng_stream_key(s->seed, PRNG_STREAM_SLOT),
        .rows = row_kind_of(dtype, values),
        .row = row_loops(),
    };
    return g;
}

/* MoeTokenPermute's expert ids [T, K] of the index dtype: the routing's
 * choices, and with sentinels every 7th slot the dtype's minimum or maximum
 * (alternately), the ids the device sorts first and last. */
static int fill_expert_ids(const moeperm_golden_spec *s, moeperm_golden_tensor *t, char *err, size_t err_len)
{
    int64_t n = s->tokens_num * s->top_k;
    int64_t experts = s->num_experts ? s->num_experts : default_experts(s->top_k);
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    if (!ids) {
        snprintf(err, err_len, "out of memory for %" PRId64 " expert ids", n);
        return -1;
    }
    uint64_t key = prng_stream_key(s->seed, PRNG_STREAM_ROUTING);
    PARALLEL_FOR
    for (int64_t tok = 0; tok < s->tokens_num; tok++)
        route_token(key, tok, s->top_k, experts, s->hot_percent, ids + tok * s->top_k);
    for (int64_t i = 0; i < n; i++) {
        int64_t id = ids[i];
        if (s->sentinels && i % 7 == 3)
            id = (i / 7) % 2 == 0 ? (s->index_dtype == MOEPERM_INT64 ? INT64_MIN : INT32_MIN)
                                  : (s->index_dtype == MOEPERM_INT64 ? INT64_MAX : INT32_MAX);
        if (s->index_dtype == MOEPERM_INT64)
            ((int64_t *)t->data)[i] = id;
        else
            ((int32_t *)t->data)[i] = (int32_t)id;
    }
    free(ids);
    return 0;
}

/* Allocates and fills c's inputs for spec s, handing each to w (when not
 * NULL) as it is made. */
static int make_tensors(const moeperm_golden_spec *s, moeperm_golden_case *c, golden_case_writer *w, char *err,
                        size_t err_len)
{
    int64_t T = s->tokens_num, K = s->top_k, H = s->hidden_size, slots = T * K;
    int64_t R = s->num_rows < 0 ? slots : s->num_rows;
    generator values =
        make_generator(s, s->dtype, s->values, K, H, PRNG_STREAM_VALUES, ROLE_PERMUTED);
    moeperm_golden_tensor *t, *idx;
    switch (c->op) {
    case MOEPERM_OP_PERMUTE:
        if (!(t = add_tensor(c, "tokens", s->dtype, 2, T, H)))
            return -1;
        values.top_k = 1;
        values.role = ROLE_TOKENS;
        if (fill_rows(&values, NULL, t, w) != 0)
            return -1;
        if (!(idx = add_tensor(c, "indices", s->index_dtype, 2, T, K)) ||
            fill_expert_ids(s, idx, err, err_len) != 0)
            return -1;
        return 0;
    case MOEPERM_OP_PERMUTE_GRAD:
    case MOEPERM_OP_UNPERMUTE:
    case MOEPERM_OP_UNPERMUTE_GRAD:
        break;
    }
    /* The other three read a permuted tensor through sorted_indices. */
    int32_t *indices = malloc((size_t)slots * sizeof *indices);
    if (!indices || make_indices(s, indices, err, err_len) != 0) {
        free(indices);
        return -1;
    }
    const char *permuted = c->op == MOEPERM_OP_PERMUTE_GRAD ? "permuted_output_grad"
                                                           : "permuted_tokens";
    int rc = -1;
    if (!(t = add_tensor(c, permuted, s->dtype, 2, R, H)) ||
        fill_permuted(&values, indices, slots, t, w) != 0)
        goto done;
    if (c->op == MOEPERM_OP_UNPERMUTE_GRAD) {
        generator g = make_generator(s, s->dtype, s->values, 1, H, PRNG_STREAM_GRAD, ROLE_GRAD);
        if (!(t = add_tensor(c, "unpermuted_tokens_grad", s->dtype, 2, T, H)) ||
            fill_rows(&g, NULL, t, w) != 0)
            goto done;
    }
    if (!(idx = add_tensor(c, "sorted_indices", MOEPERM_INT32, 1, slots, 0)))
        goto done;
    memcpy(idx->data, indices, idx->bytes);
    if (s->has_probs && c->op != MOEPERM_OP_PERMUTE_GRAD) {
        generator g = make_generator(s, s->probs_dtype, s->probs_values, 1, K,
                                     PRNG_STREAM_PROBS, ROLE_PROBS);
        if (!(t = add_tensor(c, "probs", s->probs_dtype, 2, T, K)) ||
            fill_rows(&g, NULL, t, w) != 0)
            goto done;
    }
    rc = 0;
done:
    free(indices);
    return rc;
}

/* moeperm_golden_generate(), handing each tensor to w (when not NULL) as it is
 * made.  On failure c is left to the caller to free: after w is stopped,
 * since w's threads may still be reading its tensors. */
static int generate(const moeperm_golden_spec *s, const char *command, moeperm_golden_case *c,
                    golden_case_writer *w, char *err, size_t err_len)
{
    memset(c, 0, sizeof *c);
    err[0] = '\0';
    if (moeperm_golden_spec_check(s, err, err_len) != 0)
        return -1;
    c->format_version = 2;
    c->op = s->op ? s->op : MOEPERM_OP_PERMUTE_GRAD;
    c->name = golden_strdup_printf("%s", s->name);
    c->description = golden_strdup_printf("%s", s->description);
    c->generator = golden_strdup_printf("moeperm %s", moeperm_version());
    c->command = command ? golden_strdup_printf("%s", command) : NULL;
    c->recipe.routing = golden_strdup_printf("%s", moeperm_golden_routing_name(s->routing));
    c->recipe.values = golden_strdup_printf("%s", moeperm_golden_values_name(s->values));
    c->recipe.probs_values =
        s->has_probs && c->op != MOEPERM_OP_PERMUTE_GRAD && c->op != MOEPERM_OP_PERMUTE
            ? golden_strdup_printf("%s", moeperm_golden_values_name(s->probs_values))
            : NULL;
    c->recipe.num_experts = s->num_experts ? s->num_experts : default_experts(s->top_k);
    c->recipe.hot_percent = s->hot_percent;
    c->recipe.sentinels = c->op == MOEPERM_OP_PERMUTE && s->sentinels;
    c->seed = s->seed;
    c->attrs.top_k = c->op == MOEPERM_OP_PERMUTE_GRAD ? s->top_k : 0;
    c->attrs.num_out_tokens = c->op == MOEPERM_OP_PERMUTE ? s->num_out_tokens : 0;
    if (c->op == MOEPERM_OP_UNPERMUTE_GRAD && s->has_probs) {
        c->attrs.ub_bytes = s->ub_bytes;
        c->attrs.vector_cores = s->vector_cores;
    }
    bool recipe_ok = c->recipe.routing && c->recipe.values &&
                     (c->recipe.probs_values || !s->has_probs ||
                      c->op == MOEPERM_OP_PERMUTE_GRAD || c->op == MOEPERM_OP_PERMUTE);
    if (!c->name || !c->description || !c->generator || (command && !c->command) ||
        !recipe_ok || make_tensors(s, c, w, err, err_len) != 0) {
        if (err[0] == '\0')
            snprintf(err, err_len, "out of memory generating %s", s->name);
        return -1;
    }

    char inner[768];
    if (moeperm_golden_case_finish(c, inner, sizeof inner) != 0) {
        snprintf(err, err_len, "%s: %s", s->name, inner);
        return -1;
    }
    return 0;
}

int moeperm_golden_generate(const moeperm_golden_spec *s, const char *command, moeperm_golden_case *c, char *err,
                    size_t err_len)
{
    if (generate(s, command, c, NULL, err, err_len) != 0) {
        moeperm_golden_case_free(c);
        return -1;
    }
    return 0;
}

int moeperm_golden_generate_write(const moeperm_golden_spec *s, const char *command, const char *path,
                          bool force, char *err, size_t err_len)
{
    err[0] = '\0';
    if (moeperm_golden_spec_check(s, err, err_len) != 0)
        return -2;
    golden_case_writer *w = golden_case_writer_open(path, force, err, err_len);
    if (!w)
        return -1;
    moeperm_golden_case c;
    if (generate(s, command, &c, w, err, err_len) != 0) {
        golden_case_writer_abort(w);
        moeperm_golden_case_free(&c);
        return -2;
    }
    int rc = golden_case_writer_close(w, &c, err, err_len);
    moeperm_golden_case_free(&c);
    return rc;
}
