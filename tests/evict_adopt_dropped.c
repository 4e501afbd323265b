// SPDX-License-Identifier: GPL-2.0
/*
 * An earlier npfd's zap, still to run when a new npfd adopts the region,
 * covers a run of victims that mixes pages with a stored copy (written)
 * and pages without one (only read, dropped clean); while no npfd runs,
 * the process drops one of the latter itself. The new npfd cannot know
 * that page was under the zap (it is neither present nor stored: its
 * page state, old_frozen_scan(), finds present write-protected pages),
 * so when the zap's REMOVE comes it must not take the REMOVE for the
 * process's own drop because of that page: the written pages under the
 * zap would lose their copies and read zeros.
 *
 * And the pages the process dropped are written again once the new npfd
 * has adopted the region, before the zaps run: a dropped page is one the
 * new npfd cannot tell from a page never touched, yet the zap still to
 * run would drop what is written there (not present at the adoption, it
 * counts as a possible victim until the earlier zaps are done, and its
 * writes wait).
 *
 * The zaps wait behind a gate in the ring's io-wq worker (th_gate_close())
 * across the first npfd's death, the drops and the adoption; then the
 * gate opens, and every page must read what was written, or zeros.
 */
#include <pthread.h>
#include <sys/mman.h>
#include "budget.h"
#include "restart_common.h"
#include "zap_log.h"

#define PG 4096UL
#define NPG 512UL
#define READ 320UL /* pages [0, READ) touched: every fourth written, the others only read */
#define FIRST_BUDGET 128UL

static struct rs_npfd d;
static char *mem;

static bool written(__u64 p)
{
	return p < READ && p % 4 == 1;
}

static bool dropped_page[NPG]; /* dropped while no npfd ran, written again after the adoption */

static __u64 gen_of(__u64 p, __u64 w)
{
	return dropped_page[p] ? th_word(2, p, w) : written(p) ? th_word(1, p, w) : 0;
}

static void *write_dropped(void *arg)
{
	(void)arg;
	for (__u64 p = 0; p < NPG; p++)
		for (__u64 w = 0; dropped_page[p] && w < PG / 8; w++)
			((__u64 *)(mem + p * PG))[w] = th_word(2, p, w);
	return NULL;
}

int main(void)
{
	static struct zap_log zaps;
	static bool zap_dropped[NPG + 1]; /* by zap (its number in the log) */
	struct npf_client *c;
	struct th_gate g;
	struct timespec until;
	pthread_t th;
	__u64 victims = 0, stored = 0, dropped = 0, at_stake = 0, bad = 0, badpages = 0;
	int id, fd, store;

	npf_set_print(rs_print);
	rs_npfd_start(&d);
	NPF_OPTS(npf_client_opts, co, .socket_path = d.sock);
	c = npf_client__connect(&co);
	TH_ASSERT(c, "connect: %s", strerror(errno));
	mem = th_budget_region(c, NPG, NPG, &id);
	for (__u64 p = 0; p < READ; p++)
		bad += ((volatile __u64 *)(mem + p * PG))[0] != 0;
	TH_ASSERT(!bad, "%llu pages never written do not read zeros", (unsigned long long)bad);
	for (__u64 p = 0; p < READ; p++)
		if (written(p))
			for (__u64 w = 0; w < PG / 8; w++)
				((__u64 *)(mem + p * PG))[w] = th_word(1, p, w);
	fd = th_evict_ring_fd();
	TH_ASSERT(fd >= 0, "this process has no eviction ring");

	/* 1. The first npfd's zaps wait behind the gate; it is killed there. */
	zap_log_gated_budget(&zaps, &g, fd, c, id, mem, NPG, FIRST_BUDGET, 1);
	zap_log_for(&zaps, 1);
	rs_npfd_stop_signal(&d);
	zap_log_poll(&zaps);
	store = th_fd_of(d.swap);
	victims = zap_log_victims(&zaps, store, &stored);
	rs_npfd_kill(&d, SIGKILL);

	/* 2. No npfd: the process drops one page with no copy under each zap. */
	for (__u64 p = 0; p < NPG; p++) {
		unsigned int z = zaps.zap[p];

		if (!z || z > NPG || written(p) || zap_dropped[z])
			continue;
		zap_dropped[z] = true;
		dropped_page[p] = true;
		TH_ASSERT(!madvise(mem + p * PG, PG, MADV_DONTNEED), "MADV_DONTNEED: %s",
			  strerror(errno));
		dropped++;
	}
	for (__u64 p = 0; p < NPG; p++)
		at_stake += zaps.zap[p] && zaps.zap[p] <= NPG && zap_dropped[zaps.zap[p]] &&
			    written(p);
	printf("the first npfd: %u zaps behind the gate, %llu victims (%llu stored); %llu dropped by the process, %llu written pages under the same zaps\n",
	       zaps.n, (unsigned long long)victims, (unsigned long long)stored,
	       (unsigned long long)dropped, (unsigned long long)at_stake);
	TH_ASSERT(dropped && at_stake, "no zap covers both a written page and one only read");

	/*
	 * 3. A new npfd adopts; the dropped pages are written again; the gate
	 * opens and the earlier zaps run.
	 */
	rs_npfd_start(&d);
	th_budget_again(c, id, NPG);
	TH_ASSERT(!pthread_create(&th, NULL, write_dropped, NULL), "pthread_create");
	usleep(300000);
	th_gate_open(&g);
	for (double t0 = th_now(); th_zaps_in_flight(fd) && th_now() - t0 < 10;)
		usleep(10000);
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 15;
	TH_ASSERT(!pthread_timedjoin_np(th, NULL, &until),
		  "a write to a dropped page still waits 15 s after the gate opened");
	for (__u64 p = 0; p < NPG; p++) {
		__u64 before = bad;

		for (__u64 w = 0; w < PG / 8; w++)
			bad += ((__u64 *)(mem + p * PG))[w] != gen_of(p, w);
		badpages += bad != before;
	}
	printf("%llu words wrong in %llu pages\n", (unsigned long long)bad,
	       (unsigned long long)badpages);
	if (bad)
		rs_npfd_dump_log(&d);
	TH_ASSERT(!bad, "%llu words read back wrong (%llu pages)", (unsigned long long)bad,
		  (unsigned long long)badpages);
	th_budget_met(c, id, mem, NPG, 16, 20);
	npf_client__close(c);
	rs_npfd_cleanup(&d);
	printf("PASS\n");
	return 0;
}
