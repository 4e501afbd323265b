// SPDX-License-Identifier: GPL-2.0
/*
 * The verifier's log, cut to what a user needs (policy.c): moved out of
 * policy.c unchanged so that tests/unit/verifier_log.c can call it.
 */
#include <stdio.h>
#include <string.h>
#include "verifier_log.h"

/*
 * The verifier's reason: its log ends with the offending instruction, the
 * error line, and a statistics line ("processed N insns ..."); keep the
 * two lines before the statistics, which say what was wrong and where.
 */
void verifier_tail(char *log, char *err, size_t errlen)
{
	char *end = log + strlen(log), *p, *stats;
	int lines = 0;

	while (end > log && end[-1] == '\n')
		*--end = '\0';
	stats = strstr(log, "\nprocessed ");
	if (stats)
		*stats = '\0';
	for (p = log + strlen(log); p > log; p--)
		if (p[-1] == '\n' && ++lines == 2)
			break;
	snprintf(err + strlen(err), errlen - strlen(err), ": verifier: %s", p);
	for (p = err; *p; p++)
		if (*p == '\n')
			*p = ' ';
}
