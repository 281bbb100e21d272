/*
 * chip.c - the chip the host runtime presents: its name, which
 * aclrtGetSocName() returns, and the two parameters MoeTokenUnpermuteGrad's
 * probs_grad depends on (the unified-buffer bytes and the vector cores,
 * include/moeperm/moeperm.h).
 *
 * The default is the Atlas A2, libmoeperm's default; MOEPERM_ACLNN_CHIP
 * names another of the chips libmoeperm knows by name
 * (moeperm_chip_by_name(), docs/aclnn-host.md).  The variable is read once,
 * at the first call that needs the chip, so a program sees one chip
 * throughout.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* An Atlas A2 part whose parameters are libmoeperm's defaults (196352 UB
 * bytes, 48 vector cores, MOEPERM_CHIP_ASCEND910B2). */
#define DEFAULT_CHIP_NAME "Ascend910B2"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static host_chip chip;
static bool chip_known;
static char why_unknown[512];
static char name_buffer[64];

static void resolve(void)
{
    const char *name = getenv("MOEPERM_ACLNN_CHIP");
    /* Empty counts as unset, as `export MOEPERM_ACLNN_CHIP=` clears it. */
    if (name == NULL || *name == '\0')
        name = DEFAULT_CHIP_NAME;
    if (strlen(name) >= sizeof name_buffer ||
        moeperm_chip_by_name(name, &chip.chip) != MOEPERM_SUCCESS) {
        snprintf(why_unknown, sizeof why_unknown,
                 "MOEPERM_ACLNN_CHIP=%.64s%s names no chip moeperm knows (it knows %s)", name,
                 strlen(name) > 64 ? "..." : "", moeperm_chip_names());
        return;
    }
    strcpy(name_buffer, name);
    chip.name = name_buffer;
    chip_known = true;
}

const host_chip *host_chip_get(const char **why)
{
    pthread_once(&once, resolve);
    if (!chip_known && why != NULL)
        *why = why_unknown;
    return chip_known ? &chip : NULL;
}

const char *aclrtGetSocName(void)
{
    const char *why = NULL;
    const host_chip *c = host_chip_get(&why);
    if (c == NULL) {
        host_error("aclrtGetSocName: %s", why);
        return NULL;
    }
    return c->name;
}
