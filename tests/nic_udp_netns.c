// SPDX-License-Identifier: GPL-2.0
/*
 * Two NICs in two network namespaces joined by a veth pair, talking RC over
 * UDP: SEND/RECV, RDMA WRITE and RDMA READ with checksums, on a link that
 * also loses 1 packet in 50. The namespaces are removed at the end.
 */
#include "nic_fixture.h"

#define REG (2UL << 20)

static int side(int sock, void *arg)
{
	int me = fx_me;
	NIC_OPTS(nic_opts, o, .wire = NIC_WIRE_UDP, .udp_addr = fx_ns_addr[me],
		 .tx_drop_every = 50);
	int acc = NIC_ACCESS_LOCAL_WRITE | NIC_ACCESS_REMOTE_WRITE | NIC_ACCESS_REMOTE_READ;
	struct fx_ep ep = {0};
	struct fx_region reg, peer;
	struct nic_mr *mr, *rmr;
	char *buf, *rbuf;
	struct nic_wc wc;
	__u64 sum;

	fx_netns_enter(me);
	fx_ep_open(&ep, &o);
	buf = fx_alloc(REG);
	rbuf = fx_alloc(REG);
	fx_fill(buf, REG, 40 + me);
	memset(rbuf, 0, REG);
	mr = fx_reg_present(ep.pd, buf, REG, acc);
	rmr = fx_reg_present(ep.pd, rbuf, REG, acc);
	fx_qp(&ep, sock);
	reg = (struct fx_region){(uintptr_t)rbuf, REG, nic_mr_rkey(rmr)};
	fx_send(sock, &reg, sizeof(reg));
	fx_recv(sock, &peer, sizeof(peer));

	if (me == 0) {
		/* A: SEND 100000 bytes, then WRITE 1 MiB, then READ 1 MiB of B's buf */
		fx_sync(sock, 1);
		FX_ASSERT(!fx_post(ep.qp, NIC_WR_SEND, 1, buf, 100000, mr, 0, 0), "post");
		fx_expect_wc(ep.cq, 1, NIC_WC_SUCCESS);
		sum = fx_sum(buf, 100000);
		fx_send(sock, &sum, sizeof(sum));
		fx_sync(sock, 4); /* B checked the SEND: the WRITE lands over it */
		FX_ASSERT(!fx_post(ep.qp, NIC_WR_RDMA_WRITE, 2, buf, REG / 2, mr, peer.addr + 4096,
				   peer.rkey),
			  "post");
		fx_expect_wc(ep.cq, 2, NIC_WC_SUCCESS);
		sum = fx_sum(buf, REG / 2);
		fx_send(sock, &sum, sizeof(sum));
		fx_sync(sock, 2);
		/* B copied its own pattern into its rbuf: read it back */
		FX_ASSERT(!fx_post(ep.qp, NIC_WR_RDMA_READ, 3, rbuf, REG / 2, rmr, peer.addr,
				   peer.rkey),
			  "post");
		fx_expect_wc(ep.cq, 3, NIC_WC_SUCCESS);
		fx_recv(sock, &sum, sizeof(sum));
		FX_ASSERT(fx_sum(rbuf, REG / 2) == sum, "READ over UDP: checksum mismatch");
		fx_print_stats("A", ep.nic);
	} else {
		__u64 got;

		fx_post_recv(ep.qp, 9, rbuf, REG, rmr);
		fx_sync(sock, 1);
		fx_wait_wc(ep.cq, &wc, 20000);
		FX_ASSERT(wc.status == NIC_WC_SUCCESS && wc.byte_len == 100000, "RECV '%s' %u",
			  nic_wc_status_str(wc.status), wc.byte_len);
		fx_recv(sock, &got, sizeof(got));
		FX_ASSERT(fx_sum(rbuf, 100000) == got, "SEND over UDP: checksum mismatch");
		fx_sync(sock, 4);
		fx_recv(sock, &got, sizeof(got));
		FX_ASSERT(fx_sum(rbuf + 4096, REG / 2) == got, "WRITE over UDP: checksum mismatch");
		memcpy(rbuf, buf, REG / 2);
		fx_sync(sock, 2);
		sum = fx_sum(buf, REG / 2);
		fx_send(sock, &sum, sizeof(sum));
	}
	fx_sync(sock, 3);
	nic_close(ep.nic);
	return 0;
}

int main(void)
{
	int r;

	fx_netns_setup();
	r = fx_pair(side, side, NULL, 25);
	if (!r)
		printf("PASS: SEND/RECV, WRITE, READ over UDP between two network namespaces\n");
	return r;
}
