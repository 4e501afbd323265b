// SPDX-License-Identifier: GPL-2.0
/*
 * The process drops pages itself (MADV_DONTNEED) while npfd is evicting
 * them. npfd reads a REMOVE event for each drop, as it does for its own
 * zaps, and must tell the two apart where it can:
 * - unzapped: a page whose zap npfd has not handed to the ring yet, dropped
 *   and then written. That REMOVE cannot be the zap's. Taken for it, the
 *   page counted as gone with its copy: the write fault installed the copy
 *   (not the zeros the kernel gives after a drop), and the zap, submitted
 *   afterwards, dropped the write.
 * - wider: a page whose zap is in the ring, dropped together with its
 *   neighbour, which no zap covers. A zap's REMOVE covers its own run and
 *   nothing more, so this one is the process's: the page must read zeros,
 *   not its copy. (A drop of exactly the zap's pages cannot be told from
 *   the zap: docs/design.md.)
 *
 * The moment is held open: the victims are single pages (every other
 * page is written, the others dropped), so each is a run of its own, one
 * zap each; the ring takes 16 at a time and a gate in its io-wq worker
 * (th_gate_close()) keeps those 16 from completing, so the batch's later
 * victims wait, not submitted. The test drops the two pages, writes the
 * first and reads the second, then opens the gate before the batch runs
 * out of time (2 s) and the rest are zapped. Every page must read what
 * it should: what was written after the drop, zeros, or the generation
 * written before.
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
static __u64 unzapped, wider; /* the pages dropped (above) */
static __u64 wider_read;      /* words of wider not zero when read after the drop */

/* the drops, from a thread: a touch that waits for good is a failure */
static void *drop(void *arg)
{
	uint64_t *w = (uint64_t *)(mem + unzapped * PG);

	(void)arg;
	TH_ASSERT(!madvise(w, PG, MADV_DONTNEED), "MADV_DONTNEED: %s", strerror(errno));
	w[0] = MARK | unzapped;
	w = (uint64_t *)(mem + wider * PG);
	TH_ASSERT(!madvise(w, 2 * PG, MADV_DONTNEED), "MADV_DONTNEED: %s", strerror(errno));
	for (uint64_t k = 0; k < PG / 8; k++)
		wider_read += ((volatile uint64_t *)w)[k] != 0;
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
	int id, fd;
	bool found_unzapped = false, found_wider = false;
	double full, held;

	mem = zap_log_single_page_runs(c, NPG, &id);
	fd = th_evict_ring_fd();
	TH_ASSERT(fd >= 0, "this process has no eviction ring");

	zap_log_gated_budget(&zaps, &g, fd, c, id, mem, NPG, SMALL, NPF_EVICT_RING_ENTRIES);
	full = th_now();
	/* victims (frozen): the last whose zap is not in the ring, the first whose zap is */
	n = th_frozen_pages(getpid(), mem, NPG, frozen);
	for (__u64 i = n; i-- > 0 && !found_unzapped;)
		if (!zaps.zap[frozen[i]]) {
			unzapped = frozen[i];
			found_unzapped = true;
		}
	for (__u64 i = 0; i < n && !found_wider; i++)
		if (zaps.zap[frozen[i]] && frozen[i] + 1 < NPG && !zaps.zap[frozen[i] + 1]) {
			wider = frozen[i];
			found_wider = true;
		}
	TH_ASSERT(found_unzapped, "every frozen page is under a zap in the ring: no victim waits");
	TH_ASSERT(found_wider, "no page under a zap in the ring");
	wider_read = 0;
	TH_ASSERT(!pthread_create(&th, NULL, drop, NULL), "pthread_create");
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	TH_ASSERT(!pthread_timedjoin_np(th, NULL, &until),
		  "a touch after the drops still waits after 10 s");
	held = th_now() - full;
	th_gate_open(&g);
	zap_log_for(&zaps, 0.5); /* the batch's other zaps (one look may miss some) */
	th_budget_settle(c, id);
	printf("%llu pages frozen with the ring full; dropped %.0f ms later: page %llu (then written; %s under a zap at the end of %u), pages %llu-%llu (%llu words of the first not zero when read)\n",
	       (unsigned long long)n, held * 1000, (unsigned long long)unzapped,
	       zaps.zap[unzapped] ? "was" : "not", zaps.n, (unsigned long long)wider,
	       (unsigned long long)wider + 1, (unsigned long long)wider_read);
	TH_ASSERT(
		!wider_read,
		"page %llu read %llu words not zero after the process dropped it (with a page no zap covers): its stored copy",
		(unsigned long long)wider, (unsigned long long)wider_read);
	for (__u64 p = 0; p < NPG; p++)
		for (__u64 w = 0; w < PG / 8; w++) {
			__u64 v = ((__u64 *)(mem + p * PG))[w];

			if (p == unzapped)
				want = w ? 0 : MARK | unzapped;
			else
				want = p % 2 || p == wider ? 0 : th_word(1, p, w);
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
