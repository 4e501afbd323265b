// SPDX-License-Identifier: GPL-2.0
/*
 * An npfd is killed with zaps of victims that have no stored copy still to
 * run, and a new npfd adopts the region: it must not pick those victims
 * again. Such a victim is a page only ever read: installed write-protected
 * and clean, and dropped clean, with nothing written to the store. The new
 * npfd cannot tell it from a page the earlier one never picked (present,
 * write-protected: old_frozen_scan()), so while the earlier npfd's zaps
 * may run it picks neither -- only pages written since it came. A second
 * zap queued behind the first for the same page would drop what a write
 * after the first one put there.
 *
 * tests/evict_adopt_frozen meets such victims only by chance (its writers
 * write most pages); here every page present at the adoption is one: a
 * gate in the ring's io-wq worker (th_gate_close()) holds the first
 * npfd's zaps unstarted across its death, the new npfd is then made to
 * evict all but a few pages, and the zaps it queues behind the gate are
 * read from the ring: none may cover a page under the first npfd's --
 * not even one the process dropped itself and read again meanwhile (its
 * REMOVE is not that zap's).
 * Pages read but under none of its zaps are written after the adoption
 * too: the gate still closed, such a write must go on (the ring's entries
 * tell the new npfd which pages the zaps in flight may drop).
 * Then the gate opens, and every page must read what it was (zeros, or
 * what was written), and the region come down to its budget.
 */
#include <pthread.h>
#include <sys/mman.h>
#include "budget.h"
#include "restart_common.h"
#include "zap_log.h"

#define PG 4096UL
#define NPG 512UL
#define READ 320UL    /* pages [0, READ) only read: the first npfd's victims with no copy */
#define WRITTEN 384UL /* pages [WRITTEN, NPG) written after the adoption; a gap between */
#define FIRST_BUDGET 128UL
#define SMALL 16UL
#define DROPPED 16UL /* of the first npfd's victims, dropped by the process after the adoption */

static struct rs_npfd d;
static char *mem;

/*
 * Pages read, present and write-protected at the adoption but under none
 * of the first npfd's zaps: once the new npfd has the ring it knows them
 * for no victims (old_zap_ranges()), and a write to one goes on at once.
 */
#define OUTSIDE 8UL
static __u64 outside[OUTSIDE], noutside;

static bool written_after(uint64_t p)
{
	for (__u64 k = 0; k < noutside; k++)
		if (outside[k] == p)
			return true;
	return p >= WRITTEN;
}

/* the pages written after the adoption, by a thread: a write that waits for good is a failure */
static void *write_new(void *arg)
{
	(void)arg;
	for (uint64_t p = 0; p < NPG; p++)
		for (uint64_t w = 0; written_after(p) && w < PG / 8; w++)
			((uint64_t *)(mem + p * PG))[w] = th_word(1, p, w);
	return NULL;
}

static void join_within(pthread_t th, int secs, const char *what)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += secs;
	TH_ASSERT(!pthread_timedjoin_np(th, NULL, &until), "%s still waits after %d s", what, secs);
}

int main(void)
{
	static struct zap_log zaps;
	static __u64 present[NPG];
	struct npf_client *c;
	struct th_gate g;
	pthread_t th;
	unsigned int first_zaps;
	__u64 victims = 0, stored = 0, n, bad = 0;
	int id, fd, store;

	npf_set_print(rs_print);
	rs_npfd_start(&d);
	NPF_OPTS(npf_client_opts, co, .socket_path = d.sock);
	c = npf_client__connect(&co);
	TH_ASSERT(c, "connect: %s", strerror(errno));
	mem = th_budget_region(c, NPG, NPG, &id);
	for (uint64_t p = 0; p < READ; p++)
		bad += ((volatile uint64_t *)(mem + p * PG))[0] != 0;
	TH_ASSERT(!bad, "%llu pages never written do not read zeros", (unsigned long long)bad);
	fd = th_evict_ring_fd();
	TH_ASSERT(fd >= 0, "this process has no eviction ring");

	/* 1. The first npfd evicts the read pages: its zaps wait behind the gate. */
	zap_log_gated_budget(&zaps, &g, fd, c, id, mem, NPG, FIRST_BUDGET, 1);
	zap_log_for(&zaps, 1);
	rs_npfd_stop_signal(&d);
	zap_log_poll(&zaps);
	store = th_fd_of(d.swap);
	victims = zap_log_victims(&zaps, store, &stored);
	n = th_frozen_pages(getpid(), mem, NPG, present);
	printf("the first npfd: %u zaps behind the gate, %llu victims (%llu with a stored copy), %llu pages present and write-protected\n",
	       zaps.n, (unsigned long long)victims, (unsigned long long)stored,
	       (unsigned long long)n);
	TH_ASSERT(
		victims >= 64 && !stored,
		"the first npfd's zaps hold %llu victims, %llu of them stored: wanted 64 or more, none stored",
		(unsigned long long)victims, (unsigned long long)stored);
	TH_ASSERT(!th_pagemap_pages(getpid(), mem + WRITTEN * PG, NPG - WRITTEN, TH_PM_PRESENT,
				    NULL),
		  "pages from %lu on are present before they were touched", WRITTEN);
	TH_ASSERT(!zaps.twice, "%llu pages are under two of the first npfd's zaps",
		  (unsigned long long)zaps.twice);
	first_zaps = zaps.n;
	for (__u64 k = 0; k < n && noutside < OUTSIDE; k++)
		if (present[k] < READ && !zaps.zap[present[k]])
			outside[noutside++] = present[k];
	TH_ASSERT(noutside == OUTSIDE, "only %llu pages read are under no zap",
		  (unsigned long long)noutside);

	/* 2. Killed there; a new npfd adopts and must evict all but SMALL pages. */
	rs_npfd_kill(&d, SIGKILL);
	rs_npfd_start(&d);
	th_budget_again(c, id, NPG);
	/*
	 * Some of those victims the process drops itself and reads again:
	 * a REMOVE, but not the first npfd's zap, which is still to run --
	 * they must stay such victims.
	 */
	for (uint64_t p = 0, k = 0; p < NPG && k < DROPPED; p++)
		if (zaps.zap[p] && p % 8 == 0) {
			TH_ASSERT(!madvise(mem + p * PG, PG, MADV_DONTNEED), "MADV_DONTNEED: %s",
				  strerror(errno));
			bad += ((volatile uint64_t *)(mem + p * PG))[0] != 0;
			k++;
		}
	TH_ASSERT(!bad, "%llu pages dropped by the process do not read zeros",
		  (unsigned long long)bad);
	TH_ASSERT(!pthread_create(&th, NULL, write_new, NULL), "pthread_create");
	join_within(th, 10, "the writer of pages the new npfd serves");
	TH_ASSERT(!npf_client__region_set(c, (__u32)id, NPF_SET_BUDGET, SMALL * PG, NULL),
		  "set a budget of %lu pages: %s", SMALL, npf_client__errmsg(c));
	for (double t0 = th_now(); zaps.n == first_zaps && th_now() - t0 < 10;)
		zap_log_for(&zaps, 0.1);
	zap_log_for(&zaps, 2);
	printf("the new npfd: %u zaps behind the gate; %llu pages under two zaps\n",
	       zaps.n - first_zaps, (unsigned long long)zaps.twice);
	TH_ASSERT(zaps.n > first_zaps,
		  "the new npfd queued no zap in 10 s with %lu pages written since it came",
		  NPG - WRITTEN);
	TH_ASSERT(!zaps.twice,
		  "%llu pages are under two zaps: the new npfd picked the first one's victims",
		  (unsigned long long)zaps.twice);

	/* 3. The gate opens: every page reads what it was, and the region meets its budget. */
	th_gate_open(&g);
	for (uint64_t p = 0; p < NPG; p++)
		for (uint64_t w = 0; w < PG / 8; w++)
			bad += ((uint64_t *)(mem + p * PG))[w] !=
			       (written_after(p) ? th_word(1, p, w) : 0);
	if (bad)
		rs_npfd_dump_log(&d);
	TH_ASSERT(!bad, "%llu words read back wrong", (unsigned long long)bad);
	th_budget_met(c, id, mem, NPG, SMALL, 30);
	npf_client__close(c);
	rs_npfd_cleanup(&d);
	printf("PASS\n");
	return 0;
}
