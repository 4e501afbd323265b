/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The fault resolver (resolve.c): reads a userfaultfd's faults and events
 * (the events go to their regions), queues pages, and installs each batch.
 * What is done with installed pages and recorded
 * faults above it is told through the hooks main.c sets.
 */
#ifndef NPFD_RESOLVE_H
#define NPFD_RESOLVE_H

#include <stdbool.h>
#include "npf_abi.h"

struct npfd_mm;
struct npfd_region;

struct run;

struct resolve_hooks {
	/*
	 * Pages [start, start + npages) of r were installed (devices waiting
	 * for them); clean: write-protected, as read from their copy.
	 */
	void (*installed)(struct npfd_region *r, __u64 start, __u64 npages, bool clean);
	/*
	 * Pages [start, start + npages) of r were there already (the install
	 * skipped them: EEXIST): devices waiting for them may go on; whether
	 * they are clean is not this install's to say.
	 */
	void (*present)(struct npfd_region *r, __u64 start, __u64 npages);
	/* A write-protect fault (a page installed clean, or being evicted): its waker's. */
	void (*wp_fault)(struct npfd_mm *mm, __u64 addr);
	/* Has the run a page a zap may still drop? Installed write-protected even for a write. */
	bool (*zap_may_run)(const struct run *rn);
	/* Does the run have pages eviction stored? Then install_stored() installs it, unwoken. */
	bool (*stored)(const struct run *rn);
	int (*install_stored)(struct run *rn);
	/* Hold a run of npages of r back (kept for a later flush): its memory limit? */
	bool (*hold)(const struct npfd_region *r, __u64 npages);
	/* A policy asked for the fault at page of r to be recorded (NPF_DECIDE_RECORD). */
	void (*record)(struct npfd_region *r, __u64 page);
};

/* Faults resolved and batches flushed since start (npfctl status). */
extern __u64 resolve_faults_resolved, resolve_batches;

void resolve_set_hooks(const struct resolve_hooks *h);
int resolve_init(unsigned int staging_pages);
void resolve_exit(void);
/* The event-loop handler of an address space's userfaultfd (arg: its npfd_mm). */
void resolve_uffd_ready(void *arg);
/* Install everything queued since the last flush, as one batch. */
void resolve_flush(void);
void resolve_forget_mm(struct npfd_mm *mm);
int resolve_queue(struct npfd_mm *mm, __u64 addr, __u64 raised_ns, bool write);
bool resolve_pending(void);
void resolve_set_fault_around(unsigned int kib);
/*
 * Install run rn's pages from src (rn->npages pages; NULL: zeros) from
 * rn->done on, as a fault's: read faults of a budgeted region
 * write-protected, pages there already skipped (rn->skipped), unmapped
 * ones left out (rn->absent). 0, or the -errno that stopped it (-EAGAIN:
 * an mm event is unread, rn->done says how far it got).
 */
int resolve_install(struct run *rn, const char *src);

/* A late install may still read the staging and bounce buffers: new ones (mmcall.h). */
void resolve_retire_sources(void);

#endif
