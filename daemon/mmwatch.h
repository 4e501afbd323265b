/* SPDX-License-Identifier: GPL-2.0 */
/*
 * mm watch (mmwatch.c): BPF on mm tracepoints tells npfd when the kernel
 * frees or moves a page frame a device maps; npfd invalidates its entry
 * (region_invalidate(): the devices, above, hear of it through a hook).
 */
#ifndef NPFD_MMWATCH_H
#define NPFD_MMWATCH_H

#include <linux/types.h>

struct npfd_region;

/* Attached while at least one device is: device.c counts them in and out. */
void mmwatch_device_attached(void);
void mmwatch_device_detached(void);
/* Device entries of [va, va + npages pages) of r were just set present: their frames get watched. */
void mmwatch_mapped(struct npfd_region *r, __u64 va, __u64 npages);
/* End of a loop pass: track the frames of the entries mapped during it. */
void mmwatch_flush(void);
/* Once per loop pass: read the ring if a record waits there without a wakeup. */
void mmwatch_tick(void);
/* Where npf_mm_pfns is pinned (npfd's --bpffs), for bpftool and tests. */
void mmwatch_set_pin_dir(const char *dir);
void mmwatch_close(void);

#endif
