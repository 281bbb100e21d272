/*
 * generate.c - builds golden cases: routings (realistic top-k expert
 * choice through the public moeperm_route_sorted_indices(), or fixed
 * permutations), input values (gradient-like or adversarial, one device
 * question per value kind), and the golden output from the public
 * two-phase API.  Every input bit is a pure function of (seed, position),
 * documented in docs/golden-format.md, so numpy can rebuild any case.
 */
#include "golden/generate.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden/prng.h"

#if defined(_OPENMP)
#define PARALLEL_FOR _Pragma("omp parallel for schedule(static)")
#else
#define PARALLEL_FOR
#endif

/* ---------------------------------------------------------------------- */
/* Names                                                                  */
/* ---------------------------------------------------------------------- */

static const char *const routing_names[] = {"routed", "identity", "reverse", "random"};
static const char *const values_names[] = {"normal",   "nan-inf", "subnormal", "overflow",
                                           "rounding", "negzero", "bits"};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

const char *golden_routing_name(golden_routing routing)
{
    return (size_t)routing < COUNT(routing_names) ? routing_names[routing] : "unknown";
}

bool golden_routing_parse(const char *name, golden_routing *routing)
{
    for (size_t i = 0; i < COUNT(routing_names); i++)
        if (strcmp(name, routing_names[i]) == 0) {
            *routing = (golden_routing)i;
            return true;
        }
    return false;
}

const char *golden_values_name(golden_values values)
{
    return (size_t)values < COUNT(values_names) ? values_names[values] : "unknown";
}

bool golden_values_parse(const char *name, golden_values *values)
{
    for (size_t i = 0; i < COUNT(values_names); i++)
        if (strcmp(name, values_names[i]) == 0) {
            *values = (golden_values)i;
            return true;
        }
    return false;
}

const char *golden_routing_names(void)
{
    return "routed, identity, reverse, random";
}

const char *golden_values_names(void)
{
    return "normal, nan-inf, subnormal, overflow, rounding, negzero, bits";
}

void golden_spec_default_name(golden_spec *spec)
{
    char rows[32] = "";
    if (spec->num_rows >= 0 && spec->num_rows != spec->tokens_num * spec->top_k)
        snprintf(rows, sizeof rows, "-r%" PRId64, spec->num_rows);
    snprintf(spec->name, sizeof spec->name, "%s-t%" PRId64 "-k%" PRId64 "-h%" PRId64 "%s-%s-%s-s%" PRIu64,
             golden_dtype_name(spec->dtype), spec->tokens_num, spec->top_k, spec->hidden_size,
             rows, golden_routing_name(spec->routing), golden_values_name(spec->values),
             spec->seed);
}

static int64_t default_experts(int64_t top_k)
{
    return top_k * 2 > 64 ? top_k * 2 : 64;
}

int golden_spec_check(const golden_spec *s, char *err, size_t err_len)
{
    size_t es = golden_dtype_size(s->dtype);
    if (es == 0) {
        snprintf(err, err_len, "dtype %d is not float32, float16 or bf16", (int)s->dtype);
        return -1;
    }
    if (s->tokens_num < 1 || s->tokens_num > GOLDEN_MAX_DIM) {
        snprintf(err, err_len, "tokens_num is %" PRId64 ", expected 1 to %" PRId64,
                 s->tokens_num, GOLDEN_MAX_DIM);
        return -1;
    }
    if (s->top_k < 1 || s->top_k > MOEPERM_MAX_TOP_K) {
        snprintf(err, err_len, "top_k is %" PRId64 ", expected 1 to %d", s->top_k,
                 MOEPERM_MAX_TOP_K);
        return -1;
    }
    if (s->hidden_size < 1 || s->hidden_size > GOLDEN_MAX_DIM) {
        snprintf(err, err_len, "hidden_size is %" PRId64 ", expected 1 to %" PRId64,
                 s->hidden_size, GOLDEN_MAX_DIM);
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
        snprintf(err, err_len, "num_rows is %" PRId64 ", expected 0 to tokens_num*top_k = %" PRId64,
                 s->num_rows, slots);
        return -1;
    }
    uint64_t bytes;
    if (__builtin_mul_overflow((uint64_t)slots, (uint64_t)s->hidden_size, &bytes) ||
        __builtin_mul_overflow(bytes, (uint64_t)es, &bytes) || bytes > SIZE_MAX / 2) {
        snprintf(err, err_len, "a case of %" PRId64 " slots by hidden_size %" PRId64
                 " is too large for this machine", slots, s->hidden_size);
        return -1;
    }
    if (s->routing == GOLDEN_ROUTING_ROUTED) {
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

static int make_indices(const golden_spec *s, int32_t *indices, char *err, size_t err_len)
{
    int64_t n = s->tokens_num * s->top_k;
    switch (s->routing) {
    case GOLDEN_ROUTING_IDENTITY:
        for (int64_t i = 0; i < n; i++)
            indices[i] = (int32_t)i;
        return 0;
    case GOLDEN_ROUTING_REVERSE:
        for (int64_t i = 0; i < n; i++)
            indices[i] = (int32_t)(n - 1 - i);
        return 0;
    case GOLDEN_ROUTING_RANDOM: {
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
    case GOLDEN_ROUTING_ROUTED:
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
    int emax;     /* exponent of the largest finite value */
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

static uint32_t narrow(const format *f, float v)
{
    switch (f->dtype) {
    case MOEPERM_FLOAT: {
        uint32_t bits;
        memcpy(&bits, &v, 4);
        return bits;
    }
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
static float normal_value(uint64_t d0, uint64_t d1)
{
    int64_t sum = (int64_t)(d0 & 0xffffff) + (int64_t)((d0 >> 24) & 0xffffff) +
                  (int64_t)(d1 & 0xffffff) + (int64_t)((d1 >> 24) & 0xffffff);
    int e = (int)(d1 >> 61);
    return (float)ldexp((double)(sum - (INT64_C(1) << 25)), -25 - e);
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

typedef struct generator {
    format f;
    golden_values values;
    int64_t top_k, hidden;
    uint64_t value_key, pick_key;
} generator;

static uint32_t element_bits(const generator *g, int64_t t, int64_t k, int64_t h)
{
    const format *f = &g->f;
    uint64_t slot = (uint64_t)(t * g->top_k + k);
    uint64_t n = (slot * (uint64_t)g->hidden + (uint64_t)h) * 2;
    element e = {.k = k, .top_k = g->top_k};
    e.d0 = prng_draw(g->value_key, n);
    e.d1 = prng_draw(g->value_key, n + 1);
    uint32_t normal = narrow(f, normal_value(e.d0, e.d1));

    switch (g->values) {
    case GOLDEN_VALUES_NORMAL:
        return normal;
    case GOLDEN_VALUES_NEGZERO:
        return f->sign;
    case GOLDEN_VALUES_BITS:
        return f->dtype == MOEPERM_FLOAT ? (uint32_t)e.d0 : (uint32_t)(e.d0 & 0xffffu);
    default:
        break;
    }
    /* Per (token, column): the scenario is the column modulo the kind's
     * scenario count; p, q, r are distinct slots drawn from the pick
     * stream (p from the high 32 bits, q and r from the low 32). */
    e.scenario = (int)(h % scenario_count[g->values]);
    e.dp = prng_draw(g->pick_key, (uint64_t)t * (uint64_t)g->hidden + (uint64_t)h);
    e.p = (int64_t)prng_below(e.dp, (uint64_t)g->top_k);
    e.q = e.p;
    e.r = e.p;
    if (g->top_k > 1) {
        uint64_t low = (e.dp & 0xffffffffu) << 32;
        e.q = (e.p + 1 + (int64_t)prng_below(low, (uint64_t)g->top_k - 1)) % g->top_k;
        e.r = (e.q + 1) % g->top_k;
        if (e.r == e.p)
            e.r = (e.r + 1) % g->top_k;
    }
    switch (g->values) {
    case GOLDEN_VALUES_NAN_INF:
        return kind_nan_inf(f, &e, normal);
    case GOLDEN_VALUES_SUBNORMAL:
        return kind_subnormal(f, &e, normal);
    case GOLDEN_VALUES_OVERFLOW:
        return kind_overflow(f, &e, normal);
    default:
        return kind_rounding(f, &e, normal);
    }
}

/* ---------------------------------------------------------------------- */
/* The reference run                                                      */
/* ---------------------------------------------------------------------- */

/* The public API's first phase on c with out as the output, then, when run
 * is true, its second phase. */
static moeperm_status reference_call(const golden_case *c, void *out, bool run, char *err,
                                     size_t err_len)
{
    int64_t grad_dims[2] = {c->num_rows, c->hidden_size};
    int64_t index_dims[1] = {c->tokens_num * c->top_k};
    int64_t out_dims[2] = {c->tokens_num, c->hidden_size};
    moeperm_tensor *grad = moeperm_tensor_create(grad_dims, 2, c->dtype, NULL, 0,
                                                 c->permuted_output_grad);
    moeperm_tensor *indices = moeperm_tensor_create(index_dims, 1, MOEPERM_INT32, NULL, 0,
                                                    c->sorted_indices);
    moeperm_tensor *output = moeperm_tensor_create(out_dims, 2, c->dtype, NULL, 0, out);
    moeperm_executor *executor = NULL;
    uint64_t workspace_size = 0;
    void *workspace = NULL;
    moeperm_status st = MOEPERM_ERR_INNER;

    if (!grad || !indices || !output) {
        snprintf(err, err_len, "cannot describe the tensors: %s", moeperm_last_error());
        goto done;
    }
    st = moeperm_token_permute_grad_get_workspace_size(grad, indices, c->top_k, c->padded_mode,
                                                       output, &workspace_size, &executor);
    if (st != MOEPERM_SUCCESS) {
        snprintf(err, err_len, "%s", moeperm_last_error());
        goto done;
    }
    if (!run) {
        moeperm_executor_destroy(executor);
        goto done;
    }
    if (workspace_size > 0 && !(workspace = malloc((size_t)workspace_size))) {
        moeperm_executor_destroy(executor);
        st = MOEPERM_ERR_INNER;
        snprintf(err, err_len, "out of memory for a %" PRIu64 "-byte workspace", workspace_size);
        goto done;
    }
    st = moeperm_token_permute_grad(workspace, workspace_size, executor, NULL);
    if (st != MOEPERM_SUCCESS)
        snprintf(err, err_len, "%s", moeperm_last_error());
done:
    free(workspace);
    moeperm_tensor_destroy(output);
    moeperm_tensor_destroy(indices);
    moeperm_tensor_destroy(grad);
    return st;
}

moeperm_status golden_run_reference(const golden_case *c, void *out, char *err, size_t err_len)
{
    return reference_call(c, out, true, err, err_len);
}

moeperm_status golden_check_reference(const golden_case *c, void *out, char *err,
                                      size_t err_len)
{
    return reference_call(c, out, false, err, err_len);
}

/* ---------------------------------------------------------------------- */
/* A case                                                                 */
/* ---------------------------------------------------------------------- */

static void store(moeperm_dtype dtype, void *data, uint64_t i, uint32_t bits)
{
    if (dtype == MOEPERM_FLOAT) {
        memcpy((uint8_t *)data + 4 * i, &bits, 4);
    } else {
        uint16_t half = (uint16_t)bits;
        memcpy((uint8_t *)data + 2 * i, &half, 2);
    }
}

int golden_generate(const golden_spec *s, const char *command, golden_case *c, char *err,
                    size_t err_len)
{
    memset(c, 0, sizeof *c);
    if (golden_spec_check(s, err, err_len) != 0)
        return -1;
    c->name = strdup(s->name);
    c->description = strdup(s->description);
    c->generator = malloc(64);
    c->command = command ? strdup(command) : NULL;
    c->routing = strdup(golden_routing_name(s->routing));
    c->values = strdup(golden_values_name(s->values));
    c->num_experts = s->num_experts ? s->num_experts : default_experts(s->top_k);
    c->hot_percent = s->hot_percent;
    c->dtype = s->dtype;
    c->tokens_num = s->tokens_num;
    c->top_k = s->top_k;
    c->hidden_size = s->hidden_size;
    c->num_rows = s->num_rows < 0 ? s->tokens_num * s->top_k : s->num_rows;
    c->padded_mode = false;
    c->seed = s->seed;
    size_t grad_bytes = golden_grad_bytes(c), out_bytes = golden_output_bytes(c);
    c->sorted_indices = malloc(golden_indices_bytes(c));
    c->permuted_output_grad = grad_bytes ? malloc(grad_bytes) : NULL;
    c->input_grad = malloc(out_bytes);
    if (!c->name || !c->description || !c->generator || (command && !c->command) ||
        !c->routing || !c->values ||
        !c->sorted_indices || (grad_bytes && !c->permuted_output_grad) || !c->input_grad) {
        snprintf(err, err_len, "out of memory generating %s", s->name);
        golden_case_free(c);
        return -1;
    }
    snprintf(c->generator, 64, "moeperm %s", moeperm_version());
    if (make_indices(s, c->sorted_indices, err, err_len) != 0) {
        golden_case_free(c);
        return -1;
    }

    generator g = {format_of(s->dtype), s->values, s->top_k, s->hidden_size,
                   prng_stream_key(s->seed, PRNG_STREAM_VALUES),
                   prng_stream_key(s->seed, PRNG_STREAM_PICK)};
    int64_t slots = s->tokens_num * s->top_k, rows = c->num_rows, hidden = s->hidden_size;
    const int32_t *indices = c->sorted_indices;
    void *grad = c->permuted_output_grad;
    /* Dropped slots (row >= num_rows) have no row: nothing to store. */
    PARALLEL_FOR
    for (int64_t i = 0; i < slots; i++) {
        int64_t row = indices[i];
        if (row >= rows)
            continue;
        for (int64_t h = 0; h < hidden; h++)
            store(s->dtype, grad, (uint64_t)row * (uint64_t)hidden + (uint64_t)h,
                  element_bits(&g, i / s->top_k, i % s->top_k, h));
    }
    moeperm_status st = golden_run_reference(c, c->input_grad, err, err_len);
    if (st != MOEPERM_SUCCESS) {
        char inner[512];
        snprintf(inner, sizeof inner, "%s", err);
        snprintf(err, err_len, "%s: the reference refused the case (%s): %s", s->name,
                 moeperm_status_name(st), inner);
        golden_case_free(c);
        return -1;
    }
    return 0;
}
