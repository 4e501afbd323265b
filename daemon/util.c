// SPDX-License-Identifier: GPL-2.0
/* Small helpers more than one part of npfd needs. */
#include <errno.h>
#include <stdarg.h>
#include <limits.h>
#include <stdio.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "util.h"

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

__u64 now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (__u64)ts.tv_sec * 1000000000ULL + (__u64)ts.tv_nsec;
}

/* Does pid still run (not gone, not a zombie whose mm and threads are gone)? */
bool process_alive(pid_t pid)
{
	char path[64], buf[256], *p;
	ssize_t n;
	int fd;

	if (pid <= 0)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	p = strrchr(buf, ')'); /* the command name may hold anything */
	return p && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
}
