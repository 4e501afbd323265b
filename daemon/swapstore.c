// SPDX-License-Identifier: GPL-2.0
/*
 * The swap store: where a dirty page of an anonymous region goes when
 * eviction takes it away (a file-backed region's go back to its file).
 *
 * One file in npfd's state directory (swap-dir, npfd.conf(5)), opened
 * O_TMPFILE: it has no name, so an npfd that dies leaves nothing to clean
 * up, and no other process can open it. Slots are pages; a freed slot's
 * blocks are given back to the file system (FALLOC_FL_PUNCH_HOLE), so the
 * file holds only the pages that are evicted now. Free slots are kept in a
 * stack and reused before the file grows.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/falloc.h>
#include "log.h"
#include "util.h"
#include "swapstore.h"

#define SWAPSTORE_MAX_SLOTS (1U << 28) /* 1 TiB of 4 KiB pages */

static int store_fd = -1;
static __u32 next_slot = 1; /* never used yet: the file grows here */
static __u32 *free_slots;   /* stack of freed slots */
static __u16 *extra_refs;   /* per slot: holders beyond the first (forked children) */
static __u32 extra_cap;
static __u32 nfree, free_cap;
static __u64 used;
static char store_dir[256];

int swapstore_open(const char *dir)
{
	snprintf(store_dir, sizeof(store_dir), "%s", dir);
	if (mkdir_p(dir, 0700)) {
		pr_err("swap store: cannot create %s: %s (set swap-dir in npfd.conf)", dir,
		       strerror(errno));
		return -errno;
	}
	store_fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (store_fd < 0) {
		pr_err("swap store: cannot create an unnamed file in %s: %s (its file system must support O_TMPFILE; set swap-dir in npfd.conf)",
		       dir, strerror(errno));
		return -errno;
	}
	return 0;
}

void swapstore_close(void)
{
	if (store_fd >= 0)
		close(store_fd);
	store_fd = -1;
	free(free_slots);
	free_slots = NULL;
	free(extra_refs);
	extra_refs = NULL;
	extra_cap = 0;
	nfree = free_cap = 0;
	next_slot = 1;
	used = 0;
}

int swapstore_fd(void)
{
	return store_fd;
}

__u32 swapstore_alloc(void)
{
	if (store_fd < 0)
		return 0;
	if (nfree) {
		used++;
		return free_slots[--nfree];
	}
	if (next_slot >= SWAPSTORE_MAX_SLOTS) {
		pr_warn_rl("swap store in %s: all %u slots in use: dirty pages stay resident",
			   store_dir, SWAPSTORE_MAX_SLOTS);
		return 0;
	}
	used++;
	return next_slot++;
}

int swapstore_ref(__u32 slot)
{
	if (!slot || store_fd < 0)
		return -EINVAL;
	if (slot >= extra_cap) {
		__u32 cap = extra_cap ? extra_cap : 1024;
		__u16 *p;

		while (cap <= slot)
			cap *= 2;
		p = realloc(extra_refs, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		memset(p + extra_cap, 0, (cap - extra_cap) * sizeof(*p));
		extra_refs = p;
		extra_cap = cap;
	}
	extra_refs[slot]++;
	return 0;
}

void swapstore_free(__u32 slot)
{
	if (!slot || store_fd < 0)
		return;
	if (slot < extra_cap && extra_refs[slot]) {
		extra_refs[slot]--;
		return;
	}
	if (nfree == free_cap) {
		__u32 cap = free_cap ? free_cap * 2 : 1024;
		__u32 *p = realloc(free_slots, cap * sizeof(*p));

		if (!p) {
			/* Leaked, not reused: the store only grows. */
			used--;
			return;
		}
		free_slots = p;
		free_cap = cap;
	}
	if (fallocate(store_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		      (off_t)swapstore_offset(slot), 4096))
		pr_debug("swap store: cannot punch slot %u: %s", slot, strerror(errno));
	free_slots[nfree++] = slot;
	used--;
}

__u64 swapstore_used(void)
{
	return used;
}
