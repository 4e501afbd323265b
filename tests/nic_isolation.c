// SPDX-License-Identifier: GPL-2.0
/*
 * Stream isolation behind a faulting RDMA READ, through the real npfd: a
 * READ and a WRITE on QP2 complete, data correct, while QP1's READ waits
 * for a page that npfd has not answered yet.
 *
 * To hold the answer back honestly, A stops npfd (SIGSTOP: the real
 * daemon, descheduled, as a loaded host would) and waits until the kernel
 * says it is stopped; only then does it post. npfd cannot answer while
 * stopped, so QP1's READ cannot complete, and QP2's two WRs must complete
 * meanwhile over pages npfd mapped before -- in the same memory regions
 * as QP1's missing page. After SIGCONT npfd answers and QP1's READ
 * completes with the right data.
 *
 *  1. QP1's READ lands in a local page that was never touched: the
 *     requester stalls QP1 before it sends (A's NIC gets no page response
 *     meanwhile).
 *  2. QP1's READ reads a remote page B wrote but B's NIC never touched:
 *     B's responder answers RNR NAK until npfd has mapped it, and A's QP1
 *     retries.
 */
#include "nic_fixture.h"

#define AREA (16 * PG)
#define SEED_B 7      /* B's warm READ source */
#define SEED_B_COLD 8 /* B's READ source that B's NIC never touched */
#define SEED_A 9      /* A's WRITE source; + phase for the WRITEs of each phase */

/*
 * B's region: [0, AREA) READ source, [AREA, 2 AREA) WRITE target, both
 * mapped for the NIC by A's warm-up; [2 AREA, 3 AREA) READ source that
 * only B's CPU touched.
 */
static int side_b(int sock, void *arg)
{
	int acc = NIC_ACCESS_REMOTE_READ | NIC_ACCESS_REMOTE_WRITE;
	struct npf_client *c = fx_npf_connect();
	struct fx_ep ep = {0};
	struct fx_region reg;
	struct nic_mr *mr;
	char *buf;
	int region;
	__u64 sum;

	fx_ep_open(&ep, NULL);
	buf = fx_alloc(3 * AREA);
	region = fx_npf_register(c, buf, 3 * AREA, NULL);
	fx_fill(buf, AREA, SEED_B); /* CPU faults: the IO page table stays empty */
	fx_fill(buf + 2 * AREA, AREA, SEED_B_COLD);
	mr = fx_npf_mr(c, &ep, region, buf, 3 * AREA, acc, NULL);
	fx_qp(&ep, sock);
	fx_qp(&ep, sock);
	reg = (struct fx_region){(uintptr_t)buf, 3 * AREA, nic_mr_rkey(mr)};
	fx_send(sock, &reg, sizeof(reg));

	fx_sync(sock, 1); /* A's warm-up WRITE landed */
	fx_recv(sock, &sum, sizeof(sum));
	FX_ASSERT(fx_sum(buf + AREA, AREA) == sum, "warm-up WRITE: checksum mismatch");
	fx_sync(sock, 2); /* phase 1: QP2's WRITE landed while npfd was stopped */
	fx_recv(sock, &sum, sizeof(sum));
	FX_ASSERT(fx_sum(buf + AREA, PG) == sum,
		  "1: QP2's WRITE while QP1's READ stalled: checksum mismatch");
	fx_sync(sock, 3); /* phase 2 */
	fx_recv(sock, &sum, sizeof(sum));
	FX_ASSERT(fx_sum(buf + AREA + PG, PG) == sum,
		  "2: QP2's WRITE while QP1's READ got RNR NAKs: checksum mismatch");
	fx_sync(sock, 4);
	fx_npf_close(c, &ep);
	return 0;
}

struct phase {
	const char *what;
	char *qp1_dst; /* QP1's READ: local target, remote source */
	__u64 qp1_src;
	const char *qp1_want;
	char *qp2_dst; /* QP2's READ */
	__u64 qp2_src;
	const char *qp2_want;
	char *qp2_wsrc; /* QP2's WRITE */
	__u64 qp2_wdst;
};

/*
 * Stop npfd, post QP1's READ and then QP2's READ and WRITE: QP2's must
 * complete while npfd is stopped, QP1's only after SIGCONT. s0 and s1: A's
 * NIC counters before and after.
 */
static void run_phase(struct fx_ep *ep, struct nic_qp *qp1, struct nic_qp *qp2, struct nic_mr *mr,
		      __u32 rkey, const struct phase *ph, int n, struct nic_stats *s0,
		      struct nic_stats *s1)
{
	struct nic_stats mid;
	struct nic_wc wc;
	double t0, t2[2], tc, t1;
	int i;

	nic_query_stats(ep->nic, s0, sizeof(*s0));
	fx_npfd_signal(SIGSTOP);
	t0 = th_now();
	FX_ASSERT(!fx_post(qp1, NIC_WR_RDMA_READ, n * 10, ph->qp1_dst, PG, mr, ph->qp1_src, rkey),
		  "post");
	FX_ASSERT(!fx_post(qp2, NIC_WR_RDMA_READ, n * 10 + 1, ph->qp2_dst, PG, mr, ph->qp2_src,
			   rkey),
		  "post");
	FX_ASSERT(!fx_post(qp2, NIC_WR_RDMA_WRITE, n * 10 + 2, ph->qp2_wsrc, PG, mr, ph->qp2_wdst,
			   rkey),
		  "post");
	for (i = 0; i < 2; i++) {
		fx_wait_wc(ep->cq, &wc, 20000);
		FX_ASSERT(wc.qp_num == nic_qp_num(qp2) && wc.wr_id == (__u64)n * 10 + 1 + i &&
				  wc.status == NIC_WC_SUCCESS,
			  "%d: while QP1's READ waits for npfd: completion on QP %u wr %llu '%s', "
			  "expected QP2's wr %d",
			  n, wc.qp_num, (unsigned long long)wc.wr_id, nic_wc_status_str(wc.status),
			  n * 10 + 1 + i);
		t2[i] = (th_now() - t0) * 1e3;
	}
	FX_ASSERT(!memcmp(ph->qp2_dst, ph->qp2_want, PG), "%d: QP2's READ: data differs", n);
	FX_ASSERT(nic_poll_cq(ep->cq, 1, &wc) == 0,
		  "%d: QP1's READ completed while npfd was stopped", n);
	nic_query_stats(ep->nic, &mid, sizeof(mid));
	FX_ASSERT(mid.page_responses == s0->page_responses,
		  "%d: the NIC got %llu page responses from a stopped npfd", n,
		  (unsigned long long)(mid.page_responses - s0->page_responses));
	tc = (th_now() - t0) * 1e3;
	fx_npfd_signal(SIGCONT);
	fx_expect_wc(ep->cq, n * 10, NIC_WC_SUCCESS);
	t1 = (th_now() - t0) * 1e3;
	FX_ASSERT(!memcmp(ph->qp1_dst, ph->qp1_want, PG), "%d: QP1's READ: data differs", n);
	nic_query_stats(ep->nic, s1, sizeof(*s1));
	printf("%d: npfd stopped; QP1's READ waited (%s); QP2's READ completed at %.2f ms, its "
	       "WRITE at %.2f ms; npfd continued at %.2f ms; QP1's READ completed at %.2f ms\n",
	       n, ph->what, t2[0], t2[1], tc, t1);
}

/*
 * A's region: [0, AREA) WRITE source, [AREA, 2 AREA) READ target, both
 * mapped for the NIC by the warm-up; [2 AREA, 2 AREA + PG) never touched.
 */
static int side_a(int sock, void *arg)
{
	struct npf_client *c = fx_npf_connect();
	struct fx_ep ep = {0};
	struct fx_region reg;
	struct nic_qp *qp1, *qp2;
	struct nic_mr *mr;
	struct nic_stats s0, s1;
	char *buf, *src, *dst, *cold, *want, *want_cold;
	int region;
	__u64 sum;

	fx_ep_open(&ep, NULL);
	buf = fx_alloc(2 * AREA + PG);
	src = buf;
	dst = buf + AREA;
	cold = buf + 2 * AREA;
	want = fx_alloc(AREA);
	want_cold = fx_alloc(AREA);
	fx_fill(want, AREA, SEED_B);
	fx_fill(want_cold, AREA, SEED_B_COLD);
	region = fx_npf_register(c, buf, 2 * AREA + PG, NULL);
	fx_fill(src, AREA, SEED_A);
	mr = fx_npf_mr(c, &ep, region, buf, 2 * AREA + PG, NIC_ACCESS_LOCAL_WRITE, NULL);
	qp1 = fx_qp(&ep, sock);
	qp2 = fx_qp(&ep, sock);
	fx_recv(sock, &reg, sizeof(reg));

	/* warm up QP2's pages on both sides: npfd maps them */
	FX_ASSERT(!fx_post(qp2, NIC_WR_RDMA_WRITE, 1, src, AREA, mr, reg.addr + AREA, reg.rkey),
		  "post");
	FX_ASSERT(!fx_post(qp2, NIC_WR_RDMA_READ, 2, dst, AREA, mr, reg.addr, reg.rkey), "post");
	fx_expect_wc(ep.cq, 1, NIC_WC_SUCCESS);
	fx_expect_wc(ep.cq, 2, NIC_WC_SUCCESS);
	FX_ASSERT(!memcmp(dst, want, AREA), "warm-up READ: data differs");
	sum = fx_sum(src, AREA);
	fx_sync(sock, 1);
	fx_send(sock, &sum, sizeof(sum));
	memset(dst, 0, AREA);

	/* 1: QP1's local target is missing: the requester stalls QP1 */
	fx_fill(src, PG, SEED_A + 1);
	run_phase(&ep, qp1, qp2, mr, reg.rkey,
		  &(struct phase){"stalled on its missing local page", cold, reg.addr, want,
				  dst + PG, reg.addr + PG, want + PG, src, reg.addr + AREA},
		  1, &s0, &s1);
	FX_ASSERT(s1.page_requests == s0.page_requests + 1 &&
			  s1.requester_stalls == s0.requester_stalls + 1,
		  "1: QP1's READ raised %llu page requests and %llu stalls, expected 1 and 1",
		  (unsigned long long)(s1.page_requests - s0.page_requests),
		  (unsigned long long)(s1.requester_stalls - s0.requester_stalls));
	sum = fx_sum(src, PG);
	fx_sync(sock, 2);
	fx_send(sock, &sum, sizeof(sum));

	/* 2: QP1's remote source is missing: B's responder sends RNR NAKs */
	fx_fill(src + PG, PG, SEED_A + 2);
	run_phase(&ep, qp1, qp2, mr, reg.rkey,
		  &(struct phase){"RNR NAKs from B's faulting responder", dst + 2 * PG,
				  reg.addr + 2 * AREA, want_cold, dst + 3 * PG, reg.addr + 3 * PG,
				  want + 3 * PG, src + PG, reg.addr + AREA + PG},
		  2, &s0, &s1);
	FX_ASSERT(s1.rnr_nak_rx > s0.rnr_nak_rx && s1.page_requests == s0.page_requests,
		  "2: QP1's READ got %llu RNR NAKs and raised %llu local page requests, expected "
		  ">= 1 and 0",
		  (unsigned long long)(s1.rnr_nak_rx - s0.rnr_nak_rx),
		  (unsigned long long)(s1.page_requests - s0.page_requests));
	sum = fx_sum(src + PG, PG);
	fx_sync(sock, 3);
	fx_send(sock, &sum, sizeof(sum));
	fx_sync(sock, 4);
	fx_npf_close(c, &ep);
	return 0;
}

int main(void)
{
	int r = fx_pair_npfd(side_a, side_b, NULL, 60);

	if (!r)
		printf("PASS: a READ and a WRITE on another QP complete while a READ waits for its "
		       "page, locally or at the responder (through npfd)\n");
	return r;
}
