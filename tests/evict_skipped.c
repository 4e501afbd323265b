// SPDX-License-Identifier: GPL-2.0
/*
 * A page an install finds there already (UFFDIO_COPY: EEXIST) is never
 * taken for clean: it may have been written, and an eviction that trusts
 * "clean" drops it unwritten -- its refault reads zeros (the lost write of
 * commit 97f0683, seen only under AddressSanitizer's timing in evict_race
 * and evict_stress).
 *
 * The race there: a write fault's run installs a page writable and the
 * thread writes it; a read fault on the same page, read from the
 * userfaultfd in the instant before its thread saw the page appear, comes
 * in a later flush, and its run's UFFDIO_COPY skips the page (EEXIST). That
 * instant is inside the kernel's handle_userfault(): no ordering of
 * threads outside it (npfd stopped while both fault, say) produces it --
 * two faults waiting together on one page are merged into one write run.
 *
 * So this test makes the resolver meet the same state by a path it takes
 * every time: a page the process wrote before it registered the region is
 * present, writable and dirty, and npfd never installed it. A read fault
 * on its neighbour brings in the aligned 64 KiB block (fault-around), the
 * written page included: EEXIST, and the run is a read run of a budgeted
 * region, reported installed clean. Then eviction (a budget an eighth of
 * the region) takes most pages, and every written page must read back.
 * Reporting skipped pages clean (the bug) loses nearly every evicted one.
 */
#include <stdint.h>
#include <sys/mman.h>
#include "harness.h"
#include "npf.h"

#define PG 4096UL
#define NPG 512UL
#define BLOCK 16UL  /* pages: npfd's default fault-around, 64 KiB */
#define BUDGET 64UL /* pages: low watermark 57 */
#define STRIDE 2UL  /* every other page is written before registration */

static uint64_t word(uint64_t p, uint64_t w)
{
	return (p * 512 + w) * 0x9e3779b97f4a7c15ULL + 1;
}

static struct npf_budget_info budget(struct npf_client *c, int id)
{
	struct npf_budget_info *bi, out;
	size_t n;

	TH_ASSERT(!npf_client__budget_list(c, (__u32)id, &bi, &n) && n == 1, "budget list: %s",
		  npf_client__errmsg(c));
	out = *bi;
	free(bi);
	return out;
}

int main(void)
{
	struct th_npfd d;
	struct npf_client *c;
	struct npf_budget_info bi;
	unsigned char vec[NPG];
	uint64_t p, w, gone = 0, bad = 0;
	volatile uint64_t sink = 0;
	double t0;
	char *mem;
	int id;

	th_npfd_start(&d, NULL);
	NPF_OPTS(npf_client_opts, co, .socket_path = d.sock);
	c = npf_client__connect(&co);
	TH_ASSERT(c, "connect: %s", strerror(errno));
	mem = mmap(NULL, NPG * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	TH_ASSERT(mem != MAP_FAILED, "mmap");
	/* written before registration: present, writable, dirty, unknown to npfd */
	for (p = 0; p < NPG; p += STRIDE)
		for (w = 0; w < PG / 8; w++)
			((uint64_t *)(mem + p * PG))[w] = word(p, w);
	NPF_OPTS(npf_region_opts, o, .name = "evict-skipped");
	id = npf_client__register(c, mem, NPG * PG, &o);
	TH_ASSERT(id > 0, "register: %s", npf_client__errmsg(c));
	TH_ASSERT(!npf_client__region_set(c, (__u32)id, NPF_SET_BUDGET, BUDGET * PG, NULL),
		  "set budget: %s", npf_client__errmsg(c));

	/*
	 * One read fault per block, on a page not written: its fault-around
	 * run covers the written pages of the block, which the copy skips.
	 */
	for (p = 1; p < NPG; p += BLOCK)
		sink += *(volatile uint64_t *)(mem + p * PG);
	(void)sink;

	/* eviction takes the region down to its low watermark */
	t0 = th_now();
	do {
		bi = budget(c, id);
		if (bi.resident_pages <= bi.low_pages && bi.evicted_pages)
			break;
		usleep(5000);
	} while (th_now() - t0 < 10);
	TH_ASSERT(bi.resident_pages <= bi.low_pages,
		  "not evicted: %llu pages resident, low watermark %llu",
		  (unsigned long long)bi.resident_pages, (unsigned long long)bi.low_pages);
	usleep(50000); /* a batch in flight ends */
	TH_ASSERT(!mincore(mem, NPG * PG, vec), "mincore: %s", strerror(errno));
	for (p = 0; p < NPG; p += STRIDE)
		gone += !(vec[p] & 1);
	/* the case needs written pages evicted: not a test otherwise */
	TH_ASSERT(gone >= NPG / STRIDE / 2, "only %llu of %llu written pages were evicted",
		  (unsigned long long)gone, (unsigned long long)(NPG / STRIDE));

	for (p = 0; p < NPG; p++)
		for (w = 0; w < PG / 8; w++) {
			uint64_t got = ((uint64_t *)(mem + p * PG))[w];
			uint64_t want = p % STRIDE ? 0 : word(p, w);

			if (got == want)
				continue;
			if (bad++ < 3)
				printf("page %llu word %llu: 0x%llx, want 0x%llx\n",
				       (unsigned long long)p, (unsigned long long)w,
				       (unsigned long long)got, (unsigned long long)want);
			break;
		}
	bi = budget(c, id);
	printf("%llu of %llu written pages evicted; npfd evicted %llu pages, wrote %llu back, read %llu back, dropped %llu clean\n",
	       (unsigned long long)gone, (unsigned long long)(NPG / STRIDE),
	       (unsigned long long)bi.evicted_pages, (unsigned long long)bi.written_pages,
	       (unsigned long long)bi.refaults, (unsigned long long)bi.dropped_clean);
	TH_ASSERT(!bad, "%llu pages read back wrong: written pages dropped unwritten",
		  (unsigned long long)bad);
	/* each evicted written page went to the store, and came back from it */
	TH_ASSERT(bi.written_pages >= gone && bi.refaults >= gone,
		  "%llu written pages evicted, but %llu written back and %llu read back",
		  (unsigned long long)gone, (unsigned long long)bi.written_pages,
		  (unsigned long long)bi.refaults);
	npf_client__close(c);
	th_npfd_stop(&d);
	printf("PASS\n");
	return 0;
}
