/* SPDX-License-Identifier: GPL-2.0 */
#ifndef NPFD_LOG_H
#define NPFD_LOG_H

enum log_level { LOG_ERR = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3 };

extern int log_level;

/* One line to stderr with a journal-friendly <N> priority prefix when not a tty. */
void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * Lines a client can cause (a bad request, a fault that cannot be served)
 * go through a per-call-site limit, so that a hostile or broken client
 * cannot fill the journal and slow npfd down: LOG_RL_BURST lines per
 * LOG_RL_WINDOW_S seconds, then one line saying how many were suppressed.
 */
#define LOG_RL_BURST 10
#define LOG_RL_WINDOW_S 5

struct log_ratelimit {
	long long window;	       /* start of the current window (s, CLOCK_MONOTONIC) */
	unsigned int printed;	       /* lines printed in it */
	unsigned long long suppressed; /* lines dropped in it */
};

/* May this call site print now? Reports what it suppressed when a new window starts. */
int log_ratelimit_ok(struct log_ratelimit *rl, enum log_level level);

#define log_rl(level, ...)                                                                         \
	do {                                                                                       \
		static struct log_ratelimit rl_;                                                   \
		if ((int)(level) <= log_level && log_ratelimit_ok(&rl_, level))                    \
			log_msg(level, __VA_ARGS__);                                               \
	} while (0)
#define pr_warn_rl(...) log_rl(LOG_WARN, __VA_ARGS__)
#define pr_info_rl(...) log_rl(LOG_INFO, __VA_ARGS__)

#define pr_err(...) log_msg(LOG_ERR, __VA_ARGS__)
#define pr_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define pr_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define pr_debug(...)                                                                              \
	do {                                                                                       \
		if (log_level >= LOG_DEBUG)                                                        \
			log_msg(LOG_DEBUG, __VA_ARGS__);                                           \
	} while (0)

#endif
