// SPDX-License-Identifier: GPL-2.0
/*
 * Pinning strategies for message passing (seed 000 Table 3, seed 001
 * Fig. 1): a SEND/RECV ping-pong between two NICs, the application's
 * buffers handled four ways, alternating round by round in one run:
 *
 *   npf         buffers registered with npfd once, never pinned (resident)
 *   static-pin  buffers mlock()ed and registered once (the usual RDMA way)
 *   pin-per-msg each message: mlock + register the MR (entries set) before,
 *               deregister + munlock after, on both sides
 *   bounce-copy data copied through a pinned, registered bounce buffer on
 *               both sides (memcpy in and out)
 *
 * Half round trip, p50, per message size, and the ratio to static-pin.
 * "static-alone": static pinning again, in a block of its own after the
 * rotating rounds: how the baseline behaves when nothing is interleaved.
 * Usage: npf-bench-pingpong [--json] [--iters N]
 */
#include <getopt.h>
#include "bench_nic.h"

#define MAXMSG (1UL << 20)

enum { S_NPF, S_STATIC, S_PERMSG, S_BOUNCE, NSTRAT };
static const char *const strat_name[] = {"npf", "static-pin", "pin-per-msg", "bounce-copy"};
static const __u32 sizes[] = {64, 4096, 65536, 1 << 20};

struct side {
	struct bn_ep *ep;
	struct bn_mem npf, stat, bounce;
	char *plain; /* the application buffer of pin-per-msg and bounce-copy */
};

static struct nic_mr *reg_pinned(struct bn_ep *ep, char *buf, __u32 len)
{
	struct nic_mr *mr;

	if (mlock(buf, len))
		bench_die("mlock: %s", strerror(errno));
	mr = nic_reg_mr(ep->pd, buf, len, BN_ACCESS_ALL);
	if (!mr)
		bench_die("nic_reg_mr: %s", strerror(errno));
	bn_iopt_fill(mr);
	return mr;
}

static void unreg_pinned(struct nic_mr *mr, char *buf, __u32 len)
{
	nic_dereg_mr(mr);
	munlock(buf, len);
}

/* One message from s to d on qps/qpd; returns when d has received it. */
static void one_way(struct side *s, struct side *d, struct nic_qp *qps, struct nic_qp *qpd, int st,
		    __u32 len)
{
	struct nic_mr *smr = NULL, *dmr = NULL;
	char *sbuf, *dbuf;

	switch (st) {
	case S_NPF:
		sbuf = s->npf.buf, dbuf = d->npf.buf, smr = s->npf.mr, dmr = d->npf.mr;
		break;
	case S_STATIC:
		sbuf = s->stat.buf, dbuf = d->stat.buf, smr = s->stat.mr, dmr = d->stat.mr;
		break;
	case S_PERMSG:
		sbuf = s->plain, dbuf = d->plain;
		dmr = reg_pinned(d->ep, dbuf, len);
		smr = reg_pinned(s->ep, sbuf, len);
		break;
	default:
		memcpy(s->bounce.buf, s->plain, len);
		sbuf = s->bounce.buf, dbuf = d->bounce.buf, smr = s->bounce.mr, dmr = d->bounce.mr;
		break;
	}
	bn_post_recv(qpd, 1, dbuf, len, dmr);
	bn_post(qps, NIC_WR_SEND, 1, sbuf, len, smr, NULL, NULL);
	bn_wait(d->ep->cq); /* the RECV */
	bn_wait(s->ep->cq); /* the SEND */
	if (st == S_PERMSG) {
		unreg_pinned(smr, sbuf, len);
		unreg_pinned(dmr, dbuf, len);
	} else if (st == S_BOUNCE) {
		memcpy(d->plain, d->bounce.buf, len);
	}
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {{"json", no_argument, NULL, 'j'},
						 {"iters", required_argument, NULL, 'i'},
						 {"help", no_argument, NULL, 'h'},
						 {}};
	struct side a = {0}, b = {0};
	struct bn_mem peer;
	size_t iters = 200, s, i, k;
	struct npf_client *c;
	struct bn_pair p;
	int opt;

	bench_prog = "npf-bench-pingpong";
	while ((opt = getopt_long(argc, argv, "ji:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'j':
			bench_json = 1;
			break;
		case 'i':
			iters = strtoul(optarg, NULL, 0);
			break;
		case 'h':
			printf("Usage: %s [--json] [--iters N]\n"
			       "SEND/RECV ping-pong with npf, static pinning, pin/unpin per message and a\n"
			       "pinned bounce buffer, alternating in one run. Needs npfd.\n",
			       argv[0]);
			return 0;
		default:
			return 2;
		}
	}
	if (!iters)
		bench_die("--iters must be at least 1");
	c = bn_connect();
	bn_pair_open(&p, 1);
	a.ep = &p.a;
	b.ep = &p.b;
	bn_mem_static(&peer, &p.b, 4UL << 20); /* only to warm A's npf buffer */
	bn_mem_npf(&a.npf, c, &p.a, MAXMSG, -1, "pingpong-a");
	bn_mem_npf(&b.npf, c, &p.b, MAXMSG, -1, "pingpong-b");
	bn_warm(&p, &a.npf, &peer);
	memset(b.npf.buf, 1, MAXMSG); /* CPU faults: npfd sets B's entries present too */
	bn_mem_static(&a.stat, &p.a, MAXMSG);
	bn_mem_static(&b.stat, &p.b, MAXMSG);
	bn_mem_static(&a.bounce, &p.a, MAXMSG);
	bn_mem_static(&b.bounce, &p.b, MAXMSG);
	a.plain = bn_map(MAXMSG);
	b.plain = bn_map(MAXMSG);
	memset(a.plain, 2, MAXMSG);
	memset(b.plain, 3, MAXMSG);

	bench_text("%-8s %-12s %8s %12s %12s %9s\n", "bytes", "strategy", "samples", "p50(us)",
		   "p99(us)", "x static");
	for (s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		struct bench_samples lat[NSTRAT] = {}, alone = {0};
		size_t n = sizes[s] >= (1 << 20) ? iters / 8 + 1 : iters;
		uint64_t ref;

		for (i = 0; i < n; i++)
			for (k = 0; k < NSTRAT; k++) {
				size_t st = (k + i) % NSTRAT; /* rotate who goes first */
				uint64_t t0 = bench_now_ns();

				one_way(&a, &b, p.a.qp[0], p.b.qp[0], (int)st, sizes[s]);
				one_way(&b, &a, p.b.qp[0], p.a.qp[0], (int)st, sizes[s]);
				bench_add(&lat[st], (bench_now_ns() - t0) / 2);
			}
		/* static pinning alone, back to back: what rotating does to the baseline */
		for (i = 0; i < n; i++) {
			uint64_t t0 = bench_now_ns();

			one_way(&a, &b, p.a.qp[0], p.b.qp[0], S_STATIC, sizes[s]);
			one_way(&b, &a, p.b.qp[0], p.a.qp[0], S_STATIC, sizes[s]);
			bench_add(&alone, (bench_now_ns() - t0) / 2);
		}
		ref = bench_summarize(&lat[S_STATIC]).p50;
		for (k = 0; k < NSTRAT; k++) {
			struct bench_summary m = bench_summarize(&lat[k]);

			bench_row_begin("pingpong");
			bench_col_u64("bytes", 8, sizes[s]);
			bench_col_str("strategy", 12, strat_name[k]);
			bench_col_u64("samples", 8, m.n);
			bench_col_f("half_rtt_p50_us", 12, 1, (double)m.p50 / 1e3);
			bench_col_f("half_rtt_p99_us", 12, 1, (double)m.p99 / 1e3);
			bench_col_f("ratio_to_static_p50", 9, 2, (double)m.p50 / (double)ref);
			bench_row_end();
			bench_free(&lat[k]);
		}
		{
			struct bench_summary m = bench_summarize(&alone);

			bench_row_begin("pingpong");
			bench_col_u64("bytes", 8, sizes[s]);
			bench_col_str("strategy", 12, "static-alone");
			bench_col_u64("samples", 8, m.n);
			bench_col_f("half_rtt_p50_us", 12, 1, (double)m.p50 / 1e3);
			bench_col_f("half_rtt_p99_us", 12, 1, (double)m.p99 / 1e3);
			bench_col_f("ratio_to_static_p50", 9, 2, (double)m.p50 / (double)ref);
			bench_row_end();
			bench_free(&alone);
		}
	}
	bn_pair_close(&p, c);
	npf_client__close(c);
	return 0;
}
