// SPDX-License-Identifier: GPL-2.0
/*
 * Fault throughput (seed 001 Fig. 9): device page requests npfd resolves
 * per second. npfd resolves on one event-loop thread, so this is the
 * per-thread figure.
 *
 *   npf 1-page    8 QPs, each streaming 4 KiB RDMA READs into pages the
 *                 NIC has never seen: one page request per WR
 *   npf batched   4 MiB READs: one request group of 1024 pages per WR
 *   transfer-only the same READs into pinned memory (what moving the bytes
 *                 costs without any fault)
 *   madv-populate-write 1 page / 4 MiB ranged: the kernel populating the
 *                 same number of pages with no device and no daemon
 *
 * Interleaved: the pages are split into rounds; every round runs all six
 * methods on its own slice of fresh pages, in an order that rotates from
 * round to round. Each method reports the median, lowest and highest of
 * its per-round rates, and the median of its per-round ratios to ranged
 * MADV_POPULATE_WRITE with a 95% interval.
 *
 * Usage: npf-bench-fault_throughput [--json] [--pages N] [--rounds N]
 */
#include <getopt.h>
#include "bench_nic.h"

#define NQP 8
#define MAX_ROUNDS 64

enum { POP1, XFER1, NPF1, POPR, XFERB, NPFB, NMETH };
static const char *const meth_name[] = {"madv-populate-write-1page", "transfer-only-4KiB-WRs",
					"npf-1page-requests",	     "madv-populate-write-4MiB",
					"transfer-only-4MiB-WRs",    "npf-batched-1024-pages"};

/* Stream `pages` pages of READs of wr_bytes each over nqp QPs into m; pages/s. */
static double stream(struct bn_pair *p, struct bn_mem *m, size_t base, struct bn_mem *peer,
		     size_t pages, size_t wr_bytes, int nqp, int reuse)
{
	size_t nwr = pages * BN_PAGE / wr_bytes, posted = 0, done = 0;
	size_t per_qp_window = wr_bytes > BN_PAGE ? 2 : 16;
	size_t inflight[NQP] = {0};
	uint64_t t0 = bench_now_ns();

	while (done < nwr) {
		int q;

		for (q = 0; q < nqp && posted < nwr; q++) {
			if (inflight[q] >= per_qp_window)
				continue;
			size_t off = reuse ? (posted * wr_bytes) % m->len :
					     base + posted * wr_bytes;

			bn_post(p->a.qp[q], NIC_WR_RDMA_READ, (__u64)q, m->buf + off,
				(__u32)wr_bytes, m->mr, peer->buf, peer->mr);
			inflight[q]++;
			posted++;
		}
		{
			struct nic_wc wc = bn_wait(p->a.cq);

			inflight[wc.wr_id]--;
			done++;
		}
	}
	return (double)pages / ((double)(bench_now_ns() - t0) / 1e9);
}

static double populate(size_t pages, size_t chunk)
{
	char *mem = bn_map(pages * BN_PAGE);
	uint64_t t0 = bench_now_ns();
	size_t off;

	for (off = 0; off < pages * BN_PAGE; off += chunk)
		if (madvise(mem + off, chunk, MADV_POPULATE_WRITE))
			bench_die("MADV_POPULATE_WRITE: %s", strerror(errno));
	t0 = bench_now_ns() - t0;
	munmap(mem, pages * BN_PAGE);
	return (double)pages / ((double)t0 / 1e9);
}

/* Method m on round r's slice of pages: pages/s. */
static double run_method(int m, struct bn_pair *p, struct bn_mem *pinned, struct bn_mem *one,
			 struct bn_mem *batch, struct bn_mem *peer, size_t per, size_t r)
{
	size_t base = r * per * BN_PAGE;

	switch (m) {
	case POP1:
		return populate(per, BN_PAGE);
	case XFER1:
		return stream(p, pinned, 0, peer, per, BN_PAGE, NQP, 1);
	case NPF1:
		return stream(p, one, base, peer, per, BN_PAGE, NQP, 0);
	case POPR:
		return populate(per, 4UL << 20);
	case XFERB:
		return stream(p, pinned, 0, peer, per, 4UL << 20, 1, 1);
	default:
		return stream(p, batch, base, peer, per, 4UL << 20, 1, 0);
	}
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {{"json", no_argument, NULL, 'j'},
						 {"pages", required_argument, NULL, 'n'},
						 {"rounds", required_argument, NULL, 'r'},
						 {"help", no_argument, NULL, 'h'},
						 {}};
	static double rate[NMETH][MAX_ROUNDS];
	size_t pages = 65536, rounds = 8, per, r, k;
	struct bn_mem peer, pinned, one, batch;
	struct npf_device_info d1, d2;
	struct npf_client *c;
	struct bn_pair p;
	int opt, m;

	bench_prog = "npf-bench-fault_throughput";
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
			       "Device page requests resolved per second (1-page and 1024-page groups)\n"
			       "vs MADV_POPULATE_WRITE, interleaved in N rounds (default 8, 6-64) over N\n"
			       "pages (default 65536, a multiple of 1024 per round). Needs npfd.\n",
			       argv[0]);
			return 0;
		default:
			return 2;
		}
	}
	if (rounds < BENCH_CI_MIN_N || rounds > MAX_ROUNDS)
		bench_die("--rounds must be %d-%d (each round gives one ratio)", BENCH_CI_MIN_N,
			  MAX_ROUNDS);
	per = (pages / rounds + 1023) / 1024 * 1024; /* whole 4 MiB WRs per round */
	pages = per * rounds;
	c = bn_connect();
	bn_pair_open(&p, NQP);
	bn_mem_static(&peer, &p.b, 4UL << 20);
	bn_mem_static(&pinned, &p.a, 4UL << 20);
	bn_mem_npf(&one, c, &p.a, pages * BN_PAGE, -1, "tput-1page");
	bn_mem_npf(&batch, c, &p.a, pages * BN_PAGE, -1, "tput-batched");

	for (r = 0; r < rounds; r++)
		for (k = 0; k < NMETH; k++) {
			m = (int)((r + k) % NMETH);
			rate[m][r] = run_method(m, &p, &pinned, &one, &batch, &peer, per, r);
		}
	d1 = bn_device_info(c, one.device);
	d2 = bn_device_info(c, batch.device);

	bench_text("%-26s %6s %10s %10s %10s %24s %9s %10s\n", "method", "rounds", "p50 pg/s",
		   "min pg/s", "max pg/s", "x ranged populate [95%]", "requests", "npfd us/req");
	for (m = 0; m < NMETH; m++) {
		double v[MAX_ROUNDS], ratio[MAX_ROUNDS];
		__u64 reqs = m == NPF1 ? d1.page_requests : m == NPFB ? d2.page_requests : 0;
		__u64 ns = m == NPF1 ? d1.fault_ns_sum : m == NPFB ? d2.fault_ns_sum : 0;
		double lo, hi, med;

		for (r = 0; r < rounds; r++) {
			v[r] = rate[m][r];
			ratio[r] = rate[m][r] / rate[POPR][r];
		}
		med = bench_median(v, rounds); /* sorts v */
		lo = v[0];
		hi = v[rounds - 1];
		bench_row_begin("fault_throughput");
		bench_col_str("method", 26, meth_name[m]);
		bench_col_u64("rounds", 6, rounds);
		bench_col_f("pages_per_s", 10, 0, med);
		bench_col_f("pages_per_s_min", 10, 0, lo);
		bench_col_f("pages_per_s_max", 10, 0, hi);
		if (m != POPR)
			bench_col_ci("ratio_to_populate_ranged", 24, 3,
				     bench_median_ci(ratio, rounds));
		else
			bench_col_raw("ratio_to_populate_ranged", "                       -",
				      "null");
		bench_col_u64("page_requests", 9, reqs);
		bench_col_f("npfd_mean_us_per_request", 10, 1,
			    reqs ? (double)ns / (double)reqs / 1e3 : 0);
		bench_row_end();
	}
	bn_pair_close(&p, c);
	npf_client__close(c);
	return 0;
}
