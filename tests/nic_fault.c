// SPDX-License-Identifier: GPL-2.0
/*
 * The software RNIC's fault path, two processes, with fx_npfd standing in
 * for npfd (BPF uprobe on npf_nic_fault_report, answers through the IOPT):
 *  1. RDMA WRITE of 1024 never-touched remote pages: ONE page request
 *     (npages 1024), RNR NAK, the sender retries, data lands (checksum);
 *  2. SEND into an unpinned, never-touched receive buffer (RNR, checksum);
 *  3. send-side stall: QP1's WR needs 1024 missing local pages and its
 *     answer is held; 64 WRs on QP2 all complete meanwhile; then QP1 does.
 */
#include "nic_fixture.h"

#define REG (4UL << 20)
#define NPG (REG / PG)
#define RB (64UL << 10)
#define SMALL (256UL << 10)

static struct fx_npfd npfd;

static void mark_all(struct nic_mr *mr, void *buf, size_t len)
{
	struct fx_iopt t;

	fx_iopt_map(&t, mr);
	nic_test_mark_present(&t, (uintptr_t)buf, len);
}

static int side_b(int sock, void *arg)
{
	int acc = NIC_ACCESS_LOCAL_WRITE | NIC_ACCESS_REMOTE_WRITE | NIC_ACCESS_REMOTE_READ;
	struct fx_ep ep = {0};
	struct fx_region reg[2];
	struct nic_mr *mr, *rmr, *smr;
	struct nic_stats st;
	char *buf, *rbuf, *small, *expect;
	struct nic_wc wc;
	__u64 sum;

	fx_npfd_start(&npfd);
	fx_ep_open(&ep, NULL);
	buf = fx_alloc(REG);   /* never touched: every page missing */
	rbuf = fx_alloc(RB);   /* receive buffer, never touched */
	small = fx_alloc(SMALL);
	memset(small, 0, SMALL);
	mr = nic_reg_mr(ep.pd, buf, REG, acc);
	rmr = nic_reg_mr(ep.pd, rbuf, RB, NIC_ACCESS_LOCAL_WRITE);
	smr = nic_reg_mr(ep.pd, small, SMALL, acc);
	FX_ASSERT(mr && rmr && smr, "nic_reg_mr: %s", strerror(errno));
	fx_npfd_add_mr(&npfd, mr);
	fx_npfd_add_mr(&npfd, rmr);
	mark_all(smr, small, SMALL);
	fx_qp(&ep, sock);
	fx_qp(&ep, sock); /* QP2 */
	reg[0] = (struct fx_region){(uintptr_t)buf, REG, nic_mr_rkey(mr)};
	reg[1] = (struct fx_region){(uintptr_t)small, SMALL, nic_mr_rkey(smr)};
	fx_send(sock, reg, sizeof(reg));

	/* 1 */
	fx_sync(sock, 1);
	fx_recv(sock, &sum, sizeof(sum));
	FX_ASSERT(fx_sum(buf, REG) == sum, "WRITE into faulting pages: checksum mismatch");
	FX_ASSERT(npfd.nreq == 1, "%d page requests for one WRITE, expected 1", npfd.nreq);
	FX_ASSERT(npfd.last.npages == NPG && npfd.last.len == REG &&
			  npfd.last.addr == (uintptr_t)buf &&
			  (npfd.last.access & NPF_ACCESS_WRITE),
		  "page request: addr %#llx len %llu npages %u access %#x",
		  (unsigned long long)npfd.last.addr, (unsigned long long)npfd.last.len,
		  npfd.last.npages, npfd.last.access);
	nic_query_stats(ep.nic, &st, sizeof(st));
	FX_ASSERT(st.rnr_nak_tx >= 1, "the responder never sent an RNR NAK");
	printf("1: one page request for %u pages; %llu RNR NAKs, %llu suppressed re-requests\n",
	       npfd.last.npages, (unsigned long long)st.rnr_nak_tx,
	       (unsigned long long)st.page_requests_suppressed);

	/* 2 */
	fx_post_recv(ep.qp, 7, rbuf, RB, rmr);
	fx_sync(sock, 2);
	fx_wait_wc(ep.cq, &wc, 20000);
	FX_ASSERT(wc.status == NIC_WC_SUCCESS && wc.opcode == NIC_WC_RECV && wc.byte_len == 40000,
		  "RECV into faulting buffer: '%s' %u bytes", nic_wc_status_str(wc.status),
		  wc.byte_len);
	fx_recv(sock, &sum, sizeof(sum));
	FX_ASSERT(fx_sum(rbuf, 40000) == sum, "RECV into faulting buffer: checksum mismatch");
	FX_ASSERT(npfd.nreq == 2 && npfd.last.npages == 10, "receive buffer: %d requests, last %u pages",
		  npfd.nreq, npfd.last.npages);

	/* 3 */
	fx_sync(sock, 3);
	expect = fx_alloc(REG);
	memset(expect, 0x5a, REG);
	FX_ASSERT(fx_sum(buf, REG) == fx_sum(expect, REG), "stalled WRITE: checksum mismatch");
	fx_sync(sock, 4);
	nic_close(ep.nic);
	fx_npfd_stop(&npfd);
	return 0;
}

static int side_a(int sock, void *arg)
{
	struct fx_ep ep = {0};
	struct fx_region reg[2];
	struct nic_qp *qp1, *qp2;
	struct nic_mr *mr, *mr2;
	char *src, *src2;
	struct nic_wc wc;
	__u64 sum;
	int i;

	fx_npfd_start(&npfd);
	fx_ep_open(&ep, NULL);
	src = fx_alloc(REG);
	src2 = fx_alloc(REG); /* never touched: the stand-in fills it with 0x5a */
	fx_fill(src, REG, 3);
	mr = nic_reg_mr(ep.pd, src, REG, NIC_ACCESS_LOCAL_WRITE);
	mr2 = nic_reg_mr(ep.pd, src2, REG, NIC_ACCESS_LOCAL_WRITE);
	FX_ASSERT(mr && mr2, "nic_reg_mr: %s", strerror(errno));
	mark_all(mr, src, REG);
	fx_npfd_add_mr(&npfd, mr2);
	npfd.fill = 0x5a;
	qp1 = fx_qp(&ep, sock);
	qp2 = fx_qp(&ep, sock);
	fx_recv(sock, reg, sizeof(reg));

	/* 1: one WR over 1024 missing remote pages */
	FX_ASSERT(!fx_post(qp1, NIC_WR_RDMA_WRITE, 1, src, REG, mr, reg[0].addr, reg[0].rkey),
		  "post");
	fx_expect_wc(ep.cq, 1, NIC_WC_SUCCESS);
	sum = fx_sum(src, REG);
	fx_sync(sock, 1);
	fx_send(sock, &sum, sizeof(sum));

	/* 2: SEND into a receive buffer that is not resident */
	fx_sync(sock, 2);
	FX_ASSERT(!fx_post(qp1, NIC_WR_SEND, 2, src + 5, 40000, mr, 0, 0), "post");
	fx_expect_wc(ep.cq, 2, NIC_WC_SUCCESS);
	sum = fx_sum(src + 5, 40000);
	fx_send(sock, &sum, sizeof(sum));

	/* 3: QP1 stalls on its own missing pages; QP2 keeps flowing */
	atomic_store(&npfd.hold_qpn, nic_qp_num(qp1));
	FX_ASSERT(!fx_post(qp1, NIC_WR_RDMA_WRITE, 3, src2, REG, mr2, reg[0].addr, reg[0].rkey),
		  "post");
	for (i = 0; i < 64; i++)
		FX_ASSERT(!fx_post(qp2, NIC_WR_RDMA_WRITE, 100 + i, src + i * 4096, 4096, mr,
				   reg[1].addr + i * 4096, reg[1].rkey),
			  "post");
	for (i = 0; i < 64; i++) {
		fx_wait_wc(ep.cq, &wc, 20000);
		FX_ASSERT(wc.qp_num == nic_qp_num(qp2) && wc.status == NIC_WC_SUCCESS,
			  "while QP1 stalls: completion on QP %u '%s' (wr %llu)", wc.qp_num,
			  nic_wc_status_str(wc.status), (unsigned long long)wc.wr_id);
	}
	FX_ASSERT(npfd.nreq == 1 && npfd.last.npages == NPG && (npfd.last.cookie >> 32) ==
			  nic_qp_num(qp1) && (npfd.last.access & NPF_ACCESS_READ),
		  "send side: %d requests, last %u pages", npfd.nreq, npfd.last.npages);
	FX_ASSERT(nic_poll_cq(ep.cq, 1, &wc) == 0, "QP1 completed while its fault was held");
	printf("3: QP2 completed 64 WRs while QP1 waited for its page response\n");
	atomic_store(&npfd.hold_qpn, 0); /* release the answer */
	fx_expect_wc(ep.cq, 3, NIC_WC_SUCCESS);
	fx_sync(sock, 3);
	fx_sync(sock, 4);
	nic_close(ep.nic);
	fx_npfd_stop(&npfd);
	return 0;
}

int main(void)
{
	int r = fx_pair(side_a, side_b, NULL, 25);

	if (!r)
		printf("PASS: one page request per WR, RNR retry, RECV faults, stalled QP isolation\n");
	return r;
}
