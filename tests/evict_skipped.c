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
 * So this test brings the resolver to the same state by two paths it takes
 * every time: a written page present that npfd does not count as
 * installed, and a read fault on its neighbour whose fault-around run
 * (the aligned 64 KiB block) covers it, in a budgeted region: EEXIST in a
 * read run, which the bug reported installed clean. Then eviction (a
 * budget an eighth of the region) takes most pages, and every written page
 * must read back.
 *   before: the page was written before the region was registered;
 *   cut:    the page was installed by npfd for a write fault and written,
 *           then the process unmapped the region's first block (npfd
 *           forgets what it installed in a region cut at its start).
 * Reporting skipped pages clean (the bug) loses nearly every evicted one.
 */
#include <stdint.h>
#include <sys/mman.h>
#include "harness.h"
#include "budget.h"
#include "npf.h"

#define PG 4096UL
#define NPG 512UL
#define BLOCK 16UL  /* pages: npfd's default fault-around, 64 KiB */
#define BUDGET 64UL /* pages: low watermark 57 */

static uint64_t word(uint64_t p, uint64_t w)
{
	return (p * 512 + w) * 0x9e3779b97f4a7c15ULL + 1;
}

static void fill(char *mem, uint64_t p)
{
	for (uint64_t w = 0; w < PG / 8; w++)
		((uint64_t *)(mem + p * PG))[w] = word(p, w);
}

static struct npf_budget_info budget(struct npf_client *c, int id)
{
	return th_budget(c, id);
}

/* One read fault per block of [mem, +npg), on an odd page (not written). */
static void read_blocks(const char *mem, uint64_t npg)
{
	volatile uint64_t sink = 0;

	for (uint64_t p = 1; p < npg; p += BLOCK)
		sink += *(volatile const uint64_t *)(mem + p * PG);
	(void)sink;
}

/*
 * Set the budget, wait for eviction, check that most even (written) pages
 * went, then that even pages read back written and odd ones zero.
 */
static void evict_and_check(struct npf_client *c, int id, char *mem, uint64_t npg, const char *what)
{
	struct npf_budget_info bi;
	unsigned char vec[NPG];
	uint64_t p, w, gone = 0, bad = 0;
	double t0 = th_now();

	TH_ASSERT(!npf_client__region_set(c, (__u32)id, NPF_SET_BUDGET, BUDGET * PG, NULL),
		  "%s: set budget: %s", what, npf_client__errmsg(c));
	do {
		bi = budget(c, id);
		if (bi.resident_pages <= bi.low_pages && bi.evicted_pages)
			break;
		usleep(5000);
	} while (th_now() - t0 < 10);
	TH_ASSERT(bi.resident_pages <= bi.low_pages,
		  "%s: not evicted: %llu pages resident, low watermark %llu", what,
		  (unsigned long long)bi.resident_pages, (unsigned long long)bi.low_pages);
	usleep(50000); /* a batch in flight ends */
	TH_ASSERT(!mincore(mem, npg * PG, vec), "mincore: %s", strerror(errno));
	for (p = 0; p < npg; p += 2)
		gone += !(vec[p] & 1);
	/* the case needs written pages evicted: not a test otherwise */
	TH_ASSERT(gone >= npg / 4, "%s: only %llu of %llu written pages were evicted", what,
		  (unsigned long long)gone, (unsigned long long)(npg / 2));

	for (p = 0; p < npg; p++)
		for (w = 0; w < PG / 8; w++) {
			uint64_t got = ((uint64_t *)(mem + p * PG))[w];
			uint64_t want = p % 2 ? 0 : word(p, w);

			if (got == want)
				continue;
			if (bad++ < 3)
				printf("%s: page %llu word %llu: 0x%llx, want 0x%llx\n", what,
				       (unsigned long long)p, (unsigned long long)w,
				       (unsigned long long)got, (unsigned long long)want);
			break;
		}
	bi = budget(c, id);
	printf("%s: %llu of %llu written pages evicted; npfd evicted %llu pages, wrote %llu back, read %llu back, dropped %llu clean\n",
	       what, (unsigned long long)gone, (unsigned long long)(npg / 2),
	       (unsigned long long)bi.evicted_pages, (unsigned long long)bi.written_pages,
	       (unsigned long long)bi.refaults, (unsigned long long)bi.dropped_clean);
	TH_ASSERT(!bad, "%s: %llu pages read back wrong: written pages dropped unwritten", what,
		  (unsigned long long)bad);
	/* each evicted written page went to the store, and came back from it */
	TH_ASSERT(bi.written_pages >= gone && bi.refaults >= gone,
		  "%s: %llu written pages evicted, but %llu written back and %llu read back", what,
		  (unsigned long long)gone, (unsigned long long)bi.written_pages,
		  (unsigned long long)bi.refaults);
}

/*
 * Until npfd's eviction of region id is over: a batch still running when
 * the region is unmapped goes on zapping its addresses, which the next
 * mmap may hand out again (seen: the next region's written pages read
 * zeros, 3 of 20 runs). Not this test's case: it waits.
 */
static void quiesce(struct npf_client *c, int id)
{
	struct npf_budget_info a = budget(c, id), b;
	double t0 = th_now();

	for (;;) {
		usleep(100000);
		b = budget(c, id);
		if (b.evicted_pages == a.evicted_pages && b.aborted == a.aborted &&
		    b.resident_pages == a.resident_pages)
			return;
		TH_ASSERT(th_now() - t0 < 10, "eviction of region %d did not stop", id);
		a = b;
	}
}

/* Written before registration: present, writable, dirty, unknown to npfd. */
static void before(struct npf_client *c)
{
	char *mem =
		mmap(NULL, NPG * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int id;

	TH_ASSERT(mem != MAP_FAILED, "mmap");
	for (uint64_t p = 0; p < NPG; p += 2)
		fill(mem, p);
	NPF_OPTS(npf_region_opts, o, .name = "skipped-before");
	id = npf_client__register(c, mem, NPG * PG, &o);
	TH_ASSERT(id > 0, "register: %s", npf_client__errmsg(c));
	/* a budget that evicts nothing yet: read runs are installed clean from now on */
	TH_ASSERT(!npf_client__region_set(c, (__u32)id, NPF_SET_BUDGET, 2 * NPG * PG, NULL),
		  "set budget: %s", npf_client__errmsg(c));
	read_blocks(mem, NPG);
	evict_and_check(c, id, mem, NPG, "before");
	quiesce(c, id);
	munmap(mem, NPG * PG);
}

/*
 * Installed writable by npfd for a write fault and written; the odd pages
 * dropped by the process (they read zeros from then on); the region's
 * first block unmapped, which makes npfd forget what it installed.
 */
static void cut(struct npf_client *c)
{
	char *mem = mmap(NULL, (NPG + BLOCK) * PG, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *rest = mem + BLOCK * PG;
	int id;

	TH_ASSERT(mem != MAP_FAILED, "mmap");
	NPF_OPTS(npf_region_opts, o, .name = "skipped-cut");
	id = npf_client__register(c, mem, (NPG + BLOCK) * PG, &o);
	TH_ASSERT(id > 0, "register: %s", npf_client__errmsg(c));
	TH_ASSERT(!npf_client__region_set(c, (__u32)id, NPF_SET_BUDGET, 2 * NPG * PG, NULL),
		  "set budget: %s", npf_client__errmsg(c));
	for (uint64_t p = 0; p < NPG; p++)
		fill(rest, p); /* write faults: each block installed writable */
	for (uint64_t p = 1; p < NPG; p += 2)
		TH_ASSERT(!madvise(rest + p * PG, PG, MADV_DONTNEED), "madvise: %s",
			  strerror(errno));
	TH_ASSERT(!munmap(mem, BLOCK * PG), "munmap: %s", strerror(errno));
	read_blocks(rest, NPG);
	evict_and_check(c, id, rest, NPG, "cut");
	quiesce(c, id);
	munmap(rest, NPG * PG);
}

int main(void)
{
	struct th_npfd d;
	struct npf_client *c;

	th_npfd_start(&d, NULL);
	NPF_OPTS(npf_client_opts, co, .socket_path = d.sock);
	c = npf_client__connect(&co);
	TH_ASSERT(c, "connect: %s", strerror(errno));
	before(c);
	cut(c);
	npf_client__close(c);
	th_npfd_stop(&d);
	printf("PASS\n");
	return 0;
}
