// SPDX-License-Identifier: GPL-2.0
/*
 * Fault-around, npfd's built-in decision for CPU faults: one fault of a
 * file-backed region whose file is in the page cache installs the other
 * pages of its aligned 64 KiB block with it (one fault, 16 pages, every
 * byte the file's); an anonymous region's block is zero-filled; a page
 * that is present is never overwritten; a cold file brings in only the
 * faulting page (fault-around costs no I/O); a region's own size
 * (fault_around_kib) and exact (NPF_FAULT_AROUND_EXACT) are honoured, a
 * bad size refused; npfd --fault-around-kib 0 makes exact the default. A
 * file truncated under a region (npfd maps it to copy page-cache pages)
 * raises SIGBUS past its end (never zeros), and npfd lives on. A tmpfs file's pages
 * are copied without an io_uring worker thread (iou-wrk: io_uring reads of
 * tmpfs cannot be done inline).
 */
#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdint.h>
#include <sys/mman.h>
#include "harness.h"
#include "npf.h"

#define PAGES 256
#define LEN (PAGES * 4096UL)
#define BLOCK (64 * 1024UL)

static struct th_npfd d;
static struct npf_client *c;
static int file_fd;
static char file_path[64];

static sigjmp_buf past_end;

static void on_sigbus(int sig)
{
	siglongjmp(past_end, 1);
}

static uint64_t pattern(uint64_t off)
{
	return off * 0x9E3779B97F4A7C15ULL + 7;
}

/* LEN bytes of anonymous memory aligned to 64 KiB (blocks are aligned in the address space). */
static char *map_aligned(void)
{
	char *m =
		mmap(NULL, LEN + BLOCK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *a;

	TH_ASSERT(m != MAP_FAILED, "mmap: %s", strerror(errno));
	a = (char *)(((uintptr_t)m + BLOCK - 1) & ~(BLOCK - 1));
	if (a > m)
		munmap(m, (size_t)(a - m));
	munmap(a + LEN, (size_t)(m + BLOCK - a));
	return a;
}

static int reg(char *mem, int backing, int fault_around_kib)
{
	NPF_OPTS(npf_region_opts, o, .backing = (__u32)backing, .name = "fault-around",
		 .fault_around_kib = fault_around_kib);
	int id;

	if (backing == NPF_BACKING_FILE)
		o.backing_fd = file_fd;
	id = npf_client__register(c, mem, LEN, &o);
	TH_ASSERT(id > 0, "register: %s", npf_client__errmsg(c));
	return id;
}

static struct npf_region_stats stats(int id)
{
	struct npf_region_stats_full *sf;
	struct npf_region_stats s;
	size_t n;

	TH_ASSERT(!npf_client__stats(c, (__u32)id, &sf, &n) && n == 1, "stats: %s",
		  npf_client__errmsg(c));
	s = sf->stats;
	free(sf);
	return s;
}

/* Which pages of mem are present (npfd installed them), as a count and a first/last. */
static unsigned int present(char *mem, unsigned int *first, unsigned int *last)
{
	unsigned char vec[PAGES];
	unsigned int i, n = 0;

	TH_ASSERT(!mincore(mem, LEN, vec), "mincore: %s", strerror(errno));
	*first = PAGES;
	*last = 0;
	for (i = 0; i < PAGES; i++)
		if (vec[i] & 1) {
			n++;
			*first = *first < i ? *first : i;
			*last = i;
		}
	return n;
}

static void check_file_page(const char *mem, unsigned int page)
{
	const uint64_t *w = (const uint64_t *)(mem + page * 4096UL);
	unsigned int i;

	for (i = 0; i < 512; i++)
		TH_ASSERT(w[i] == pattern(page * 4096UL + i * 8UL),
			  "page %u word %u is 0x%llx, the file says 0x%llx", page, i,
			  (unsigned long long)w[i],
			  (unsigned long long)pattern(page * 4096UL + i * 8UL));
}

/* Read page `page` of a fresh region; returns (faults, pages installed, pages present). */
static void one_fault(int backing, int fa_kib, unsigned int page, unsigned int want_pages,
		      const char *what)
{
	char *mem = map_aligned();
	int id = reg(mem, backing, fa_kib);
	unsigned int first, last, n, want_first;
	struct npf_region_stats s;

	(void)*(volatile char *)(mem + page * 4096UL);
	s = stats(id);
	n = present(mem, &first, &last);
	printf("%s: 1 fault at page %u: %llu fault(s), %llu pages installed, %u present (%u-%u)\n",
	       what, page, (unsigned long long)s.uffd_faults,
	       (unsigned long long)(s.pages_copied + s.pages_zeroed), n, first, last);
	TH_ASSERT(s.uffd_faults == 1, "%s: %llu faults", what, (unsigned long long)s.uffd_faults);
	TH_ASSERT(s.pages_copied + s.pages_zeroed == want_pages && n == want_pages,
		  "%s: %llu pages installed, %u present, want %u", what,
		  (unsigned long long)(s.pages_copied + s.pages_zeroed), n, want_pages);
	/* The block is aligned in the address space (mem: to 64 KiB only), as the kernel's. */
	want_first = (unsigned int)((((uintptr_t)mem + page * 4096UL) &
				     ~((uintptr_t)want_pages * 4096 - 1)) -
				    (uintptr_t)mem) /
		     4096;
	TH_ASSERT(first == want_first && last == first + want_pages - 1,
		  "%s: pages %u-%u present, want the aligned block of page %u (%u-%u)", what, first,
		  last, page, want_first, want_first + want_pages - 1);
	if (backing == NPF_BACKING_FILE)
		for (n = first; n <= last; n++)
			check_file_page(mem, n);
	munmap(mem, LEN);
}

static void make_file(void)
{
	uint64_t *buf = malloc(LEN), i;

	snprintf(file_path, sizeof(file_path), "/var/tmp/npf-test-fa-XXXXXX");
	file_fd = mkstemp(file_path);
	TH_ASSERT(file_fd >= 0 && buf, "create a file in /var/tmp: %s", strerror(errno));
	unlink(file_path);
	for (i = 0; i < LEN / 8; i++)
		buf[i] = pattern(i * 8);
	TH_ASSERT(pwrite(file_fd, buf, LEN, 0) == (ssize_t)LEN && !fsync(file_fd), "write: %s",
		  strerror(errno));
	TH_ASSERT(pread(file_fd, buf, LEN, 0) == (ssize_t)LEN, "read back"); /* warm */
	free(buf);
}

/* Is none of the file in the page cache? */
static bool file_cold(void)
{
	unsigned char vec[PAGES];
	void *m = mmap(NULL, LEN, PROT_READ, MAP_SHARED, file_fd, 0);
	unsigned int i;
	bool cold = m != MAP_FAILED && !mincore(m, LEN, vec);

	for (i = 0; cold && i < PAGES; i++)
		cold = !(vec[i] & 1);
	if (m != MAP_FAILED)
		munmap(m, LEN);
	return cold;
}

/* npfd's io_uring worker threads (comm "iou-wrk-PID") right now. */
static int io_workers(pid_t pid)
{
	char path[64], comm[32];
	struct dirent *e;
	int n = 0;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	dir = opendir(path);
	TH_ASSERT(dir, "%s: %s", path, strerror(errno));
	while ((e = readdir(dir))) {
		FILE *f;

		snprintf(path, sizeof(path), "/proc/%d/task/%.16s/comm", pid, e->d_name);
		f = fopen(path, "re");
		if (!f)
			continue;
		if (fgets(comm, sizeof(comm), f) && !strncmp(comm, "iou-wrk", 7))
			n++;
		fclose(f);
	}
	closedir(dir);
	return n;
}

/* Every page of a region backed by a tmpfs file: read, checked, no io_uring worker. */
static void tmpfs_no_worker(void)
{
	uint64_t *buf = malloc(LEN);
	char path[64];
	unsigned int i;
	int fd, id;
	char *mem;

	snprintf(path, sizeof(path), "/dev/shm/npf-test-fa-XXXXXX");
	fd = mkstemp(path);
	if (fd < 0) {
		printf("tmpfs: skipped (no /dev/shm: %s)\n", strerror(errno));
		free(buf);
		return;
	}
	unlink(path);
	for (i = 0; i < LEN / 8; i++)
		buf[i] = pattern(i * 8UL);
	TH_ASSERT(buf && pwrite(fd, buf, LEN, 0) == (ssize_t)LEN, "write %s", path);
	mem = map_aligned();
	{
		NPF_OPTS(npf_region_opts, o, .backing = NPF_BACKING_FILE, .backing_fd = fd);

		id = npf_client__register(c, mem, LEN, &o);
		TH_ASSERT(id > 0, "register: %s", npf_client__errmsg(c));
	}
	for (i = 0; i < PAGES; i++)
		check_file_page(mem, i);
	printf("tmpfs file: %d pages read in %llu faults, npfd has %d io_uring worker threads\n",
	       PAGES, (unsigned long long)stats(id).uffd_faults, io_workers(d.pid));
	TH_ASSERT(io_workers(d.pid) == 0,
		  "npfd read page-cache pages of a tmpfs file through an io_uring worker");
	munmap(mem, LEN);
	close(fd);
	free(buf);
}

int main(void)
{
	static const char *const exact_args[] = {"--fault-around-kib", "0", NULL};
	char *mem;
	int id;

	th_require_root();
	make_file();
	th_npfd_start(&d, NULL);
	c = npf_client__connect(NULL);
	TH_ASSERT(c, "connect: %s", strerror(errno));

	tmpfs_no_worker(); /* first: an npfd that read nothing yet has no worker */
	one_fault(NPF_BACKING_FILE, 0, 21, 16, "file, warm, default");
	one_fault(NPF_BACKING_ANON, 0, 40, 16, "anonymous, default");
	one_fault(NPF_BACKING_FILE, NPF_FAULT_AROUND_EXACT, 21, 1, "file, region exact");
	one_fault(NPF_BACKING_FILE, 256, 100, 64, "file, region 256 KiB");

	/* A present page is never overwritten: a fault-around over it leaves it as it is. */
	mem = map_aligned();
	id = reg(mem, NPF_BACKING_FILE, 0);
	(void)*(volatile char *)(mem + 21 * 4096UL);
	memset(mem + 20 * 4096UL, 0x5a, 4096); /* installed by the fault at 21: no fault */
	TH_ASSERT(!madvise(mem + 25 * 4096UL, 4096, MADV_DONTNEED), "MADV_DONTNEED");
	(void)*(volatile char *)(mem + 25 * 4096UL); /* faults again: block 16-31 around it */
	TH_ASSERT(stats(id).uffd_faults == 2, "%llu faults, want 2 (21, then 25 again)",
		  (unsigned long long)stats(id).uffd_faults);
	for (unsigned int i = 0; i < 4096; i++)
		TH_ASSERT((unsigned char)mem[20 * 4096UL + i] == 0x5a,
			  "byte %u of page 20 was overwritten by the fault-around of page 25", i);
	check_file_page(mem, 25);
	printf("present page 20 kept its bytes through the fault-around of page 25\n");
	munmap(mem, LEN);

	/* The file cut in half under a warm region: the rest raises SIGBUS, npfd lives. */
	{
		int tfd;
		char tpath[64];
		uint64_t *buf = malloc(LEN);
		unsigned int i;

		snprintf(tpath, sizeof(tpath), "/var/tmp/npf-test-fa-t-XXXXXX");
		tfd = mkstemp(tpath);
		TH_ASSERT(tfd >= 0 && buf, "create: %s", strerror(errno));
		unlink(tpath);
		for (i = 0; i < LEN / 8; i++)
			buf[i] = pattern(i * 8UL);
		TH_ASSERT(pwrite(tfd, buf, LEN, 0) == (ssize_t)LEN, "write");
		mem = map_aligned();
		{
			NPF_OPTS(npf_region_opts, o, .backing = NPF_BACKING_FILE,
				 .backing_fd = tfd);

			id = npf_client__register(c, mem, LEN, &o);
			TH_ASSERT(id > 0, "register: %s", npf_client__errmsg(c));
		}
		(void)*(volatile char *)(mem + 10 * 4096UL); /* maps the file in npfd */
		TH_ASSERT(!ftruncate(tfd, LEN / 2), "ftruncate");
		/* past the end there is no data: SIGBUS, never zeros (issue 10) */
		signal(SIGBUS, on_sigbus);
		for (i = PAGES / 2; i < PAGES; i++)
			TH_ASSERT(sigsetjmp(past_end, 1) ||
					  (*(volatile uint64_t *)(mem + i * 4096UL), 0),
				  "page %u past the end of the truncated file did not raise SIGBUS",
				  i);
		signal(SIGBUS, SIG_DFL);
		check_file_page(mem, PAGES / 2 - 1);
		TH_ASSERT(th_npfd_alive(&d), "npfd died when the file was truncated");
		printf("file truncated under its region: pages past its end raise SIGBUS\n");
		munmap(mem, LEN);
		close(tfd);
		free(buf);
	}

	/* A cold file: fault-around adds no I/O, only the faulting page is read. */
	TH_ASSERT(!posix_fadvise(file_fd, 0, 0, POSIX_FADV_DONTNEED), "POSIX_FADV_DONTNEED");
	if (file_cold())
		one_fault(NPF_BACKING_FILE, 0, 21, 1, "file, cold, default");
	else
		printf("cold file: skipped (the page cache kept the file after POSIX_FADV_DONTNEED)\n");

	/* A size that is not a power of two is refused, naming the problem. */
	{
		NPF_OPTS(npf_region_opts, o, .fault_around_kib = 48);

		mem = map_aligned();
		id = npf_client__register(c, mem, LEN, &o);
		TH_ASSERT(id == -EINVAL && strstr(npf_client__errmsg(c), "power of two"),
			  "48 KiB fault-around: got %d (%s), want -EINVAL", id,
			  npf_client__errmsg(c));
		munmap(mem, LEN);
	}
	npf_client__close(c);
	th_npfd_stop(&d);

	/* npfd --fault-around-kib 0: the faulting page only, unless a region says otherwise. */
	{
		char *buf = malloc(LEN);

		TH_ASSERT(buf && pread(file_fd, buf, LEN, 0) == (ssize_t)LEN, "warm the file");
		free(buf);
	}
	th_npfd_start(&d, exact_args);
	c = npf_client__connect(NULL);
	TH_ASSERT(c, "connect: %s", strerror(errno));
	one_fault(NPF_BACKING_FILE, 0, 21, 1, "npfd --fault-around-kib 0");
	one_fault(NPF_BACKING_FILE, 64, 21, 16, "npfd --fault-around-kib 0, region 64 KiB");
	npf_client__close(c);
	th_npfd_stop(&d);
	close(file_fd);
	printf("ok\n");
	return 0;
}
