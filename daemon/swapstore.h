/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The swap store (swapstore.c): npfd's own file for the dirty pages of
 * anonymous regions that eviction took away. One page per slot; slot 0
 * means "none".
 */
#ifndef NPFD_SWAPSTORE_H
#define NPFD_SWAPSTORE_H

#include <linux/types.h>

/* Create the store in dir (made 0700 if missing); 0 or -errno, logged. */
int swapstore_open(const char *dir);
void swapstore_close(void);
/* The store's descriptor (for io_uring writes), or -1 when it is not open. */
int swapstore_fd(void);
/* A free slot (>= 1), or 0 when none can be had (-ENOSPC, logged). */
__u32 swapstore_alloc(void);
/* One more region holds slot (a forked child's copy): swapstore_free() once more. */
int swapstore_ref(__u32 slot); /* 0, or -ENOMEM: not counted, not shared */
/* One holder less; the last frees the slot: its disk blocks are released (hole punched). */
void swapstore_free(__u32 slot);
/* Byte offset of slot in the store. */
static inline __u64 swapstore_offset(__u32 slot)
{
	return (__u64)(slot - 1) << 12;
}
/* Slots in use, and the most ever used (the file's extent). */
__u64 swapstore_used(void);

#endif
