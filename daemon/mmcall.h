/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Calls into a client's address space (mmcall.c), made on a thread of
 * npfd's own and waited for at most mm-call-timeout-ms.
 *
 * Some calls take a client's mmap_lock or fault its pages in:
 * UFFDIO_REGISTER, UFFDIO_UNREGISTER and UFFDIO_WRITEPROTECT, PAGEMAP_SCAN,
 * reads of its /proc/PID/maps, smaps, pagemap and mem. Others take its
 * exec_update_lock: pidfd_getfd(), opens of /proc/PID/mem, maps, exe,
 * ns/... How long they take is the client's to decide: one of its threads
 * holds its mmap_lock while a FUSE server it runs does not answer, or it
 * maps such a file over a page npfd is about to read, or its execve()
 * waits for such a server to answer the FLUSH of a close-on-exec file.
 * Made on the event loop, they held every client.
 *
 * A call that misses its deadline fails with ETIMEDOUT and is left to its
 * thread (nothing can cancel it in the kernel); its process is stuck until
 * the call returns. Meanwhile every call for that process, or for a
 * process of a user with MMCALL_STUCK_PER_UID stuck processes, fails at
 * once (ETIMEDOUT) without waiting, and mmcall_refuses() says so: the
 * loop gives that process's address spaces up as if npfd had stopped for
 * it alone, and refuses its connections (control.c).
 *
 * Every buffer a call reads into or writes from is a copy of the call's
 * own: a late call never touches the caller's memory.
 */
#ifndef NPFD_MMCALL_H
#define NPFD_MMCALL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>
#include <linux/types.h>

/* Stuck processes of one user past which all of its processes are refused. */
#define MMCALL_STUCK_PER_UID 2
#define MMCALL_DEFAULT_TIMEOUT_MS 500

void mmcall_set_timeout_ms(unsigned int ms);

/* open(path, flags | O_CLOEXEC) for process tgid: a descriptor or -1 (errno). */
int mmcall_open(pid_t tgid, const char *path, int flags);
/*
 * pidfd_getfd(pidfd, fd) of process tgid (pidfd names it): a descriptor
 * (close-on-exec) or -1 (errno). The kernel takes the process's
 * exec_update_lock, held as long as its execve() waits.
 */
int mmcall_getfd(pid_t tgid, int pidfd, int fd);
ssize_t mmcall_pread(pid_t tgid, int fd, void *buf, size_t len, off_t off);
ssize_t mmcall_pwrite(pid_t tgid, int fd, const void *buf, size_t len, off_t off);
/* One pread of fd: len bytes at off into dst; what it returned (got), errno if < 0. */
struct mmcall_read {
	__u64 off;
	size_t len;
	void *dst;
	ssize_t got;
	int err;
};
/*
 * n reads in one call (one hand-over for many pages): 0, each read's
 * result in it; -1 (errno) if none could be made or they missed the deadline.
 */
int mmcall_preadv(pid_t tgid, int fd, struct mmcall_read *rd, unsigned int n);
/* ioctl(fd, req, arg) with arg a struct of argsz bytes (copied in and back out). */
long mmcall_ioctl(pid_t tgid, int fd, unsigned long req, void *arg, size_t argsz);
/*
 * UFFDIO_REGISTER of reg->range through uffd: a registration that misses
 * its deadline is undone if it comes through later (the caller told its
 * client it failed).
 */
struct uffdio_register;
int mmcall_register(pid_t tgid, int uffd, struct uffdio_register *reg);
/*
 * UFFDIO_UNREGISTER of start+len through uffd, for tgid: made now, or,
 * while tgid is refused (stuck), made before any other call for it once
 * it is served again (mmcall_refuses() makes it first): a range npfd told
 * its client it did not register, or has let go, must not stay registered
 * behind its back. 0 (made, or to be made), or -1 (errno).
 */
int mmcall_unregister(pid_t tgid, int uffd, __u64 start, __u64 len);
/* Make the waiting unregistrations of processes served again; forget those of processes gone. */
void mmcall_unregister_flush(void);
/*
 * The same as mmcall_ioctl(), for an ioctl whose arg holds at byte out_ptr an address of an
 * output buffer of out_len bytes (PAGEMAP_SCAN's vec).
 */
long mmcall_ioctl_out(pid_t tgid, int fd, unsigned long req, void *arg, size_t argsz,
		      size_t out_ptr, size_t out_len);
/*
 * fn(fd, arg) made on the worker for tgid, for a call that may meet tgid's
 * locks (or another process's) in ways the ones above do not cover: fd
 * is the job's own duplicate of the caller's (-1: none), arg a copy of
 * argsz bytes (at most 128), copied back when fn returns in time. Late,
 * late(arg, ret) runs after it on the worker, to undo what it made
 * (nobody else will). fn's return, errno as fn left it; -1 (ETIMEDOUT)
 * if late or tgid is refused.
 */
long mmcall_run(pid_t tgid, int fd, long (*fn)(int fd, void *arg),
		void (*late)(void *arg, long ret), void *arg, size_t argsz);
/*
 * close(fd), fd a descriptor of a file tgid chose: one it passed, or one
 * npfd opened of its executable or libraries. A file on FUSE sends its
 * server a FLUSH at every close, and the close waits for the answer,
 * uninterruptibly: so it is made on the worker, with the deadline (late,
 * tgid is stuck until it returns), even while tgid is refused. A memfd is
 * closed at once.
 */
void mmcall_close(pid_t tgid, int fd);
/* path read whole for tgid (a /proc text file), as a stream to parse; NULL (errno). */
FILE *mmcall_fopen(pid_t tgid, const char *path);

/*
 * Calls the loop makes itself, on the fault path, where a hand-over costs
 * too much (a NIC fault 4-10 times its time): -1 (ETIMEDOUT) at once if
 * tgid is refused. If one misses the deadline, a watchdog thread gives
 * tgid up and runs the loop from then on (mmcall_watch()'s take_over);
 * the thread that made the call exits when it returns, and nothing after
 * the call runs on it: what its caller left half done must be what giving
 * tgid up and running the loop again from its top puts right.
 */
long mmcall_ioctl_now(pid_t tgid, int fd, unsigned long req, void *arg);
ssize_t mmcall_pread_now(pid_t tgid, int fd, void *buf, size_t len, off_t off);
/*
 * Start the watchdog of calls on the fault path; take_over() runs the loop
 * on the watchdog's thread once it has taken a late call (it must not
 * return). 0 or -errno (no watchdog: such calls are not watched).
 */
int mmcall_watch(void (*take_over)(void));

/*
 * Did a call for tgid fail (late, or refused) since mmcall_failed_forget()?
 * Its process is given up even if the call has returned since.
 */
bool mmcall_failed(pid_t tgid);
void mmcall_failed_forget(void);
/* Are tgid's calls refused (it, or enough of its user's processes, stuck)? */
bool mmcall_refuses(pid_t tgid);
/*
 * Has a call missed its deadline, or been refused, since *seen (updated)?
 * The loop's cue to give up the processes mmcall_refuses().
 */
bool mmcall_failed_since(__u64 *seen);
/* Calls that missed their deadline since npfd started. */
__u64 mmcall_late(void);

#endif
