// SPDX-License-Identifier: GPL-2.0
/*
 * npfd's copies of a client's memory (mm_mem_rw(), daemon/region.c): the
 * eviction's read of its victims and the put-back's write. A page the
 * process gave to a userfaultfd of its own, one that handles kernel faults,
 * must fail the copy at once: process_vm_readv() would wait there for the
 * process to answer, and npfd with it (every client). Also: runs are read
 * whole, a run stops at the first page that fails with the bytes before
 * it, writes land, a gone process is ESRCH, an address past off_t EFAULT.
 *
 * The process here is a child holding such a userfaultfd (root, or
 * vm.unprivileged_userfaultfd=1, may make one; else the unit skips).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/userfaultfd.h>
#include "unit.h"
#include "objects.h"
#include "region.h"

#define PG 4096UL
#define NPAGES 16
#define UFFD_FIRST 8 /* pages [8, 16) are the child's userfaultfd's */
#define NO_WAIT_S 5

static void held(int sig)
{
	static const char msg[] = "FAIL: a copy waited on the process's own userfaultfd "
				  "(5 s): npfd would be held as long as the process likes\n";

	(void)sig;
	if (write(STDOUT_FILENO, msg, sizeof(msg) - 1) < 0)
		_exit(1);
	_exit(1);
}

/* The child: its pages [0, 4) written, [8, 16) registered MISSING and never answered. */
static void child(char *m, int ready)
{
	struct uffdio_api api = {.api = UFFD_API};
	struct uffdio_register reg = {
		.range = {(unsigned long)(m + UFFD_FIRST * PG), (NPAGES - UFFD_FIRST) * PG},
		.mode = UFFDIO_REGISTER_MODE_MISSING,
	};
	char ok;
	int u;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	for (unsigned long i = 0; i < 4 * PG; i++)
		m[i] = (char)(i / PG + 1);
	/* no UFFD_USER_MODE_ONLY: this one also handles the kernel's faults */
	u = (int)syscall(SYS_userfaultfd, O_CLOEXEC);
	ok = u >= 0 && !ioctl(u, UFFDIO_API, &api) && !ioctl(u, UFFDIO_REGISTER, &reg);
	if (write(ready, &ok, 1) != 1)
		_exit(1);
	for (;;)
		pause();
}

int main(void)
{
	char *m =
		mmap(NULL, NPAGES * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char buf[8 * PG], ok = 0;
	struct npfd_mm mm = {.mem_fd = -1, .pagemap_fd = -1, .layout_fd = -1};
	int p[2], st;
	ssize_t got;
	pid_t pid;
	bool bytes_ok;

	if (m == MAP_FAILED || pipe(p))
		return 1;
	pid = fork();
	if (pid < 0)
		return 1;
	if (!pid)
		child(m, p[1]);
	if (read(p[0], &ok, 1) != 1 || !ok) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		th_skip("cannot make a userfaultfd that handles kernel faults here (needs root, "
			"CAP_SYS_PTRACE or vm.unprivileged_userfaultfd=1)");
	}
	mm.tgid = pid;
	mm.pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	signal(SIGALRM, held);
	alarm(NO_WAIT_S);

	/* a run of present pages: whole, and its bytes */
	memset(buf, 0, sizeof(buf));
	got = mm_mem_rw(&mm, (uintptr_t)m, buf, 4 * PG, false);
	UT_EQ(got, 4 * PG, "bytes of a run of 4 present pages");
	bytes_ok = true;
	for (unsigned long i = 0; i < 4 * PG; i++)
		bytes_ok &= buf[i] == (char)(i / PG + 1);
	UT_CHECK(bytes_ok, "the 4 pages read are not the child's bytes");
	UT_CHECK(mm.mem_fd >= 0, "no /proc/PID/mem descriptor kept");

	/* the first page is the other userfaultfd's: fails at once */
	errno = 0;
	got = mm_mem_rw(&mm, (uintptr_t)(m + UFFD_FIRST * PG), buf, PG, false);
	UT_CHECK(got == -1 && (errno == EIO || errno == EFAULT),
		 "read of a page of the process's userfaultfd: got %zd (%s), want -1 EIO", got,
		 strerror(errno));
	errno = 0;
	got = mm_mem_rw(&mm, (uintptr_t)(m + (UFFD_FIRST + 1) * PG), buf, PG, true);
	UT_CHECK(got == -1 && (errno == EIO || errno == EFAULT),
		 "write of a page of the process's userfaultfd: got %zd (%s), want -1 EIO", got,
		 strerror(errno));

	/* a run into it: the pages before it (never-touched ones read zeros) */
	memset(buf, 0x5a, sizeof(buf));
	got = mm_mem_rw(&mm, (uintptr_t)(m + 6 * PG), buf, 4 * PG, false);
	UT_EQ(got, 2 * PG, "bytes of a run of 4 pages whose third is the other userfaultfd's");
	UT_CHECK(buf[0] == 0 && buf[2 * PG - 1] == 0 && buf[2 * PG] == 0x5a,
		 "the 2 pages before the other userfaultfd's: not zeros, or more written");

	/* a write lands, as seen from outside npfd's read */
	memset(buf, 0x77, PG);
	UT_EQ(mm_mem_rw(&mm, (uintptr_t)(m + 5 * PG), buf, PG, true), PG, "bytes written");
	{
		char path[64], back[PG];
		int fd;

		snprintf(path, sizeof(path), "/proc/%d/mem", pid);
		fd = open(path, O_RDONLY);
		UT_CHECK(fd >= 0 &&
				 pread(fd, back, PG, (off_t)(uintptr_t)(m + 5 * PG)) ==
					 (ssize_t)PG &&
				 back[0] == 0x77 && back[PG - 1] == 0x77,
			 "the page written does not hold the bytes");
		if (fd >= 0)
			close(fd);
	}

	/* an address past off_t is no page of the process's */
	errno = 0;
	UT_CHECK(mm_mem_rw(&mm, 1ULL << 63, buf, PG, false) == -1 && errno == EFAULT,
		 "address 2^63: want -1 EFAULT (%s)", strerror(errno));
	errno = 0;
	UT_CHECK(mm_mem_rw(&mm, (1ULL << 63) - PG, buf, 2 * PG, false) == -1 && errno == EFAULT,
		 "a range crossing 2^63: want -1 EFAULT (%s)", strerror(errno));
	alarm(0);

	/* the process gone (and reaped): the descriptor reads nothing, ESRCH */
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	errno = 0;
	UT_CHECK(mm_mem_rw(&mm, (uintptr_t)m, buf, PG, false) == -1 && errno == ESRCH,
		 "read after the process exited: want -1 ESRCH (%s)", strerror(errno));
	close(mm.mem_fd);
	/* and a new descriptor is not opened for its pid */
	mm.mem_fd = -1;
	errno = 0;
	UT_CHECK(mm_mem_rw(&mm, (uintptr_t)m, buf, PG, false) == -1 &&
			 (errno == ESRCH || errno == ENOENT),
		 "open after the process exited: want -1 ESRCH or ENOENT (%s)", strerror(errno));
	return ut_done("copies of a process's memory, never held by its own userfaultfd");
}
