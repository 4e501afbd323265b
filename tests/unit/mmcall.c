// SPDX-License-Identifier: GPL-2.0
/*
 * npfd's calls into a client's address space (daemon/mmcall.c), on their
 * thread with a deadline. The call that never returns here is an open of
 * a FIFO no one writes to (it waits until a writer opens it), a stand-in
 * for a FUSE page no server answers; which process it is "for" is a child
 * that only sleeps. Checked:
 *  - a call within the deadline returns what the system call did;
 *  - one that misses it fails with ETIMEDOUT about at the deadline, is
 *    counted once (mmcall_late()), and its process is stuck: every later
 *    call for it fails at once, with no wait and no second count;
 *  - two stuck processes of a user refuse its others at once; another
 *    user's are served;
 *  - when the late call returns (a writer opens the FIFO), its process is
 *    served again, and the descriptor it opened late is closed;
 *  - an unregistration for a stuck process (mmcall_unregister()) waits,
 *    and is made before its first call once it is served again, or by
 *    the loop's flush if no call comes;
 *  - a stuck process that exits is stuck no more;
 *  - a whole /proc file is read (mmcall_fopen()), and reads in one call
 *    (mmcall_preadv()) each give their own bytes;
 *  - a function run on the thread (mmcall_run()) gets the job's own copy
 *    of the caller's descriptor and argument, and gives the argument back
 *    in time; late, its late() runs once it returns and undoes what it
 *    made (here: closes the descriptor it opened).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/userfaultfd.h>
#include "unit.h"
#include "../budget.h" /* th_uffd_registered() */
#include "mmcall.h"

#define TIMEOUT_MS 200

static char dir[64];

static pid_t sleeper(uid_t uid)
{
	pid_t p = fork();

	if (!p) {
		if (uid && setuid(uid))
			_exit(1);
		pause();
		_exit(0);
	}
	return p;
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* A FIFO nobody writes to: an open of it for reading waits. */
static void fifo(const char *name, char *path, size_t len)
{
	snprintf(path, len, "%s/%s", dir, name);
	UT_CHECK(!mkfifo(path, 0600), "mkfifo %s: %s", path, strerror(errno));
}

/* Let the late open of path return: a writer opens it (and goes). */
static void release(const char *path)
{
	int fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);

	UT_CHECK(fd >= 0, "open %s for writing: %s", path, strerror(errno));
	if (fd >= 0)
		close(fd);
}

/* The descriptors this process has open. */
static int open_fds(void)
{
	char path[64];
	int n = 0;

	for (int fd = 0; fd < 1024; fd++) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		n += !access(path, F_OK);
	}
	return n;
}

/* Within 2 s, is tgid served again? */
static int served_again(pid_t tgid)
{
	for (double t0 = now_s(); now_s() - t0 < 2; usleep(10000))
		if (!mmcall_refuses(tgid))
			return 1;
	return 0;
}

/* mmcall_run()'s function: opens the path in arg on the thread, and fstat()s the given fd */
struct run_arg {
	char path[96];
	int fd_seen_ok; /* the job's descriptor names the caller's file */
	int opened;
};

static _Atomic int late_ran = -2; /* what the late function got: the descriptor, or -2 (none yet) */

static long run_open(int fd, void *arg)
{
	struct run_arg *r = arg;
	struct stat st;

	r->fd_seen_ok = fd >= 0 && !fstat(fd, &st) && S_ISREG(st.st_mode);
	r->opened = open(r->path, O_RDONLY | O_CLOEXEC);
	return r->opened;
}

static void run_open_late(void *arg, long ret)
{
	(void)arg;
	if (ret >= 0)
		close((int)ret);
	late_ran = (int)ret;
}

int main(void)
{
	char f1[96], f2[96], f3[96], f4[96], line[256], buf[64];
	struct uffdio_api api = {.api = UFFD_API};
	struct uffdio_register reg = {.mode = UFFDIO_REGISTER_MODE_MISSING};
	struct mmcall_read rd[2];
	pid_t a, b, c, other;
	int fd, fds0, uffd;
	void *mem, *mem2;
	double t0, dt;
	FILE *f;

	th_require_root(); /* a second user's process */
	snprintf(dir, sizeof(dir), "/tmp/npf-unit-mmcall-XXXXXX");
	if (!mkdtemp(dir)) {
		printf("FAIL: mkdtemp: %s\n", strerror(errno));
		return 1;
	}
	mmcall_set_timeout_ms(TIMEOUT_MS);
	a = sleeper(0);
	b = sleeper(0);
	c = sleeper(0);
	other = sleeper(65534);
	fifo("one", f1, sizeof(f1));
	fifo("two", f2, sizeof(f2));
	fifo("three", f3, sizeof(f3));

	/* served within the deadline */
	fd = mmcall_open(a, "/proc/self/status", O_RDONLY);
	UT_CHECK(fd >= 0, "open within the deadline: %s", strerror(errno));
	if (fd >= 0)
		close(fd);
	f = mmcall_fopen(a, "/proc/self/status");
	UT_CHECK(f && fgets(line, sizeof(line), f) && !strncmp(line, "Name:", 5),
		 "a /proc file read whole: first line '%s'", f ? line : "(none)");
	if (f)
		fclose(f);
	fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	memset(buf, 0, sizeof(buf));
	rd[0] = (struct mmcall_read){.off = 1, .len = 3, .dst = buf};
	rd[1] = (struct mmcall_read){.off = 0, .len = 4, .dst = buf + 8};
	UT_CHECK(!mmcall_preadv(a, fd, rd, 2) && rd[0].got == 3 && rd[1].got == 4 &&
			 !memcmp(buf, "ELF", 3) && !memcmp(buf + 8, "\177ELF", 4),
		 "two reads in one call: got %zd %zd", rd[0].got, rd[1].got);
	close(fd);
	UT_EQ(mmcall_late(), 0, "late calls before any was late");
	fds0 = open_fds();

	/* a call that never returns: failed at the deadline, counted once */
	t0 = now_s();
	errno = 0;
	fd = mmcall_open(a, f1, O_RDONLY);
	dt = now_s() - t0;
	UT_CHECK(fd == -1 && errno == ETIMEDOUT, "the held open: %d (%s), want -1 ETIMEDOUT", fd,
		 strerror(errno));
	UT_CHECK(dt >= TIMEOUT_MS / 1e3 * 0.9 && dt < TIMEOUT_MS / 1e3 + 0.5,
		 "the held open failed after %.3f s, want about %.3f", dt, TIMEOUT_MS / 1e3);
	UT_EQ(mmcall_late(), 1, "late calls after one");
	UT_CHECK(mmcall_refuses(a), "the process of the late call is not refused");
	UT_CHECK(!mmcall_refuses(b), "another process is refused with one stuck");

	/* its later calls fail at once, uncounted */
	t0 = now_s();
	errno = 0;
	fd = mmcall_open(a, "/proc/self/status", O_RDONLY);
	dt = now_s() - t0;
	UT_CHECK(fd == -1 && errno == ETIMEDOUT && dt < 0.05,
		 "a call for the stuck process: %d (%s) after %.3f s, want -1 ETIMEDOUT at once",
		 fd, strerror(errno), dt);
	UT_EQ(mmcall_late(), 1, "late calls after a refused one");

	/* two of a user's processes stuck: its others refused at once, another user's served */
	fd = mmcall_open(b, f2, O_RDONLY);
	UT_CHECK(fd == -1 && errno == ETIMEDOUT, "the second held open: %d", fd);
	UT_EQ(mmcall_late(), 2, "late calls after two");
	t0 = now_s();
	fd = mmcall_open(c, f3, O_RDONLY);
	dt = now_s() - t0;
	UT_CHECK(fd == -1 && errno == ETIMEDOUT && dt < 0.05,
		 "a third process of the user: %d (%s) after %.3f s, want refused at once", fd,
		 strerror(errno), dt);
	UT_EQ(mmcall_late(), 2, "late calls after the user's third");
	fd = mmcall_open(other, "/proc/self/status", O_RDONLY);
	UT_CHECK(fd >= 0, "another user's process is refused: %s", strerror(errno));
	if (fd >= 0)
		close(fd);

	/*
	 * An unregistration for a stuck process waits for it: a's is made
	 * before its next call, b's by the loop's flush once b is served
	 * again. The userfaultfd stays open here: its last close would
	 * unregister everything by itself.
	 */
	uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	UT_CHECK(uffd >= 0 && !ioctl(uffd, UFFDIO_API, &api), "userfaultfd: %s", strerror(errno));
	mem = mmap(NULL, 4 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	mem2 = (char *)mem + 2 * 4096;
	reg.range.start = (__u64)(uintptr_t)mem;
	reg.range.len = 4 * 4096;
	UT_CHECK(mem != MAP_FAILED && !ioctl(uffd, UFFDIO_REGISTER, &reg) &&
			 th_uffd_registered(mem, 4096) && th_uffd_registered(mem2, 4096),
		 "UFFDIO_REGISTER: %s", strerror(errno));
	UT_CHECK(!mmcall_unregister(a, uffd, (__u64)(uintptr_t)mem, 2 * 4096) &&
			 !mmcall_unregister(b, uffd, (__u64)(uintptr_t)mem2, 2 * 4096),
		 "an unregistration for a stuck pid: %s", strerror(errno));
	usleep(20000);
	mmcall_unregister_flush();
	UT_CHECK(th_uffd_registered(mem, 4096) && th_uffd_registered(mem2, 4096),
		 "unregistered while its process is stuck");

	/* the late calls return: served again, the late descriptors closed */
	release(f1);
	UT_CHECK(served_again(a), "pid %d refused 2 s after its late call could return", a);
	UT_CHECK(!th_uffd_registered(mem, 4096),
		 "a's range still registered when it is served again");
	UT_CHECK(th_uffd_registered(mem2, 4096), "b's range unregistered before b is served again");
	release(f2);
	for (t0 = now_s(); th_uffd_registered(mem2, 4096) && now_s() - t0 < 2; usleep(20000))
		mmcall_unregister_flush();
	UT_CHECK(!th_uffd_registered(mem2, 4096),
		 "b's range still registered 2 s after its late call "
		 "could return (the flush does not make it)");
	close(uffd);
	UT_CHECK(served_again(b) && served_again(c), "the user's processes still refused");
	fd = mmcall_open(c, "/proc/self/status", O_RDONLY);
	UT_CHECK(fd >= 0, "a call after the release: %s", strerror(errno));
	if (fd >= 0)
		close(fd);
	UT_EQ(open_fds(), fds0, "descriptors open after the late opens returned");

	/* a stuck process that exits is stuck no more */
	fd = mmcall_open(c, f3, O_RDONLY);
	UT_CHECK(fd == -1 && mmcall_refuses(c), "the held open for pid %d", c);
	kill(c, SIGKILL);
	waitpid(c, NULL, 0);
	UT_CHECK(!mmcall_refuses(c), "pid %d refused after it exited", c);
	release(f3);

	/* a function on the thread: in time, then late (undone by its late function) */
	{
		struct run_arg r = {.opened = -1};
		long ret;
		int exe = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);

		snprintf(r.path, sizeof(r.path), "/proc/self/status");
		ret = mmcall_run(other, exe, run_open, run_open_late, &r, sizeof(r));
		UT_CHECK(ret >= 0 && r.opened == ret && r.fd_seen_ok,
			 "mmcall_run in time: %ld, the argument back %d, the descriptor seen %d",
			 ret, r.opened, r.fd_seen_ok);
		if (ret >= 0)
			close((int)ret);
		fifo("four", f4, sizeof(f4));
		snprintf(r.path, sizeof(r.path), "%s", f4);
		errno = 0;
		ret = mmcall_run(other, exe, run_open, run_open_late, &r, sizeof(r));
		UT_CHECK(ret == -1 && errno == ETIMEDOUT, "mmcall_run held: %ld (%s)", ret,
			 strerror(errno));
		UT_CHECK(mmcall_refuses(other), "pid %d not refused after its late run", other);
		UT_EQ(late_ran, -2, "the late function ran before the call returned");
		release(f4);
		for (t0 = now_s(); late_ran == -2 && now_s() - t0 < 2; usleep(10000))
			;
		UT_CHECK(late_ran >= 0,
			 "the late function got %d (want the descriptor opened late)", late_ran);
		UT_CHECK(late_ran < 0 || fcntl(late_ran, F_GETFD) < 0,
			 "descriptor %d, opened late, still open after the late function ran",
			 late_ran);
		UT_CHECK(served_again(other), "pid %d refused after its late run returned", other);
		close(exe);
	}

	kill(a, SIGKILL);
	kill(b, SIGKILL);
	kill(other, SIGKILL);
	while (wait(NULL) > 0)
		;
	unlink(f1);
	unlink(f2);
	unlink(f3);
	unlink(f4);
	rmdir(dir);
	return ut_done("calls into an address space, with a deadline");
}
