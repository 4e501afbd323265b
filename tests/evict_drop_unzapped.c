// SPDX-License-Identifier: GPL-2.0
/*
 * The process drops a page itself (MADV_DONTNEED) while npfd is evicting
 * it, before npfd has handed the page's zap to the ring, and then writes
 * it. That REMOVE cannot be the zap's: the zap is not submitted. Taken
 * for it, the page counted as gone with its copy: the write fault
 * installed the copy (not the zeros the kernel gives after a drop), and
 * the zap, submitted afterwards, dropped the write.
 *
 * The moment is held open: the victims are single pages (every other
 * page is written, the others dropped), so each is a run of its own, one zap each; the
 * ring takes 16 at a time and a gate in its io-wq worker (th_gate_close())
 * keeps those 16 from completing, so the batch's later victims wait, not
 * submitted. The test drops and writes one of those, then opens the gate
 * before the batch runs out of time (2 s) and the rest are zapped. The
 * page must read what was written after the drop (zeros elsewhere), and
 * the other victims their last generation.
 */
#include <pthread.h>
#include <sys/mman.h>
#include "budget.h"
#include "zap_log.h"

#define PG 4096UL
#define NPG 1024UL
#define SMALL 32UL
#define MARK 0x5a5a5a5a00000000ULL

static char *mem;
static __u64 target;

/* the page dropped and written (from a thread: a write that waits for good is a failure) */
static void *drop_and_write(void *arg)
{
	uint64_t *w = (uint64_t *)(mem + target * PG);

	(void)arg;
	TH_ASSERT(!madvise(w, PG, MADV_DONTNEED), "MADV_DONTNEED: %s", strerror(errno));
	w[0] = MARK | target;
	return NULL;
}

/*
 * One try on a new region; every byte checked. Returns whether the gate
 * opened early enough (1.5 s after the ring filled) for the batch's
 * later zaps to come after the write: else the batch may have run out of
 * time first, and nothing was at stake.
 */
static bool try_once(struct npf_client *c)
{
	static struct zap_log zaps;
	static __u64 frozen[NPG];
	struct timespec until;
	struct th_gate g;
	pthread_t th;
	__u64 n, bad = 0, want;
	int id, fd, found = 0;
	double full, held;

	mem = th_budget_region(c, NPG, NPG, &id);
	for (__u64 p = 0; p < NPG; p += 2)
		for (__u64 w = 0; w < PG / 8; w++)
			((__u64 *)(mem + p * PG))[w] = th_word(1, p, w);
	/* fault-around may have installed the others: gone again, so that each victim is a run */
	for (__u64 p = 1; p < NPG; p += 2)
		TH_ASSERT(!madvise(mem + p * PG, PG, MADV_DONTNEED), "MADV_DONTNEED: %s",
			  strerror(errno));
	fd = th_evict_ring_fd();
	TH_ASSERT(fd >= 0, "this process has no eviction ring");

	th_gate_close(&g, fd);
	zap_log_start(&zaps, fd, 0, mem, NPG);
	TH_ASSERT(!npf_client__region_set(c, (__u32)id, NPF_SET_BUDGET, SMALL * PG, NULL),
		  "set the budget: %s", npf_client__errmsg(c));
	for (double t0 = th_now(); th_zaps_in_flight(fd) < NPF_EVICT_RING_ENTRIES;
	     zap_log_for(&zaps, 0.005))
		TH_ASSERT(th_now() - t0 < 10, "npfd did not fill the ring with zaps in 10 s");
	full = th_now();
	zap_log_poll(&zaps);
	/* a victim (frozen) whose zap is not in the ring */
	n = th_frozen_pages(getpid(), mem, NPG, frozen);
	for (__u64 i = n; i-- > 0 && !found;)
		if (!zaps.zap[frozen[i]]) {
			target = frozen[i];
			found = 1;
		}
	TH_ASSERT(found, "every frozen page is under a zap in the ring: no victim waits");
	TH_ASSERT(!pthread_create(&th, NULL, drop_and_write, NULL), "pthread_create");
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	TH_ASSERT(!pthread_timedjoin_np(th, NULL, &until),
		  "the write after the drop still waits after 10 s");
	held = th_now() - full;
	th_gate_open(&g);
	zap_log_for(&zaps, 0.5); /* the batch's other zaps (one look may miss some) */
	th_budget_settle(c, id);
	printf("%llu pages frozen with the ring full; page %llu dropped and written %.0f ms later; %u zaps in all, page %llu %s under one\n",
	       (unsigned long long)n, (unsigned long long)target, held * 1000, zaps.n,
	       (unsigned long long)target, zaps.zap[target] ? "was" : "was not");
	for (__u64 p = 0; p < NPG; p++)
		for (__u64 w = 0; w < PG / 8; w++) {
			__u64 v = ((__u64 *)(mem + p * PG))[w];

			if (p == target)
				want = w ? 0 : MARK | target;
			else
				want = p % 2 ? 0 : th_word(1, p, w);
			if (v != want && !bad++)
				printf("page %llu word %llu: %#llx, not %#llx\n",
				       (unsigned long long)p, (unsigned long long)w,
				       (unsigned long long)v, (unsigned long long)want);
		}
	TH_ASSERT(!bad, "%llu words read back wrong", (unsigned long long)bad);
	return held < 1.5;
}

int main(void)
{
	struct npf_client *c;
	struct th_npfd d;
	int tries = 1;

	th_npfd_start(&d, NULL);
	NPF_OPTS(npf_client_opts, co, .socket_path = d.sock);
	c = npf_client__connect(&co);
	TH_ASSERT(c, "connect: %s", strerror(errno));
	while (!try_once(c)) {
		TH_ASSERT(
			tries < 3,
			"in %d tries the gate never opened within 1.5 s of the ring filling: the batch may have run out of time (2 s) first",
			tries);
		printf("too slow: again\n");
		tries++;
	}
	npf_client__close(c);
	th_npfd_stop(&d);
	printf("PASS\n");
	return 0;
}
