/*
 * expect.h - the checks every refusal test makes, written once: the
 * status, the executor left NULL, the sentence naming the value, and the
 * outputs' memory as it was (the tests fill it with 0x5a first).  For
 * cmocka tests.
 */
#ifndef MOEPERM_TEST_EXPECT_H
#define MOEPERM_TEST_EXPECT_H

#include <stddef.h>

#include <moeperm/moeperm.h>

/* The byte every test fills its outputs with before a call. */
#define EXPECT_FILL 0x5a

/* Fails the test unless every byte of buf is still EXPECT_FILL. */
void expect_untouched(const void *buf, size_t bytes, const char *what);

/* Fails the test unless a first phase returned `want` with *executor set
 * to NULL and a sentence containing `message`. */
void expect_refusal(moeperm_status status, moeperm_status want, const moeperm_executor *executor,
                    const char *message);

#endif
