// SPDX-License-Identifier: GPL-2.0
/*
 * THP collapse under a device: MADV_COLLAPSE copies B's 4 KiB pages into a
 * huge page and frees them; npfd must invalidate every entry (the old
 * frames' free, kmem:mm_page_free; huge_memory:mm_collapse_huge_page names
 * only the mm) and A's next READ faults and reads the right bytes
 * (tests/mm_fixture.h).
 */
#include "mm_fixture.h"

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

static long collapse(char *buf, __u64 len, int fd, const __u64 *before, __u8 *moved)
{
	__u64 n = len / PG, *after = calloc(n, 8);
	long count;

	FX_ASSERT(after, "calloc");
	if (madvise(buf, len, MADV_COLLAPSE)) {
		snprintf(mm_skip_reason, sizeof(mm_skip_reason),
			 "MADV_COLLAPSE of a registered region: %s (THP: %s)", strerror(errno),
			 "see /sys/kernel/mm/transparent_hugepage/enabled");
		free(after);
		return -1;
	}
	mm_pagemap(buf, n, after);
	count = mm_moved(before, after, n, moved);
	free(after);
	if (!count)
		snprintf(mm_skip_reason, sizeof(mm_skip_reason),
			 "MADV_COLLAPSE succeeded but moved none of the region's pages");
	return count ? count : -1;
}

static const struct mm_event ev = {
	.name = "THP collapse (MADV_COLLAPSE)",
	.len = 4UL << 20,
	.key = mm_key_distinct,
	.trigger = collapse,
};

int main(void)
{
	return mm_run(&ev);
}
