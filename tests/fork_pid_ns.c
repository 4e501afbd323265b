// SPDX-License-Identifier: GPL-2.0
/*
 * A forked child's copy of a region when the client is in a pid namespace
 * of its own (a container): it registers a region, forks, and the child
 * faults on it. The child's pid there (a small number) names another
 * process in npfd's namespace. npfd once learnt a child's pid from its
 * fault's thread id, which is the namespace's, and so gave the child's
 * faults that other process's place in the fault filter (found by an
 * adversarial review). Now libnpf in the child registers its copy over a
 * connection of its own, whose pid the kernel gives npfd in npfd's
 * namespace: npfd must list the child's copy under the child's own pid.
 */
#include <sched.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include "harness.h"
#include "npf.h"

#define PG 4096UL
#define NPG 16

/* The first child of pid listed in /proc (its main thread's children), or 0. */
static pid_t first_child(pid_t pid)
{
	char path[64];
	int c = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", pid, pid);
	f = fopen(path, "re");
	if (f && fscanf(f, "%d", &c) != 1)
		c = 0;
	if (f)
		fclose(f);
	return c;
}

/* In the namespace: register, fork, let the child fault on every page. */
static int in_namespace(int report, int done)
{
	struct npf_client *c = npf_client__connect(NULL);
	char *mem =
		mmap(NULL, NPG * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	__u64 start = (uintptr_t)mem;
	pid_t b;
	char x;
	int st;

	TH_ASSERT(c, "connect from the namespace: %s", strerror(errno));
	TH_ASSERT(npf_client__register(c, mem, NPG * PG, NULL) > 0, "register: %s",
		  npf_client__errmsg(c));
	b = fork();
	if (b == 0) {
		for (size_t i = 0; i < NPG; i++)
			TH_ASSERT(((volatile char *)mem)[i * PG] == 0, "page %zu not zero", i);
		printf("child: pid %d in its namespace, %d pages read\n", getpid(), NPG);
		fflush(stdout);
		TH_ASSERT(write(report, &start, sizeof(start)) == sizeof(start), "report");
		TH_ASSERT(read(done, &x, 1) >= 0, "wait");
		_exit(0);
	}
	waitpid(b, &st, 0);
	npf_client__close(c);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

int main(void)
{
	struct npf_region_info *ri;
	struct th_npfd d;
	struct npf_client *root;
	int report[2], done[2], st;
	pid_t x, a, b = 0;
	size_t n;
	__u64 start = 0;
	bool found = false;

	th_npfd_start(&d, NULL);
	TH_ASSERT(!pipe(report) && !pipe(done), "pipe");
	fflush(stdout);
	x = fork();
	if (x == 0) {
		close(report[0]);
		close(done[1]);
		if (unshare(CLONE_NEWPID)) {
			printf("SKIP: unshare(CLONE_NEWPID): %s\n", strerror(errno));
			_exit(77);
		}
		a = fork(); /* pid 1 of the new namespace */
		if (a == 0)
			_exit(in_namespace(report[1], done[0]));
		waitpid(a, &st, 0);
		_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 1);
	}
	close(report[1]);
	close(done[0]);
	if (read(report[0], &start, sizeof(start)) != sizeof(start)) {
		waitpid(x, &st, 0);
		if (WIFEXITED(st) && WEXITSTATUS(st) == 77) {
			th_npfd_stop(&d);
			return 77;
		}
		th_fail("the namespace's child did not fault (exit %d)", st);
	}
	a = first_child(x);
	b = a ? first_child(a) : 0;
	TH_ASSERT(b > 0, "cannot find the namespace's child (from pid %d, %d)", x, a);
	NPF_OPTS(npf_client_opts, co, .socket_path = d.sock);
	root = npf_client__connect(&co);
	TH_ASSERT(root, "connect: %s", strerror(errno));
	TH_ASSERT(!npf_client__region_list(root, &ri, &n), "region list: %s",
		  npf_client__errmsg(root));
	for (size_t i = 0; i < n; i++)
		if (ri[i].start == start) {
			printf("region %u at 0x%llx: pid %u (parent %d, child %d)\n",
			       ri[i].region_id, (unsigned long long)start, ri[i].tgid, a, b);
			found |= ri[i].tgid == (__u32)b;
			TH_ASSERT(
				ri[i].tgid == (__u32)a || ri[i].tgid == (__u32)b || !ri[i].tgid,
				"npfd lists the child's copy under pid %u, neither the parent's %d nor the child's %d",
				ri[i].tgid, a, b);
		}
	free(ri);
	TH_ASSERT(found, "npfd does not list the child's copy under the child's pid %d", b);
	TH_ASSERT(write(done[1], "x", 1) == 1, "release");
	waitpid(x, &st, 0);
	TH_ASSERT(WIFEXITED(st) && !WEXITSTATUS(st), "the namespace's side failed (%d)", st);
	TH_ASSERT(th_npfd_alive(&d), "npfd died");
	npf_client__close(root);
	th_npfd_stop(&d);
	printf("PASS\n");
	return 0;
}
