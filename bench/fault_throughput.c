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
 * Usage: npf-bench-fault_throughput [--json] [--pages N]
 */
#include <getopt.h>
#include "bench_nic.h"

#define NQP 8

/* Stream `pages` pages of READs of wr_bytes each over nqp QPs into m; pages/s. */
static double stream(struct bn_pair *p, struct bn_mem *m, struct bn_mem *peer, size_t pages,
		     size_t wr_bytes, int nqp, int reuse)
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
			size_t off = reuse ? (posted * wr_bytes) % m->len : posted * wr_bytes;

			bn_post(p->a.qp[q], NIC_WR_RDMA_READ, (__u64)q, m->buf + off, (__u32)wr_bytes,
				m->mr, peer->buf, peer->mr);
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

static void row(const char *method, double pps, double ref, __u64 reqs, __u64 ns)
{
	bench_row_begin("fault_throughput");
	bench_col_str("method", 26, method);
	bench_col_f("pages_per_s", 12, 0, pps);
	bench_col_f("ratio_to_populate_ranged", 8, 3, pps / ref);
	bench_col_u64("page_requests", 9, reqs);
	bench_col_f("npfd_mean_us_per_request", 10, 1, reqs ? (double)ns / (double)reqs / 1e3 : 0);
	bench_row_end();
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {{"json", no_argument, NULL, 'j'},
						 {"pages", required_argument, NULL, 'n'},
						 {"help", no_argument, NULL, 'h'},
						 {}};
	size_t pages = 8192;
	struct bn_mem peer, pinned, one, batch;
	struct npf_device_info d1, d2;
	double pop1, popr, n1, nb, x1, xb;
	struct npf_client *c;
	struct bn_pair p;
	int opt;

	bench_prog = "npf-bench-fault_throughput";
	while ((opt = getopt_long(argc, argv, "jn:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'j':
			bench_json = 1;
			break;
		case 'n':
			pages = strtoul(optarg, NULL, 0);
			break;
		case 'h':
			printf("Usage: %s [--json] [--pages N]\n"
			       "Device page requests resolved per second (1-page and 1024-page groups)\n"
			       "vs MADV_POPULATE_WRITE in one run. Needs npfd.\n",
			       argv[0]);
			return 0;
		default:
			return 2;
		}
	}
	pages = (pages + 1023) / 1024 * 1024;
	c = bn_connect();
	bn_pair_open(&p, NQP);
	bn_mem_static(&peer, &p.b, 4UL << 20);
	bn_mem_static(&pinned, &p.a, 4UL << 20);
	bn_mem_npf(&one, c, &p.a, pages * BN_PAGE, -1, "tput-1page");
	bn_mem_npf(&batch, c, &p.a, pages * BN_PAGE, -1, "tput-batched");

	pop1 = populate(pages, BN_PAGE);
	x1 = stream(&p, &pinned, &peer, pages, BN_PAGE, NQP, 1);
	n1 = stream(&p, &one, &peer, pages, BN_PAGE, NQP, 0);
	popr = populate(pages, 4UL << 20);
	xb = stream(&p, &pinned, &peer, pages, 4UL << 20, 1, 1);
	nb = stream(&p, &batch, &peer, pages, 4UL << 20, 1, 0);
	d1 = bn_device_info(c, one.device);
	d2 = bn_device_info(c, batch.device);

	bench_text("%-26s %12s %8s %9s %10s\n", "method", "pages/s", "x ranged", "requests",
		   "npfd us/req");
	row("madv-populate-write-1page", pop1, popr, 0, 0);
	row("madv-populate-write-4MiB", popr, popr, 0, 0);
	row("transfer-only-4KiB-WRs", x1, popr, 0, 0);
	row("npf-1page-requests", n1, popr, d1.page_requests, d1.fault_ns_sum);
	row("transfer-only-4MiB-WRs", xb, popr, 0, 0);
	row("npf-batched-1024-pages", nb, popr, d2.page_requests, d2.fault_ns_sum);
	bn_pair_close(&p, c);
	npf_client__close(c);
	return 0;
}
