// SPDX-License-Identifier: GPL-2.0
/*
 * Keys and bounds, as hardware checks them: a bad rkey or an out-of-bounds
 * RDMA READ complete with REM_ACCESS_ERR, a bad lkey with LOC_PROT_ERR, and
 * the WRs behind them are flushed. A region deregistered while a stream of
 * WRITEs targets it ends in an error completion, and nothing crashes.
 */
#include "nic_fixture.h"

#define REG (1UL << 20)

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
	struct fx_region reg;
	struct nic_mr *mr;
	char *buf;
	int i;

	fx_ep_open(&ep, NULL);
	buf = fx_alloc(REG);
	memset(buf, 0, REG);
	mr = nic_reg_mr(ep.pd, buf, REG, acc);
	FX_ASSERT(mr, "nic_reg_mr: %s", strerror(errno));
	mark_all(mr, buf, REG);
	for (i = 0; i < 4; i++)
		fx_qp(&ep, sock);
	reg = (struct fx_region){(uintptr_t)buf, REG, nic_mr_rkey(mr)};
	fx_send(sock, &reg, sizeof(reg));
	fx_sync(sock, 1);	/* A streams WRITEs on its 4th QP */
	fx_sync(sock, 2);
	usleep(2000);
	FX_ASSERT(!nic_dereg_mr(mr), "nic_dereg_mr");
	munmap(buf, REG); /* gone for good: a DMA now would crash us */
	fx_sync(sock, 3);
	nic_close(ep.nic);
	return 0;
}

static int side_a(int sock, void *arg)
{
	struct fx_ep ep = {0};
	struct fx_region reg;
	struct nic_qp *qp[4];
	struct nic_mr *mr;
	struct nic_wc wc;
	char *src;
	int i, n = 0, errs = 0;

	fx_ep_open(&ep, NULL);
	src = fx_alloc(REG);
	fx_fill(src, REG, 1);
	mr = nic_reg_mr(ep.pd, src, REG, NIC_ACCESS_LOCAL_WRITE);
	FX_ASSERT(mr, "nic_reg_mr: %s", strerror(errno));
	mark_all(mr, src, REG);
	for (i = 0; i < 4; i++)
		qp[i] = fx_qp(&ep, sock);
	fx_recv(sock, &reg, sizeof(reg));

	/* bad rkey; the next WR on that QP is flushed */
	FX_ASSERT(!fx_post(qp[0], NIC_WR_RDMA_WRITE, 1, src, 4096, mr, reg.addr, reg.rkey ^ 0x80),
		  "post");
	FX_ASSERT(!fx_post(qp[0], NIC_WR_RDMA_WRITE, 2, src, 4096, mr, reg.addr, reg.rkey), "post");
	fx_expect_wc(ep.cq, 1, NIC_WC_REM_ACCESS_ERR);
	fx_expect_wc(ep.cq, 2, NIC_WC_WR_FLUSH_ERR);
	/* READ one byte past the end */
	FX_ASSERT(!fx_post(qp[1], NIC_WR_RDMA_READ, 3, src, 4096, mr, reg.addr + REG - 4095,
			   reg.rkey),
		  "post");
	fx_expect_wc(ep.cq, 3, NIC_WC_REM_ACCESS_ERR);
	/* bad lkey */
	{
		struct nic_sge sge = {(uintptr_t)src, 64, nic_mr_lkey(mr) + 0x100};
		struct nic_send_wr wr = {.wr_id = 4, .sg_list = &sge, .num_sge = 1,
					 .opcode = NIC_WR_RDMA_WRITE,
					 .remote_addr = reg.addr, .rkey = reg.rkey};

		FX_ASSERT(!nic_post_send(qp[2], &wr, NULL), "post");
		fx_expect_wc(ep.cq, 4, NIC_WC_LOC_PROT_ERR);
	}
	printf("bad rkey, out-of-bounds READ, bad lkey: error completions as expected\n");

	/* deregistration under a stream of WRITEs */
	fx_sync(sock, 1);
	for (i = 0; i < 200; i++)
		FX_ASSERT(!fx_post(qp[3], NIC_WR_RDMA_WRITE, 1000 + i, src, REG, mr, reg.addr,
				   reg.rkey),
			  "post");
	fx_sync(sock, 2);
	while (n < 200) {
		fx_wait_wc(ep.cq, &wc, 20000);
		FX_ASSERT(wc.wr_id == 1000U + n, "completion out of order");
		if (wc.status != NIC_WC_SUCCESS) {
			FX_ASSERT(errs || wc.status == NIC_WC_REM_ACCESS_ERR,
				  "first error after dereg: '%s'", nic_wc_status_str(wc.status));
			FX_ASSERT(!errs || wc.status == NIC_WC_WR_FLUSH_ERR, "then '%s'",
				  nic_wc_status_str(wc.status));
			errs++;
		}
		n++;
	}
	FX_ASSERT(errs > 0, "all 200 WRITEs succeeded although the region went away");
	printf("dereg mid-stream: %d WRs completed, then REM_ACCESS_ERR and %d flushed\n",
	       200 - errs, errs - 1);
	fx_sync(sock, 3);
	nic_close(ep.nic);
	return 0;
}

int main(void)
{
	int r = fx_pair(side_a, side_b, NULL, 25);

	if (!r)
		printf("PASS: access errors and deregistration mid-transfer\n");
	return r;
}
