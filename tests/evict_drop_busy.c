// SPDX-License-Identifier: GPL-2.0
/*
 * The process drops pages of its own (MADV_DONTNEED) all the while npfd
 * evicts: each drop's REMOVE event, until npfd reads it, makes the kernel
 * refuse the write-protect an eviction batch freezes its victims with
 * (EAGAIN), and the batch goes on with the pages frozen so far -- often
 * none. The pages it did not freeze must be free to be picked again:
 * left marked busy, they were never evicted again (nor mapped for a
 * device), and the region sat over its budget for good (1450 of 2048
 * pages of tests/evict_adopt_frozen). There a late batch's settling swept
 * such pages up; here no batch is late, so nothing else frees them.
 *
 * Two writers write generations to three pages in four and check each
 * page before they write it; a dropper drops the fourth pages, one at a
 * time, and checks they read zeros (or the stored copy: dropper()). Then nobody touches the region, its
 * budget comes down to 16 pages, and no more than 16 may stay present.
 */
#include <stdatomic.h>
#include <pthread.h>
#include <sys/mman.h>
#include "budget.h"

#define PG 4096UL
#define NPG 2048UL
#define BUDGET 512UL
#define WRITERS 2
#define SECS 6.0
#define SMALL 16UL /* pages: the budget at the end */

static char *mem;
static uint32_t gen[NPG];
static atomic_bool stop;
static atomic_ulong stale, drops, copies;

static bool dropped_page(uint64_t p)
{
	return p % 4 == 3;
}

/* Writer t: pages p % WRITERS == t not dropped; each checked, then its next generation. */
static void *writer(void *arg)
{
	uint64_t t = (uintptr_t)arg;

	while (!atomic_load(&stop))
		for (uint64_t p = t; p < NPG && !atomic_load(&stop); p += WRITERS) {
			uint64_t *w = (uint64_t *)(mem + p * PG), g = gen[p] + 1, bad = 0;

			if (dropped_page(p))
				continue;
			for (uint64_t k = 0; k < PG / 8; k++)
				bad += w[k] != (gen[p] ? th_word(gen[p], p, k) : 0);
			if (bad && atomic_fetch_add(&stale, bad) == 0)
				printf("page %llu: %llu words are not generation %u's\n",
				       (unsigned long long)p, (unsigned long long)bad, gen[p]);
			for (uint64_t k = 0; k < PG / 8; k++)
				w[k] = th_word(g, p, k);
			gen[p] = (uint32_t)g;
		}
	return NULL;
}

/*
 * The dropper: writes a word of a fourth page (new each round), drops the
 * page, and it must read zeros -- or, when a batch of npfd's took the page
 * just then, the word it wrote last: npfd cannot tell the drop from its
 * zap and serves its stored copy (docs/design.md, "A REMOVE is not the
 * zap"). Any other word, an older round's, is a copy that should be gone.
 */
static void *dropper(void *arg)
{
	(void)arg;
	for (uint64_t round = 1; !atomic_load(&stop); round++)
		for (uint64_t p = 3; p < NPG && !atomic_load(&stop); p += 4) {
			volatile uint64_t *w = (volatile uint64_t *)(mem + p * PG);
			uint64_t mark = round << 32 | p, bad = 0;

			w[0] = mark;
			TH_ASSERT(!madvise(mem + p * PG, PG, MADV_DONTNEED), "MADV_DONTNEED: %s",
				  strerror(errno));
			if (w[0] == mark)
				atomic_fetch_add(&copies, 1);
			else
				bad += w[0] != 0;
			for (uint64_t k = 1; k < PG / 8; k++)
				bad += w[k] != 0;
			if (bad && atomic_fetch_add(&stale, bad) == 0)
				printf("page %llu: %llu words are neither zeros nor what was written last (word 0: %#llx, round %llu)\n",
				       (unsigned long long)p, (unsigned long long)bad,
				       (unsigned long long)w[0], (unsigned long long)round);
			atomic_fetch_add(&drops, 1);
		}
	return NULL;
}

int main(void)
{
	pthread_t th[WRITERS + 1];
	struct npf_budget_info bi;
	struct th_npfd d;
	struct npf_client *c;
	int id;

	th_npfd_start(&d, NULL);
	NPF_OPTS(npf_client_opts, co, .socket_path = d.sock);
	c = npf_client__connect(&co);
	TH_ASSERT(c, "connect: %s", strerror(errno));
	mem = th_budget_region(c, NPG, BUDGET, &id);
	for (uintptr_t t = 0; t <= WRITERS; t++)
		TH_ASSERT(!pthread_create(&th[t], NULL, t < WRITERS ? writer : dropper, (void *)t),
			  "pthread_create");
	sleep((unsigned int)SECS);
	atomic_store(&stop, true);
	for (int t = 0; t <= WRITERS; t++) {
		struct timespec until;

		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += 10;
		/* a write to a page left busy waits for a batch that never comes */
		TH_ASSERT(!pthread_timedjoin_np(th[t], NULL, &until),
			  "%s still waits 10 s after the end: a page left busy",
			  t < WRITERS ? "a writer" : "the dropper");
	}
	bi = th_budget(c, id);
	printf("%lu drops (%lu read the stored copy); %llu pages evicted, %llu kept (a batch's step failed)\n",
	       atomic_load(&drops), atomic_load(&copies), (unsigned long long)bi.evicted_pages,
	       (unsigned long long)bi.aborted);
	TH_ASSERT(!atomic_load(&stale), "%lu words read back wrong", atomic_load(&stale));
	TH_ASSERT(bi.evicted_pages >= NPG, "only %llu pages evicted: the region did not go round",
		  (unsigned long long)bi.evicted_pages);

	th_budget_met(c, id, mem, NPG, SMALL, 20);
	npf_client__close(c);
	th_npfd_stop(&d);
	printf("PASS\n");
	return 0;
}
