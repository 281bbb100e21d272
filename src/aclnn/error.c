/*
 * error.c - aclGetRecentErrMsg(): the last failure's sentence, per thread.
 *
 * The vendor's runtime keeps the message in a thread-local string and
 * clears it when it is read; only the pointer of the latest read is valid.
 * Two buffers give the same contract: failures write the pending one, a
 * read moves it to the returned one and clears the pending one.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

#define MESSAGE_BYTES 1024

static _Thread_local char pending[MESSAGE_BYTES];
static _Thread_local char returned[MESSAGE_BYTES];

void host_error(const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    vsnprintf(pending, sizeof pending, format, ap);
    va_end(ap);
}

const char *aclGetRecentErrMsg(void)
{
    if (pending[0] == '\0')
        return NULL;
    memcpy(returned, pending, sizeof returned);
    pending[0] = '\0';
    return returned;
}
