// SPDX-License-Identifier: GPL-2.0
/*
 * Swap-out under a device: B's region is paged out with MADV_PAGEOUT to a
 * swap file this test creates (and always removes); npfd must invalidate
 * the entries of every page that went to swap (vmscan:mm_vmscan_write_folio,
 * kmem:mm_page_free), and A's next READ faults them back in with the right
 * bytes (tests/mm_fixture.h).
 */
#include <signal.h>
#include <sys/swap.h>
#include "mm_fixture.h"

#define SWAP_MB 64

static char swap_path[64];
static bool swap_on;

static void swap_cleanup(void)
{
	if (swap_on && swapoff(swap_path))
		fprintf(stderr, "swapoff %s: %s (remove it by hand: swapoff %s; rm %s)\n",
			swap_path, strerror(errno), swap_path, swap_path);
	swap_on = false;
	if (swap_path[0])
		unlink(swap_path);
	swap_path[0] = 0;
}

static void swap_on_signal(int sig)
{
	swap_cleanup();
	signal(sig, SIG_DFL);
	raise(sig);
}

/* A swap file of SWAP_MB MiB in /tmp; false (with the reason) if this machine refuses. */
static bool swap_setup(void)
{
	char cmd[160];
	int fd;

	snprintf(swap_path, sizeof(swap_path), "/tmp/npf-mm-swap-%d", getpid());
	atexit(swap_cleanup);
	signal(SIGTERM, swap_on_signal);
	signal(SIGINT, swap_on_signal);
	fd = open(swap_path, O_CREAT | O_EXCL | O_WRONLY, 0600);
	if (fd < 0 || posix_fallocate(fd, 0, SWAP_MB << 20)) {
		snprintf(mm_skip_reason, sizeof(mm_skip_reason), "cannot create swap file %s: %s",
			 swap_path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return false;
	}
	close(fd);
	snprintf(cmd, sizeof(cmd), "mkswap %s >/dev/null 2>&1", swap_path);
	if (system(cmd)) {
		snprintf(mm_skip_reason, sizeof(mm_skip_reason), "mkswap %s failed", swap_path);
		return false;
	}
	if (swapon(swap_path, 0)) {
		snprintf(mm_skip_reason, sizeof(mm_skip_reason), "swapon %s: %s", swap_path,
			 strerror(errno));
		return false;
	}
	swap_on = true;
	return true;
}

static long pageout(char *buf, __u64 len, int fd, const __u64 *before, __u8 *moved)
{
	__u64 n = len / PG, *after = calloc(n, 8);
	long count;

	FX_ASSERT(after, "calloc");
	FX_ASSERT(!madvise(buf, len, MADV_PAGEOUT), "MADV_PAGEOUT: %s", strerror(errno));
	mm_pagemap(buf, n, after);
	count = mm_moved(before, after, n, moved);
	free(after);
	if (!count)
		snprintf(mm_skip_reason, sizeof(mm_skip_reason),
			 "MADV_PAGEOUT swapped out none of the region's pages");
	return count ? count : -1;
}

static const struct mm_event ev = {
	.name = "swap-out (MADV_PAGEOUT)",
	.len = 4UL << 20,
	.key = mm_key_distinct,
	.trigger = pageout,
	.rounds = 2,
};

int main(void)
{
	int r;

	th_require_root();
	if (!swap_setup()) {
		swap_cleanup();
		th_skip("%s", mm_skip_reason);
	}
	r = mm_run(&ev);
	swap_cleanup();
	return r;
}
