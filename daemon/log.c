// SPDX-License-Identifier: GPL-2.0
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>
#include "log.h"

int log_level = LOG_INFO;

/* sd-daemon(3) priorities: err=3, warning=4, info=6, debug=7. */
static const int syslog_prio[] = {3, 4, 6, 7};
static const char *const level_name[] = {"error", "warning", "info", "debug"};

void log_msg(enum log_level level, const char *fmt, ...)
{
	static int tty = -1;
	char line[1024];
	va_list ap;

	if ((int)level > log_level)
		return;
	if (tty < 0)
		tty = isatty(STDERR_FILENO);
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (tty)
		fprintf(stderr, "npfd: %s%s%s\n", level <= LOG_WARN ? level_name[level] : "",
			level <= LOG_WARN ? ": " : "", line);
	else
		fprintf(stderr, "<%d>npfd: %s\n", syslog_prio[level], line);
}
