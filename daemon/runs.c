// SPDX-License-Identifier: GPL-2.0
/*
 * Batch building for the resolver (resolve.c): de-duplicate the queued
 * faults and cut them into runs. Moved out of resolve.c with the arrays as
 * arguments instead of resolve.c's globals; one fix since: a run of pages
 * outside every region stops where a region starts (it ran on into it, and
 * that region's first pages were zero-filled instead of read from its file).
 */
#include <stdlib.h>
#include "region.h"
#include "runs.h"

static int cmp_fault(const void *a, const void *b)
{
	const struct fault *x = a, *y = b;

	if (x->mm != y->mm)
		return x->mm < y->mm ? -1 : 1;
	if (x->page != y->page)
		return x->page < y->page ? -1 : 1;
	return 0;
}

size_t faults_dedupe(struct fault *faults, size_t nfaults)
{
	size_t i, j = 0;

	qsort(faults, nfaults, sizeof(*faults), cmp_fault);
	for (i = 0; i < nfaults; i++) {
		struct fault *kept = j ? &faults[j - 1] : NULL;

		if (kept && kept->mm == faults[i].mm && kept->page == faults[i].page) {
			/* Two faults, one page: one install wakes both; keep what each knew. */
			kept->write |= faults[i].write;
			kept->cached |= faults[i].cached;
			if (!kept->tid && faults[i].tid) {
				kept->tid = faults[i].tid;
				kept->raised = faults[i].raised;
			}
			continue;
		}
		faults[j++] = faults[i];
	}
	return j;
}

size_t runs_make(const struct fault *faults, size_t nfaults, size_t pos, unsigned int staging_pages,
		 const char *(*direct)(const struct run *rn), struct run **runs, size_t *runs_cap,
		 size_t *next)
{
	unsigned int staged = 0;
	size_t i = pos, n = 0;

	while (i < nfaults) {
		const struct fault *f = &faults[i];
		struct npfd_region *r = mm_find_region(f->mm, f->page);
		bool file = r && r->backing == NPF_BACKING_FILE;
		struct run *rn;
		size_t j = i + 1, k;

		if (file && staged == staging_pages)
			break; /* staging full: the rest goes in the next round */
		while (j < nfaults && faults[j].mm == f->mm &&
		       faults[j].page == faults[j - 1].page + NPF_PAGE_SIZE &&
		       j - i < MAX_RUN_PAGES &&
		       (r ? faults[j].page < r->start + r->length &&
					!holes_contain(&r->holes, faults[j].page) :
			    !mm_find_region(f->mm, faults[j].page)) &&
		       (!file || staged + (j - i) < staging_pages))
			j++;
		if (n == *runs_cap) {
			size_t cap = *runs_cap ? *runs_cap * 2 : 256;
			struct run *nr = realloc(*runs, cap * sizeof(*nr));

			if (!nr)
				break;
			*runs = nr;
			*runs_cap = cap;
		}
		rn = &(*runs)[n++];
		*rn = (struct run){.mm = f->mm,
				   .region = r,
				   .start = f->page,
				   .npages = (__u32)(j - i),
				   .first = (__u32)i,
				   .nfaults = (__u32)(j - i)};
		for (k = i; k < j; k++)
			rn->write |= faults[k].write;
		if (file && direct)
			rn->direct = direct(rn);
		if (file && !rn->direct) {
			rn->staging = staged;
			staged += rn->npages;
		}
		i = j;
	}
	*next = i;
	return n;
}
