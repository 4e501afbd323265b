// SPDX-License-Identifier: GPL-2.0
/*
 * Head-of-line blocking (seed 001 §3.3, seed 004 §3.3). On one QP: a 4 KiB
 * RDMA READ into a page the NIC has never seen (it faults; npfd zero-fills
 * it), followed by 7 READs into other, resident pages that do not overlap
 * it. Their completion times, from the moment all 8 were posted, against
 * the same 8 READs when no page faults, and against a READ on a second QP
 * posted at the same moment as the faulting one.
 *
 * Each round does it twice: on a QP in the default, in-order mode (the 7
 * later READs wait for the fault) and on one created with
 * NIC_QP_RELAXED_ORDERING (they do not conflict with the faulting READ, so
 * they may complete before it).
 *
 * Usage: npf-bench-hol [--json] [--rounds N]
 */
#include <getopt.h>
#include "bench_nic.h"

#define NWR 8
#define QP_OTHER 1   /* the second QP */
#define QP_RELAXED 2 /* the 8 READs with relaxed ordering; QP 0: in order */

int main(int argc, char **argv)
{
	static const struct option longopts[] = {{"json", no_argument, NULL, 'j'},
						 {"rounds", required_argument, NULL, 'r'},
						 {"help", no_argument, NULL, 'h'},
						 {}};
	static const __u32 qp_flags[] = {0, 0, NIC_QP_RELAXED_ORDERING};
	static const char *const ordering[] = {"in-order", "relaxed"};
	struct bench_samples done[2][2][NWR + 1] = {}; /* [relaxed][faults][wr] */
	size_t rounds = 100, r, w;
	struct bn_mem peer, warm, cold;
	struct npf_client *c;
	struct bn_pair p;
	int opt, f, o;

	bench_prog = "npf-bench-hol";
	while ((opt = getopt_long(argc, argv, "jr:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'j':
			bench_json = 1;
			break;
		case 'r':
			rounds = strtoul(optarg, NULL, 0);
			break;
		case 'h':
			printf("Usage: %s [--json] [--rounds N]\n"
			       "Completion times of 8 READs on one QP when the first one faults, vs no\n"
			       "fault, vs a READ on another QP; the QP in order and with relaxed\n"
			       "ordering. Needs npfd.\n",
			       argv[0]);
			return 0;
		default:
			return 2;
		}
	}
	if (!rounds)
		bench_die("--rounds must be at least 1");
	c = bn_connect();
	bn_pair_open_flags(&p, 3, qp_flags);
	bn_mem_static(&peer, &p.b, 1UL << 20);
	bn_mem_npf(&warm, c, &p.a, 1UL << 20, -1, "hol-warm");
	bn_warm(&p, &warm, &peer);
	bn_mem_npf(&cold, c, &p.a, 2 * rounds * BN_PAGE, -1, "hol-cold");

	for (r = 0; r < rounds; r++) {
		for (o = 0; o < 2; o++) {	      /* o: relaxed ordering */
			for (f = 0; f < 2; f++) { /* f: the first WR faults */
				struct nic_qp *qp = p.a.qp[o ? QP_RELAXED : 0];
				char *first = f ? cold.buf + (2 * r + o) * BN_PAGE : warm.buf;
				struct nic_mr *fmr = f ? cold.mr : warm.mr;
				uint64_t t0 = bench_now_ns();
				int got = 0;

				bn_post(qp, NIC_WR_RDMA_READ, 0, first, BN_PAGE, fmr, peer.buf,
					peer.mr);
				bn_post(p.a.qp[QP_OTHER], NIC_WR_RDMA_READ, NWR,
					warm.buf + 64 * BN_PAGE, BN_PAGE, warm.mr, peer.buf, peer.mr);
				for (w = 1; w < NWR; w++)
					bn_post(qp, NIC_WR_RDMA_READ, w, warm.buf + (w + 1) * BN_PAGE,
						BN_PAGE, warm.mr, peer.buf + w * BN_PAGE, peer.mr);
				while (got < NWR + 1) {
					struct nic_wc wc = bn_wait(p.a.cq);

					bench_add(&done[o][f][wc.wr_id], bench_now_ns() - t0);
					got++;
				}
			}
		}
	}

	bench_text("%-8s %-9s %-26s %8s %10s %10s\n", "first", "ordering", "work request",
		   "samples", "p50(us)", "p99(us)");
	for (o = 0; o < 2; o++) {
		for (f = 1; f >= 0; f--) {
			for (w = 0; w <= NWR; w++) {
				struct bench_summary s = bench_summarize(&done[o][f][w]);
				char what[40];

				if (w == 0)
					snprintf(what, sizeof(what), "QP0 WR0 (%s)",
						 f ? "faulting" : "resident");
				else if (w < NWR)
					snprintf(what, sizeof(what), "QP0 WR%zu (resident)", w);
				else
					snprintf(what, sizeof(what), "QP1 WR0 (resident)");
				bench_row_begin("hol");
				bench_col_str("first_wr", 8, f ? "faults" : "resident");
				bench_col_str("ordering", 9, ordering[o]);
				bench_col_str("wr", 26, what);
				bench_col_u64("samples", 8, s.n);
				bench_col_f("p50_us", 10, 1, (double)s.p50 / 1e3);
				bench_col_f("p99_us", 10, 1, (double)s.p99 / 1e3);
				bench_row_end();
			}
		}
	}
	bench_text("ordering: in-order, WR1..7 wait for WR0's fault; relaxed "
		   "(NIC_QP_RELAXED_ORDERING), they do not conflict with WR0 and need not\n");
	bn_pair_close(&p, c);
	npf_client__close(c);
	return 0;
}
