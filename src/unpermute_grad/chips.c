/*
 * unpermute_grad/chips.c - the named Atlas A2/A3 chips of moeperm.h and
 * the lookup by name.  The numbers are the header's macros, which say
 * where each comes from.
 */
#include <string.h>

#include "core/internal.h"

static const struct named_chip {
    const char *name;
    moeperm_chip chip;
} chips[] = {
    {"Ascend910B1", MOEPERM_CHIP_ASCEND910B1},
    {"Ascend910B2", MOEPERM_CHIP_ASCEND910B2},
    {"Ascend910B2C", MOEPERM_CHIP_ASCEND910B2C},
    {"Ascend910B3", MOEPERM_CHIP_ASCEND910B3},
    {"Ascend910B4", MOEPERM_CHIP_ASCEND910B4},
    {"Ascend910B4-1", MOEPERM_CHIP_ASCEND910B4_1},
    {"Ascend910_9362", MOEPERM_CHIP_ASCEND910_9362},
    {"Ascend910_9363", MOEPERM_CHIP_ASCEND910_9363},
    {"Ascend910_9372", MOEPERM_CHIP_ASCEND910_9372},
    {"Ascend910_9381", MOEPERM_CHIP_ASCEND910_9381},
    {"Ascend910_9382", MOEPERM_CHIP_ASCEND910_9382},
    {"Ascend910_9391", MOEPERM_CHIP_ASCEND910_9391},
    {"Ascend910_9392", MOEPERM_CHIP_ASCEND910_9392},
};

const char *moeperm_chip_names(void)
{
    return "Ascend910B1 Ascend910B2 Ascend910B2C Ascend910B3 Ascend910B4 Ascend910B4-1 "
           "Ascend910_9362 Ascend910_9363 Ascend910_9372 Ascend910_9381 Ascend910_9382 "
           "Ascend910_9391 Ascend910_9392";
}

moeperm_status moeperm_chip_by_name(const char *name, moeperm_chip *chip)
{
    if (!name)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR, "name is NULL");
    if (!chip)
        return moeperm_fail(MOEPERM_ERR_PARAM_NULLPTR, "chip is NULL");
    for (size_t i = 0; i < sizeof chips / sizeof *chips; i++)
        if (strcmp(name, chips[i].name) == 0) {
            *chip = chips[i].chip;
            return MOEPERM_SUCCESS;
        }
    return moeperm_fail(MOEPERM_ERR_PARAM_INVALID, "chip \"%.64s\" is not one of %s", name,
                        moeperm_chip_names());
}
