// SPDX-License-Identifier: GPL-2.0
/* Small helpers more than one part of npfd needs. */
#include <errno.h>
#include <stdarg.h>
#include <limits.h>
#include <stdio.h>
#include <fcntl.h>
#include <string.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
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

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef PID_FS_MAGIC
#define PID_FS_MAGIC 0x50494446
#endif

/*
 * Before pidfs (Linux 6.9), pidfds share one inode: the start time in
 * /proc/PID/stat (field 22, clock ticks after boot) names the process
 * instead, and there a process stuck in its execve() holds its caller.
 */
__u64 process_start_time(pid_t pid)
{
	char path[64], buf[1024];
	unsigned long long start;
	const char *st;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* the command name may hold anything: the fields go on after its last ')' */
	st = strrchr(buf, ')');
	/* starttime is field 22; the state after ") " is field 3 */
	for (int field = 2; st && field < 22; field++)
		st = strchr(st + 1, ' ');
	if (!st || sscanf(st, " %llu", &start) != 1)
		return 0;
	return start;
}

/*
 * A process is asked through a pidfd, not /proc/PID/stat: the kernel
 * makes that under the process's exec_update_lock, which a process holds
 * as long as its execve() waits, e.g. for a FUSE server that never
 * answers the FLUSH of a close-on-exec file, and npfd's loop would wait
 * with it (found by an adversarial probe). A pidfd is made, polled and
 * stat'ed without that lock.
 */
bool process_alive(pid_t pid)
{
	struct pollfd p = {.events = POLLIN};
	bool alive;

	if (pid <= 0)
		return false;
	p.fd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (p.fd < 0)
		/* ESRCH: gone; else (not a leader, no descriptors): say so by kill(0) */
		return errno != ESRCH && (!kill(pid, 0) || errno == EPERM);
	alive = poll(&p, 1, 0) == 0; /* readable once it has exited (a zombie too) */
	close(p.fd);
	return alive;
}

__u64 process_token(pid_t pid)
{
	struct statfs fs;
	struct stat st;
	__u64 token = 0;
	int fd;

	if (pid <= 0)
		return 0;
	fd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (fd < 0)
		return 0;
	if (!fstatfs(fd, &fs) && fs.f_type == PID_FS_MAGIC && !fstat(fd, &st))
		token = st.st_ino;
	else
		token = process_start_time(pid);
	close(fd);
	return token;
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

int thread_start_detached(void *(*fn)(void *), void *arg, size_t stack_size)
{
	pthread_attr_t attr;
	sigset_t all, old;
	pthread_t th;
	int err;

	pthread_attr_init(&attr);
	if (stack_size)
		pthread_attr_setstacksize(&attr, stack_size);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&th, &attr, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	return err;
}
