/* SPDX-License-Identifier: GPL-2.0 */
#ifndef NPFD_LOG_H
#define NPFD_LOG_H

enum log_level { LOG_ERR = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3 };

extern int log_level;

/* One line to stderr with a journal-friendly <N> priority prefix when not a tty. */
void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define pr_err(...) log_msg(LOG_ERR, __VA_ARGS__)
#define pr_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define pr_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define pr_debug(...)                                                                              \
	do {                                                                                       \
		if (log_level >= LOG_DEBUG)                                                        \
			log_msg(LOG_DEBUG, __VA_ARGS__);                                           \
	} while (0)

#endif
