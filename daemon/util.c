// SPDX-License-Identifier: GPL-2.0
/* Small helpers more than one part of npfd needs. */
#include <errno.h>
#include <stdarg.h>
#include <limits.h>
#include <stdio.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
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

/*
 * /proc/PID/stat from its state field on (the command name before it may
 * hold anything, spaces and ')' too), into buf; NULL when pid is gone.
 */
static const char *proc_stat_tail(pid_t pid, char *buf, size_t len)
{
	char path[64], *p;
	ssize_t n;
	int fd;

	if (pid <= 0)
		return NULL;
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n <= 0)
		return NULL;
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p + 2 : NULL;
}

/* Does pid still run (not gone, not a zombie whose mm and threads are gone)? */
bool process_alive(pid_t pid)
{
	char buf[512];
	const char *st = proc_stat_tail(pid, buf, sizeof(buf));

	return st && *st != 'Z' && *st != 'X';
}

__u64 process_start_time(pid_t pid)
{
	char buf[1024];
	const char *st = proc_stat_tail(pid, buf, sizeof(buf));
	unsigned long long start;

	/* starttime is field 22; the tail begins at field 3 (state) */
	for (int field = 3; st && field < 22; field++) {
		st = strchr(st, ' ');
		if (st)
			st++;
	}
	if (!st || sscanf(st, "%llu", &start) != 1)
		return 0;
	return start;
}

int buffer_retire(void *p, size_t len)
{
	return mmap(p, len, PROT_NONE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
		    0) == MAP_FAILED ?
		       -errno :
		       0;
}

void *buffer_renew(void *old, size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return old;
	buffer_retire(old, len);
	return p;
}
