/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Budgets and eviction (evict.c): how many pages of a region npfd keeps
 * installed, and taking pages away -- devices first, then the CPU's page,
 * with its data written back -- when a region or a client goes over.
 */
#ifndef NPFD_EVICT_H
#define NPFD_EVICT_H

#include <stdbool.h>
#include <stddef.h>
#include <linux/types.h>
#include "npf_abi.h"

struct npfd_client;
struct npfd_mm;
struct npfd_region;
struct npfd_wait;
struct run;

/* What eviction tells the layers above it (main.c connects them). */
struct evict_hooks {
	/*
	 * A region can be evicted now (its process's eviction ring came, or
	 * it registered with the ring there): called before the client
	 * budget is applied to it, so a budget set here takes precedence.
	 */
	void (*region_evictable)(struct npfd_region *r);
};

/* Start-up: the swap store in swap_dir; 0 or -errno (logged). */
int evict_init(const char *swap_dir, const struct evict_hooks *hooks);
/* npfd stops: the pages only its swap store holds go back to their processes. */
void evict_stop(void);
/* Pages of r only its swap store holds. */
__u64 evict_stored_only(const struct npfd_region *r);
/* Has an unregister's put-back of r done a step, and more are to come? */
bool evict_put_back_under_way(const struct npfd_region *r);
/*
 * r is unregistered, its process lives: its evicted pages go back into it,
 * a step at a time. 0 when all are back, -EINPROGRESS when a step went
 * back and more are left (the client asks again), -EAGAIN when a zap may
 * still drop one, or the -errno of the first that could not.
 */
int evict_put_back(struct npfd_region *r);
void evict_exit(void);
/* npfd.conf: client-budget-mib (0: none), budget-high-pct, budget-low-pct. */
void evict_set_config(unsigned int client_budget_mib, unsigned int high_pct, unsigned int low_pct);

/* Control requests. */
int evict_region_set(struct npfd_client *c, const struct npf_region_set_req *req,
		     struct npf_budget_info *out, char *err, size_t errlen);
/* The caller checked the sender's descriptor limit: npfd keeps the ring's. */
int evict_ring_adopt(struct npfd_client *c, const struct npf_evict_ring_req *req, char *err,
		     size_t errlen);
void evict_budget_list(__u32 region_id, void (*emit)(const struct npf_budget_info *, void *),
		       void *arg);

/*
 * fork() of a client (npf_abi.h NPF_MSG_FORK_PREPARE): the parent's
 * eviction stops and its stores are copied for the child; done, the copies
 * not taken go and eviction goes on.
 */
struct fork_copy;
int evict_fork_prepare(struct npfd_client *c, struct npf_fork_info *out, char *err, size_t errlen);
int evict_fork_done(struct npfd_client *c, const struct npf_fork_req *req, char *err,
		    size_t errlen);
/*
 * The child's region req: checked against the fork under way, and *copy
 * is what it gets (NULL: the parent's region had nothing stored); *parent
 * the forking address space.
 */
int evict_fork_find(const struct npfd_client *c, const struct npf_region_forked_req *req,
		    struct fork_copy **copy, struct npfd_mm **parent, char *err, size_t errlen);
/* r, just registered by the child, takes copy (the pages it has are installed ones). */
void evict_fork_take(struct npfd_region *r, struct fork_copy *copy);
/* The copies a fork of mm keeps open (per-uid descriptor limits). */
unsigned int evict_fork_fds(const struct npfd_mm *mm);

/* Region and address-space life (region.c's hooks). */
void evict_region_registered(struct npfd_region *r);
/*
 * r was adopted from an earlier npfd that knew it as old_id: the pages
 * that npfd evicted to r's swap store are read back from there.
 */
void evict_region_adopted(struct npfd_region *r, __u32 old_id);
/*
 * r goes; stopping: npfd stops, and a store still holding pages stays for
 * the next npfd. w, if any (an unregister), is answered only once no zap
 * is in flight in the client's ring and no batch of its process is under
 * way: the process may unmap the range and map something else there as
 * soon as it has the answer.
 */
void evict_region_gone(struct npfd_region *r, bool stopping, struct npfd_wait *w);
void evict_mm_gone(struct npfd_mm *mm);
/*
 * A read-only descriptor of anonymous region r's swap store for its
 * process (made now, empty, if it has none), or -1: the process reads its
 * evicted pages there if npfd dies and does not come back.
 */
int evict_store_reader(struct npfd_region *r);

/* The resolver's hooks (main.c connects them). */
/* A write-protect fault: handled (woken now or when its eviction ends). */
void evict_wp_fault(struct npfd_mm *mm, __u64 addr);
/* [start, +npages) of r was installed; write-protected if wp. */
void evict_installed(struct npfd_region *r, __u64 start, __u64 npages, bool wp);
/* [start, +npages) of r was there already when an install came: referenced. */
void evict_present(struct npfd_region *r, __u64 start, __u64 npages);
/*
 * Should a fault of npages in r wait (r or its client is well over its
 * budget and eviction is making room)? The resolver asks again later.
 */
bool evict_hold(const struct npfd_region *r, __u64 npages);
/*
 * Has the run a page a zap of npfd's may still drop, its REMOVE come or not?
 * Then it is installed write-protected even for a write: the write waits.
 */
bool evict_run_zap_may_run(const struct run *rn);
/* Does the run have pages in the swap store? Then evict_install_stored() installs it. */
bool evict_run_stored(const struct run *rn);
int evict_install_stored(struct run *rn);
/* [start, end) of r left the address space (the process's own munmap, MADV_DONTNEED). */
void evict_range_removed(struct npfd_region *r, __u64 start, __u64 end);
/* r's first page moved up by shift pages (munmap of its head): its page state follows. */
/* A device wants [start, start + npages) of r (asked, or answered): no victims until it used them. */
void evict_device_wanted(struct npfd_region *r, __u64 start, __u64 npages);
void evict_region_cut(struct npfd_region *r, __u64 shift);
void evict_region_moved(struct npfd_region *r, __u64 delta);
/* region_hooks.part_leaving. */
struct bitmap *evict_part_leaving(struct npfd_region *r, __u64 lo, __u64 hi, __u64 *off0);
void evict_range_unmapped(struct npfd_mm *mm, __u64 start, __u64 end);

/* The event loop. */
void evict_tick(void);
/* A batch under way, or an unregister waiting for its ring's zaps: tick again soon. */
bool evict_busy(void);

/* A late install may still read the stored pages' buffer: a new one (mmcall.h). */
void evict_retire_sources(void);

#endif
