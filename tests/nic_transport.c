// SPDX-License-Identifier: GPL-2.0
/*
 * Software RNIC over shared memory, two processes: SEND/RECV (one and
 * several SGEs, multi-packet), RDMA WRITE (signaled and unsignaled), RDMA
 * READ, every payload checked by checksum. Run twice: on a clean link and
 * on a link that drops every 13th packet (retransmission must recover).
 */
#include "nic_fixture.h"

#define REG (4UL << 20)
#define RB (16UL << 10)

struct msg_sum {
	__u64 len, sum;
};

static __u32 drop_every;

static void mark_all(struct nic_mr *mr, void *buf, size_t len)
{
	struct fx_iopt t;

	fx_iopt_map(&t, mr);
	nic_test_mark_present(&t, (uintptr_t)buf, len);
}

static int side_b(int sock, void *arg)
{
	NIC_OPTS(nic_opts, o, .tx_drop_every = drop_every);
	int acc = NIC_ACCESS_LOCAL_WRITE | NIC_ACCESS_REMOTE_WRITE | NIC_ACCESS_REMOTE_READ;
	struct fx_ep ep = {0};
	struct fx_region reg;
	struct nic_mr *mr, *rmr;
	char *buf, *rbuf, *expect;
	struct nic_wc wc;
	int i;

	fx_ep_open(&ep, &o);
	buf = fx_alloc(REG);
	rbuf = fx_alloc(3 * RB);
	memset(buf, 0, REG);
	memset(rbuf, 0, 3 * RB);
	mr = nic_reg_mr(ep.pd, buf, REG, acc);
	rmr = nic_reg_mr(ep.pd, rbuf, 3 * RB, NIC_ACCESS_LOCAL_WRITE);
	FX_ASSERT(mr && rmr, "nic_reg_mr: %s", strerror(errno));
	mark_all(mr, buf, REG);
	mark_all(rmr, rbuf, 3 * RB);
	fx_qp(&ep, sock);
	for (i = 0; i < 3; i++)
		fx_post_recv(ep.qp, 100 + i, rbuf + i * RB, RB, rmr);
	reg = (struct fx_region){(uintptr_t)buf, REG, nic_mr_rkey(mr)};
	fx_send(sock, &reg, sizeof(reg));
	fx_sync(sock, 1);

	for (i = 0; i < 3; i++) {
		struct msg_sum m;

		fx_wait_wc(ep.cq, &wc, 20000);
		FX_ASSERT(wc.status == NIC_WC_SUCCESS && wc.opcode == NIC_WC_RECV &&
				  wc.wr_id == 100U + i,
			  "recv %d: wr_id %llu '%s'", i, (unsigned long long)wc.wr_id,
			  nic_wc_status_str(wc.status));
		fx_recv(sock, &m, sizeof(m));
		FX_ASSERT(wc.byte_len == m.len, "recv %d: %u bytes, sent %llu", i, wc.byte_len,
			  (unsigned long long)m.len);
		FX_ASSERT(fx_sum(rbuf + i * RB, m.len) == m.sum, "recv %d: checksum mismatch", i);
	}

	fx_sync(sock, 2);
	expect = fx_alloc(REG);
	fx_fill(expect, REG, 7);
	FX_ASSERT(fx_sum(buf, REG) == fx_sum(expect, REG), "RDMA WRITE: checksum mismatch");

	fx_fill(buf, REG, 9);
	fx_sync(sock, 3);
	fx_sync(sock, 4);
	nic_close(ep.nic);
	return 0;
}

static int side_a(int sock, void *arg)
{
	NIC_OPTS(nic_opts, o, .tx_drop_every = drop_every);
	struct fx_ep ep = {0};
	struct fx_region reg;
	struct nic_mr *mr;
	struct nic_stats st;
	char *src, *dst;
	struct nic_wc wc;
	__u32 lens[3] = {1, 4096, 10000};
	int i;

	fx_ep_open(&ep, &o);
	src = fx_alloc(REG);
	dst = fx_alloc(REG);
	fx_fill(src, REG, 7);
	memset(dst, 0, REG);
	mr = nic_reg_mr(ep.pd, src, REG, NIC_ACCESS_LOCAL_WRITE);
	FX_ASSERT(mr, "nic_reg_mr: %s", strerror(errno));
	mark_all(mr, src, REG);
	struct nic_mr *dmr = nic_reg_mr(ep.pd, dst, REG, NIC_ACCESS_LOCAL_WRITE);

	FX_ASSERT(dmr, "nic_reg_mr: %s", strerror(errno));
	mark_all(dmr, dst, REG);
	fx_qp(&ep, sock);
	fx_recv(sock, &reg, sizeof(reg));
	fx_sync(sock, 1);

	/* SENDs; the third gathers three SGEs from scattered places */
	for (i = 0; i < 3; i++) {
		struct msg_sum m = {lens[i], 0};

		if (i < 2) {
			FX_ASSERT(!fx_post(ep.qp, NIC_WR_SEND, i, src + 12345 * i, lens[i], mr, 0,
					   0),
				  "post send");
			m.sum = fx_sum(src + 12345 * i, lens[i]);
		} else {
			struct nic_sge sge[3] = {
				{(uintptr_t)src + 100, 3000, nic_mr_lkey(mr)},
				{(uintptr_t)src + 2 * PG - 7, 5000, nic_mr_lkey(mr)},
				{(uintptr_t)src + 3 * PG * 64, 2000, nic_mr_lkey(mr)},
			};
			struct nic_send_wr wr = {.wr_id = i,
						 .sg_list = sge,
						 .num_sge = 3,
						 .opcode = NIC_WR_SEND,
						 .send_flags = NIC_SEND_SIGNALED};
			char *gather = malloc(10000);

			memcpy(gather, src + 100, 3000);
			memcpy(gather + 3000, src + 2 * PG - 7, 5000);
			memcpy(gather + 8000, src + 3 * PG * 64, 2000);
			m.sum = fx_sum(gather, 10000);
			free(gather);
			FX_ASSERT(!nic_post_send(ep.qp, &wr, NULL), "post send (3 SGEs)");
		}
		fx_expect_wc(ep.cq, i, NIC_WC_SUCCESS);
		fx_send(sock, &m, sizeof(m));
	}

	/* WRITE the region in four 1 MiB WRs: only the last one signaled */
	for (i = 0; i < 4; i++) {
		struct nic_sge sge = {(uintptr_t)src + i * (REG / 4), REG / 4, nic_mr_lkey(mr)};
		struct nic_send_wr wr = {.wr_id = 10 + i,
					 .sg_list = &sge,
					 .num_sge = 1,
					 .opcode = NIC_WR_RDMA_WRITE,
					 .send_flags = i == 3 ? NIC_SEND_SIGNALED : 0,
					 .remote_addr = reg.addr + i * (REG / 4),
					 .rkey = reg.rkey};

		FX_ASSERT(!nic_post_send(ep.qp, &wr, NULL), "post write");
	}
	fx_expect_wc(ep.cq, 13, NIC_WC_SUCCESS);
	FX_ASSERT(nic_poll_cq(ep.cq, 1, &wc) == 0, "an unsignaled WRITE completed");
	fx_sync(sock, 2);

	/* READ it back after B rewrote it */
	fx_sync(sock, 3);
	FX_ASSERT(!fx_post(ep.qp, NIC_WR_RDMA_READ, 20, dst, REG / 2, dmr, reg.addr, reg.rkey),
		  "post read");
	FX_ASSERT(!fx_post(ep.qp, NIC_WR_RDMA_READ, 21, dst + REG / 2, REG / 2, dmr,
			   reg.addr + REG / 2, reg.rkey),
		  "post read");
	fx_expect_wc(ep.cq, 20, NIC_WC_SUCCESS);
	fx_expect_wc(ep.cq, 21, NIC_WC_SUCCESS);
	fx_fill(src, REG, 9);
	FX_ASSERT(fx_sum(dst, REG) == fx_sum(src, REG), "RDMA READ: checksum mismatch");
	fx_sync(sock, 4);

	nic_query_stats(ep.nic, &st, sizeof(st));
	printf("drop every %u packets: ", drop_every);
	fx_print_stats("A", ep.nic);
	if (drop_every)
		FX_ASSERT(st.retransmits > 0, "a lossy link needed no retransmission?");
	nic_close(ep.nic);
	return 0;
}

int main(void)
{
	int r;

	r = fx_pair(side_a, side_b, NULL, 25);
	if (r)
		return r;
	drop_every = 13;
	r = fx_pair(side_a, side_b, NULL, 25);
	if (!r)
		printf("PASS: SEND/RECV, WRITE, READ over shm (clean and lossy link)\n");
	return r;
}
