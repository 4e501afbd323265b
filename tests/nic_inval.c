// SPDX-License-Identifier: GPL-2.0
/*
 * Invalidation racing DMA (stress). B's region is written by a stream of
 * RDMA WRITEs from A while B's stand-in npfd keeps invalidating random
 * pages: clear + version bump, post, wait for the NIC's ack, then make the
 * page inaccessible (PROT_NONE) for a while. A DMA landing after the ack
 * would hit the protected page and kill B with SIGSEGV. Pages come back
 * through the fault path (page request, resolve, response).
 */
#include <poll.h>
#include "nic_fixture.h"

#define REG (256UL << 10)
#define NPG (REG / PG)
#define WR_LEN (16UL << 10)
#define NWR 3000

static struct fx_npfd npfd;

static int side_b(int sock, void *arg)
{
	int acc = NIC_ACCESS_LOCAL_WRITE | NIC_ACCESS_REMOTE_WRITE;
	struct fx_ep ep = {0};
	struct fx_region reg;
	struct nic_mr *mr;
	struct nic_stats st;
	struct pollfd pfd = {.fd = sock, .events = POLLIN};
	struct fx_iopt *t;
	char *buf;
	__u64 seq = 0, sum;
	unsigned int rnd = 1;
	char c;

	fx_npfd_start(&npfd);
	fx_ep_open(&ep, NULL);
	buf = fx_alloc(REG);
	mr = nic_reg_mr(ep.pd, buf, REG, acc);
	FX_ASSERT(mr, "nic_reg_mr: %s", strerror(errno));
	fx_npfd_add_mr(&npfd, mr);
	t = &npfd.mr[0];
	fx_qp(&ep, sock);
	reg = (struct fx_region){(uintptr_t)buf, REG, nic_mr_rkey(mr)};
	fx_send(sock, &reg, sizeof(reg));

	/* evict until A says it is done */
	while (poll(&pfd, 1, 0) == 0) {
		__u64 first = rand_r(&rnd) % NPG, n = 1 + rand_r(&rnd) % 4, i;
		char *p = buf + first * PG;

		if (first + n > NPG)
			n = NPG - first;
		pthread_mutex_lock(&npfd.lock);
		fx_invalidate(t, first, n, ++seq);
		FX_ASSERT(!mprotect(p, n * PG, PROT_NONE), "mprotect: %s", strerror(errno));
		for (i = 0; i < 200; i++)
			sched_yield(); /* the NIC keeps running, and must not touch it */
		FX_ASSERT(!mprotect(p, n * PG, PROT_READ | PROT_WRITE), "mprotect: %s",
			  strerror(errno));
		pthread_mutex_unlock(&npfd.lock);
	}
	fx_recv(sock, &c, 1);
	fx_send(sock, &c, 1);
	fx_sync(sock, 1);
	fx_recv(sock, &sum, sizeof(sum));
	FX_ASSERT(fx_sum(buf, REG) == sum, "final WRITE: checksum mismatch");
	nic_query_stats(ep.nic, &st, sizeof(st));
	FX_ASSERT(st.invalidations == seq, "%llu invalidations acked, %llu posted",
		  (unsigned long long)st.invalidations, (unsigned long long)seq);
	printf("B: %llu invalidations acked during the stream, %d page requests, %llu RNR NAKs\n",
	       (unsigned long long)seq, npfd.nreq, (unsigned long long)st.rnr_nak_tx);
	FX_ASSERT(seq > 0 && npfd.nreq > 1, "the race never happened");
	fx_sync(sock, 2);
	nic_close(ep.nic);
	fx_npfd_stop(&npfd);
	return 0;
}

static int side_a(int sock, void *arg)
{
	struct fx_ep ep = {0};
	struct fx_region reg;
	struct nic_mr *mr;
	struct nic_wc wc;
	char *src;
	__u64 sum;
	int i, done = 0;
	char one = 1;

	fx_ep_open(&ep, NULL);
	src = fx_alloc(REG);
	fx_fill(src, REG, 11);
	mr = nic_reg_mr(ep.pd, src, REG, NIC_ACCESS_LOCAL_WRITE);
	FX_ASSERT(mr, "nic_reg_mr: %s", strerror(errno));
	{
		struct fx_iopt t;

		fx_iopt_map(&t, mr);
		nic_test_mark_present(&t, (uintptr_t)src, REG);
	}
	fx_qp(&ep, sock);
	fx_recv(sock, &reg, sizeof(reg));
	for (i = 0; i < NWR || done < NWR;) {
		if (i < NWR && i - done < 512) {
			__u64 off = (i * 7919UL * PG) % (REG - WR_LEN);

			if (!fx_post(ep.qp, NIC_WR_RDMA_WRITE, i, src + off, WR_LEN, mr,
				     reg.addr + off, reg.rkey)) {
				i++;
				continue;
			}
		}
		fx_wait_wc(ep.cq, &wc, 20000);
		FX_ASSERT(wc.status == NIC_WC_SUCCESS, "WRITE %llu: '%s'",
			  (unsigned long long)wc.wr_id, nic_wc_status_str(wc.status));
		done++;
	}
	fx_send(sock, &one, 1);
	fx_recv(sock, &one, 1);
	fx_sync(sock, 1);
	fx_fill(src, REG, 12);
	FX_ASSERT(!fx_post(ep.qp, NIC_WR_RDMA_WRITE, 99999, src, REG, mr, reg.addr, reg.rkey), "post");
	fx_expect_wc(ep.cq, 99999, NIC_WC_SUCCESS);
	sum = fx_sum(src, REG);
	fx_send(sock, &sum, sizeof(sum));
	fx_sync(sock, 2);
	nic_close(ep.nic);
	return 0;
}

int main(void)
{
	int r = fx_pair(side_a, side_b, NULL, 28);

	if (!r)
		printf("PASS: no DMA landed in a page after its invalidation was acknowledged\n");
	return r;
}
