// SPDX-License-Identifier: GPL-2.0
/*
 * Memory limits (daemon/memcg.c): a client in a fresh cgroup v1 memory
 * cgroup limited to 32 MiB (no swap for it: memsw limit equal, swappiness
 * 0) registers an anonymous region of 128 MiB, writes every byte of it and
 * reads every byte back: 4x the limit. npfd gives the region a budget below
 * the limit on its own (no budget is configured anywhere), evicts, and
 * holds faults at the cgroup's ceiling, so the client runs to the end: exit
 * status 0, no OOM kill in the cgroup's memory.oom_control, every word
 * right. Without memcg.c the kernel's OOM killer kills the client as soon
 * as npfd's UFFDIO_COPY charges a page over the limit.
 * NCLIENTS = 2 (evict_cgroup_two): two clients share the cgroup, each
 * registering twice the limit, in the order of regions and cgroup entries
 * that order[] below describes.
 * The cgroup is removed on every path (a stale one of a killed run too).
 */
#include <sys/mman.h>
#include "npf.h"

#define PG 4096UL
#define LIMIT (32UL << 20)
#ifndef NCLIENTS
#define NCLIENTS 1
#endif
#define REGION (4 * LIMIT / NCLIENTS)
#define MEMCG_PREFIX "npf-evict-cgroup-"
#define MEMCG_SMALL (64 * PG) /* client 0's second region (two clients) */
#include "memcg_fixture.h"

static pid_t parent, child[NCLIENTS];

static uint64_t word(uint64_t p, uint64_t w)
{
	return (p << 12 | w) * 0x9e3779b97f4a7c15ULL + 7;
}

/* Every path: the child out (dead), the cgroup removed. */
static void cleanup(void)
{
	if (getpid() != parent)
		return;
	for (int i = 0; i < NCLIENTS; i++)
		if (child[i] > 0) {
			kill(child[i], SIGKILL);
			waitpid(child[i], NULL, 0);
			child[i] = 0;
		}
	if (cg[0] && rmdir(cg) && errno != ENOENT)
		printf("cannot remove cgroup %s: %s\n", cg, strerror(errno));
	cg[0] = '\0';
}

static void on_alarm(int sig)
{
	static const char msg[] = "\nFAIL: the test did not finish in time (harness alarm)\n";

	for (int i = 0; i < NCLIENTS; i++)
		if (child[i] > 0) {
			kill(child[i], SIGKILL);
			waitpid(child[i], NULL, 0);
		}
	if (cg[0])
		rmdir(cg);
	if (write(STDOUT_FILENO, msg, sizeof(msg) - 1) < 0)
		_exit(1);
	_exit(1);
}

/*
 * Two clients: the order in which their regions get their cgroup ceilings.
 * Client 0 registers first, outside the cgroup; client 1 then joins and
 * registers (its region, the later id, gets its ceiling first); client 0
 * joins after it and registers a small second region, so that npfd sees
 * it in the cgroup: its first region, the earlier id, gets its ceiling
 * last. (Two clients started together come in this order when the second
 * one's eviction ring reaches npfd first: 4 of 20 runs, all OOM-killed
 * while memcg.c kept ceilings only when ids grew.)
 */
static int order[2][2] = {{-1, -1}, {-1, -1}}; /* [0]: client 0 registered; [1]: client 1 */

static void order_post(int k)
{
	TH_ASSERT(write(order[k][1], "x", 1) == 1, "pipe: %s", strerror(errno));
}

static void order_wait(int k)
{
	char x;

	TH_ASSERT(read(order[k][0], &x, 1) == 1, "the other client died before its turn");
}

static int client(const char *sock, int i)
{
	NPF_OPTS(npf_client_opts, co, .socket_path = sock);
	struct npf_client *c;
	struct npf_budget_info *bi;
	uint64_t *mem;
	size_t n;
	int id;

	if (NCLIENTS == 1 || i == 1) {
		if (NCLIENTS > 1)
			order_wait(0);
		TH_ASSERT(!put("cgroup.procs", "0"), "cannot enter cgroup %s: %s", cg,
			  strerror(errno));
	}
	c = npf_client__connect(&co);
	TH_ASSERT(c, "connect: %s", strerror(errno));
	mem = mmap(NULL, REGION, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	TH_ASSERT(mem != MAP_FAILED, "mmap");
	id = npf_client__register(c, mem, REGION, NULL);
	TH_ASSERT(id > 0, "register: %s", npf_client__errmsg(c));
	if (NCLIENTS > 1 && i == 1) {
		order_post(1);
	} else if (NCLIENTS > 1) {
		void *small;

		order_post(0);
		order_wait(1);
		TH_ASSERT(!put("cgroup.procs", "0"), "cannot enter cgroup %s: %s", cg,
			  strerror(errno));
		small = mmap(NULL, MEMCG_SMALL, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			     -1, 0);
		TH_ASSERT(small != MAP_FAILED, "mmap");
		TH_ASSERT(npf_client__register(c, small, MEMCG_SMALL, NULL) > 0,
			  "register the second region: %s", npf_client__errmsg(c));
	}
	for (uint64_t p = 0; p < REGION / PG; p++)
		for (uint64_t w = 0; w < PG / 8; w++)
			mem[p * PG / 8 + w] = word(p, w);
	printf("pid %d: written\n", getpid());
	for (uint64_t p = 0; p < REGION / PG; p++)
		for (uint64_t w = 0; w < PG / 8; w++)
			TH_ASSERT(mem[p * PG / 8 + w] == word(p, w),
				  "page %llu word %llu read back wrong", (unsigned long long)p,
				  (unsigned long long)w);
	printf("pid %d: read back\n", getpid());
	TH_ASSERT(!npf_client__budget_list(c, (__u32)id, &bi, &n) && n == 1, "budget list: %s",
		  npf_client__errmsg(c));
	printf("pid %d region %d: budget %llu pages (limit %lu pages), %llu resident, %llu evicted\n",
	       getpid(), id, (unsigned long long)bi->budget_pages, LIMIT / PG,
	       (unsigned long long)bi->resident_pages, (unsigned long long)bi->evicted_pages);
	TH_ASSERT(bi->budget_pages && bi->budget_pages < LIMIT / PG,
		  "npfd set no budget below the cgroup's limit");
	TH_ASSERT(bi->evicted_pages >= (REGION - bi->budget_pages * PG) / PG,
		  "only %llu pages evicted", (unsigned long long)bi->evicted_pages);
	free(bi);
	/*
	 * Unregistered, the region's evicted pages would go back into the
	 * process: they do not fit under the limit, so npfd refuses, and the
	 * region stays served (a page read after the refusal is right).
	 */
	TH_ASSERT(npf_client__unregister(c, (__u32)id) == -ENOMEM,
		  "unregistering a region whose evicted pages do not fit under the limit: %s",
		  npf_client__errmsg(c));
	for (uint64_t p = 0; p < REGION / PG; p += 97)
		TH_ASSERT(mem[p * PG / 8 + 5] == word(p, 5),
			  "page %llu read wrong after a refused unregister", (unsigned long long)p);
	printf("pid %d: closing\n", getpid());
	npf_client__close(c);
	printf("pid %d: closed\n", getpid());
	return 0;
}

int main(void)
{
	struct th_npfd d;
	unsigned long long ooms, failcnt, maxuse;
	int st, bad = 0, oks = 0;

	th_require_root();
	parent = getpid();
	atexit(cleanup);
	signal(SIGALRM, on_alarm);
	memcg_make(LIMIT);

	th_npfd_start(&d, NULL); /* npfd itself stays outside the limit */
	TH_ASSERT(!pipe(order[0]) && !pipe(order[1]), "pipe: %s", strerror(errno));
	for (int i = 0; i < NCLIENTS; i++) {
		child[i] = fork();
		TH_ASSERT(child[i] >= 0, "fork: %s", strerror(errno));
		if (child[i] == 0) {
			int rc;

			/* only its own ends: a client that dies ends the other's wait */
			close(order[i][0]);
			close(order[!i][1]);
			rc = client(d.sock, i);

			fflush(stdout);
			_exit(rc);
		}
	}
	for (int k = 0; k < 4; k++)
		close(order[k / 2][k % 2]);
	for (int i = 0; i < NCLIENTS; i++) {
		TH_ASSERT(waitpid(child[i], &st, 0) == child[i], "waitpid: %s", strerror(errno));
		child[i] = 0;
		if (WIFEXITED(st) && !WEXITSTATUS(st))
			oks++;
		else
			bad = st;
	}
	ooms = get("memory.oom_control", "oom_kill");
	failcnt = get("memory.failcnt", NULL);
	maxuse = get("memory.max_usage_in_bytes", NULL);
	printf("cgroup %s: limit %lu MiB, max usage %llu MiB, failcnt %llu, oom_kill %llu\n", cg,
	       LIMIT >> 20, maxuse >> 20, failcnt, ooms);
	if (oks != NCLIENTS || ooms) {
		th_npfd_dump_log(&d);
		th_fail("%d of %d clients ran to the end; one %s %d (OOM kills in their cgroup: %llu)",
			oks, NCLIENTS, WIFEXITED(bad) ? "exited with" : "was killed by signal",
			WIFEXITED(bad) ? WEXITSTATUS(bad) : WTERMSIG(bad), ooms);
	}
	th_npfd_stop(&d);
	cleanup();
	printf("PASS\n");
	return 0;
}
