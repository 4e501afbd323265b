// SPDX-License-Identifier: GPL-2.0
/*
 * The client budget (npfd.conf's client-budget-mib): a client whose
 * regions have no budget of their own -- three anonymous regions of 2 MiB
 * under a 2 MiB client budget -- is evicted down to the client's low
 * watermark, all its regions together, and every byte reads back right.
 * A second client under the same setting is held to its own budget, not
 * the first one's.
 */
#include <stdint.h>
#include <sys/mman.h>
#include "harness.h"
#include "npf.h"

#define PG 4096UL
#define NREG 3
#define REG_PAGES 512UL /* 2 MiB */
#define CLIENT_PAGES 512UL

static uint64_t word(int r, uint64_t p, uint64_t w)
{
	return ((uint64_t)r << 48 | p << 12 | w) * 0x9e3779b97f4a7c15ULL + 9;
}

static uint64_t resident(struct npf_client *c, uint64_t *evicted)
{
	struct npf_budget_info *bi;
	uint64_t sum = 0;
	size_t n, i;

	TH_ASSERT(!npf_client__budget_list(c, 0, &bi, &n), "budget list: %s",
		  npf_client__errmsg(c));
	*evicted = 0;
	for (i = 0; i < n; i++)
		if (bi[i].tgid == (__u32)getpid()) {
			sum += bi[i].resident_pages;
			*evicted += bi[i].evicted_pages;
			TH_ASSERT(bi[i].budget_pages == 0, "region %u has a budget of its own",
				  bi[i].region_id);
		}
	free(bi);
	return sum;
}

static int client(const char *sock)
{
	NPF_OPTS(npf_client_opts, co, .socket_path = sock);
	struct npf_client *c = npf_client__connect(&co);
	char *mem[NREG];
	uint64_t res = 0, evicted = 0;
	double t0;
	int r;

	TH_ASSERT(c, "connect: %s", strerror(errno));
	for (r = 0; r < NREG; r++) {
		mem[r] = mmap(NULL, REG_PAGES * PG, PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		TH_ASSERT(mem[r] != MAP_FAILED, "mmap");
		TH_ASSERT(npf_client__register(c, mem[r], REG_PAGES * PG, NULL) > 0, "register: %s",
			  npf_client__errmsg(c));
	}
	for (r = 0; r < NREG; r++)
		for (uint64_t p = 0; p < REG_PAGES; p++)
			for (uint64_t w = 0; w < PG / 8; w++)
				((uint64_t *)(mem[r] + p * PG))[w] = word(r, p, w);
	for (t0 = th_now(); th_now() - t0 < 10; usleep(5000)) {
		res = resident(c, &evicted);
		if (res <= CLIENT_PAGES * 90 / 100)
			break;
	}
	printf("pid %d: %llu pages resident of %lu registered, %llu evicted\n", getpid(),
	       (unsigned long long)res, NREG * REG_PAGES, (unsigned long long)evicted);
	TH_ASSERT(res <= CLIENT_PAGES * 90 / 100,
		  "%llu pages resident after 10 s, client budget %lu pages (low 90%%)",
		  (unsigned long long)res, CLIENT_PAGES);
	for (r = 0; r < NREG; r++)
		for (uint64_t p = 0; p < REG_PAGES; p++)
			for (uint64_t w = 0; w < PG / 8; w++)
				TH_ASSERT(((uint64_t *)(mem[r] + p * PG))[w] == word(r, p, w),
					  "region %d page %llu word %llu read back wrong", r,
					  (unsigned long long)p, (unsigned long long)w);
	npf_client__close(c);
	return 0;
}

int main(void)
{
	static const char *const args[] = {"--client-budget-mib", "2", NULL};
	struct th_npfd d;
	pid_t pid[2];
	int i, st, fails = 0;

	th_npfd_start(&d, args);
	fflush(stdout);
	for (i = 0; i < 2; i++) {
		pid[i] = fork();
		if (pid[i] == 0)
			exit(client(d.sock));
	}
	for (i = 0; i < 2; i++) {
		waitpid(pid[i], &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			fails++;
	}
	if (fails) {
		th_npfd_dump_log(&d);
		th_fail("%d client(s) failed", fails);
	}
	th_npfd_stop(&d);
	printf("PASS\n");
	return 0;
}
