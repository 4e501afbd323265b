/* SPDX-License-Identifier: GPL-2.0 */
/* A region's budget and what eviction did, as npfd reports it (the eviction tests). */
#ifndef NPF_TEST_BUDGET_H
#define NPF_TEST_BUDGET_H

#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <liburing.h>
#include <linux/userfaultfd.h>
#include "harness.h"
#include "npf.h"

static inline struct npf_budget_info th_budget(struct npf_client *c, int id)
{
	struct npf_budget_info *bi, out;
	size_t n;

	TH_ASSERT(!npf_client__budget_list(c, (__u32)id, &bi, &n) && n == 1, "budget list: %s",
		  npf_client__errmsg(c));
	out = *bi;
	free(bi);
	return out;
}

/*
 * Pages of process pid's [mem, mem + npg pages) whose pagemap entry has
 * every bit of `bits`; their indices go to list[] (npg entries) if given.
 */
static inline __u64 th_pagemap_pages(pid_t pid, const char *mem, __u64 npg, __u64 bits, __u64 *list)
{
	char path[64];
	__u64 n = 0;
	int pm;

	snprintf(path, sizeof(path), "/proc/%d/pagemap", pid);
	pm = open(path, O_RDONLY | O_CLOEXEC);
	TH_ASSERT(pm >= 0, "open %s: %s", path, strerror(errno));
	for (__u64 p = 0; p < npg; p++) {
		__u64 ent;

		TH_ASSERT(pread(pm, &ent, 8, (off_t)((uintptr_t)mem / 4096 + p) * 8) == 8,
			  "pagemap");
		if ((ent & bits) == bits) {
			if (list)
				list[n] = p;
			n++;
		}
	}
	close(pm);
	return n;
}

#define TH_PM_PRESENT (1ULL << 63)
#define TH_PM_UFFD_WP (1ULL << 57)

/*
 * Pages present and write-protected by userfaultfd: the pages an eviction
 * batch froze and has not zapped yet. Their indices go to late[] if given.
 */
static inline __u64 th_frozen_pages(pid_t pid, const char *mem, __u64 npg, __u64 *late)
{
	return th_pagemap_pages(pid, mem, npg, TH_PM_PRESENT | TH_PM_UFFD_WP, late);
}

/* Pages of this process's [mem, mem + npg pages) that are present. */
static inline __u64 th_present_pages(const char *mem, __u64 npg)
{
	return th_pagemap_pages(getpid(), mem, npg, TH_PM_PRESENT, NULL);
}

/*
 * This process's first descriptor whose /proc link begins with link_want
 * (an anon inode's name, a directory's path) and that ok() accepts (any,
 * if ok is NULL), or -1.
 */
static inline int th_fd_where(const char *link_want, bool (*ok)(int fd))
{
	DIR *dir = opendir("/proc/self/fd");
	struct dirent *e;
	int fd = -1;

	TH_ASSERT(dir, "opendir /proc/self/fd: %s", strerror(errno));
	while (fd < 0 && (e = readdir(dir))) {
		char path[300], link[300];
		ssize_t len;

		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		len = readlink(path, link, sizeof(link) - 1);
		if (len > 0 && (link[len] = 0, !strncmp(link, link_want, strlen(link_want))) &&
		    (!ok || ok(atoi(e->d_name))))
			fd = atoi(e->d_name);
	}
	closedir(dir);
	return fd;
}

static inline int th_fd_of(const char *link_want)
{
	return th_fd_where(link_want, NULL);
}

/*
 * A field of an io_uring's fdinfo ("SqTail", "CqHead", ...). SqThread
 * comes after the listing of the queues' entries: up to 16 SQEs and 32
 * CQEs, some 5 KiB (in 1 KiB it was missed, read as 0, when zaps waited).
 */
static inline unsigned int th_ring_field(int fd, const char *field)
{
	char path[64], buf[16384], *s;
	unsigned int v = 0;
	size_t flen = strlen(field);

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	th_read_text(path, buf, sizeof(buf));
	for (s = buf; (s = strstr(s, field)); s += flen)
		if ((s == buf || s[-1] == '\n') && s[flen] == ':') {
			sscanf(s + flen + 1, "%u", &v);
			break;
		}
	return v;
}

/*
 * The ring's SQPOLL thread (0: none). fdinfo says -1 when it cannot tell
 * (the thread's start or end raced with the read; kernels before 6.x
 * when the ring's lock was taken): read again then, for 1 s.
 */
static inline unsigned int th_ring_thread(int fd)
{
	unsigned int thread;

	for (int tries = 0; (thread = th_ring_field(fd, "SqThread")) == (unsigned int)-1; tries++) {
		TH_ASSERT(tries < 1000, "fdinfo of ring %d gave no SQPOLL thread in 1 s", fd);
		usleep(1000);
	}
	return thread;
}

/* Has the io_uring fd a submission thread of this process's own? */
static inline bool th_ring_ours(int fd)
{
	char path[64];
	unsigned int thread = th_ring_thread(fd);

	snprintf(path, sizeof(path), "/proc/self/task/%u", thread);
	return thread && !access(path, F_OK);
}

/*
 * libnpf's eviction ring (npfd alone submits to it): this process's
 * io_uring with a submission thread of this process's own (a forked
 * child holds its parent's rings too), or -1.
 */
static inline int th_evict_ring_fd(void)
{
	return th_fd_where("anon_inode:[io_uring]", th_ring_ours);
}

/* Zaps the eviction ring took and has not completed: SQ tail less CQ tail (fdinfo). */
static inline long th_zaps_in_flight(int fd)
{
	return (long)(th_ring_field(fd, "SqTail") - th_ring_field(fd, "CqTail"));
}

/* Is any VMA of this process's [p, p + len) registered with a userfaultfd ("um" in its smaps VmFlags)? */
static inline bool th_uffd_registered(const char *p, size_t len)
{
	unsigned long lo, hi, s = (unsigned long)p, e = s + len;
	bool in = false, um = false;
	char line[512];
	FILE *f = fopen("/proc/self/smaps", "r");

	TH_ASSERT(f, "smaps: %s", strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx", &lo, &hi) == 2)
			in = hi > s && lo < e;
		else if (in && !strncmp(line, "VmFlags:", 8) && strstr(line, " um"))
			um = true;
	}
	fclose(f);
	return um;
}

/* Word w of page p in generation gen: what the eviction tests write and check. */
static inline __u64 th_word(__u64 gen, __u64 p, __u64 w)
{
	return ((gen << 40) + p * 512 + w) * 0x9e3779b97f4a7c15ULL + 1;
}

/* Generation gen written to pages [first, first + npages) of a region, mem being its page first. */
static inline void th_fill_at(char *mem, __u64 first, __u64 npages, __u64 gen)
{
	for (__u64 p = 0; p < npages; p++)
		for (__u64 w = 0; w < 512; w++)
			((__u64 *)(void *)(mem + p * 4096))[w] = th_word(gen, first + p, w);
}

static inline void th_fill(char *mem, __u64 npages, __u64 gen)
{
	th_fill_at(mem, 0, npages, gen);
}

/* Words of pages [first, first + npages) of a region at mem (its page first) not of generation gen. */
static inline __u64 th_wrong_at(const char *mem, __u64 first, __u64 npages, __u64 gen)
{
	__u64 bad = 0;

	for (__u64 p = 0; p < npages; p++)
		for (__u64 w = 0; w < 512; w++)
			bad += ((const __u64 *)(const void *)(mem + p * 4096))[w] !=
			       th_word(gen, first + p, w);
	return bad;
}

/* Words of the npages pages at mem that do not hold generation gen. */
static inline __u64 th_wrong(const char *mem, __u64 npages, __u64 gen)
{
	return th_wrong_at(mem, 0, npages, gen);
}

/* An unlinked file of npages pages holding generation gen (th_word()); its descriptor. */
static inline int th_gen_file(__u64 npages, __u64 gen)
{
	char path[64] = "/tmp/npf-gen-file-XXXXXX";
	__u64 buf[512];
	int fd = mkstemp(path);

	TH_ASSERT(fd >= 0, "mkstemp: %s", strerror(errno));
	unlink(path);
	for (__u64 p = 0; p < npages; p++) {
		for (__u64 w = 0; w < 512; w++)
			buf[w] = th_word(gen, p, w);
		TH_ASSERT(pwrite(fd, buf, sizeof(buf), (off_t)(p * 4096)) == (ssize_t)sizeof(buf),
			  "write the file: %s", strerror(errno));
	}
	return fd;
}

/*
 * After a restart: wait until the new npfd has adopted c's regions (it
 * answers a budget list), then give region id its budget again (the
 * budget is npfd's: a new one must hear it).
 */
static inline void th_budget_again(struct npf_client *c, int id, size_t budget)
{
	struct npf_budget_info *bi;
	size_t n;

	for (double t0 = th_now(); th_now() - t0 < 20; usleep(10000))
		if (!npf_client__budget_list(c, (__u32)id, &bi, &n)) {
			free(bi);
			break;
		}
	/* the ring comes right after the regions: until it has, a budget is refused */
	for (double t0 = th_now();; usleep(10000)) {
		if (!npf_client__region_set(c, (__u32)id, NPF_SET_BUDGET, budget * 4096, NULL))
			break;
		TH_ASSERT(th_now() - t0 < 5, "set the budget again after a restart: %s",
			  npf_client__errmsg(c));
	}
}

/*
 * Words of the npages pages at mem that do not hold the generation gen[p]
 * last written to their page (zeros before the first); the zeros among
 * them in *zeros, the first page with one in *first (npages if none).
 */
static inline __u64 th_gens_wrong(const char *mem, __u64 npages, const uint32_t *gen, __u64 *zeros,
				  __u64 *first)
{
	__u64 bad = 0;

	*zeros = 0;
	*first = npages;
	for (__u64 p = 0; p < npages; p++)
		for (__u64 w = 0; w < 512; w++) {
			__u64 v = ((const __u64 *)(const void *)(mem + p * 4096))[w];

			if (v == (gen[p] ? th_word(gen[p], p, w) : 0))
				continue;
			bad++;
			*zeros += !v;
			if (*first == npages)
				*first = p;
		}
	return bad;
}

/* No word read back stale by the writers, none wrong now (th_gens_wrong()). */
static inline void th_gens_assert(unsigned long stale, __u64 bad, __u64 zeros, __u64 first,
				  const uint32_t *gen, __u64 npages)
{
	TH_ASSERT(!stale, "%lu words read back were not what was written last", stale);
	TH_ASSERT(!bad, "%llu words wrong (%llu zeros), the first in page %llu (generation %u)",
		  (unsigned long long)bad, (unsigned long long)zeros, (unsigned long long)first,
		  first < npages ? gen[first] : 0);
}

/*
 * An anonymous region of npages pages, registered with c and given a
 * budget of budget pages; its id in *id.
 */
static inline char *th_budget_region(struct npf_client *c, size_t npages, size_t budget, int *id)
{
	char *mem = mmap(NULL, npages * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			 -1, 0);

	TH_ASSERT(mem != MAP_FAILED, "mmap: %s", strerror(errno));
	*id = npf_client__register(c, mem, npages * 4096, NULL);
	TH_ASSERT(*id > 0, "register: %s", npf_client__errmsg(c));
	TH_ASSERT(!npf_client__region_set(c, (__u32)*id, NPF_SET_BUDGET, budget * 4096, NULL),
		  "set budget: %s", npf_client__errmsg(c));
	return mem;
}

/*
 * Wait (10 s at most) until npfd has evicted region id to its low
 * watermark and its last batch is over (the count of evicted pages holds
 * still for 50 ms: a batch counts its pages at its end, after their zaps
 * took them out of the resident count); the pages evicted.
 */
static inline __u64 th_budget_settle(struct npf_client *c, int id)
{
	struct npf_budget_info bi, again;
	double t0 = th_now();

	for (;; usleep(5000)) {
		bi = th_budget(c, id);
		if (th_now() - t0 >= 10)
			return bi.evicted_pages;
		if (bi.resident_pages > bi.low_pages)
			continue;
		usleep(50000);
		again = th_budget(c, id);
		if (again.evicted_pages == bi.evicted_pages)
			return again.evicted_pages;
	}
}

/*
 * A gate in front of npfd's zaps, which the test holds closed as long as
 * it likes: an MADV_DONTNEED queued on the client's SQPOLL thread through
 * a ring of the test's own attached to it (IORING_SETUP_ATTACH_WQ: the
 * same thread, the same io-wq), on a page registered with a userfaultfd
 * of the test's own for REMOVE events. With the io-wq given one worker,
 * that worker waits in the gate until the test reads the REMOVE, and every
 * zap npfd queues meanwhile waits unstarted behind it. The REMOVE is not
 * libnpf's: its userfaultfd lets unprotects through as usual.
 */
struct th_gate {
	struct io_uring ring;
	int uffd;
	char *page;
};

/* Closed: returns once the ring's worker waits in the gate. */
static inline void th_gate_close(struct th_gate *g, int evict_ring_fd)
{
	struct uffdio_api api = {.api = UFFD_API, .features = UFFD_FEATURE_EVENT_REMOVE};
	struct uffdio_register reg = {.mode = UFFDIO_REGISTER_MODE_MISSING};
	struct io_uring_params p = {.flags = IORING_SETUP_SQPOLL | IORING_SETUP_ATTACH_WQ,
				    .wq_fd = (__u32)evict_ring_fd};
	struct io_uring_sqe *sqe;
	struct pollfd pfd;
	__u32 one[2] = {1, 1}; /* bounded and unbounded workers */
	int err;

	TH_ASSERT(!syscall(__NR_io_uring_register, evict_ring_fd, IORING_REGISTER_IOWQ_MAX_WORKERS,
			   one, 2),
		  "IORING_REGISTER_IOWQ_MAX_WORKERS: %s", strerror(errno));
	g->page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	TH_ASSERT(g->page != MAP_FAILED, "mmap: %s", strerror(errno));
	/*
	 * O_NONBLOCK: poll() says POLLERR at once on a blocking userfaultfd.
	 * User mode only: what an unprivileged client may have, and enough
	 * for a REMOVE.
	 */
	g->uffd = (int)syscall(__NR_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
	TH_ASSERT(g->uffd >= 0 && !ioctl(g->uffd, UFFDIO_API, &api), "the gate's userfaultfd: %s",
		  strerror(errno));
	reg.range.start = (uintptr_t)g->page;
	reg.range.len = 4096;
	TH_ASSERT(!ioctl(g->uffd, UFFDIO_REGISTER, &reg), "UFFDIO_REGISTER: %s", strerror(errno));
	err = io_uring_queue_init_params(4, &g->ring, &p);
	TH_ASSERT(!err, "a ring attached to the eviction ring's SQPOLL thread: %s", strerror(-err));
	/* the kernel makes a thread of its own, silently, for another process's ring */
	{
		unsigned int gate = th_ring_thread(g->ring.ring_fd);
		unsigned int evict = th_ring_thread(evict_ring_fd);

		TH_ASSERT(
			gate == evict,
			"the gate's ring did not attach to the eviction ring's SQPOLL thread (%u, not %u)",
			gate, evict);
	}
	sqe = io_uring_get_sqe(&g->ring);
	io_uring_prep_madvise(sqe, g->page, 4096, MADV_DONTNEED);
	TH_ASSERT(io_uring_submit(&g->ring) == 1, "submit the gate");
	pfd = (struct pollfd){.fd = g->uffd, .events = POLLIN};
	TH_ASSERT(poll(&pfd, 1, 10000) == 1, "the ring's worker did not reach the gate in 10 s");
}

/* Opened: the worker goes on to the zaps behind the gate. */
static inline void th_gate_open(struct th_gate *g)
{
	struct io_uring_cqe *cqe;
	struct uffd_msg msg;

	TH_ASSERT(read(g->uffd, &msg, sizeof(msg)) == sizeof(msg) && msg.event == UFFD_EVENT_REMOVE,
		  "the gate's REMOVE");
	TH_ASSERT(!io_uring_wait_cqe(&g->ring, &cqe) && cqe->res == 0, "the gate's completion");
	io_uring_cqe_seen(&g->ring, cqe);
	io_uring_queue_exit(&g->ring);
	close(g->uffd);
	munmap(g->page, 4096);
}

/*
 * Region id (the npages pages at mem), with nobody touching it, given a
 * budget of `pages`: within secs no more than that may stay present. A
 * page left busy for good (a batch cut short, a zap never known done)
 * would stay.
 */
static inline void th_budget_met(struct npf_client *c, int id, const char *mem, __u64 npages,
				 __u64 pages, double secs)
{
	TH_ASSERT(!npf_client__region_set(c, (__u32)id, NPF_SET_BUDGET, pages * 4096, NULL),
		  "set a budget of %llu pages: %s", (unsigned long long)pages,
		  npf_client__errmsg(c));
	for (double t0 = th_now();; usleep(100000)) {
		__u64 present = th_present_pages(mem, npages);

		if (present <= pages) {
			printf("%llu pages present with a budget of %llu\n",
			       (unsigned long long)present, (unsigned long long)pages);
			return;
		}
		TH_ASSERT(
			th_now() - t0 < secs,
			"%llu pages present %.0f s after the budget came down to %llu (npfd counts %llu resident): pages left busy",
			(unsigned long long)present, secs, (unsigned long long)pages,
			(unsigned long long)th_budget(c, id).resident_pages);
	}
}

#endif
