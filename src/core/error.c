/*
 * error.c - status names, the thread-local last-error sentence and the
 * version string: the small things every other file reports through.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/internal.h"

static _Thread_local char last_error[512];

moeperm_status moeperm_fail(moeperm_status status, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vsnprintf(last_error, sizeof last_error, format, args);
    va_end(args);
    return status;
}

static void say_with(const char *lead, const char *format, va_list args)
{
    size_t used = strlen(lead);
    memcpy(last_error, lead, used + 1);
    vsnprintf(last_error + used, sizeof last_error - used, format, args);
}

moeperm_status moeperm_refuse(moeperm_status status, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    say_with("the device refuses ", format, args);
    va_end(args);
    return status;
}

moeperm_status moeperm_undetermined(const char *format, ...)
{
    va_list args;
    va_start(args, format);
    say_with("the device's result is undetermined: ", format, args);
    va_end(args);
    return MOEPERM_ERR_PARAM_INVALID;
}

const char *moeperm_last_error(void)
{
    return last_error;
}

const char *moeperm_status_name(moeperm_status status)
{
    switch (status) {
    case MOEPERM_SUCCESS:
        return "MOEPERM_SUCCESS";
    case MOEPERM_ERR_PARAM_NULLPTR:
        return "MOEPERM_ERR_PARAM_NULLPTR";
    case MOEPERM_ERR_PARAM_INVALID:
        return "MOEPERM_ERR_PARAM_INVALID";
    case MOEPERM_ERR_RUNTIME_ERROR:
        return "MOEPERM_ERR_RUNTIME_ERROR";
    case MOEPERM_ERR_INNER:
        return "MOEPERM_ERR_INNER";
    case MOEPERM_ERR_INNER_TILING_ERROR:
        return "MOEPERM_ERR_INNER_TILING_ERROR";
    default:
        return "MOEPERM_UNKNOWN_STATUS";
    }
}

const char *moeperm_version(void)
{
    return MOEPERM_VERSION_STRING;
}

size_t moeperm_dtype_size(moeperm_dtype dtype)
{
    switch (dtype) {
    case MOEPERM_INT64:
    case MOEPERM_FLOAT64:
        return 8;
    case MOEPERM_FLOAT:
    case MOEPERM_INT32:
        return 4;
    case MOEPERM_FLOAT16:
    case MOEPERM_BF16:
        return 2;
    case MOEPERM_INT8:
        return 1;
    default:
        return 0;
    }
}

const char *moeperm_dtype_name(moeperm_dtype dtype)
{
    switch (dtype) {
    case MOEPERM_FLOAT:
        return "float32";
    case MOEPERM_FLOAT16:
        return "float16";
    case MOEPERM_BF16:
        return "bf16";
    case MOEPERM_INT32:
        return "int32";
    case MOEPERM_INT64:
        return "int64";
    case MOEPERM_INT8:
        return "int8";
    case MOEPERM_FLOAT64:
        return "float64";
    default:
        return "unknown";
    }
}

static const char *const op_names[] = {
    [MOEPERM_OP_PERMUTE_GRAD] = "MoeTokenPermuteGrad",
    [MOEPERM_OP_PERMUTE] = "MoeTokenPermute",
    [MOEPERM_OP_UNPERMUTE] = "MoeTokenUnpermute",
    [MOEPERM_OP_UNPERMUTE_GRAD] = "MoeTokenUnpermuteGrad",
};

const char *moeperm_op_name(moeperm_op op)
{
    if ((int)op < 1 || (size_t)op >= sizeof op_names / sizeof op_names[0])
        return NULL;
    return op_names[op];
}

moeperm_op moeperm_op_parse(const char *name)
{
    for (size_t i = 1; name && i < sizeof op_names / sizeof op_names[0]; i++)
        if (strcmp(name, op_names[i]) == 0)
            return (moeperm_op)i;
    return (moeperm_op)0;
}
