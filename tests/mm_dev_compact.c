// SPDX-License-Identifier: GPL-2.0
/*
 * Migration under a device: writing /proc/sys/vm/compact_memory makes the
 * kernel migrate movable pages, B's among them; npfd must invalidate the
 * entries of every page that got a new frame (the old frame's free,
 * kmem:mm_page_free) and A's next READ faults and reads the right bytes
 * (tests/mm_fixture.h). Compaction chooses what it moves: if it moves none
 * of the region's pages in a few tries, the test skips and says so.
 */
#include "mm_fixture.h"

static long compact(char *buf, __u64 len, int fd, const __u64 *before, __u8 *moved)
{
	__u64 n = len / PG, *after = calloc(n, 8);
	long count = 0;
	int tries, err;

	FX_ASSERT(after, "calloc");
	for (tries = 0; tries < 5 && !count; tries++) {
		err = mm_write_file("/proc/sys/vm/compact_memory", "1");
		if (err) {
			snprintf(mm_skip_reason, sizeof(mm_skip_reason),
				 "writing /proc/sys/vm/compact_memory: %s", strerror(-err));
			free(after);
			return -1;
		}
		mm_pagemap(buf, n, after);
		count = mm_moved(before, after, n, moved);
	}
	free(after);
	if (!count)
		snprintf(mm_skip_reason, sizeof(mm_skip_reason),
			 "compaction (5 tries) migrated none of the region's %llu pages",
			 (unsigned long long)n);
	return count ? count : -1;
}

static const struct mm_event ev = {
	.name = "migration (compact_memory)",
	.len = 16UL << 20,
	.key = mm_key_distinct,
	.trigger = compact,
};

int main(void)
{
	return mm_run(&ev);
}
