// SPDX-License-Identifier: GPL-2.0
/*
 * Calls into a client's address space on a thread of npfd's own, with a
 * deadline (mmcall.h says why).
 *
 * One worker thread at a time serves the loop. The loop hands it a job and
 * waits for it, spinning a little first (a call is a few microseconds; a
 * sleeping thread's wake-up costs ~15 µs here), then on a futex until the
 * deadline. A worker whose job misses it is abandoned: it finishes that
 * job alone, marks it finished and exits, and the next call starts a new
 * worker. The loop keeps the abandoned job (its process is stuck while it
 * runs) and frees it once it has finished.
 *
 * The job owns everything the worker touches: the ioctl's argument, the
 * bounce buffer reads land in and writes come from, the path. A late call
 * writes only there, never into the caller's memory, which by then holds
 * something else (another client's pages).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/futex.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include "list.h"
#include "log.h"
#include "mmcall.h"
#include "util.h"

#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

#define SPIN_NS 20000ULL /* the loop's and an idle worker's spin before sleeping */
#define WORKER_STACK                                                                               \
	(256 * 1024)	 /* a system call, a read loop, or libbpf's uprobe attach (its ELF reads) */
#define ARG_MAX_SIZE 128 /* the largest ioctl argument (pm_scan_arg: 96) */

/* OP_INLINE: a call the loop made itself (mmcall_inline_begin()), abandoned with its thread */
enum op {
	OP_OPEN,
	OP_GETFD,
	OP_PREAD,
	OP_PWRITE,
	OP_IOCTL,
	OP_SLURP,
	OP_PREADV,
	OP_RUN,
	OP_CLOSE,
	OP_INLINE
};
/*
 * POSTED -> RUNNING (the worker) -> DONE; or, past the deadline, POSTED or
 * RUNNING -> ABANDONED (the loop) -> FINISHED_LATE (the worker). A job
 * abandoned before it ran is never run: its descriptor numbers may name
 * other files by then (the loop closes a given-up process's).
 */
enum state { J_POSTED, J_RUNNING, J_DONE, J_ABANDONED, J_FINISHED_LATE };

struct job {
	_Atomic __u32 state; /* enum state; the futex the loop waits on */
	enum op op;
	/*
	 * fd: the job's own duplicate of the caller's descriptor, closed with
	 * the job (a late call still makes its system call on it: the
	 * caller's may be closed and its number reused by then); OP_GETFD:
	 * the pidfd, flags the number to fetch
	 */
	int fd, flags;
	unsigned long req;
	off_t off;
	size_t len;	/* of buf (OP_SLURP: what was read) */
	size_t out_ptr; /* OP_IOCTL: offset in arg of the output buffer's address, or SIZE_MAX */
	void *buf;	/* the bounce buffer (malloc), or NULL */
	char path[64];	/* OP_OPEN, OP_SLURP */
	struct mmcall_read *rd; /* OP_PREADV: a copy of the reads, dst an offset in buf */
	unsigned int nrd;
	__u64 arg[ARG_MAX_SIZE / 8];
	long ret;
	int err;
	/* a registration npfd gave up waiting for is undone if it comes through late */
	bool undo_register;
	/* OP_RUN: fn(fd, arg) made, and late(arg, ret) after it if it was late */
	long (*fn)(int fd, void *arg);
	void (*late)(void *arg, long ret);
	/* once abandoned (the loop's): whose process is stuck */
	struct list_head node;
	pid_t tgid;
	uid_t uid;
	int pidfd;
};

struct worker {
	_Atomic __u32 seq;	 /* bumped by the loop with each job: the worker's futex */
	_Atomic __u32 sleeping;	 /* the worker waits on seq: wake it */
	struct job *_Atomic job; /* the job handed over, taken by the worker */
};

static struct worker *current; /* serving the loop, or NULL (started at the next call) */
static _Atomic __u64 timeout_ns =
	MMCALL_DEFAULT_TIMEOUT_MS * 1000000ULL;	       /* the watchdog reads it */
static struct list_head stuck = LIST_HEAD_INIT(stuck); /* abandoned jobs */
static __u64 late;
static __u64 failures; /* calls late or refused */
/* whose calls failed since the loop last gave processes up (mmcall_failed()) */
static pid_t failed_tgids[64];
static unsigned int nfailed_tgids;

static long futex(_Atomic __u32 *uaddr, int op, __u32 val, const struct timespec *ts)
{
	return syscall(SYS_futex, uaddr, op, val, ts, NULL, 0);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

void mmcall_set_timeout_ms(unsigned int ms)
{
	timeout_ns = (__u64)ms * 1000000ULL;
}

__u64 mmcall_late(void)
{
	return late;
}

/*
 * The job's own descriptor, closed by the worker: a descriptor of a file
 * on FUSE sends its server a FLUSH at every close(), a request it may
 * never answer and nothing interrupts (measured on 6.18), and a client
 * chooses the files npfd holds descriptors of (its executable, what it
 * passes). A registration's userfaultfd is kept for its undo.
 */
static void job_fd_close(struct job *j)
{
	if (j->fd >= 0 && !j->undo_register) {
		close(j->fd);
		j->fd = -1;
	}
}

/* What the worker does: the system call, into and out of the job's own memory. */
static void run(struct job *j)
{
	errno = 0;
	switch (j->op) {
	case OP_OPEN:
		j->ret = open(j->path, j->flags | O_CLOEXEC);
		break;
	case OP_GETFD:
		j->ret = syscall(SYS_pidfd_getfd, j->fd, j->flags, 0);
		if (j->ret >= 0)
			fcntl((int)j->ret, F_SETFD, FD_CLOEXEC);
		break;
	case OP_PREAD:
		do
			j->ret = pread(j->fd, j->buf, j->len, j->off);
		while (j->ret < 0 && errno == EINTR);
		break;
	case OP_PWRITE:
		do
			j->ret = pwrite(j->fd, j->buf, j->len, j->off);
		while (j->ret < 0 && errno == EINTR);
		break;
	case OP_IOCTL:
		if (j->out_ptr != SIZE_MAX)
			memcpy((char *)j->arg + j->out_ptr, &(__u64){(uintptr_t)j->buf}, 8);
		j->ret = ioctl(j->fd, j->req, j->arg);
		break;
	case OP_RUN:
		j->ret = j->fn(j->fd, j->arg);
		break;
	case OP_CLOSE: /* job_fd_close() closes it */
		j->ret = 0;
		break;
	case OP_INLINE: /* never a worker's */
		break;
	case OP_PREADV:
		for (unsigned int i = 0; i < j->nrd; i++) {
			struct mmcall_read *rd = &j->rd[i];

			/* abandoned: the rest not read (the descriptor may be another's by now) */
			if (atomic_load(&j->state) == J_ABANDONED) {
				rd->got = -1;
				rd->err = ETIMEDOUT;
				continue;
			}
			do
				rd->got = pread(j->fd, (char *)j->buf + (uintptr_t)rd->dst, rd->len,
						(off_t)rd->off);
			while (rd->got < 0 && errno == EINTR);
			rd->err = rd->got < 0 ? errno : 0;
		}
		j->ret = 0;
		break;
	case OP_SLURP: {
		int fd = open(j->path, O_RDONLY | O_CLOEXEC);
		size_t cap = 0;
		ssize_t n = 0;

		j->len = 0;
		j->ret = -1;
		if (fd < 0)
			break;
		for (;;) {
			if (cap - j->len < 4096) {
				void *p = realloc(j->buf, cap ? cap * 2 : 65536);

				if (!p) {
					n = -1;
					break;
				}
				j->buf = p;
				cap = cap ? cap * 2 : 65536;
			}
			n = read(fd, (char *)j->buf + j->len, cap - j->len - 1);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			j->len += (size_t)n;
		}
		if (n == 0) {
			((char *)j->buf)[j->len] = '\0';
			j->ret = 0;
		}
		{
			int e = errno;

			close(fd);
			errno = e;
		}
		break;
	}
	}
	j->err = errno;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	__u32 seen = 0;

	for (;;) {
		struct job *j;
		__u64 spin_until = now_ns() + SPIN_NS;
		__u32 expect = J_POSTED;
		bool ran;

		while (atomic_load(&w->seq) == seen && now_ns() < spin_until)
			cpu_relax();
		while (atomic_load(&w->seq) == seen) {
			atomic_store(&w->sleeping, 1);
			if (atomic_load(&w->seq) == seen)
				futex(&w->seq, FUTEX_WAIT_PRIVATE, seen, NULL);
			atomic_store(&w->sleeping, 0);
		}
		seen = atomic_load(&w->seq);
		j = atomic_exchange(&w->job, NULL);
		if (!j)
			continue;
		ran = atomic_compare_exchange_strong(&j->state, &expect, J_RUNNING);
		if (ran) {
			run(j);
			job_fd_close(j);
			expect = J_RUNNING;
			if (atomic_compare_exchange_strong(&j->state, &expect, J_DONE)) {
				futex(&j->state, FUTEX_WAKE_PRIVATE, 1, NULL);
				continue;
			}
		}
		/*
		 * Abandoned: the loop has gone on, and this worker is no
		 * longer its. A descriptor opened late is nobody's; a
		 * registration that came through late is undone (through fd,
		 * the userfaultfd's duplicate taken when it was posted).
		 */
		if (ran && (j->op == OP_OPEN || j->op == OP_GETFD) && j->ret >= 0)
			close((int)j->ret);
		if (j->op == OP_RUN && j->late)
			j->late(j->arg, ran ? j->ret : -1); /* -1: never ran */
		if (ran && j->undo_register && !j->ret) {
			struct uffdio_register *reg = (void *)j->arg;

			ioctl(j->fd, UFFDIO_UNREGISTER, &reg->range);
		}
		j->undo_register = false;
		job_fd_close(j);
		atomic_store(&j->state, J_FINISHED_LATE);
		free(w);
		return NULL;
	}
}

static struct worker *worker_get(void)
{
	struct worker *w;
	int err;

	if (current)
		return current;
	w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	err = thread_start_detached(worker_main, w, WORKER_STACK);
	if (err) {
		pr_warn_rl("cannot start a thread for calls into client address spaces: %s",
			   strerror(err));
		free(w);
		errno = err;
		return NULL;
	}
	current = w;
	return w;
}

static void job_free(struct job *j);

/* Free the abandoned jobs that have finished: their processes are no longer stuck. */
static void cap_recompute(void);

static void stuck_reap(void)
{
	struct job *j, *tmp;
	bool reaped = false;

	list_for_each_entry_safe(j, tmp, &stuck, node)
		if (atomic_load(&j->state) == J_FINISHED_LATE) {
			if (j->tgid > 0)
				pr_info("pid %d: its late call into its address space has returned",
					j->tgid);
			list_del_init(&j->node);
			if (j->pidfd >= 0)
				close(j->pidfd);
			job_free(j);
			reaped = true;
		}
	if (reaped)
		cap_recompute();
}

static bool job_process_alive(const struct job *j)
{
	struct pollfd p = {.fd = j->pidfd, .events = POLLIN};

	/* no pidfd (the process had gone when the call was abandoned): nobody to refuse */
	return j->pidfd >= 0 && poll(&p, 1, 0) == 0;
}

/*
 * The real uid of tgid, from /proc/PID/status (not the owner of /proc/PID:
 * root's for a process that made itself non-dumpable).
 */
static bool uid_of(pid_t tgid, uid_t *uid)
{
	char path[32], buf[2048], *p;
	unsigned int u;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/status", tgid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	p = strstr(buf, "\nUid:");
	if (!p || sscanf(p + 5, "%u", &u) != 1)
		return false;
	*uid = (uid_t)u;
	return true;
}

/* Live stuck processes of uid (a process that has exited is stuck no more). */
static unsigned int stuck_of_uid(uid_t uid)
{
	unsigned int n = 0;
	struct job *j;

	list_for_each_entry(j, &stuck, node)
		n += j->uid == uid && job_process_alive(j);
	return n;
}

/*
 * Is some user at the cap? Worked out when the stuck list changes, not at
 * every call (every install asks, mmcall_ioctl_now()); the users of
 * processes asked about meanwhile are kept (a read of /proc/PID/status
 * each, else).
 */
static bool some_user_capped;
static struct {
	pid_t tgid;
	uid_t uid;
} uid_seen[32];

static void cap_recompute(void)
{
	struct job *j;

	some_user_capped = false;
	list_for_each_entry(j, &stuck, node)
		some_user_capped |= stuck_of_uid(j->uid) >= MMCALL_STUCK_PER_UID;
	memset(uid_seen, 0, sizeof(uid_seen));
}

static bool uid_of_cached(pid_t tgid, uid_t *uid)
{
	unsigned int k = (unsigned int)tgid % (sizeof(uid_seen) / sizeof(uid_seen[0]));

	if (uid_seen[k].tgid != tgid) {
		if (!uid_of(tgid, &uid_seen[k].uid))
			return false;
		uid_seen[k].tgid = tgid;
	}
	*uid = uid_seen[k].uid;
	return true;
}

/* Is tgid stuck, or a user's with MMCALL_STUCK_PER_UID stuck processes? */
static bool stuck_refuses(pid_t tgid)
{
	struct job *j;
	uid_t uid;

	stuck_reap();
	if (list_empty(&stuck))
		return false;
	list_for_each_entry(j, &stuck, node)
		/* one that has exited is stuck no more: its pid may name another process */
		if (j->tgid == tgid && job_process_alive(j))
			return true;
	return some_user_capped && uid_of_cached(tgid, &uid) &&
	       stuck_of_uid(uid) >= MMCALL_STUCK_PER_UID;
}

static struct list_head unregister_pending; /* defined with its kind below */
static bool unregister_pending_run(pid_t tgid);

bool mmcall_refuses(pid_t tgid)
{
	/* served again: first what could not be made while it was refused */
	return stuck_refuses(tgid) ||
	       (!list_empty(&unregister_pending) && unregister_pending_run(tgid));
}

void mmcall_failed_forget(void)
{
	nfailed_tgids = 0;
}

bool mmcall_failed(pid_t tgid)
{
	for (unsigned int i = 0; i < nfailed_tgids; i++)
		if (failed_tgids[i] == tgid)
			return true;
	return false;
}

/* A call for tgid failed (late, or refused): the loop gives its process up. */
static void note_failed(pid_t tgid)
{
	failures++;
	if (!mmcall_failed(tgid) && nfailed_tgids < sizeof(failed_tgids) / sizeof(failed_tgids[0]))
		failed_tgids[nfailed_tgids++] = tgid;
}

bool mmcall_failed_since(__u64 *seen)
{
	bool failed = failures != *seen;

	*seen = failures;
	return failed;
}

static struct job *job_alloc(pid_t tgid, enum op op, size_t buflen)
{
	struct job *j = calloc(1, sizeof(*j));

	if (!j)
		return NULL;
	j->op = op;
	j->fd = -1;
	j->out_ptr = SIZE_MAX;
	j->tgid = tgid;
	j->pidfd = -1;
	if (buflen && !(j->buf = malloc(buflen))) {
		free(j);
		errno = ENOMEM;
		return NULL;
	}
	j->len = buflen;
	return j;
}

/* j makes its call on a duplicate of fd: 0, or -1 (errno; j is freed). */
static int job_take_fd(struct job *j, int fd)
{
	int err;

	j->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (j->fd >= 0)
		return 0;
	err = errno;
	job_free(j);
	errno = err;
	return -1;
}

/* A job for tgid, or NULL: ETIMEDOUT at once if tgid is refused. */
static struct job *job_new(pid_t tgid, enum op op, size_t buflen)
{
	if (mmcall_refuses(tgid)) {
		note_failed(tgid);
		errno = ETIMEDOUT;
		return NULL;
	}
	return job_alloc(tgid, op, buflen);
}

static void job_free(struct job *j)
{
	if (j->fd >= 0)
		close(j->fd);
	free(j->rd);
	free(j->buf);
	free(j);
}

/* j missed its deadline: its process is stuck until it finishes. */
static void stuck_add(struct job *j)
{
	static const char *const what[] = {[OP_OPEN] = "an open of its /proc file",
					   [OP_GETFD] = "pidfd_getfd()",
					   [OP_PREAD] = "a read",
					   [OP_PWRITE] = "a write",
					   [OP_IOCTL] = "an ioctl",
					   [OP_SLURP] = "a read of its /proc file",
					   [OP_PREADV] = "reads",
					   [OP_RUN] = "a call that meets its locks",
					   [OP_CLOSE] = "a close of a file it chose",
					   [OP_INLINE] = "on the fault path"};

	late++;
	j->pidfd = -1;
	j->uid = (uid_t)-1;
	list_add_tail(&j->node, &stuck);
	if (j->tgid <= 0) {
		/* nobody's: it waits for what npfd cannot tell a process by (mmcall_run()) */
		failures++; /* the loop's cue to publish mm_calls_late; nobody is given up */
		pr_warn("a call that meets other processes' locks (%s) did not return within %llu ms: it is left to finish alone",
			what[j->op], (unsigned long long)(timeout_ns / 1000000));
		return;
	}
	note_failed(j->tgid);
	j->pidfd = (int)syscall(SYS_pidfd_open, j->tgid, 0);
	if (!uid_of(j->tgid, &j->uid))
		j->uid = (uid_t)-1;
	cap_recompute();

	pr_warn("pid %d: a call into its address space (%s) did not return within %llu ms: npfd gives the process up until it returns",
		j->tgid, what[j->op], (unsigned long long)(timeout_ns / 1000000));
}

/* The job missed its deadline: it and its worker are left to finish alone. */
static void abandon(struct job *j)
{
	current = NULL;
	stuck_add(j);
}

/*
 * Hand j to the worker and wait for it until the deadline: 0 (j's result
 * is in j->ret and j->err), or -1 with errno ETIMEDOUT (j is abandoned:
 * not the caller's any more) or why no worker could start (j is freed).
 */
static int call(struct job *j)
{
	struct worker *w = worker_get();
	__u64 start = now_ns(), deadline = start + timeout_ns, now;
	__u32 expect = J_POSTED, st;

	if (!w) {
		int err = errno;

		job_free(j);
		errno = err;
		return -1;
	}
	atomic_store(&j->state, J_POSTED);
	atomic_store(&w->job, j);
	atomic_fetch_add(&w->seq, 1);
	if (atomic_load(&w->sleeping))
		futex(&w->seq, FUTEX_WAKE_PRIVATE, 1, NULL);
	while ((st = atomic_load(&j->state)) <= J_RUNNING && now_ns() - start < SPIN_NS)
		cpu_relax();
	while ((st = atomic_load(&j->state)) <= J_RUNNING && (now = now_ns()) < deadline) {
		struct timespec ts = {.tv_sec = (time_t)((deadline - now) / 1000000000ULL),
				      .tv_nsec = (long)((deadline - now) % 1000000000ULL)};

		futex(&j->state, FUTEX_WAIT_PRIVATE, st, &ts);
	}
	/* not done: taken from the worker whether it has started it or not */
	if (atomic_compare_exchange_strong(&j->state, &expect, J_ABANDONED) ||
	    (expect = J_RUNNING, atomic_compare_exchange_strong(&j->state, &expect, J_ABANDONED))) {
		abandon(j);
		errno = ETIMEDOUT;
		return -1;
	}
	return 0; /* done (maybe just as the deadline passed) */
}

/*
 * Run j; its result, errno set from it, and (out) the bytes it read. j is
 * freed or abandoned.
 */
static long call_result(struct job *j, void *out)
{
	long ret;
	int err;

	if (call(j))
		return -1;
	ret = j->ret;
	err = j->err;
	if (out && ret > 0)
		memcpy(out, j->buf, (size_t)ret);
	job_free(j);
	errno = err;
	return ret;
}

int mmcall_open(pid_t tgid, const char *path, int flags)
{
	struct job *j = job_new(tgid, OP_OPEN, 0);

	if (!j)
		return -1;
	snprintf(j->path, sizeof(j->path), "%s", path);
	j->flags = flags;
	return (int)call_result(j, NULL);
}

int mmcall_getfd(pid_t tgid, int pidfd, int fd)
{
	struct job *j = job_new(tgid, OP_GETFD, 0);

	if (!j || job_take_fd(j, pidfd))
		return -1;
	j->flags = fd;
	return (int)call_result(j, NULL);
}

ssize_t mmcall_pread(pid_t tgid, int fd, void *buf, size_t len, off_t off)
{
	struct job *j = job_new(tgid, OP_PREAD, len);

	if (!j || job_take_fd(j, fd))
		return -1;
	j->off = off;
	return call_result(j, buf);
}

int mmcall_preadv(pid_t tgid, int fd, struct mmcall_read *rd, unsigned int n)
{
	size_t total = 0;
	struct job *j;
	unsigned int i;

	for (i = 0; i < n; i++) {
		if (rd[i].len > SIZE_MAX / 2 - total || rd[i].off > (__u64)INT64_MAX) {
			errno = EINVAL;
			return -1;
		}
		total += rd[i].len;
	}
	j = job_new(tgid, OP_PREADV, total ? total : 1);
	if (!j)
		return -1;
	j->rd = malloc(n * sizeof(*rd) + 1);
	if (!j->rd) {
		job_free(j);
		errno = ENOMEM;
		return -1;
	}
	for (i = 0, total = 0; i < n; i++) {
		j->rd[i] = rd[i];
		j->rd[i].dst = (void *)(uintptr_t)total;
		total += rd[i].len;
	}
	j->nrd = n;
	if (job_take_fd(j, fd))
		return -1;
	if (call(j))
		return -1;
	for (i = 0; i < n; i++) {
		rd[i].got = j->rd[i].got;
		rd[i].err = j->rd[i].err;
		if (rd[i].got > 0)
			memcpy(rd[i].dst, (char *)j->buf + (uintptr_t)j->rd[i].dst,
			       (size_t)rd[i].got);
	}
	job_free(j);
	return 0;
}

ssize_t mmcall_pwrite(pid_t tgid, int fd, const void *buf, size_t len, off_t off)
{
	struct job *j = job_new(tgid, OP_PWRITE, len);

	if (!j || job_take_fd(j, fd))
		return -1;
	memcpy(j->buf, buf, len);
	j->off = off;
	return call_result(j, NULL);
}

/*
 * Descriptors closed by a thread of their own, which nobody waits for: a
 * stuck process's (its closes would each cost the loop a deadline, one
 * more thread left in a FLUSH each time) and those no worker could take.
 * One thread, in turn: if one close never returns, the others wait
 * behind it (GRAVEYARD_MAX at most; past that a descriptor is kept open
 * for good rather than closed on the loop).
 */
#define GRAVEYARD_MAX 4096

static struct {
	pthread_mutex_t lock;
	pthread_cond_t more;
	int fd[GRAVEYARD_MAX];
	unsigned int head, n;
	bool started;
} graveyard = {.lock = PTHREAD_MUTEX_INITIALIZER, .more = PTHREAD_COND_INITIALIZER};

static void *graveyard_main(void *arg)
{
	for (;;) {
		int fd;

		pthread_mutex_lock(&graveyard.lock);
		while (!graveyard.n)
			pthread_cond_wait(&graveyard.more, &graveyard.lock);
		fd = graveyard.fd[graveyard.head];
		graveyard.head = (graveyard.head + 1) % GRAVEYARD_MAX;
		graveyard.n--;
		pthread_mutex_unlock(&graveyard.lock);
		close(fd);
	}
	return arg;
}

static void graveyard_add(int fd)
{
	bool kept;

	pthread_mutex_lock(&graveyard.lock);
	if (!graveyard.started)
		graveyard.started = !thread_start_detached(graveyard_main, NULL, WORKER_STACK);
	kept = !graveyard.started || graveyard.n == GRAVEYARD_MAX;
	if (!kept) {
		graveyard.fd[(graveyard.head + graveyard.n) % GRAVEYARD_MAX] = fd;
		graveyard.n++;
		pthread_cond_signal(&graveyard.more);
	}
	pthread_mutex_unlock(&graveyard.lock);
	if (kept)
		pr_warn_rl(
			"descriptor %d is kept open: the thread that closes descriptors of stuck processes is %s",
			fd, graveyard.started ? "full" : "not running");
}

void mmcall_close(pid_t tgid, int fd)
{
	struct job *j;

	if (fd < 0)
		return;
	/* a memfd (shmem: sealable) has no flush: closed at once */
	if (fcntl(fd, F_GET_SEALS) >= 0) {
		close(fd);
		return;
	}
	/*
	 * A process gone (tgid 0: nobody to give up, so each late close would
	 * cost the loop a deadline; adversarial probe: 16 descriptors of 4
	 * exited senders, 4.8 s) or stuck: not waited for.
	 */
	if (tgid <= 0) {
		graveyard_add(fd);
		return;
	}
	if (mmcall_refuses(tgid)) {
		note_failed(tgid); /* the loop's cue: a connection it sent this on is closed */
		graveyard_add(fd);
		return;
	}
	if (!worker_get() || !(j = job_alloc(tgid, OP_CLOSE, 0))) {
		graveyard_add(fd);
		return;
	}
	j->fd = fd;
	if (!call(j)) /* a worker is there: call() fails only late */
		job_free(j);
}

long mmcall_run(pid_t tgid, int fd, long (*fn)(int fd, void *arg),
		void (*late)(void *arg, long ret), void *arg, size_t argsz)
{
	struct job *j;
	long ret;
	int err;

	if (argsz > sizeof(j->arg)) {
		errno = EINVAL;
		return -1;
	}
	j = job_new(tgid, OP_RUN, 0);
	if (!j || (fd >= 0 && job_take_fd(j, fd)))
		return -1;
	memcpy(j->arg, arg, argsz);
	j->fn = fn;
	j->late = late;
	if (call(j))
		return -1;
	ret = j->ret;
	err = j->err;
	memcpy(arg, j->arg, argsz);
	job_free(j);
	errno = err;
	return ret;
}

static long ioctl_call(pid_t tgid, int fd, unsigned long req, void *arg, size_t argsz,
		       size_t out_ptr, size_t out_len, bool undo_register)
{
	struct job *j;
	__u64 user_out = 0;
	long ret;
	int err;

	if (argsz > sizeof(j->arg) || (out_ptr != SIZE_MAX && out_ptr > argsz - 8)) {
		errno = EINVAL;
		return -1;
	}
	j = job_new(tgid, OP_IOCTL, out_ptr != SIZE_MAX ? out_len : 0);
	if (!j || job_take_fd(j, fd))
		return -1;
	memcpy(j->arg, arg, argsz);
	j->req = req;
	j->out_ptr = out_ptr;
	j->undo_register = undo_register;
	if (out_ptr != SIZE_MAX)
		memcpy(&user_out, (char *)arg + out_ptr, 8);
	if (call(j))
		return -1;
	ret = j->ret;
	err = j->err;
	/* the argument comes back as the kernel left it, but the caller's own buffer address */
	memcpy(arg, j->arg, argsz);
	if (out_ptr != SIZE_MAX) {
		memcpy((char *)arg + out_ptr, &user_out, 8);
		if (ret >= 0)
			memcpy((void *)(uintptr_t)user_out, j->buf, out_len);
	}
	job_free(j);
	errno = err;
	return ret;
}

/*
 * Unregistrations refused while their process was stuck (mmcall_unregister()),
 * made before anything else once it is served again.
 */
struct unregister_pending {
	struct list_head node;
	pid_t tgid;
	int pidfd; /* the process: gone, the unregistration goes with it */
	int uffd;  /* a duplicate: the caller's descriptor may be closed by then */
	struct uffdio_range range;
};

#define UNREGISTER_PENDING_MAX 4096

static struct list_head unregister_pending = LIST_HEAD_INIT(unregister_pending);
static unsigned int unregister_pending_n;

static void unregister_pending_free(struct unregister_pending *u)
{
	list_del_init(&u->node);
	unregister_pending_n--;
	if (u->pidfd >= 0)
		close(u->pidfd);
	if (u->uffd >= 0)
		graveyard_add(u->uffd); /* the last reference takes the process's mmap_lock */
	free(u);
}

/*
 * Make tgid's pending unregistrations (it is not stuck): 0 when they are
 * made, 1 if one missed its deadline (tgid is stuck again, the rest
 * wait), -1 if one could not be handed over (it waits, and so do the
 * calls behind it: they must not overtake it).
 */
static int unregister_pending_make(pid_t tgid)
{
	struct unregister_pending *u, *tmp;

	list_for_each_entry_safe(u, tmp, &unregister_pending, node) {
		struct pollfd p = {.fd = u->pidfd, .events = POLLIN};
		struct job *j;

		if (u->tgid != tgid)
			continue;
		if (poll(&p, 1, 0) != 0) {
			/* gone: tgid names another process now, whose calls these are not */
			unregister_pending_free(u);
			continue;
		}
		j = job_alloc(tgid, OP_IOCTL, 0);
		if (!j || job_take_fd(j, u->uffd))
			return -1;
		j->req = UFFDIO_UNREGISTER;
		memcpy(j->arg, &u->range, sizeof(u->range));
		if (call(j)) {
			if (errno != ETIMEDOUT)
				return -1;	    /* no thread: it waits */
			unregister_pending_free(u); /* the late call makes it */
			return 1;
		}
		if (j->ret && j->err != ENOMEM && j->err != EINVAL)
			pr_warn_rl(
				"pid %d: the UFFDIO_UNREGISTER of 0x%llx+%llu it waited for failed: %s",
				tgid, (unsigned long long)u->range.start,
				(unsigned long long)u->range.len, strerror(j->err));
		unregister_pending_free(u);
		job_free(j);
	}
	return 0;
}

static bool unregister_pending_run(pid_t tgid)
{
	return unregister_pending_make(tgid) != 0;
}

int mmcall_unregister(pid_t tgid, int uffd, __u64 start, __u64 len)
{
	struct uffdio_range range = {.start = start, .len = len};
	struct unregister_pending *u;

	/* the ones waiting go first: made, or this one waits behind them */
	if (!mmcall_refuses(tgid))
		return mmcall_ioctl(tgid, uffd, UFFDIO_UNREGISTER, &range, sizeof(range)) ? -1 : 0;
	note_failed(tgid);
	u = unregister_pending_n < UNREGISTER_PENDING_MAX ? calloc(1, sizeof(*u)) : NULL;
	if (!u) {
		pr_warn_rl(
			"pid %d: 0x%llx+%llu stays registered: too many unregistrations wait for stuck processes",
			tgid, (unsigned long long)start, (unsigned long long)len);
		errno = ENOMEM;
		return -1;
	}
	u->tgid = tgid;
	u->range = range;
	u->pidfd = (int)syscall(SYS_pidfd_open, tgid, 0);
	u->uffd = fcntl(uffd, F_DUPFD_CLOEXEC, 0);
	list_add_tail(&u->node, &unregister_pending);
	unregister_pending_n++;
	if (u->pidfd < 0 || u->uffd < 0) {
		int err = errno;

		unregister_pending_free(u);
		errno = err;
		return -1;
	}
	return 0;
}

void mmcall_unregister_flush(void)
{
	static __u64 last;
	struct unregister_pending *u;
	__u64 now;

	/* each turn of the loop: cheap while none waits, and a look at most every 10 ms */
	if (list_empty(&unregister_pending) || (now = now_ns()) - last < 10000000ULL)
		return;
	last = now;
again:
	list_for_each_entry(u, &unregister_pending, node) {
		struct pollfd p = {.fd = u->pidfd, .events = POLLIN};

		if (poll(&p, 1, 0) != 0) {
			unregister_pending_free(u); /* the process is gone */
			goto again;
		}
		if (!stuck_refuses(u->tgid)) {
			/* the list changes: from its top again, unless nothing could be made */
			if (unregister_pending_make(u->tgid) < 0)
				return;
			goto again;
		}
	}
}

long mmcall_ioctl_out(pid_t tgid, int fd, unsigned long req, void *arg, size_t argsz,
		      size_t out_ptr, size_t out_len)
{
	return ioctl_call(tgid, fd, req, arg, argsz, out_ptr, out_len, false);
}

long mmcall_ioctl(pid_t tgid, int fd, unsigned long req, void *arg, size_t argsz)
{
	return ioctl_call(tgid, fd, req, arg, argsz, SIZE_MAX, 0, false);
}

int mmcall_register(pid_t tgid, int uffd, struct uffdio_register *reg)
{
	return (int)ioctl_call(tgid, uffd, UFFDIO_REGISTER, reg, sizeof(*reg), SIZE_MAX, 0, true);
}

/* The stream reads the job's buffer, and frees it when closed. */
static ssize_t slurp_read(void *cookie, char *buf, size_t size)
{
	struct job *j = cookie;
	size_t left = j->len - (size_t)j->off;

	if (size > left)
		size = left;
	memcpy(buf, (char *)j->buf + j->off, size);
	j->off += (off_t)size;
	return (ssize_t)size;
}

static int slurp_close(void *cookie)
{
	job_free(cookie);
	return 0;
}

FILE *mmcall_fopen(pid_t tgid, const char *path)
{
	cookie_io_functions_t io = {.read = slurp_read, .close = slurp_close};
	struct job *j = job_new(tgid, OP_SLURP, 0);
	FILE *f;

	if (!j)
		return NULL;
	snprintf(j->path, sizeof(j->path), "%s", path);
	if (call(j))
		return NULL;
	if (j->ret < 0) {
		int err = j->err;

		job_free(j);
		errno = err;
		return NULL;
	}
	j->off = 0;
	f = fopencookie(j, "r", io);
	if (!f)
		job_free(j);
	return f;
}

/*
 * Calls the loop makes itself (the fault path). While one runs,
 * inline_cur says which process it is for and since when; a watchdog
 * thread looks every WATCH_NS. Past the deadline it takes the call from the
 * loop thread (a compare-and-swap of state, which the loop thread makes
 * too when its call returns: one of them wins), gives the process up and
 * becomes the loop itself (become_loop(), main.c); the old loop thread,
 * when its call returns, finds the call taken, marks it finished and exits
 * without touching anything of the loop's. Before the swap the watchdog
 * reads nothing but inline_cur; after it, the loop's state is its own:
 * the old thread's writes before the call are seen through the swap.
 */
#define WATCH_NS (20 * 1000000ULL)
#define INLINE_RUNNING 1ULL
#define INLINE_TAKEN 2ULL

struct inline_call {
	_Atomic __u64 state; /* seq << 2 | INLINE_RUNNING or INLINE_TAKEN; seq << 2: done */
	_Atomic __u64 started;
	_Atomic pid_t tgid;
	struct job *_Atomic late; /* taken: its entry in the stuck list (set after the swap) */
};

static struct inline_call *_Atomic inline_cur; /* the loop's, or NULL (no watchdog) */
static __u64 inline_seq;
static void (*become_loop)(void);

/* A call on the loop: what it stands for while it runs (inline_begin()). */
struct mmcall_inline {
	struct inline_call *call;
	__u64 seq;
};

static int inline_begin(pid_t tgid, struct mmcall_inline *t)
{
	struct inline_call *c = atomic_load(&inline_cur);

	if (mmcall_refuses(tgid)) {
		note_failed(tgid);
		errno = ETIMEDOUT;
		return -1;
	}
	t->call = c;
	if (!c)
		return 0;
	t->seq = ++inline_seq;
	atomic_store(&c->tgid, tgid);
	atomic_store(&c->started, now_ns());
	atomic_store(&c->state, t->seq << 2 | INLINE_RUNNING);
	return 0;
}

static void inline_end(const struct mmcall_inline *t)
{
	struct inline_call *c = t->call;
	__u64 expect = t->seq << 2 | INLINE_RUNNING;
	struct job *j;

	if (!c || atomic_compare_exchange_strong(&c->state, &expect, t->seq << 2))
		return;
	/* taken: the loop is another thread's now; this one only says it is done */
	while (!(j = atomic_load(&c->late)))
		cpu_relax();
	free(c);
	atomic_store(&j->state, J_FINISHED_LATE);
	/*
	 * The thread alone, at once: not pthread_exit(), which unwinds the
	 * frames under it (the loop's, libbpf's) and runs what they left.
	 */
	for (;;)
		syscall(SYS_exit, 0);
}

static int watchdog_start(void);

static void *watchdog_main(void *arg)
{
	struct timespec period = {.tv_nsec = (long)WATCH_NS};

	(void)arg;
	for (;;) {
		struct inline_call *c = atomic_load(&inline_cur), *next;
		__u64 st = atomic_load(&c->state);
		struct job *j;

		nanosleep(&period, NULL);
		if (atomic_load(&c->state) != st || (st & 3) != INLINE_RUNNING ||
		    now_ns() - atomic_load(&c->started) < timeout_ns)
			continue;
		j = calloc(1, sizeof(*j));
		next = calloc(1, sizeof(*next));
		if (!j || !next) {
			free(j);
			free(next);
			continue;
		}
		if (!atomic_compare_exchange_strong(&c->state, &st, (st & ~3ULL) | INLINE_TAKEN)) {
			free(j);
			free(next);
			continue;
		}
		/* the loop is this thread's from here */
		j->op = OP_INLINE;
		j->fd = -1;
		j->tgid = atomic_load(&c->tgid);
		atomic_store(&j->state, J_ABANDONED);
		atomic_store(&inline_cur, next);
		stuck_add(j);
		atomic_store(&c->late, j); /* c is the old thread's to free from here */
		if (watchdog_start())
			pr_err("cannot start a new watchdog: a late call on the fault path will hold the loop");
		become_loop();
		return NULL;
	}
}

static int watchdog_start(void)
{
	int err;

	err = thread_start_detached(watchdog_main, NULL, 0);
	if (err) {
		/* no watchdog: calls on the fault path are not watched (inline_cur NULL) */
		atomic_store(&inline_cur, NULL);
		return -err;
	}
	return 0;
}

long mmcall_ioctl_now(pid_t tgid, int fd, unsigned long req, void *arg)
{
	struct mmcall_inline t;
	long ret;
	int err;

	if (inline_begin(tgid, &t))
		return -1;
	ret = ioctl(fd, req, arg);
	err = errno;
	inline_end(&t);
	errno = err;
	return ret;
}

ssize_t mmcall_pread_now(pid_t tgid, int fd, void *buf, size_t len, off_t off)
{
	struct mmcall_inline t;
	ssize_t ret;
	int err;

	if (inline_begin(tgid, &t))
		return -1;
	do
		ret = pread(fd, buf, len, off);
	while (ret < 0 && errno == EINTR);
	err = errno;
	inline_end(&t);
	errno = err;
	return ret;
}

int mmcall_watch(void (*take_over)(void))
{
	struct inline_call *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	become_loop = take_over;
	atomic_store(&inline_cur, c);
	return watchdog_start();
}
