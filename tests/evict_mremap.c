// SPDX-License-Identifier: GPL-2.0
/*
 * A budgeted anonymous region, most of it evicted (its pages only in npfd's
 * swap store), moved whole with mremap(): the region follows its memory
 * (UFFD_EVENT_REMAP), and so must its stored pages -- a move is not a drop.
 * Every page must read at its new address what was written at the old
 * one; written again there, and the region must still meet its budget.
 */
#include <pthread.h>
#include <sys/mman.h>
#include "budget.h"

#define PG 4096UL
#define NPG 1024UL
#define BUDGET 64UL

static void *write_gen2(void *mem)
{
	th_fill(mem, NPG, 2);
	return NULL;
}

int main(void)
{
	struct timespec until;
	pthread_t th;
	struct npf_budget_info bi;
	struct th_npfd d;
	struct npf_client *c;
	char *mem, *moved, *hint;
	__u64 bad;
	int id;

	th_npfd_start(&d, NULL);
	NPF_OPTS(npf_client_opts, co, .socket_path = d.sock);
	c = npf_client__connect(&co);
	TH_ASSERT(c, "connect: %s", strerror(errno));
	mem = th_budget_region(c, NPG, BUDGET, &id);
	th_fill(mem, NPG, 1);
	th_budget_settle(c, id);
	bi = th_budget(c, id);
	printf("before the move: %llu pages resident, %llu stored\n",
	       (unsigned long long)bi.resident_pages, (unsigned long long)bi.stored_pages);
	TH_ASSERT(bi.stored_pages >= NPG / 2, "only %llu pages stored: little was evicted",
		  (unsigned long long)bi.stored_pages);

	/* a free place for the move: reserved, then given up to mremap */
	hint = mmap(NULL, NPG * PG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	TH_ASSERT(hint != MAP_FAILED, "mmap: %s", strerror(errno));
	moved = mremap(mem, NPG * PG, NPG * PG, MREMAP_MAYMOVE | MREMAP_FIXED, hint);
	TH_ASSERT(moved == hint, "mremap: %s", strerror(errno));
	for (double t0 = th_now(); th_budget(c, id).stored_pages == 0 && th_now() - t0 < 1;)
		usleep(10000);
	bi = th_budget(c, id);
	printf("after the move: %llu pages stored\n", (unsigned long long)bi.stored_pages);
	bad = th_wrong(moved, NPG, 1);
	TH_ASSERT(!bad, "%llu words read wrong at the new address (%llu pages' worth)",
		  (unsigned long long)bad, (unsigned long long)bad / 512);
	/* written again at the new place, eviction going on */
	TH_ASSERT(!pthread_create(&th, NULL, write_gen2, moved), "pthread_create");
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 20;
	TH_ASSERT(!pthread_timedjoin_np(th, NULL, &until),
		  "a write at the new place waits after 20 s");
	th_budget_met(c, id, moved, NPG, BUDGET, 20);
	bad = th_wrong(moved, NPG, 2);
	TH_ASSERT(!bad, "%llu words wrong after the region was written and evicted again",
		  (unsigned long long)bad);
	npf_client__close(c);
	th_npfd_stop(&d);
	printf("PASS\n");
	return 0;
}
