/*
 * names.h - the words of the format that golden.h does not show.
 */
#ifndef MOEPERM_GOLDEN_CASE_NAMES_H
#define MOEPERM_GOLDEN_CASE_NAMES_H

#include <stdbool.h>

#include <moeperm/moeperm.h>

/* moeperm_golden_dtype_parse() without the aliases: the names files
 * carry (moeperm_dtype_name()'s). */
bool golden_dtype_parse_canonical(const char *name, moeperm_dtype *dtype);

#endif
