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
 * The four cells of a round (in order / relaxed x faulting / resident)
 * run in an order that rotates from round to round. Besides each WR's
 * median and tail, the summary gives per-round paired figures, medians
 * with 95% intervals: the fault's own cost (WR0 faulting - WR0 resident),
 * the delay the fault adds to the 7 followers in each mode (their mean
 * completion, faulting round - resident round), and relaxed over in-order
 * (the followers' mean completion when WR0 faults), and in how many
 * rounds a follower completed before the faulting WR0. Relaxed ordering can
 * only save what the fault costs: when npfd answers in a few us, against
 * WRs of 50-150 us here, there is little to save.
 *
 * Usage: npf-bench-hol [--json] [--rounds N]
 */
#include <getopt.h>
#include "bench_nic.h"

#define NWR 8
#define QP_OTHER 1   /* the second QP */
#define QP_RELAXED 2 /* the 8 READs with relaxed ordering; QP 0: in order */

/* The median of v[0..n) with its 95% interval, as a row of the summary. */
static void summary_row(const char *what, double *v, size_t n, const char *unit)
{
	bench_row_begin("hol_summary");
	bench_col_str("figure", 58, what);
	bench_col_ci("median", 26, 2, bench_median_ci(v, n));
	bench_col_str("unit", 2, unit);
	bench_row_end();
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {{"json", no_argument, NULL, 'j'},
						 {"rounds", required_argument, NULL, 'r'},
						 {"help", no_argument, NULL, 'h'},
						 {}};
	static const __u32 qp_flags[] = {0, 0, NIC_QP_RELAXED_ORDERING};
	static const char *const ordering[] = {"in-order", "relaxed"};
	struct bench_samples done[2][2][NWR + 1] = {}; /* [relaxed][faults][wr] */
	size_t rounds = 100, r, w, k;
	double *wr0[2][2], *fol[2][2], *v; /* per round: WR0's and the followers' mean completion */
	size_t overtook[2] = {0}; /* rounds in which a follower completed before the faulting WR0 */
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
	if (rounds < BENCH_CI_MIN_N)
		bench_die("--rounds must be at least %d (each round gives one paired figure)",
			  BENCH_CI_MIN_N);
	v = calloc(rounds, sizeof(*v));
	for (o = 0; o < 2; o++)
		for (f = 0; f < 2; f++) {
			wr0[o][f] = calloc(rounds, sizeof(double));
			fol[o][f] = calloc(rounds, sizeof(double));
			if (!wr0[o][f] || !fol[o][f] || !v)
				bench_die("out of memory for %zu rounds", rounds);
		}
	c = bn_connect();
	bn_pair_open_flags(&p, 3, qp_flags);
	bn_mem_static(&peer, &p.b, 1UL << 20);
	bn_mem_npf(&warm, c, &p.a, 1UL << 20, -1, "hol-warm");
	bn_warm(&p, &warm, &peer);
	bn_mem_npf(&cold, c, &p.a, 2 * rounds * BN_PAGE, -1, "hol-cold");

	for (r = 0; r < rounds; r++) {
		for (k = 0; k < 4; k++) {
			/* the four cells in an order that rotates with the round */
			o = (int)((r + k) % 4) >> 1; /* o: relaxed ordering */
			f = (int)((r + k) % 4) & 1;  /* f: the first WR faults */
			{
				struct nic_qp *qp = p.a.qp[o ? QP_RELAXED : 0];
				char *first = f ? cold.buf + (2 * r + o) * BN_PAGE : warm.buf;
				struct nic_mr *fmr = f ? cold.mr : warm.mr;
				uint64_t t0 = bench_now_ns();
				int got = 0, wr0_done = 0, overtaken = 0;

				bn_post(qp, NIC_WR_RDMA_READ, 0, first, BN_PAGE, fmr, peer.buf,
					peer.mr);
				bn_post(p.a.qp[QP_OTHER], NIC_WR_RDMA_READ, NWR,
					warm.buf + 64 * BN_PAGE, BN_PAGE, warm.mr, peer.buf,
					peer.mr);
				for (w = 1; w < NWR; w++)
					bn_post(qp, NIC_WR_RDMA_READ, w,
						warm.buf + (w + 1) * BN_PAGE, BN_PAGE, warm.mr,
						peer.buf + w * BN_PAGE, peer.mr);
				while (got < NWR + 1) {
					struct nic_wc wc = bn_wait(p.a.cq);

					uint64_t t = bench_now_ns() - t0;

					bench_add(&done[o][f][wc.wr_id], t);
					if (wc.wr_id == 0) {
						wr0[o][f][r] = (double)t / 1e3;
						wr0_done = 1;
					} else if (wc.wr_id < NWR) {
						fol[o][f][r] += (double)t / 1e3 / (NWR - 1);
						if (f && !wr0_done && !overtaken) {
							overtook[o]++; /* once per round */
							overtaken = 1;
						}
					}
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
	bench_text("%-58s %26s\n", "per-round paired figures (median over rounds)",
		   "[95% interval]");
	for (r = 0; r < rounds; r++)
		v[r] = wr0[0][1][r] - wr0[0][0][r];
	summary_row("fault cost: in-order WR0 faulting - resident", v, rounds, "us");
	for (o = 0; o < 2; o++) {
		for (r = 0; r < rounds; r++)
			v[r] = fol[o][1][r] - fol[o][0][r];
		summary_row(o ? "delay of WR1..7 by the fault, relaxed" :
				"delay of WR1..7 by the fault, in order",
			    v, rounds, "us");
	}
	for (r = 0; r < rounds; r++)
		v[r] = fol[1][1][r] / fol[0][1][r];
	summary_row("WR1..7 when WR0 faults: relaxed / in order", v, rounds, "x");
	for (o = 0; o < 2; o++) {
		bench_row_begin("hol_overtakes");
		bench_col_str("ordering", 9, ordering[o]);
		bench_text(": a resident WR completed before the faulting WR0 in");
		bench_col_u64("rounds_overtaken", 0, overtook[o]);
		bench_text(" of");
		bench_col_u64("rounds", 0, rounds);
		bench_text(" rounds");
		bench_row_end();
	}
	for (o = 0; o < 2; o++)
		for (f = 0; f < 2; f++) {
			free(wr0[o][f]);
			free(fol[o][f]);
		}
	free(v);
	bn_pair_close(&p, c);
	npf_client__close(c);
	return 0;
}
