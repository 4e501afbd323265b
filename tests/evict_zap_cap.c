// SPDX-License-Identifier: GPL-2.0
/*
 * npfd keeps at most a ring's worth of zaps (NPF_EVICT_RING_ENTRIES) in
 * flight in a client's eviction ring, its late ones counted: the CQ ring
 * holds twice that, and a new npfd finds every zap in flight among the
 * ring's last entries (old_zap_ranges()). While the ring holds that many,
 * no batch starts for the client: it would freeze and write its victims,
 * then wait 2 s for a slot and give them all back (and the other clients'
 * eviction with it).
 *
 * Held open with the gate (th_gate_close()): the victims are single pages
 * (every other page written, the others dropped), one zap each, and none
 * completes while the gate is closed. The batch submits 16, waits for
 * slots that never free, and runs out of time (2 s): its 16 zaps stay
 * late, its other victims are kept. For 3 s more the ring is full:
 * - never more than 16 zaps in flight (mutate entry zap-cap-ignored);
 * - no page frozen but those under the 16 zaps, and no victim kept after
 *   the first batch's (full-ring-not-skipped);
 * and once the gate opens, every byte reads what was written.
 */
#include <sys/mman.h>
#include "budget.h"
#include "zap_log.h"

#define PG 4096UL
#define NPG 1024UL
#define SMALL 32UL

int main(void)
{
	static __u64 frozen[NPG];
	static struct zap_log zaps;
	struct npf_budget_info first = {0}, last;
	struct npf_client *c;
	struct th_npfd d;
	struct th_gate g;
	__u64 n, stray = 0, bad = 0, most_frozen = 0;
	long most = 0;
	double full, ended = 0;
	char *mem;
	int id, fd;

	th_npfd_start(&d, NULL);
	NPF_OPTS(npf_client_opts, co, .socket_path = d.sock);
	c = npf_client__connect(&co);
	TH_ASSERT(c, "connect: %s", strerror(errno));
	mem = zap_log_single_page_runs(c, NPG, &id);
	fd = th_evict_ring_fd();
	TH_ASSERT(fd >= 0, "this process has no eviction ring");

	zap_log_gated_budget(&zaps, &g, fd, c, id, mem, NPG, SMALL, NPF_EVICT_RING_ENTRIES);
	full = th_now();
	/*
	 * The first batch ends 2 s after its first zap, when the victims it
	 * could not submit are kept (counted aborted): from then on only the
	 * pages under its 16 zaps may be frozen, and nothing more is aborted.
	 */
	for (double t = 0; t < 5; t = th_now() - full) {
		long now = th_zaps_in_flight(fd);

		zap_log_poll(&zaps);
		most = now > most ? now : most;
		if (t < 2.5) {
			usleep(10000);
			continue;
		}
		if (!ended) {
			ended = t;
			first = th_budget(c, id);
		}
		n = th_frozen_pages(getpid(), mem, NPG, frozen);
		most_frozen = n > most_frozen ? n : most_frozen;
		for (__u64 i = 0; i < n; i++)
			if (!zaps.zap[frozen[i]] && !stray++)
				printf("%.1f s after the ring filled: page %llu frozen, under no zap in the ring\n",
				       t, (unsigned long long)frozen[i]);
		usleep(100000);
	}
	last = th_budget(c, id);
	printf("ring full for 5 s: at most %ld zaps in flight (%u logged); after the first batch ended: at most %llu pages frozen, %llu frozen outside the zaps, %llu victims kept then, %llu since\n",
	       most, zaps.n, (unsigned long long)most_frozen, (unsigned long long)stray,
	       (unsigned long long)first.aborted,
	       (unsigned long long)(last.aborted - first.aborted));
	TH_ASSERT(most == NPF_EVICT_RING_ENTRIES, "%ld zaps in flight at most, not %d", most,
		  NPF_EVICT_RING_ENTRIES);
	TH_ASSERT(first.aborted > 0,
		  "the first batch kept none of its victims: it had no more than 16 runs");
	TH_ASSERT(!stray,
		  "%llu looks found pages frozen under no zap: a batch started on a full ring",
		  (unsigned long long)stray);
	TH_ASSERT(last.aborted == first.aborted,
		  "%llu more victims were kept with the ring full: a batch started on it",
		  (unsigned long long)(last.aborted - first.aborted));

	th_gate_open(&g);
	th_budget_settle(c, id);
	for (__u64 p = 0; p < NPG; p++)
		for (__u64 w = 0; w < PG / 8; w++) {
			__u64 v = ((__u64 *)(mem + p * PG))[w];
			__u64 want = p % 2 ? 0 : th_word(1, p, w);

			if (v != want && !bad++)
				printf("page %llu word %llu: %#llx, not %#llx\n",
				       (unsigned long long)p, (unsigned long long)w,
				       (unsigned long long)v, (unsigned long long)want);
		}
	TH_ASSERT(!bad, "%llu words read back wrong", (unsigned long long)bad);
	npf_client__close(c);
	th_npfd_stop(&d);
	printf("PASS\n");
	return 0;
}
