// SPDX-License-Identifier: GPL-2.0
/*
 * npfd stops (SIGTERM) while most of a region is evicted to its swap
 * store, which dies with it: before it goes it puts those pages back in
 * the process, and unprotects the pages it had installed clean. The next
 * npfd adopts the region (libnpf hands it over) and every byte is right;
 * a write to a page that was clean lands (nothing is left write-protected
 * without an npfd that knows why).
 */
#include <sys/mman.h>
#include "budget.h"
#include "restart_common.h"

#define PG 4096UL
#define NPG 1024UL
#define BUDGET 128UL

static struct rs_npfd d;

static uint64_t word(uint64_t gen, uint64_t p, uint64_t w)
{
	return ((gen << 40) + p * 512 + w) * 0x9e3779b97f4a7c15ULL + 11;
}

static void check(const char *mem, uint64_t gen, const char *what)
{
	for (uint64_t p = 0; p < NPG; p++)
		for (uint64_t w = 0; w < PG / 8; w++)
			if (((const uint64_t *)(mem + p * PG))[w] != word(gen, p, w))
				th_fail("%s: page %llu word %llu is 0x%llx, expected 0x%llx", what,
					(unsigned long long)p, (unsigned long long)w,
					(unsigned long long)((const uint64_t *)(mem + p * PG))[w],
					(unsigned long long)word(gen, p, w));
}

int main(void)
{
	struct npf_client *c;
	uint64_t evicted = 0;
	double t0;
	char *mem;
	int id;

	npf_set_print(rs_print);
	rs_npfd_start(&d);
	NPF_OPTS(npf_client_opts, co, .socket_path = d.sock, .fallback_ms = 60000);
	c = npf_client__connect(&co);
	TH_ASSERT(c, "connect: %s", strerror(errno));
	mem = th_budget_region(c, NPG, BUDGET, &id);
	for (uint64_t p = 0; p < NPG; p++)
		for (uint64_t w = 0; w < PG / 8; w++)
			((uint64_t *)(mem + p * PG))[w] = word(1, p, w);
	/* read some back: installed clean (write-protected) when npfd stops */
	check(mem, 1, "before the restart");
	evicted = th_budget_settle(c, id);
	printf("%llu pages evicted before npfd stops\n", (unsigned long long)evicted);
	TH_ASSERT(evicted >= NPG - BUDGET, "only %llu pages evicted", (unsigned long long)evicted);

	rs_npfd_kill(&d, SIGTERM);
	rs_npfd_start(&d);
	/* every page reads back: the ones npfd put back, the ones left resident */
	check(mem, 1, "after the restart");
	/* and every page takes a write (a clean page would wait for a write-protect answer) */
	for (uint64_t p = 0; p < NPG; p++)
		for (uint64_t w = 0; w < PG / 8; w++)
			((uint64_t *)(mem + p * PG))[w] = word(2, p, w);
	check(mem, 2, "rewritten after the restart");
	for (t0 = th_now(); th_now() - t0 < 10 && !rs_reconnects; usleep(10000))
		;
	printf("%d reconnects\n", rs_reconnects);
	TH_ASSERT(rs_reconnects >= 1, "libnpf did not reconnect within 10 s");
	npf_client__close(c);
	rs_npfd_cleanup(&d);
	printf("PASS\n");
	return 0;
}
