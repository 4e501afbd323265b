// SPDX-License-Identifier: GPL-2.0
/*
 * Unregistering a region whose pages npfd evicted: the process goes on
 * using the memory (a registration cache deregisters buffers still in
 * use), so every evicted page must come back first. Before, every one
 * read zeros after the unregister.
 *
 *   1. A region of NPG pages, written, evicted to its budget, then
 *      lowered once more with npfd's zaps held back in the client's ring
 *      (tests/budget.h's gate). An unregister now must be refused
 *      (EAGAIN, after libnpf's 2 s of asking again): a zap still to run
 *      drops a page whose only copy is in the swap store, which goes with
 *      the region.
 *   2. The gate opens; the unregister is asked again and succeeds. Every
 *      byte of the region reads back, and the memory is no longer
 *      registered. More pages are stored than npfd puts back per request
 *      (it serves its other clients between steps; libnpf asks again on
 *      EINPROGRESS until all are back).
 */
#include <sys/mman.h>
#include "budget.h"

#define PG 4096UL
#define NPG 2048UL
#define BUDGET 1024UL
#define LOWER 64UL
#define PUT_BACK_STEP 256 /* pages npfd puts back per request (evict.c's EVICT_PUT_BACK_STEP) */

int main(void)
{
	struct th_npfd d;
	struct npf_client *c;
	struct th_gate gate;
	__u64 bad, stored;
	char *mem;
	int id, ring, err;
	long held = 0;

	th_require_root();
	th_npfd_start(&d, NULL);
	NPF_OPTS(npf_client_opts, co, .socket_path = d.sock);
	c = npf_client__connect(&co);
	TH_ASSERT(c, "connect: %s", strerror(errno));
	mem = th_budget_region(c, NPG, BUDGET, &id);
	th_fill(mem, NPG, 1);
	th_budget_settle(c, id);
	ring = th_evict_ring_fd();
	TH_ASSERT(ring >= 0, "no eviction ring");

	/* 1 */
	th_gate_close(&gate, ring);
	TH_ASSERT(!npf_client__region_set(c, (__u32)id, NPF_SET_BUDGET, LOWER * PG, NULL),
		  "lower the budget: %s", npf_client__errmsg(c));
	for (double t0 = th_now(); th_now() - t0 < 10 && held <= 0; usleep(2000))
		held = th_zaps_in_flight(ring) - 1; /* the gate's own is not npfd's */
	TH_ASSERT(held > 0, "npfd queued no zap behind the gate in 10 s");
	printf("%ld zaps held behind the gate; %llu pages stored\n", held,
	       (unsigned long long)th_budget(c, id).stored_pages);
	err = npf_client__unregister(c, (__u32)id);
	printf("unregister with zaps held: %s\n", err ? strerror(-err) : "done");
	TH_ASSERT(
		err == -EAGAIN,
		"unregister with zaps in flight was not refused with EAGAIN (%d): the zaps would drop pages whose copies went with the region",
		err);
	TH_ASSERT(th_uffd_registered(mem, NPG * PG),
		  "the region is no longer registered after a refusal");

	/* 2 */
	th_gate_open(&gate);
	stored = th_budget(c, id).stored_pages;
	TH_ASSERT(stored > PUT_BACK_STEP,
		  "only %llu pages stored: the put-back would take one step, not several",
		  (unsigned long long)stored);
	err = npf_client__unregister(c, (__u32)id);
	TH_ASSERT(!err, "unregister once the zaps ran: %s", npf_client__errmsg(c));
	TH_ASSERT(!th_uffd_registered(mem, NPG * PG), "the region is still registered");
	bad = th_wrong(mem, NPG, 1);
	printf("after the unregister (%llu pages stored, put back %d a step): %llu words wrong of %lu pages\n",
	       (unsigned long long)stored, PUT_BACK_STEP, (unsigned long long)bad, NPG);
	TH_ASSERT(!bad, "evicted pages did not come back at the unregister");
	npf_client__close(c);
	th_npfd_stop(&d);
	printf("PASS\n");
	return 0;
}
