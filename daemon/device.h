/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Device memory regions (device.c): the software NIC's IO page tables
 * attached to regions; page requests, responses, invalidations.
 */
#ifndef NPFD_DEVICE_H
#define NPFD_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include "npf_abi.h"

struct npfd_client;
struct npfd_mm;
struct npfd_region;
struct npfd_wait;

/* What the layers above hear of devices (set by main.c). */
struct device_hooks {
	/*
	 * A device of r asked for [start, start + npages), or was answered
	 * that it is mapped: it is about to use those pages.
	 */
	void (*wanted)(struct npfd_region *r, __u64 start, __u64 npages);
};

void device_set_hooks(const struct device_hooks *h);
int device_attach(struct npfd_client *c, const struct npf_device_attach_req *req, __u32 adopt_id,
		  int fd, struct npf_device_info *out, char *err, size_t errlen);
int device_detach(struct npfd_client *c, __u32 id, struct npfd_wait *w, char *err, size_t errlen);
/* r is going: retire its devices (w answered when they acknowledge, if process_alive). */
void device_region_gone(struct npfd_region *r, bool process_alive, struct npfd_wait *w);
/* npfd stops: answer the requests still waiting for an acknowledgement. */
void device_retire_stop(void);
void device_mm_gone(struct npfd_mm *mm);
/* Pages [start, end) of r left: clear the devices' entries, tell the NICs. */
void device_range_removed(struct npfd_region *r, __u64 start, __u64 end);
/* The same, for pages eviction takes (they come back when asked for again). */
void device_pages_evicted(struct npfd_region *r, __u64 start, __u64 end);
/* Pages of r were installed: answer the page requests that wait for them. */
void device_pages_installed(struct npfd_region *r, __u64 start, __u64 npages);
/* A device page request read from the ring buffer. */
void device_record(const struct npf_fault_record *rec);
/* Page requests whose policy gave no decision in time get the built-in one. */
void device_await_expire(void);
/* Is something due soon (a policy's decision, an acknowledgement)? */
bool device_awaiting(void);
/* After each resolver batch: answer what is done, wake the NICs. */
void device_flush(void);
/* The devices listed, each with its process's user (a retiring one's region may be gone). */
void device_list(void (*emit)(const struct npf_device_info *, uid_t, void *), void *arg);
/* Eviction: has every device of r acknowledged what it was told to invalidate? */
bool device_region_quiet(struct npfd_region *r);
/* Did a device of r touch page since the last look (its ACCESSED bit, cleared here)? */
bool device_page_referenced(struct npfd_region *r, __u64 page);
/* Descriptors npfd holds for mm's devices (one table each): per-uid limits. */
unsigned int device_fds(const struct npfd_mm *mm);

#endif
