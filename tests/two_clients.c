// SPDX-License-Identifier: GPL-2.0
/*
 * Two client processes at once, each with its own file-backed region and
 * its own data: each sees only its own bytes. One is killed with SIGKILL
 * while its threads are faulting; npfd drops it and keeps serving the other.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>
#include "harness.h"
#include "npf.h"

#define REGION (256ULL << 20)
#define PAGES (REGION / 4096)

static struct th_npfd d;

static void make_file(const char *path, uint64_t salt)
{
	uint64_t *buf = malloc(1 << 20), c, i;
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);

	TH_ASSERT(fd >= 0 && buf, "create %s", path);
	for (c = 0; c < REGION >> 20; c++) {
		for (i = 0; i < (1 << 20) / 8; i++)
			buf[i] = ((c << 20) / 8 + i) ^ salt;
		TH_ASSERT(pwrite(fd, buf, 1 << 20, (off_t)(c << 20)) == 1 << 20, "write");
	}
	/* cold: both clients' pages are read with io_uring, in shared batches */
	TH_ASSERT(!fdatasync(fd) && !posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED),
		  "drop %s from the page cache: %s", path, strerror(errno));
	close(fd);
	free(buf);
}

/*
 * A client: registers its file, then reads pages forever (or `pages` of
 * them), checking each word. Reports progress through a pipe.
 */
static void client(const char *path, uint64_t salt, long pages, int report)
{
	struct npf_client *c = npf_client__connect(NULL);
	int fd = open(path, O_RDONLY), id;
	uint64_t seed = salt | 1;
	char *mem;
	long n;

	mem = mmap(NULL, REGION, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	TH_ASSERT(c && fd >= 0 && mem != MAP_FAILED, "client setup: %s", strerror(errno));
	{
		NPF_OPTS(npf_region_opts, o, .backing = NPF_BACKING_FILE, .backing_fd = fd,
			 .name = "client");
		id = npf_client__register(c, mem, REGION, &o);
		TH_ASSERT(id > 0, "register: %s", npf_client__errmsg(c));
	}
	if (write(report, "R", 1) != 1)
		_exit(1);
	for (n = 0; pages < 0 || n < pages; n++) {
		uint64_t p, w;
		const uint64_t *pg;

		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		p = (seed >> 30) % PAGES;
		pg = (const uint64_t *)(mem + p * 4096);
		for (w = 0; w < 512; w += 64)
			if (pg[w] != ((((p * 4096) / 8) + w) ^ salt))
				th_fail("pid %d saw foreign or wrong data at page %llu", getpid(),
					(unsigned long long)p);
		if (n % 256 == 0 && write(report, ".", 1) != 1)
			_exit(1);
	}
	npf_client__close(c);
	_exit(0);
}

static pid_t spawn(const char *path, uint64_t salt, long pages, int *rd)
{
	int p[2];
	pid_t pid;
	char ch;

	TH_ASSERT(pipe(p) == 0, "pipe");
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		client(path, salt, pages, p[1]);
	}
	close(p[1]);
	TH_ASSERT(read(p[0], &ch, 1) == 1 && ch == 'R', "client %d did not register", pid);
	*rd = p[0];
	return pid;
}

int main(void)
{
	char pa[128], pb[128], buf[64];
	struct npf_region_info *ri;
	struct npf_client *c;
	int ra, rb, st;
	pid_t a, b;
	size_t n;
	double t0;

	th_npfd_start(&d, NULL);
	snprintf(pa, sizeof(pa), "%s/a", d.dir);
	snprintf(pb, sizeof(pb), "%s/b", d.dir);
	make_file(pa, 0xaaaaaaaaaaaaaaaaULL);
	make_file(pb, 0x5555555555555555ULL);

	a = spawn(pa, 0xaaaaaaaaaaaaaaaaULL, 20000, &ra);
	b = spawn(pb, 0x5555555555555555ULL, -1, &rb);

	/* Let B get well into faulting, then kill it mid-stream. */
	TH_ASSERT(read(rb, buf, 8) > 0, "client B made no progress");
	usleep(100000);
	kill(b, SIGKILL);
	waitpid(b, &st, 0);
	TH_ASSERT(WIFSIGNALED(st), "client B was not killed (status 0x%x)", st);
	printf("client B (pid %d) killed mid-fault\n", b);

	/* A must finish all its pages with the right data. */
	waitpid(a, &st, 0);
	TH_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "client A failed (status 0x%x)", st);
	printf("client A (pid %d) finished 20000 page reads after B died\n", a);
	TH_ASSERT(th_npfd_alive(&d), "npfd died");

	/* B's region is gone (A closed its own cleanly). */
	c = npf_client__connect(NULL);
	TH_ASSERT(c, "connect");
	for (t0 = th_now();; usleep(10000)) {
		TH_ASSERT(npf_client__region_list(c, &ri, &n) == 0, "region list");
		free(ri);
		if (n == 0)
			break;
		TH_ASSERT(th_now() - t0 < 5, "%zu regions still listed after both clients ended",
			  n);
	}
	npf_client__close(c);
	close(ra);
	close(rb);
	th_npfd_stop(&d);
	unlink(pa);
	unlink(pb);
	printf("ok\n");
	return 0;
}
