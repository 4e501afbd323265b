// SPDX-License-Identifier: GPL-2.0
/*
 * npfd is killed (SIGKILL) again and again while two threads write an
 * anonymous region four times its budget: eviction, write-back to the swap
 * store and refaults run at every kill. Each thread knows the generation it
 * last wrote to each of its pages; after the last restart every word of
 * every page must be that generation's: no write lost, no page read back
 * stale or as zeros across a kill.
 */
#include <stdatomic.h>
#include <sys/mman.h>
#include "budget.h"
#include "restart_common.h"

#define PG 4096UL
#define NPG 2048UL
#define BUDGET 512UL
#define WRITERS 2
#define KILLS 5

static struct rs_npfd d;
static char *mem;
static uint32_t gen[NPG];
static atomic_bool stop;
static atomic_ulong writes, stale;

/*
 * Thread t owns pages p % WRITERS == t: reads each back (it must hold the
 * generation the thread wrote last, or zeros before the first), then
 * writes the next generation, round after round.
 */
static void *writer(void *arg)
{
	uint64_t t = (uintptr_t)arg;

	while (!atomic_load(&stop))
		for (uint64_t p = t; p < NPG && !atomic_load(&stop); p += WRITERS) {
			uint64_t g = gen[p] + 1, bad = 0;

			for (uint64_t w = 0; w < PG / 8; w++)
				bad += ((uint64_t *)(mem + p * PG))[w] !=
				       (gen[p] ? th_word(gen[p], p, w) : 0);
			if (bad && atomic_fetch_add(&stale, bad) == 0)
				printf("page %llu: %llu words are not generation %u's\n",
				       (unsigned long long)p, (unsigned long long)bad, gen[p]);
			for (uint64_t w = 0; w < PG / 8; w++)
				((uint64_t *)(mem + p * PG))[w] = th_word(g, p, w);
			gen[p] = (uint32_t)g;
			atomic_fetch_add(&writes, 1);
		}
	return NULL;
}

int main(void)
{
	pthread_t th[WRITERS];
	struct npf_client *c;
	__u64 bad, zeros, first, only_stored = 0;
	int id;

	npf_set_print(rs_print);
	rs_npfd_start(&d);
	NPF_OPTS(npf_client_opts, co, .socket_path = d.sock, .fallback_ms = 60000);
	c = npf_client__connect(&co);
	TH_ASSERT(c, "connect: %s", strerror(errno));
	mem = th_budget_region(c, NPG, BUDGET, &id);
	for (uintptr_t t = 0; t < WRITERS; t++)
		TH_ASSERT(!pthread_create(&th[t], NULL, writer, (void *)t), "pthread_create");
	for (int k = 0; k < KILLS; k++) {
		struct npf_budget_info *bi;
		unsigned long before;
		uint64_t stored = 0, resident = NPG;
		size_t n;

		/* eviction down to the budget, then a kill at a random moment of its work */
		for (double t0 = th_now(); th_now() - t0 < 10 && resident > BUDGET; usleep(10000))
			if (!npf_client__budget_list(c, (__u32)id, &bi, &n) && n == 1) {
				resident = bi->resident_pages;
				free(bi);
			}
		usleep((useconds_t)(rand() % 300) * 1000);
		before = atomic_load(&writes);
		if (!npf_client__budget_list(c, (__u32)id, &bi, &n) && n == 1) {
			stored = bi->stored_pages;
			resident = bi->resident_pages;
			free(bi);
		}
		only_stored += stored > 0 && resident < NPG ? NPG - resident : 0;
		rs_npfd_kill(&d, SIGKILL);
		rs_npfd_start(&d);
		th_budget_again(c, id, BUDGET);
		printf("kill %d: %lu page writes before it, %llu pages stored, %llu resident\n",
		       k + 1, before, (unsigned long long)stored, (unsigned long long)resident);
	}
	usleep(500000);
	atomic_store(&stop, true);
	for (int t = 0; t < WRITERS; t++)
		pthread_join(th[t], NULL);
	bad = th_gens_wrong(mem, NPG, gen, &zeros, &first);
	printf("%lu page writes, %d kills\n", atomic_load(&writes), KILLS);
	if (bad || atomic_load(&stale) || only_stored < NPG - BUDGET)
		rs_npfd_dump_log(&d);
	/* pages evicted at the kills, summed: what a store lost with npfd would have taken */
	TH_ASSERT(only_stored >= NPG - BUDGET,
		  "only %llu pages were evicted at the kills: nothing was at stake",
		  (unsigned long long)only_stored);
	th_gens_assert(atomic_load(&stale), bad, zeros, first, gen, NPG);
	npf_client__close(c);
	rs_npfd_cleanup(&d);
	printf("PASS\n");
	return 0;
}
