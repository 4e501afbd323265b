// SPDX-License-Identifier: GPL-2.0
/*
 * A writer faster than eviction does not run far over the budget: npfd
 * holds its faults back once the region has a batch more than its high
 * watermark, until eviction has made room (evict_hold()). One thread
 * writes every page of a region 16 times its budget, twice over, as fast
 * as it can; another samples the installed count. The most it ever sees
 * must stay within the high watermark, the slack (one batch, 256 pages)
 * and a margin of one batch for the sampler's lag; and every byte reads
 * back.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include "budget.h"

#define PG 4096UL
#define NPG 8192UL
#define BUDGET 512UL /* pages */
#define SLACK 256UL  /* evict.c's EVICT_HOLD_SLACK: one batch */

static struct npf_client *c;
static int id;
static atomic_bool done;
static uint64_t most;

static uint64_t word(uint64_t gen, uint64_t p)
{
	return ((gen << 40) + p) * 0x9e3779b97f4a7c15ULL + 9;
}

static void *sampler(void *arg)
{
	(void)arg;
	while (!atomic_load(&done)) {
		struct npf_budget_info bi = th_budget(c, id);

		if (bi.resident_pages > most)
			most = bi.resident_pages;
		usleep(200);
	}
	return NULL;
}

int main(void)
{
	struct npf_budget_info bi;
	struct th_npfd d;
	pthread_t th;
	double t0, t;
	char *mem;

	th_require_root();
	th_npfd_start(&d, NULL);
	NPF_OPTS(npf_client_opts, co, .socket_path = d.sock);
	c = npf_client__connect(&co);
	TH_ASSERT(c, "connect: %s", strerror(errno));
	mem = th_budget_region(c, NPG, BUDGET, &id);
	bi = th_budget(c, id);
	TH_ASSERT(!pthread_create(&th, NULL, sampler, NULL), "pthread_create");
	t0 = th_now();
	for (uint64_t gen = 1; gen <= 2; gen++)
		for (uint64_t p = 0; p < NPG; p++)
			for (uint64_t w = 0; w < PG / 8; w += 64) /* a word per cache line */
				((uint64_t *)(mem + p * PG))[w] = word(gen, p + w);
	t = th_now() - t0;
	atomic_store(&done, true);
	pthread_join(th, NULL);
	for (uint64_t p = 0; p < NPG; p++)
		for (uint64_t w = 0; w < PG / 8; w += 64)
			TH_ASSERT(((uint64_t *)(mem + p * PG))[w] == word(2, p + w),
				  "page %llu word %llu: not the last write", (unsigned long long)p,
				  (unsigned long long)w);
	bi = th_budget(c, id);
	printf("wrote %lu pages twice in %.2f s; installed at most %llu (high watermark %llu, budget %lu), %llu evicted\n",
	       NPG, t, (unsigned long long)most, (unsigned long long)bi.high_pages, BUDGET,
	       (unsigned long long)bi.evicted_pages);
	TH_ASSERT(bi.evicted_pages >= 2 * NPG - BUDGET, "only %llu pages evicted",
		  (unsigned long long)bi.evicted_pages);
	TH_ASSERT(most <= bi.high_pages + 2 * SLACK,
		  "the region had %llu pages installed: more than the high watermark %llu + %lu",
		  (unsigned long long)most, (unsigned long long)bi.high_pages, 2 * SLACK);
	npf_client__close(c);
	th_npfd_stop(&d);
	printf("PASS\n");
	return 0;
}
