/*
 * ops.c - what the golden library knows about each operator: its tensors
 * in argument order (the one list of a case's file names), the tensors
 * that come together, and a case in memory (its tensors by name, freeing
 * it).  Everything else (reading, writing, computing, comparing) is
 * written once, over these tables.
 */
#include "golden/case/ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const moeperm_golden_slot permute_grad_slots[] = {
    {"permuted_output_grad", MOEPERM_GOLDEN_ROLE_INPUT, false},
    {"sorted_indices", MOEPERM_GOLDEN_ROLE_INPUT, false},
    {"input_grad", MOEPERM_GOLDEN_ROLE_OUTPUT, false},
};

static const moeperm_golden_slot permute_slots[] = {
    {"tokens", MOEPERM_GOLDEN_ROLE_INPUT, false},
    {"indices", MOEPERM_GOLDEN_ROLE_INPUT, false},
    {"permuted_tokens", MOEPERM_GOLDEN_ROLE_OUTPUT, false},
    {"sorted_indices", MOEPERM_GOLDEN_ROLE_OUTPUT, false},
};

static const moeperm_golden_slot unpermute_slots[] = {
    {"permuted_tokens", MOEPERM_GOLDEN_ROLE_INPUT, false},
    {"sorted_indices", MOEPERM_GOLDEN_ROLE_INPUT, false},
    {"probs", MOEPERM_GOLDEN_ROLE_INPUT, true},
    {"unpermuted_tokens", MOEPERM_GOLDEN_ROLE_OUTPUT, false},
};

static const moeperm_golden_slot unpermute_grad_slots[] = {
    {"permuted_tokens", MOEPERM_GOLDEN_ROLE_INPUT, false},
    {"unpermuted_tokens_grad", MOEPERM_GOLDEN_ROLE_INPUT, false},
    {"sorted_indices", MOEPERM_GOLDEN_ROLE_INPUT, false},
    {"probs", MOEPERM_GOLDEN_ROLE_INPUT, true},
    {"permuted_tokens_grad", MOEPERM_GOLDEN_ROLE_OUTPUT, false},
    {"probs_grad", MOEPERM_GOLDEN_ROLE_OUTPUT, true},
    {"probs_grad_exact", MOEPERM_GOLDEN_ROLE_EXACT, true},
};

/* The family, in the order of moeperm_op. */
static const moeperm_op family[] = {MOEPERM_OP_PERMUTE_GRAD, MOEPERM_OP_PERMUTE,
                                    MOEPERM_OP_UNPERMUTE, MOEPERM_OP_UNPERMUTE_GRAD};

const moeperm_golden_slot *moeperm_golden_op_slots(moeperm_op op, size_t *count)
{
    switch (op) {
    case MOEPERM_OP_PERMUTE_GRAD:
        *count = COUNT(permute_grad_slots);
        return permute_grad_slots;
    case MOEPERM_OP_PERMUTE:
        *count = COUNT(permute_slots);
        return permute_slots;
    case MOEPERM_OP_UNPERMUTE:
        *count = COUNT(unpermute_slots);
        return unpermute_slots;
    case MOEPERM_OP_UNPERMUTE_GRAD:
        *count = COUNT(unpermute_grad_slots);
        return unpermute_grad_slots;
    }
    *count = 0;
    return NULL;
}

bool moeperm_golden_case_file_name(const char *name)
{
    if (strcmp(name, "case.json") == 0)
        return true;
    const char *dot = strrchr(name, '.');
    if (!dot || (strcmp(dot, ".bin") != 0 && strcmp(dot, ".npy") != 0))
        return false;
    size_t stem = (size_t)(dot - name);
    for (size_t o = 0; o < COUNT(family); o++) {
        size_t n;
        const moeperm_golden_slot *slots = moeperm_golden_op_slots(family[o], &n);
        for (size_t i = 0; i < n; i++)
            if (strlen(slots[i].name) == stem && strncmp(name, slots[i].name, stem) == 0)
                return true;
    }
    return false;
}

size_t golden_case_file_list(const char *const **names)
{
    /* Every operator's tensor names, .bin and .npy, then case.json: far
     * fewer than the room here.  Built once, by the writer before it
     * installs its signal handlers. */
    static char storage[64][48];
    static const char *list[64];
    static size_t count;
    if (count == 0) {
        size_t n = 0;
        for (size_t o = 0; o < COUNT(family); o++) {
            size_t slots;
            const moeperm_golden_slot *slot = moeperm_golden_op_slots(family[o], &slots);
            for (size_t i = 0; i < slots; i++)
                for (int npy = 0; npy < 2; npy++) {
                    char name[48];
                    snprintf(name, sizeof name, "%s.%s", slot[i].name, npy ? "npy" : "bin");
                    bool seen = false;
                    for (size_t j = 0; j < n && !seen; j++)
                        seen = strcmp(storage[j], name) == 0;
                    if (!seen && n + 1 < COUNT(storage))
                        memcpy(storage[n++], name, sizeof name);
                }
        }
        memcpy(storage[n++], "case.json", sizeof "case.json");
        for (size_t i = 0; i < n; i++)
            list[i] = storage[i];
        count = n;
    }
    *names = list;
    return count;
}

moeperm_golden_tensor *moeperm_golden_case_tensor(moeperm_golden_case *c, const char *name)
{
    for (size_t i = 0; i < c->tensor_count; i++)
        if (strcmp(c->tensors[i].name, name) == 0)
            return &c->tensors[i];
    return NULL;
}

const moeperm_golden_tensor *moeperm_golden_case_tensor_const(const moeperm_golden_case *c, const char *name)
{
    return moeperm_golden_case_tensor((moeperm_golden_case *)c, name);
}

uint64_t moeperm_golden_tensor_elements(const moeperm_golden_tensor *t)
{
    uint64_t n = 1;
    for (uint64_t i = 0; i < t->ndim; i++)
        n *= (uint64_t)t->shape[i];
    return n;
}

moeperm_chip golden_chip_of(const moeperm_golden_attrs *attrs)
{
    moeperm_chip chip = {MOEPERM_CHIP_A2_UB_BYTES, MOEPERM_CHIP_A2_VECTOR_CORES};
    if (attrs->ub_bytes)
        chip.ub_bytes = attrs->ub_bytes;
    if (attrs->vector_cores)
        chip.vector_cores = attrs->vector_cores;
    return chip;
}

int golden_check_optional_tensors(const moeperm_golden_case *c, char *err, size_t err_len,
                                  const char *where)
{
    if (c->op != MOEPERM_OP_UNPERMUTE_GRAD)
        return 0;
    bool probs = moeperm_golden_case_tensor_const(c, "probs") != NULL;
    bool grad = moeperm_golden_case_tensor_const(c, "probs_grad") != NULL;
    bool exact = moeperm_golden_case_tensor_const(c, "probs_grad_exact") != NULL;
    if (probs != grad) {
        snprintf(err, err_len, "%s: tensors.%s is there without tensors.%s: probs and "
                 "probs_grad come together", where, probs ? "probs" : "probs_grad",
                 probs ? "probs_grad" : "probs");
        return -1;
    }
    if (exact && !grad) {
        snprintf(err, err_len, "%s: tensors.probs_grad_exact is there without "
                 "tensors.probs_grad", where);
        return -1;
    }
    return 0;
}

void moeperm_golden_case_free(moeperm_golden_case *c)
{
    if (!c)
        return;
    free(c->dir);
    free(c->manifest_path);
    free(c->name);
    free(c->description);
    free(c->generator);
    free(c->command);
    free(c->recipe.routing);
    free(c->recipe.values);
    free(c->recipe.probs_values);
    for (size_t i = 0; i < c->tensor_count; i++) {
        free(c->tensors[i].file);
        free(c->tensors[i].path);
        free(c->tensors[i].data);
    }
    memset(c, 0, sizeof *c);
}
