/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The zaps (MADV_DONTNEED entries) npfd puts in the client's eviction
 * ring, read from its mapped submission queue (the layout is learnt from
 * a ring of the same size). The queue holds only the last
 * NPF_EVICT_RING_ENTRIES entries, and a batch may submit more zaps at once
 * than that (one per run of victims): zap_log_poll(), called often, logs
 * each batch's last ones, and the log grows as batches come -- a look at
 * the end alone would see only the last batch's.
 */
#ifndef NPF_TEST_ZAP_LOG_H
#define NPF_TEST_ZAP_LOG_H

#include "budget.h"

struct zap_log {
	const char *sq;
	const struct io_uring_sqe *sqes;
	size_t sq_len, sqes_len;
	const unsigned int *tail, *array;
	unsigned int mask, entries, seen;
	const char *mem; /* the region watched: npages pages */
	__u64 npages;
	unsigned int n;	   /* zaps logged */
	__u64 twice;	   /* pages under two of them */
	unsigned int *zap; /* per page: its zap, 1 for the first logged, ..., 0 for none */
};

/* Logs the zaps submitted since the last look that the queue still holds. */
static inline void zap_log_poll(struct zap_log *l)
{
	unsigned int tail = __atomic_load_n(l->tail, __ATOMIC_ACQUIRE);
	uintptr_t lo = (uintptr_t)l->mem, hi = lo + l->npages * 4096;

	if (tail - l->seen > l->entries) /* overwritten: only the last ones are there */
		l->seen = tail - l->entries;
	for (; l->seen != tail; l->seen++) {
		const struct io_uring_sqe *e = &l->sqes[l->array[l->seen & l->mask] & l->mask];

		if (e->opcode != IORING_OP_MADVISE)
			continue;
		l->n++;
		for (__u64 a = e->addr; a < e->addr + e->len; a += 4096)
			if (a >= lo && a < hi) {
				l->twice += l->zap[(a - lo) / 4096] != 0;
				l->zap[(a - lo) / 4096] = l->n;
			}
	}
}

/*
 * Logs the zaps of ring fd on the npages pages at mem from now on, and
 * the last `back` ones its queue still holds, or with back
 * ZAP_LOG_IN_FLIGHT every one not completed (a log started before is
 * started anew). Behind a closed gate, ZAP_LOG_IN_FLIGHT logs them all:
 * the ring's one worker finished every zap ahead of the gate before it
 * reached it, and npfd may have queued more behind it before the log
 * starts (15 of 16, in 1 of 15 runs of tests/evict_adopt_frozen).
 */
#define ZAP_LOG_IN_FLIGHT (-1L)
static inline void zap_log_start(struct zap_log *l, int fd, long back, const char *mem,
				 __u64 npages)
{
	static struct io_uring_params p; /* the layout: learnt once */
	unsigned int tail;

	if (l->sq) {
		munmap((void *)l->sq, l->sq_len);
		munmap((void *)l->sqes, l->sqes_len);
	}
	if (!p.sq_entries) {
		int probe = (int)syscall(__NR_io_uring_setup, NPF_EVICT_RING_ENTRIES, &p);

		TH_ASSERT(probe >= 0, "io_uring_setup: %s", strerror(errno));
		close(probe);
	}
	l->sq_len = p.sq_off.array + p.sq_entries * sizeof(__u32);
	l->sqes_len = p.sq_entries * sizeof(struct io_uring_sqe);
	l->sq = mmap(NULL, l->sq_len, PROT_READ, MAP_SHARED, fd, IORING_OFF_SQ_RING);
	l->sqes = mmap(NULL, l->sqes_len, PROT_READ, MAP_SHARED, fd, IORING_OFF_SQES);
	TH_ASSERT(l->sq != MAP_FAILED && l->sqes != MAP_FAILED, "map the eviction ring: %s",
		  strerror(errno));
	l->tail = (const unsigned int *)(l->sq + p.sq_off.tail);
	l->mask = *(const unsigned int *)(l->sq + p.sq_off.ring_mask);
	l->array = (const unsigned int *)(l->sq + p.sq_off.array);
	l->entries = p.sq_entries;
	if (!l->zap || l->npages != npages) {
		free(l->zap);
		l->zap = malloc(npages * sizeof(*l->zap));
		TH_ASSERT(l->zap, "malloc");
	}
	l->mem = mem;
	l->npages = npages;
	if (back == ZAP_LOG_IN_FLIGHT) {
		/* one completion per submission: the first not completed */
		l->seen = th_ring_field(fd, "CqTail");
	} else {
		tail = __atomic_load_n(l->tail, __ATOMIC_ACQUIRE);
		if (back > (long)l->entries)
			back = l->entries;
		l->seen = tail - (tail < back ? tail : (unsigned int)back);
	}
	l->n = 0;
	l->twice = 0;
	memset(l->zap, 0, npages * sizeof(*l->zap));
	zap_log_poll(l);
}

/* zap_log_poll() every 10 ms for secs */
static inline void zap_log_for(struct zap_log *l, double secs)
{
	for (double t0 = th_now(); th_now() - t0 < secs; usleep(10000))
		zap_log_poll(l);
}

/* Page p's zap counted from the newest logged (1), 0 for none */
static inline unsigned int zap_rank(const struct zap_log *l, __u64 p)
{
	return l->zap[p] ? l->n + 1 - l->zap[p] : 0;
}

/*
 * The gate closed in front of ring fd's zaps (th_gate_close()), the log
 * of the npages pages at mem started, and region id given a budget of
 * `pages`: returns once npfd has queued `want` zaps behind the gate.
 */
static inline void zap_log_gated_budget(struct zap_log *l, struct th_gate *g, int fd,
					struct npf_client *c, int id, const char *mem, __u64 npages,
					__u64 pages, long want)
{
	th_gate_close(g, fd);
	zap_log_start(l, fd, ZAP_LOG_IN_FLIGHT, mem, npages);
	TH_ASSERT(!npf_client__region_set(c, (__u32)id, NPF_SET_BUDGET, pages * 4096, NULL),
		  "set the budget: %s", npf_client__errmsg(c));
	for (double t0 = th_now(); th_zaps_in_flight(fd) < want; zap_log_for(l, 0.005))
		TH_ASSERT(th_now() - t0 < 20,
			  "npfd queued %ld zaps behind the gate, not %ld, in 20 s",
			  th_zaps_in_flight(fd), want);
	zap_log_poll(l);
}

/* Pages under the logged zaps; those of them with a copy in store (a descriptor, or -1) in *stored. */
static inline __u64 zap_log_victims(const struct zap_log *l, int store, __u64 *stored)
{
	__u64 victims = 0;

	*stored = 0;
	for (__u64 p = 0; p < l->npages; p++)
		if (l->zap[p]) {
			victims++;
			*stored += store >= 0 &&
				   lseek(store, (off_t)(p * 4096), SEEK_DATA) == (off_t)(p * 4096);
		}
	return victims;
}

/*
 * A region of npages pages registered with c (its id in *id, a budget it
 * does not reach), generation 1 written to its even pages and the odd
 * ones dropped (fault-around may have installed them): every victim is a
 * run of its own, one zap each, so that 16 victims fill the ring.
 */
static inline char *zap_log_single_page_runs(struct npf_client *c, __u64 npages, int *id)
{
	char *mem = th_budget_region(c, npages, npages, id);

	for (__u64 p = 0; p < npages; p += 2)
		for (__u64 w = 0; w < 4096 / 8; w++)
			((__u64 *)(mem + p * 4096))[w] = th_word(1, p, w);
	for (__u64 p = 1; p < npages; p += 2)
		TH_ASSERT(!madvise(mem + p * 4096, 4096, MADV_DONTNEED), "MADV_DONTNEED: %s",
			  strerror(errno));
	return mem;
}

/*
 * A region of npages pages registered with c (its id in *id), generation
 * 1 written to every page, then brought down to a budget of `pages` with
 * its zaps held behind the gate (zap_log_gated_budget(): one at least).
 */
static inline char *zap_log_gated_region(struct zap_log *l, struct th_gate *g, struct npf_client *c,
					 __u64 npages, __u64 pages, int *id)
{
	char *mem = th_budget_region(c, npages, npages, id);
	int fd;

	th_fill(mem, npages, 1);
	fd = th_evict_ring_fd();
	TH_ASSERT(fd >= 0, "this process has no eviction ring");
	zap_log_gated_budget(l, g, fd, c, *id, mem, npages, pages, 1);
	return mem;
}

#endif
