// SPDX-License-Identifier: GPL-2.0
/*
 * KSM merging under a device: B's region holds many identical pages and is
 * MADV_MERGEABLE; with ksmd running, identical pages are merged into one
 * write-protected KSM page each. npfd must invalidate every merged page's
 * entry: the page kept as the KSM page (ksm:ksm_merge_one_page; a device
 * write to it would change every sharer) and the pages replaced by it
 * (ksm:ksm_merge_with_ksm_page, their frames' free). A's next READ faults
 * and reads the right bytes (tests/mm_fixture.h). ksmd's settings are put
 * back as they were, also when the test fails.
 */
#include <signal.h>
#include "mm_fixture.h"

#define KSM "/sys/kernel/mm/ksm/"

static const char *const knobs[] = {"pages_to_scan", "sleep_millisecs", "run"};
static char saved[3][32];
static bool have_saved;

static void ksm_restore(void)
{
	if (!have_saved)
		return;
	/* run first: stop ksmd before slowing it down again */
	mm_write_file(KSM "run", saved[2]);
	mm_write_file(KSM "pages_to_scan", saved[0]);
	mm_write_file(KSM "sleep_millisecs", saved[1]);
}

static void ksm_on_signal(int sig)
{
	ksm_restore();
	signal(sig, SIG_DFL);
	raise(sig);
}

static long full_scans(void)
{
	char v[32];

	return mm_read_file(KSM "full_scans", v, sizeof(v)) ? -1 : atol(v);
}

static __u64 key_dup(__u64 page)
{
	return 7000 + page % 16; /* 16 distinct contents, each 64 times in 4 MiB */
}

static long ksm_merge(char *buf, __u64 len, int fd, const __u64 *before, __u8 *moved)
{
	__u64 n = len / PG, *after = calloc(n, 8), i, j;
	long count = 0, scans;
	double end;
	int err;

	FX_ASSERT(after, "calloc");
	if (madvise(buf, len, MADV_MERGEABLE)) {
		snprintf(mm_skip_reason, sizeof(mm_skip_reason), "MADV_MERGEABLE: %s",
			 strerror(errno));
		free(after);
		return -1;
	}
	scans = full_scans();
	err = mm_write_file(KSM "pages_to_scan", "10000");
	if (!err)
		err = mm_write_file(KSM "sleep_millisecs", "5");
	if (!err)
		err = mm_write_file(KSM "run", "1");
	if (err) {
		ksm_restore();
		snprintf(mm_skip_reason, sizeof(mm_skip_reason), "cannot start ksmd (%s): %s",
			 KSM "run", strerror(-err));
		free(after);
		return -1;
	}
	/* Three full scans: a page is merged on the scan after the one that first sees it. */
	end = th_now() + 20;
	while (full_scans() < scans + 3 && th_now() < end)
		usleep(5000);
	ksm_restore(); /* stopped: merged pages stay merged, nothing more moves */
	mm_pagemap(buf, n, after);
	count = mm_moved(before, after, n, moved);
	/* The page kept as the KSM page keeps its frame: shared with another page now. */
	for (i = 0; i < n; i++)
		for (j = 0; j < n && !moved[i]; j++)
			if (j != i && (after[i] & MM_PRESENT) && (after[j] & MM_PRESENT) &&
			    MM_PFN(after[i]) == MM_PFN(after[j])) {
				moved[i] = 1;
				count++;
			}
	free(after);
	if (!count)
		snprintf(mm_skip_reason, sizeof(mm_skip_reason),
			 "ksmd merged none of the region's identical pages in 3 full scans (20 s)");
	return count ? count : -1;
}

static const struct mm_event ev = {
	.name = "KSM merge (MADV_MERGEABLE)",
	.len = 4UL << 20,
	.key = key_dup,
	.trigger = ksm_merge,
};

int main(void)
{
	int i, r;

	th_require_root();
	for (i = 0; i < 3; i++) {
		char path[96];

		snprintf(path, sizeof(path), KSM "%s", knobs[i]);
		if (mm_read_file(path, saved[i], sizeof(saved[i])))
			th_skip("KSM is not available here (%s: %s)", path, strerror(errno));
	}
	have_saved = true;
	atexit(ksm_restore);
	signal(SIGTERM, ksm_on_signal);
	signal(SIGINT, ksm_on_signal);
	r = mm_run(&ev);
	ksm_restore();
	return r;
}
