// SPDX-License-Identifier: GPL-2.0
/*
 * mm events of huge regions (issue 15): a region of SIZE TiB (--sizes,
 * default 1,8,64) of which only the first and last pages were touched,
 * with and without a budget (up to 8 TiB: a budget's per-page counts of
 * 64 TiB do not fit in npfd's memory, and it is refused). npfd runs one
 * loop: while it handles one client's mm event, every other client waits.
 * So each round times a status request sent right after
 *   drop  MADV_DONTNEED of the whole range (npfd forgets every page of it;
 *         the first and last pages are touched again before each),
 *   cut   munmap of the region's first page (every page's state moves
 *         down by one),
 * against the same request with no event before it, in the same round
 * (alone: the baseline, npfd idle). A walk over a whole map costs 2 GiB of
 * bits for 64 TiB; npfd walks only the blocks its summary says are in use.
 *
 * Usage: npf-bench-huge_region [--json] [--sizes TiB,...] [--rounds N]
 * Needs a running npfd ($NPF_SOCKET).
 */
#include <getopt.h>
#include <sys/mman.h>
#include <unistd.h>
#include "bench.h"
#include "npf.h"

#define PG 4096UL
#define BUDGET_MAX_TIB 8

static int rounds = 20;

/* One status request's round trip, in ns. */
static uint64_t status_ns(struct npf_client *c)
{
	struct npf_status st;
	uint64_t t0 = bench_now_ns();

	if (npf_client__status(c, &st))
		bench_die("status: %s", npf_client__errmsg(c));
	return bench_now_ns() - t0;
}

static void row(unsigned long tib, bool budget, const char *what, struct bench_samples *s)
{
	struct bench_summary sum = bench_summarize(s);

	bench_row_begin("huge_region");
	bench_col_u64("tib", 4, tib);
	bench_col_str("budget", 6, budget ? "yes" : "no");
	bench_col_str("what", 6, what);
	bench_col_u64("n", 4, sum.n);
	bench_col_f("p50_us", 9, 1, (double)sum.p50 / 1e3);
	bench_col_f("p99_us", 9, 1, (double)sum.p99 / 1e3);
	bench_col_f("max_us", 10, 1, (double)sum.max / 1e3);
	bench_row_end();
	bench_free(s);
}

static void one(struct npf_client *c, unsigned long tib, bool budget)
{
	size_t len = (size_t)tib << 40;
	struct bench_samples alone = {0}, drop = {0}, cut = {0};
	char *mem = mmap(NULL, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	NPF_OPTS(npf_region_opts, o, .name = "bench-huge-region");
	char *head;
	int id, k;

	if (mem == MAP_FAILED)
		bench_die("mmap of %lu TiB: %s", tib, strerror(errno));
	id = npf_client__register(c, mem, len, &o);
	if (id < 0)
		bench_die("register %lu TiB: %s", tib, npf_client__errmsg(c));
	if (budget && npf_client__region_set(c, id, NPF_SET_BUDGET, 64 * PG, NULL))
		bench_die("a budget for %lu TiB: %s", tib, npf_client__errmsg(c));
	head = mem;
	for (k = 0; k < rounds; k++) {
		mem[len - PG] = 1;
		head[0] = 1;
		bench_add(&alone, status_ns(c));
		if (madvise(head, len - (size_t)(head - mem), MADV_DONTNEED))
			bench_die("MADV_DONTNEED: %s", strerror(errno));
		bench_add(&drop, status_ns(c));
		mem[len - PG] = 1;
		head[PG] = 1;
		if (munmap(head, PG))
			bench_die("munmap: %s", strerror(errno));
		head += PG;
		bench_add(&cut, status_ns(c));
	}
	if (mem[len - PG] != 1 || head[0] != 1)
		bench_die("%lu TiB: a touched page lost its byte", tib);
	row(tib, budget, "alone", &alone);
	row(tib, budget, "drop", &drop);
	row(tib, budget, "cut", &cut);
	munmap(head, len - (size_t)(head - mem));
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {{"json", no_argument, NULL, 'j'},
					   {"sizes", required_argument, NULL, 's'},
					   {"rounds", required_argument, NULL, 'r'},
					   {}};
	const char *sizes = "1,8,64";
	struct npf_client *c;
	char *list, *tok, *save;
	int opt;

	bench_prog = "npf-bench-huge_region";
	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (opt) {
		case 'j':
			bench_json = 1;
			break;
		case 's':
			sizes = optarg;
			break;
		case 'r':
			rounds = atoi(optarg);
			break;
		default:
			fprintf(stderr,
				"usage: npf-bench-huge_region [--json] [--sizes TiB,...] [--rounds N]\n");
			return 2;
		}
	}
	if (rounds < 1)
		bench_die("--rounds must be at least 1");
	c = npf_client__connect(NULL);
	if (!c)
		bench_die("cannot connect to npfd (is it running?): %s", strerror(errno));
	bench_text(
		"# huge_region: regions of %s TiB, their first and last pages touched; a status request right after an MADV_DONTNEED of the whole range (drop) and after a munmap of the first page (cut), against the same request alone; %d rounds\n",
		sizes, rounds);
	list = strdup(sizes);
	for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		unsigned long tib = strtoul(tok, NULL, 0);

		if (!tib || tib > 64)
			bench_die("--sizes: %s: want 1 to 64 (TiB)", tok);
		one(c, tib, false);
		if (tib <= BUDGET_MAX_TIB)
			one(c, tib, true);
	}
	free(list);
	npf_client__close(c);
	return 0;
}
