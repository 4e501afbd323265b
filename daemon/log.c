// SPDX-License-Identifier: GPL-2.0
#include <stdarg.h>
#include <stdio.h>
#include <time.h>
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

int log_ratelimit_ok(struct log_ratelimit *rl, enum log_level level)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	if (ts.tv_sec - rl->window >= LOG_RL_WINDOW_S) {
		if (rl->suppressed)
			log_msg(level, "(%llu similar lines suppressed in %d s)", rl->suppressed,
				LOG_RL_WINDOW_S);
		rl->window = ts.tv_sec;
		rl->printed = 0;
		rl->suppressed = 0;
	}
	if (rl->printed < LOG_RL_BURST) {
		rl->printed++;
		return 1;
	}
	rl->suppressed++;
	return 0;
}
