// SPDX-License-Identifier: GPL-2.0
/*
 * Relaxed ordering on a lossy link, through the real npfd: the RC
 * transport must stay correct when WRs get their PSNs out of posting order.
 *
 * Both NICs lose 1 packet in 17. On a QP with NIC_QP_RELAXED_ORDERING, A
 * runs rounds of 32 WRs: first a READ into a page of A that was never
 * touched (it waits for npfd), then 31 WRs over other pages -- READs of
 * B's memory and WRITEs into it, B's pages faulting on B's side too (RNR
 * NAK) the first time -- that do not conflict, so they may start before
 * the first one and take the PSNs before its. Go-back-N, NAK-sequence,
 * RNR and timeouts then run over a PSN order that is not the posting
 * order. Every WR must complete successfully, once, and every byte must
 * arrive; and later WRs must have completed before their round's first WR
 * in some round (overtaking happened).
 */
#include "nic_fixture.h"

#define ROUNDS 32
#define NWR 32 /* per round: 1 faulting READ, then 16 WRITEs and 15 READs */
#define AREA (16 * PG)
#define SEED_B 7
#define SEED_A 9

/* B's region: [0, AREA) READ sources, [AREA, 2 AREA) WRITE targets */
static int side_b(int sock, void *arg)
{
	NIC_OPTS(nic_opts, o, .tx_drop_every = 17);
	int acc = NIC_ACCESS_REMOTE_READ | NIC_ACCESS_REMOTE_WRITE;
	struct npf_client *c = fx_npf_connect();
	struct fx_ep ep = {0};
	struct fx_region reg;
	struct nic_mr *mr;
	char *buf;
	int region;
	__u64 sum;

	fx_ep_open(&ep, &o);
	buf = fx_alloc(2 * AREA);
	region = fx_npf_register(c, buf, 2 * AREA, NULL);
	fx_fill(buf, AREA, SEED_B); /* CPU faults: the IO page table stays empty */
	mr = fx_npf_mr(c, &ep, region, buf, 2 * AREA, acc, NULL);
	fx_qp(&ep, sock);
	reg = (struct fx_region){(uintptr_t)buf, 2 * AREA, nic_mr_rkey(mr)};
	fx_send(sock, &reg, sizeof(reg));
	fx_sync(sock, 1);
	fx_recv(sock, &sum, sizeof(sum));
	FX_ASSERT(fx_sum(buf + AREA, AREA) == sum, "WRITEs: checksum mismatch");
	fx_sync(sock, 2);
	fx_npf_close(c, &ep);
	return 0;
}

/*
 * A's region: [0, AREA) WRITE sources, [AREA, 2 AREA) READ targets,
 * [2 AREA, 2 AREA + ROUNDS pages) one never-touched page per round.
 */
static int side_a(int sock, void *arg)
{
	NIC_OPTS(nic_opts, o, .tx_drop_every = 17);
	struct npf_client *c = fx_npf_connect();
	struct fx_ep ep = {0};
	struct fx_region reg;
	struct nic_qp *qp;
	struct nic_mr *mr;
	struct nic_stats st;
	char *buf, *src, *dst, *cold, *want;
	int region, round, w, overtook = 0;
	size_t len = 2 * AREA + ROUNDS * PG;
	__u64 sum;

	fx_ep_open(&ep, &o);
	buf = fx_alloc(len);
	src = buf;
	dst = buf + AREA;
	cold = buf + 2 * AREA;
	want = fx_alloc(AREA);
	fx_fill(want, AREA, SEED_B);
	region = fx_npf_register(c, buf, len, NULL);
	fx_fill(src, AREA, SEED_A);
	mr = fx_npf_mr(c, &ep, region, buf, len, NIC_ACCESS_LOCAL_WRITE, NULL);
	qp = fx_qp_flags(&ep, sock, NIC_QP_RELAXED_ORDERING);
	fx_recv(sock, &reg, sizeof(reg));

	for (round = 0; round < ROUNDS; round++) {
		bool seen[NWR] = {false};
		int first = -1;

		memset(dst, 0, AREA);
		FX_ASSERT(!fx_post(qp, NIC_WR_RDMA_READ, 0, cold + round * PG, PG, mr,
				   reg.addr + (round % 16) * PG, reg.rkey),
			  "post");
		for (w = 1; w < NWR; w++) {
			int k = w / 2; /* WRITE k: src[k] -> B's target k; READ k: B[k] -> dst[k] */

			if (w % 2)
				FX_ASSERT(!fx_post(qp, NIC_WR_RDMA_WRITE, w, src + k * PG, PG, mr,
						   reg.addr + AREA + k * PG, reg.rkey),
					  "post");
			else
				FX_ASSERT(!fx_post(qp, NIC_WR_RDMA_READ, w, dst + k * PG, PG, mr,
						   reg.addr + k * PG, reg.rkey),
					  "post");
		}
		for (w = 0; w < NWR; w++) {
			struct nic_wc wc;

			fx_wait_wc(ep.cq, &wc, 20000);
			FX_ASSERT(wc.status == NIC_WC_SUCCESS && wc.wr_id < NWR && !seen[wc.wr_id],
				  "round %d: wr %llu completed with '%s'%s", round,
				  (unsigned long long)wc.wr_id, nic_wc_status_str(wc.status),
				  wc.wr_id < NWR && seen[wc.wr_id] ? " a second time" : "");
			seen[wc.wr_id] = true;
			if (first < 0)
				first = (int)wc.wr_id;
		}
		overtook += first != 0;
		FX_ASSERT(!memcmp(cold + round * PG, want + (round % 16) * PG, PG),
			  "round %d: the faulting READ: data differs", round);
		for (w = 2; w < NWR; w += 2)
			FX_ASSERT(!memcmp(dst + w / 2 * PG, want + w / 2 * PG, PG),
				  "round %d: READ %d: data differs", round, w);
	}
	nic_query_stats(ep.nic, &st, sizeof(st));
	printf("%d rounds of %d WRs on a link losing 1 packet in 17: %llu packets lost here, %llu "
	       "resent, %llu timeouts, %llu RNR NAKs received, %llu page requests; in %d rounds a "
	       "later WR completed before the faulting one\n",
	       ROUNDS, NWR, (unsigned long long)st.pkts_dropped, (unsigned long long)st.retransmits,
	       (unsigned long long)st.timeouts, (unsigned long long)st.rnr_nak_rx,
	       (unsigned long long)st.page_requests, overtook);
	FX_ASSERT(st.pkts_dropped > 0 && st.retransmits > 0,
		  "no packet was lost and resent (lost %llu, resent %llu): the test did not test",
		  (unsigned long long)st.pkts_dropped, (unsigned long long)st.retransmits);
	FX_ASSERT(st.page_requests >= ROUNDS, "%llu page requests for %d faulting READs",
		  (unsigned long long)st.page_requests, ROUNDS);
	/*
	 * Without overtaking the PSN order is the posting order and the test
	 * tests nothing new: the faulting READ waits for npfd in every round,
	 * so later WRs overtake it in many (13 to 32 of 32 measured on a quiet
	 * machine, but 2 in a fresh-clone CI run where loss and timeouts
	 * dominated; none ever with relaxed ordering off): one round shows it.
	 */
	FX_ASSERT(overtook >= 1,
		  "a later WR completed before the faulting READ in %d of %d rounds: relaxed "
		  "ordering did not let WRs overtake",
		  overtook, ROUNDS);
	sum = fx_sum(src, AREA);
	fx_sync(sock, 1);
	fx_send(sock, &sum, sizeof(sum));
	fx_sync(sock, 2);
	fx_npf_close(c, &ep);
	return 0;
}

int main(void)
{
	int r = fx_pair_npfd(side_a, side_b, NULL, 120);

	if (!r)
		printf("PASS: relaxed ordering over a lossy link: every WR completes once, every byte "
		       "arrives (through npfd)\n");
	return r;
}
