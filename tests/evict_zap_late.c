// SPDX-License-Identifier: GPL-2.0
/*
 * An eviction batch whose zaps outlive it. npfd drops evicted pages with
 * MADV_DONTNEED run by the client's own SQPOLL thread, and gives a batch
 * 2 s. A client stopped (SIGSTOP) while it is over its budget stops that
 * thread too: the batch runs out of time with its zaps submitted, and they
 * run when the client goes on. The pages must stay frozen and keep their
 * stored copies until then; a page let go earlier would lose its stored
 * copy to the late zap's REMOVE (read as the process's own drop), or a
 * write let through meanwhile to the zap itself.
 *
 * The child is the npf client: it writes every page of a region 8 times
 * its budget and stops itself. The parent waits past the deadline, counts
 * the child's pages still write-protected (pagemap bit 57: the late ones),
 * and writes into some of them from another process (process_vm_writev, as
 * a debugger or npfd's own put-back would): those writes must wait while
 * the child is stopped (their zaps have not run), then land after them.
 * The child goes on and checks every word, the late writes' included.
 */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include "budget.h"

#define PG 4096UL
#define NPG 2048UL
#define BUDGET 256UL
#define LATE_WRITES 4 /* late pages written by the parent */

static uint64_t word(uint64_t p, uint64_t w)
{
	return (p * 512 + w) * 0x9e3779b97f4a7c15ULL + 13;
}

/* The parent's write into a late page: where, and what. */
struct late_write {
	pid_t pid;
	uint64_t page, val;
	char *mem;
	volatile int done; /* 1: written, -errno: failed */
	pthread_t thread;
};

static uint64_t late_val(const struct late_write *lw, uint64_t p, uint64_t w)
{
	for (int i = 0; i < LATE_WRITES; i++)
		if (lw[i].page == p && !w)
			return lw[i].val;
	return word(p, w);
}

static int child(const char *sock, int out, int in)
{
	struct late_write lw[LATE_WRITES];
	uint64_t bad = 0;
	struct npf_client *c;
	char *mem;
	int id;

	NPF_OPTS(npf_client_opts, co, .socket_path = sock);
	c = npf_client__connect(&co);
	mem = mmap(NULL, NPG * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!c || mem == MAP_FAILED)
		return 2;
	id = npf_client__register(c, mem, NPG * PG, NULL);
	if (id <= 0 || npf_client__region_set(c, (__u32)id, NPF_SET_BUDGET, BUDGET * PG, NULL))
		return 3;
	for (uint64_t p = 0; p < NPG; p++)
		for (uint64_t w = 0; w < PG / 8; w++)
			((uint64_t *)(mem + p * PG))[w] = word(p, w);
	if (write(out, &mem, sizeof(mem)) != sizeof(mem))
		return 4;
	raise(SIGSTOP); /* over the budget: eviction goes on, its zaps wait for us */
	/* the parent's late write, once it has landed */
	if (read(in, lw, sizeof(lw)) != sizeof(lw))
		return 5;
	for (uint64_t p = 0; p < NPG; p++)
		for (uint64_t w = 0; w < PG / 8; w++)
			bad += ((uint64_t *)(mem + p * PG))[w] != late_val(lw, p, w);
	if (bad)
		printf("child: %llu words wrong\n", (unsigned long long)bad);
	npf_client__close(c);
	return bad ? 1 : 0;
}

static void *late_writer(void *arg)
{
	struct late_write *lw = arg;
	struct iovec l = {&lw->val, sizeof(lw->val)};
	struct iovec r = {lw->mem + lw->page * PG, sizeof(lw->val)};

	lw->done = process_vm_writev(lw->pid, &l, 1, &r, 1, 0) == sizeof(lw->val) ? 1 : -errno;
	return NULL;
}

int main(void)
{
	struct late_write lw[LATE_WRITES];
	__u64 late[NPG], frozen = 0;
	struct th_npfd d;
	char *mem;
	int pipefd[2], back[2], st, i;
	struct timespec until;
	pid_t pid;

	th_require_root();
	th_npfd_start(&d, NULL);
	TH_ASSERT(!pipe(pipefd) && !pipe(back), "pipe");
	fflush(stdout);
	pid = fork();
	TH_ASSERT(pid >= 0, "fork: %s", strerror(errno));
	if (!pid)
		_exit(child(d.sock, pipefd[1], back[0]));
	TH_ASSERT(read(pipefd[0], &mem, sizeof(mem)) == sizeof(mem), "the child did not start");
	TH_ASSERT(waitpid(pid, &st, WUNTRACED) == pid && WIFSTOPPED(st), "the child did not stop");
	usleep(2600000); /* past the batch's 2 s */

	frozen = th_frozen_pages(pid, mem, NPG, late);
	printf("%llu pages still frozen %.1f s after the client stopped\n",
	       (unsigned long long)frozen, 2.6);
	/* without frozen pages the batch had no late zap: the test proved nothing */
	TH_ASSERT(
		frozen > 0,
		"no page was frozen past the batch: the client's SQPOLL thread did not stop with it?");

	/*
	 * Writes into late pages (the first, the last, two between; the same
	 * page again when fewer are late) wait for their zaps, which wait for
	 * the client.
	 */
	for (i = 0; i < LATE_WRITES; i++) {
		uint64_t page = late[(frozen - 1) * (uint64_t)i / (LATE_WRITES - 1)];

		/* by page: two writes into one page write the same */
		lw[i] = (struct late_write){
			.pid = pid, .mem = mem, .page = page, .val = 0x5eed5eed00000000ULL + page};
		TH_ASSERT(!pthread_create(&lw[i].thread, NULL, late_writer, &lw[i]),
			  "pthread_create");
	}
	usleep(300000);
	for (i = 0; i < LATE_WRITES; i++)
		TH_ASSERT(
			!lw[i].done,
			"a write into late page %llu went through while its zap was still to run (%d)",
			(unsigned long long)lw[i].page, lw[i].done);
	TH_ASSERT(kill(pid, SIGCONT) == 0, "SIGCONT");
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	for (i = 0; i < LATE_WRITES; i++) {
		TH_ASSERT(!pthread_timedjoin_np(lw[i].thread, NULL, &until),
			  "the write into late page %llu still waits 10 s after the client went on",
			  (unsigned long long)lw[i].page);
		TH_ASSERT(lw[i].done == 1, "process_vm_writev into late page %llu: %s",
			  (unsigned long long)lw[i].page, strerror(-lw[i].done));
	}
	printf("%d writes into late pages %llu..%llu waited while the client was stopped, then landed\n",
	       LATE_WRITES, (unsigned long long)lw[0].page,
	       (unsigned long long)lw[LATE_WRITES - 1].page);
	TH_ASSERT(write(back[1], lw, sizeof(lw)) == sizeof(lw), "pipe");
	TH_ASSERT(waitpid(pid, &st, 0) == pid, "waitpid");
	TH_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		  "the client read wrong bytes after its late zaps ran (status 0x%x)", st);
	th_npfd_stop(&d);
	printf("PASS\n");
	return 0;
}
