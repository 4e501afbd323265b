/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Regions and the address spaces they live in (region.c; the types are in
 * objects.h): registration, removal, fork, the mm events that move or drop
 * them, and which of their pages npfd installed. What happens above when a
 * region comes or goes (the resolver, devices, policies, working sets) is
 * told through the hooks main.c sets.
 */
#ifndef NPFD_REGION_H
#define NPFD_REGION_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include "npf_abi.h"
#include "bitmap.h"
#include "objects.h"

struct npfd_wait;

struct region_hooks {
	/* An address space's userfaultfd is readable (its event-loop handler; mm is the arg). */
	void (*uffd_ready)(void *mm);
	/* May uid hold that much more? 0, or -errno with the reason in err. */
	int (*uid_limit)(uid_t uid, unsigned int more_regions, unsigned int more_fds, char *err,
			 size_t errlen);
	/* r was registered (or adopted, or a forked child's copy). */
	void (*registered)(struct npfd_region *r);
	/* r was adopted: an earlier npfd served it as old_id (before registered()). */
	void (*adopted)(struct npfd_region *r, __u32 old_id);
	/*
	 * Its process unregisters r and goes on with the memory: what only
	 * npfd holds of it goes back first, while the range is still
	 * registered. 0, or -errno with the reason in err: r stays
	 * registered and served.
	 */
	int (*put_back)(struct npfd_region *r, char *err, size_t errlen);
	/*
	 * r is going (still in its address space). stopping: npfd is
	 * stopping, devices keep their entries for the next npfd; alive: its
	 * process runs and the range was unregistered (devices must
	 * acknowledge); w, if any, is answered when they have.
	 */
	void (*going)(struct npfd_region *r, bool stopping, bool alive, struct npfd_wait *w);
	/* Pages [start, end) of r are gone or moved: devices must not keep them mapped. */
	void (*range_removed)(struct npfd_region *r, __u64 start, __u64 end);
	/*
	 * The process dropped [start, end) of r itself (MADV_DONTNEED,
	 * munmap): a copy kept of those pages is stale (eviction's store).
	 */
	void (*dropped)(struct npfd_region *r, __u64 start, __u64 end);
	/*
	 * [start, end) of mm is being unmapped or moved away (munmap,
	 * mremap), before any region hears of it: whatever is mapped there
	 * next is not what npfd was working on.
	 */
	void (*unmapping)(struct npfd_mm *mm, __u64 start, __u64 end);
	/* munmap cut r's first shift pages off: page-indexed state moves with its start. */
	void (*cut)(struct npfd_region *r, __u64 shift);
	/* mremap moves r whole by delta bytes (called before r->start changes). */
	void (*moved)(struct npfd_region *r, __u64 delta);
	/*
	 * [lo, hi) of r leaves it (a part moved away by mremap), r->start
	 * unchanged: a write-back of its pages in flight is waited for. The
	 * pages whose copies only the swap store (r->store_fd) holds: a map
	 * (bit j: page lo + j pages, its copy at byte *off0 + j pages), or
	 * NULL for none; their slots are the caller's now, to punch.
	 */
	struct bitmap *(*part_leaving)(struct npfd_region *r, __u64 lo, __u64 hi, __u64 *off0);
	/* mm is being torn down: before its regions go, and after. */
	void (*mm_going)(struct npfd_mm *mm);
	void (*mm_gone)(struct npfd_mm *mm);
};

/* Every address space npfd serves, and how many regions they hold. */
extern struct list_head mms;
extern __u32 nr_regions;

void region_set_hooks(const struct region_hooks *h);

struct npfd_mm *mm_new(int uffd, ino_t ino, pid_t tgid, struct npfd_client *owner);
void mm_destroy(struct npfd_mm *mm, bool unregister_ranges);
struct npfd_region *mm_find_region(struct npfd_mm *mm, __u64 addr);
/* A read-only descriptor of mm's layout journal (npf_abi.h NPF_MSG_LAYOUT), or -errno. */
int mm_layout_reader(struct npfd_mm *mm, char *err, size_t errlen);
struct npfd_region *region_find_id(__u32 id);
/*
 * inherit: a forked child's copy of a region takes the parent's holes
 * (NULL: none); adopt_id: see region.c.
 */
int region_register(struct npfd_client *c, const struct npf_region_req *req, int *fds, int nfds,
		    __u32 adopt_id, const struct holes *inherit, struct npf_region_info *out,
		    char *err, size_t errlen);
int region_unregister(struct npfd_client *c, __u32 id, struct npfd_wait *w, char *err,
		      size_t errlen);
void region_remove(struct npfd_region *r, bool unregister_range);
void region_info(const struct npfd_region *r, struct npf_region_info *out);

/* The userfaultfd's events, read by the resolver. */
void mm_unmapped(struct npfd_mm *mm, __u64 start, __u64 end);
void mm_remapped(struct npfd_mm *mm, __u64 from, __u64 to, __u64 len);
void mm_range_removed(struct npfd_mm *mm, __u64 start, __u64 end);

/* Installed pages: set by the resolver, read by prefetch and devices. */
bool region_page_installed(const struct npfd_region *r, __u64 page);
void region_mark_installed(struct npfd_region *r, __u64 start, __u64 npages);
/*
 * Is mm's process still the one that registered? Its pid can name another
 * process once it has exited and been reaped, before npfd learns of it:
 * whatever npfd does by pid (/proc/PID/...) checks this
 * pidfd, taken at the registration, first. A file opened by pid and checked
 * after the open is that process's (mm_open_proc()). Without pidfds (Linux
 * before 5.3) it cannot tell, and says yes.
 */
bool mm_alive(const struct npfd_mm *mm);
/* /proc/PID/file of mm's process, or -1 (ESRCH: it has exited) */
int mm_open_proc(const struct npfd_mm *mm, const char *file, int flags);
/* The /proc/PID/pagemap entries of n pages from va into ent; false if unreadable. */
bool mm_pagemap_read(struct npfd_mm *mm, __u64 va, __u64 *ent, __u64 n);
/*
 * The same, read on the event loop itself, for the device fault path: a
 * hand-over to mmcall.c's thread cost a NIC fault 4-10 times its time. A
 * read that is late moves the loop to another thread and never returns
 * (mmcall_pread_now()).
 */
bool mm_pagemap_read_now(struct npfd_mm *mm, __u64 va, __u64 *ent, __u64 n);
/*
 * Copy len bytes between buf and the process's memory at va (write: into
 * the process), through /proc/PID/mem; the bytes done before the first page
 * that failed, or -1: errno EIO or EFAULT (the first page is not there, or
 * is another userfaultfd's), ESRCH (the process is gone), or the open's.
 * Never waits for a userfaultfd: see region.c.
 */
ssize_t mm_mem_rw(struct npfd_mm *mm, __u64 va, void *buf, size_t len, bool write);
/*
 * Reads of the process's memory in one call: rd[i].off an address; each
 * read's result (got, err) as mm_mem_rw() would give it. 0, or -1 (errno)
 * if none was made.
 */
struct mmcall_read;
int mm_mem_readv(struct npfd_mm *mm, struct mmcall_read *rd, unsigned int n);
/*
 * The pagemap entries of pages page[0..n) in one call (adjacent pages in
 * one read) into ent; an entry that could not be read is unknown. false:
 * none could be read (all unknown).
 */
bool mm_pagemap_read_pages(struct npfd_mm *mm, const __u64 *page, unsigned int n, __u64 *ent,
			   __u64 unknown);
/*
 * /proc/PID/mem of mm's process, opened once (read and write) and closed
 * with mm, or -1: for reads that go through an io_uring (mm watch's swap-in).
 */
int mm_mem_fd(struct npfd_mm *mm);
typedef void (*region_scan_fn)(struct npfd_region *r, __u64 start, __u64 npages, void *arg);
/* r's present pages (wp_only: only those still write-protected), in ranges; -errno */
int region_scan_present(struct npfd_region *r, bool wp_only, region_scan_fn found, void *arg);
/* [start, end) of r left the address space (eviction took it): not installed any more. */
void region_forget_installed(struct npfd_region *r, __u64 start, __u64 end);
/* Is page of r being evicted (devices must not map it meanwhile)? */
static inline bool region_page_evicting(const struct npfd_region *r, __u64 page)
{
	__u64 i = (page - r->start) >> NPF_PAGE_SHIFT;

	return page >= r->start && i < (r->length >> NPF_PAGE_SHIFT) && bitmap_test(r->evicting, i);
}
/* Pages [start, end) of r moved or were freed under npfd (mm watch): tell the devices. */
void region_invalidate(struct npfd_region *r, __u64 start, __u64 end);

#endif
