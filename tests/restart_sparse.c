// SPDX-License-Identifier: GPL-2.0
/*
 * A new npfd adopts a huge, sparse region in the time its present pages
 * take, not its length: a client registers 64 TiB (MAP_NORESERVE) and
 * touches 96 pages of it (npfd installs each with its fault-around), npfd
 * is killed and started again, and the new npfd must count as many pages
 * resident as the one before and answer for the region within 10 s.
 * Read through pagemap entry by entry, the 2^34 entries are 128 GiB of
 * reads (34 s here), in which npfd answers no client (mutate entry
 * adoption-pagemap-read-whole); PAGEMAP_SCAN hands out the present ranges
 * and skips the page tables that were never filled.
 */
#include <sys/mman.h>
#include "budget.h"
#include "restart_common.h"

#define SPARSE (64ULL << 40)
#define SPREAD 64 /* pages, one every SPARSE / SPREAD */
#define RUN 32	  /* and a run of pages at the start */
#define ADOPT_SECS 10.0

static struct rs_npfd d;

int main(void)
{
	struct npf_client *c;
	struct npf_budget_info bi, before;
	char *mem;
	int id;
	double t0, took;

	npf_set_print(rs_print);
	rs_npfd_start(&d);
	NPF_OPTS(npf_client_opts, co, .socket_path = d.sock, .fallback_ms = 600 * 1000);
	c = npf_client__connect(&co);
	TH_ASSERT(c, "connect: %s", strerror(errno));
	mem = mmap(NULL, SPARSE, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	TH_ASSERT(mem != MAP_FAILED, "mmap 64 TiB: %s", strerror(errno));
	id = npf_client__register(c, mem, SPARSE, NULL);
	TH_ASSERT(id > 0, "register 64 TiB: %s", npf_client__errmsg(c));
	for (uint64_t i = 0; i < RUN; i++)
		mem[i * 4096] = (char)(i + 1);
	for (uint64_t i = 1; i <= SPREAD; i++)
		mem[i * (SPARSE / SPREAD) - 4096] = (char)i;

	before = th_budget(c, id); /* no budget: the counts alone */
	TH_ASSERT(before.resident_pages >= RUN + SPREAD,
		  "npfd counts %llu pages resident of the %d touched",
		  (unsigned long long)before.resident_pages, RUN + SPREAD);
	rs_npfd_kill(&d, SIGKILL);
	rs_npfd_start(&d);
	/* npfd is up: from here, the adoption, done once npfd answers for the region */
	for (t0 = th_now();; usleep(10000)) {
		struct npf_budget_info *list;
		size_t n;

		if (!npf_client__budget_list(c, (__u32)id, &list, &n)) {
			free(list);
			break;
		}
		TH_ASSERT(th_now() - t0 < 120, "the new npfd did not adopt the region in 120 s");
	}
	took = th_now() - t0;
	bi = th_budget(c, id);
	printf("adopted 64 TiB with %llu pages resident (%llu before the kill) in %.2f s\n",
	       (unsigned long long)bi.resident_pages, (unsigned long long)before.resident_pages,
	       took);
	TH_ASSERT(bi.resident_pages == before.resident_pages,
		  "the new npfd counts %llu pages resident, the one before %llu",
		  (unsigned long long)bi.resident_pages, (unsigned long long)before.resident_pages);
	TH_ASSERT(took < ADOPT_SECS, "the adoption took %.1f s (%.0f s allowed)", took, ADOPT_SECS);
	for (uint64_t i = 0; i < RUN; i++)
		TH_ASSERT(mem[i * 4096] == (char)(i + 1), "page %llu changed",
			  (unsigned long long)i);
	npf_client__close(c);
	munmap(mem, SPARSE);
	rs_npfd_cleanup(&d);
	printf("PASS\n");
	return 0;
}
