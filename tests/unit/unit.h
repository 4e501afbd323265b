/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The unit tests' checks (tests/unit/NAME.c, see the Makefile): pure code
 * called directly, no root, no npfd. A check that fails prints where and
 * why and the unit goes on, so one run shows every failure; ut_done()
 * gives the exit code (0 pass, 1 fail). harness.h brings the line-buffered
 * stdout and the alarm every test has.
 */
#ifndef NPF_UNIT_H
#define NPF_UNIT_H

#include "../harness.h"

static int ut_checks, ut_failed;

#define UT_CHECK(cond, ...)                                                                        \
	do {                                                                                       \
		ut_checks++;                                                                       \
		if (!(cond)) {                                                                     \
			ut_failed++;                                                               \
			printf("FAIL %s:%d: ", __FILE__, __LINE__);                                \
			printf(__VA_ARGS__);                                                       \
			printf("\n");                                                              \
		}                                                                                  \
	} while (0)

/* Unsigned values compared, both shown when they differ. */
#define UT_EQ(got, want, what)                                                                     \
	UT_CHECK((unsigned long long)(got) == (unsigned long long)(want),                          \
		 "%s: got %llu, want %llu", what, (unsigned long long)(got),                       \
		 (unsigned long long)(want))

#define UT_STREQ(got, want, what)                                                                  \
	UT_CHECK(!strcmp((got), (want)), "%s: got '%s', want '%s'", what, (got), (want))

/* Does text contain part? */
#define UT_HAS(text, part, what)                                                                   \
	UT_CHECK(strstr((text), (part)) != NULL, "%s: '%s' does not contain '%s'", what, (text),   \
		 (part))

static inline int ut_done(const char *what)
{
	if (ut_failed) {
		printf("FAIL: %d of %d checks failed (%s)\n", ut_failed, ut_checks, what);
		return 1;
	}
	printf("PASS: %d checks: %s\n", ut_checks, what);
	return 0;
}

#endif
