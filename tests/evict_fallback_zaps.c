// SPDX-License-Identifier: GPL-2.0
/*
 * npfd is killed while zaps it handed to the client's eviction ring are
 * still to run, and does not come back: the client was stopped (SIGSTOP)
 * over its budget, so its SQPOLL thread stopped with it and the batch ran
 * out of time with its zaps submitted (as in evict_zap_late). When the
 * client goes on, those zaps run and their REMOVE events reach libnpf's
 * fallback. They are npfd's zaps of pages it stored first, not the
 * process's own drops (the ring has zaps in flight: its submission tail
 * is past its completion tail), so the pages must read back their stored
 * bytes, not zeros.
 */
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include "budget.h"
#include "restart_common.h"

#define PG 4096UL
#define NPG 2048UL
#define BUDGET 256UL
#define FALLBACK_MS 300

static struct rs_npfd d;

static int child(int out)
{
	NPF_OPTS(npf_client_opts, co, .socket_path = d.sock, .fallback_ms = FALLBACK_MS);
	struct npf_client *c = npf_client__connect(&co);
	uint64_t bad = 0, zero = 0;
	char *mem;
	int id;

	if (!c)
		return 2;
	mem = th_budget_region(c, NPG, BUDGET, &id);
	th_fill(mem, NPG, 1);
	if (write(out, &mem, sizeof(mem)) != sizeof(mem))
		return 4;
	raise(SIGSTOP); /* over the budget: eviction goes on, its zaps wait for us */
	for (uint64_t p = 0; p < NPG; p++)
		for (uint64_t w = 0; w < PG / 8; w++) {
			uint64_t v = ((uint64_t *)(mem + p * PG))[w];

			bad += v != th_word(1, p, w);
			zero += !v;
		}
	if (bad)
		printf("child: %llu words wrong (%llu zeros)\n", (unsigned long long)bad,
		       (unsigned long long)zero);
	npf_client__close(c);
	return bad ? 1 : 0;
}

int main(void)
{
	uint64_t frozen = 0;
	char *mem;
	int pipefd[2], st;
	pid_t pid;

	rs_npfd_start(&d);
	TH_ASSERT(!pipe(pipefd), "pipe");
	fflush(stdout);
	pid = fork();
	TH_ASSERT(pid >= 0, "fork: %s", strerror(errno));
	if (!pid)
		_exit(child(pipefd[1]));
	TH_ASSERT(read(pipefd[0], &mem, sizeof(mem)) == sizeof(mem), "the child did not start");
	TH_ASSERT(waitpid(pid, &st, WUNTRACED) == pid && WIFSTOPPED(st), "the child did not stop");
	usleep(2600000); /* past the batch's 2 s: its zaps stay in the stopped ring */

	/* the late pages: still present and write-protected */
	frozen = th_frozen_pages(pid, mem, NPG, NULL);
	printf("%llu pages with zaps still to run when npfd is killed\n",
	       (unsigned long long)frozen);
	TH_ASSERT(frozen > 0, "no zap was left to run: the test proves nothing");

	rs_npfd_kill(&d, SIGKILL);
	TH_ASSERT(kill(pid, SIGCONT) == 0, "SIGCONT");
	TH_ASSERT(waitpid(pid, &st, 0) == pid, "waitpid");
	TH_ASSERT(
		WIFEXITED(st) && WEXITSTATUS(st) == 0,
		"the client read wrong bytes once npfd's zaps ran with the fallback serving (status 0x%x)",
		st);
	rs_npfd_cleanup(&d);
	printf("PASS\n");
	return 0;
}
