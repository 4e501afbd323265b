/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The resolver's batch (resolve.c): the faults it queued, and the runs of
 * contiguous pages of one region it cuts them into. Pure functions, kept
 * apart from resolve.c's globals and ioctls so that tests/unit/runs.c can
 * call them.
 */
#ifndef NPFD_RUNS_H
#define NPFD_RUNS_H

#include <stdbool.h>
#include <stddef.h>
#include <linux/types.h>

struct npfd_mm;
struct npfd_region;

#define MAX_RUN_PAGES 512

struct fault {
	struct npfd_mm *mm;
	__u64 page;
	__u64 raised; /* when the fault was raised (BPF), or when npfd read it */
	__u32 tid;
	bool write;  /* the page will be written at once: install it writable */
	bool cached; /* file-backed: seen in the page cache when queued */
};

struct run {
	struct npfd_mm *mm;
	struct npfd_region *region; /* NULL: no region covers it (see flush) */
	__u64 start;
	__u32 npages;
	__u32 first, nfaults; /* faults[first .. first + nfaults) */
	__u32 staging;	      /* first staging page (file runs read with io_uring) */
	const char *direct;   /* file runs in the page cache: npfd's mapping of the run */
	int status;	      /* 0, or the -errno that stopped the install */
	bool woken;	      /* the install ioctl already woke the whole run */
	/*
	 * Pages the install skipped (EEXIST): they were there already, maybe
	 * installed writable by a write fault and written since, so eviction
	 * must not hear of them as installed clean.
	 */
	__u8 skipped[MAX_RUN_PAGES / 8];
	/*
	 * Pages the install found no mapping for (ENOENT): a hole a munmap or
	 * a partial mremap left in the region. Not installed, nor told so.
	 */
	__u8 absent[MAX_RUN_PAGES / 8];
	bool write;	   /* a fault of the run writes: no read-only zero page */
	bool unservable;   /* its data cannot be had (the backing read failed) */
	__u32 valid_pages; /* unservable: leading pages the read did fill */
	__u64 done;	   /* bytes installed */
};

static inline void run_skipped(struct run *rn, __u32 i)
{
	rn->skipped[i / 8] |= (__u8)(1 << (i % 8));
}

static inline bool run_was_skipped(const struct run *rn, __u32 i)
{
	return rn->skipped[i / 8] & (1 << (i % 8));
}

static inline void run_absent(struct run *rn, __u32 i)
{
	rn->absent[i / 8] |= (__u8)(1 << (i % 8));
}

static inline bool run_was_absent(const struct run *rn, __u32 i)
{
	return rn->absent[i / 8] & (1 << (i % 8));
}

/* Sort f[0..n) by address space and page, merge faults on one page; returns the new n. */
size_t faults_dedupe(struct fault *f, size_t n);

/*
 * Cut f[pos..n) (sorted, deduplicated) into runs, as many as fit a staging
 * buffer of staging_pages pages, into *runs (grown as needed, *cap its
 * size). A file run for which direct() gives npfd's mapping (all its pages
 * in the page cache) is copied from there and takes no staging; direct may
 * be NULL (no run is). Returns the number of runs; *next is the first fault
 * left for the next round.
 */
size_t runs_make(const struct fault *f, size_t n, size_t pos, unsigned int staging_pages,
		 const char *(*direct)(const struct run *rn), struct run **runs, size_t *cap,
		 size_t *next);

#endif
