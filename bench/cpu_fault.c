// SPDX-License-Identifier: GPL-2.0
/*
 * CPU fault service time through npfd, beside the kernel's own first-touch
 * fault measured in the same run (interleaved rounds, so noise hits both).
 *
 *   kernel-first-touch   write to a fresh anonymous page (the kernel's fault)
 *   madv-populate-write  MADV_POPULATE_WRITE of one page (no trap)
 *   npf-anon             write to a fresh page of an npf anonymous region
 *   npf-file             read a fresh page of an npf file-backed region
 *
 * Usage: npf-bench-cpu_fault [--json] [--pages N] [--rounds N]
 * Needs a running npfd ($NPF_SOCKET or the default socket).
 */
#include <fcntl.h>
#include <getopt.h>
#include <sys/mman.h>
#include <unistd.h>
#include "bench.h"
#include "npf.h"

enum { KERNEL, POPULATE, NPF_ANON, NPF_FILE, NMETHODS };
static const char *const method_name[] = {"kernel-first-touch", "madv-populate-write", "npf-anon",
					  "npf-file"};

static void die(const char *what, int err)
{
	bench_die("%s: %s", what, strerror(err));
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {{"json", no_argument, NULL, 'j'},
						 {"pages", required_argument, NULL, 'n'},
						 {"rounds", required_argument, NULL, 'r'},
						 {"help", no_argument, NULL, 'h'},
						 {}};
	size_t pages = 4096, rounds = 5, per, r, i, m, cnt[NMETHODS] = {};
	uint64_t *lat[NMETHODS];
	struct npf_client *c;
	char tmpl[] = "/tmp/npf-bench-XXXXXX";
	int opt, fd;
	uint64_t p50[NMETHODS];
	struct npf_latency_hist served[NMETHODS] = {}; /* npfd's view: raised -> installed */
	uint64_t traced = 0; /* CPU faults BPF saw: the trap was stamped (--trace-cpu-faults) */
	int ids[NMETHODS] = {};

	bench_prog = "npf-bench-cpu_fault";

	while ((opt = getopt_long(argc, argv, "jn:r:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'j':
			bench_json = 1;
			break;
		case 'n':
			pages = strtoul(optarg, NULL, 0);
			break;
		case 'r':
			rounds = strtoul(optarg, NULL, 0);
			break;
		case 'h':
			printf("Usage: %s [--json] [--pages N] [--rounds N]\n"
			       "CPU fault service time through npfd vs the kernel's first-touch fault,\n"
			       "measured in interleaved rounds in one run. Needs a running npfd.\n",
			       argv[0]);
			return 0;
		default:
			return 2;
		}
	}
	if (pages < rounds || !rounds) {
		fprintf(stderr, "npf-bench-cpu_fault: --pages must be at least --rounds\n");
		return 2;
	}
	per = pages / rounds;
	for (m = 0; m < NMETHODS; m++)
		lat[m] = calloc(pages, sizeof(uint64_t));

	c = npf_client__connect(NULL);
	if (!c)
		die("cannot connect to npfd (is it running? see README)", errno);
	fd = mkstemp(tmpl);
	if (fd < 0 || ftruncate(fd, (off_t)(per * 4096)))
		die("backing file", errno);
	unlink(tmpl);

	for (r = 0; r < rounds; r++) {
		size_t len = per * 4096;
		char *mem[NMETHODS];
		int id;

		for (m = 0; m < NMETHODS; m++) {
			mem[m] = mmap(NULL, len, PROT_READ | PROT_WRITE,
				      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (mem[m] == MAP_FAILED)
				die("mmap", errno);
		}
		{
			/* Exact: each touch is a fault of its own (fault-around would serve 15 of 16). */
			NPF_OPTS(npf_region_opts, ao, .name = "bench-anon",
				 .fault_around_kib = NPF_FAULT_AROUND_EXACT);
			NPF_OPTS(npf_region_opts, fo, .backing = NPF_BACKING_FILE, .backing_fd = fd,
				 .name = "bench-file", .fault_around_kib = NPF_FAULT_AROUND_EXACT);

			id = npf_client__register(c, mem[NPF_ANON], len, &ao);
			if (id < 0)
				die(npf_client__errmsg(c), -id);
			ids[NPF_ANON] = id;
			id = npf_client__register(c, mem[NPF_FILE], len, &fo);
			if (id < 0)
				die(npf_client__errmsg(c), -id);
			ids[NPF_FILE] = id;
		}
		/* Interleave page by page: each method sees the same machine state. */
		for (i = 0; i < per; i++) {
			volatile char *p;
			uint64_t t0;

			p = mem[KERNEL] + i * 4096;
			t0 = bench_now_ns();
			*p = 1;
			lat[KERNEL][cnt[KERNEL]++] = bench_now_ns() - t0;

			t0 = bench_now_ns();
			if (madvise(mem[POPULATE] + i * 4096, 4096, MADV_POPULATE_WRITE))
				die("MADV_POPULATE_WRITE", errno);
			lat[POPULATE][cnt[POPULATE]++] = bench_now_ns() - t0;

			p = mem[NPF_ANON] + i * 4096;
			t0 = bench_now_ns();
			*p = 1;
			lat[NPF_ANON][cnt[NPF_ANON]++] = bench_now_ns() - t0;

			p = mem[NPF_FILE] + i * 4096;
			t0 = bench_now_ns();
			(void)*p;
			lat[NPF_FILE][cnt[NPF_FILE]++] = bench_now_ns() - t0;
		}
		for (m = NPF_ANON; m <= NPF_FILE; m++) {
			struct npf_region_stats_full *sf;
			size_t n, b;

			if (npf_client__stats(c, (__u32)ids[m], &sf, &n) == 0 && n == 1) {
				for (b = 0; b < NPF_LAT_BUCKETS; b++)
					served[m].slot[b] += sf->latency.slot[b];
				traced += sf->stats.cpu_faults;
				free(sf);
			}
		}
		/* Unmapping drops the regions (npfd sees UFFD_EVENT_UNMAP). */
		for (m = 0; m < NMETHODS; m++)
			munmap(mem[m], len);
	}

	bench_text("%-22s %8s %10s %10s %10s %10s %8s\n", "method", "samples", "p50(ns)",
		   "p95(ns)", "p99(ns)", "max(ns)", "x kernel");
	for (m = 0; m < NMETHODS; m++) {
		struct bench_samples s = {.v = lat[m], .n = cnt[m]};
		struct bench_summary sum = bench_summarize(&s);

		p50[m] = sum.p50;
		bench_row_begin("cpu_fault");
		bench_col_str("method", 22, method_name[m]);
		bench_col_u64("samples", 8, sum.n);
		bench_col_u64("p50_ns", 10, sum.p50);
		bench_col_u64("p95_ns", 10, sum.p95);
		bench_col_u64("p99_ns", 10, sum.p99);
		bench_col_u64("max_ns", 10, sum.max);
		bench_col_f("ratio_to_kernel_p50", 8, 2, (double)p50[m] / (double)p50[KERNEL]);
		bench_row_end();
	}
	/*
	 * Breakdown: how much of the fault is npfd's own work. npfd's latency
	 * starts at the trap when its CPU fault collector stamps it (attached
	 * with --trace-cpu-faults or a policy), else when npfd read the fault.
	 */
	for (m = NPF_ANON; m <= NPF_FILE; m++) {
		uint64_t s50 = npf_latency_percentile(&served[m], 50);
		char line[256];

		snprintf(line, sizeof(line),
			 "{\"bench\":\"cpu_fault\",\"method\":\"%s\",\"stage\":\"%s\","
			 "\"p50_ns_upper_bound\":%llu}\n",
			 method_name[m], traced ? "raised-to-installed" : "read-to-installed",
			 (unsigned long long)s50);
		bench_json_line(line);
		if (!bench_json)
			printf("%-22s %s -> page installed by npfd: p50 < %llu ns (log2 bucket); the rest is %s\n",
			       method_name[m], traced ? "trap" : "npfd read the fault",
			       (unsigned long long)s50,
			       traced ? "waking the thread"
				      : "the trap, waking npfd and waking the thread (npfd --trace-cpu-faults stamps the trap)");
	}
	npf_client__close(c);
	close(fd);
	return 0;
}
