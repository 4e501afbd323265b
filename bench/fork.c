// SPDX-License-Identifier: GPL-2.0
/*
 * What fork() costs a client (docs/design.md, Overcommit: fork()). libnpf's
 * pthread_atfork() handlers ask npfd to stop evicting the process and copy
 * its swap stores, and the child registers its copies of the regions
 * before its fork() returns; the parent's fork() returns once the child is
 * done. Timed: fork() in the parent until it returns, then the child's
 * exit and waitpid(), median and tail over --reps forks, of:
 *  - kernel: a process with the same region, written and resident, no npf
 *    (the baseline: what a process with its memory pinned would pay);
 *  - npf, nothing evicted: the region registered, no budget (the
 *    hand-shake: one request before, the child's connection and
 *    registration, one request after);
 *  - npf, evicted: a budget of an eighth of the region, the rest evicted
 *    to the store, copied for every child.
 * Usage: npf-bench-fork [--json] [--size MIB] [--reps N]
 */
#include <getopt.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include "bench.h"
#include "npf.h"

#define PG 4096UL

static unsigned long size_mib = 64, reps = 20;

static struct bench_summary time_forks(const char *mem, struct bench_samples *ret_only)
{
	struct bench_samples s = {0};

	for (unsigned long i = 0; i < reps; i++) {
		uint64_t t0 = bench_now_ns(), t1;
		pid_t pid = fork();

		if (pid < 0)
			bench_die("fork: %s", strerror(errno));
		if (!pid)
			_exit(mem[0] == 0x5a ? 0 : 1);
		t1 = bench_now_ns();
		if (waitpid(pid, NULL, 0) != pid)
			bench_die("waitpid: %s", strerror(errno));
		bench_add(&s, bench_now_ns() - t0);
		bench_add(ret_only, t1 - t0);
	}
	return bench_summarize(&s);
}

static void row(const char *what, unsigned long evicted, struct bench_summary all,
		struct bench_samples *ret_only)
{
	struct bench_summary r = bench_summarize(ret_only);

	bench_row_begin("fork");
	bench_col_str("what", 22, what);
	bench_col_u64("size_mib", 8, size_mib);
	bench_col_u64("evicted_pages", 13, evicted);
	bench_col_f("fork_ret_ms_p50", 15, 3, (double)r.p50 / 1e6);
	bench_col_f("fork_ret_ms_max", 15, 3, (double)r.max / 1e6);
	bench_col_f("fork_wait_ms_p50", 16, 3, (double)all.p50 / 1e6);
	bench_col_f("fork_wait_ms_p95", 16, 3, (double)all.p95 / 1e6);
	bench_col_f("fork_wait_ms_max", 16, 3, (double)all.max / 1e6);
	bench_col_u64("reps", 5, all.n);
	bench_row_end();
	bench_free(ret_only);
}

static char *region(size_t len)
{
	char *mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (mem == MAP_FAILED)
		bench_die("mmap %zu bytes: %s", len, strerror(errno));
	return mem;
}

static unsigned long evicted_of(struct npf_client *c, int id)
{
	struct npf_budget_info *bi;
	unsigned long n = 0;
	size_t cnt;

	if (!npf_client__budget_list(c, (__u32)id, &bi, &cnt) && cnt) {
		n = (unsigned long)bi[0].stored_pages;
		free(bi);
	}
	return n;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {{"json", no_argument, NULL, 'j'},
					   {"size", required_argument, NULL, 's'},
					   {"reps", required_argument, NULL, 'r'},
					   {}};
	size_t len;
	struct bench_samples ret = {0};
	struct npf_client *c;
	char *mem;
	int opt, id;

	bench_prog = "npf-bench-fork";
	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (opt) {
		case 'j':
			bench_json = 1;
			break;
		case 's':
			size_mib = strtoul(optarg, NULL, 0);
			break;
		case 'r':
			reps = strtoul(optarg, NULL, 0);
			break;
		default:
			fprintf(stderr, "usage: %s [--json] [--size MIB] [--reps N]\n", argv[0]);
			return 2;
		}
	}
	if (!size_mib || !reps)
		bench_die("--size and --reps must be positive");
	len = size_mib << 20;

	/* the baseline first, alone: no npf client in the process yet */
	mem = region(len);
	memset(mem, 0x5a, len);
	row("kernel", 0, time_forks(mem, &ret), &ret);
	munmap(mem, len);

	c = npf_client__connect(NULL);
	if (!c)
		bench_die("connect to npfd: %s (is it running? NPF_SOCKET)", strerror(errno));
	mem = region(len);
	id = npf_client__register(c, mem, len, NULL);
	if (id < 0)
		bench_die("register: %s", npf_client__errmsg(c));
	memset(mem, 0x5a, len);
	row("npf, nothing evicted", 0, time_forks(mem, &ret), &ret);

	if (npf_client__region_set(c, (__u32)id, NPF_SET_BUDGET, len / 8, NULL))
		bench_die("budget: %s", npf_client__errmsg(c));
	for (double t0 = bench_now_s(); evicted_of(c, id) < len / PG * 3 / 4; usleep(20000))
		if (bench_now_s() - t0 > 30)
			bench_die("npfd evicted only %lu pages in 30 s", evicted_of(c, id));
	row("npf, evicted", evicted_of(c, id), time_forks(mem, &ret), &ret);
	npf_client__unregister(c, (__u32)id);
	npf_client__close(c);
	munmap(mem, len);
	return 0;
}
