// SPDX-License-Identifier: GPL-2.0
/*
 * The process unmaps the first pages of a budgeted region while npfd's
 * zaps of its victims are still to run. The region shrinks from below
 * (npfd's per-page state shifts), and the zaps' REMOVE events come after:
 * the pages they drop must read back from their stored copies, not as
 * zeros, and a write to one of them after the cut must wait for its zap
 * (or the zap drops it). Two moments, each held open by a gate in the ring's io-wq worker
 * (th_gate_close()):
 * - zapping: the batch is still under way at the cut (npfd abandons it:
 *   its region changed), its zaps run after;
 * - late: the batch ran out of time first (its pages late), the zaps run
 *   after the cut;
 * - a writer waiting at the cut on a frozen victim whose zap was not
 *   submitted yet: it must go on.
 * Before, the cut cleared every page's busy mark: the zap's REMOVE was
 * taken for the process's own drop, and the copies were punched. The
 * counts too: the zaps' pages counted evicted at their REMOVE, and the
 * pages counted resident those present.
 */
#include <pthread.h>
#include <sys/mman.h>
#include "budget.h"
#include "zap_log.h"

#define PG 4096UL
#define NPG 512UL
#define CUT 8UL
#define BUDGET 128UL
#define POKED 8UL /* pages under the zaps written after the cut, the gate still closed */

static char *mem;
static __u64 poked[POKED];

static __u64 gen_of(__u64 p)
{
	for (__u64 k = 0; k < POKED; k++)
		if (poked[k] == p)
			return 2;
	return 1;
}

/* writes that must wait for their page's zap (busy), or the zap would drop them */
static void *poke(void *arg)
{
	(void)arg;
	for (__u64 k = 0; k < POKED; k++)
		for (__u64 w = 0; w < PG / 8; w++)
			((__u64 *)(mem + poked[k] * PG))[w] = th_word(2, poked[k], w);
	return NULL;
}

static void cut_while_zapping(struct npf_client *c, double hold, const char *what)
{
	static struct zap_log zaps;
	struct th_gate g;
	struct timespec until;
	pthread_t th;
	struct npf_budget_info bi;
	__u64 bad = 0, badpages = 0, under = 0, k = 0, present;
	int id;

	mem = zap_log_gated_region(&zaps, &g, c, NPG, BUDGET, &id);
	zap_log_for(&zaps, hold);
	for (__u64 p = CUT; p < NPG; p++) {
		under += zaps.zap[p] != 0;
		if (zaps.zap[p] && k < POKED && p % 16 == 0)
			poked[k++] = p;
	}
	TH_ASSERT(k == POKED, "%s: only %llu pages to write under the zaps", what,
		  (unsigned long long)k);
	TH_ASSERT(under >= 64, "%s: only %llu pages past the cut are under zaps", what,
		  (unsigned long long)under);
	TH_ASSERT(!munmap(mem, CUT * PG), "munmap: %s", strerror(errno));
	TH_ASSERT(!pthread_create(&th, NULL, poke, NULL), "pthread_create");
	usleep(200000);
	th_gate_open(&g);
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	TH_ASSERT(!pthread_timedjoin_np(th, NULL, &until), "%s: a write still waits 10 s later",
		  what);
	th_budget_settle(c, id);
	bi = th_budget(c, id);
	present = th_present_pages(mem + CUT * PG, NPG - CUT);
	for (__u64 p = CUT; p < NPG; p++) {
		__u64 before = bad;

		for (__u64 w = 0; w < PG / 8; w++)
			bad += ((__u64 *)(mem + p * PG))[w] != th_word(gen_of(p), p, w);
		badpages += bad != before;
	}
	printf("%s: %u zaps behind the gate for %.1f s, %llu pages past the cut under them; %llu words wrong in %llu pages\n",
	       what, zaps.n, hold, (unsigned long long)under, (unsigned long long)bad,
	       (unsigned long long)badpages);
	TH_ASSERT(!bad, "%s: %llu words read back wrong (%llu pages)", what,
		  (unsigned long long)bad, (unsigned long long)badpages);
	/*
	 * Counted as they went: the zaps' pages past the cut at their REMOVE
	 * (late pages of a batch gone), and what npfd counts resident is
	 * what is there.
	 */
	printf("%s: %llu pages counted evicted, %llu resident (%llu present)\n", what,
	       (unsigned long long)bi.evicted_pages, (unsigned long long)bi.resident_pages,
	       (unsigned long long)present);
	TH_ASSERT(bi.evicted_pages >= under,
		  "%s: %llu pages counted evicted, fewer than the %llu past the cut its zaps took",
		  what, (unsigned long long)bi.evicted_pages, (unsigned long long)under);
	TH_ASSERT(bi.resident_pages == present, "%s: %llu pages counted resident, %llu present",
		  what, (unsigned long long)bi.resident_pages, (unsigned long long)present);
	th_budget_met(c, id, mem + CUT * PG, NPG - CUT, 16, 20);
	TH_ASSERT(!npf_client__unregister(c, (__u32)id), "unregister: %s", npf_client__errmsg(c));
	munmap(mem + CUT * PG, (NPG - CUT) * PG);
}

static __u64 waiting_page;

static void *write_waiting_page(void *arg)
{
	(void)arg;
	for (__u64 w = 0; w < PG / 8; w++)
		((__u64 *)(mem + waiting_page * PG))[w] = th_word(2, waiting_page, w);
	return NULL;
}

/*
 * A writer already waiting at the cut: on a victim frozen by the batch
 * whose zap is not in the ring yet (victims one page apart, one zap each:
 * the gate holds the ring's 16). The abandoned batch must let it go --
 * batch_end() without a region touches none of its pages.
 */
static void cut_with_writer_waiting(struct npf_client *c)
{
	static struct zap_log zaps;
	static __u64 frozen[NPG];
	struct th_gate g;
	struct timespec until;
	pthread_t th;
	__u64 n, bad = 0;
	int id, fd;
	bool found = false;

	mem = zap_log_single_page_runs(c, NPG, &id);
	fd = th_evict_ring_fd();
	TH_ASSERT(fd >= 0, "this process has no eviction ring");
	zap_log_gated_budget(&zaps, &g, fd, c, id, mem, NPG, BUDGET, NPF_EVICT_RING_ENTRIES);
	n = th_frozen_pages(getpid(), mem, NPG, frozen);
	for (__u64 i = n; i-- > 0 && !found;)
		if (frozen[i] >= CUT && !zaps.zap[frozen[i]]) {
			waiting_page = frozen[i];
			found = true;
		}
	TH_ASSERT(found, "no frozen victim past the cut waits for a slot in the ring");
	TH_ASSERT(!pthread_create(&th, NULL, write_waiting_page, NULL), "pthread_create");
	usleep(200000); /* it waits for the batch */
	/* no batch after this one: none but this one's end may let the writer go */
	TH_ASSERT(!npf_client__region_set(c, (__u32)id, NPF_SET_BUDGET, NPG * PG, NULL),
		  "set the budget: %s", npf_client__errmsg(c));
	TH_ASSERT(!munmap(mem, CUT * PG), "munmap: %s", strerror(errno));
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	TH_ASSERT(!pthread_timedjoin_np(th, NULL, &until),
		  "a writer waiting on page %llu at the cut still waits 10 s later",
		  (unsigned long long)waiting_page);
	th_gate_open(&g);
	th_budget_settle(c, id);
	for (__u64 p = CUT; p < NPG; p++)
		for (__u64 w = 0; w < PG / 8; w++)
			bad += ((__u64 *)(mem + p * PG))[w] !=
			       (p % 2 ? 0 : th_word(p == waiting_page ? 2 : 1, p, w));
	printf("writer waiting at the cut: page %llu; %llu words wrong\n",
	       (unsigned long long)waiting_page, (unsigned long long)bad);
	TH_ASSERT(!bad, "a writer waiting at the cut: %llu words read back wrong",
		  (unsigned long long)bad);
	TH_ASSERT(!npf_client__unregister(c, (__u32)id), "unregister: %s", npf_client__errmsg(c));
	munmap(mem + CUT * PG, (NPG - CUT) * PG);
}

int main(void)
{
	struct npf_client *c;
	struct th_npfd d;

	th_npfd_start(&d, NULL);
	NPF_OPTS(npf_client_opts, co, .socket_path = d.sock);
	c = npf_client__connect(&co);
	TH_ASSERT(c, "connect: %s", strerror(errno));
	/* first: the gate needs the ring's one io-wq worker (busy rings leave idle ones for seconds) */
	cut_with_writer_waiting(c);
	cut_while_zapping(c, 0.3, "zapping"); /* the batch's zaps wait 2 s before it gives up */
	cut_while_zapping(c, 4, "late");
	npf_client__close(c);
	th_npfd_stop(&d);
	printf("PASS\n");
	return 0;
}
