/*
 * command.c - the command a manifest records as the one that regenerates
 * its case, written here once for the tool and the Python package: a
 * custom case's with every option spelled out (so it stays true when the
 * defaults change), a suite's by its name and seed, both to be run from
 * the case directory so they stay true wherever the corpus lives.  The
 * command informs; nothing ever parses it back.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <moeperm/golden.h>

#include "golden/common/text.h"
#include "golden/generate/spec.h"

/* text as one word of a POSIX shell command (malloc'd, NULL when memory
 * runs out): as it is when every character is safe, else in single quotes
 * with each ' written '\''.  The recorded command is meant to be pasted into
 * a shell; a name with a space must come back as one argument, and one
 * with quotes, $(...) or a newline must not run anything. */
static char *shell_quote(const char *text)
{
    static const char safe[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                               "0123456789_-+.,:=@%/";
    if (text[0] && strspn(text, safe) == strlen(text))
        return golden_strdup_printf("%s", text);
    size_t quotes = 0;
    for (const char *p = text; *p; p++)
        quotes += *p == '\'';
    char *out = malloc(strlen(text) + 3 * quotes + 3);
    if (!out)
        return NULL;
    char *o = out;
    *o++ = '\'';
    for (const char *p = text; *p; p++) {
        if (*p == '\'') {
            memcpy(o, "'\\''", 4);
            o += 4;
        } else {
            *o++ = *p;
        }
    }
    *o++ = '\'';
    *o = '\0';
    return out;
}

char *moeperm_golden_spec_command(const moeperm_golden_spec *s)
{
    moeperm_op op_code = s->op ? s->op : MOEPERM_OP_PERMUTE_GRAD;
    char op[160] = "";
    switch (op_code) {
    case MOEPERM_OP_PERMUTE:
        snprintf(op, sizeof op, " --op %s --num-out-tokens %" PRId64 " --index-dtype %s%s",
                 moeperm_op_name(op_code), s->num_out_tokens, moeperm_dtype_name(s->index_dtype),
                 s->sentinels ? " --sentinels" : "");
        break;
    case MOEPERM_OP_UNPERMUTE:
    case MOEPERM_OP_UNPERMUTE_GRAD:
        if (s->has_probs)
            snprintf(op, sizeof op, " --op %s --probs-dtype %s --probs-values %s",
                     moeperm_op_name(op_code), moeperm_dtype_name(s->probs_dtype),
                     moeperm_golden_values_name(s->probs_values));
        else
            snprintf(op, sizeof op, " --op %s --no-probs", moeperm_op_name(op_code));
        if (op_code == MOEPERM_OP_UNPERMUTE_GRAD && s->chip[0]) {
            size_t used = strlen(op);
            snprintf(op + used, sizeof op - used, " --chip %s", s->chip);
        } else if (op_code == MOEPERM_OP_UNPERMUTE_GRAD && (s->ub_bytes || s->vector_cores)) {
            size_t used = strlen(op);
            snprintf(op + used, sizeof op - used, " --ub-bytes %" PRId64 " --vector-cores %" PRId64,
                     s->ub_bytes ? s->ub_bytes : (int64_t)MOEPERM_CHIP_A2_UB_BYTES,
                     s->vector_cores ? s->vector_cores : (int64_t)MOEPERM_CHIP_A2_VECTOR_CORES);
        }
        break;
    default:
        break;
    }
    /* The input domain's edge, spelled out only where a case reaches it,
     * so that every other command stays as it was. */
    char domain[160] = "";
    size_t used = 0;
    if (s->padded_mode)
        used += (size_t)snprintf(domain + used, sizeof domain - used, " --padded-mode");
    if (s->extra_indices)
        used += (size_t)snprintf(domain + used, sizeof domain - used, " --extra-indices %" PRId64,
                                 s->extra_indices);
    if (s->huge_indices)
        used += (size_t)snprintf(domain + used, sizeof domain - used, " --huge-indices");
    if (s->hidden_outer)
        snprintf(domain + used, sizeof domain - used, " --hidden-outer %" PRId64, s->hidden_outer);
    int64_t rows = s->num_rows < 0 ? s->tokens_num * s->top_k : s->num_rows;
    int64_t experts = s->num_experts ? s->num_experts : golden_default_experts(s->top_k);
    /* The name is the one word here that comes from the user; the others
     * are numbers and built-in names, safe as they are. */
    char *name = shell_quote(s->name);
    char *command =
        name ? golden_strdup_printf(
                   "moeperm golden --out ..%s --tokens %" PRId64 " --top-k %" PRId64
                   " --hidden %" PRId64 " --dtype %s --rows %" PRId64 " --experts %" PRId64
                   " --hot %d --values %s --routing %s%s --seed %" PRIu64 " --name %s --force",
                   op, s->tokens_num, s->num_topk ? s->num_topk : s->top_k, s->hidden_size,
                   moeperm_dtype_name(s->dtype), rows, experts, s->hot_percent,
                   moeperm_golden_values_name(s->values), moeperm_golden_routing_name(s->routing),
                   domain, s->seed, name)
             : NULL;
    free(name);
    return command;
}

char *moeperm_golden_suite_command(const moeperm_golden_suite *suite, uint64_t seed)
{
    return golden_strdup_printf("moeperm golden --out ../.. --suite %s --seed %" PRIu64 " --force",
                                suite->name, seed);
}
