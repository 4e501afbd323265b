// SPDX-License-Identifier: GPL-2.0
/*
 * Relaxed ordering (seed 001 §3.3) through the real npfd: on a QP created
 * with NIC_QP_RELAXED_ORDERING, WRs behind one that waits for a page
 * overtake it unless they conflict with it or carry NIC_SEND_FENCE; on a
 * default QP nothing overtakes.
 *
 * A stops npfd (SIGSTOP, and waits until the kernel says it is stopped)
 * before it posts, so the page cannot arrive and the outcome does not
 * depend on timing. On the relaxed QP:
 *
 *   R0  READ B[0, 2 pages) -> P (a warm page of A) + M (never touched):
 *       stalls on M
 *   R1  READ B[2]   -> A's dst[0]          overtakes
 *   R2  WRITE src[0] -> B's wr[0]          overtakes
 *   R3  WRITE P -> B's wr[1]               waits: R0 writes P (local)
 *   R4  READ B[3] -> dst[1], fenced        waits: the fence
 *   R5  READ B[4] -> dst[2]                overtakes (R3, R4 too)
 *   R6  WRITE src[1] -> B[1]               waits: R0 reads B[1] (at the peer)
 *   R7  READ B[5] -> dst[3]                overtakes: the probe
 *
 * Completions come in PSN order, and the engine starts WRs in posting
 * order when it may: a WR that wrongly started would complete before R7,
 * posted last. So when R7 completes, R1, R2, R5 must have completed and
 * nothing else. On the default QP (posted first), S0 READs into another
 * missing page and S1, a READ of warm pages, must not complete either.
 * After SIGCONT: R0, then R3 and R6 (each waited for R0), R4 after R3;
 * S0 then S1. Every byte is checked, including that R3 sent what R0 had
 * brought into P and that R0 read B[1] before R6 overwrote it.
 */
#include "nic_fixture.h"

#define AREA (16 * PG)
#define SEED_B 7 /* B's READ sources */
#define SEED_A 9 /* A's WRITE sources */
#define NR 8	 /* WRs on the relaxed QP */

/* B's region: [0, AREA) READ sources, [AREA, 2 AREA) WRITE targets (wr) */
static int side_b(int sock, void *arg)
{
	int acc = NIC_ACCESS_REMOTE_READ | NIC_ACCESS_REMOTE_WRITE;
	struct npf_client *c = fx_npf_connect();
	struct fx_ep ep = {0};
	struct fx_region reg;
	struct nic_mr *mr;
	char *buf, *want;
	int region;
	__u64 sum[2];

	fx_ep_open(&ep, NULL);
	buf = fx_alloc(2 * AREA);
	want = fx_alloc(AREA);
	fx_fill(want, AREA, SEED_B);
	region = fx_npf_register(c, buf, 2 * AREA, NULL);
	memcpy(buf, want, AREA); /* CPU faults: the IO page table stays empty */
	mr = fx_npf_mr(c, &ep, region, buf, 2 * AREA, acc, NULL);
	fx_qp(&ep, sock);
	fx_qp(&ep, sock);
	reg = (struct fx_region){(uintptr_t)buf, 2 * AREA, nic_mr_rkey(mr)};
	fx_send(sock, &reg, sizeof(reg));

	fx_sync(sock, 1); /* every WR completed */
	fx_recv(sock, sum, sizeof(sum));
	FX_ASSERT(fx_sum(buf + AREA, PG) == sum[0], "R2's WRITE: checksum mismatch");
	FX_ASSERT(!memcmp(buf + AREA + PG, want, PG),
		  "R3's WRITE of P did not carry what R0 had read into P");
	FX_ASSERT(fx_sum(buf + PG, PG) == sum[1], "R6's WRITE: checksum mismatch");
	fx_sync(sock, 2);
	fx_npf_close(c, &ep);
	return 0;
}

/* Wait for the next completion, which must be a success; returns its wr_id. */
static __u64 next_wc(struct nic_cq *cq, struct nic_wc *wc)
{
	fx_wait_wc(cq, wc, 20000);
	FX_ASSERT(wc->status == NIC_WC_SUCCESS, "wr %llu on QP %u completed with '%s'",
		  (unsigned long long)wc->wr_id, wc->qp_num, nic_wc_status_str(wc->status));
	return wc->wr_id;
}

/*
 * A's region: [0, AREA) WRITE sources (src), [AREA, 2 AREA) READ targets
 * (dst), both mapped by the warm-up; then two pages never touched (M for
 * R0, and S0's target).
 */
static int side_a(int sock, void *arg)
{
	struct npf_client *c = fx_npf_connect();
	struct fx_ep ep = {0};
	struct fx_region reg;
	struct nic_qp *qs, *qr;
	struct nic_mr *mr;
	struct nic_stats s0, s1;
	struct nic_wc wc;
	char *buf, *src, *dst, *p, *m, *want;
	char order[64] = "", *o = order;
	int region, i, pos[NR] = {0}, n;
	__u64 r, sum[2];
	__u32 rkey;

	fx_ep_open(&ep, NULL);
	buf = fx_alloc(2 * AREA + 2 * PG);
	src = buf;
	dst = buf + AREA;
	p = dst + AREA - PG;
	m = dst + AREA;
	want = fx_alloc(AREA);
	fx_fill(want, AREA, SEED_B);
	region = fx_npf_register(c, buf, 2 * AREA + 2 * PG, NULL);
	fx_fill(src, AREA, SEED_A);
	mr = fx_npf_mr(c, &ep, region, buf, 2 * AREA + 2 * PG, NIC_ACCESS_LOCAL_WRITE, NULL);
	qs = fx_qp(&ep, sock);
	qr = fx_qp_flags(&ep, sock, NIC_QP_RELAXED_ORDERING);
	fx_recv(sock, &reg, sizeof(reg));
	r = reg.addr;
	rkey = reg.rkey;

	/* warm up: npfd maps src and dst here, B's READ sources and WRITE targets there */
	FX_ASSERT(!fx_post(qs, NIC_WR_RDMA_WRITE, 100, src, AREA, mr, r + AREA, rkey), "post");
	FX_ASSERT(!fx_post(qs, NIC_WR_RDMA_READ, 101, dst, AREA, mr, r, rkey), "post");
	fx_expect_wc(ep.cq, 100, NIC_WC_SUCCESS);
	fx_expect_wc(ep.cq, 101, NIC_WC_SUCCESS);
	FX_ASSERT(!memcmp(dst, want, AREA), "warm-up READ: data differs");
	memset(dst, 0, AREA);

	nic_query_stats(ep.nic, &s0, sizeof(s0));
	fx_npfd_signal(SIGSTOP);
	FX_ASSERT(!fx_post(qs, NIC_WR_RDMA_READ, 20, m + PG, PG, mr, r + 6 * PG, rkey), "post");
	FX_ASSERT(!fx_post(qs, NIC_WR_RDMA_READ, 21, dst + 4 * PG, PG, mr, r + 7 * PG, rkey),
		  "post");
	FX_ASSERT(!fx_post(qr, NIC_WR_RDMA_READ, 0, p, 2 * PG, mr, r, rkey), "post");
	FX_ASSERT(!fx_post(qr, NIC_WR_RDMA_READ, 1, dst, PG, mr, r + 2 * PG, rkey), "post");
	FX_ASSERT(!fx_post(qr, NIC_WR_RDMA_WRITE, 2, src, PG, mr, r + AREA, rkey), "post");
	FX_ASSERT(!fx_post(qr, NIC_WR_RDMA_WRITE, 3, p, PG, mr, r + AREA + PG, rkey), "post");
	FX_ASSERT(!fx_post_flags(qr, NIC_WR_RDMA_READ, 4, dst + PG, PG, mr, r + 3 * PG, rkey,
				 NIC_SEND_FENCE),
		  "post");
	FX_ASSERT(!fx_post(qr, NIC_WR_RDMA_READ, 5, dst + 2 * PG, PG, mr, r + 4 * PG, rkey),
		  "post");
	FX_ASSERT(!fx_post(qr, NIC_WR_RDMA_WRITE, 6, src + PG, PG, mr, r + PG, rkey), "post");
	FX_ASSERT(!fx_post(qr, NIC_WR_RDMA_READ, 7, dst + 3 * PG, PG, mr, r + 5 * PG, rkey),
		  "post");

	/* until the probe R7 completes: exactly R1, R2, R5 before it */
	for (n = 0;; n++) {
		next_wc(ep.cq, &wc);
		FX_ASSERT(wc.qp_num == nic_qp_num(qr),
			  "the default QP completed wr %llu while its first READ waited for npfd",
			  (unsigned long long)wc.wr_id);
		o += sprintf(o, "R%llu ", (unsigned long long)wc.wr_id);
		if (wc.wr_id == 7)
			break;
		FX_ASSERT(wc.wr_id == 1 || wc.wr_id == 2 || wc.wr_id == 5,
			  "R%llu overtook R0 while npfd was stopped (completed: %s)",
			  (unsigned long long)wc.wr_id, order);
	}
	FX_ASSERT(n == 3, "only %d of R1, R2, R5 completed before R7 (completed: %s)", n, order);
	FX_ASSERT(nic_poll_cq(ep.cq, 1, &wc) == 0,
		  "wr %llu on QP %u completed after R7 while npfd was stopped",
		  (unsigned long long)wc.wr_id, wc.qp_num);
	FX_ASSERT(!memcmp(dst, want + 2 * PG, PG) && !memcmp(dst + 2 * PG, want + 4 * PG, PG) &&
			  !memcmp(dst + 3 * PG, want + 5 * PG, PG),
		  "the READs that overtook R0: data differs");
	nic_query_stats(ep.nic, &s1, sizeof(s1));
	FX_ASSERT(s1.page_responses == s0.page_responses,
		  "the NIC got %llu page responses from a stopped npfd",
		  (unsigned long long)(s1.page_responses - s0.page_responses));
	FX_ASSERT(s1.requester_stalls == s0.requester_stalls + 2,
		  "%llu WRs stalled on a page, expected 2 (R0 and S0)",
		  (unsigned long long)(s1.requester_stalls - s0.requester_stalls));
	printf("npfd stopped: the relaxed QP completed %sbefore R0; the default QP nothing\n",
	       order);

	fx_npfd_signal(SIGCONT);
	o += sprintf(o, "| ");
	for (i = 0, n = 0; i < 6; i++) {
		__u64 id = next_wc(ep.cq, &wc);

		o += sprintf(o, "%c%llu ", wc.qp_num == nic_qp_num(qr) ? 'R' : 'S',
			     (unsigned long long)id);
		if (wc.qp_num == nic_qp_num(qs)) {
			FX_ASSERT(id == 20 + (__u64)n, "the default QP completed out of order: %s",
				  order);
			n++;
		} else {
			pos[id] = i + 1;
		}
	}
	FX_ASSERT(pos[0] && pos[3] && pos[4] && pos[6], "R0, R3, R4, R6 did not all complete: %s",
		  order);
	FX_ASSERT(pos[0] < pos[3] && pos[0] < pos[6] && pos[3] < pos[4],
		  "after SIGCONT: R3 and R6 must follow R0, the fenced R4 must follow R3: %s",
		  order);
	printf("after SIGCONT: %s\n", order);
	FX_ASSERT(!memcmp(p, want, 2 * PG),
		  "R0: data differs (R6 overwrote B[1] before R0 read it?)");
	FX_ASSERT(!memcmp(dst + PG, want + 3 * PG, PG), "R4: data differs");
	FX_ASSERT(!memcmp(m + PG, want + 6 * PG, PG) && !memcmp(dst + 4 * PG, want + 7 * PG, PG),
		  "the default QP's READs: data differs");
	sum[0] = fx_sum(src, PG);
	sum[1] = fx_sum(src + PG, PG);
	fx_sync(sock, 1);
	fx_send(sock, sum, sizeof(sum));
	fx_sync(sock, 2);
	fx_npf_close(c, &ep);
	return 0;
}

int main(void)
{
	int r = fx_pair_npfd(side_a, side_b, NULL, 60);

	if (!r)
		printf("PASS: relaxed ordering: WRs overtake one that waits for a page unless they "
		       "conflict with it or are fenced; the default QP stays in order "
		       "(through npfd)\n");
	return r;
}
