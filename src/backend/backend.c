/*
 * backend.c - the registry of backends, so the command line picks one by
 * the name a user types (--backend cpu|npu) and nothing else in the tools
 * needs to know which backends exist.
 */
#include "backend/backend.h"

#include <string.h>

static const backend_ops *const backends[] = {&backend_cpu, &backend_npu};

const backend_ops *backend_find(const char *name)
{
    if (!name)
        return NULL;
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++)
        if (strcmp(backends[i]->name, name) == 0)
            return backends[i];
    return NULL;
}

const char *backend_names(void)
{
    return "cpu, npu";
}
