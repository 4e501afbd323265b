// SPDX-License-Identifier: GPL-2.0
/*
 * A client budget follows its regions' working sets (seed 000 Fig. 7):
 * two regions of one client under a 4 MiB client budget, B using 3 MiB and
 * A 0.5 MiB; then they swap, A using 3 MiB and B 0.5 MiB. Together they
 * fit the budget, so npfd must take the pages B no longer uses and leave A
 * its 3 MiB: A ends with at least 700 of its 768 pages resident and B with
 * at most 300. (Had the largest region always given, they would settle
 * at half the budget each, ~460 pages.) Every byte reads back right.
 */
#include <stdint.h>
#include <sys/mman.h>
#include "harness.h"
#include "npf.h"

#define PG 4096UL
#define REG_PAGES 1024UL /* 4 MiB each */
#define LARGE 768UL	 /* 3 MiB */
#define SMALL 128UL	 /* 0.5 MiB */

static uint64_t word(int r, uint64_t p)
{
	return ((uint64_t)r << 32 | p) * 0x9e3779b97f4a7c15ULL + 7;
}

static void resident(struct npf_client *c, const int *id, uint64_t *res)
{
	struct npf_budget_info *bi;
	size_t n, i;

	TH_ASSERT(!npf_client__budget_list(c, 0, &bi, &n), "budget list: %s",
		  npf_client__errmsg(c));
	for (i = 0; i < n; i++)
		for (int r = 0; r < 2; r++)
			if ((int)bi[i].region_id == id[r])
				res[r] = bi[i].resident_pages;
	free(bi);
}

/* Write the first word of pages [0, n) of region r. */
static void touch(char *const *mem, int r, uint64_t n)
{
	for (uint64_t p = 0; p < n; p++)
		*(volatile uint64_t *)(mem[r] + p * PG) = word(r, p);
}

int main(void)
{
	static const char *const args[] = {"--client-budget-mib", "4", NULL};
	uint64_t res[2] = {0}, want[2];
	struct th_npfd d;
	struct npf_client *c;
	char *mem[2];
	int id[2], r;
	double t0;

	th_npfd_start(&d, args);
	{
		NPF_OPTS(npf_client_opts, co, .socket_path = d.sock);

		c = npf_client__connect(&co);
	}
	TH_ASSERT(c, "connect: %s", strerror(errno));
	for (r = 0; r < 2; r++) {
		mem[r] = mmap(NULL, REG_PAGES * PG, PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		TH_ASSERT(mem[r] != MAP_FAILED, "mmap");
		id[r] = npf_client__register(c, mem[r], REG_PAGES * PG, NULL);
		TH_ASSERT(id[r] > 0, "register: %s", npf_client__errmsg(c));
	}
	/* before: A (0) uses 0.5 MiB, B (1) 3 MiB; every page B will not use again is written */
	touch(mem, 0, SMALL);
	touch(mem, 1, LARGE);
	/* after: A uses 3 MiB, B 0.5 MiB, until npfd has moved the memory (10 s at most) */
	for (t0 = th_now(); th_now() - t0 < 10;) {
		touch(mem, 0, LARGE);
		touch(mem, 1, SMALL);
		resident(c, id, res);
		if (res[0] >= 700 && res[1] <= 300)
			break;
		usleep(2000);
	}
	printf("after the swap: A %llu pages resident (uses %lu), B %llu (uses %lu)\n",
	       (unsigned long long)res[0], LARGE, (unsigned long long)res[1], SMALL);
	TH_ASSERT(res[0] >= 700 && res[1] <= 300,
		  "after 10 s A has %llu pages resident (want >= 700 of the 768 it uses), B %llu "
		  "(want <= 300: it uses 128)",
		  (unsigned long long)res[0], (unsigned long long)res[1]);
	want[0] = LARGE;
	want[1] = LARGE;
	for (r = 0; r < 2; r++)
		for (uint64_t p = 0; p < REG_PAGES; p++) {
			uint64_t v = *(volatile uint64_t *)(mem[r] + p * PG);

			TH_ASSERT(v == (p < want[r] ? word(r, p) : 0),
				  "region %c page %llu reads %#llx", 'A' + r, (unsigned long long)p,
				  (unsigned long long)v);
		}
	npf_client__close(c);
	th_npfd_stop(&d);
	printf("PASS\n");
	return 0;
}
