// SPDX-License-Identifier: GPL-2.0
/* Small helpers more than one part of npfd needs. */
#include <errno.h>
#include <stdarg.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>
#include "npfd.h"

/* npfd's state (here, not in main.c, so that the unit tests link without main) */
struct npfd npfd = {
	.clients = LIST_HEAD_INIT(npfd.clients),
	.mms = LIST_HEAD_INIT(npfd.mms),
	.listen_fd = -1,
};

__u64 now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (__u64)ts.tv_sec * 1000000000ULL + (__u64)ts.tv_nsec;
}

/* mkdir -p: create path and its missing parents; 0 or -errno. */
int mkdir_p(const char *path, mode_t mode)
{
	char buf[PATH_MAX];
	char *p;

	snprintf(buf, sizeof(buf), "%s", path);
	for (p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, mode) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, mode) && errno != EEXIST)
		return -errno;
	return 0;
}

/*
 * A refused request: write the reason (what, and where there is one, the
 * fix) into err for the client, and return -code.
 */
int refuse(char *err, size_t errlen, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -code;
}
