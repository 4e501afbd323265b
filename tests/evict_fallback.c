// SPDX-License-Identifier: GPL-2.0
/*
 * npfd is killed (SIGKILL: no put-back) while most of an anonymous region
 * is evicted to its swap store, and does not come back within fallback_ms.
 * libnpf's fallback serves the faults: every evicted page must read back
 * its bytes from the read-only descriptor of the store that npfd handed
 * over with the register reply (NPF_REGION_STORE_FD), not zeros.
 *
 * Pages the process drops itself meanwhile (MADV_DONTNEED, once no zap
 * of npfd's is left in the eviction ring: until then a REMOVE may be one)
 * must read zeros, not their stored copies: range
 * A is touched while the fallback serves, range B only after a new npfd
 * has adopted the region (libnpf gives B the zero page before it hands the
 * region over, since the new npfd reads its store on a missing fault).
 */
#include <sys/mman.h>
#include "budget.h"
#include "restart_common.h"

#define PG 4096UL
#define NPG 1024UL
#define BUDGET 128UL
#define FALLBACK_MS 300
#define DROP 16UL /* pages in each of the ranges A and B */

static struct rs_npfd d;

/* Words of pages [from, to) that are not what they should be: gen's, or zeros. */
static uint64_t wrong(const char *mem, uint64_t from, uint64_t to, uint64_t gen, bool zeros,
		      uint64_t *zero)
{
	uint64_t bad = 0;

	for (uint64_t p = from; p < to; p++)
		for (uint64_t w = 0; w < PG / 8; w++) {
			uint64_t v = ((const uint64_t *)(mem + p * PG))[w];

			if (v == (zeros ? 0 : th_word(gen, p, w)))
				continue;
			bad++;
			*zero += !v;
		}
	return bad;
}

/* The first run of n pages from page `from` on that are all evicted (not resident). */
static uint64_t evicted_run(char *mem, uint64_t from, uint64_t n)
{
	unsigned char vec[NPG];
	uint64_t run = 0;

	TH_ASSERT(!mincore(mem, NPG * PG, vec), "mincore: %s", strerror(errno));
	for (uint64_t p = from; p < NPG; p++) {
		run = vec[p] & 1 ? 0 : run + 1;
		if (run == n)
			return p + 1 - n;
	}
	th_fail("no %llu evicted pages in a row after page %llu", (unsigned long long)n,
		(unsigned long long)from);
	return 0;
}

int main(void)
{
	uint64_t evicted, a, b, bad, zero = 0;
	struct npf_budget_info *bi;
	struct npf_client *c;
	size_t cnt;
	double t0;
	char *mem;
	int id;

	npf_set_print(rs_print);
	rs_npfd_start(&d);
	NPF_OPTS(npf_client_opts, co, .socket_path = d.sock, .fallback_ms = FALLBACK_MS);
	c = npf_client__connect(&co);
	TH_ASSERT(c, "connect: %s", strerror(errno));
	mem = th_budget_region(c, NPG, BUDGET, &id);
	th_fill(mem, NPG, 1);
	evicted = th_budget_settle(c, id);
	TH_ASSERT(evicted >= NPG - BUDGET, "only %llu pages evicted", (unsigned long long)evicted);
	a = evicted_run(mem, 0, DROP);
	b = evicted_run(mem, a + DROP, DROP);

	rs_npfd_kill(&d, SIGKILL);
	bad = wrong(mem, 0, a, 1, false, &zero) + wrong(mem, b + DROP, NPG, 1, false, &zero);
	TH_ASSERT(
		!bad,
		"with npfd gone, %llu words of the region read wrong (%llu zeros): evicted pages not read from the store",
		(unsigned long long)bad, (unsigned long long)zero);
	TH_ASSERT(rs_fallbacks >= 1, "the fallback did not start");
	/* the killed npfd's zaps are done (the fallback read their REMOVE events) */
	{
		int fd = th_evict_ring_fd();
		double t0 = th_now();

		TH_ASSERT(fd >= 0, "this process has no eviction ring");
		while (th_zaps_in_flight(fd) && th_now() - t0 < 10)
			usleep(10000);
		TH_ASSERT(!th_zaps_in_flight(fd), "%ld zaps of the killed npfd still in flight",
			  th_zaps_in_flight(fd));
	}
	/* the process drops A and B itself: read by the fallback */
	TH_ASSERT(!madvise(mem + a * PG, DROP * PG, MADV_DONTNEED), "madvise: %s", strerror(errno));
	TH_ASSERT(!madvise(mem + b * PG, DROP * PG, MADV_DONTNEED), "madvise: %s", strerror(errno));
	bad = wrong(mem, a + DROP, b, 1, false, &zero);
	TH_ASSERT(!bad, "%llu words between the dropped ranges read wrong (%llu zeros)",
		  (unsigned long long)bad, (unsigned long long)zero);
	bad = wrong(mem, a, a + DROP, 1, true, &zero);
	TH_ASSERT(!bad, "%llu words of pages dropped while npfd was gone are not zeros",
		  (unsigned long long)bad);
	printf("npfd killed with %llu pages evicted: the fallback read them all back; %lu pages dropped meanwhile read zeros\n",
	       (unsigned long long)evicted, DROP);

	/* a new npfd adopts the region (libnpf's monitor hands it over) */
	rs_npfd_start(&d);
	for (t0 = th_now(); th_now() - t0 < 20 && !__atomic_load_n(&rs_handbacks, __ATOMIC_RELAXED);
	     usleep(10000))
		;
	TH_ASSERT(rs_handbacks >= 1, "the new npfd did not adopt the region within 20 s");
	TH_ASSERT(!npf_client__budget_list(c, (__u32)id, &bi, &cnt), "after the restart: %s",
		  npf_client__errmsg(c));
	free(bi);
	bad = wrong(mem, b, b + DROP, 1, true, &zero);
	TH_ASSERT(
		!bad,
		"%llu words of pages dropped while npfd was gone are not zeros after a new npfd adopted them",
		(unsigned long long)bad);
	th_fill(mem, NPG, 2);
	bad = wrong(mem, 0, NPG, 2, false, &zero);
	TH_ASSERT(!bad, "%llu words wrong after the region was rewritten", (unsigned long long)bad);

	npf_client__close(c);
	rs_npfd_cleanup(&d);
	printf("PASS\n");
	return 0;
}
