// SPDX-License-Identifier: GPL-2.0
/*
 * The UDP wire takes packets from its peer's address and port only. Two
 * NICs talk RC over UDP on loopback; a third socket (any host could send
 * the same) sends B's QP a well-formed RDMA WRITE into B's buffer, with
 * A's QP number, the PSN B expects next and B's rkey: B must drop it
 * (counted), leave the buffer's bytes alone, and its PSN where it was, so
 * that A's own WRITE after it lands. The socket was not connected, and
 * the WRITE used to land: any host could write to any registered buffer
 * whose rkey it guessed (8 bits of salt), or push the PSN on so that the
 * peer's next WRITE was taken for a duplicate and dropped.
 */
#include <arpa/inet.h>
#include "nic_fixture.h"
#include "nic_internal.h"

#define REG (64UL << 10)
#define LEN 64

struct info {
	struct nic_qp_info qp;
	struct fx_region reg;
};

static int side(int sock, void *arg)
{
	int me = fx_me;
	NIC_OPTS(nic_opts, o, .wire = NIC_WIRE_UDP);
	int acc = NIC_ACCESS_LOCAL_WRITE | NIC_ACCESS_REMOTE_WRITE | NIC_ACCESS_REMOTE_READ;
	struct fx_ep ep = {0};
	struct info mine, peer;
	struct nic_mr *mr;
	char *buf;

	(void)arg;
	fx_ep_open(&ep, &o);
	buf = fx_alloc(REG);
	memset(buf, me ? 0 : 0x5a, REG);
	mr = fx_reg_present(ep.pd, buf, REG, acc);
	fx_qp(&ep, sock);
	FX_ASSERT(!nic_qp_local_info(ep.qp, &mine.qp), "nic_qp_local_info");
	mine.reg = (struct fx_region){(uintptr_t)buf, REG, nic_mr_rkey(mr)};
	fx_send(sock, &mine, sizeof(mine));
	fx_recv(sock, &peer, sizeof(peer));
	if (me == 1) {
		/* B: the spoofed WRITE, from a socket that is not A's */
		char pkt_buf[sizeof(struct nic_pkt) + LEN];
		struct nic_pkt *pkt = (struct nic_pkt *)pkt_buf;
		struct sockaddr_in to = {.sin_family = AF_INET,
					 .sin_addr.s_addr = mine.qp.udp_addr,
					 .sin_port = mine.qp.udp_port};
		struct nic_stats s0, s1;
		int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		size_t bad = 0;

		memset(pkt_buf, 0, sizeof(pkt_buf));
		*pkt = (struct nic_pkt){.magic = NIC_PKT_MAGIC,
					.version = NIC_PKT_VERSION,
					.op = PKT_WRITE,
					.dst_qpn = mine.qp.qpn,
					.src_qpn = peer.qp.qpn,
					.psn = peer.qp.psn,
					.len = LEN,
					.rkey = mine.reg.rkey,
					.vaddr = mine.reg.addr,
					.msg_len = LEN};
		memset(pkt->data, 0xee, LEN);
		FX_ASSERT(!nic_query_stats(ep.nic, &s0, sizeof(s0)), "stats");
		FX_ASSERT(fd >= 0 && sendto(fd, pkt_buf, sizeof(pkt_buf), 0, (struct sockaddr *)&to,
					    sizeof(to)) == (ssize_t)sizeof(pkt_buf),
			  "send the spoofed WRITE: %s", strerror(errno));
		close(fd);
		/*
		 * Queued on loopback before A's WRITE (sent once the sync is
		 * in): B has taken both once A's completes.
		 */
		fx_sync(sock, 1);
		fx_sync(sock, 2);
		FX_ASSERT(!nic_query_stats(ep.nic, &s1, sizeof(s1)), "stats");
		for (size_t i = 0; i < LEN; i++)
			bad += buf[i] != 0;
		printf("B: spoofed WRITE from another port: %llu packets dropped, %zu of %d bytes written\n",
		       (unsigned long long)(s1.pkts_dropped - s0.pkts_dropped), bad, LEN);
		FX_ASSERT(!bad, "B took a WRITE from a socket that is not its peer's");
		FX_ASSERT(s1.pkts_dropped > s0.pkts_dropped,
			  "the spoofed WRITE was not counted dropped");
		bad = 0;
		for (size_t i = 0; i < LEN; i++)
			bad += buf[4096 + i] != 0x5a;
		FX_ASSERT(
			!bad,
			"A's WRITE after the spoofed one: %zu of %d bytes missing (taken for a duplicate)",
			bad, LEN);
		printf("B: A's WRITE after it landed\n");
	} else {
		fx_sync(sock, 1);
		FX_ASSERT(!fx_post(ep.qp, NIC_WR_RDMA_WRITE, 1, buf, LEN, mr, peer.reg.addr + 4096,
				   peer.reg.rkey),
			  "post");
		fx_expect_wc(ep.cq, 1, NIC_WC_SUCCESS);
		fx_sync(sock, 2);
	}
	fx_sync(sock, 3);
	nic_close(ep.nic);
	return 0;
}

int main(void)
{
	return fx_pair_same(side, 25, "a WRITE from another socket was dropped, the peer's landed");
}
