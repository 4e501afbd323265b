// SPDX-License-Identifier: GPL-2.0
/*
 * fork() of a client most of whose anonymous region is evicted. The kernel
 * gives a child no userfaultfd (npfd refuses EVENT_FORK, which only
 * CAP_SYS_PTRACE may ask for), so the child's copy of an evicted page read
 * zeros: 909 of 1024 pages in a child of an unprivileged client. libnpf's
 * pthread_atfork() handlers now have npfd copy the parent's stores before
 * the fork, and the child registers its copy of the region itself.
 *  1. root: the child reads what the parent had at the fork, while the
 *     parent rewrites, evicts again and unmaps its copy. The child is a
 *     client of its own: its copy takes a budget, is evicted, read back.
 *  2. the same as an unprivileged user.
 *  3. npfd SIGKILLed once the child registered: libnpf in the child
 *     serves it from its own store.
 *  4. npfd away at the fork: the child reads in what it lacks from the
 *     parent's stores before its fork() returns.
 *  5. 20 forks while the parent's pages are evicted and read back all the
 *     time, with 20 ms between npfd's copy and the fork: every child must
 *     read what the parent had (npfd must not evict meanwhile).
 *  6. NPF_FORK_DONTFORK: the child has no copy of the region at all;
 *     once unregistered, it has.
 */
#include <grp.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include "budget.h"
#include "restart_common.h"

#define PG 4096UL
#define NPG 1024UL
#define BUDGET 128UL

static struct rs_npfd d;
static int widen_ms; /* phase 5: sleep between libnpf's fork preparation and the fork */

/* Registered before libnpf's handlers, so run after them (prepare handlers run in reverse). */
static void widen(void)
{
	if (widen_ms)
		usleep((useconds_t)widen_ms * 1000);
}

static struct npf_client *client(int fallback_ms)
{
	NPF_OPTS(npf_client_opts, co, .socket_path = d.sock, .fallback_ms = fallback_ms);
	struct npf_client *c = npf_client__connect(&co);

	TH_ASSERT(c, "connect: %s", strerror(errno));
	return c;
}

/* A region of NPG pages holding generation 1, all but BUDGET of them evicted. */
static char *evicted_region(struct npf_client *c, int *id)
{
	char *mem = th_budget_region(c, NPG, BUDGET, id);
	__u64 evicted;

	th_fill(mem, NPG, 1);
	evicted = th_budget_settle(c, *id);
	TH_ASSERT(evicted >= NPG - BUDGET, "only %llu pages evicted", (unsigned long long)evicted);
	return mem;
}

static int child_status(pid_t child)
{
	int st;

	TH_ASSERT(waitpid(child, &st, 0) == child, "waitpid: %s", strerror(errno));
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Phases 1 and 2. */
static void rewrite_after_fork(const char *who)
{
	struct npf_client *c = client(60000);
	__u64 evicted, bad;
	int id, go[2], st;
	pid_t child;
	char *mem = evicted_region(c, &id);

	TH_ASSERT(!pipe(go), "pipe");
	child = fork();
	TH_ASSERT(child >= 0, "fork: %s", strerror(errno));
	if (!child) {
		char x;

		/* read only after the parent rewrote, evicted and unmapped its copy */
		if (read(go[0], &x, 1) != 1)
			_exit(2);
		bad = th_wrong(mem, NPG, 1);
		if (bad) {
			printf("%s's child: %llu words are not what the parent had at the fork\n",
			       who, (unsigned long long)bad);
			_exit(1);
		}
		/* a client of its own: a budget, eviction, write-back, read back */
		if (npf_client__region_set(c, (__u32)id, NPF_SET_BUDGET, BUDGET * PG, NULL)) {
			printf("%s's child: budget: %s\n", who, npf_client__errmsg(c));
			_exit(3);
		}
		th_fill(mem, NPG, 3);
		evicted = th_budget_settle(c, id);
		bad = th_wrong(mem, NPG, 3);
		printf("%s's child: its copy evicted %llu pages of its own, %llu words wrong\n",
		       who, (unsigned long long)evicted, (unsigned long long)bad);
		_exit(evicted < NPG - BUDGET ? 4 : bad ? 5 : 0);
	}
	th_fill(mem, NPG, 2);
	th_budget_settle(c, id);
	bad = th_wrong(mem, NPG, 2);
	TH_ASSERT(!bad, "%s: parent: %llu words wrong after rewriting", who,
		  (unsigned long long)bad);
	TH_ASSERT(!munmap(mem, NPG * PG), "munmap");
	TH_ASSERT(write(go[1], "g", 1) == 1, "pipe write");
	st = child_status(child);
	TH_ASSERT(!st, "%s: the child failed (%d)", who, st);
	close(go[0]);
	close(go[1]);
	npf_client__close(c);
	printf("%s: the child read the fork's bytes and evicted its own copy\n", who);
}

/* Phase 2: as nobody, in a group given the socket. */
static void unprivileged(void)
{
	gid_t g = 4321;
	pid_t p;
	int st;

	TH_ASSERT(!chown(d.dir, 0, g) && !chmod(d.dir, 0750) && !chown(d.sock, (uid_t)-1, g),
		  "give the socket to group %d: %s", g, strerror(errno));
	fflush(stdout);
	p = fork();
	TH_ASSERT(p >= 0, "fork: %s", strerror(errno));
	if (!p) {
		TH_ASSERT(!setgroups(1, &g) && !setgid(g) && !setuid(65534), "drop to nobody: %s",
			  strerror(errno));
		/* its own pagemap, as any process has it (the change of user cleared it) */
		TH_ASSERT(!prctl(PR_SET_DUMPABLE, 1), "PR_SET_DUMPABLE: %s", strerror(errno));
		rewrite_after_fork("nobody");
		fflush(stdout);
		_exit(0);
	}
	st = child_status(p);
	TH_ASSERT(!st, "the unprivileged client failed (%d)", st);
}

/*
 * Phases 3 and 4: npfd killed after the child registered its copy
 * (kill_first false), or before the fork.
 */
static void npfd_killed(bool kill_first)
{
	const char *what = kill_first ? "npfd away at the fork" : "npfd killed after the fork";
	struct npf_client *c = client(300);
	int id, ready[2], go[2], st;
	char *mem = evicted_region(c, &id), x;
	pid_t child;
	__u64 bad;

	TH_ASSERT(!pipe(ready) && !pipe(go), "pipe");
	if (kill_first)
		rs_npfd_kill(&d, SIGKILL);
	child = fork();
	TH_ASSERT(child >= 0, "fork: %s", strerror(errno));
	if (!child) {
		/* fork() returned: the copy is registered (or read in) */
		if (write(ready[1], "r", 1) != 1 || read(go[0], &x, 1) != 1)
			_exit(2);
		bad = th_wrong(mem, NPG, 1);
		if (bad)
			printf("%s: child: %llu words are not what the parent had\n", what,
			       (unsigned long long)bad);
		_exit(bad ? 1 : 0);
	}
	TH_ASSERT(read(ready[0], &x, 1) == 1, "the child did not start");
	if (!kill_first)
		rs_npfd_kill(&d, SIGKILL);
	TH_ASSERT(write(go[1], "g", 1) == 1, "pipe write");
	st = child_status(child);
	TH_ASSERT(!st, "%s: the child failed (%d)", what, st);
	bad = th_wrong(mem, NPG, 1);
	TH_ASSERT(!bad, "%s: parent: %llu words wrong", what, (unsigned long long)bad);
	npf_client__close(c);
	munmap(mem, NPG * PG);
	close(ready[0]);
	close(ready[1]);
	close(go[0]);
	close(go[1]);
	rs_npfd_start(&d);
	printf("%s: the child read every page as it was at the fork\n", what);
}

struct churn {
	const char *mem;
	bool stop; /* __atomic: a volatile bool's load was hoisted out of the loop under UBSan */
	__u64 reads;
};

/* Read pages all over the region: evicted ones come back, others go. */
static void *churn(void *arg)
{
	struct churn *ch = arg;
	__u64 p = 0, sum = 0;

	while (!__atomic_load_n(&ch->stop, __ATOMIC_RELAXED)) {
		p = (p * 2862933555777941757ULL + 3037000493ULL) % NPG;
		sum += *(const volatile __u64 *)(const void *)(ch->mem + p * PG);
		ch->reads++;
	}
	return (void *)(uintptr_t)sum;
}

/* Phase 5. */
static void forks_under_eviction(void)
{
	struct npf_client *c = client(60000);
	struct churn ch = {0};
	__u64 before, after;
	int id, failed = 0;
	pthread_t t;

	ch.mem = evicted_region(c, &id);
	before = th_budget(c, id).evicted_pages;
	TH_ASSERT(!pthread_create(&t, NULL, churn, &ch), "pthread_create");
	widen_ms = 20;
	for (int k = 0; k < 20; k++) {
		pid_t child = fork();

		TH_ASSERT(child >= 0, "fork: %s", strerror(errno));
		if (!child) {
			__u64 bad = th_wrong(ch.mem, NPG, 1);

			if (bad)
				printf("fork %d: child: %llu words are not what the parent had\n",
				       k, (unsigned long long)bad);
			_exit(bad ? 1 : 0);
		}
		failed += child_status(child) != 0;
	}
	widen_ms = 0;
	__atomic_store_n(&ch.stop, true, __ATOMIC_RELAXED);
	pthread_join(t, NULL);
	after = th_budget(c, id).evicted_pages;
	printf("20 forks while %llu pages were evicted and %llu read: %d children read wrong bytes\n",
	       (unsigned long long)(after - before), (unsigned long long)ch.reads, failed);
	TH_ASSERT(after - before >= 20 * BUDGET / 2,
		  "only %llu pages evicted during the forks: no eviction to race with",
		  (unsigned long long)(after - before));
	TH_ASSERT(!failed, "%d of 20 children read wrong bytes", failed);
	TH_ASSERT(!th_wrong(ch.mem, NPG, 1), "the parent's bytes are wrong");
	npf_client__close(c);
}

/* Has this process anything mapped at mem? */
static bool mapped(char *mem)
{
	unsigned char v;

	return !mincore(mem, PG, &v) || errno != ENOMEM;
}

/* Phase 6. */
static void dontfork(void)
{
	NPF_OPTS(npf_client_opts, co, .socket_path = d.sock, .fork = NPF_FORK_DONTFORK);
	struct npf_client *c = npf_client__connect(&co);
	int id, st;
	char *mem;
	pid_t child;

	TH_ASSERT(c, "connect: %s", strerror(errno));
	mem = evicted_region(c, &id);
	child = fork();
	TH_ASSERT(child >= 0, "fork: %s", strerror(errno));
	if (!child)
		_exit(mapped(mem) ? 1 : 0);
	st = child_status(child);
	TH_ASSERT(!st, "NPF_FORK_DONTFORK: the child has the region mapped (%d)", st);
	TH_ASSERT(!npf_client__unregister(c, (__u32)id), "unregister: %s", npf_client__errmsg(c));
	child = fork();
	TH_ASSERT(child >= 0, "fork: %s", strerror(errno));
	if (!child)
		_exit(mapped(mem) ? 0 : 1);
	TH_ASSERT(!child_status(child), "an unregistered region is still not forked");
	npf_client__close(c);
	munmap(mem, NPG * PG);
	printf("NPF_FORK_DONTFORK: the child had no copy of the region while it was registered\n");
}

int main(void)
{
	npf_set_print(rs_print);
	TH_ASSERT(!pthread_atfork(widen, NULL, NULL), "pthread_atfork");
	rs_npfd_start(&d);
	rewrite_after_fork("root");
	unprivileged();
	npfd_killed(false);
	npfd_killed(true);
	forks_under_eviction();
	dontfork();
	rs_npfd_cleanup(&d);
	printf("PASS\n");
	return 0;
}
