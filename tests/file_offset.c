// SPDX-License-Identifier: GPL-2.0
/*
 * A file-backed region that starts at a non-zero offset of its file: the
 * first touch of page i reads the file at file_offset + i * 4096, never at
 * i * 4096. Three regions of one file: at 3 pages, at 5 GiB + 8 pages (past
 * 4 GiB: the offset must stay 64-bit end to end, in a sparse file) and,
 * after the first pages of the 3-page one are unmapped, the rest of it,
 * whose offset npfd must move with its start. Every byte is checked against
 * the file, page by page, in an order that mixes single-page faults and
 * runs, through both of npfd's ways to a file page: the region at 5 GiB is
 * cold (io_uring reads at the run's offset), the other warm (copies from
 * npfd's mapping of the file, made at the region's offset).
 */
#include <stdint.h>
#include <sys/mman.h>
#include "harness.h"
#include "npf.h"

#define PG 4096UL
#define NPG 64UL
#define OFF1 (3 * PG)
#define OFF2 ((5ULL << 30) + 8 * PG)

/* Word w of the file's page p: unlike every other word of the file. */
static uint64_t word(uint64_t p, uint64_t w)
{
	return (p * 512 + w) * 0x9e3779b97f4a7c15ULL + 1;
}

static void write_pages(int fd, uint64_t off, uint64_t npages)
{
	uint64_t buf[PG / 8], p, w;

	for (p = off / PG; p < off / PG + npages; p++) {
		for (w = 0; w < PG / 8; w++)
			buf[w] = word(p, w);
		TH_ASSERT(pwrite(fd, buf, PG, (off_t)(p * PG)) == (ssize_t)PG, "write the file: %s",
			  strerror(errno));
	}
}

/* Page i of mem (a region at file offset off) must hold the file's page there. */
static void check(const char *mem, uint64_t i, uint64_t off, const char *what)
{
	const uint64_t *v = (const uint64_t *)(mem + i * PG);
	uint64_t p = off / PG + i, w;

	for (w = 0; w < PG / 8; w++)
		if (v[w] != word(p, w)) {
			uint64_t q, near[] = {0, OFF2 / PG};
			int k;

			/* which page of the file was read instead? */
			for (k = 0; k < 2; k++)
				for (q = near[k]; q < near[k] + 2 * NPG; q++)
					if (v[w] == word(q, w))
						th_fail("%s: page %llu (file offset 0x%llx) holds the "
							"file's bytes at offset 0x%llx",
							what, (unsigned long long)i,
							(unsigned long long)(p * PG),
							(unsigned long long)(q * PG));
			th_fail("%s: page %llu word %llu is 0x%llx, the file at offset 0x%llx has 0x%llx",
				what, (unsigned long long)i, (unsigned long long)w,
				(unsigned long long)v[w], (unsigned long long)(p * PG + w * 8),
				(unsigned long long)word(p, w));
		}
}

static char *region(struct npf_client *c, int fd, uint64_t off, const char *name, int *id)
{
	char *mem =
		mmap(NULL, NPG * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	NPF_OPTS(npf_region_opts, o, .backing = NPF_BACKING_FILE, .backing_fd = fd,
		 .file_offset = off, .name = name);

	TH_ASSERT(mem != MAP_FAILED, "mmap: %s", strerror(errno));
	*id = npf_client__register(c, mem, NPG * PG, &o);
	TH_ASSERT(*id > 0, "register %s at file offset 0x%llx: %s", name, (unsigned long long)off,
		  npf_client__errmsg(c));
	return mem;
}

/*
 * Touch pages [0, npages): the odd ones first, one fault each, backwards;
 * then the even ones, which npfd may batch into runs.
 */
static void touch_all(const char *mem, uint64_t off, uint64_t npages, const char *what)
{
	uint64_t i;

	for (i = npages; i-- > 0;)
		if (i & 1)
			check(mem, i, off, what);
	for (i = 0; i < npages; i += 2)
		check(mem, i, off, what);
}

int main(void)
{
	struct npf_region_stats_full *rs;
	struct th_npfd d;
	struct npf_client *c;
	char path[128], *m1, *m2, *m3;
	int fd, dfd, id1, id2, id3;
	size_t n;

	th_npfd_start(&d, NULL);
	snprintf(path, sizeof(path), "%s/backing", d.dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	TH_ASSERT(fd >= 0, "create %s: %s", path, strerror(errno));
	write_pages(fd, 0, NPG + OFF1 / PG);
	write_pages(fd, OFF2, NPG); /* a hole between: the file is sparse */
	c = npf_client__connect(NULL);
	TH_ASSERT(c, "connect to npfd");

	/*
	 * npfd has two ways to a file page: a copy from its own mapping of the
	 * file when the run is in the page cache, an io_uring read when it is
	 * not. The region at 5 GiB is made cold (written back, then dropped
	 * from the page cache): io_uring reads it. The other one is warm (read
	 * just now): npfd copies from its mapping. (The counters do not tell
	 * the two apart; make mutate shows that each way is checked.)
	 */
	TH_ASSERT(!fdatasync(fd) && !posix_fadvise(fd, (off_t)OFF2, NPG * PG, POSIX_FADV_DONTNEED),
		  "drop the file's pages at 5 GiB from the page cache: %s", strerror(errno));
	{
		static char warm[(NPG + OFF1 / PG) * PG];

		TH_ASSERT(pread(fd, warm, sizeof(warm), 0) == (ssize_t)sizeof(warm),
			  "read the file's first pages: %s", strerror(errno));
	}
	m1 = region(c, fd, OFF1, "at-3-pages", &id1);
	m2 = region(c, fd, OFF2, "at-5GiB", &id2);
	touch_all(m2, OFF2, NPG, "region at 5 GiB + 8 pages (cold)");
	/* unmap m1's first 4 pages (untouched): the region now starts 4 pages later in the file */
	TH_ASSERT(!munmap(m1, 4 * PG), "munmap: %s", strerror(errno));
	touch_all(m1 + 4 * PG, OFF1 + 4 * PG, NPG - 4,
		  "region at 3 pages, its head unmapped (warm)");
	printf("every byte of %lu + %lu pages read from file offsets 0x%llx and 0x%llx\n", NPG - 4,
	       NPG, (unsigned long long)(OFF1 + 4 * PG), (unsigned long long)OFF2);

	/*
	 * An O_DIRECT descriptor (databases open their files so) backs a region
	 * like any other: npfd's checks and reads must use aligned buffers.
	 */
	TH_ASSERT(!posix_fadvise(fd, (off_t)OFF2, NPG * PG, POSIX_FADV_DONTNEED), "fadvise: %s",
		  strerror(errno));
	dfd = open(path, O_RDONLY | O_DIRECT);
	TH_ASSERT(dfd >= 0, "open %s O_DIRECT: %s", path, strerror(errno));
	m3 = region(c, dfd, OFF2, "odirect", &id3);
	touch_all(m3, OFF2, NPG, "region at 5 GiB through an O_DIRECT descriptor");
	close(dfd);

	TH_ASSERT(!npf_client__stats(c, (__u32)id2, &rs, &n) && n == 1, "stats of region %d", id2);
	TH_ASSERT(rs[0].stats.pages_copied == NPG && rs[0].stats.bytes_read >= NPG * PG,
		  "region at 5 GiB: npfd copied %llu pages, read %llu bytes; expected %lu pages",
		  (unsigned long long)rs[0].stats.pages_copied,
		  (unsigned long long)rs[0].stats.bytes_read, NPG);
	free(rs);
	npf_client__close(c);
	close(fd);
	th_npfd_stop(&d);
	unlink(path);
	printf("ok\n");
	return 0;
}
