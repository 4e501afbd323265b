// SPDX-License-Identifier: GPL-2.0
/*
 * fork() of a process most of whose anonymous region is evicted: the
 * child's copy of the region reads the evicted pages back as they were at
 * the fork (npfd copies them into the child's own store), while the parent
 * rewrites and evicts its pages again meanwhile and then goes.
 */
#include <sys/mman.h>
#include <sys/wait.h>
#include "restart_common.h"

#define PG 4096UL
#define NPG 1024UL
#define BUDGET 128UL

static struct rs_npfd d;

static uint64_t word(uint64_t gen, uint64_t p, uint64_t w)
{
	return ((gen << 40) + p * 512 + w) * 0x9e3779b97f4a7c15ULL + 3;
}

static void fill(char *mem, uint64_t gen)
{
	for (uint64_t p = 0; p < NPG; p++)
		for (uint64_t w = 0; w < PG / 8; w++)
			((uint64_t *)(mem + p * PG))[w] = word(gen, p, w);
}

/* Words that are not generation gen's. */
static uint64_t wrong(const char *mem, uint64_t gen)
{
	uint64_t bad = 0;

	for (uint64_t p = 0; p < NPG; p++)
		for (uint64_t w = 0; w < PG / 8; w++)
			bad += ((const uint64_t *)(mem + p * PG))[w] != word(gen, p, w);
	return bad;
}

static uint64_t evict_settled(struct npf_client *c, int id)
{
	struct npf_budget_info *bi;
	uint64_t evicted = 0;
	size_t n;

	for (double t0 = th_now(); th_now() - t0 < 10; usleep(5000)) {
		TH_ASSERT(!npf_client__budget_list(c, (__u32)id, &bi, &n) && n == 1,
			  "budget list: %s", npf_client__errmsg(c));
		evicted = bi->evicted_pages;
		if (bi->resident_pages <= bi->low_pages) {
			free(bi);
			break;
		}
		free(bi);
	}
	return evicted;
}

int main(void)
{
	struct npf_client *c;
	uint64_t evicted, bad;
	int id, go[2], st;
	pid_t child;
	char *mem;

	npf_set_print(rs_print);
	rs_npfd_start(&d);
	NPF_OPTS(npf_client_opts, co, .socket_path = d.sock, .fallback_ms = 60000);
	c = npf_client__connect(&co);
	TH_ASSERT(c, "connect: %s", strerror(errno));
	mem = mmap(NULL, NPG * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	TH_ASSERT(mem != MAP_FAILED, "mmap");
	id = npf_client__register(c, mem, NPG * PG, NULL);
	TH_ASSERT(id > 0, "register: %s", npf_client__errmsg(c));
	TH_ASSERT(!npf_client__region_set(c, (__u32)id, NPF_SET_BUDGET, BUDGET * PG, NULL),
		  "set budget: %s", npf_client__errmsg(c));
	fill(mem, 1);
	evicted = evict_settled(c, id);
	TH_ASSERT(evicted >= NPG - BUDGET, "only %llu pages evicted", (unsigned long long)evicted);

	TH_ASSERT(!pipe(go), "pipe");
	child = fork();
	TH_ASSERT(child >= 0, "fork: %s", strerror(errno));
	if (!child) {
		char x;

		/* read only after the parent rewrote, evicted and unmapped its copy */
		if (read(go[0], &x, 1) != 1)
			_exit(2);
		bad = wrong(mem, 1);
		if (bad)
			printf("child: %llu words are not what the parent had at the fork\n",
			       (unsigned long long)bad);
		_exit(bad ? 1 : 0);
	}
	fill(mem, 2);
	evicted = evict_settled(c, id);
	bad = wrong(mem, 2);
	TH_ASSERT(!bad, "parent: %llu words wrong after rewriting", (unsigned long long)bad);
	TH_ASSERT(!munmap(mem, NPG * PG), "munmap");
	TH_ASSERT(write(go[1], "g", 1) == 1, "pipe write");
	TH_ASSERT(waitpid(child, &st, 0) == child, "waitpid");
	TH_ASSERT(WIFEXITED(st) && !WEXITSTATUS(st), "the child read wrong bytes (status 0x%x)",
		  st);
	npf_client__close(c);
	rs_npfd_cleanup(&d);
	printf("PASS\n");
	return 0;
}
