/*
 * names.c - the words of the format and of the command line, each list
 * written once: tensor roles, dtypes (the manifest's names are libmoeperm's,
 * the aliases are what people type), and the operators' short names.
 */
#include "golden/case/names.h"

#include <stddef.h>
#include <string.h>

#include <moeperm/golden.h>

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

const char *moeperm_golden_role_name(moeperm_golden_role role)
{
    switch (role) {
    case MOEPERM_GOLDEN_ROLE_INPUT:
        return "input";
    case MOEPERM_GOLDEN_ROLE_OUTPUT:
        return "output";
    case MOEPERM_GOLDEN_ROLE_EXACT:
        return "exact";
    }
    return "unknown";
}

bool golden_dtype_parse_canonical(const char *name, moeperm_dtype *dtype)
{
    static const moeperm_dtype known[] = {MOEPERM_FLOAT, MOEPERM_FLOAT16, MOEPERM_BF16,
                                          MOEPERM_INT8,  MOEPERM_INT32,   MOEPERM_INT64,
                                          MOEPERM_FLOAT64};
    for (size_t i = 0; i < COUNT(known); i++) {
        if (strcmp(name, moeperm_dtype_name(known[i])) == 0) {
            *dtype = known[i];
            return true;
        }
    }
    return false;
}

bool moeperm_golden_dtype_parse(const char *name, moeperm_dtype *dtype)
{
    static const struct {
        const char *alias;
        moeperm_dtype dtype;
    } aliases[] = {{"fp32", MOEPERM_FLOAT}, {"fp16", MOEPERM_FLOAT16},
                   {"bfloat16", MOEPERM_BF16}, {"fp64", MOEPERM_FLOAT64}};
    for (size_t i = 0; i < COUNT(aliases); i++)
        if (strcmp(name, aliases[i].alias) == 0) {
            *dtype = aliases[i].dtype;
            return true;
        }
    return golden_dtype_parse_canonical(name, dtype);
}

/* The operators as the command line and Python name them for short. */
static const struct {
    const char *name;
    moeperm_op op;
} short_names[] = {{"permute-grad", MOEPERM_OP_PERMUTE_GRAD},
                   {"permute", MOEPERM_OP_PERMUTE},
                   {"unpermute", MOEPERM_OP_UNPERMUTE},
                   {"unpermute-grad", MOEPERM_OP_UNPERMUTE_GRAD}};

const char *moeperm_golden_op_short_name(moeperm_op op)
{
    for (size_t i = 0; i < COUNT(short_names); i++)
        if (short_names[i].op == op)
            return short_names[i].name;
    return NULL;
}

moeperm_op moeperm_golden_op_parse(const char *name)
{
    for (size_t i = 0; i < COUNT(short_names); i++)
        if (strcmp(name, short_names[i].name) == 0)
            return short_names[i].op;
    return moeperm_op_parse(name);
}
