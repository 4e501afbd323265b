// SPDX-License-Identifier: GPL-2.0
/*
 * Put-back at unregister (issue 15): a region of --size MiB, written and
 * evicted down to --budget pages, is unregistered. npfd puts every evicted
 * page back first (the process may go on using the memory), a step of
 * 1024 pages per request, and serves its other clients between steps.
 *
 * Each round times the unregister (pages put back per second) and, in
 * another process with a connection of its own, faults of the kind npfd
 * serves most (the first touch of a page of its region, zero-filled by
 * npfd; the region dropped with MADV_DONTNEED and touched again when all
 * are done): their latency while the put-back runs, against the same
 * process's faults alone just before, in the same round (the baseline:
 * the same faults, the same npfd, nothing else going on). A put-back in
 * one piece held such a fault for as long as the whole put-back.
 * The region's every word is checked after the unregister.
 *
 * Usage: npf-bench-unregister [--json] [--size MiB] [--budget PAGES] [--rounds N]
 * Needs a running npfd ($NPF_SOCKET).
 */
#include <getopt.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include "bench.h"
#include "npf.h"

#define PG 4096UL
#define OTHER_PAGES 4096UL    /* the other process's region: 16 MiB */
#define MAX_SAMPLES (1 << 20) /* per round */
#define ALONE_S 1.0

static uint64_t npages = 65536; /* 256 MiB */
static uint64_t budget = 256;
static int rounds = 3;

/* Shared with the other process: its fault samples (when, how long: ns). */
static struct shared {
	atomic_int run, quit, ready;
	atomic_uint_fast64_t n;
	struct {
		uint64_t at, ns;
	} s[MAX_SAMPLES];
} * sh;

static uint64_t word(uint64_t p, uint64_t w)
{
	return (p * 512 + w) * 0x9e3779b97f4a7c15ULL + 7;
}

/* The other process: first touches of its own region's pages, timed while sh->run. */
static void other(void)
{
	struct npf_client *c = npf_client__connect(NULL);
	char *mem = mmap(NULL, OTHER_PAGES * PG, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	NPF_OPTS(npf_region_opts, o, .name = "bench-unregister-other",
		 .fault_around_kib = NPF_FAULT_AROUND_EXACT);
	uint64_t p = 0;

	if (!c || mem == MAP_FAILED)
		bench_die("the other process: connect or mmap: %s", strerror(errno));
	if (npf_client__register(c, mem, OTHER_PAGES * PG, &o) < 0)
		bench_die("the other process: register: %s", npf_client__errmsg(c));
	atomic_store(&sh->ready, 1);
	while (!atomic_load(&sh->quit)) {
		uint64_t t0, t1, k;

		if (!atomic_load(&sh->run)) {
			usleep(200);
			continue;
		}
		if (p == OTHER_PAGES) {
			if (madvise(mem, OTHER_PAGES * PG, MADV_DONTNEED))
				bench_die("MADV_DONTNEED: %s", strerror(errno));
			p = 0;
		}
		t0 = bench_now_ns();
		((volatile char *)mem)[p++ * PG] = 1;
		t1 = bench_now_ns();
		k = atomic_fetch_add(&sh->n, 1);
		if (k < MAX_SAMPLES) {
			sh->s[k].at = t0;
			sh->s[k].ns = t1 - t0;
		}
	}
	npf_client__close(c);
	_exit(0);
}

static struct npf_budget_info budget_of(struct npf_client *c, int id)
{
	struct npf_budget_info *bi, out;
	size_t n;

	if (npf_client__budget_list(c, (__u32)id, &bi, &n) || n != 1)
		bench_die("budget list: %s", npf_client__errmsg(c));
	out = *bi;
	free(bi);
	return out;
}

/* The other process's faults that began in [from, to): a row. */
static void fault_row(int round, const char *when, uint64_t from, uint64_t to)
{
	struct bench_samples s = {0};
	struct bench_summary sum;
	uint64_t n = atomic_load(&sh->n);

	for (uint64_t k = 0; k < n && k < MAX_SAMPLES; k++)
		if (sh->s[k].at >= from && sh->s[k].at < to)
			bench_add(&s, sh->s[k].ns);
	sum = bench_summarize(&s);
	bench_row_begin("unregister_faults");
	bench_col_u64("round", 5, (uint64_t)round);
	bench_col_str("what", 22, when);
	bench_col_u64("n", 7, sum.n);
	bench_col_f("per_s", 8, 0, (double)sum.n / ((double)(to - from) / 1e9));
	bench_col_f("p50_us", 8, 1, (double)sum.p50 / 1e3);
	bench_col_f("p99_us", 8, 1, (double)sum.p99 / 1e3);
	bench_col_f("max_us", 9, 1, (double)sum.max / 1e3);
	bench_row_end();
	bench_free(&s);
}

static void round_run(struct npf_client *c, int round)
{
	char *mem =
		mmap(NULL, npages * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	NPF_OPTS(npf_region_opts, o, .name = "bench-unregister");
	struct npf_budget_info bi;
	uint64_t a0, a1, u0, u1, stored;
	double t0;
	int id, err;

	if (mem == MAP_FAILED)
		bench_die("mmap: %s", strerror(errno));
	id = npf_client__register(c, mem, npages * PG, &o);
	if (id < 0)
		bench_die("register: %s", npf_client__errmsg(c));
	if (npf_client__region_set(c, (__u32)id, NPF_SET_BUDGET, budget * PG, NULL))
		bench_die("set budget: %s", npf_client__errmsg(c));
	for (uint64_t p = 0; p < npages; p++)
		for (uint64_t w = 0; w < PG / 8; w++)
			((uint64_t *)(mem + p * PG))[w] = word(p, w);
	t0 = bench_now_s();
	do {
		bi = budget_of(c, id);
		if (bench_now_s() - t0 > 120)
			bench_die("eviction did not reach the low watermark within 120 s");
		usleep(10000);
	} while (bi.resident_pages > bi.low_pages);
	usleep(200000); /* the last batch's zaps */
	stored = budget_of(c, id).stored_pages;

	atomic_store(&sh->n, 0);
	atomic_store(&sh->run, 1);
	a0 = bench_now_ns();
	usleep((useconds_t)(ALONE_S * 1e6));
	a1 = bench_now_ns();
	u0 = bench_now_ns();
	err = npf_client__unregister(c, (__u32)id);
	u1 = bench_now_ns();
	atomic_store(&sh->run, 0);
	if (err)
		bench_die("unregister: %s", npf_client__errmsg(c));
	for (uint64_t p = 0; p < npages; p++)
		for (uint64_t w = 0; w < PG / 8; w++)
			if (((uint64_t *)(mem + p * PG))[w] != word(p, w))
				bench_die(
					"after the unregister: page %llu word %llu read back wrong",
					(unsigned long long)p, (unsigned long long)w);
	munmap(mem, npages * PG);

	bench_row_begin("unregister");
	bench_col_u64("round", 5, (uint64_t)round);
	bench_col_str("what", 22, "put-back");
	bench_col_u64("pages", 7, stored);
	bench_col_f("ms", 8, 1, (double)(u1 - u0) / 1e6);
	bench_col_f("pages_per_s", 12, 0, (double)stored / ((double)(u1 - u0) / 1e9));
	bench_row_end();
	fault_row(round, "alone", a0, a1);
	fault_row(round, "during the put-back", u0, u1);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {{"json", no_argument, NULL, 'j'},
					   {"size", required_argument, NULL, 's'},
					   {"budget", required_argument, NULL, 'b'},
					   {"rounds", required_argument, NULL, 'r'},
					   {}};
	struct npf_client *c;
	pid_t pid;
	int opt, status;

	bench_prog = "npf-bench-unregister";
	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (opt) {
		case 'j':
			bench_json = 1;
			break;
		case 's':
			npages = strtoull(optarg, NULL, 0) << 8;
			break;
		case 'b':
			budget = strtoull(optarg, NULL, 0);
			break;
		case 'r':
			rounds = atoi(optarg);
			break;
		default:
			fprintf(stderr,
				"usage: npf-bench-unregister [--json] [--size MiB] [--budget PAGES] [--rounds N]\n");
			return 2;
		}
	}
	if (npages < 4 * budget || budget < 16)
		bench_die("--size must be at least 4x the budget, the budget at least 16 pages");
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		bench_die("mmap: %s", strerror(errno));
	/* before this process connects: a fork of a client would copy its stores */
	pid = fork();
	if (pid < 0)
		bench_die("fork: %s", strerror(errno));
	if (!pid)
		other();
	while (!atomic_load(&sh->ready))
		if (waitpid(pid, &status, WNOHANG) == pid)
			bench_die("the other process ended before it was ready");
		else
			usleep(1000);
	c = npf_client__connect(NULL);
	if (!c)
		bench_die("cannot connect to npfd (is it running?): %s", strerror(errno));
	bench_text(
		"# unregister: %llu pages (%llu MiB) evicted down to a budget of %llu pages, then unregistered (put back); another process's first-touch faults alone (%.0f s) and during the put-back; %d rounds\n",
		(unsigned long long)npages, (unsigned long long)(npages >> 8),
		(unsigned long long)budget, ALONE_S, rounds);
	bench_text(
		"round what                   n/pages  per_s/ms  p50_us  p99_us    max_us (put-back rows: pages, ms, pages/s)\n");
	for (int r = 0; r < rounds; r++)
		round_run(c, r);
	atomic_store(&sh->quit, 1);
	waitpid(pid, &status, 0);
	npf_client__close(c);
	return 0;
}
