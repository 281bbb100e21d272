/* expect.c - see expect.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "expect.h"

void expect_untouched(const void *buf, size_t bytes, const char *what)
{
    for (size_t i = 0; i < bytes; i++)
        if (((const unsigned char *)buf)[i] != EXPECT_FILL)
            fail_msg("%s byte %zu changed on failure", what, i);
}

void expect_refusal(moeperm_status status, moeperm_status want, const moeperm_executor *executor,
                    const char *message)
{
    if (status != want)
        fail_msg("status %d (%s), expected %d (%s), for \"%s\"; message: %s", status,
                 moeperm_status_name(status), want, moeperm_status_name(want), message,
                 moeperm_last_error());
    assert_null(executor);
    if (!strstr(moeperm_last_error(), message))
        fail_msg("message \"%s\" does not contain \"%s\"", moeperm_last_error(), message);
}
