/*
 * spec.c - what decides a generated case: the defaults of `moeperm
 * golden`, the name of a one-off case, and the checks a spec passes before
 * any work.
 */
#include "golden/generate/spec.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "golden/common/text.h"

int64_t golden_default_experts(int64_t top_k)
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
        snprintf(op, sizeof op, "%s-", moeperm_golden_op_short_name(o));
    if ((o == MOEPERM_OP_UNPERMUTE || o == MOEPERM_OP_UNPERMUTE_GRAD) && !spec->has_probs)
        snprintf(probs, sizeof probs, "-noprobs");
    else if ((o == MOEPERM_OP_UNPERMUTE || o == MOEPERM_OP_UNPERMUTE_GRAD) &&
             spec->probs_dtype != spec->dtype)
        snprintf(probs, sizeof probs, "-p%s", moeperm_dtype_name(spec->probs_dtype));
    /* The input domain's edge, named only where a case reaches it. */
    char edge[96] = "";
    int used = 0;
    if (spec->hidden_outer)
        used += snprintf(edge + used, sizeof edge - (size_t)used, "-o%" PRId64, spec->hidden_outer);
    if (spec->extra_indices)
        used += snprintf(edge + used, sizeof edge - (size_t)used, "-x%" PRId64,
                         spec->extra_indices);
    if (spec->huge_indices)
        used += snprintf(edge + used, sizeof edge - (size_t)used, "-huge");
    if (spec->padded_mode)
        used += snprintf(edge + used, sizeof edge - (size_t)used, "-padded");
    if (spec->chip[0])
        snprintf(edge + used, sizeof edge - (size_t)used, "-%s", spec->chip);
    snprintf(spec->name, sizeof spec->name,
             "%s%s-t%" PRId64 "-k%" PRId64 "-h%" PRId64 "%s%s%s-%s-%s-s%" PRIu64, op,
             moeperm_dtype_name(spec->dtype), spec->tokens_num,
             spec->num_topk ? spec->num_topk : spec->top_k, spec->hidden_size, rows, probs, edge,
             moeperm_golden_routing_name(spec->routing), moeperm_golden_values_name(spec->values),
             spec->seed);
}

/* The fields of a spec that reach the input domain's edge: each where its
 * operator has it, within what the generator can make.  rows is R. */
static int golden_spec_check_domain(const moeperm_golden_spec *s, moeperm_op op, int64_t slots,
                                    int64_t rows, char *err, size_t err_len)
{
    bool reads_indices = op != MOEPERM_OP_PERMUTE;
    if (s->padded_mode && op == MOEPERM_OP_PERMUTE) {
        snprintf(err, err_len, "padded_mode is true, which MoeTokenPermute refuses (the "
                               "device's tiling, 561002); the other three ignore it");
        return -1;
    }
    if (s->num_topk != 0 && (op != MOEPERM_OP_PERMUTE_GRAD || s->num_topk != -1 ||
                             s->top_k != 1)) {
        snprintf(err, err_len,
                 "num_topk is %" PRId64 ", expected 0 (top_k) or, for MoeTokenPermuteGrad with "
                 "top_k 1, -1 (which the device takes as 1)", s->num_topk);
        return -1;
    }
    if ((s->routing == MOEPERM_GOLDEN_ROUTING_REPEATS ||
         s->routing == MOEPERM_GOLDEN_ROUTING_SPARSE) && !reads_indices) {
        snprintf(err, err_len, "routing %s makes sorted_indices, which MoeTokenPermute "
                               "computes", moeperm_golden_routing_name(s->routing));
        return -1;
    }
    if (s->routing == MOEPERM_GOLDEN_ROUTING_REPEATS && op == MOEPERM_OP_UNPERMUTE_GRAD) {
        snprintf(err, err_len, "routing repeats names rows twice, which MoeTokenUnpermuteGrad "
                               "would write twice (the device's cores race); use sparse");
        return -1;
    }
    if (s->routing == MOEPERM_GOLDEN_ROUTING_SPARSE && rows < slots) {
        snprintf(err, err_len,
                 "routing sparse gives every slot its own row, but num_rows %" PRId64
                 " is below tokens_num*top_k = %" PRId64, rows, slots);
        return -1;
    }
    if (s->huge_indices && (!reads_indices || rows > HUGE_MAX_ROWS)) {
        snprintf(err, err_len,
                 reads_indices ? "huge_indices needs num_rows at most %d (every huge entry "
                                 "must be a dropped slot), not %" PRId64
                               : "huge_indices: MoeTokenPermute computes sorted_indices (%d, %"
                                 PRId64 ")",
                 HUGE_MAX_ROWS, rows);
        return -1;
    }
    const char *extra_why = NULL;
    if (s->extra_indices < 0 || s->extra_indices > (int64_t)INT32_MAX - slots)
        extra_why = "0 or more, the entries int32 can address";
    else if (s->extra_indices && op == MOEPERM_OP_PERMUTE)
        extra_why = "0: MoeTokenPermute computes sorted_indices";
    else if (s->extra_indices && op == MOEPERM_OP_UNPERMUTE && !s->has_probs)
        extra_why = "0: without probs MoeTokenUnpermute reads every entry, one token each";
    else if (op == MOEPERM_OP_PERMUTE_GRAD && s->extra_indices >= s->top_k)
        extra_why = "below top_k: top_k more entries make one more token of "
                    "MoeTokenPermuteGrad";
    if (extra_why) {
        snprintf(err, err_len, "extra_indices is %" PRId64 ", expected %s", s->extra_indices,
                 extra_why);
        return -1;
    }
    if (s->hidden_outer != 0 &&
        (op != MOEPERM_OP_PERMUTE || s->hidden_outer < 1 || s->hidden_size % s->hidden_outer)) {
        snprintf(err, err_len,
                 "hidden_outer is %" PRId64 ", expected 0, or for MoeTokenPermute a divisor of "
                 "hidden_size %" PRId64 " (tokens [T, hidden_outer, H / hidden_outer])",
                 s->hidden_outer, s->hidden_size);
        return -1;
    }
    return 0;
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
                 moeperm_dtype_name(s->dtype), moeperm_op_name(op), int8_ok ? ", int8" : "");
        return -1;
    }
    if (s->has_probs && !float_dtype(s->probs_dtype)) {
        snprintf(err, err_len, "probs dtype %s is not float32, float16 or bf16",
                 moeperm_dtype_name(s->probs_dtype));
        return -1;
    }
    if (op == MOEPERM_OP_PERMUTE && s->index_dtype != MOEPERM_INT32 &&
        s->index_dtype != MOEPERM_INT64) {
        snprintf(err, err_len, "index dtype %s is not int32 or int64",
                 moeperm_dtype_name(s->index_dtype));
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
    /* More rows than slots is the domain's edge (rows no slot names); the
     * int32 entries of sorted_indices address at most INT32_MAX + 1 rows. */
    if (s->num_rows < -1 || s->num_rows > INT32_MAX ||
        (op == MOEPERM_OP_PERMUTE && s->num_rows > slots)) {
        snprintf(err, err_len, "num_rows is %" PRId64 ", expected 0 to %" PRId64, s->num_rows,
                 op == MOEPERM_OP_PERMUTE ? slots : (int64_t)INT32_MAX);
        return -1;
    }
    int64_t rows = s->num_rows < 0 ? slots : s->num_rows;
    if (golden_spec_check_domain(s, op, slots, rows, err, err_len) != 0)
        return -1;
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
    if (__builtin_mul_overflow((uint64_t)(rows > slots ? rows : slots), (uint64_t)s->hidden_size,
                               &bytes) ||
        __builtin_mul_overflow(bytes, (uint64_t)moeperm_dtype_size(s->dtype), &bytes) ||
        bytes > SIZE_MAX / 2) {
        snprintf(err, err_len,
                 "a case of %" PRId64 " slots by hidden_size %" PRId64
                 " is too large for this machine",
                 slots, s->hidden_size);
        return -1;
    }
    if (s->routing == MOEPERM_GOLDEN_ROUTING_ROUTED || op == MOEPERM_OP_PERMUTE) {
        int64_t experts = s->num_experts ? s->num_experts : golden_default_experts(s->top_k);
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
    /* The operator's own bounds (moeperm_executor_set_chip()), checked here so that
     * a chip it would refuse is a bad spec, not a failure after the work. */
    if (s->ub_bytes != 0 &&
        (s->ub_bytes < MOEPERM_CHIP_MIN_UB_BYTES || s->ub_bytes > MOEPERM_CHIP_MAX_UB_BYTES)) {
        snprintf(err, err_len, "ub_bytes is %" PRId64 ", expected %d to %d (0: the default chip)",
                 s->ub_bytes, MOEPERM_CHIP_MIN_UB_BYTES, MOEPERM_CHIP_MAX_UB_BYTES);
        return -1;
    }
    if (s->vector_cores < 0 || s->vector_cores > MOEPERM_CHIP_MAX_VECTOR_CORES) {
        snprintf(err, err_len, "vector_cores is %" PRId64 ", expected 1 to %d (0: the default "
                 "chip)", s->vector_cores, MOEPERM_CHIP_MAX_VECTOR_CORES);
        return -1;
    }
    /* name and description become manifest strings, which the reader
     * takes only as UTF-8 (and the name the case directory's name). */
    size_t at;
    if (!memchr(s->name, '\0', sizeof s->name)) {
        snprintf(err, err_len, "the case name is not NUL-terminated within its %zu bytes",
                 sizeof s->name);
        return -1;
    }
    if (!memchr(s->description, '\0', sizeof s->description)) {
        snprintf(err, err_len, "the description is not NUL-terminated within its %zu bytes",
                 sizeof s->description);
        return -1;
    }
    if ((at = golden_utf8_invalid_at(s->name)) != SIZE_MAX) {
        snprintf(err, err_len, "case name \"%.*s...\" is not UTF-8 text: byte 0x%02x at offset "
                 "%zu; the manifest records the name, and a manifest is UTF-8", (int)at, s->name,
                 (unsigned char)s->name[at], at);
        return -1;
    }
    if ((at = golden_utf8_invalid_at(s->description)) != SIZE_MAX) {
        snprintf(err, err_len, "the description \"%.*s...\" of %s is not UTF-8 text: byte "
                 "0x%02x at offset %zu; a manifest is UTF-8", (int)at, s->description, s->name,
                 (unsigned char)s->description[at], at);
        return -1;
    }
    if (s->chip[0] && op != MOEPERM_OP_UNPERMUTE_GRAD) {
        snprintf(err, err_len, "chip \"%s\" is MoeTokenUnpermuteGrad's, not %s's", s->chip,
                 moeperm_op_name(op));
        return -1;
    }
    moeperm_chip chip;
    if (s->chip[0] && (memchr(s->chip, '\0', sizeof s->chip) == NULL ||
                       moeperm_chip_by_name(s->chip, &chip) != MOEPERM_SUCCESS)) {
        snprintf(err, err_len, "chip is \"%.*s\", expected one of %s", (int)sizeof s->chip,
                 s->chip, moeperm_chip_names());
        return -1;
    }
    bool ub_off = s->ub_bytes && s->ub_bytes != chip.ub_bytes;
    if (s->chip[0] && (ub_off || (s->vector_cores && s->vector_cores != chip.vector_cores))) {
        snprintf(err, err_len,
                 "chip %s has %" PRId64 " unified-buffer bytes and %" PRId64
                 " vector cores, but %s %" PRId64 " is given beside it",
                 s->chip, chip.ub_bytes, chip.vector_cores, ub_off ? "ub_bytes" : "vector_cores",
                 ub_off ? s->ub_bytes : s->vector_cores);
        return -1;
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
