// SPDX-License-Identifier: GPL-2.0
/*
 * Page-cache eviction of a file-backed region's backing file: npfd reads
 * the file into the region's own private anonymous pages, so dropping the
 * file's cache (POSIX_FADV_DONTNEED) moves no page a device maps. Checked:
 * the file's pages really left the page cache, no page of the region moved,
 * npfd invalidated no entry (the watch identifies frames, not files), and
 * A's next READ reads the right bytes (tests/mm_fixture.h).
 */
#include "mm_fixture.h"

static long fadvise(char *buf, __u64 len, int fd, const __u64 *before, __u8 *moved)
{
	__u64 n = len / PG, *after = calloc(n, 8), i, cached = 0;
	unsigned char *vec = calloc(n, 1);
	void *map;
	long count;

	FX_ASSERT(after && vec, "calloc");
	FX_ASSERT(!fdatasync(fd), "fdatasync: %s", strerror(errno));
	FX_ASSERT(!posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), "POSIX_FADV_DONTNEED failed");
	map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	FX_ASSERT(map != MAP_FAILED, "mmap the backing file: %s", strerror(errno));
	FX_ASSERT(!mincore(map, len, vec), "mincore: %s", strerror(errno));
	for (i = 0; i < n; i++)
		cached += vec[i] & 1;
	munmap(map, len);
	printf("B: %llu of %llu pages of the backing file still cached after POSIX_FADV_DONTNEED\n",
	       (unsigned long long)cached, (unsigned long long)n);
	FX_ASSERT(cached < n / 2, "POSIX_FADV_DONTNEED left %llu of %llu file pages cached",
		  (unsigned long long)cached, (unsigned long long)n);
	/* Give a (wrong) invalidation time to arrive before the fixture looks. */
	usleep(200 * 1000);
	mm_pagemap(buf, n, after);
	count = mm_moved(before, after, n, moved);
	free(after);
	free(vec);
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
