// SPDX-License-Identifier: GPL-2.0
/*
 * An anonymous region four times its budget: every page is written, npfd
 * evicts down to the low watermark (dirty pages to its swap store), and
 * every byte reads back right (the pages come back from the store). A
 * second pass only reads: the pages read back were installed clean, so
 * evicting them again writes nothing (dropped_clean grows, written_pages
 * does not). A third pass rewrites every page, the resident ones (read
 * back clean) first, in place; the budget shrinks so that nearly all go:
 * the new bytes, not the stored ones, are what a fourth read sees. Then
 * the process unmaps the first quarter: its copies leave the store. Last,
 * the process drops every page left itself: they read as zeros, nothing
 * of them stays in the store.
 */
#include <stdint.h>
#include <sys/mman.h>
#include "budget.h"

#define PG 4096UL
#define NPG 1024UL
#define BUDGET 256UL		     /* pages */
#define CUT 256UL		     /* pages unmapped off the front at the end */
#define SWAP_DIR "/var/lib/npf/swap" /* npfd's default swap-dir */

static uint64_t word(uint64_t gen, uint64_t p, uint64_t w)
{
	return ((gen << 40) + p * 512 + w) * 0x9e3779b97f4a7c15ULL + 1;
}

/*
 * Write generation gen into every page: the resident ones first (before
 * eviction takes them), so that some writes land in place on pages read
 * back clean and only their write-protect fault makes them dirty.
 */
static uint64_t fill(char *mem, uint64_t gen)
{
	unsigned char vec[NPG];
	uint64_t in_place = 0;

	TH_ASSERT(!mincore(mem, NPG * PG, vec), "mincore: %s", strerror(errno));
	for (int resident = 1; resident >= 0; resident--)
		for (uint64_t p = 0; p < NPG; p++) {
			uint64_t *v = (uint64_t *)(mem + p * PG);

			if ((vec[p] & 1) != resident)
				continue;
			in_place += (uint64_t)resident;
			for (uint64_t w = 0; w < PG / 8; w++)
				v[w] = word(gen, p, w);
		}
	return in_place;
}

static void verify(const char *mem, uint64_t gen, const char *what)
{
	for (uint64_t p = 0; p < NPG; p++) {
		const uint64_t *v = (const uint64_t *)(mem + p * PG);

		for (uint64_t w = 0; w < PG / 8; w++)
			if (v[w] != word(gen, p, w))
				th_fail("%s: page %llu word %llu is 0x%llx, expected 0x%llx", what,
					(unsigned long long)p, (unsigned long long)w,
					(unsigned long long)v[w],
					(unsigned long long)word(gen, p, w));
	}
}

static struct npf_budget_info budget(struct npf_client *c, int id)
{
	struct npf_budget_info *bi;
	struct npf_budget_info out;
	size_t n;
	int err = npf_client__budget_list(c, (__u32)id, &bi, &n);

	TH_ASSERT(!err && n == 1, "budget list: %s", npf_client__errmsg(c));
	out = *bi;
	free(bi);
	return out;
}

/* Wait until npfd has evicted the region down to its high watermark. */
static struct npf_budget_info settle(struct npf_client *c, int id, const char *what)
{
	struct npf_budget_info bi;
	double t0 = th_now();

	do {
		bi = budget(c, id);
		/* down to the low watermark, and no batch in flight (two equal looks) */
		if (bi.resident_pages <= bi.low_pages) {
			struct npf_budget_info again;

			usleep(20000);
			again = budget(c, id);
			if (again.evicted_pages == bi.evicted_pages &&
			    again.resident_pages == bi.resident_pages)
				return again;
		}
		usleep(2000);
	} while (th_now() - t0 < 10);
	th_fail("%s: %llu pages resident after 10 s, budget high watermark %llu (evicted %llu, aborted %llu)",
		what, (unsigned long long)bi.resident_pages, (unsigned long long)bi.high_pages,
		(unsigned long long)bi.evicted_pages, (unsigned long long)bi.aborted);
}

/* Does the store (a descriptor) hold data at page p's offset? */
static bool stored_at(int store, uint64_t p)
{
	return lseek(store, (off_t)(p * PG), SEEK_DATA) == (off_t)(p * PG);
}

/*
 * The process unmaps the region's first CUT pages, most of them evicted:
 * their copies go with them (punched from the store, which keeps the
 * others where they are: page i at byte i x 4096), and stored_pages
 * counts only the pages left. The pages left read what was written.
 */
static void cut_head(struct npf_client *c, int id, char *mem)
{
	int store = th_fd_of(SWAP_DIR "/"); /* libnpf's, for its fallback */
	uint64_t cut = 0, left = 0, below = 0;
	struct npf_budget_info bi = budget(c, id);

	TH_ASSERT(store >= 0, "no descriptor of the region's swap store in this process");
	for (uint64_t p = 0; p < NPG; p++)
		*(p < CUT ? &cut : &left) += stored_at(store, p);
	TH_ASSERT(cut > CUT / 2 && cut + left == bi.stored_pages,
		  "before the cut: %llu + %llu pages in the store, %llu counted stored",
		  (unsigned long long)cut, (unsigned long long)left,
		  (unsigned long long)bi.stored_pages);
	TH_ASSERT(!munmap(mem, CUT * PG), "munmap: %s", strerror(errno));
	for (double t0 = th_now(); th_now() - t0 < 2 && bi.stored_pages != left; usleep(2000))
		bi = budget(c, id);
	for (uint64_t p = 0; p < CUT; p++)
		below += stored_at(store, p);
	printf("head cut: %llu of %llu stored pages went with it; %llu counted stored after, %llu left in the store below the cut\n",
	       (unsigned long long)cut, (unsigned long long)(cut + left),
	       (unsigned long long)bi.stored_pages, (unsigned long long)below);
	TH_ASSERT(!below, "%llu copies of pages cut off stay in the store",
		  (unsigned long long)below);
	TH_ASSERT(bi.stored_pages == left, "%llu pages counted stored, %llu left",
		  (unsigned long long)bi.stored_pages, (unsigned long long)left);
	for (uint64_t p = CUT; p < NPG; p++)
		for (uint64_t w = 0; w < PG / 8; w++)
			TH_ASSERT(((uint64_t *)(mem + p * PG))[w] == word(2, p, w),
				  "after the head cut: page %llu word %llu is 0x%llx",
				  (unsigned long long)p, (unsigned long long)w,
				  (unsigned long long)((uint64_t *)(mem + p * PG))[w]);
}

int main(void)
{
	struct th_npfd d;
	struct npf_client *c;
	struct npf_budget_info bi, bi2;
	char *mem;
	int id, err;

	th_npfd_start(&d, NULL);
	NPF_OPTS(npf_client_opts, co, .socket_path = d.sock);
	c = npf_client__connect(&co);
	TH_ASSERT(c, "connect: %s", strerror(errno));
	mem = mmap(NULL, NPG * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	TH_ASSERT(mem != MAP_FAILED, "mmap");
	NPF_OPTS(npf_region_opts, o, .name = "evict-anon");
	id = npf_client__register(c, mem, NPG * PG, &o);
	TH_ASSERT(id > 0, "register: %s", npf_client__errmsg(c));
	err = npf_client__region_set(c, (__u32)id, NPF_SET_BUDGET, BUDGET * PG, &bi);
	TH_ASSERT(!err, "set budget: %s", npf_client__errmsg(c));
	TH_ASSERT(bi.budget_pages == BUDGET && bi.high_pages == BUDGET &&
			  bi.low_pages == BUDGET * 90 / 100,
		  "budget reads back as %llu/%llu/%llu", (unsigned long long)bi.budget_pages,
		  (unsigned long long)bi.high_pages, (unsigned long long)bi.low_pages);

	fill(mem, 1);
	bi = settle(c, id, "after writing");
	printf("written: resident %llu, evicted %llu, written back %llu in %llu batches\n",
	       (unsigned long long)bi.resident_pages, (unsigned long long)bi.evicted_pages,
	       (unsigned long long)bi.written_pages, (unsigned long long)bi.write_batches);
	TH_ASSERT(bi.evicted_pages >= NPG - BUDGET, "only %llu pages evicted",
		  (unsigned long long)bi.evicted_pages);
	TH_ASSERT(bi.written_pages >= NPG - BUDGET && bi.stored_pages >= NPG - BUDGET,
		  "dirty pages not written back: %llu written, %llu stored",
		  (unsigned long long)bi.written_pages, (unsigned long long)bi.stored_pages);
	TH_ASSERT(bi.write_batches && bi.write_batches < bi.written_pages,
		  "writes not batched: %llu pages in %llu submissions",
		  (unsigned long long)bi.written_pages, (unsigned long long)bi.write_batches);

	verify(mem, 1, "first read");
	bi2 = settle(c, id, "after reading");
	printf("read: refaults %llu, dropped clean %llu, written %llu\n",
	       (unsigned long long)bi2.refaults, (unsigned long long)bi2.dropped_clean,
	       (unsigned long long)bi2.written_pages);
	TH_ASSERT(bi2.refaults >= NPG - BUDGET, "only %llu pages read back from the store",
		  (unsigned long long)bi2.refaults);
	TH_ASSERT(bi2.dropped_clean > 0, "no clean page dropped without a write");
	/*
	 * Only the pages still resident (dirty) since the first pass may be
	 * written now, and a few more: a page an install found there already
	 * (another fault's, perhaps a writable one written since) keeps its
	 * dirty mark and may be written once more, never dropped unwritten.
	 * Treating every read page as dirty would write them all again.
	 */
	TH_ASSERT(bi2.written_pages - bi.written_pages <= bi.resident_pages + NPG / 16,
		  "pages only read were written back again (%llu -> %llu, %llu were dirty)",
		  (unsigned long long)bi.written_pages, (unsigned long long)bi2.written_pages,
		  (unsigned long long)bi.resident_pages);

	TH_ASSERT(fill(mem, 2) > 0, "no page was resident when rewriting");
	settle(c, id, "after rewriting");
	/* a smaller budget: the pages rewritten in place go too, and come back */
	TH_ASSERT(!npf_client__region_set(c, (__u32)id, NPF_SET_BUDGET, 32 * PG, NULL),
		  "set budget: %s", npf_client__errmsg(c));
	settle(c, id, "smaller budget");
	verify(mem, 2, "read after rewrite");
	bi = settle(c, id, "end");
	TH_ASSERT(bi.aborted == 0, "%llu evictions aborted", (unsigned long long)bi.aborted);

	cut_head(c, id, mem);

	/*
	 * The process drops its pages itself (MADV_DONTNEED): the stored
	 * copies of the evicted ones are stale, the next touch reads zeros.
	 */
	TH_ASSERT(!madvise(mem + CUT * PG, (NPG - CUT) * PG, MADV_DONTNEED), "MADV_DONTNEED: %s",
		  strerror(errno));
	for (uint64_t p = CUT; p < NPG; p++)
		for (uint64_t w = 0; w < PG / 8; w++)
			TH_ASSERT(!((uint64_t *)(mem + p * PG))[w],
				  "page %llu word %llu reads 0x%llx after MADV_DONTNEED, not zero",
				  (unsigned long long)p, (unsigned long long)w,
				  (unsigned long long)((uint64_t *)(mem + p * PG))[w]);
	bi = budget(c, id);
	TH_ASSERT(!bi.stored_pages, "%llu pages still in the swap store after MADV_DONTNEED",
		  (unsigned long long)bi.stored_pages);

	npf_client__close(c);
	th_npfd_stop(&d);
	printf("PASS\n");
	return 0;
}
