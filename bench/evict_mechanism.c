// SPDX-License-Identifier: GPL-2.0
/*
 * The facts npfd's choice of eviction mechanism rests on (docs/design.md,
 * Overcommit), measured on the running kernel: how another process can
 * take a page out of a process's anonymous memory.
 *
 *  1. process_madvise() on a pidfd: which advices a remote caller may give
 *     (mm/madvise.c allows few; MADV_DONTNEED would be the direct way);
 *  2. SCM_RIGHTS refuses io_uring descriptors: hence pidfd_getfd();
 *  3. the client's SQPOLL io_uring, fetched with pidfd_getfd(): the cost
 *     of MADV_DONTNEED submitted by another process, per page, one page
 *     per SQE and one SQE per 32-page run, against madvise() in the
 *     process itself on the same number of pages (the baseline, same run);
 *  4. UFFDIO_MOVE: refused to any caller outside the userfaultfd's own mm
 *     (so npfd cannot move a client's page aside), and, in the process
 *     itself, not refused for a source range that is registered with no
 *     userfaultfd at all: a move run by the client would take the pages of
 *     a mapping made at a region's addresses after its munmap, as a
 *     MADV_DONTNEED does (docs/design.md: the zap windows).
 *
 * Usage: npf-bench-evict_mechanism [--json] [--pages N]
 */
#include <fcntl.h>
#include <getopt.h>
#include <liburing.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/userfaultfd.h>
#include "bench.h"
#include "npf_uffd.h"

/* UFFDIO_MOVE (Linux 6.8), for headers older than the kernel */
#ifndef UFFDIO_MOVE
struct uffdio_move {
	__u64 dst, src, len, mode;
	__s64 move;
};
#define UFFDIO_MOVE _IOWR(UFFDIO, 0x05, struct uffdio_move)
#endif

#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102
#define MADV_GUARD_REMOVE 103
#endif
#define PG 4096UL

static unsigned long npages = 8192;

static void row(const char *what, const char *result, double us_per_page, const char *note)
{
	bench_row_begin("evict_mechanism");
	bench_col_str("what", 36, what);
	bench_col_str("result", 20, result);
	if (us_per_page >= 0)
		bench_col_f("us_per_page", 8, 3, us_per_page);
	else
		bench_col_raw("us_per_page", "       -", "null");
	bench_col_str("note", 0, note);
	bench_row_end();
}

/* A child with npages written pages at the parent's address, talking on sv[1]. */
static pid_t child_with_pages(char *mem, const int *sv, bool ring, int *ring_fd)
{
	int sock = sv[1];

	pid_t pid = fork();

	if (pid < 0)
		bench_die("fork: %s", strerror(errno));
	if (!pid) {
		struct io_uring r;
		struct io_uring_params p = {.flags = IORING_SETUP_SQPOLL, .sq_thread_idle = 1};
		int fd = -1;
		char c;

		if (ring) {
			if (io_uring_queue_init_params(64, &r, &p))
				_exit(1);
			fd = r.ring_fd;
		}
		memset(mem, 'x', npages * PG);
		if (write(sock, &fd, sizeof(fd)) != sizeof(fd) || read(sock, &c, 1) != 1)
			_exit(1);
		/* what stayed resident */
		{
			unsigned char *vec = malloc(npages);
			unsigned long res = 0;

			mincore(mem, npages * PG, vec);
			for (unsigned long i = 0; i < npages; i++)
				res += vec[i] & 1;
			if (write(sock, &res, sizeof(res)) != sizeof(res))
				_exit(1);
		}
		_exit(0);
	}
	if (read(sv[0], ring_fd, sizeof(*ring_fd)) != sizeof(*ring_fd))
		bench_die("child did not start");
	return pid;
}

static unsigned long child_end(pid_t pid, int sock)
{
	unsigned long res = 0;

	if (write(sock, "g", 1) != 1 || read(sock, &res, sizeof(res)) != sizeof(res))
		bench_die("child failed");
	waitpid(pid, NULL, 0);
	return res;
}

static void remote_advice(char *mem)
{
	static const struct {
		int advice;
		const char *name;
	} adv[] = {{MADV_DONTNEED, "MADV_DONTNEED"}, {MADV_FREE, "MADV_FREE"},
		   {MADV_REMOVE, "MADV_REMOVE"},     {MADV_GUARD_INSTALL, "MADV_GUARD_INSTALL"},
		   {MADV_PAGEOUT, "MADV_PAGEOUT"},   {MADV_COLD, "MADV_COLD"},
		   {MADV_WILLNEED, "MADV_WILLNEED"}};
	int sv[2], fd;
	pid_t pid;
	int pidfd;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		bench_die("socketpair: %s", strerror(errno));
	pid = child_with_pages(mem, sv, false, &fd);
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	for (size_t i = 0; i < sizeof(adv) / sizeof(adv[0]); i++) {
		struct iovec iov = {mem + i * 4 * PG, PG};
		long r = syscall(SYS_process_madvise, pidfd, &iov, 1, adv[i].advice, 0);
		char what[64];

		snprintf(what, sizeof(what), "process_madvise(%s)", adv[i].name);
		row(what, r < 0 ? strerror(errno) : "allowed", -1,
		    adv[i].advice == MADV_PAGEOUT ?
			    "anonymous pages need swap; the kernel faults them back" :
			    "");
	}
	close(pidfd);
	child_end(pid, sv[0]);
	close(sv[0]);
	close(sv[1]);
}

static void scm_rights_ring(void)
{
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr a;
	} u;
	struct io_uring r;
	char c = 'r';
	struct iovec io = {&c, 1};
	struct msghdr m = {
		.msg_iov = &io, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof(u)};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
	int sv[2];
	ssize_t n;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) || io_uring_queue_init(4, &r, 0))
		bench_die("setup: %s", strerror(errno));
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &r.ring_fd, sizeof(int));
	n = sendmsg(sv[0], &m, 0);
	row("SCM_RIGHTS of an io_uring", n < 0 ? strerror(errno) : "passed", -1,
	    "hence pidfd_getfd() of the descriptor number");
	io_uring_queue_exit(&r);
	close(sv[0]);
	close(sv[1]);
}

/* MADV_DONTNEED of the child's npages through its SQPOLL ring, run pages per SQE. */
static void sqpoll_zap(char *mem, unsigned long run)
{
	struct io_uring_params p;
	struct io_uring dummy, ring;
	int sv[2], cfd, pidfd, fd;
	unsigned long left;
	double t0, t1;
	pid_t pid;
	char what[64], res[32];

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		bench_die("socketpair: %s", strerror(errno));
	pid = child_with_pages(mem, sv, true, &cfd);
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	fd = (int)syscall(SYS_pidfd_getfd, pidfd, cfd, 0);
	if (fd < 0)
		bench_die("pidfd_getfd: %s", strerror(errno));
	memset(&p, 0, sizeof(p));
	if (io_uring_queue_init_params(64, &dummy, &p))
		bench_die("io_uring: %s", strerror(errno));
	io_uring_queue_exit(&dummy);
	p.flags |= IORING_SETUP_SQPOLL;
	if (io_uring_queue_mmap(fd, &p, &ring))
		bench_die("map the child's ring: %s", strerror(errno));
	t0 = bench_now_s();
	for (unsigned long i = 0; i < npages; i += 32 * run) {
		unsigned long k, sqes = 0;

		for (k = i; k < npages && k < i + 32 * run; k += run, sqes++) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);

			io_uring_prep_madvise(sqe, mem + k * PG, (off_t)(run * PG), MADV_DONTNEED);
		}
		io_uring_submit(&ring);
		while (sqes--) {
			struct io_uring_cqe *cqe;

			if (io_uring_wait_cqe(&ring, &cqe))
				bench_die("wait: %s", strerror(errno));
			io_uring_cqe_seen(&ring, cqe);
		}
	}
	t1 = bench_now_s();
	io_uring_queue_exit(&ring);
	close(pidfd);
	left = child_end(pid, sv[0]);
	close(sv[0]);
	close(sv[1]);
	snprintf(what, sizeof(what), "client's SQPOLL ring, %lu page%s/SQE", run,
		 run > 1 ? "s" : "");
	snprintf(res, sizeof(res), "%lu left", left);
	row(what, res, (t1 - t0) * 1e6 / (double)npages, "MADV_DONTNEED in the client's mm");
}

/*
 * UFFDIO_MOVE of 4 written pages from src into a range registered with the
 * userfaultfd; src registered with it too, or not at all. In a child
 * (cross_mm) or here. Returns the row's result.
 */
static const char *uffd_move(bool src_registered, bool cross_mm, char *res, size_t len)
{
	struct uffdio_api api = {.api = UFFD_API};
	struct uffdio_register reg = {.mode = UFFDIO_REGISTER_MODE_MISSING};
	struct uffdio_move mv = {.len = 4 * PG};
	int u = npf_uffd_create(O_CLOEXEC | UFFD_USER_MODE_ONLY), err = 0;
	char *src = mmap(NULL, 4 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *dst = mmap(NULL, 4 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (u < 0 || ioctl(u, UFFDIO_API, &api) || src == MAP_FAILED || dst == MAP_FAILED)
		bench_die("userfaultfd: %s", strerror(u < 0 ? -u : errno));
	memset(src, 'm', 4 * PG);
	reg.range = (struct uffdio_range){(unsigned long)dst, 4 * PG};
	if (ioctl(u, UFFDIO_REGISTER, &reg))
		bench_die("UFFDIO_REGISTER: %s", strerror(errno));
	reg.range = (struct uffdio_range){(unsigned long)src, 4 * PG};
	if (src_registered && ioctl(u, UFFDIO_REGISTER, &reg))
		bench_die("UFFDIO_REGISTER: %s", strerror(errno));
	mv.dst = (unsigned long)dst;
	mv.src = (unsigned long)src;
	if (cross_mm) {
		pid_t pid = fork();
		int st = 0;

		if (pid < 0)
			bench_die("fork: %s", strerror(errno));
		if (!pid)
			_exit(ioctl(u, UFFDIO_MOVE, &mv) ? errno : 0);
		waitpid(pid, &st, 0);
		err = WIFEXITED(st) ? WEXITSTATUS(st) : EINTR;
	} else if (ioctl(u, UFFDIO_MOVE, &mv)) {
		err = errno;
	}
	/*
	 * The effect, not the return: is the source still resident (mincore:
	 * reading a registered, emptied source would wait for a fault reader)?
	 */
	if (err) {
		snprintf(res, len, "%s", strerror(err));
	} else {
		unsigned char vec[4] = {0};

		mincore(src, 4 * PG, vec);
		snprintf(res, len, "moved: %s",
			 (vec[0] | vec[1] | vec[2] | vec[3]) & 1 ? "source kept" : "source empty");
	}
	munmap(src, 4 * PG);
	munmap(dst, 4 * PG);
	close(u);
	return res;
}

static void uffd_moves(void)
{
	char res[48];

	row("UFFDIO_MOVE from another process", uffd_move(true, true, res, sizeof(res)), -1,
	    "cross-mm moves are refused: npfd cannot move a client's page");
	row("UFFDIO_MOVE in the process", uffd_move(true, false, res, sizeof(res)), -1,
	    "both ranges registered");
	row("UFFDIO_MOVE, source not registered", uffd_move(false, false, res, sizeof(res)), -1,
	    "only the destination's registration is checked");
}

static void local_madvise(char *mem)
{
	double t0, t1;

	memset(mem, 'x', npages * PG);
	t0 = bench_now_s();
	for (unsigned long i = 0; i < npages; i++)
		madvise(mem + i * PG, PG, MADV_DONTNEED);
	t1 = bench_now_s();
	row("madvise in the process, 1 page", "baseline", (t1 - t0) * 1e6 / (double)npages,
	    "what the client's own thread would pay");
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{"json", no_argument, NULL, 'j'}, {"pages", required_argument, NULL, 'p'}, {}};
	char *mem;
	int c;

	bench_prog = "npf-bench-evict_mechanism";
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		if (c == 'j')
			bench_json = 1;
		else if (c == 'p')
			npages = strtoul(optarg, NULL, 0);
		else
			return 2;
	}
	mem = mmap(NULL, npages * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED || npages < 64)
		bench_die("mmap of %lu pages (at least 64): %s", npages, strerror(errno));
	bench_text("# taking pages out of another process's anonymous memory (%lu pages)\n",
		   npages);
	bench_text("what                                 result               us/page note\n");
	remote_advice(mem);
	scm_rights_ring();
	uffd_moves();
	local_madvise(mem);
	sqpoll_zap(mem, 1);
	sqpoll_zap(mem, 32);
	local_madvise(mem);
	return 0;
}
