// SPDX-License-Identifier: GPL-2.0
/*
 * The resolver's batch (daemon/runs.c): faults de-duplicated (one per page
 * and address space, keeping what each knew: write, thread, raise time),
 * then cut into runs of contiguous pages of one region -- never across a
 * gap, another address space, a region's end or MAX_RUN_PAGES -- and file
 * runs placed in the staging buffer without overlap, the rest left for the
 * next round.
 */
#include "unit.h"
#include "objects.h"
#include "runs.h"

#define PGSZ NPF_PAGE_SIZE
#define BASE 0x7f0000000000ULL

static struct npfd_mm mms[2]; /* an array: the sort puts mm1 (mms[0]) first */
#define mm1 mms[0]
#define mm2 mms[1]
static struct npfd_region anon, file, anon2, file2, holed, inner;
static struct fault f[4096];
static struct run *runs;
static size_t runs_cap;

static void region(struct npfd_mm *mm, struct npfd_region *r, __u64 start, __u64 npages,
		   __u32 backing)
{
	r->start = start;
	r->length = npages * PGSZ;
	r->backing = backing;
	r->mm = mm;
	list_add_tail(&r->node, &mm->regions);
}

static struct fault fault(struct npfd_mm *mm, __u64 page, __u32 tid, bool write)
{
	return (struct fault){.mm = mm,
			      .page = BASE + page * PGSZ,
			      .tid = tid,
			      .raised = page + 1,
			      .write = write};
}

static void dedupe(void)
{
	size_t n = 0;

	/* out of order, duplicates with different knowledge, two address spaces */
	f[n++] = fault(&mm1, 5, 0, false);
	f[n++] = fault(&mm1, 3, 0, false);
	f[n++] = fault(&mm1, 5, 42, true); /* a thread's fault on the page a prefetch named */
	f[n++] = fault(&mm2, 3, 7, false);
	f[n++] = fault(&mm1, 3, 9, false);
	f[n++] = fault(&mm1, 3, 10, true); /* a second thread: the first one's tid is kept */
	f[n++] = fault(&mm1, 4, 0, false);
	f[4].raised = 1000;
	n = faults_dedupe(f, n);
	UT_EQ(n, 4, "faults after de-duplication (pages 3, 4, 5 of mm1; 3 of mm2)");
	UT_CHECK(f[0].mm == f[1].mm && f[1].mm == f[2].mm && f[2].mm != f[3].mm,
		 "sorted by address space");
	UT_CHECK(f[0].page < f[1].page && f[1].page < f[2].page, "sorted by page");
	UT_EQ(f[0].tid, 9, "page 3: the first thread that faulted is kept");
	UT_EQ(f[0].raised, 1000, "page 3: its raise time is kept");
	UT_EQ(f[0].write, 1, "page 3: a write by either fault makes the page written");
	UT_EQ(f[1].write, 0, "page 4: read only");
	UT_EQ(f[2].tid, 42, "page 5: the thread's tid replaces the prefetch's 0");
	UT_EQ(f[2].raised, 6, "page 5: with the thread's raise time");
	UT_EQ(f[2].write, 1, "page 5: written");
	UT_EQ(faults_dedupe(f, 0), 0, "an empty batch");
}

/* npfd's mapping of the file region, as if every page were in the page cache */
static char cache[150 * PGSZ];

static const char *in_cache(const struct run *rn)
{
	return cache + (rn->start - BASE);
}

static size_t cut(size_t n, size_t pos, unsigned int staging, size_t *next)
{
	return runs_make(f, n, pos, staging, NULL, &runs, &runs_cap, next);
}

static void cutting(void)
{
	size_t n = 0, nr, next, i;

	/* anon region: pages 0..99; file region: pages 100..149; mm2's anon2: pages 0..9 */
	for (i = 0; i < 10; i++)
		f[n++] = fault(&mm1, i, 0, i == 4); /* 0..9 */
	for (i = 12; i < 14; i++)
		f[n++] = fault(&mm1, i, 0, false); /* a gap at 10, 11 */
	for (i = 98; i < 103; i++)
		f[n++] = fault(&mm1, i, 0, false); /* 98, 99 anon | 100..102 file */
	f[n++] = fault(&mm2, 0, 0, false);	   /* same address, other mm */
	f[n++] = fault(&mm2, 1, 0, false);
	n = faults_dedupe(f, n);
	nr = cut(n, 0, 1024, &next);
	UT_EQ(nr, 5, "runs: 0..9, 12..13, 98..99, 100..102 (file), mm2 0..1");
	UT_EQ(next, n, "every fault placed");
	if (nr == 5) {
		UT_EQ(runs[0].start, BASE, "run 0 start");
		UT_EQ(runs[0].npages, 10, "run 0 pages");
		UT_CHECK(runs[0].region == &anon, "run 0 region");
		UT_EQ(runs[0].write, 1, "run 0 has a write (page 4)");
		UT_EQ(runs[0].first, 0, "run 0 first fault");
		UT_EQ(runs[0].nfaults, 10, "run 0 faults");
		UT_EQ(runs[1].start, BASE + 12 * PGSZ, "a gap starts a run");
		UT_EQ(runs[1].npages, 2, "run 1 pages");
		UT_EQ(runs[1].write, 0, "run 1 reads only");
		UT_EQ(runs[1].first, 10, "run 1 first fault");
		UT_EQ(runs[2].npages, 2, "a region's end stops a run");
		UT_CHECK(runs[2].region == &anon, "run 2 region");
		UT_EQ(runs[3].start, BASE + 100 * PGSZ, "the next region starts a run");
		UT_CHECK(runs[3].region == &file, "run 3 is the file region's");
		UT_EQ(runs[3].npages, 3, "run 3 pages");
		UT_EQ(runs[3].staging, 0, "run 3 staging");
		UT_CHECK(runs[4].mm == &mm2 && runs[4].region == &anon2, "another mm starts a run");
		UT_EQ(runs[4].npages, 2, "run 4 pages");
	}

	/* MAX_RUN_PAGES */
	n = 0;
	for (i = 0; i < MAX_RUN_PAGES + 10; i++)
		f[n++] = fault(&mm1, 200 + i, 0, false); /* above every region of mm1 */
	nr = cut(n, 0, 1024, &next);
	UT_EQ(nr, 2, "a run longer than MAX_RUN_PAGES is cut");
	if (nr == 2) {
		UT_EQ(runs[0].npages, MAX_RUN_PAGES, "first run at MAX_RUN_PAGES");
		UT_EQ(runs[1].npages, 10, "then the rest");
		UT_CHECK(!runs[0].region, "pages outside every region: no region");
	}

	/* a run outside every region stops where a region starts (its pages are read, not zeroed) */
	n = 0;
	for (i = 0; i < 4; i++)
		f[n++] = fault(&mm2, 8 + i, 0, false); /* anon2 is 0..9: 8, 9 in it, 10, 11 not */
	f[n++] = fault(&mm1, 150, 0, false);	       /* just above the file region */
	f[n++] = fault(&mm1, 151, 0, false);
	nr = cut(n, 0, 1024, &next);
	UT_EQ(nr, 3, "mm1 150..151 outside; mm2 8..9 in anon2, then 10..11 outside");
	region(&mm2, &file2, BASE + 12 * PGSZ, 4, NPF_BACKING_FILE);
	n = 0;
	for (i = 10; i < 14; i++)
		f[n++] = fault(&mm2, i, 0, false); /* 10, 11 outside; 12, 13 in file2 */
	nr = cut(n, 0, 1024, &next);
	UT_EQ(nr, 2, "a run outside every region stops where a region starts");
	if (nr == 2) {
		UT_CHECK(!runs[0].region && runs[0].npages == 2, "pages 10, 11: no region");
		UT_CHECK(runs[1].region == &file2 && runs[1].npages == 2,
			 "pages 12, 13: the file region's, read from its file");
	}

	/* the staging buffer: file runs share 8 pages, the rest waits */
	n = 0;
	for (i = 100; i < 106; i++)
		f[n++] = fault(&mm1, i, 0, false); /* 6 file pages */
	for (i = 108; i < 113; i++)
		f[n++] = fault(&mm1, i, 0, false); /* 5 more after a gap */
	nr = cut(n, 0, 8, &next);
	UT_EQ(nr, 2, "file runs that fit 8 staging pages");
	if (nr == 2) {
		UT_EQ(runs[0].staging, 0, "first file run at staging page 0");
		UT_EQ(runs[0].npages, 6, "first file run whole");
		UT_EQ(runs[1].staging, 6, "second file run after the first in staging");
		UT_EQ(runs[1].npages, 2, "second file run cut where staging is full");
	}
	UT_EQ(next, 8, "the rest waits for the next round");
	nr = cut(n, next, 8, &next);
	UT_EQ(nr, 1, "next round");
	if (nr == 1) {
		UT_EQ(runs[0].start, BASE + 110 * PGSZ, "next round starts where the last stopped");
		UT_EQ(runs[0].staging, 0, "staging is reused from 0");
		UT_EQ(runs[0].npages, 3, "the rest");
	}
	UT_EQ(next, n, "all placed");

	/* file runs in the page cache are copied from npfd's mapping: no staging */
	n = 0;
	for (i = 100; i < 106; i++)
		f[n++] = fault(&mm1, i, 0, false);
	for (i = 108; i < 113; i++)
		f[n++] = fault(&mm1, i, 0, false);
	nr = runs_make(f, n, 0, 8, in_cache, &runs, &runs_cap, &next);
	UT_EQ(nr, 2, "file runs in the page cache");
	UT_EQ(next, n, "all placed in one round: they take no staging");
	if (nr == 2)
		UT_CHECK(runs[0].direct == cache + 100 * PGSZ &&
				 runs[1].direct == cache + 108 * PGSZ && runs[1].npages == 5,
			 "each run copies from its own place in the mapping");

	/* anonymous runs use no staging: a full staging buffer does not stop them */
	n = 0;
	for (i = 0; i < 20; i++)
		f[n++] = fault(&mm1, i, 0, false);
	nr = cut(n, 0, 1, &next);
	UT_EQ(nr, 1, "anonymous run ignores staging");
	if (nr == 1)
		UT_EQ(runs[0].npages, 20, "anonymous run whole");
}

/*
 * A region with a hole in its middle, another region in part of the hole:
 * a run stops at the hole, the other region's pages are its own run, the
 * rest of the hole is no region's, and past the hole the first region's again.
 */
static void hole(void)
{
	size_t n = 0, nr, next, i;

	for (i = 23; i < 32; i++)
		f[n++] = fault(&mm2, i, 0, false);
	nr = cut(n, 0, 1024, &next);
	UT_EQ(nr, 4, "runs: 23..24, 25..27 (the inner region), 28..29 (none), 30..31");
	if (nr == 4) {
		UT_CHECK(runs[0].region == &holed && runs[0].npages == 2, "up to the hole");
		UT_CHECK(runs[1].region == &inner && runs[1].npages == 3,
			 "the region in the hole, a run of its own");
		UT_CHECK(runs[2].region == NULL && runs[2].npages == 2,
			 "the rest of the hole: no region");
		UT_CHECK(runs[3].region == &holed && runs[3].start == BASE + 30 * PGSZ &&
				 runs[3].npages == 2,
			 "past the hole");
	}
}

int main(void)
{
	INIT_LIST_HEAD(&mm1.regions);
	INIT_LIST_HEAD(&mm2.regions);
	region(&mm1, &anon, BASE, 100, NPF_BACKING_ANON);
	region(&mm1, &file, BASE + 100 * PGSZ, 50, NPF_BACKING_FILE);
	region(&mm2, &anon2, BASE, 10, NPF_BACKING_ANON);
	region(&mm2, &holed, BASE + 20 * PGSZ, 20, NPF_BACKING_ANON);
	TH_ASSERT(!holes_add(&holed.holes, BASE + 25 * PGSZ, BASE + 30 * PGSZ), "holes_add");
	region(&mm2, &inner, BASE + 25 * PGSZ, 3, NPF_BACKING_ANON);
	dedupe();
	cutting();
	hole();
	holes_free(&holed.holes);
	free(runs);
	return ut_done("fault de-duplication and run building");
}
