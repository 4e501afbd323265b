// SPDX-License-Identifier: GPL-2.0
/*
 * Eviction throughput: pages npfd takes away per second, with and without
 * write-back, against the kernel's MADV_PAGEOUT of the same number of
 * pages with the same contents in the same run (issue 15).
 *
 * Each round, three mappings of --size MiB:
 *   npf dirty    registered, every page written by the CPU (dirty), then a
 *                budget of --budget pages is set and the clock runs until
 *                npfd has evicted down to its low watermark: every page
 *                read out and written to npfd's swap store (batched
 *                io_uring writes), then dropped in the process;
 *   npf clean    registered (with a budget it does not reach, so that read
 *                faults install pages clean), every page read (zeros),
 *                then the same: evicted without a write;
 *   kernel       an ordinary anonymous mapping, every page written, then
 *                MADV_PAGEOUT, timed until pagemap shows every page out.
 *                MADV_PAGEOUT of anonymous memory needs swap, which this
 *                machine does not have: the benchmark makes a swap file
 *                (--swap-dir, default /var/tmp) for the kernel rows only,
 *                and always removes it; with --no-swap, or where swapon is
 *                refused, the kernel row says so instead.
 * Each row's pages are then read back and checked (every word), in page
 * order, timed, with no budget left to reach: npfd's reads from its swap
 * store (its default fault-around) against the kernel's swap-in of the
 * same pages (its default readahead, vm.page-cluster) -- vs_swapin, for
 * the rows whose pages were written.
 *
 * Usage: npf-bench-evict [--json] [--size MiB] [--budget PAGES] [--rounds N]
 *                        [--swap-dir DIR] [--no-swap]
 * Needs a running npfd ($NPF_SOCKET).
 */
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/swap.h>
#include <unistd.h>
#include "bench.h"
#include "npf.h"

#define PG 4096UL

static uint64_t npages = 16384; /* 64 MiB */
static uint64_t budget = 256;
static int rounds = 3;
static const char *swap_dir = "/var/tmp";
static bool use_swap = true;
static char swap_path[256];
static bool swap_on;
static struct npf_client *client;
static double kernel_readback; /* pages per second the kernel's swap-in read back, or 0 */

static void swap_cleanup(void)
{
	if (swap_on && swapoff(swap_path))
		fprintf(stderr, "npf-bench-evict: swapoff %s: %s (remove it by hand)\n", swap_path,
			strerror(errno));
	swap_on = false;
	if (swap_path[0])
		unlink(swap_path);
	swap_path[0] = 0;
}

static void on_signal(int sig)
{
	swap_cleanup();
	signal(sig, SIG_DFL);
	raise(sig);
}

/* A swap file for the kernel rows; NULL, or why there is none. */
static const char *swap_setup(void)
{
	static char why[300];
	char cmd[400];
	int fd;

	snprintf(swap_path, sizeof(swap_path), "%s/npf-bench-swap-%d", swap_dir, getpid());
	atexit(swap_cleanup);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	fd = open(swap_path, O_CREAT | O_EXCL | O_WRONLY, 0600);
	if (fd < 0 || posix_fallocate(fd, 0, (off_t)((npages + 4096) * PG))) {
		snprintf(why, sizeof(why), "cannot create a swap file in %s: %s", swap_dir,
			 strerror(errno));
		if (fd >= 0)
			close(fd);
		swap_cleanup();
		return why;
	}
	close(fd);
	snprintf(cmd, sizeof(cmd), "mkswap %s >/dev/null 2>&1", swap_path);
	if (system(cmd)) {
		swap_cleanup();
		return "mkswap failed";
	}
	if (swapon(swap_path, 0)) {
		snprintf(why, sizeof(why), "swapon %s: %s", swap_path, strerror(errno));
		swap_cleanup();
		return why;
	}
	swap_on = true;
	return NULL;
}

static uint64_t word(uint64_t p, uint64_t w)
{
	return (p * 512 + w) * 0x9e3779b97f4a7c15ULL + 5;
}

static void fill(char *mem)
{
	for (uint64_t p = 0; p < npages; p++)
		for (uint64_t w = 0; w < PG / 8; w++)
			((uint64_t *)(mem + p * PG))[w] = word(p, w);
}

/*
 * Read every word back in page order, checked (written: fill()'s, else
 * zeros): pages per second. Most pages are out, so this is their faults'
 * rate: npfd's reads from its swap store, or the kernel's swap-in.
 */
static double read_back(const char *mem, bool written)
{
	double t0 = bench_now_s();

	for (uint64_t p = 0; p < npages; p++)
		for (uint64_t w = 0; w < PG / 8; w++)
			if (((const uint64_t *)(mem + p * PG))[w] != (written ? word(p, w) : 0))
				bench_die("page %llu word %llu read back wrong",
					  (unsigned long long)p, (unsigned long long)w);
	return (double)npages / (bench_now_s() - t0);
}

static struct npf_budget_info budget_of(int id)
{
	struct npf_budget_info *bi, out;
	size_t n;

	if (npf_client__budget_list(client, (__u32)id, &bi, &n) || n != 1)
		bench_die("budget list: %s", npf_client__errmsg(client));
	out = *bi;
	free(bi);
	return out;
}

/* Set the budget and time npfd's eviction down to the low watermark: pages per second. */
static double evict(int id, uint64_t *evicted, uint64_t *written, uint64_t *batches)
{
	struct npf_budget_info b0 = budget_of(id), b;
	double t0, t1;

	t0 = bench_now_s();
	if (npf_client__region_set(client, (__u32)id, NPF_SET_BUDGET, budget * PG, NULL))
		bench_die("set budget: %s", npf_client__errmsg(client));
	do {
		b = budget_of(id);
		if (bench_now_s() - t0 > 120)
			bench_die("eviction did not reach the low watermark within 120 s");
	} while (b.resident_pages > b.low_pages);
	t1 = bench_now_s();
	*evicted = b.evicted_pages - b0.evicted_pages;
	*written = b.written_pages - b0.written_pages;
	*batches = b.write_batches - b0.write_batches;
	return (double)*evicted / (t1 - t0);
}

static void row(int round, const char *what, double rate, uint64_t evicted, uint64_t written,
		uint64_t batches, double kernel, double readback, const char *note)
{
	bench_row_begin("evict");
	bench_col_u64("round", 5, (uint64_t)round);
	bench_col_str("method", 11, what);
	if (rate > 0) {
		bench_col_f("pages_per_s", 12, 0, rate);
		bench_col_u64("pages", 7, evicted);
		bench_col_u64("written", 8, written);
		bench_col_u64("io_submissions", 8, batches);
		if (kernel > 0)
			bench_col_f("vs_pageout", 10, 2, rate / kernel);
		else
			bench_col_raw("vs_pageout", "         -", "null");
		bench_col_f("readback_pages_per_s", 12, 0, readback);
		/* the same kind only for pages written and read back (not zeros) */
		if (kernel_readback > 0 && written > 0)
			bench_col_f("vs_swapin", 9, 2, readback / kernel_readback);
		else
			bench_col_raw("vs_swapin", "        -", "null");
	} else {
		bench_col_raw("pages_per_s", "           -", "null");
		bench_col_raw("pages", "      -", "null");
		bench_col_raw("written", "       -", "null");
		bench_col_raw("io_submissions", "       -", "null");
		bench_col_raw("vs_pageout", "         -", "null");
		bench_col_raw("readback_pages_per_s", "           -", "null");
		bench_col_raw("vs_swapin", "        -", "null");
	}
	bench_col_str("note", 0, note);
	bench_row_end();
}

/* The kernel's MADV_PAGEOUT of npages written pages: pages per second, or 0. */
static double kernel_pageout(void)
{
	char *mem =
		mmap(NULL, npages * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	uint64_t *ent = calloc(npages, 8), out = 0;
	double t0, t1;

	if (mem == MAP_FAILED || pm < 0 || !ent)
		bench_die("kernel row: %s", strerror(errno));
	fill(mem);
	t0 = bench_now_s();
	if (madvise(mem, npages * PG, MADV_PAGEOUT))
		bench_die("MADV_PAGEOUT: %s", strerror(errno));
	do {
		if (pread(pm, ent, npages * 8, (off_t)((uintptr_t)mem / PG * 8)) !=
		    (ssize_t)(npages * 8))
			bench_die("pagemap: %s", strerror(errno));
		out = 0;
		for (uint64_t p = 0; p < npages; p++)
			out += !(ent[p] >> 63);
	} while (out < npages - budget && bench_now_s() - t0 < 60);
	t1 = bench_now_s();
	kernel_readback = out >= npages - budget ? read_back(mem, true) : 0;
	munmap(mem, npages * PG);
	close(pm);
	free(ent);
	return out >= npages - budget ? (double)out / (t1 - t0) : 0;
}

static void npf_rows(int round, double kernel)
{
	for (int dirty = 1; dirty >= 0; dirty--) {
		char *mem = mmap(NULL, npages * PG, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		/* npfd's default fault-around, as the kernel row's default swap readahead */
		NPF_OPTS(npf_region_opts, o, .name = "bench-evict");
		uint64_t evicted, written, batches, sum = 0;
		double rate;
		int id;

		if (mem == MAP_FAILED)
			bench_die("mmap: %s", strerror(errno));
		id = npf_client__register(client, mem, npages * PG, &o);
		if (id < 0)
			bench_die("register: %s", npf_client__errmsg(client));
		/* a budget none of it reaches: read faults are installed clean from now on */
		if (npf_client__region_set(client, (__u32)id, NPF_SET_BUDGET, npages * PG, NULL))
			bench_die("set budget: %s", npf_client__errmsg(client));
		if (dirty)
			fill(mem);
		else
			for (uint64_t p = 0; p < npages; p++)
				sum += ((volatile uint64_t *)(mem + p * PG))[0];
		rate = evict(id, &evicted, &written, &batches);
		/* no more eviction: the read-back is refaults only, as the kernel's swap-in */
		if (npf_client__region_set(client, (__u32)id, NPF_SET_BUDGET, npages * PG, NULL))
			bench_die("set budget: %s", npf_client__errmsg(client));
		/* every word comes back */
		row(round, dirty ? "npf dirty" : "npf clean", rate, evicted, written, batches,
		    kernel, read_back(mem, dirty),
		    dirty ? "to the swap store, then dropped; read back from it" :
			    "installed clean: dropped unwritten; read back as zeros");
		(void)sum;
		npf_client__unregister(client, (__u32)id);
		munmap(mem, npages * PG);
	}
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {{"json", no_argument, NULL, 'j'},
					   {"size", required_argument, NULL, 's'},
					   {"budget", required_argument, NULL, 'b'},
					   {"rounds", required_argument, NULL, 'r'},
					   {"swap-dir", required_argument, NULL, 'd'},
					   {"no-swap", no_argument, NULL, 'n'},
					   {}};
	const char *no_swap = NULL;
	int c;

	bench_prog = "npf-bench-evict";
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
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
		case 'd':
			swap_dir = optarg;
			break;
		case 'n':
			use_swap = false;
			break;
		default:
			fprintf(stderr,
				"usage: npf-bench-evict [--json] [--size MiB] [--budget PAGES] [--rounds N] [--swap-dir DIR] [--no-swap]\n");
			return 2;
		}
	}
	if (npages < 4 * budget || budget < 16)
		bench_die("--size must be at least 4x the budget, the budget at least 16 pages");
	client = npf_client__connect(NULL);
	if (!client)
		bench_die("cannot connect to npfd (is it running?): %s", strerror(errno));
	no_swap = use_swap ? swap_setup() : "--no-swap";
	bench_text(
		"# eviction: %llu pages (%llu MiB) down to a budget of %llu pages, %d rounds; kernel: MADV_PAGEOUT to a swap file%s%s\n",
		(unsigned long long)npages, (unsigned long long)(npages >> 8),
		(unsigned long long)budget, rounds, no_swap ? ": none, " : "",
		no_swap ? no_swap : "");
	bench_text(
		"round method       pages/s   pages  written  io_subm vs_pageout  readback/s vs_swapin note\n");
	for (int r = 0; r < rounds; r++) {
		double kernel = no_swap ? 0 : kernel_pageout();

		if (no_swap)
			row(r, "kernel", 0, 0, 0, 0, 0, 0, no_swap);
		else
			row(r, "kernel", kernel, npages - budget, npages - budget, 0, kernel,
			    kernel_readback,
			    "MADV_PAGEOUT, until pagemap shows the pages out; swapped in");
		npf_rows(r, kernel);
	}
	swap_cleanup();
	npf_client__close(client);
	return 0;
}
