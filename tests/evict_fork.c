// SPDX-License-Identifier: GPL-2.0
/*
 * fork() of a process most of whose anonymous region is evicted: the
 * child's copy of the region reads the evicted pages back as they were at
 * the fork (npfd copies them into the child's own store), while the parent
 * rewrites and evicts its pages again meanwhile and then goes.
 */
#include <sys/mman.h>
#include <sys/wait.h>
#include "budget.h"
#include "restart_common.h"

#define PG 4096UL
#define NPG 1024UL
#define BUDGET 128UL

static struct rs_npfd d;

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
	mem = th_budget_region(c, NPG, BUDGET, &id);
	th_fill(mem, NPG, 1);
	evicted = th_budget_settle(c, id);
	TH_ASSERT(evicted >= NPG - BUDGET, "only %llu pages evicted", (unsigned long long)evicted);

	TH_ASSERT(!pipe(go), "pipe");
	child = fork();
	TH_ASSERT(child >= 0, "fork: %s", strerror(errno));
	if (!child) {
		char x;

		/* read only after the parent rewrote, evicted and unmapped its copy */
		if (read(go[0], &x, 1) != 1)
			_exit(2);
		bad = th_wrong(mem, NPG, 1);
		if (bad)
			printf("child: %llu words are not what the parent had at the fork\n",
			       (unsigned long long)bad);
		_exit(bad ? 1 : 0);
	}
	th_fill(mem, NPG, 2);
	evicted = th_budget_settle(c, id);
	bad = th_wrong(mem, NPG, 2);
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
