// SPDX-License-Identifier: GPL-2.0
/*
 * A shared-memory ring's geometry is what was checked when it was mapped,
 * not what its header says later: each end maps the other's receive ring
 * read-write, and A writes over the header of B's (0 slots, 1 GiB each)
 * once connected. B used to index its ring by those words (a division by
 * zero, or a slot 1 GiB past the mapping: its engine died); now a SEND of
 * 64 KiB and a WRITE from A still land, checksums checked.
 */
#include "nic_fixture.h"
#include "nic_internal.h"

#define REG (1UL << 20)
#define LEN (64UL << 10)

static int side(int sock, void *arg)
{
	int me = fx_me;
	int acc = NIC_ACCESS_LOCAL_WRITE | NIC_ACCESS_REMOTE_WRITE | NIC_ACCESS_REMOTE_READ;
	struct fx_ep ep = {0};
	struct fx_region mine, peer;
	struct nic_mr *mr;
	struct nic_wc wc;
	struct nic_qp *qp;
	char *buf;
	__u64 sum;

	(void)arg;
	fx_ep_open(&ep, NULL);
	buf = fx_alloc(REG);
	fx_fill(buf, REG, 7 + me);
	mr = fx_reg_present(ep.pd, buf, REG, acc);
	qp = fx_qp(&ep, sock);
	mine = (struct fx_region){(uintptr_t)buf, REG, nic_mr_rkey(mr)};
	fx_send(sock, &mine, sizeof(mine));
	fx_recv(sock, &peer, sizeof(peer));
	if (me == 0) {
		/* A: B's receive ring is A's transmit ring */
		__atomic_store_n(&qp->wire.tx->nslots, 0, __ATOMIC_RELEASE);
		__atomic_store_n(&qp->wire.tx->slot_size, 1U << 30, __ATOMIC_RELEASE);
		fx_sync(sock, 1);
		FX_ASSERT(!fx_post(qp, NIC_WR_SEND, 1, buf, LEN, mr, 0, 0), "post");
		fx_expect_wc(ep.cq, 1, NIC_WC_SUCCESS);
		FX_ASSERT(!fx_post(qp, NIC_WR_RDMA_WRITE, 2, buf + LEN, LEN, mr,
				   peer.addr + 2 * LEN, peer.rkey),
			  "post");
		fx_expect_wc(ep.cq, 2, NIC_WC_SUCCESS);
		sum = fx_sum(buf, 2 * LEN);
		fx_send(sock, &sum, sizeof(sum));
	} else {
		char *rbuf = fx_alloc(LEN);
		struct nic_mr *rmr = fx_reg_present(ep.pd, rbuf, LEN, acc);
		__u64 got;

		fx_post_recv(qp, 9, rbuf, LEN, rmr);
		fx_sync(sock, 1);
		fx_wait_wc(ep.cq, &wc, 20000);
		FX_ASSERT(wc.status == NIC_WC_SUCCESS && wc.byte_len == LEN, "RECV '%s' %u",
			  nic_wc_status_str(wc.status), wc.byte_len);
		fx_recv(sock, &got, sizeof(got));
		memcpy(buf + LEN, buf + 2 * LEN, LEN); /* next to the SEND's bytes */
		memcpy(buf, rbuf, LEN);
		FX_ASSERT(
			fx_sum(buf, 2 * LEN) == got,
			"SEND and WRITE after the ring's header was written over: checksum mismatch");
		printf("B: a SEND and a WRITE of 64 KiB landed through a ring whose header says 0 slots of 1 GiB\n");
	}
	fx_sync(sock, 3);
	nic_close(ep.nic);
	return 0;
}

int main(void)
{
	return fx_pair_same(side, 25, "the rings' geometry is what was checked at connect");
}
