// SPDX-License-Identifier: GPL-2.0
/*
 * A budgeted anonymous region, most of it evicted (its pages only in npfd's
 * swap store), moved whole with mremap(): the region follows its memory
 * (UFFD_EVENT_REMAP), and so must its stored pages -- a move is not a drop.
 * Every page must read at its new address what was written at the old
 * one; written again there, and the region must still meet its budget.
 * Then the same with a batch under way at the move (its zaps held behind
 * a gate in the ring's io-wq worker, th_gate_close()): the batch is
 * abandoned, its victims' writers at the new place must not wait for
 * good, and npfd must not reach the pages' state by their old addresses.
 * Last, a move with MREMAP_DONTUNMAP, which leaves the source mapped,
 * empty and still registered with the userfaultfd (no unmap follows):
 * the region follows its memory, and the source must become the
 * process's own memory (zeros), not stay npfd's for good.
 */
#include <pthread.h>
#include <sys/mman.h>
#include "budget.h"
#include "zap_log.h"

#define PG 4096UL
#define NPG 1024UL
#define BUDGET 64UL

static void *write_gen2(void *mem)
{
	th_fill(mem, NPG, 2);
	return NULL;
}

/* a free place of npages pages for a move: reserved, then given up to mremap */
static char *move_whole(char *mem)
{
	char *hint = mmap(NULL, NPG * PG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), *moved;

	TH_ASSERT(hint != MAP_FAILED, "mmap: %s", strerror(errno));
	moved = mremap(mem, NPG * PG, NPG * PG, MREMAP_MAYMOVE | MREMAP_FIXED, hint);
	TH_ASSERT(moved == hint, "mremap: %s", strerror(errno));
	return moved;
}

/*
 * Generation 2 written to the npages pages at mem, within secs; a gate
 * given is opened 0.3 s after the writes start (a write to a page whose
 * zap waits behind it waits for that zap).
 */
static void write_within(char *mem, int secs, struct th_gate *g, const char *what)
{
	struct timespec until;
	pthread_t th;

	TH_ASSERT(!pthread_create(&th, NULL, write_gen2, mem), "pthread_create");
	if (g) {
		usleep(300000);
		th_gate_open(g);
	}
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += secs;
	TH_ASSERT(!pthread_timedjoin_np(th, NULL, &until), "%s: a write still waits after %d s",
		  what, secs);
}

/* A batch under way at the move: its zaps wait behind the gate, the writers at the new place. */
static void move_while_evicting(struct npf_client *c, struct th_npfd *d)
{
	static struct zap_log zaps;
	struct th_gate g;
	char *mem, *moved;
	__u64 bad;
	int id;

	mem = zap_log_gated_region(&zaps, &g, c, NPG, BUDGET, &id);
	moved = move_whole(mem);
	write_within(moved, 10, &g, "a batch under way at the move");
	TH_ASSERT(th_npfd_alive(d), "npfd died after the move");
	bad = th_wrong(moved, NPG, 2);
	printf("a batch under way at the move: %u zaps behind the gate; %llu words wrong\n", zaps.n,
	       (unsigned long long)bad);
	TH_ASSERT(!bad, "%llu words wrong after a move during a batch", (unsigned long long)bad);
	th_budget_met(c, id, moved, NPG, 16, 20);
	TH_ASSERT(!th_wrong(moved, NPG, 2), "words wrong after the moved region was evicted");
}

/* MREMAP_DONTUNMAP of a region mostly evicted: its pages go, the source is the process's own. */
static void move_dontunmap(struct npf_client *c)
{
	char *mem, *moved, *hint;
	__u64 bad, nonzero = 0;
	int id;

	mem = th_budget_region(c, NPG, BUDGET, &id);
	th_fill(mem, NPG, 1);
	th_budget_settle(c, id);
	hint = mmap(NULL, NPG * PG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	TH_ASSERT(hint != MAP_FAILED, "mmap: %s", strerror(errno));
	moved = mremap(mem, NPG * PG, NPG * PG, MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP,
		       hint);
	if (moved == MAP_FAILED && errno == EINVAL) {
		printf("MREMAP_DONTUNMAP: not supported here (EINVAL): not tested\n");
		return;
	}
	TH_ASSERT(moved == hint, "mremap(MREMAP_DONTUNMAP): %s", strerror(errno));
	bad = th_wrong(moved, NPG, 1);
	TH_ASSERT(!bad, "MREMAP_DONTUNMAP: %llu words read wrong at the new address",
		  (unsigned long long)bad);
	for (double t0 = th_now();
	     th_uffd_registered(mem, PG) || th_uffd_registered(mem + (NPG - 1) * PG, PG);
	     usleep(10000))
		TH_ASSERT(
			th_now() - t0 < 5,
			"MREMAP_DONTUNMAP: the source is still registered with the userfaultfd 5 s on");
	for (__u64 i = 0; i < NPG * PG / 8; i++)
		nonzero += ((volatile __u64 *)(void *)mem)[i] != 0;
	TH_ASSERT(!nonzero, "MREMAP_DONTUNMAP: %llu words of the source do not read zeros",
		  (unsigned long long)nonzero);
	th_fill(mem, NPG, 3);
	TH_ASSERT(!th_wrong(mem, NPG, 3), "MREMAP_DONTUNMAP: the source does not keep a write");
	TH_ASSERT(!th_wrong(moved, NPG, 1), "MREMAP_DONTUNMAP: the moved region changed");
	printf("MREMAP_DONTUNMAP: the region read right at its new place; the source is the "
	       "process's own (unregistered, zeros, written)\n");
	TH_ASSERT(!npf_client__unregister(c, (__u32)id), "unregister: %s", npf_client__errmsg(c));
}

int main(void)
{
	struct npf_budget_info bi;
	struct th_npfd d;
	struct npf_client *c;
	char *mem, *moved;
	__u64 bad;
	int id;

	th_npfd_start(&d, NULL);
	NPF_OPTS(npf_client_opts, co, .socket_path = d.sock);
	c = npf_client__connect(&co);
	TH_ASSERT(c, "connect: %s", strerror(errno));
	/*
	 * First: the gate needs the ring's io-wq to have one worker, and the
	 * workers a busy ring made linger idle for seconds, taking zaps past
	 * the gate.
	 */
	move_while_evicting(c, &d);
	mem = th_budget_region(c, NPG, BUDGET, &id);
	th_fill(mem, NPG, 1);
	th_budget_settle(c, id);
	bi = th_budget(c, id);
	printf("before the move: %llu pages resident, %llu stored\n",
	       (unsigned long long)bi.resident_pages, (unsigned long long)bi.stored_pages);
	TH_ASSERT(bi.stored_pages >= NPG / 2, "only %llu pages stored: little was evicted",
		  (unsigned long long)bi.stored_pages);

	moved = move_whole(mem);
	for (double t0 = th_now(); th_budget(c, id).stored_pages == 0 && th_now() - t0 < 1;)
		usleep(10000);
	bi = th_budget(c, id);
	printf("after the move: %llu pages stored\n", (unsigned long long)bi.stored_pages);
	bad = th_wrong(moved, NPG, 1);
	TH_ASSERT(!bad, "%llu words read wrong at the new address (%llu pages' worth)",
		  (unsigned long long)bad, (unsigned long long)bad / 512);
	/* written again at the new place, eviction going on */
	write_within(moved, 20, NULL, "moved");
	th_budget_met(c, id, moved, NPG, BUDGET, 20);
	bad = th_wrong(moved, NPG, 2);
	TH_ASSERT(!bad, "%llu words wrong after the region was written and evicted again",
		  (unsigned long long)bad);
	move_dontunmap(c);
	npf_client__close(c);
	th_npfd_stop(&d);
	printf("PASS\n");
	return 0;
}
