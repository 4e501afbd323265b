/* SPDX-License-Identifier: GPL-2.0 */
/* Small helpers more than one part of npfd needs (util.c). */
#ifndef NPFD_UTIL_H
#define NPFD_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <linux/types.h>

/* CLOCK_MONOTONIC in nanoseconds. */
__u64 now_ns(void);
/* mkdir -p: create path and its missing parents; 0 or -errno. */
int mkdir_p(const char *path, mode_t mode);
/* A refused request: its reason into err for the client; returns -code. */
int refuse(char *err, size_t errlen, int code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Does pid still run (not gone, not a zombie)? Never waits on the process. */
bool process_alive(pid_t pid);
/*
 * A name for process pid that no other process gets while the machine
 * runs, not even one reusing its pid: its pidfs inode number (Linux 6.9
 * on; every pidfd of the process has it). 0: gone, or a kernel without
 * pidfs. Never waits on the process.
 */
__u64 process_token(pid_t pid);
/*
 * When pid started (clock ticks after boot, /proc/PID/stat field 22); 0:
 * gone. The kernel reads it under the process's exec_update_lock: it waits
 * as long as the process's execve() does. Not for the loop.
 */
__u64 process_start_time(pid_t pid);

/*
 * A buffer a late system call may still read (mmcall.h: a call on the
 * fault path left to finish alone reads its source when it gets the
 * process's lock): its pages go, and its addresses stay reserved and
 * unreadable, so that the late call finds nothing of anyone else's there.
 */
int buffer_retire(void *p, size_t len); /* 0 or -errno */
/* A fresh buffer of len bytes in place of old, which is retired; old if none can be had. */
void *buffer_renew(void *old, size_t len);

/*
 * Start fn(arg) on a detached thread of stack_size bytes (0: the default)
 * that no signal is delivered to (they are the loop's, by its signalfd):
 * 0 or an error number (pthread_create()'s).
 */
int thread_start_detached(void *(*fn)(void *), void *arg, size_t stack_size);

#endif
