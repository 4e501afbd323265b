// SPDX-License-Identifier: GPL-2.0
/*
 * SEND/RECV into unpinned receive buffers, through the real npfd.
 *
 *  B posts NBUF receive buffers of 64 KiB in a never-touched npf region:
 *    no page of them exists when the SENDs arrive. B's NIC raises a page
 *    request per buffer it lands in (the buffer from that offset) and
 *    answers RNR NAK; npfd zero-fills and maps; A's NIC resends.
 *  A SENDs NBUF messages of assorted lengths (1 byte .. 64 KiB, some with
 *    three SGEs) from its own npf region, which it filled with the CPU.
 *  B checks each completion (order, length) and each message's checksum.
 */
#include "nic_fixture.h"

#define NBUF 64
#define BUFSZ (64UL << 10)
#define SRC (4UL << 20)

static __u32 msg_len(int i)
{
	return i == 0 ? 1 : i == 1 ? BUFSZ : 1 + (__u32)((i * 40009UL) % BUFSZ);
}

static int side_b(int sock, void *arg)
{
	struct npf_client *c = fx_npf_connect();
	struct fx_ep ep = {0};
	struct nic_mr *mr;
	struct nic_wc wc;
	char *rb;
	__u64 sums[NBUF];
	int region, dev, i;

	fx_ep_open(&ep, NULL);
	rb = fx_alloc(NBUF * BUFSZ); /* never touched */
	region = fx_npf_register(c, rb, NBUF * BUFSZ, NULL);
	mr = fx_npf_mr(c, &ep, region, rb, NBUF * BUFSZ, NIC_ACCESS_LOCAL_WRITE, &dev);
	fx_qp(&ep, sock);
	for (i = 0; i < NBUF; i++)
		fx_post_recv(ep.qp, 500 + i, rb + i * BUFSZ, BUFSZ, mr);
	fx_sync(sock, 1);
	for (i = 0; i < NBUF; i++) {
		fx_wait_wc(ep.cq, &wc, 20000);
		FX_ASSERT(wc.status == NIC_WC_SUCCESS && wc.opcode == NIC_WC_RECV &&
				  wc.wr_id == 500U + i && wc.byte_len == msg_len(i),
			  "RECV %d: wr_id %llu '%s', %u bytes (sent %u)", i,
			  (unsigned long long)wc.wr_id, nic_wc_status_str(wc.status), wc.byte_len,
			  msg_len(i));
	}
	fx_recv(sock, sums, sizeof(sums));
	for (i = 0; i < NBUF; i++)
		FX_ASSERT(fx_sum(rb + i * BUFSZ, msg_len(i)) == sums[i],
			  "RECV %d (%u bytes): checksum mismatch", i, msg_len(i));
	printf("B: %d messages (%u .. %lu bytes) received into never-touched buffers, checksums match\n",
	       NBUF, msg_len(0), BUFSZ);
	fx_expect_page_requests(c, "B (receive buffers)", region, dev);
	fx_print_stats("B NIC", ep.nic);
	fx_sync(sock, 2);
	fx_npf_close(c, &ep);
	return 0;
}

static int side_a(int sock, void *arg)
{
	struct npf_client *c = fx_npf_connect();
	struct fx_ep ep = {0};
	struct nic_mr *mr;
	char *src, *gather;
	__u64 sums[NBUF];
	int region, i;

	fx_ep_open(&ep, NULL);
	src = fx_alloc(SRC);
	region = fx_npf_register(c, src, SRC, NULL);
	fx_fill(src, SRC, 21);
	mr = fx_npf_mr(c, &ep, region, src, SRC, NIC_ACCESS_LOCAL_WRITE, NULL);
	fx_qp(&ep, sock);
	gather = malloc(BUFSZ);
	FX_ASSERT(gather, "malloc");
	fx_sync(sock, 1);
	for (i = 0; i < NBUF; i++) {
		__u32 len = msg_len(i);
		char *p = src + i * 50021UL;

		if (i % 4 == 3 && len >= 3) {
			/* three SGEs from scattered places */
			__u32 l0 = len / 3, l1 = len / 3, l2 = len - l0 - l1;
			char *q1 = src + SRC / 2 + i * 7UL, *q2 = src + SRC - l2 - i;
			struct nic_sge sge[3] = {{(uintptr_t)p, l0, nic_mr_lkey(mr)},
						 {(uintptr_t)q1, l1, nic_mr_lkey(mr)},
						 {(uintptr_t)q2, l2, nic_mr_lkey(mr)}};
			struct nic_send_wr wr = {.wr_id = i,
						 .sg_list = sge,
						 .num_sge = 3,
						 .opcode = NIC_WR_SEND,
						 .send_flags = NIC_SEND_SIGNALED};

			memcpy(gather, p, l0);
			memcpy(gather + l0, q1, l1);
			memcpy(gather + l0 + l1, q2, l2);
			sums[i] = fx_sum(gather, len);
			FX_ASSERT(!nic_post_send(ep.qp, &wr, NULL), "post SEND %d", i);
		} else {
			sums[i] = fx_sum(p, len);
			FX_ASSERT(!fx_post(ep.qp, NIC_WR_SEND, i, p, len, mr, 0, 0), "post SEND %d",
				  i);
		}
	}
	for (i = 0; i < NBUF; i++)
		fx_expect_wc(ep.cq, i, NIC_WC_SUCCESS);
	fx_send(sock, sums, sizeof(sums));
	fx_sync(sock, 2);
	free(gather);
	fx_npf_close(c, &ep);
	return 0;
}

int main(void)
{
	int r = fx_pair_npfd(side_a, side_b, NULL, 60);

	if (!r)
		printf("PASS: SEND/RECV into unpinned, never-touched receive buffers, through npfd\n");
	return r;
}
