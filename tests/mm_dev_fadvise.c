// SPDX-License-Identifier: GPL-2.0
/*
 * Page-cache eviction of a file-backed region's backing file: npfd reads
 * the file into the region's own private anonymous pages, so dropping the
 * file's cache moves no page a device maps. npfd itself maps the backing
 * file to copy from it (daemon/resolve.c: region_map), which keeps its
 * pages cached against POSIX_FADV_DONTNEED: the test also pages out npfd's
 * mapping of it (process_madvise(MADV_PAGEOUT), as reclaim would). Checked:
 * the file's pages really left the page cache, no page of the region moved,
 * npfd invalidated no entry (the watch identifies frames, not files), and
 * A's next READ reads the right bytes (tests/mm_fixture.h).
 */
#include <sys/syscall.h>
#include "mm_fixture.h"

/* Page out npfd's own mapping of the file open as fd (reclaim of the file's pages). */
static void pageout_npfd_mapping(int fd)
{
	char link[64], path[256], maps[64], line[512];
	unsigned long lo, hi;
	ssize_t n;
	FILE *f;
	int pidfd;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, path, sizeof(path) - 1);
	FX_ASSERT(n > 0, "readlink %s: %s", link, strerror(errno));
	path[n] = 0; /* "/tmp/npf-mm-XXXXXX (deleted)" */
	pidfd = (int)syscall(SYS_pidfd_open, fx_npfd_pid, 0);
	FX_ASSERT(pidfd >= 0, "pidfd_open(npfd %d): %s", fx_npfd_pid, strerror(errno));
	snprintf(maps, sizeof(maps), "/proc/%d/maps", fx_npfd_pid);
	f = fopen(maps, "r");
	FX_ASSERT(f, "open %s: %s", maps, strerror(errno));
	while (fgets(line, sizeof(line), f))
		if (strstr(line, path) && sscanf(line, "%lx-%lx", &lo, &hi) == 2) {
			struct iovec iov = {(void *)lo, hi - lo};

			FX_ASSERT(syscall(SYS_process_madvise, pidfd, &iov, 1, MADV_PAGEOUT, 0) >=
					  0,
				  "process_madvise(npfd, MADV_PAGEOUT): %s", strerror(errno));
		}
	fclose(f);
	close(pidfd);
}

static __u64 file_cached(int fd, __u64 len)
{
	unsigned char *vec = calloc(len / PG, 1);
	__u64 i, cached = 0;
	void *map;

	FX_ASSERT(vec, "calloc");
	map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	FX_ASSERT(map != MAP_FAILED, "mmap the backing file: %s", strerror(errno));
	FX_ASSERT(!mincore(map, len, vec), "mincore: %s", strerror(errno));
	for (i = 0; i < len / PG; i++)
		cached += vec[i] & 1;
	munmap(map, len);
	free(vec);
	return cached;
}

static long fadvise(char *buf, __u64 len, int fd, const __u64 *before, __u8 *moved)
{
	__u64 n = len / PG, *after = calloc(n, 8), cached;
	long count;

	FX_ASSERT(after, "calloc");
	FX_ASSERT(!fdatasync(fd), "fdatasync: %s", strerror(errno));
	pageout_npfd_mapping(fd);
	FX_ASSERT(!posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), "POSIX_FADV_DONTNEED failed");
	cached = file_cached(fd, len);
	printf("B: %llu of %llu pages of the backing file still cached after paging out npfd's mapping and POSIX_FADV_DONTNEED\n",
	       (unsigned long long)cached, (unsigned long long)n);
	FX_ASSERT(cached < n / 2, "POSIX_FADV_DONTNEED left %llu of %llu file pages cached",
		  (unsigned long long)cached, (unsigned long long)n);
	/* Give a (wrong) invalidation time to arrive before the fixture looks. */
	usleep(200 * 1000);
	mm_pagemap(buf, n, after);
	count = mm_moved(before, after, n, moved);
	free(after);
	return count;
}

static const struct mm_event ev = {
	.name = "page-cache eviction of the backing file (POSIX_FADV_DONTNEED)",
	.len = 4UL << 20,
	.file = true,
	.expect_none = true,
	.key = mm_key_distinct,
	.trigger = fadvise,
};

int main(void)
{
	return mm_run(&ev);
}
